"""What a call leaves on its arguments, as a witness that serves a check (issue 41: "where a bug
changes state rather than a return value, the check must see that state").

A constructor returns None on every input, so its held-out answers hold one outcome and one constant
return matches them all: under the outcome rule alone such a check is not served. The grade's
digest covers the arguments after the call, so a wrong ``self`` already fails the grade; what was
missing is a rule for when that state *cannot be forged cheaply*. Per leaf of the arguments after
the call (``self.size``, ``self.cache["a"]``), a check is served when one leaf's clean values, over
the held-out inputs, are given by none of: one constant (they take two or more values), the buggy
body (it leaves another value on some input), doing nothing (the value at entry differs on some
input). A cache both trees fill alike, a flag set to one value, or a leaf the clean call leaves as it
found it are not witnesses. Each clause is switched off once below and the forgery it stops is
served again (the sabotage).

The end-to-end half runs ``termgym swesynth behaviour --state`` on a copy of real v2 tasks in real
sandboxes.
"""

from __future__ import annotations

import json
import shutil

import pytest

from termgym.cli import main
from termgym.tasks.swesynth import behaviour
from termgym.tasks.swesynth import behaviour_probe as probe
from termgym.tasks.swesynth.records import RecordError
from termgym.tasks.swesynth.suite import SUITE_V2_DIR, SweSynthSuite


class Box:
    """A plain object, as a project's class instance looks to the canonical form."""


def _canonical_args(obj, *rest):
    return probe.canonical([[obj, *rest], [], {}, {}])


def test_state_leaves_name_attributes_keys_and_indices():
    box = Box()
    box.size, box.cache, box.items = 3, {"a": 1}, [True, None]
    leaves = probe.state_leaves(_canonical_args(box, 7))
    assert leaves["[0][0]@class"] == json.dumps(probe._class_name(Box))
    assert leaves["[0][0].size"] == "3" and leaves['[0][0].cache["a"]'] == "1"
    assert leaves["[0][0].items[0]"] == "true" and leaves["[0][0].items@len"] == "2"
    assert leaves["[0][1]"] == "7"


def test_state_change_reports_only_what_the_call_changed():
    box = Box()
    box.size = 3
    entry = _canonical_args(box, 7)
    assert probe.state_change(entry, entry) == ({}, False)
    box.size, box.label = 4, "new"
    change, more = probe.state_change(entry, _canonical_args(box, 7))
    assert not more and set(change) == {"[0][0].size", "[0][0].label"}
    assert change["[0][0].label"][1] == "-"  # the attribute did not exist at entry
    for _ in range(probe.MAX_STATE_LEAVES):
        box.__dict__[f"a{_}"] = _
    change, more = probe.state_change(entry, _canonical_args(box, 7))
    assert more and len(change) == probe.MAX_STATE_LEAVES


def _answer(after, entry, returned=None):
    """One replayed answer with its state change, as :func:`~termgym.tasks.swesynth.behaviour.parse_replay_output` keeps it."""
    form = {"return": returned, "raises": None, "args_after": after}
    change, more = probe.state_change(entry, after)
    return {**probe.answer_of(form), "s": change, **({"s_more": True} if more else {})}


def _call(build, values, *, tree):
    """The answers of a constructor-like call ``build(self, value, tree)`` over ``values``."""
    answers = {}
    for n, value in enumerate(values):
        box = Box()
        box.given = value  # what the caller set before the call: it differs from input to input
        entry = _canonical_args(box, value)
        build(box, value, tree)
        answers[f"i{n}"] = _answer(_canonical_args(box, value), entry)
    return answers


def _check(build, values=(1, 2, 3)):
    """A check over held-out inputs ``values``: its clean answers, telling ids and state evidence."""
    clean, buggy = _call(build, values, tree="clean"), _call(build, values, tree="buggy")
    stored = {i: {k: v for k, v in a.items() if k not in ("s", "s_more")} for i, a in clean.items()}
    ids = list(clean)
    telling = [i for i in ids if clean[i]["h"] != buggy[i]["h"]]
    check = {"telling": telling, "heldout": ids, "answers": stored}
    return {**check, "state": behaviour.state_evidence(clean, buggy, ids)}


