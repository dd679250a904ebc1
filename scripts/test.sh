#!/usr/bin/env bash
# The test suite (the README's test command runs setup first). Docker tests fail, not skip, when no
# engine is running: run `bash scripts/setup.sh --all` first. Runs in the environment setup made.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
python -c "import pytest" 2>/dev/null || { echo "pytest is not installed here: run \`bash scripts/setup.sh --all\` first" >&2; exit 1; }
if [ "$#" = 0 ]; then
  # Harbor's agents on termgym sandboxes run under Harbor's own Python (>= 3.12), in the venv
  # scripts/setup-harbor.sh made; under this Python those tests skip (harbor is not importable).
  harbor_py=$(bash scripts/setup-harbor.sh)
  echo "==> tests of Harbor's agents on termgym, under $harbor_py"
  PYTHONPATH=$PWD "$harbor_py" -m pytest -q -p no:cacheprovider tests/agents_external/test_harbor_agents.py
fi
# tests/benchmarks runs `python -m benchmarks --quick`, so the benchmarks cannot rot.
python -m pytest -q -p no:cacheprovider --durations=15 "$@"
