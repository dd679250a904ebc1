"""Building the bundled SWE-SYNTH suites: the real-project default suite and the toy suite.

``termgym swesynth bundle`` (or :func:`build_suite`) runs the generator over the bundled projects
(:mod:`~termgym.tasks.swesynth.projects`: pinned PyPI sdists with their licences and a provisioned
test environment each) into the compact storage (:mod:`~termgym.tasks.swesynth.store`), several
projects at a time. Splits are held out by project:

* ``train`` — most tasks of the training projects;
* ``test_id`` — the other tasks of the training projects (in-distribution evaluation, by id hash);
* ``test`` — every task of the held-out projects, which never appear in ``train``.

Each project's generation summary (candidates tried, kept, rejected by reason, seconds) lands in
``suite.json`` and in ``SUMMARY.md`` next to it (:func:`summary_markdown`), which also feeds the
table in ``docs/swesynth.md``. :func:`build_default_suite` rebuilds the toy suite from the toy
projects (``termgym_data/swesynth/toy``) as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.generate import GenerationResult, Stats, generate
from termgym.factory.swesynth.known import MAX_TASKS_PER_FUNCTION
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.store import locked_index, split_for
from termgym.tasks.swesynth.suite import BUNDLED_DIR, SUITE_DIR

#: Tasks per toy project and the seed of each (task ids are stable while the corpus is).
DEFAULT_TASKS_PER_PROJECT = 150
DEFAULT_SEED = 2024
#: The toy projects the toy suite is generated from.
DEFAULT_PROJECTS: tuple[str, ...] = ("ledgerly", "planwise")
#: How the default real-project suite (``SUITE_DIR``, the v2 suite) is made: up to 200 tasks
#: wanted per project (no project passes 8 % of a 2,500-task suite), named-module tasks kept
#: (``SUITE_MAX_NAMED_SHARE``; docs/swesynth.md says why), at most 10 tasks per function.
SUITE_NAME = "swesynth-projects"
SUITE_TASKS_PER_PROJECT = 200
#: Share of the training projects' tasks in ``test_id``; share of projects held out for ``test``.
TEST_ID_FRACTION = 0.12
HELD_OUT_FRACTION = 0.25
#: The largest share of tasks whose failing test file is named after the buggy module, when capped
#: (``--max-named-share``; the v1 suite was built with it).
MAX_NAMED_SHARE = 0.5
#: The default suite keeps named-module tasks (1 turns the cap off): most projects name their test
#: files after their modules, so the cap would throw most validated tasks away.
SUITE_MAX_NAMED_SHARE = 1.0
SUMMARY_FILE = "SUMMARY.md"


def held_out_projects(names: Sequence[str], fraction: float = HELD_OUT_FRACTION) -> list[str]:
    """The projects whose tasks form the ``test`` split: a fixed hash order, so the choice does
    not depend on which other projects exist beyond their count."""
    ordered = sorted(names, key=lambda n: hashlib.sha256(f"held-out:{n}".encode()).hexdigest())
    return sorted(ordered[:max(1, round(fraction * len(names)))]) if len(names) > 1 else []


def _task_ids(out: Path, index: dict[str, Any]) -> dict[str, list[str]]:
    """Each project's task ids in the compact suite ``out`` (read from its records file once)."""
    found: dict[str, list[str]] = {}
    for name, repo in (index.get("repos") or {}).items():
        path = out / repo.get("records", f"records/{name}.jsonl")
        found[name] = [json.loads(line)["task_id"] for line in path.read_text(encoding="utf-8").splitlines()
                       if line.strip()] if path.is_file() else []
    return found


def _projects_in_test(index: dict[str, Any], task_ids: dict[str, list[str]]) -> set[str]:
    """Projects with a task in the suite's ``test`` split."""
    test_ids = set((index.get("splits") or {}).get("test") or [])
    return {name for name, ids in task_ids.items() if test_ids.intersection(ids)}


def stable_held_out(out: str | Path, names: Sequence[str], fraction: float = HELD_OUT_FRACTION) -> list[str]:
    """The held-out projects of a build into ``out``, stable as projects are added to a suite.

    A new suite takes :func:`held_out_projects` of all ``names``. A suite that exists keeps what it
    decided: a project with tasks is held out exactly when its tasks are in ``test``, a project it
    ran without tasks as its ``held_out_projects`` says; a project it never ran is held out when its
    name's hash falls in the lowest ``fraction`` (a rule that looks at no other project, so adding
    projects never moves one from ``train`` to ``test`` or back)."""
    out = Path(out)
    index_path = out / "suite.json"
    index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.is_file() else {}
    if not index.get("generation") and not index.get("repos"):
        return held_out_projects(names, fraction)
    task_ids = _task_ids(out, index)
    in_test = _projects_in_test(index, task_ids)
    recorded = set(index.get("held_out_projects") or [])
    ran = set(index.get("generation") or {}) | set(task_ids)
    held = []
    for name in names:
        if name in ran:
            decided = name in in_test if task_ids.get(name) else name in recorded
        else:
            decided = hash_held_out(name, fraction)
        if decided:
            held.append(name)
    return sorted(held)


