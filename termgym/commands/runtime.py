"""``termgym runtime``: build, show and remove the pinned task runtime sandboxes run on."""

from __future__ import annotations

import argparse
import json
import sys

from termgym.sandbox.base import SandboxError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("runtime", help="build and inspect the pinned task runtime",
                                   description=__doc__)
    sub = parser.add_subparsers(dest="runtime_command", metavar="ACTION")
    build = sub.add_parser("build", help="debootstrap the runtime (needs root and the Debian mirror)")
    build.add_argument("--force", action="store_true", help="rebuild even if the current version exists")
    build.add_argument("--mirror", default=None, help="Debian mirror (default: the one apt uses here)")
    build.add_argument("--docker", action="store_true",
                       help="also import it as the Docker base image (termgym/base:bookworm)")
    build.set_defaults(func=_build)
    show = sub.add_parser("show", help="the current version, where it lives and what is in it")
    show.add_argument("--json", action="store_true", help="print runtime.json (fails when not built)")
    show.set_defaults(func=_show)
    listing = sub.add_parser("list", help="every runtime built in the runtime directory")
    listing.set_defaults(func=_list)
    remove = sub.add_parser("remove", help="delete a built runtime")
    remove.add_argument("version", help="the version to delete (see `termgym runtime list`)")
    remove.set_defaults(func=_remove)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _build(args: argparse.Namespace) -> int:
    from termgym.sandbox.runtime import build_runtime

    try:
        info = build_runtime(force=args.force, mirror=args.mirror)
        if args.docker:
            from termgym.sandbox.images import DEFAULT_BASE_IMAGE, docker_client, image_recipe, import_runtime

            client = docker_client()
            if args.force or image_recipe(client, DEFAULT_BASE_IMAGE) != info.version:
                import_runtime(info, DEFAULT_BASE_IMAGE, client=client)
            else:
                print(f"{DEFAULT_BASE_IMAGE} is up to date (recipe {info.version})")
    except SandboxError as exc:
        print(f"termgym runtime build: {exc}", file=sys.stderr)
        return 1
    return 0


def _show(args: argparse.Namespace) -> int:
    from termgym.sandbox.runtime import current_version, find_runtime, require_runtime, runtime_home

    info = find_runtime()
    if args.json:
        if info is None:
            print(f"termgym runtime show: {_missing()}", file=sys.stderr)
            return 1
        print(json.dumps(info.to_dict(), indent=1, sort_keys=True))
        return 0
    print(f"version   {current_version()}")
    print(f"home      {runtime_home()}  (TERMGYM_RUNTIME_DIR overrides)")
    if info is None:
        try:
            require_runtime()
        except SandboxError as exc:
            print(f"status    not built: {exc}")
        return 1
    print(f"rootfs    {info.rootfs}")
    print(f"python    {info.python}")
    print(f"pytest    {info.pytest}")
    print(f"packages  {len(info.packages)} Debian packages, {info.size_mb:.0f} MB")
    print(f"built     {info.built_at} in {info.build_seconds:.0f}s from {info.mirror}")
    return 0


def _missing() -> str:
    from termgym.sandbox.runtime import require_runtime

    try:
        require_runtime()
    except SandboxError as exc:
        return str(exc)
    return ""


def _list(args: argparse.Namespace) -> int:
    from termgym.sandbox.runtime import current_version, installed_runtimes, runtime_home

    runtimes = installed_runtimes()
    if not runtimes:
        print(f"no runtime built in {runtime_home()}; build one with `termgym runtime build`")
        return 0
    print(f"{'VERSION':24} {'PYTHON':8} {'PYTEST':8} {'SIZE':>8}  BUILT")
    for info in runtimes:
        mark = "  (current)" if info.version == current_version() else ""
        print(f"{info.version:24} {info.python:8} {info.pytest:8} {info.size_mb:6.0f}MB  {info.built_at}{mark}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from termgym.sandbox.runtime import remove_runtime, runtime_home

    if not remove_runtime(args.version):
        print(f"termgym runtime remove: no runtime {args.version!r} in {runtime_home()}", file=sys.stderr)
        return 1
    print(f"removed {args.version}")
    return 0
