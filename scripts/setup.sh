#!/usr/bin/env bash
# Set up this machine for termgym: system packages, a Python environment with termgym in it, and
# (with --docker) a running Docker engine plus the locally built base image. Safe to run again.
# Works on Debian 12 and Ubuntu 24.04 starting from nothing but python3 and git (as root or sudo).
#
#   bash scripts/setup.sh            # local backend only (bubblewrap): enough for the quick start
#   bash scripts/setup.sh --docker   # also docker.io, dockerd and the termgym/base image
#   bash scripts/setup.sh --all      # everything the test suite needs (docker, chromium, veRL on CPU)
#
# Python packages go into the active virtual environment, or else into the project's .venv (made
# here): Debian and Ubuntu refuse pip installs into the system Python (PEP 668). The other scripts
# (quickstart.sh, test.sh, .ci/run) use the same environment through scripts/venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

want_docker=0; want_all=0
for arg in "$@"; do
  case "$arg" in
    --docker) want_docker=1 ;;
    --all) want_docker=1; want_all=1 ;;
    *) echo "unknown option $arg (known: --docker, --all)" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
distro=$(. /etc/os-release && echo "${ID:-unknown}")

# -- system packages ------------------------------------------------------------------------------
# python3-venv: the venv module with ensurepip (Debian and Ubuntu ship it apart from python3);
# debootstrap + debian-archive-keyring: the pinned task runtime (Debian 12) every sandbox runs on,
# also when built on Ubuntu; python3-pytest: only for sandboxes that opt into the host's /usr.
packages=(bubblewrap python3-venv python3-pytest git curl ca-certificates tmux procps debootstrap debian-archive-keyring)
[ "$want_docker" = 1 ] && packages+=(docker.io)
[ "$want_all" = 1 ] && packages+=(sqlite3)
# A Docker registry the Harbor image-pull tests push to and pull from on loopback (tests/harbor/test_images.py).
[ "$want_all" = 1 ] && packages+=(docker-registry)
# The report test's headless browser. Ubuntu's chromium package is only a wrapper that installs a
# snap (no snapd in containers and CI), so Ubuntu gets Google Chrome's .deb below instead.
[ "$want_all" = 1 ] && [ "$distro" != ubuntu ] && packages+=(chromium)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> apt-get install ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$want_all" = 1 ] && [ "$distro" = ubuntu ] && ! command -v google-chrome >/dev/null; then
  echo "==> installing Google Chrome (Ubuntu's chromium is a snap wrapper)"
  curl -fsSL -o /tmp/google-chrome.deb https://dl.google.com/linux/direct/google-chrome-stable_current_amd64.deb
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/google-chrome.deb >/dev/null
  rm -f /tmp/google-chrome.deb
fi

# -- the Python environment -----------------------------------------------------------------------
if [ -n "${VIRTUAL_ENV:-}" ]; then
  venv=$VIRTUAL_ENV
  echo "==> using the active virtual environment $venv"
else
  venv=$PWD/.venv
  # A .venv made before python3-venv was installed has no pip: make it again.
  if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "==> python3 -m venv .venv"
    python3 -m venv --clear "$venv"
  fi
fi
pip_install() { "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"; }

extras=""
[ "$want_docker" = 1 ] && extras="docker"
[ "$want_all" = 1 ] && extras="dev,docker,data,eval,bench"
echo "==> pip install -e .${extras:+[$extras]}"
pip_install -e ".${extras:+[$extras]}"

if [ "$want_all" = 1 ]; then
  # veRL on CPU for the trainer tests. torch first, so that veRL does not pull the multi-GB CUDA
  # build from PyPI. The CPU build is 2.13.0+cpu: from pip's own sources when they have it (a local
  # wheel in pip's find-links, as on machines without the CPU index), else from the CPU index.
  if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      echo "==> pip install torch==2.13.0 (GPU found)"
      pip_install torch==2.13.0
    else
      echo "==> pip install torch==2.13.0+cpu"
      pip_install torch==2.13.0+cpu 2>/dev/null ||
        pip_install torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu
    fi
  fi
  echo "==> pip install -e .[verl]"
  pip_install -e ".[verl]"
  # The ART and Tinker adapters' tests (docs/integrations.md): the light install, without ART's GPU
  # backend; tinker-cookbook needs --no-deps (one of its requirements is not on PyPI).
  if ! "$venv/bin/python" -c "import art, tinker_cookbook" 2>/dev/null; then
    echo "==> pip install openpipe-art, tinker, tinker-cookbook (light)"
    pip_install --no-deps openpipe-art==0.5.18 tinker-cookbook==0.6.1
    # the [art] extra's other requirements (what `import art` needs, ART's GPU backend left out), read
    # from pyproject.toml so the extra and this install cannot drift apart
    mapfile -t art_requirements < <("$venv/bin/python" - <<'PY'
import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print("\n".join(r for r in extras["art"] if not r.startswith("openpipe-art")))
PY
)
    pip_install "${art_requirements[@]}" tinker==0.38.0 chz pyrage blobfile termcolor "tiktoken>=0.12"
  fi
  # Harbor 0.26 (Python >= 3.12) in its own venv: the parity tests and Harbor's agents on termgym.
  echo "==> Harbor's environment (scripts/setup-harbor.sh)"
  bash scripts/setup-harbor.sh >/dev/null
fi

# -- the sandboxes' task runtime ------------------------------------------------------------------
# Built once (debootstrap, about a minute), cached by recipe hash; `termgym runtime show` tells.
echo "==> termgym runtime build"
as_root "$venv/bin/termgym" runtime build

# -- SWE-SYNTH's real projects: their test environments -----------------------------------------------
# Pinned wheels (hash-checked) per project, beside the runtime (testenvs/); tasks then run offline.
# The quick start needs the projects the default suite serves; --all (CI) also the factory's others.
provision_args=()
[ "$want_all" = 1 ] && provision_args+=(--all)
echo "==> termgym swesynth provision ${provision_args[*]:-}"
as_root "$venv/bin/termgym" swesynth provision "${provision_args[@]}"

if [ "$want_docker" = 1 ]; then
  if ! docker info >/dev/null 2>&1; then
    echo "==> starting dockerd"
    as_root sh -c 'nohup dockerd > /var/log/termgym-dockerd.log 2>&1 &'
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/termgym-dockerd.log" >&2; exit 1; }
  fi
  echo "==> termgym images build-base"
  "$venv/bin/termgym" images build-base
fi

echo "==> ready"
if [ "$venv" = "$PWD/.venv" ] && [ "${VIRTUAL_ENV:-}" != "$venv" ]; then
  echo "termgym is installed in $venv; activate it with:  source .venv/bin/activate"
fi
