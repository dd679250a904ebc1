"""``termgym bench``: run termgym's benchmarks and write their report (source checkouts only).

The benchmarks live in the repository's top-level ``benchmarks/`` package, next to ``termgym/``;
they are not part of the installed wheel. This command finds them beside an editable install
(``pip install -e '.[bench]'``) or in the current directory, and otherwise says how to get them.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

BENCH_NAMES = ("step", "reset", "grading", "throughput", "generation")
NOT_A_CHECKOUT = (
    "termgym bench needs a source checkout of termgym: the benchmarks/ folder is not part of the installed "
    "package. Clone the repository, install it with `pip install -e '.[bench]'` and run `termgym bench` (or "
    "`python -m benchmarks`) from there. Looked in: {places}"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench", help="run the benchmarks and write a report under runs/bench/ (from a source checkout)",
        description="Run termgym's benchmarks side by side with mini-swe-agent, raw subprocess/pexpect and raw "
                    "Docker, and write RESULTS.md, results.json and PNG plots. Needs a source checkout "
                    "(the benchmarks/ folder is not installed with the package).")
    parser.add_argument("--quick", action="store_true",
                        help="a small version of every benchmark (CI; under 3 minutes on 2 cores)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help=f"run only these benchmarks (repeatable or comma-separated): {', '.join(BENCH_NAMES)}")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, metavar="DIR",
                       help="where RESULTS.md, results.json and the plots go (default: runs/bench/<UTC time>)")
    where.add_argument("--update-results", action="store_true",
                       help="overwrite the committed results in the checkout's benchmarks/ instead")
    parser.set_defaults(func=run)


def candidate_dirs() -> list[Path]:
    """Where a ``benchmarks`` package may be: beside the imported ``termgym`` package, then the cwd."""
    import termgym

    return [Path(termgym.__file__).resolve().parent.parent, Path.cwd()]


def find_benchmarks(dirs: list[Path] | None = None) -> ModuleType | None:
    """Import termgym's ``benchmarks`` package from the first checkout that has it, or return None.

    A package must sit next to a ``termgym/`` folder to count: some wheels install an unrelated
    top-level ``benchmarks`` module into site-packages.
    """
    for root in dirs if dirs is not None else candidate_dirs():
        init = root / "benchmarks" / "__init__.py"
        if not (init.is_file() and (root / "termgym").is_dir()):
            continue
        loaded = sys.modules.get("benchmarks")
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == init.resolve():
            return loaded
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        spec = importlib.util.spec_from_file_location("benchmarks", init, submodule_search_locations=[str(init.parent)])
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = module
        spec.loader.exec_module(module)
        return module
    return None


def run(args: argparse.Namespace) -> int:
    dirs = candidate_dirs()
    module = find_benchmarks(dirs)
    if module is None:
        print("error: " + NOT_A_CHECKOUT.format(places=", ".join(str(d / "benchmarks") for d in dirs)),
              file=sys.stderr)
        return 2
    argv = ["bench"] + (["--quick"] if args.quick else [])
    for name in args.only or []:
        argv += ["--only", name]
    if args.out:
        argv += ["--out", args.out]
    if args.update_results:
        argv += ["--update-results"]
    return module.run(args, shlex.join(["termgym", *argv]))
