"""Measure SWE-SYNTH's bug operators on a repository: candidates, breakage, and what the traceback shows.

For each bug type: how many candidates (a coordinated bug counts once) the repository offers, and
for up to ``--per-type`` of them (drawn with a seed): whether the bug makes at least one passing
test fail, and, among those that do, the share whose failure report shows a changed line, whose
failing test file names the buggy module, whose test reaches the bug from another module, and the
difficulty tiers (:mod:`termgym.factory.swesynth.bugs.signals`). Tests run on the host with the
given command (measurement only; graded tasks run in the sandbox runtime).

    python -m benchmarks.bug_operators termgym_data/swesynth/toy/ledgerly \\
        --test-command "python -m pytest -q" --types hard --per-type 12
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

from termgym.factory.swesynth.bugs.callgraph import ModuleMap
from termgym.factory.swesynth.bugs.signals import difficulty_tier, task_signals
from termgym.factory.swesynth.bugs.source import check_unit, units
from termgym.factory.swesynth.inject import HARD_TYPES, PROCEDURAL_TYPES, mutate_files, scan_repository
from termgym.factory.swesynth.patches import make_patch
from termgym.factory.swesynth.validate import run_tests
from termgym.tasks.swesynth.tree import copy_tree, list_source_files


def measure(repo: Path, test_command: str, types: list[str], per_type: int, seed: int,
            source_dirs: list[str], test_dirs: list[str], log=print) -> dict:
    sources = list_source_files(repo, source_dirs, test_dirs)
    files, candidates = scan_repository(repo, sources, types)
    by_type: dict[str, list] = {t: [] for t in types}
    for unit in units(sorted(candidates, key=lambda m: (m.bug_type, m.group, m.path, m.start, m.end))):
        by_type[unit[0].bug_type].append(unit)
    modules = ModuleMap.of_directory(repo)
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="termgym-bugops-") as tmp:
        work = Path(tmp) / "repo"
        copy_tree(repo, work)
        clean = run_tests(work, test_command, timeout=600)
        passing = clean.passed
        if not passing:
            raise RuntimeError(f"no test passes in {repo} with {test_command!r}:\n{clean.output[-1500:]}")
        for t in types:
            pool = [u for u in by_type[t]]
            random.Random(f"{seed}:{t}").shuffle(pool)
            row = {"candidates": len(pool), "tried": 0, "broke": 0, "shows_line": 0, "names_module": 0,
                   "cross_module": 0, "tiers": Counter(), "edits": Counter()}
            for unit in pool:
                if row["tried"] >= per_type:
                    break
                if not check_unit(files, unit):
                    continue
                row["tried"] += 1
                mutated = mutate_files(files, unit)
                try:
                    for path, text in mutated.items():
                        (work / path).write_text(text, encoding="utf-8")
                    result = run_tests(work, test_command, timeout=120)
                finally:
                    for path in mutated:
                        (work / path).write_text(files[path], encoding="utf-8")
                failing = sorted(t_id for t_id in passing if result.outcomes.get(t_id) != "passed")
                if not failing or result.timed_out:
                    continue
                patch = make_patch({p: files[p] for p in mutated}, mutated)
                failure = result.messages if any(f in result.messages for f in failing) else result.output
                signals = task_signals(patch, failing, failure, repo=repo, modules=modules)
                row["broke"] += 1
                row["shows_line"] += signals["traceback_shows_line"]
                row["names_module"] += signals["test_file_names_module"]
                row["cross_module"] += bool(signals["cross_module"])
                row["tiers"][difficulty_tier(signals)] += 1
                row["edits"][signals["edits"]] += 1
            log(f"  {t}: {row['candidates']} candidates, {row['broke']}/{row['tried']} break a test, "
                f"{row['shows_line']} show the line, {row['names_module']} name the module, "
                f"tiers {dict(row['tiers'])}")
            out[t] = {k: dict(v) if isinstance(v, Counter) else v for k, v in row.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--test-command", default=f"{sys.executable} -m pytest -q")
    parser.add_argument("--types", default="hard", help="'hard', 'all' or a comma-separated list")
    parser.add_argument("--per-type", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source-dir", action="append", default=[])
    parser.add_argument("--test-dir", action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    types = list(HARD_TYPES) if args.types == "hard" else list(PROCEDURAL_TYPES) if args.types == "all" \
        else args.types.split(",")
    if not args.repo.is_dir():
        parser.error(f"{args.repo} is not a directory")
    result = measure(args.repo, args.test_command, types, args.per_type, args.seed, args.source_dir, args.test_dir)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