def hash_held_out(name: str, fraction: float = HELD_OUT_FRACTION) -> bool:
    """Whether a project no suite has decided for is held out: its name's hash falls in the lowest
    ``fraction`` (a rule that looks at no other project)."""
    return int(hashlib.sha256(f"held-out:{name}".encode()).hexdigest(), 16) < fraction * 16 ** 64


def project_held_out(out: str | Path, name: str, fraction: float = HELD_OUT_FRACTION) -> bool:
    """Whether project ``name``'s tasks go to ``test`` in the suite ``out`` (a suite of one more
    source of tasks, such as release history): as ``out`` already decided, else as the default
    suite decided (a project held out there stays held out everywhere), else by :func:`hash_held_out`."""
    for suite in (Path(out), SUITE_DIR):
        path = Path(suite) / "suite.json"
        index = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if name in (index.get("generation") or {}) or name in (index.get("repos") or {}):
            return name in stable_held_out(suite, [name], fraction)
    return hash_held_out(name, fraction)


def build_suite(out: str | Path = SUITE_DIR, *, projects: Sequence[str] | None = None,
                per_project: int = SUITE_TASKS_PER_PROJECT, seed: int = DEFAULT_SEED, jobs: int = 2,
                held_out: Sequence[str] | None = None, time_budget: float | None = None,
                deadline: float | None = None, stall_limit: int | None = 60,
                clean: bool = False, resume: bool = False, backend: str = "local", max_bugs: int = 2,
                import_time: str = "skip", max_named_share: float = SUITE_MAX_NAMED_SHARE,
                max_per_function: int | None = MAX_TASKS_PER_FUNCTION,
                progress: Callable[[str, Stats], None] | None = None,
                log: Callable[[str], None] | None = None) -> dict[str, GenerationResult | str]:
    """Generate up to ``per_project`` tasks from each bundled project into the compact suite ``out``.

    ``jobs`` projects run at once (each with one screening sandbox). ``held_out`` names the
    ``test`` projects (default: :func:`stable_held_out`: for a new suite :func:`held_out_projects` of
    all bundled projects; a suite that exists keeps its choices and adds new projects by hash).
    ``time_budget`` (seconds, per project) keeps what validated by then; ``deadline`` (seconds
    from now, for the whole build) gives each project, when it starts, an equal share of the time
    left (a project that stops early — enough tasks, or ``stall_limit`` candidates in a row that ran tests
    without a task — leaves its time to the later ones). ``import_time`` is
    :func:`generate`'s choice for changes to import-time code (default ``"skip"``: a full run per
    such candidate costs more than the tasks it adds). ``resume`` continues each project's earlier
    run in ``out`` (same seed; ``per_project`` then counts the tasks of both runs). ``max_named_share``
    (0 < share <= 1; 1 turns the cap off) is the largest share of tasks whose failing test file is
    named after the buggy module, per project run and over the suite. ``max_per_function`` caps
    the tasks that break any one function (``None`` turns it off). A project that fails
    (no provisioned test environment, no passing test) is reported by its error and skipped.
    Returns each project's result, or its error message.
    """
    from termgym.factory.swesynth.screen import ProjectEnv
    from termgym.tasks.swesynth.projects import load_projects, project_tree

    if not 0 < max_named_share <= 1:
        raise ValueError(f"max_named_share must be in (0, 1] (1 turns the cap off), got {max_named_share}")
    available = load_projects()
    chosen = list(projects or sorted(available))
    unknown = [p for p in chosen if p not in available]
    if unknown:
        raise KeyError(f"no bundled project {', '.join(map(repr, unknown))}; projects: {', '.join(sorted(available))}")
    if clean and resume:
        raise ValueError("clean and resume contradict each other: resume continues what clean would delete")
    out = Path(out)
    if clean and out.exists():
        shutil.rmtree(out)
    test_projects = set(held_out if held_out is not None else stable_held_out(out, sorted(available)))
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, GenerationResult | str] = {}
    lock = threading.Lock()
    t0 = time.monotonic()
    waiting = list(chosen)

    def budget_for(name: str) -> float | None:
        with lock:
            waiting.remove(name)
            left = len(waiting) + 1  # this one and those not started yet
        if deadline is None:
            return time_budget
        rounds = -(-left // max(1, jobs))
        share = max(30.0, (deadline - (time.monotonic() - t0)) / rounds)
        return min(share, time_budget) if time_budget is not None else share

    def one(name: str) -> None:
        project = available[name]
        started = time.monotonic()
        budget = budget_for(name)
        try:
            tree = project_tree(name)
            env = ProjectEnv.for_project(name, backend=backend)
            splitter = (lambda tid: "test") if name in test_projects else (
                lambda tid: split_for(tid, TEST_ID_FRACTION, "test_id"))
            result = generate(
                tree, project.test_command, n=per_project, seed=seed, out=out, name=name, workers=1,
                source_dirs=list(project.source_dirs), test_dirs=list(project.test_dirs), project_env=env,
                project=name, storage="compact", max_named_share=max_named_share, max_bugs=max_bugs,
                exclude_tests=[d.test for d in project.deselect], time_budget=budget, split=splitter,
                stall_limit=stall_limit, resume=resume, max_per_function=max_per_function,
                suite_name=SUITE_NAME, backend=backend, import_time=import_time,
                progress=(lambda s: progress(name, s)) if progress else None)
            with lock:
                results[name] = result
            clear_failure(out, name)
            if log:
                s = result.stats
                log(f"{name}: {s.kept} tasks from {s.attempted} candidates in {s.elapsed:.0f} s")
        except Exception as exc:  # one project's failure must not lose the others' tasks
            message = f"{type(exc).__name__}: {exc}"
            with lock:
                results[name] = message
            with locked_index(out) as index:
                index.setdefault("failed", {})[name] = {"error": message[:2000],
                                                        "seconds": round(time.monotonic() - started, 1)}
            if log:
                log(f"{name}: FAILED {message[:300]}")

    pyparse.serialise_every_parse()  # generate parses in each thread; so may the standard library
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="bundle") as pool:
        list(pool.map(one, chosen))
    dropped = enforce_named_share(out, max_named_share)
    if log and dropped:
        log(f"dropped {sum(dropped.values())} tasks to keep the named-module share at most "
            f"{100 * max_named_share:.0f} %: {dropped}")
    with locked_index(out) as index:
        # the projects built now, those an earlier build left in the suite, and any whose tasks are in
        # ``test`` (a concurrent build of other projects writes this too: the union loses none)
        index["held_out_projects"] = sorted((test_projects & (set(chosen) | set(index.get("repos") or {})))
                                            | _projects_in_test(index, _task_ids(out, index)))
        index["named_share"] = named_share(out)
    (out / SUMMARY_FILE).write_text(summary_markdown(out), encoding="utf-8")
    return results


