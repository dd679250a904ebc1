"""``termgym list``: the registered environment ids and their suites with task counts."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("list", help="list registered environments and their task counts")
    parser.add_argument("--no-counts", action="store_true", help="do not load suites to count their tasks")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from termgym.config import resolve_suite, split_options
    from termgym.registration import termgym_env_ids

    print(f"{'environment id':28} {'suite':20} {'tasks':>8}  splits")
    for env_id in termgym_env_ids():
        kwargs = dict(gym.registry[env_id].kwargs)
        suite_ref = kwargs.pop("suite")
        name, count, splits, projects = str(suite_ref).rsplit(":", 1)[-1], "-", "", ""
        if not args.no_counts:
            try:
                kwargs.pop("render_mode", None)  # the one TerminalEnv argument that is neither
                _, suite_opts = split_options(kwargs)
                suite = resolve_suite(suite_ref, **suite_opts)
                name = suite.name
                split_names = list(suite.splits())
                per_split = {s: list(suite.task_ids(s)) for s in split_names}
                splits = ", ".join(f"{s}={len(ids)}" for s, ids in per_split.items())
                # Splits can overlap (Harbor's train, test and all are the same tasks): count each task once.
                count = str(len(set().union(*per_split.values())) if per_split else 0)
                if callable(getattr(suite, "projects", None)):  # suites made from several projects
                    per_project = suite.projects()
                    projects = f"{len(per_project)} projects: " + ", ".join(
                        f"{p} {n}" for p, n in sorted(per_project.items()))
            except Exception as exc:  # a suite that cannot load here is reported, not fatal
                splits = f"unavailable: {type(exc).__name__}: {exc}"[:100]
        print(f"{env_id:28} {name:20} {count:>8}  {splits}")
        if projects:
            print(f"{'':28} {'':20} {'':>8}  {projects}")
    return 0

