#!/usr/bin/env bash
# The test suite (the README's test command runs setup first). Docker tests fail, not skip, when no
# engine is running: run `bash scripts/setup.sh --all` first. Runs in the environment setup made.
#
#   bash scripts/test.sh                 # everything, in two pytest processes side by side (below)
#   bash scripts/test.sh tests/core -x   # pytest's own arguments: one process, as given
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
python -c "import pytest" 2>/dev/null || { echo "pytest is not installed here: run \`bash scripts/setup.sh --all\` first" >&2; exit 1; }
if [ "$#" != 0 ]; then
  exec python -m pytest -q -p no:cacheprovider --durations=15 "$@"
fi

# Harbor's agents on termgym sandboxes run under Harbor's own Python (>= 3.12), in the venv
# scripts/setup-harbor.sh made; under this Python those tests skip (harbor is not importable).
harbor_py=$(bash scripts/setup-harbor.sh)
echo "==> tests of Harbor's agents on termgym, under $harbor_py"
PYTHONPATH=$PWD "$harbor_py" -m pytest -q -p no:cacheprovider tests/agents_external/test_harbor_agents.py

# Two pytest processes side by side: most tests keep one core busy at a time and the long ones wait on
# process start-up (Ray, veRL's workers, a fresh container installing the quick start), so a second
# process puts the second core of a 2-core machine to work. Every test that starts Ray (a local
# cluster, veRL's trainer) runs in the first, one after another: two Ray clusters on one machine could
# find each other through /tmp/ray. tests/benchmarks runs `python -m benchmarks --quick`, so the
# benchmarks cannot rot.
ray_group=(tests/trainers tests/remote tests/evaluate/test_ray.py tests/benchmarks/test_ray_step.py
           tests/benchmarks/test_ray_scaling.py tests/install/test_fresh_machine.py)
ignores=()
for path in "${ray_group[@]}"; do ignores+=("--ignore=$path"); done
work=$(mktemp -d -t termgym-tests.XXXXXX)
echo "==> the Ray, trainer and fresh-machine tests, beside the rest (their output: $work/ray-group.log, shown at the end)"
python -m pytest -q -p no:cacheprovider --durations=15 --basetemp="$work/tmp" "${ray_group[@]}" \
  > "$work/ray-group.log" 2>&1 &
ray_pid=$!
trap 'kill "$ray_pid" 2>/dev/null || true' INT TERM
echo "==> every other test"
rest=0
python -m pytest -q -p no:cacheprovider --durations=15 "${ignores[@]}" || rest=$?
ray=0
wait "$ray_pid" || ray=$?
echo "==> the Ray, trainer and fresh-machine tests (exit $ray)"
cat "$work/ray-group.log"
echo "==> exit: every other test $rest, the Ray, trainer and fresh-machine tests $ray"
[ "$rest" = 0 ] && [ "$ray" = 0 ]
