#!/usr/bin/env bash
# Create (once) the virtual environment with Harbor 0.26 that the Harbor parity tests run against.
# Harbor needs Python >= 3.12, which termgym does not; it lives in its own venv, never in termgym's.
#   bash scripts/setup-harbor.sh            # venv at $TERMGYM_HARBOR_VENV (default ~/.cache/termgym/harbor-venv)
# Idempotent: an existing venv with harbor 0.26.x is left alone. Prints the venv's python on success.
set -euo pipefail
VENV="${TERMGYM_HARBOR_VENV:-$HOME/.cache/termgym/harbor-venv}"
SPEC="${TERMGYM_HARBOR_SPEC:-harbor>=0.26,<0.27}"
# Terminal-Bench 1's harness, for its pytest parser only (installed without its dependencies).
TB_SPEC="${TERMGYM_TB1_SPEC:-terminal-bench==0.2.18}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import harbor.verifier.verifier, importlib.metadata as m; assert m.version("harbor").startswith("0.26."); m.version("terminal-bench"); import gymnasium, yaml, pytest, docker' 2>/dev/null; then
  echo "$VENV/bin/python"; exit 0
fi

find_python() {
  for cand in python3.13 python3.12; do
    command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import venv' 2>/dev/null && { command -v "$cand"; return; }
  done
  # pyenv keeps versions it does not put on PATH
  for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
    [ -x "$cand" ] && { echo "$cand"; return; }
  done
  if command -v uv >/dev/null 2>&1; then uv python find '>=3.12' 2>/dev/null && return; fi
  return 1
}

PY="$(find_python)" || { echo "setup-harbor: no Python >= 3.12 found (Harbor needs it); install python3.12 or uv" >&2; exit 1; }
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import harbor.verifier.verifier' 2>/dev/null; then
  # Harbor is there; Terminal-Bench 1 or termgym's dependencies are missing.
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$TB_SPEC" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "gymnasium>=1.0" "pyyaml>=6.0" "pytest>=8" pytest-timeout "docker>=7.0" >&2
  echo "$VENV/bin/python"; exit 0
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$SPEC" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$TB_SPEC" >&2
# termgym's own dependencies, so termgym (on PYTHONPATH) runs there with harbor importable, and
# pytest + docker for the tests of Harbor's agents on termgym (tests/agents_external).
"$VENV/bin/pip" install -q --disable-pip-version-check "gymnasium>=1.0" "pyyaml>=6.0" "pytest>=8" pytest-timeout "docker>=7.0" >&2
"$VENV/bin/python" -c 'import harbor.verifier.verifier' >&2
echo "$VENV/bin/python"
