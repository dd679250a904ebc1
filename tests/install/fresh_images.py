"""Docker images of freshly installed machines: a minimal root file system with python3 and git only.

Debian 12 is debootstrapped from the Debian mirror the task runtime uses, with termgym's own package
installer (:func:`termgym.sandbox.runtime.install_packages`). Ubuntu 24.04 is built the same way,
from the Ubuntu archive:
``debootstrap`` (Debian's debootstrap has no ``noble`` script; ``gutsy`` is the one every Ubuntu
release uses; without the Ubuntu keyring on a Debian host the bootstrap itself is not verified, the
apt inside the image is, with the keyring the bootstrap installed), the ``ubuntu.sources`` a 24.04
install has (main restricted universe multiverse, updates and security), ``apt-get install``, then
``docker import``. Both carry a recipe label, so they are built once and reused while it matches.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

FRESH_PACKAGES = ("python3", "git")
DEBIAN_IMAGE = "termgym/fresh-debian:12"
UBUNTU_IMAGE = "termgym/fresh-ubuntu:24.04"
UBUNTU_SUITE = "noble"
UBUNTU_KEYRING = Path("/usr/share/keyrings/ubuntu-archive-keyring.gpg")
UBUNTU_SOURCES = """\
Types: deb
URIs: {mirror}
Suites: noble noble-updates noble-backports
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: {security}
Suites: noble-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
"""
IMAGE_CHANGES = ("ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8",
                 "WORKDIR /root", 'CMD ["bash"]')
RECIPE_LABEL = "org.termgym.recipe"


def ubuntu_mirror() -> str:
    return os.environ.get("TERMGYM_UBUNTU_MIRROR", "http://archive.ubuntu.com/ubuntu").rstrip("/")


def build_debian(client, log: Callable[[str], None] = print) -> str:
    """Debian 12 as a fresh install has it: ``debootstrap --variant=minbase`` plus python3 and git."""
    from termgym.sandbox.images import image_recipe
    from termgym.sandbox.runtime import RUNTIME_SUITE, debian_mirror, install_packages

    recipe = hashlib.sha256("\n".join([RUNTIME_SUITE, *FRESH_PACKAGES, *IMAGE_CHANGES]).encode()).hexdigest()[:16]
    if image_recipe(client, DEBIAN_IMAGE) == recipe:
        log(f"{DEBIAN_IMAGE} is up to date (recipe {recipe})")
        return DEBIAN_IMAGE
    mirror = debian_mirror()
    keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="termgym-fresh-debian-") as tmp:
        root = Path(tmp) / "rootfs"
        log(f"debootstrap --variant=minbase {RUNTIME_SUITE} from {mirror}")
        _run(["debootstrap", "--variant=minbase", *([f"--keyring={keyring}"] if keyring.is_file() else []),
              RUNTIME_SUITE, str(root), mirror])
        install_packages(root, mirror, FRESH_PACKAGES, log)
        _import(root, DEBIAN_IMAGE, recipe, log)
    log(f"built {DEBIAN_IMAGE} in {time.monotonic() - started:.0f} s")
    return DEBIAN_IMAGE


def build_ubuntu(client, log: Callable[[str], None] = print) -> str:
    from termgym.sandbox.images import image_recipe

    recipe = hashlib.sha256("\n".join([UBUNTU_SUITE, UBUNTU_SOURCES, *FRESH_PACKAGES, *IMAGE_CHANGES])
                            .encode()).hexdigest()[:16]
    if image_recipe(client, UBUNTU_IMAGE) == recipe:
        log(f"{UBUNTU_IMAGE} is up to date (recipe {recipe})")
        return UBUNTU_IMAGE
    if not shutil.which("debootstrap"):
        raise RuntimeError("building the Ubuntu image needs debootstrap: apt-get install -y debootstrap")
    script = Path("/usr/share/debootstrap/scripts") / UBUNTU_SUITE
    if not script.exists():
        script = script.with_name("gutsy")
    check = [f"--keyring={UBUNTU_KEYRING}"] if UBUNTU_KEYRING.exists() else ["--no-check-gpg"]
    mirror = ubuntu_mirror()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="termgym-fresh-ubuntu-") as tmp:
        root = Path(tmp) / "rootfs"
        log(f"debootstrap --variant=minbase {UBUNTU_SUITE} from {mirror}")
        _run(["debootstrap", "--variant=minbase", *check, UBUNTU_SUITE, str(root), mirror, str(script)])
        (root / "etc/apt/sources.list").unlink(missing_ok=True)
        security = "http://security.ubuntu.com/ubuntu" if "archive.ubuntu.com" in mirror else mirror
        (root / "etc/apt/sources.list.d/ubuntu.sources").write_text(
            UBUNTU_SOURCES.format(mirror=mirror, security=security))
        resolv = root / "etc/resolv.conf"
        resolv.unlink(missing_ok=True)
        shutil.copyfile("/etc/resolv.conf", resolv)
        subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=False, capture_output=True)
        try:
            env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}
            log(f"apt-get install {' '.join(FRESH_PACKAGES)}")
            _run(["chroot", str(root), "apt-get", "update", "-q"], env)
            _run(["chroot", str(root), "apt-get", "install", "-y", "-q", "--no-install-recommends", *FRESH_PACKAGES],
                 env)
            _run(["chroot", str(root), "apt-get", "clean"], env)
        finally:
            with contextlib.suppress(Exception):
                subprocess.run(["umount", "-l", str(root / "proc")], check=False, capture_output=True)
        shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True)
        resolv.write_text("")
        _import(root, UBUNTU_IMAGE, recipe, log)
    log(f"built {UBUNTU_IMAGE} in {time.monotonic() - started:.0f} s")
    return UBUNTU_IMAGE


def _import(root: Path, image: str, recipe: str, log: Callable[[str], None]) -> None:
    """``tar | docker import`` the root file system ``root`` as ``image``, labelled with its recipe."""
    log(f"importing {image} into docker")
    changes = [arg for change in (*IMAGE_CHANGES, f"LABEL {RECIPE_LABEL}={recipe}") for arg in ("--change", change)]
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    try:
        _run(["docker", "import", *changes, "-", image], stdin=tar.stdout)
    finally:
        tar.stdout.close()
        tar.wait()


def _run(cmd: list[str], env: dict[str, str] | None = None, stdin=None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=stdin)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:5])}... failed (exit {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
