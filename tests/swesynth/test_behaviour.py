"""The behaviour check's trusted pieces: canonical forms, the host's parser and comparer, the change
finder and the stored data (no sandbox here; the attacks on real sandboxes are in
``tests/adversarial/test_behaviour_check.py``)."""

from __future__ import annotations

import json

import pytest

from termgym.factory.swesynth.behaviour_record import changed_lines, functions_at
from termgym.tasks.swesynth import behaviour_probe as probe
from termgym.tasks.swesynth.behaviour import (
    MARKER,
    BehaviourDataError,
    compare_answers,
    module_name,
    parse_replay_output,
    replay_spec,
    validate_check,
)

# -- canonical forms: actual types, not what objects say about themselves ------------------------------


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __repr__(self):
        return "'credit'"

    def __reduce__(self):
        return (str, ("credit",))


class LooksLikeStr:
    @property
    def __class__(self):
        return str


class Eq(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def test_canonical_forms_do_not_trust_eq_repr_class_or_reduce():
    clean = probe.canonical("credit")
    assert clean == "credit"
    for forged in (AlwaysEqual(), LooksLikeStr(), Eq("Credit")):
        assert probe.canonical(forged) != clean, forged
    # a str subclass keeps its own class name beside the value it really holds
    form = probe.canonical(Eq("credit"))
    assert form[0] == "object" and form[1].endswith("Eq") and form[2] == "credit"


def test_canonical_forms_are_structural_and_bounded():
    class Slotted:
        __slots__ = ("a", "b")

        def __init__(self):
            self.a, self.b = 1, [2.0, {"k": {3}}]

    form = probe.canonical(Slotted())
    assert form[0] == "object" and ["a", 1] in form[3]
    assert probe.canonical({2: "b", 1: "a"}) == probe.canonical({1: "a", 2: "b"})  # key order is incidental
    assert probe.canonical(0.1 + 0.2) == probe.canonical(0.3)  # 12 significant digits
    assert probe.canonical(float("nan")) == ["float", "nan"]
    deep: list = []
    for _ in range(50):
        deep = [deep]
    assert "<deep>" in json.dumps(probe.canonical(deep))
    cycle: list = []
    cycle.append(cycle)
    assert json.dumps(probe.canonical(cycle))  # depth-limited, never recursion
    assert probe.canonical(list(range(10000)))[1][-1] == ["<budget>"]
    assert probe.canonical(ValueError("message text")) == ["exception", "builtins.ValueError"]


def test_answers_are_digests_with_small_forms():
    small = probe.answer_of(["x"])
    assert small["c"] == ["x"] and len(small["h"]) == 64
    big = probe.answer_of(["x" * 5000])
    assert "c" not in big and len(big["h"]) == 64


# -- the host's parser: untrusted output -------------------------------------------------------------

def _line(results):
    return MARKER + json.dumps({"version": 1, "results": results})


def test_parse_replay_output_reads_a_good_line():
    a = probe.answer_of("credit")
    answers, problem = parse_replay_output("noise\n" + _line([{"id": "i0", **a}]) + "\n", ["i0"])
    assert problem == "" and answers == {"i0": a}


@pytest.mark.parametrize("output, why", [
    ("", "printed 0 result lines"),
    ("garbage only", "printed 0 result lines"),
    (_line([]) + "\n" + _line([]), "printed 2 result lines"),
    (MARKER + "{not json", "not JSON"),
    (_line([{"id": "i0", "h": "00"}]), "no valid digest"),
    (_line([{"id": "i1", "h": "0" * 64}]), "out of order"),
    (_line([{"id": "i0", "h": "0" * 64, "c": "credit"}]), "does not match its own digest"),
    (_line([{"id": "i0", "h": "0" * 64}, {"id": "i1", "h": "0" * 64}]), "2 results for 1 inputs"),
    (MARKER + "[1, 2]", "no results"),
    (MARKER + "[" * 100000 + "]" * 100000, "not JSON"),
    ("x" * (3 * 1024 * 1024), "more than"),
])
def test_parse_replay_output_refuses_anything_else(output, why):
    answers, problem = parse_replay_output(output, ["i0"])
    assert answers is None and why in problem, problem


def test_compare_answers_by_digest():
    want = {"i0": probe.answer_of("credit"), "i1": probe.answer_of(1)}
    assert compare_answers(want, dict(want)) == []
    wrong = compare_answers(want, {"i0": probe.answer_of("Credit"), "i1": want["i1"]})
    assert [m["input"] for m in wrong] == ["i0"] and wrong[0]["expected"] == "credit" and wrong[0]["got"] == "Credit"
    assert [m["input"] for m in compare_answers(want, {})] == ["i0", "i1"]


def test_the_replay_spec_never_holds_answers():
    check = {"version": 1, "inputs": [{"id": "i0", "module": "m", "qualname": "f", "args": "QQ==", "origin": "test:0"}],
             "answers": {"i0": probe.answer_of("secret-answer")}}
    text = json.dumps(replay_spec(check["inputs"], ["/app"]))
    assert "secret-answer" not in text and check["answers"]["i0"]["h"] not in text and "answers" not in text


# -- stored data --------------------------------------------------------------------------------------

def test_validate_check_names_what_is_wrong():
    good = {"version": 1, "inputs": [{"id": "i0", "module": "m", "qualname": "f", "args": "QQ=="}],
            "answers": {"i0": probe.answer_of(1)}}
    assert validate_check(good, "t") is good
    with pytest.raises(BehaviourDataError, match="t: 'behaviour.version'"):
        validate_check({**good, "version": 9}, "t")
    with pytest.raises(BehaviourDataError, match="non-empty list"):
        validate_check({**good, "inputs": []}, "t")
    with pytest.raises(BehaviourDataError, match="no valid answer for input 'i0'"):
        validate_check({**good, "answers": {}}, "t")
    with pytest.raises(BehaviourDataError, match=r"inputs\[0\]"):
        validate_check({**good, "inputs": [{"id": "i0"}]}, "t")


def test_a_bad_sidecar_line_names_the_file_and_line(tmp_path):
    from termgym.tasks.swesynth.store import _behaviour_lines

    path = tmp_path / "p.jsonl"
    path.write_text('{"task_id": "a", "behaviour": null, "reason": "x"}\n{"no_id": 1}\n')
    with pytest.raises(Exception, match=r"p.jsonl:2"):
        _behaviour_lines(path)


def test_the_bundled_suites_load_their_checks():
    from termgym.tasks.swesynth.suite import SweSynthSuite

    toy = SweSynthSuite("toy")
    with_check = [t for t in toy.task_ids("all") if toy.record(t).behaviour]
    assert with_check, "the toy suite carries no behaviour check"
    for tid in with_check[:20]:
        validate_check(toy.record(tid).behaviour, tid)


# -- where the bug is ---------------------------------------------------------------------------------

def test_changed_lines_and_functions():
    source = "X = 1\n\nclass A:\n    def f(self):\n        def inner():\n            return 1\n        return inner()\n\n" \
             "def g(x):\n    return x + 1\n"
    patch = ("--- a/m.py\n+++ b/m.py\n@@ -5,3 +5,3 @@\n         def inner():\n-            return 1\n+            return 2\n"
             "         return inner()\n@@ -10,1 +10,1 @@\n-    return x + 1\n+    return x - 1\n")
    lines = changed_lines(patch)
    assert lines == {"m.py": {6, 10}}
    assert functions_at(source, lines["m.py"]) == ["A.f", "g"]  # the nested one is replayed through A.f
    assert functions_at(source, {1}) == []  # module-level code is no function
    added = "--- a/m.py\n+++ b/m.py\n@@ -10,1 +10,2 @@\n     return x + 1\n+    print(x)\n"
    assert functions_at(source, changed_lines(added)["m.py"]) == ["g"]


def test_module_names():
    assert module_name("src/click/core.py", ["src"]) == "click.core"
    assert module_name("parse/__init__.py") == "parse"
    assert module_name("toolz/curried/exceptions.py") == "toolz.curried.exceptions"
