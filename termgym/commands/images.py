"""``termgym images``: build and list termgym's Docker images (no registry needed)."""

from __future__ import annotations

import argparse
import sys

from termgym.sandbox.base import SandboxError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("images", help="build and list termgym's Docker images",
                                   description=__doc__)
    parser.add_argument("--docker-host", default=None, help="Docker engine (default: DOCKER_HOST or the local socket)")
    sub = parser.add_subparsers(dest="images_command", metavar="ACTION")
    build = sub.add_parser("build-base", help="import the pinned task runtime as the base image "
                           "(building the runtime first if needed: root, debootstrap)")
    build.add_argument("--name", default=None, help="image name (default: termgym/base:bookworm)")
    build.add_argument("--force", action="store_true", help="import again even if the image is up to date "
                       "(rebuild the runtime itself with `termgym runtime build --force`)")
    build.add_argument("--mirror", default=None, help="Debian mirror for a runtime build (default: the one apt uses here)")
    build.set_defaults(func=_build_base)
    listing = sub.add_parser("list", help="list termgym-built images")
    listing.set_defaults(func=_list)
    dockerfile = sub.add_parser("build", help="build a task's Dockerfile with the legacy builder (no pulls)")
    dockerfile.add_argument("context", help="build context directory")
    dockerfile.add_argument("--file", default="Dockerfile", help="Dockerfile path inside the context")
    dockerfile.add_argument("--tag", default=None, help="image tag (default: termgym/task-<hash>)")
    dockerfile.add_argument("--force", action="store_true", help="rebuild even if the context is unchanged")
    dockerfile.set_defaults(func=_build_dockerfile)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _build_base(args: argparse.Namespace) -> int:
    from termgym.sandbox.images import DEFAULT_BASE_IMAGE, build_base_image, docker_client

    try:
        build_base_image(args.name or DEFAULT_BASE_IMAGE, force=args.force, mirror=args.mirror,
                         client=docker_client(args.docker_host))
    except SandboxError as exc:
        print(f"termgym images build-base: {exc}", file=sys.stderr)
        return 1
    return 0


def _list(args: argparse.Namespace) -> int:
    from termgym.sandbox.images import docker_client, list_images

    try:
        images = list_images(docker_client(args.docker_host))
    except SandboxError as exc:
        print(f"termgym images list: {exc}", file=sys.stderr)
        return 1
    if not images:
        print("no termgym images; build the base image with `termgym images build-base`")
        return 0
    print(f"{'IMAGE':40} {'ID':14} {'KIND':5} {'RECIPE':17} {'SIZE':>9}  CREATED")
    for image in images:
        name = ", ".join(image.tags) or "<untagged>"
        print(f"{name:40} {image.id:14} {image.kind:5} {image.recipe:17} {image.size_mb:7.0f}MB  {image.created}")
    return 0


def _build_dockerfile(args: argparse.Namespace) -> int:
    from termgym.sandbox.images import build_image, docker_client

    try:
        tag = build_image(args.context, args.file, args.tag, force=args.force, client=docker_client(args.docker_host))
    except (SandboxError, FileNotFoundError) as exc:
        print(f"termgym images build: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0