def clear_failure(out: str | Path, name: str) -> None:
    """Forget an earlier run's failure of project ``name`` once a run of it has finished (the card
    and the summary list the failures still standing)."""
    with locked_index(Path(out)) as index:
        failed = index.get("failed") or {}
        if failed.pop(name, None) is not None and not failed:
            index.pop("failed", None)


def named_share(out: str | Path) -> dict[str, Any]:
    """How many tasks of a compact suite have a failing test file named after the buggy module."""
    total = named = 0
    for path in sorted((Path(out) / "records").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                total += 1
                named += bool((json.loads(line).get("signals") or {}).get("test_file_names_module"))
    return {"tasks": total, "named": named, "share": round(named / total, 3) if total else 0.0}


def enforce_named_share(out: str | Path, share: float = MAX_NAMED_SHARE) -> dict[str, int]:
    """Drop tasks whose failing test file names the buggy module until at most ``share`` of the
    suite's tasks are such; each drop takes the last named task of the project with the most named
    tasks (ties: the higher named share), so the trim evens out the projects' named counts instead
    of emptying the most named project first (which would lose a project, often a held-out one).
    Returns how many were dropped per project (also counted in its rejections)."""
    out = Path(out)
    lines: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((out / "records").glob("*.jsonl")):
        lines[path.stem] = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]

    def named(rec):
        return bool((rec.get("signals") or {}).get("test_file_names_module"))

    dropped: dict[str, int] = {}
    gone: dict[str, str] = {}
    while True:
        total = sum(len(v) for v in lines.values())
        n_named = sum(named(r) for v in lines.values() for r in v)
        if not total or n_named <= share * total:
            break
        def rank(k: str) -> tuple[int, float, str]:  # most named tasks, then the higher named share
            count = sum(named(r) for r in lines[k])
            return count, count / len(lines[k]), k

        name = max((k for k, v in lines.items() if any(named(r) for r in v)), key=rank)
        victim = next(r for r in reversed(lines[name]) if named(r))
        lines[name].remove(victim)
        dropped[name] = dropped.get(name, 0) + 1
        gone[victim["task_id"]] = "test file named after the module (suite share)"
    if gone:
        drop_tasks(out, gone)
    return dropped


