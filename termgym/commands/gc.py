"""``termgym gc``: remove the sandboxes a crashed termgym run left behind on this machine.

Local sandboxes (``termgym-local-*`` directories and their cgroups) and Docker containers labelled
``termgym=1``. By default those whose creating process (recorded beside the sandbox's root, or in the
container's labels) is gone — a run killed outright, a Ray sandbox node whose raylet died;
``--older-than`` also takes old ones (for containers of runs on other hosts); ``--all`` takes every
one. ``--backend`` limits it to one kind; without it, a machine with no Docker engine is only swept
for local sandboxes.
"""

from __future__ import annotations

import argparse
import re
import sys

from termgym.sandbox.base import SandboxError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"2h"``, ``"1d"`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90s, 10m, 2h, 1d)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gc", help="remove sandboxes and containers a crashed termgym run left behind",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--older-than", type=parse_duration, default=None, metavar="DURATION",
                        help="also remove termgym sandboxes and containers created longer ago than this (e.g. 30m)")
    parser.add_argument("--all", action="store_true", help="remove every termgym sandbox and container, running or not")
    parser.add_argument("--backend", choices=("all", "local", "docker"), default="all",
                        help="which sandboxes to sweep (default all: local ones, and Docker's where an engine answers)")
    parser.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    parser.add_argument("--docker-host", default=None, help="Docker engine (default: DOCKER_HOST or the local socket)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    verb = "would remove" if args.dry_run else "removed"
    if args.backend in ("all", "local"):
        import tempfile

        from termgym.sandbox.local import sandbox_parent_dir
        from termgym.sandbox.local_gc import collect_local_garbage

        parents = [sandbox_parent_dir() or tempfile.gettempdir(), tempfile.gettempdir()]
        local = collect_local_garbage(parents, older_than=args.older_than, everything=args.all, dry_run=args.dry_run)
        for item in local:
            print(f"{verb} {item.path} (local sandbox, {item.age_s:.0f}s old): {item.reason}")
        print(f"{verb} {len(local)} local sandbox(es)")
    if args.backend in ("all", "docker"):
        try:
            from termgym.sandbox.docker import collect_garbage

            removed = collect_garbage(older_than=args.older_than, everything=args.all, dry_run=args.dry_run,
                                      docker_host=args.docker_host)
        except (SandboxError, ImportError) as exc:
            if args.backend == "all":
                print(f"termgym gc: Docker not swept: {exc}", file=sys.stderr)
                return 0
            print(f"termgym gc: {exc}", file=sys.stderr)
            return 1
        for item in removed:
            print(f"{verb} {item.id} {item.name} ({item.image}, {item.status}, {item.age_s:.0f}s old): {item.reason}")
        print(f"{verb} {len(removed)} container(s)")
    return 0
