"""Benchmark 5: SWE-SYNTH task generation rate and yield, per bug type.

The SWE-SYNTH generator (:func:`termgym.factory.swesynth.generate.generate`, what ``termgym swesynth
generate`` runs) works on a bundled corpus project with every procedural bug type, two workers
and a fixed seed. Each attempt mutates the source, runs the test suite (twice when the bug is
kept) and writes a bug report. Overall: validated tasks per minute of wall time (the clean
baseline runs included) and yield (kept / attempted).

Per bug type: the generator's plan is deterministic and bug types take turns, so the attempts it
counted are re-derived from the same plan (:func:`~termgym.factory.swesynth.inject.plan_attempts`)
and the kept tasks are matched to them by attempt index. A type's tasks per minute apportions the
run's time by its share of attempts (an estimate: attempts that fail fast cost less).
"""

from __future__ import annotations

from benchmarks.common import Context, Section, Table, generate_corpus_tasks
from benchmarks.plots import grouped_bars

NAME = "generation"
TITLE = "SWE-SYNTH task generation rate and yield"
SEED = 11


def attempted_types(project: str, seed: int, attempted: int) -> list[list[str]]:
    """The bug types of the first ``attempted`` planned attempts (as ``generate`` planned them)."""
    from termgym.factory.swesynth.bundle import corpus_projects
    from termgym.factory.swesynth.generate import _procedural
    from termgym.factory.swesynth.inject import check_bug_types, plan_attempts, scan_repository
    from termgym.tasks.swesynth.tree import list_source_files

    info = corpus_projects()[project]
    sources = list_source_files(info["path"], info["source_dirs"], info["test_dirs"])
    types = check_bug_types(None)
    files, candidates = scan_repository(info["path"], sources, [t for t in types if t in _procedural()])
    out = []
    for attempt in plan_attempts(candidates, seed, files=files, bug_types=types, max_bugs=1,
                                 limit=max(50, 25 * attempted)):
        if len(out) == attempted:
            break
        out.append((attempt.index, attempt.bug_types))
    return out


def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, __doc__.split("\n\n", 1)[1].strip())
    project = ctx.generation_project
    n = 2 if ctx.quick else 16
    out = ctx.scratch / "generated-suite"
    ctx.log(f"  generating {n} tasks from corpus project {project!r}")
    result = generate_corpus_tasks(project, out, n=n, seed=SEED)
    if ctx.generated_suite is None:
        ctx.generated_suite = out
    stats = result.stats
    overall = Table(f"Corpus project `{project}`, {n} tasks wanted, seed {SEED}, 2 workers",
                    ["kept", "attempted", "yield", "tasks per minute", "wall s", "baseline s (one test run)",
                     "required tests", "candidates"])
    overall.add(stats.kept, stats.attempted, f"{100 * stats.yield_rate:.0f}%", f"{stats.tasks_per_minute:.2f}",
                f"{stats.elapsed:.1f}", f"{stats.baseline_seconds:.2f}", stats.required_tests, stats.candidates)
    section.tables.append(overall)
    if stats.rejected:
        reasons = Table("Rejected attempts by reason", ["reason", "count"])
        for reason, count in sorted(stats.rejected.items(), key=lambda kv: -kv[1]):
            reasons.add(reason, count)
        section.tables.append(reasons)

    plan = attempted_types(project, SEED, stats.attempted)
    kept_by_index = {record.generator.get("attempt"): record for record in result.records}
    per_type: dict[str, dict[str, int]] = {}
    for index, types in plan:
        for bug_type in types:
            row = per_type.setdefault(bug_type, {"attempted": 0, "kept": 0})
            row["attempted"] += 1
            row["kept"] += int(index in kept_by_index)
    matched = sum(row["kept"] for row in per_type.values())
    if matched != stats.kept:
        section.notes.append(f"Only {matched} of {stats.kept} kept tasks matched the re-derived plan; the per-type "
                             "table is incomplete (did the generator's planning change?).")
    table = Table("Per bug type", ["bug type", "attempted", "kept", "yield", "tasks per minute (est.)"])
    minutes = stats.elapsed / 60
    for bug_type, row in sorted(per_type.items(), key=lambda kv: (-kv[1]["kept"], kv[0])):
        share = row["attempted"] / max(stats.attempted, 1)
        rate = row["kept"] / (minutes * share) if share and minutes else 0.0
        table.add(bug_type, row["attempted"], row["kept"], f"{100 * row['kept'] / row['attempted']:.0f}%",
                  f"{rate:.2f}")
    section.tables.append(table)
    section.data = {"stats": stats.to_dict(), "per_type": per_type, "project": project, "seed": SEED}
    path = ctx.out_dir / "generation.png"
    names = sorted(per_type)
    grouped_bars(path, f"SWE-SYNTH generation on {project}: attempts and kept tasks per bug type", names,
                 {"attempted": [per_type[t]["attempted"] for t in names], "kept": [per_type[t]["kept"] for t in names]},
                 "count")
    section.plots.append(path.name)
    return section