def _stores_its_argument(box, value, tree):  # the bug: stores one less
    box.size = value if tree == "clean" else value - 1


def _fills_a_cache_alike(box, value, tree):  # the bug shows elsewhere, not in state
    box.cache = {"seen": value}


def _sets_a_flag(box, value, tree):  # one constant gives the clean value
    box.ready = tree == "clean"
    box.cache = {"seen": value}


def _leaves_state_alone(box, value, tree):  # the clean call changes nothing; the buggy one writes
    if tree == "buggy":
        box.given = value + 1


FORGEABLE = {"a cache both trees fill alike (run the buggy body)": _fills_a_cache_alike,
             "a flag set to one value (a constant)": _sets_a_flag,
             "a leaf the clean call leaves alone (do nothing)": _leaves_state_alone}


def test_a_constructor_whose_state_tells_the_bug_apart_is_served_on_its_state():
    check = _check(_stores_its_argument)
    assert behaviour.heldout_outcomes(check) == 1  # every call returns None: one outcome
    assert behaviour.state_witness(check) == ["[0][0].size"]
    assert behaviour.servable(check)
    without = {k: v for k, v in check.items() if k != "state"}
    assert not behaviour.servable(without)
    assert "one constant would match them all" in behaviour.unservable_reason(without)
    # one held-out input alone: its one value is a constant, and a constant is forgeable
    one = {**check, "heldout": ["i0"]}
    assert behaviour.state_witness(one) == [] and not behaviour.servable(one)


@pytest.mark.parametrize("name", sorted(FORGEABLE))
def test_state_a_cheap_forgery_gives_is_no_witness(name):
    check = _check(FORGEABLE[name])
    assert check["state"] == {"paths": [], "answers": {}}, name
    assert not behaviour.servable({**check, "telling": list(check["heldout"])})


@pytest.mark.parametrize("clause, name", [
    ("constant", "a flag set to one value (a constant)"),
    ("buggy", "a cache both trees fill alike (run the buggy body)"),
    ("entry", "a leaf the clean call leaves alone (do nothing)"),
])
def test_sabotage_each_clause_of_the_state_rule_stops_its_forgery(monkeypatch, clause, name):
    """With one clause of the rule switched off, the forgery it stops finds a witness again."""

    def weaker(triples):
        known = [t for t in triples if t is not None and t[0] != "?"]
        distinct = len({t[0] for t in known})
        buggy_differs = sum(1 for t in known if t[1] != "?" and t[1] != t[0])
        needs = {"constant": distinct >= 2, "buggy": buggy_differs > 0,
                 "entry": any(t[2] != "?" and t[2] != t[0] for t in known)}
        del needs[clause]
        return (distinct, buggy_differs) if known and all(needs.values()) else None

    monkeypatch.setattr(behaviour, "_state_tells", weaker)
    check = _check(FORGEABLE[name])
    assert behaviour.state_witness({**check, "telling": list(check["heldout"])}), (clause, name)


def test_the_stored_witness_is_checked_again_not_trusted():
    check = _check(_stores_its_argument)
    forged = json.loads(json.dumps(check))
    for row in forged["state"]["answers"].values():  # every clean value made one and the same
        row[0][0] = "0" * 12
    assert behaviour.state_witness(forged) == [] and not behaviour.servable(forged)
    assert behaviour.state_witness({**check, "state": {"paths": "x"}}) == []
    assert behaviour.state_witness({**check, "state": {"paths": ["[0][0].size"], "answers": {"i0": "junk"}}}) == []
    nested = {**check, "state": {"paths": ["[0][0].size"],
                                 "answers": {i: [[["x"], "a", "b"]] for i in check["heldout"]}}}
    assert behaviour.state_witness(nested) == []  # a value that is no digest is unknown, not a crash


