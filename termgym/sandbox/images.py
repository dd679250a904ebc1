"""Docker images for termgym without an image registry.

``build_base_image`` makes the default sandbox image, ``termgym/base:bookworm``, from the pinned
task runtime (:mod:`termgym.sandbox.runtime`): the same Debian tree the local backend runs on,
built once with debootstrap and streamed into ``docker import``. The image carries the runtime
version as its recipe label, so a second call with the same runtime does nothing, and the
runtime a container ran on can be read back from its image.

``build_image`` builds a task's Dockerfile with the legacy builder (no BuildKit, no pulls). Its
``FROM`` images must already exist on the Docker host; when one does not, the error names it and
says how to provide it. A built image is reused while its build context *and* the ids of its
``FROM`` images are unchanged, so a rebuilt base image rebuilds the images made from it.

``pull_image`` fetches a prebuilt image (a Harbor task's ``docker_image``) from its registry
when the Docker host lacks it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from termgym.sandbox.base import BackendUnavailable, SandboxError
from termgym.sandbox.runtime import (  # noqa: F401 - debian_mirror is part of this module's API
    RUNTIME_PACKAGES,
    RUNTIME_SUITE,
    RuntimeInfo,
    build_runtime,
    current_version,
    debian_mirror,
)

DEFAULT_BASE_IMAGE = "termgym/base:bookworm"
DEBIAN_SUITE = RUNTIME_SUITE
BASE_PACKAGES = RUNTIME_PACKAGES
# Baked into the image with `docker import --change`.
BASE_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    "WORKDIR /workspace",
    'CMD ["bash"]',
)
LABEL_RECIPE = "org.termgym.recipe"  # base images: the runtime version they were imported from
LABEL_KIND = "org.termgym.image"  # "base" or "task"

Log = Callable[[str], None]


def base_recipe_hash() -> str:
    """The recipe label an up-to-date base image carries: the current runtime version."""
    return current_version()


# -- the base image ----------------------------------------------------------------------


@dataclass
class ImageInfo:
    """One termgym-built image as ``termgym images list`` shows it."""

    tags: list[str]
    id: str
    kind: str
    recipe: str
    size_mb: float
    created: str


def docker_client(docker_host: str | None = None):
    """A Docker SDK client for ``docker_host`` (default: ``DOCKER_HOST`` or the local socket).

    Raises :class:`BackendUnavailable` with what to do when the SDK or the engine is missing.
    """
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - the extra is part of dev installs
        raise BackendUnavailable(
            "the docker backend needs the Docker SDK for Python: pip install 'termgym[docker]'"
        ) from exc
    where = docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
        client.ping()
    except Exception as exc:
        raise BackendUnavailable(
            f"cannot reach a Docker engine at {where}: {exc}. Start one (`dockerd &`, or "
            "`apt-get install docker.io` first) or point DOCKER_HOST at a remote engine."
        ) from exc
    return client


def image_recipe(client, name: str) -> str | None:
    """The recipe label of image ``name`` ("" if it has none), or None if it does not exist."""
    import docker.errors

    try:
        image = client.images.get(name)
    except docker.errors.ImageNotFound:
        return None
    return (image.labels or {}).get(LABEL_RECIPE, "")


def build_base_image(
    name: str = DEFAULT_BASE_IMAGE,
    *,
    force: bool = False,
    mirror: str | None = None,
    client=None,
    log: Log = print,
) -> str:
    """Import the pinned task runtime into Docker as ``name`` unless it is already there.

    Builds the runtime first when it is missing (root, debootstrap, the Debian mirror); the Docker
    engine may be remote (the root file system is streamed to it). ``force`` imports again.
    Returns the image id.
    """
    client = client or docker_client()
    version = current_version()
    if not force and image_recipe(client, name) == version:
        log(f"{name} is up to date (recipe {version})")
        return client.images.get(name).id
    info = build_runtime(mirror=mirror, log=log)
    return import_runtime(info, name, client=client, log=log)


def import_runtime(info: RuntimeInfo, name: str = DEFAULT_BASE_IMAGE, *, client=None, log: Log = print) -> str:
    """``tar | docker import`` the runtime ``info`` as image ``name``; return the image id."""
    client = client or docker_client()
    started = time.monotonic()
    log(f"importing runtime {info.version} into docker as {name}")
    changes = [*BASE_CHANGES, f"LABEL {LABEL_RECIPE}={info.version}", f"LABEL {LABEL_KIND}=base"]
    repository, tag = split_tag(name)
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(info.rootfs), "-c", "."],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        client.api.import_image_from_stream(_chunks(tar.stdout), repository=repository, tag=tag, changes=changes)
    finally:
        tar.stdout.close()
        err = tar.stderr.read().decode(errors="replace")
        if tar.wait() != 0:
            raise SandboxError(f"tar of the runtime root file system failed: {err.strip()}")
    image = client.images.get(name)
    log(f"imported {name} ({image.short_id}) in {time.monotonic() - started:.1f}s")
    return image.id


def split_tag(name: str) -> tuple[str, str]:
    """``"repo/name:tag"`` -> ``("repo/name", "tag")``; the tag defaults to ``latest``."""
    if ":" in name.rsplit("/", 1)[-1]:
        repository, _, tag = name.rpartition(":")
        return repository, tag
    return name, "latest"


def _chunks(stream, size: int = 1 << 20) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


# -- images from a task's Dockerfile -----------------------------------------------------


def dockerfile_bases(dockerfile_text: str) -> list[str]:
    """The external images a Dockerfile's ``FROM`` lines need (stages and ``scratch`` excluded).

    ``ARG`` defaults declared before the first ``FROM`` are substituted (``FROM ${BASE}``).
    """
    args: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[str] = []
    # Join continuation lines first so a FROM split over lines is seen whole.
    text = re.sub(r"\\\r?\n", " ", dockerfile_text)
    seen_from = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG" and not seen_from:
            key, _, default = rest.strip().partition("=")
            args[key.strip()] = default.strip().strip('"').strip("'")
        elif word == "FROM":
            seen_from = True
            parts = [p for p in rest.split() if not p.startswith("--")]
            if not parts:
                continue
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), parts[0])
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2].lower())
            if image.lower() in stages or image == "scratch" or image in bases:
                continue
            bases.append(image)
    return bases


def context_hash(context_dir: str | Path, dockerfile: str = "Dockerfile") -> str:
    """A hash of a build context's file names, modes and contents (for cached builds)."""
    context_dir = Path(context_dir)
    digest = hashlib.sha256(dockerfile.encode())
    for path in sorted(context_dir.rglob("*")):
        rel = path.relative_to(context_dir).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} {os.readlink(path)}\n".encode())
        elif path.is_file():
            digest.update(f"F {rel} {path.stat().st_mode & 0o777}\n".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        elif path.is_dir():
            digest.update(f"D {rel}\n".encode())
    return digest.hexdigest()[:16]


def build_image(
    context_dir: str | Path,
    dockerfile: str = "Dockerfile",
    tag: str | None = None,
    *,
    force: bool = False,
    client=None,
    log: Log = print,
) -> str:
    """Build ``context_dir/dockerfile`` as ``tag`` with the legacy builder and return the tag.

    Nothing is pulled: every ``FROM`` image must exist on the Docker host, otherwise
    :class:`BackendUnavailable` names the missing one and how to provide it. The image is labelled
    with a hash of the context, so an unchanged context is not rebuilt (``force`` rebuilds).
    """
    import docker.errors

    context_dir = Path(context_dir)
    path = context_dir / dockerfile
    if not path.is_file():
        raise FileNotFoundError(f"no Dockerfile at {path}")
    client = client or docker_client()
    missing, base_ids = [], []
    for base in dockerfile_bases(path.read_text()):
        try:
            base_ids.append(f"{base}={client.images.get(base).id}")
        except docker.errors.ImageNotFound:
            missing.append(base)
    if missing:
        raise BackendUnavailable(_missing_base_message(missing, path))
    # The base images' ids are part of the key: a rebuilt or re-tagged base rebuilds this image.
    recipe = hashlib.sha256("\n".join([context_hash(context_dir, dockerfile), *base_ids]).encode()).hexdigest()[:16]
    tag = tag or f"termgym/task-{recipe}:latest"
    if not force and image_recipe(client, tag) == recipe:
        log(f"{tag} is up to date (context and base images {recipe})")
        return tag
    try:
        _, logs = client.images.build(
            path=str(context_dir),
            dockerfile=dockerfile,
            tag=tag,
            pull=False,
            rm=True,
            forcerm=True,
            labels={LABEL_RECIPE: recipe, LABEL_KIND: "task"},
        )
        for chunk in logs:
            if "stream" in chunk and chunk["stream"].strip():
                log(chunk["stream"].rstrip())
    except docker.errors.BuildError as exc:
        output = "".join(str(c.get("stream", c.get("error", ""))) for c in exc.build_log)[-3000:]
        raise SandboxError(f"docker build of {path} failed: {exc.msg}\n{output}") from exc
    return tag


def pull_image(name: str, *, client=None, log: Log = print) -> str:
    """Make image ``name`` (``registry/repo:tag`` or ``repo@sha256:...``) present: pull it if missing.

    Returns ``name``. A failed pull is a :class:`SandboxError` naming the image and what the
    registry (or the Docker engine) answered.
    """
    import docker.errors

    client = client or docker_client()
    try:
        client.images.get(name)
        return name
    except docker.errors.ImageNotFound:
        pass
    repository, tag = (name.split("@", 1)[0], name.split("@", 1)[1]) if "@" in name else split_tag(name)
    started = time.monotonic()
    log(f"pulling {name}")
    try:
        client.images.pull(repository, tag=tag)
    except docker.errors.APIError as exc:
        raise SandboxError(f"docker pull {name} failed: {exc.explanation or exc}") from exc
    except Exception as exc:  # a malformed name, a connection reset
        raise SandboxError(f"docker pull {name} failed: {type(exc).__name__}: {exc}") from exc
    log(f"pulled {name} in {time.monotonic() - started:.1f}s")
    return name


def _missing_base_message(missing: list[str], dockerfile: Path) -> str:
    names = ", ".join(missing)
    first = missing[0]
    return (
        f"{dockerfile} needs base image(s) not present on the Docker host: {names}. No registry is "
        f"reachable, so provide them locally: build termgym's Debian image with `termgym images "
        f"build-base` and tag it, e.g. `docker tag {DEFAULT_BASE_IMAGE} {first}`, or `docker load` a "
        "saved copy of the image."
    )


def list_images(client=None) -> list[ImageInfo]:
    """termgym-built images on the Docker host (those carrying termgym's image label)."""
    client = client or docker_client()
    out = []
    for image in client.images.list(filters={"label": LABEL_KIND}):
        labels = image.labels or {}
        out.append(
            ImageInfo(
                tags=list(image.tags),
                id=image.short_id.split(":")[-1],
                kind=labels.get(LABEL_KIND, ""),
                recipe=labels.get(LABEL_RECIPE, ""),
                size_mb=image.attrs.get("Size", 0) / 1e6,
                created=str(image.attrs.get("Created", ""))[:19],
            )
        )
    return sorted(out, key=lambda i: (i.kind, i.tags))
