#!/usr/bin/env bash
# The test suite (the README's test command runs setup first). Docker tests fail, not skip, when no
# engine is running: run `bash scripts/setup.sh --all` first. Runs in the environment setup made.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
python -c "import pytest" 2>/dev/null || { echo "pytest is not installed here: run \`bash scripts/setup.sh --all\` first" >&2; exit 1; }
# tests/benchmarks runs `python -m benchmarks --quick`, so the benchmarks cannot rot.
python -m pytest -q -p no:cacheprovider --durations=15 "$@"