def test_a_replay_asked_for_state_reports_it_and_the_parser_checks_its_shape():
    line = {"id": "i0", **probe.answer_of({"return": None, "raises": None, "args_after": []}),
            "s": {"[0][0].size": ["0123456789ab", "-"]}}
    answers, problem = behaviour.parse_replay_output(probe.MARKER + json.dumps({"version": 1, "results": [line]}),
                                                     ["i0"])
    assert problem == "" and answers["i0"]["s"] == {"[0][0].size": ["0123456789ab", "-"]}
    line["s"] = {"[0][0].size": ["not a digest", "-"]}
    answers, problem = behaviour.parse_replay_output(probe.MARKER + json.dumps({"version": 1, "results": [line]}),
                                                     ["i0"])
    assert answers is None and "invalid state change" in problem


# -- on real tasks -----------------------------------------------------------------------------------

#: v2 tasks whose held-out answers hold one outcome and whose state serves them: boltons' cache
#: decorator whose bug drops ``self.key_func`` (the key callable differs across held-out inputs),
#: schema's ``Use`` whose bug inverts the callable check (what the constructor stores tells).
SERVED_ON_STATE = ["boltons-123093d25a", "schema-393d5d5aae"]


def _refused_on_state() -> str:
    """The first v2 task (by id) whose held-out answers are one outcome and whose measured state
    has no witness: one a constant, the buggy body or doing nothing passes."""
    v2 = SweSynthSuite("v2", behaviour="any")
    for tid in sorted(v2.task_ids("all")):
        check = v2.behaviour_check_of(tid)
        if (check and "state" in check and behaviour.heldout_telling(check) and not behaviour.needs_marking(check)
                and (behaviour.heldout_outcomes(check) or 0) < 2 and not behaviour.state_witness(check)):
            return tid
    raise AssertionError("no v2 check is refused on its state")


def _copy(tmp_path, project: str, ids: list[str], strip_state: bool = True):
    out = tmp_path / project
    for sub in ("records", "behaviour"):
        (out / sub).mkdir(parents=True)
    index = json.loads((SUITE_V2_DIR / "suite.json").read_text())
    for sub in ("records", "behaviour"):
        lines = [json.loads(line) for line in (SUITE_V2_DIR / sub / f"{project}.jsonl").read_text().splitlines()]
        kept = [line for line in lines if line["task_id"] in ids]
        if sub == "behaviour" and strip_state:
            for line in kept:
                (line.get("behaviour") or {}).pop("state", None)
        (out / sub / f"{project}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in kept))
    (out / "baselines").mkdir()
    shutil.copy(SUITE_V2_DIR / "baselines" / f"{project}.json", out / "baselines")
    (out / "suite.json").write_text(json.dumps({
        "name": "state", "version": index["version"], "storage": "compact",
        "repos": {project: index["repos"][project]}, "splits": {"train": sorted(ids)}}))
    return out


@pytest.mark.parametrize("task_id", SERVED_ON_STATE)
def test_behaviour_state_measures_real_checks_and_serves_them(tmp_path, capsys, task_id):
    _measure(tmp_path, capsys, task_id, served=True)


def test_behaviour_state_measures_a_real_check_and_refuses_it(tmp_path, capsys):
    _measure(tmp_path, capsys, _refused_on_state(), served=False)


def _measure(tmp_path, capsys, task_id: str, served: bool) -> None:
    project = task_id.rsplit("-", 1)[0]
    suite_dir = _copy(tmp_path, project, [task_id])
    before = SweSynthSuite(suite_dir, behaviour="any").behaviour_check_of(task_id)
    assert "state" not in before and not behaviour.servable(before)
    assert "one constant would match them all" in behaviour.unservable_reason(before)
    assert main(["swesynth", "behaviour", "--suite", str(suite_dir), "--state", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["errors"] == 0 and stats["state_served"] == int(served)
    after = SweSynthSuite(suite_dir, behaviour="any").behaviour_check_of(task_id)
    assert "state" in after and behaviour.servable(after) is served
    assert {k: v for k, v in after.items() if k != "state"} == before  # the answers that grade are unchanged
    if served:
        assert SweSynthSuite(suite_dir, behaviour="required", distinct=False).task_ids("all") == [task_id]
    else:
        with pytest.raises(RecordError, match="none of its 1 tasks"):
            SweSynthSuite(suite_dir, behaviour="required", distinct=False)
    # measured once: a second run has nothing to do
    assert main(["swesynth", "behaviour", "--suite", str(suite_dir), "--state", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["state_served"] == 0
