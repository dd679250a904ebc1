# Sourced by the project's scripts (from the repository root): put the Python environment that
# scripts/setup.sh installed into on PATH: the active virtual environment, else the project's .venv.
if [ -z "${VIRTUAL_ENV:-}" ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "no Python environment: run \`bash scripts/setup.sh\` first (it makes .venv)" >&2
    exit 1
  fi
  VIRTUAL_ENV=$PWD/.venv
  PATH=$VIRTUAL_ENV/bin:$PATH
  export VIRTUAL_ENV PATH
fi
