"""Outcomes that count state (issue 41): ``termgym swesynth behaviour --outcomes`` on a copy of a real
v2 task whose check replays a constructor, in a real sandbox.

Every call of ``RenderTree.__init__`` returns None; what tells one input from another is the object it
leaves. A check whose held-out answers were counted by return value alone held one outcome ("one
constant would match them all") and was not served; answered again, the outcome counts what the call
did to ``self`` and its arguments (:func:`~termgym.tasks.swesynth.behaviour_probe.outcome_of`), the
digests that grade stay as they were, and the task is served.
"""

from __future__ import annotations

import json
import shutil

from termgym.cli import main
from termgym.tasks.swesynth import behaviour
from termgym.tasks.swesynth.suite import SUITE_V2_DIR, SweSynthSuite

TASK = "anytree-00b1b4ade4"  # RenderTree.__init__: a constructor that returns None


def _one_task_suite(tmp_path, check):
    project = TASK.rsplit("-", 1)[0]
    out = tmp_path / "suite"
    for sub in ("records", "baselines", "behaviour"):
        (out / sub).mkdir(parents=True)
    index = json.loads((SUITE_V2_DIR / "suite.json").read_text())
    line = next(text for text in (SUITE_V2_DIR / "records" / f"{project}.jsonl").read_text().splitlines()
                if json.loads(text)["task_id"] == TASK)
    (out / "records" / f"{project}.jsonl").write_text(line + "\n")
    shutil.copy(SUITE_V2_DIR / "baselines" / f"{project}.json", out / "baselines")
    (out / "behaviour" / f"{project}.jsonl").write_text(json.dumps({"task_id": TASK, "behaviour": check}) + "\n")
    (out / "suite.json").write_text(json.dumps({
        "name": "outcomes", "version": index["version"], "storage": "compact",
        "repos": {project: index["repos"][project]}, "splits": {"train": [TASK]}}))
    return out, out / "behaviour" / f"{project}.jsonl"


def test_outcomes_answered_again_count_the_state_a_constructor_leaves(tmp_path, capsys):
    stored = SweSynthSuite("v2", behaviour="any").behaviour_check_of(TASK)
    assert [t["qualname"] for t in stored["targets"]] == ["RenderTree.__init__"]
    # the outcomes as counted by return value alone: None, for every input
    by_return = {**stored, "answers": {i: {**a, "r": "0" * 64} for i, a in stored["answers"].items()}}
    root, sidecar = _one_task_suite(tmp_path, by_return)
    before = SweSynthSuite(root, behaviour="any").behaviour_check_of(TASK)
    assert not behaviour.servable(before)  # behaviour="required" would serve nothing here
    assert "one constant would match them all" in behaviour.unservable_reason(before)

    assert main(["swesynth", "behaviour", "--suite", str(root), "--outcomes", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["reanswered"] == 1 and stats["errors"] == 0, stats
    check = json.loads(sidecar.read_text().splitlines()[-1])["behaviour"]
    assert {i: a["h"] for i, a in check["answers"].items()} == {i: a["h"] for i, a in stored["answers"].items()}
    assert behaviour.heldout_outcomes(check) >= 2
    after = SweSynthSuite(root, behaviour="required")
    assert TASK in after.task_ids("all")

    assert main(["swesynth", "behaviour", "--suite", str(root), "--outcomes", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["reanswered"] == 0 and again["errors"] == 0, again
