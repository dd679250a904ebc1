#!/usr/bin/env bash
# The test suite (the README's test command runs setup first). Docker tests fail, not skip, when no
# engine is running: run `bash scripts/setup.sh --all` first. Runs in the environment setup made.
#
# With no arguments it runs everything in two lanes at once (TERMGYM_TEST_LANES=1: one after the
# other): lane A holds the benchmark, eval, install, integration, Ray and trainer tests (veRL and Ray
# launches, fresh-machine and wheel installs: long single-process stretches), lane B the rest. On a
# 2-core box the two lanes overlap each other's start-ups and waits (a CI run: see docs/benchmarks.md).
# With arguments it is plain pytest over them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
python -c "import pytest" 2>/dev/null || { echo "pytest is not installed here: run \`bash scripts/setup.sh --all\` first" >&2; exit 1; }
PYTEST=(python -m pytest -q -p no:cacheprovider --durations=15)
if [ "$#" != 0 ]; then
  exec "${PYTEST[@]}" "$@"
fi
# Harbor's agents on termgym sandboxes run under Harbor's own Python (>= 3.12), in the venv
# scripts/setup-harbor.sh made; under this Python those tests skip (harbor is not importable).
harbor_py=$(bash scripts/setup-harbor.sh)
echo "==> tests of Harbor's agents on termgym, under $harbor_py"
PYTHONPATH=$PWD "$harbor_py" -m pytest -q -p no:cacheprovider tests/agents_external/test_harbor_agents.py
# tests/benchmarks runs `python -m benchmarks --quick`, so the benchmarks cannot rot.
# In the order a one-lane run takes them (alphabetical): the veRL runs in tests/trainers leave this
# process's environment set for their jobs, and Ray clusters started after them in the same process
# lost their actors (a CI run).
LANE_A=(tests/benchmarks tests/evaluate tests/install tests/integrations tests/remote tests/trainers)
LANE_B=(tests)
for dir in "${LANE_A[@]}"; do LANE_B+=(--ignore "$dir"); done
if [ "${TERMGYM_TEST_LANES:-2}" = 1 ]; then
  echo "==> tests, one lane"
  exec "${PYTEST[@]}" tests
fi
log_a=$(mktemp -t termgym-lane-a.XXXXXX.log)
echo "==> tests in two lanes: lane B (${LANE_B[*]}) here, lane A (${LANE_A[*]}) into $log_a, printed when it ends"
started=$(date +%s)
"${PYTEST[@]}" "${LANE_A[@]}" >"$log_a" 2>&1 &
pid_a=$!
trap 'kill "$pid_a" 2>/dev/null || true' EXIT
rc_b=0
"${PYTEST[@]}" "${LANE_B[@]}" || rc_b=$?
echo "==> lane B ended (exit $rc_b) after $(( $(date +%s) - started )) s; waiting for lane A"
rc_a=0
wait "$pid_a" || rc_a=$?
trap - EXIT
echo "==> lane A (exit $rc_a) after $(( $(date +%s) - started )) s:"
cat "$log_a"
if [ "$rc_a" != 0 ] || [ "$rc_b" != 0 ]; then
  echo "==> tests failed: lane A exit $rc_a, lane B exit $rc_b" >&2
  exit 1
fi
echo "==> both lanes passed"
