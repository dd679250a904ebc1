"""Each function's bug alone, replayed (issue 41): ``termgym swesynth behaviour --per-bug`` on a copy of
real v2 tasks whose bug changes two functions, in real sandboxes.

The bug patch is split by changed function (:func:`~termgym.factory.swesynth.behaviour_record.bug_hunks_by_target`);
each piece alone on the clean tree is replayed, and the inputs answered unlike the clean code are
stored as that function's (``per_bug``). What a suite serves follows
(:func:`~termgym.tasks.swesynth.behaviour.servable`): before the measurement the tasks are not served,
after it exactly those whose every function has a held-out input of its own are.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess

from termgym.cli import main
from termgym.factory.swesynth.behaviour_record import bug_hunks_by_target
from termgym.tasks.swesynth import behaviour
from termgym.tasks.swesynth.suite import SUITE_V2_DIR, SweSynthSuite


def _measured(suite: SweSynthSuite) -> list[str]:
    return sorted(t for t in suite.task_ids("all")
                  if isinstance(((suite.behaviour_check_of(t) or {}).get("per_bug") or {}).get("telling"), dict))


def test_the_pieces_of_a_bug_patch_are_each_functions_bug_and_add_up_to_it(tmp_path):
    """Each piece applies alone to the clean tree and changes only its function's file; all pieces
    together give the buggy tree, byte for byte."""
    suite = SweSynthSuite("v2", behaviour="any")
    tid = random.Random(41).choice(_measured(suite))
    record = suite.record(tid)
    pieces = bug_hunks_by_target(record, suite.behaviour_check_of(tid)["targets"])
    assert pieces and len(pieces) >= 2, tid
    work = tmp_path / "tree"
    shutil.copytree(record.repo_dir, work, symlinks=True)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)

    def apply(patch: str, *flags: str) -> None:
        subprocess.run(["git", "apply", *flags, "-"], cwd=work, input=patch, text=True, check=True)

    for piece in pieces.values():
        apply(piece, "--check")
    for piece in pieces.values():
        apply(piece)
    buggy = tmp_path / "buggy"
    shutil.copytree(record.repo_dir, buggy, symlinks=True)
    subprocess.run(["git", "init", "-q"], cwd=buggy, check=True)
    subprocess.run(["git", "apply", "-"], cwd=buggy, input=record.bug_patch, text=True, check=True)
    changed = {line[6:] for line in record.bug_patch.splitlines() if line.startswith("+++ b/")}
    for path in changed:
        assert (work / path).read_bytes() == (buggy / path).read_bytes(), (tid, path)


def _copy_project(tmp_path, project: str, ids: list[str]):
    """A compact suite holding ``ids`` of one v2 project (its records, baseline and checks)."""
    out = tmp_path / "suite"
    for sub in ("records", "baselines", "behaviour"):
        (out / sub).mkdir(parents=True)
    index = json.loads((SUITE_V2_DIR / "suite.json").read_text())
    keep = set(ids)
    for sub in ("records", "behaviour"):
        lines = (SUITE_V2_DIR / sub / f"{project}.jsonl").read_text().splitlines()
        (out / sub / f"{project}.jsonl").write_text(
            "".join(line + "\n" for line in lines if json.loads(line)["task_id"] in keep))
    shutil.copy(SUITE_V2_DIR / "baselines" / f"{project}.json", out / "baselines")
    (out / "suite.json").write_text(json.dumps({
        "name": "per-bug", "version": index["version"], "storage": "compact",
        "repos": {project: index["repos"][project]}, "splits": {"train": sorted(ids)}}))
    return out


def test_per_bug_measures_each_functions_bug_alone_and_decides_what_is_served(tmp_path, capsys):
    v2 = SweSynthSuite("v2", behaviour="any")
    measured = _measured(v2)
    rng = random.Random(41)
    first = rng.choice(measured)
    project = v2.record(first).repo
    others = [t for t in measured if v2.record(t).repo == project and t != first]
    single = next(t for t in sorted(v2.task_ids("all")) if v2.record(t).repo == project
                  and len((v2.behaviour_check_of(t) or {}).get("targets") or ()) == 1
                  and behaviour.servable(v2.behaviour_check_of(t)))  # the copy must serve something
    ids = [first, rng.choice(others), single] if others else [first, single]
    multi = ids[:-1]
    stored = {t: v2.behaviour_check_of(t)["per_bug"] for t in multi}
    root = _copy_project(tmp_path, project, ids)
    sidecar = root / "behaviour" / f"{project}.jsonl"
    lines = [json.loads(line) for line in sidecar.read_text().splitlines()]
    for line in lines:
        line["behaviour"].pop("per_bug", None)
    sidecar.write_text("".join(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n" for line in lines))
    single_line = next(text for text in sidecar.read_text().splitlines() if single in text)

    before = SweSynthSuite(root, behaviour="required")
    assert not set(multi) & set(before.task_ids("all")), before.unserved  # unmeasured: not served
    assert all(behaviour.needs_per_bug(before.behaviour_check_of(t)) for t in multi)

    assert main(["swesynth", "behaviour", "--suite", str(root), "--per-bug", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["checked"] == len(multi) and stats["errors"] == 0, stats
    after = SweSynthSuite(root, behaviour="required")
    for tid in multi:
        check = after.behaviour_check_of(tid)
        # measured again here, it is what the bundled suite stores
        assert check["per_bug"] == stored[tid], tid
        assert set(check["per_bug"]["telling"]) == {behaviour.target_name(t) for t in check["targets"]}
        assert behaviour.servable(check) == (not behaviour.uncovered_targets(check))
        # served when its check decides, unless its report was marked not served (``report_fails``)
        assert (tid in after.task_ids("all")) == (behaviour.servable(check) and not after.report_problem(tid))
    assert single_line in sidecar.read_text().splitlines()  # one function: nothing to measure, untouched
    assert main(["swesynth", "behaviour", "--suite", str(root), "--per-bug", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["checked"] == 0 and again["errors"] == 0, again


def test_a_check_recorded_now_carries_each_functions_bug_alone():
    """Generation records ``per_bug`` with the check (``record_behaviour``), so a new multi-function
    task needs no backfill before it can be served."""
    from termgym.factory.swesynth.behaviour_record import record_behaviour

    v2 = SweSynthSuite("v2", behaviour="any")
    tid = random.Random(41).choice(_measured(v2))
    check = record_behaviour(v2.record(tid))
    assert not behaviour.needs_per_bug(check), tid
    telling = check["per_bug"]["telling"]
    assert set(telling) == {behaviour.target_name(t) for t in check["targets"]}, tid
    ids = {item["id"] for item in check["inputs"]}
    assert all(set(found) <= ids for found in telling.values()) and any(telling.values()), (tid, telling)
