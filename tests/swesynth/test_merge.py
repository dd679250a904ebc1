"""`termgym swesynth merge`: tasks mined elsewhere (release history, another generate run) join a
compact suite without touching its other tasks; a project run another way is refused, naming what differs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from termgym.cli import main
from termgym.factory.swesynth.merge import MergeError, merge_suites
from termgym.tasks.swesynth.suite import SUITE_V2_DIR, SweSynthSuite

PROJECT = "addict"


def _part(root: Path, lines: list[dict], checks: list[dict], extra_index: dict | None = None) -> Path:
    """A compact suite of ``PROJECT`` holding only ``lines`` (the v2 suite's own records)."""
    index = json.loads((SUITE_V2_DIR / "suite.json").read_text())
    info = index["repos"][PROJECT]
    (root / "records").mkdir(parents=True)
    (root / "behaviour").mkdir()
    (root / "baselines").mkdir()
    (root / "selection").mkdir()
    (root / info["records"]).write_text("".join(json.dumps(line) + "\n" for line in lines))
    (root / "behaviour" / f"{PROJECT}.jsonl").write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in checks))
    shutil.copy(SUITE_V2_DIR / info["baseline"], root / info["baseline"])
    selection = json.loads((SUITE_V2_DIR / "selection" / f"{PROJECT}.json").read_text())
    ids = {line["task_id"] for line in lines}
    selection["tasks"] = {tid: sel for tid, sel in selection["tasks"].items() if tid in ids}
    (root / "selection" / f"{PROJECT}.json").write_text(json.dumps(selection))
    splits = {"train": sorted(ids), "test": []}
    (root / "suite.json").write_text(json.dumps({"name": root.name, "version": index["version"], "storage": "compact",
                                                 "repos": {PROJECT: info}, "splits": splits, **(extra_index or {})}))
    return root


