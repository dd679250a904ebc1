"""Honest fixes do not lose to the behaviour check: correct fixes written differently from the oracle
(the fixed functions rewritten in another style by ``benchmarks/behaviour_check.py``) score 1 on real
bundled tasks, in real sandboxes. The measurement over many tasks: ``python -m benchmarks.behaviour_check``."""

from __future__ import annotations

import pytest

from benchmarks.behaviour_check import _normalised, alternative_fix_patch, rewrite_function
from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.task import prepare_workspace

#: Toy tasks with a behaviour check whose fixed functions take each kind of rewrite.
TASKS = ["ledgerly-03e7642999", "ledgerly-080f8f80d8", "ledgerly-0501e45db5"]


def test_rewrites_change_the_text_not_the_meaning():
    source = ("def f(x):\n    total = x + 1\n    return total\n\n"
              "def g(x):\n    return 'a' if x else 'b'\n\n"
              "def h(x):\n    \"\"\"Doc.\"\"\"\n    print(x)\n    return x\n")
    namespace: dict = {}
    for name in ("f", "g", "h"):
        start, end, text = rewrite_function(source, name)
        assert text != "\n".join(source.splitlines()[start - 1:end]) + "\n"
        exec(text, namespace)  # noqa: S102 - the rewritten function, run to compare with the original
    exec(source, original := {})  # noqa: S102
    for name, arg in (("f", 1), ("g", 0), ("g", 1), ("h", 3)):
        assert namespace[name](arg) == original[name](arg)
    assert "total_alt" in rewrite_function(source, "f")[2]
    assert "if x:" in rewrite_function(source, "g")[2]
    assert "_alt_body" in rewrite_function(source, "h")[2]
    # no closure when the body assigns an argument (it would turn local to the helper)
    assert rewrite_function("def k(v):\n    if v:\n        v = 1\n", "k") is None


@pytest.mark.parametrize("task_id", TASKS)
def test_an_alternative_correct_fix_scores_one(task_id, tmp_path):
    task = default_suite("toy", cache_dir=tmp_path).load(task_id)
    assert task.record.behaviour, f"{task_id} lost its behaviour check"
    patch = alternative_fix_patch(task, prepare_workspace(task.record, tmp_path))
    assert patch and _normalised(patch) != _normalised(task.record.fix_patch)
    with FreshSandboxes("local") as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    n = len(task.record.behaviour["inputs"])
    assert details["all_passed"] and details["behaviour"] == f"{n}/{n}", details


def test_the_heldout_backfill_marks_older_checks_and_resumes(tmp_path, capsys):
    """`termgym swesynth behaviour --heldout` on a suite of two task folders whose checks lost their
    marks: the tests run under the recorder in real sandboxes, the same inputs come back held out,
    and a second run finds nothing to do."""
    import json
    import shutil

    from termgym.cli import main
    from termgym.tasks.swesynth import default_suite
    from termgym.tasks.swesynth.behaviour import servable

    toy = default_suite("toy")
    ids = sorted(toy.task_ids("all"))[:2]
    root = tmp_path / "suite"
    (root / "tasks").mkdir(parents=True)
    for task_id in ids:
        folder = toy._folders[task_id]
        shutil.copytree(folder, root / "tasks" / task_id)
        repo = (folder / json.loads((folder / "task.json").read_text())["repo_dir"]).resolve()
        link = (root / "tasks" / task_id / json.loads((folder / "task.json").read_text())["repo_dir"])
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(repo)
    before = {}
    for task_id in ids:
        path = root / "tasks" / task_id / "behaviour.json"
        line = json.loads(path.read_text())
        before[task_id] = line["behaviour"].pop("heldout")
        path.write_text(json.dumps(line))
    assert main(["swesynth", "behaviour", "--suite", str(root / "tasks"), "--heldout", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["checked"] == 2 and stats["servable"] == 2, stats
    for task_id in ids:
        check = json.loads((root / "tasks" / task_id / "behaviour.json").read_text())["behaviour"]
        assert sorted(check["heldout"]) == sorted(before[task_id]) and servable(check), task_id
    assert main(["swesynth", "behaviour", "--suite", str(root / "tasks"), "--heldout", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["checked"] == 0 and again["skipped"] == 2, again


def test_retry_with_a_reason_records_again_only_the_tasks_that_reason_left_without_a_check(tmp_path, capsys):
    """`--retry --reason TEXT`: after the recorder learnt to pickle what it could not (a ``self`` made
    again from its constructor call), only the tasks whose recorded reason says so are recorded again."""
    import json
    import shutil

    from termgym.cli import main
    from termgym.tasks.swesynth import default_suite

    toy = default_suite("toy")
    ids = sorted(toy.task_ids("all"))[:2]
    root = tmp_path / "suite"
    (root / "tasks").mkdir(parents=True)
    reasons = {ids[0]: "no call into the changed functions had replayable arguments: 3 calls: self (x.Y) does not pickle",
               ids[1]: "no recorded or perturbed input is answered differently by the buggy code"}
    for task_id in ids:
        folder = toy._folders[task_id]
        shutil.copytree(folder, root / "tasks" / task_id)
        repo_dir = json.loads((folder / "task.json").read_text())["repo_dir"]
        link = root / "tasks" / task_id / repo_dir
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to((folder / repo_dir).resolve())
        (root / "tasks" / task_id / "behaviour.json").write_text(
            json.dumps({"task_id": task_id, "behaviour": None, "reason": reasons[task_id]}))
    assert main(["swesynth", "behaviour", "--suite", str(root / "tasks"), "--reason", "does not pickle"]) == 1
    assert "give one of them too" in capsys.readouterr().err
    assert main(["swesynth", "behaviour", "--suite", str(root / "tasks"), "--retry", "--reason", "does not pickle",
                 "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["skipped"] == 1 and stats["checked"] == 1, stats
    assert json.loads((root / "tasks" / ids[0] / "behaviour.json").read_text())["behaviour"]
    assert json.loads((root / "tasks" / ids[1] / "behaviour.json").read_text())["behaviour"] is None
