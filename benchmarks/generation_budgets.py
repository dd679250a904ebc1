"""SWE-SYNTH generation with and without per-test budgets, on bundled (or added) projects.

A bug that makes code loop used to hold its candidate's test run until the run's timeout
(``max(10, 3 x baseline + 5)`` seconds). With per-test budgets
(:meth:`~termgym.factory.swesynth.screen.Baseline.test_budgets`) the screening plugin ends the run
as soon as one test outlives a multiple of its clean duration. This benchmark generates the same
project twice in one process, with the same seed and the settings ``termgym swesynth bundle``
uses (one worker), once with budgets off and once on, and reports for each: tasks kept, candidates
judged, wall seconds, seconds spent in timed-out runs, tasks per minute, and whether both runs
kept the same task ids. The ratio of the two runs is the speedup; absolute times depend on the
machine's load (run it under ``nice -n 19`` on a shared machine and quote ``uptime``).

Usage::

    python -m benchmarks.generation_budgets --project isodate --project cachetools --n 8 --seed 26 \\
        [--projects-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any


def generate_once(name: str, *, n: int, seed: int, budgets: bool, out: Path,
                  time_budget: float | None) -> dict[str, Any]:
    """One generation run of project ``name`` as the bundler runs it; its counters and task ids."""
    from termgym.factory.swesynth.bundle import MAX_NAMED_SHARE
    from termgym.factory.swesynth.generate import generate
    from termgym.factory.swesynth.screen import ProjectEnv
    from termgym.tasks.swesynth.projects import get_project, project_tree

    project = get_project(name)
    result = generate(project_tree(name), project.test_command, n=n, seed=seed, out=out, name=name, workers=1,
                      source_dirs=list(project.source_dirs), test_dirs=list(project.test_dirs),
                      project_env=ProjectEnv.for_project(name), project=name, storage="compact",
                      max_named_share=MAX_NAMED_SHARE, max_bugs=2, import_time="skip",
                      exclude_tests=[d.test for d in project.deselect], stall_limit=60,
                      time_budget=time_budget, early_stop=budgets)
    stats = result.stats.to_dict()
    stats["task_ids"] = [r.task_id for r in result.records]
    return stats


def compare(name: str, *, n: int, seed: int, time_budget: float | None, on_first: bool = False) -> dict[str, Any]:
    """Budgets off, then on (``on_first``: the other way round), for one project; the two runs'
    counters and their ratios."""
    runs = {}
    with tempfile.TemporaryDirectory(prefix="termgym-bench-budgets-") as tmp:
        # the baseline (cached per tree) is made before either timed run, so neither pays for it
        generate_once(name, n=1, seed=seed, budgets=True, out=Path(tmp) / "warm", time_budget=60)
        order = (("on", True), ("off", False)) if on_first else (("off", False), ("on", True))
        for label, budgets in order:
            runs[label] = generate_once(name, n=n, seed=seed, budgets=budgets, out=Path(tmp) / label,
                                        time_budget=time_budget)
    off, on = runs["off"], runs["on"]
    return {"project": name, "n": n, "seed": seed, "order": "on, off" if on_first else "off, on", "off": off, "on": on,
            "same_tasks": off["task_ids"] == on["task_ids"],
            "wall_ratio": round(off["elapsed_seconds"] / max(on["elapsed_seconds"], 1e-9), 2),
            "throughput_ratio": round(on["tasks_per_minute"] / max(off["tasks_per_minute"], 1e-9), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--project", action="append", required=True)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--time-budget", type=float, default=None, help="seconds per run")
    parser.add_argument("--projects-dir", action="append", default=[], help="project sets beyond the bundled one")
    parser.add_argument("--on-first", action="store_true", help="run with budgets first (load drifts)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.projects_dir:
        from termgym.commands.swesynth import use_projects_dirs

        problem = use_projects_dirs(args.projects_dir)
        if problem:
            parser.error(problem)
    load = os.getloadavg()
    results = []
    for name in args.project:
        started = time.monotonic()
        results.append(compare(name, n=args.n, seed=args.seed, time_budget=args.time_budget,
                               on_first=args.on_first))
        r = results[-1]
        print(f"| {name} | off | {r['off']['kept']} | {r['off']['attempted']} | {r['off']['elapsed_seconds']} | "
              f"{r['off']['timed_out_runs']} / {r['off']['timed_out_seconds']} | {r['off']['tasks_per_minute']} |")
        print(f"| {name} | on | {r['on']['kept']} | {r['on']['attempted']} | {r['on']['elapsed_seconds']} | "
              f"{r['on']['timed_out_runs']} / {r['on']['timed_out_seconds']} | {r['on']['tasks_per_minute']} | "
              f"x{r['throughput_ratio']} | same tasks: {r['same_tasks']} | {time.monotonic() - started:.0f} s",
              flush=True)
    summary = {"load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()],
               "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