def drop_tasks(out: str | Path, reasons: dict[str, str]) -> dict[str, int]:
    """Remove the tasks ``reasons`` names (task id -> why) from the compact suite ``out``: their
    record lines, their split entries and their behaviour lines go; each project's generation summary
    counts them as rejected for that reason (so ``kept`` and the yield stay true). Returns how many
    went per project."""
    out = Path(out)
    dropped: dict[str, dict[str, int]] = {}
    for path in sorted((out / "records").glob("*.jsonl")):
        rows = [(x, json.loads(x)["task_id"]) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        going = [tid for _, tid in rows if tid in reasons]
        if not going:
            continue
        per = dropped.setdefault(path.stem, {})
        for tid in going:
            per[reasons[tid]] = per.get(reasons[tid], 0) + 1
        path.write_text("".join(x + "\n" for x, tid in rows if tid not in reasons), encoding="utf-8")
        sidecar = out / "behaviour" / f"{path.stem}.jsonl"
        if sidecar.is_file():
            lines = [x for x in sidecar.read_text(encoding="utf-8").splitlines()
                     if x.strip() and json.loads(x).get("task_id") not in reasons]
            sidecar.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    if not dropped:
        return {}
    with locked_index(out) as index:
        index["splits"] = {k: [t for t in v if t not in reasons] for k, v in (index.get("splits") or {}).items()}
        for name, why in dropped.items():
            gen = index.get("generation", {}).get(name)
            if gen:
                gen["kept"] = gen.get("kept", 0) - sum(why.values())
                rejected = gen.setdefault("rejected", {})
                for reason, count in why.items():
                    rejected[reason] = rejected.get(reason, 0) + count
                gen["yield"] = round(gen["kept"] / gen["attempted"], 3) if gen.get("attempted") else 0.0
        index["named_share"] = named_share(out)
    return {name: sum(why.values()) for name, why in dropped.items()}


def summary_rows(out: str | Path) -> list[dict[str, Any]]:
    """One row per project of a compact suite: licence, size, tests, tasks, yield, difficulty mix,
    rejections and seconds (from ``suite.json``'s generation summaries and the records)."""
    out = Path(out)
    index = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    try:
        from termgym.tasks.swesynth.projects import load_projects

        projects = load_projects()
    except Exception:  # the table still renders without the project metadata
        projects = {}
    split_of = {tid: split for split, ids in (index.get("splits") or {}).items() for tid in ids}
    rows = []
    for name, gen in sorted((index.get("generation") or {}).items()):
        info = projects.get(name)
        mix = {"easy": 0, "medium": 0, "hard": 0}
        splits: dict[str, int] = {}
        named = 0
        records = out / "records" / f"{name}.jsonl"
        if records.is_file():
            for line in records.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                data = json.loads(line)
                mix[data.get("difficulty") or "medium"] = mix.get(data.get("difficulty") or "medium", 0) + 1
                named += bool((data.get("signals") or {}).get("test_file_names_module"))
                s = split_of.get(data["task_id"], "?")
                splits[s] = splits.get(s, 0) + 1
        rows.append({
            "project": name, "version": getattr(info, "version", ""), "license": getattr(info, "license", ""),
            "domain": getattr(info, "domain", ""), "lines": getattr(info, "lines", None),
            "tests": gen.get("required_tests"), "tasks": gen.get("kept", 0), "tried": gen.get("attempted", 0),
            "runs": gen.get("runs", 0), "yield": gen.get("yield", 0.0), "mix": mix, "named": named, "splits": splits,
            "rejected": gen.get("rejected", {}), "seconds": gen.get("elapsed_seconds", 0.0),
            "baseline_seconds": gen.get("baseline_seconds", 0.0), "stopped": gen.get("stopped", ""),
        })
    for name, failure in sorted((index.get("failed") or {}).items()):
        if name not in index.get("generation", {}):
            rows.append({"project": name, "failed": failure.get("error", "")})
    return rows


def summary_markdown(out: str | Path) -> str:
    """The generation summary of a compact suite as Markdown (``SUMMARY.md``, docs/swesynth.md)."""
    out = Path(out)
    index = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    rows = summary_rows(out)
    ok = [r for r in rows if "failed" not in r]
    total = sum(r["tasks"] for r in ok)
    share = named_share(out)
    split_sizes = {k: len(v) for k, v in (index.get("splits") or {}).items()}
    lines = [
        f"Suite `{index.get('name')}`: **{total} validated tasks** from **{sum(1 for r in ok if r['tasks'])} "
        f"projects** ({len(rows)} tried); splits "
        + ", ".join(f"`{k}` {v}" for k, v in sorted(split_sizes.items()))
        + f"; held-out (`test`) projects: {', '.join(index.get('held_out_projects') or []) or 'none'}.",
        f"Tasks whose failing test file is named after the buggy module: {share['named']}/{share['tasks']} "
        f"({100 * share['share']:.0f} %).",
        "",
        "| project | licence | lines | tests | tasks | tried | ran | yield | easy/medium/hard | rejected (top reasons) | seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for r in ok:
        rejected = "; ".join(f"{k} {v}" for k, v in list(r["rejected"].items())[:4]) or "-"
        lines.append(
            f"| {r['project']} {r['version']} | {r['license']} | {r['lines'] or '-'} | {r['tests']} | {r['tasks']} | "
            f"{r['tried']} | {r['runs']} | {100 * r['yield']:.0f} % | "
            f"{r['mix']['easy']}/{r['mix']['medium']}/{r['mix']['hard']} | {rejected} | {r['seconds']:.0f} |")
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['project']} | | | | 0 | | | | | failed: {r['failed'][:120]} | |")
    lines += ["", "`tried`: candidates judged; `ran`: those that ran tests (the rest were screened out by "
              "coverage or rejected before running); yield = tasks / tried."]
    return "\n".join(lines) + "\n"


def write_docs_table(out: str | Path, docs: str | Path) -> None:
    """Replace the generated table between the markers in ``docs`` (docs/swesynth.md)."""
    begin, end = "<!-- swesynth-summary:begin -->", "<!-- swesynth-summary:end -->"
    docs = Path(docs)
    text = docs.read_text(encoding="utf-8")
    table = f"{begin}\n{summary_markdown(out)}{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + table + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + table + "\n"
    docs.write_text(text, encoding="utf-8")


# -- the toy suite ------------------------------------------------------------------------------------


def corpus_projects() -> dict[str, dict[str, Any]]:
    """``{name: {"path", "test_command", "source_dirs", "test_dirs"}}`` for the toy projects."""
    from termgym.factory.swesynth.corpus import CORPUS_DIR, PROJECTS

    return {name: {"path": CORPUS_DIR / info.get("dir", name),
                   "test_command": info.get("test_command", "python3 -m pytest -q"),
                   "source_dirs": list(info.get("source_dirs", [])), "test_dirs": list(info.get("test_dirs", ["tests"]))}
            for name, info in PROJECTS.items()}


def build_default_suite(out: str | Path = BUNDLED_DIR, *, per_project: int = DEFAULT_TASKS_PER_PROJECT,
                        seed: int = DEFAULT_SEED, workers: int = 2, projects: Sequence[str] | None = None,
                        clean: bool = False, progress: Callable[[str, Stats], None] | None = None
                        ) -> dict[str, GenerationResult]:
    """Generate ``per_project`` tasks from each toy project into ``out`` (task folders, merging
    ``suite.json``). With ``clean`` the folder is emptied first; otherwise projects regenerate one
    at a time and keep the others' tasks."""
    out = Path(out)
    available = corpus_projects()
    chosen = list(projects or DEFAULT_PROJECTS)
    for name in chosen:
        if name not in available:
            raise KeyError(f"no corpus project {name!r}; projects: {', '.join(available)}")
    if clean and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in chosen:
        info = available[name]
        for folder in out.glob(f"{name}-*"):  # the project's old tasks
            shutil.rmtree(folder)
        _drop_from_index(out, name)
        results[name] = generate(
            info["path"], info["test_command"], n=per_project, seed=seed, out=out, name=name,
            workers=workers, source_dirs=info["source_dirs"], test_dirs=info["test_dirs"],
            repo_dir_ref=os.path.relpath(info["path"], out), suite_name="swesynth-default",
            progress=(lambda s, name=name: progress(name, s)) if progress else None,
        )
    return results


def _drop_from_index(out: Path, name: str) -> None:
    index = out / "suite.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text())
    prefix = f"{name}-"
    data["splits"] = {k: [t for t in v if not t.startswith(prefix)] for k, v in (data.get("splits") or {}).items()}
    index.write_text(json.dumps(data, indent=2) + "\n")