@pytest.fixture
def halves(tmp_path):
    records = [json.loads(line) for line in (SUITE_V2_DIR / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    checks = [json.loads(line) for line in (SUITE_V2_DIR / "behaviour" / f"{PROJECT}.jsonl").read_text().splitlines()]
    half = len(records) // 2
    first, second = {r["task_id"] for r in records[:half]}, {r["task_id"] for r in records[half:]}
    dst = _part(tmp_path / "dst", records[:half], [c for c in checks if c["task_id"] in first])
    src = _part(tmp_path / "src", records[half:], [c for c in checks if c["task_id"] in second],
                {"history": {PROJECT: {"to_version": "2.4.0", "kept": len(second)}}})
    return src, dst, records


def test_the_tasks_of_one_suite_join_another_with_their_checks_selections_and_splits(halves):
    from termgym.factory.swesynth.bundle import named_share

    src, dst, records = halves
    index = json.loads((dst / "suite.json").read_text())
    (dst / "suite.json").write_text(json.dumps({**index, "named_share": named_share(dst)}))
    before = set(SweSynthSuite(dst, behaviour="any", distinct=False).task_ids("all"))
    assert merge_suites(src, dst, dry_run=True).added == {PROJECT: len(records) - len(before)}
    assert set(SweSynthSuite(dst, behaviour="any", distinct=False).task_ids("all")) == before  # nothing written
    result = merge_suites(src, dst)
    assert result.added == {PROJECT: len(records) - len(before)} and not result.selection_missing
    merged = SweSynthSuite(dst, behaviour="any", distinct=False)
    assert set(merged.task_ids("all")) == {r["task_id"] for r in records}
    new = [r["task_id"] for r in records if r["task_id"] not in before]
    assert all(merged.record(tid).behaviour for tid in new if tid in {
        json.loads(line)["task_id"] for line in (src / "behaviour" / f"{PROJECT}.jsonl").read_text().splitlines()})
    selection = json.loads((dst / "selection" / f"{PROJECT}.json").read_text())["tasks"]
    theirs = json.loads((src / "selection" / f"{PROJECT}.json").read_text())["tasks"]
    assert all(selection[tid] == theirs[tid] for tid in new if tid in theirs)
    index = json.loads((dst / "suite.json").read_text())
    assert sum(result.splits.values()) == len(new) and set(result.splits) <= {"train", "test_id"}
    assert index["history"][PROJECT] == [{"to_version": "2.4.0", "kept": len(new)}]
    assert index["named_share"] == named_share(dst) and index["named_share"]["tasks"] == len(records)
    again = merge_suites(src, dst)  # a second merge finds every task there already
    assert again.added == {PROJECT: 0} and again.same == {PROJECT: len(new)}


def test_a_project_run_another_way_is_refused_and_nothing_is_written(halves):
    src, dst, _records = halves
    baseline = src / "baselines" / f"{PROJECT}.json"
    tests = json.loads(baseline.read_text())
    tests["tests"][0] = "tests/test_addict.py::a_test_only_the_source_has"
    baseline.write_text(json.dumps(tests))
    records_before = (dst / "records" / f"{PROJECT}.jsonl").read_text()
    with pytest.raises(MergeError, match=r"project addict: the baselines differ \(1 only in the source "
                                         r"\(first: tests/test_addict.py::a_test_only_the_source_has\)"):
        merge_suites(src, dst)
    assert (dst / "records" / f"{PROJECT}.jsonl").read_text() == records_before
    index = json.loads((src / "suite.json").read_text())
    index["repos"][PROJECT]["test_command"] += " -x"
    (src / "suite.json").write_text(json.dumps(index))
    with pytest.raises(MergeError, match="project addict: test_command differs"):
        merge_suites(src, dst)


def test_an_id_the_destination_holds_with_another_record_is_refused(halves):
    src, dst, _records = halves
    path = src / "records" / f"{PROJECT}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    clash = json.loads((dst / "records" / f"{PROJECT}.jsonl").read_text().splitlines()[0])
    # the same bug made again with another report: the suite has that bug already, nothing moves
    path.write_text("".join(json.dumps(line) + "\n" for line in [*lines, {**clash, "problem_statement": "again"}]))
    assert merge_suites(src, dst, dry_run=True).same_bug == {PROJECT: 1}
    other = {**clash, "bug": {**clash["bug"], "patch": clash["bug"]["patch"] + "\n"}}
    path.write_text("".join(json.dumps(line) + "\n" for line in [*lines, other]))
    with pytest.raises(MergeError, match=f"task {clash['task_id']}: .* holds another record under that id"):
        merge_suites(src, dst)
    with pytest.raises(MergeError, match="cannot be merged into itself"):
        merge_suites(dst, dst)


def test_the_command_line_says_what_moved_and_what_was_wrong(halves, tmp_path, capsys):
    src, dst, _records = halves
    assert main(["swesynth", "merge", str(src), "--into", str(dst), "--dry-run"]) == 0
    assert f"would merge {len(json.loads((src / 'suite.json').read_text())['splits']['train'])} task(s)" in \
        capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["swesynth", "merge", str(tmp_path / "empty"), "--into", str(dst)]) == 1
    assert "no suite.json" in capsys.readouterr().err


def test_no_function_passes_the_cap_and_the_merged_generation_is_counted(tmp_path):
    """A merge keeps the destination's per-function cap (the bundled suite's: 10): with a cap of 1 no
    merged task breaks a function another task already breaks with a fix of the same size (one
    token, or larger), and what was left out is counted;
    the card's generation totals count what was merged."""
    from termgym.factory.swesynth.card import _generation
    from termgym.factory.swesynth.known import cap_keys as _functions

    records = [json.loads(line) for line in (SUITE_V2_DIR / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    # a task split out of a multi-bug one stands in for its source at the cap (known.function_load):
    # only tasks made as they are, whose functions each count once, here
    records = [r for r in records if not (r.get("origin") or {}).get("split_from")]
    dst = _part(tmp_path / "dst", records[:2], [])
    src = _part(tmp_path / "src", records[2:], [], {"generation": {PROJECT: {
        "seed": 5, "version": 1, "kept": 99, "attempted": 120, "elapsed_seconds": 60.0}}})
    index = json.loads((src / "suite.json").read_text())
    before = [json.loads(line) for line in (dst / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    taken = set().union(*map(_functions, before))
    result = merge_suites(src, dst, max_per_function=1)
    after = [json.loads(line) for line in (dst / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    merged = after[len(before):]
    assert result.over_cap[PROJECT] > 0 and len(merged) == result.added[PROJECT] > 0
    assert not any(_functions(line) & taken for line in merged)
    assert len(set().union(*map(_functions, merged))) == sum(len(_functions(line)) for line in merged)
    assert len(merged) + result.over_cap[PROJECT] == len(index["splits"]["train"])
    totals = _generation(json.loads((dst / "suite.json").read_text()))
    assert totals["kept"] == len(merged) and totals["seeds"] == [5]


def test_a_task_split_out_of_a_multi_bug_task_stands_in_for_it_under_the_cap(tmp_path):
    """A single-bug task split out of a multi-bug one (``termgym swesynth split``) takes that task's
    place at the function it breaks: under a cap of 1 it is merged although its source breaks the
    function already; a second one there is over the cap; the card counts the same way."""
    from termgym.factory.swesynth.known import bug_functions as _functions
    from termgym.factory.swesynth.known import function_load, line_fix_size

    records = [json.loads(line) for line in (SUITE_V2_DIR / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    source = next(r for r in records if len(_functions(r)) >= 2)
    first = source["bug"]["mutations"][0]
    split = {**source, "task_id": f"{PROJECT}-split000001", "origin": {"split_from": [source["task_id"]]},
             "bug": {**source["bug"], "mutations": [first], "patch": source["bug"]["patch"] + "\n"}}
    twin = {**split, "task_id": f"{PROJECT}-split000002", "bug": {**split["bug"], "patch": split["bug"]["patch"] + "\n"}}
    source_key = (first["path"], first["function"], line_fix_size(source))
    key = (first["path"], first["function"], line_fix_size(split))
    assert function_load([source])[source_key] == 1 and function_load([source, split])[key] == 1
    assert function_load([source, split, twin])[key] == 2
    assert function_load([source, {**split, "origin": {}}])[key] == 2  # sabotage: no stand-in, the source counts
    dst = _part(tmp_path / "dst", [source], [])
    src = _part(tmp_path / "src", [split, twin], [])
    result = merge_suites(src, dst, max_per_function=1)
    assert result.added == {PROJECT: 1} and result.over_cap == {PROJECT: 1}
    lines = [json.loads(line) for line in (dst / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    assert [line["task_id"] for line in lines] == [source["task_id"], split["task_id"]]
    assert max(function_load(lines).values()) == 1


def test_selections_come_from_the_destinations_map_when_the_maps_differ(halves):
    """A source traced another way (its map's functions differ) still gives every merged task a
    test selection: computed from the destination's own map, as a fresh backfill would."""
    from termgym.tasks.swesynth.selection import load_map, task_selection

    src, dst, records = halves
    path = src / "selection" / f"{PROJECT}.json"
    theirs = json.loads(path.read_text())
    path.write_text(json.dumps({**theirs, "functions": {}, "tasks": {t: "full" for t in theirs["tasks"]}}))
    result = merge_suites(src, dst)
    assert not result.selection_missing, result.selection_missing
    cmap = load_map(dst / "selection" / f"{PROJECT}.json")
    merged = SweSynthSuite(dst, behaviour="any", distinct=False)
    assert set(cmap.tasks) == {r["task_id"] for r in records}
    assert all(cmap.tasks[t] == task_selection(cmap, merged.record(t)) for t in theirs["tasks"])


def test_two_merged_tasks_breaking_one_function_count_against_each_other(tmp_path):
    """The cap counts what this merge already took, not only what the destination held: of two new
    tasks breaking the same function under a cap of 1, one is merged and one is over the cap."""
    from termgym.factory.swesynth.known import bug_functions as _functions

    records = [json.loads(line) for line in (SUITE_V2_DIR / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    first = records[0]
    other = next(r for r in records if not _functions(r) & _functions(first))
    twin = {**first, "task_id": f"{PROJECT}-twin000001", "bug": {**first["bug"], "patch": first["bug"]["patch"] + "\n"}}
    dst = _part(tmp_path / "dst", [other], [])
    src = _part(tmp_path / "src", [first, twin], [])
    result = merge_suites(src, dst, max_per_function=1)
    assert result.added == {PROJECT: 1} and result.over_cap == {PROJECT: 1}


def test_the_cap_counts_one_token_and_larger_fixes_of_a_function_apart(tmp_path, monkeypatch):
    """A function full of one-token fixes still takes a bug with a larger fix (a dropped guard, two
    statements swapped), up to the cap again; sabotage: with one size for every fix, the larger
    fix is over the cap."""
    from termgym.factory.swesynth import known
    from termgym.factory.swesynth.known import bug_functions as _functions
    from termgym.factory.swesynth.known import function_load

    records = [json.loads(line) for line in (SUITE_V2_DIR / "records" / f"{PROJECT}.jsonl").read_text().splitlines()]
    small = next(r for r in records if len(_functions(r)) == 1 and known.line_fix_size(r) == "one token"
                 and not (r.get("origin") or {}).get("split_from"))

    def larger(n):
        return {**small, "task_id": f"{PROJECT}-larger{n:05d}", "signals": {**small["signals"], "tokens_changed": 6},
                "bug": {**small["bug"], "patch": small["bug"]["patch"] + "\n" * n}}

    (path, function), = _functions(small)
    assert function_load([small, larger(1)]) == {(path, function, "one token"): 1, (path, function, "larger"): 1}
    for sabotaged in (False, True):
        if sabotaged:
            monkeypatch.setattr(known, "fix_size", lambda tokens: "any")
        dst = _part(tmp_path / f"dst{sabotaged}", [small], [])
        src = _part(tmp_path / f"src{sabotaged}", [larger(1), larger(2)], [])
        result = merge_suites(src, dst, max_per_function=1)
        if sabotaged:
            assert result.added == {PROJECT: 0} and result.over_cap == {PROJECT: 2}
        else:
            assert result.added == {PROJECT: 1} and result.over_cap == {PROJECT: 1}


def test_a_history_batch_counts_only_the_suite_s_history_tasks_against_its_cap():
    """``history --extends``: every task of the suite is a bug the batch skips, but only its
    release-history tasks fill the per-function cap (a function with procedural bugs still takes
    a revert to an earlier release); sabotage: counting every task, the procedural ones fill it."""
    from termgym.factory.swesynth.history import is_history
    from termgym.factory.swesynth.known import function_load, known_bugs, record_lines

    project = "schedule"
    lines = record_lines(SUITE_V2_DIR / "records" / f"{project}.jsonl")
    history = [line for line in lines if is_history(line)]
    assert history and len(history) < len(lines)
    known = known_bugs(SUITE_V2_DIR, project, load_of=is_history)
    assert known.task_ids == {line["task_id"] for line in lines}
    assert known.load == function_load(history) and sum(known.load.values()) < sum(function_load(lines).values())
    assert known_bugs(SUITE_V2_DIR, project).load == function_load(lines)
