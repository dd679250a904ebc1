"""The behaviour check's trusted pieces: canonical forms, the host's parser and comparer, the change
finder and the stored data (no sandbox here; the attacks on real sandboxes are in
``tests/adversarial/test_behaviour_check.py``)."""

from __future__ import annotations

import collections
import functools
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
    with pytest.raises(BehaviourDataError, match="t: 'behaviour.canonical' must be 1 or 2, got 7"):
        validate_check({**good, "canonical": 7}, "t")
    with pytest.raises(BehaviourDataError, match="t: 'behaviour.heldout' must be a list of input ids"):
        validate_check({**good, "heldout": "i0"}, "t")


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


# -- what a fix must restore, not how it nests its helpers (canonical form 2) -----------------------

def _closure_direct():
    def check(value):
        return value
    return check


def _closure_through_a_helper():
    def _alt_body():
        def check(value):
            return value
        return check
    return _alt_body()


class HoldsAValidator:
    def __init__(self, validator):
        self.validator = validator


def _form_in(version, value):
    saved = probe.CANON_VERSION[0]
    probe.CANON_VERSION[0] = version
    try:
        return probe.canonical(value)
    finally:
        probe.CANON_VERSION[0] = saved


def test_a_local_functions_qualified_name_is_incidental_in_form_2():
    direct, helped = HoldsAValidator(_closure_direct()), HoldsAValidator(_closure_through_a_helper())
    assert _form_in(1, direct) != _form_in(1, helped)  # form 1 (older checks) names the nesting
    assert _form_in(2, direct) == _form_in(2, helped)  # form 2: a local function is a local function
    assert _form_in(2, _closure_direct()) == ["callable", "builtins.function", "<local function>"]
    # module-level functions and builtins still count by name: returning the wrong one is a bug
    assert _form_in(2, len) != _form_in(2, abs)
    assert _form_in(2, module_name) != _form_in(2, replay_spec)
    assert replay_spec([], [])["canonical"] == 2


# -- held-out inputs: what a table of the tests' answers cannot match ---------------------------------

def test_only_a_check_that_tells_the_bug_apart_on_a_held_out_input_is_servable():
    from termgym.tasks.swesynth.behaviour import (
        heldout_outcomes,
        heldout_telling,
        servable,
        unservable_reason,
    )

    def answer(returned, args="a"):
        return probe.answer_of({"return": returned, "raises": None, "args_after": ["list", [args * 700]]})

    answers = {"i0": answer("credit"), "i1": answer("credit", "b"), "i2": answer("debit")}
    assert all("c" not in a and "r" in a for a in answers.values())  # large: only digests travel
    check = {"telling": ["i0", "i1"], "heldout": ["i1", "i2"], "answers": answers}
    assert heldout_telling(check) == ["i1"] and heldout_outcomes(check) == 2 and servable(check)
    tests_only = {**check, "heldout": ["i2"]}
    assert not servable(tests_only) and "only calls the tests make" in unservable_reason(tests_only)
    # one constant ("credit") answers every held-out input: a replay that prints it would pass
    constant = {**check, "answers": {**answers, "i2": answer("credit", "c")}}
    assert heldout_outcomes(constant) == 1 and not servable(constant)
    assert "one constant would match them all" in unservable_reason(constant)
    # outcomes unknown (an answer stored before outcomes were): not served until marked again
    unknown = {**check, "answers": {k: {"h": v["h"]} for k, v in answers.items()}}
    assert heldout_outcomes(unknown) is None and not servable(unknown) and "--heldout" in unservable_reason(unknown)
    unmarked = {"telling": ["i0", "i1"], "answers": answers}
    assert not servable(unmarked) and "--heldout" in unservable_reason(unmarked)
    assert not servable(None) and unservable_reason(None) == "no behaviour check"


def test_a_bug_in_two_functions_is_served_only_when_each_ones_bug_alone_is_told_apart():
    """Issue 41: a check whose held-out telling inputs show one of two broken functions is passed
    by fixing that one and forging the tests. Served only when each function's bug alone (the
    measured ``per_bug``) is told apart by a held-out input; unmeasured or unsplittable is not served."""
    from termgym.tasks.swesynth.behaviour import (
        UNCOVERED_REASON,
        needs_per_bug,
        servable,
        target_coverage,
        uncovered_targets,
        unservable_reason,
    )

    def answer(returned, args):
        return probe.answer_of({"return": returned, "raises": None, "args_after": ["list", [args]]})

    targets = [{"module": "pkg.a", "path": "pkg/a.py", "qualname": "f"},
               {"module": "pkg.b", "path": "pkg/b.py", "qualname": "C.g"}]
    base = {"targets": targets, "telling": ["i0", "i1"], "heldout": ["i0", "i2"],
            "answers": {"i0": answer(1, "x"), "i1": answer(2, "y"), "i2": answer(3, "z")}}
    single = {**base, "targets": targets[:1]}  # one function: its telling inputs are its own
    assert servable(single) and uncovered_targets(single) == [] and target_coverage(single) == (0, 0)
    assert needs_per_bug(base) and not servable(base)
    assert "--per-bug" in unservable_reason(base) and uncovered_targets(base) == ["pkg.a.f", "pkg.b.C.g"]
    # g's bug alone is told apart only by i1, a call the tests make: a half fix of f passes the replay
    half = {**base, "per_bug": {"telling": {"pkg.a.f": ["i0"], "pkg.b.C.g": ["i1"]}}}
    assert not needs_per_bug(half) and not servable(half) and uncovered_targets(half) == ["pkg.b.C.g"]
    assert target_coverage(half) == (1, 2)
    assert unservable_reason(half) == f"{UNCOVERED_REASON} (no held-out input tells apart the bug of pkg.b.C.g alone)"
    assert unservable_reason(half, name_functions=False) == UNCOVERED_REASON
    # held-out i2 tells g's bug alone apart (through f, say): served though no telling input calls g
    both = {**base, "per_bug": {"telling": {"pkg.a.f": ["i0"], "pkg.b.C.g": ["i2"]}}}
    assert servable(both) and target_coverage(both) == (2, 2)
    unsplit = {**base, "per_bug": {"unsplittable": "a hunk spans two functions"}}
    assert not servable(unsplit) and "cannot be split by changed function" in unservable_reason(unsplit)


def _encode(call):
    import base64
    import pickle
    return base64.b64encode(pickle.dumps(call, protocol=4)).decode()


def _decoded(items):
    import base64
    return [probe.loads(base64.b64decode(item["args"])) for item in items]


def test_perturbation_reaches_callables_dates_and_object_attributes():
    import datetime

    call = {"pos": [len, datetime.timedelta(seconds=5), HoldsAValidator(7)], "kw": {}, "var": [], "varkw": {}}
    made = probe.perturb([{"target": ["m.py", "f"], "args": _encode(call)}], 9)
    assert made[0]["origin"] == "test:0" and len(made) == 10
    variants = _decoded(made[1:])
    assert any(v["pos"][0] is not len and callable(v["pos"][0]) for v in variants)  # another builtin
    assert any(type(v["pos"][1]) is datetime.timedelta and v["pos"][1] != call["pos"][1] for v in variants)
    assert any(v["pos"][2].validator != 7 for v in variants)  # an attribute of a project object
    assert any(m["origin"].endswith(":pos:2.validator") for m in made)


class Stamp:
    """A project object whose state lives in ``__slots__`` (msgpack's ``Timestamp``)."""
    __slots__ = ("seconds", "nanos")

    def __init__(self, seconds, nanos):
        self.seconds, self.nanos = seconds, nanos

    def __setattr__(self, name, value):  # immutable from outside, as such classes often are
        if hasattr(self, name):
            raise AttributeError(name)
        object.__setattr__(self, name, value)

    def __reduce__(self):
        return Stamp, (self.seconds, self.nanos)


Pair = __import__("collections").namedtuple("Pair", "year week")


class Bag(dict):
    """A project object that is a dict (addict's ``Dict``)."""


def test_perturbation_reaches_slots_named_tuples_containers_and_attribute_bags():
    """A method whose only argument is ``self`` is perturbed through ``self``'s state: ``__slots__``
    (set through the slot, past a refusing ``__setattr__``), a named tuple's fields (through
    ``_replace``), a dict subclass's items; ``argparse.Namespace`` counts as an attribute bag; and a
    standard-library first argument (a ``datetime`` given to a classmethod) is an argument, not
    ``self``. Before, each of these gave the recorded call alone: only the tests' calls, never a
    held-out input (272 of v2's 434 tasks refused for "only calls the tests make")."""
    import argparse
    import datetime

    def variants(value, per_call=9):
        call = {"pos": [value], "kw": {}, "var": [], "varkw": {}}
        made = probe.perturb([{"target": ["m.py", "f"], "args": _encode(call)}], per_call)
        return [v["pos"][0] for v in _decoded(made[1:])], [m["origin"] for m in made[1:]]

    stamps, origins = variants(Stamp(5, 7))
    assert any(s.seconds != 5 for s in stamps) and any(s.nanos != 7 for s in stamps), origins
    assert "perturbed:0:pos:0.seconds" in origins
    pairs, _ = variants(Pair(2024, 3))
    assert any(p.week != 3 and p.year == 2024 for p in pairs) and all(type(p) is Pair for p in pairs)
    bags, _ = variants(Bag(a=1, b=2))
    assert any(type(b) is Bag and dict(b) != {"a": 1, "b": 2} for b in bags)
    spaces, _ = variants(argparse.Namespace(major=True, file="x"))
    assert any(vars(n) != {"major": True, "file": "x"} for n in spaces)
    moments, _ = variants(datetime.datetime(2024, 1, 1))
    assert any(m != datetime.datetime(2024, 1, 1) for m in moments)


def test_a_test_call_and_the_same_input_replayed_have_one_digest():
    import pickle

    call = {"pos": ["P1Y2M", 3], "kw": {"strict": True}, "var": [], "varkw": {}}
    recorded = probe.call_digest("parse", pickle.dumps(call, protocol=4))
    spec = {"inputs": [{"qualname": "parse", "args": _encode(call)},
                       {"qualname": "parse", "args": _encode({**call, "pos": ["P1Y2M", 4]})},
                       {"qualname": "other", "args": _encode(call)}]}
    assert probe.digests(spec) == [recorded, probe.digests(spec)[1], probe.digests(spec)[2]]
    assert len({recorded, *probe.digests(spec)}) == 3  # another argument, another function: other calls


def test_compacting_a_sidecar_keeps_each_tasks_last_line(tmp_path):
    from termgym.factory.swesynth.behaviour_record import compact_sidecar, read_sidecar

    path = tmp_path / "p.jsonl"
    path.write_text('{"task_id": "a", "behaviour": null, "reason": "old"}\n{"task_id": "b", "behaviour": null, '
                    '"reason": "b"}\n{"task_id": "a", "behaviour": null, "reason": "new"}\n')
    before = read_sidecar(path)
    assert compact_sidecar(path) == 1
    assert read_sidecar(path) == before and before["a"]["reason"] == "new"
    assert [json.loads(line)["task_id"] for line in path.read_text().splitlines()] == ["a", "b"]


def test_a_private_method_resolves_through_its_mangled_name(tmp_path, monkeypatch):
    """``__qualname__`` says ``Tree.__item``; the class stores ``_Tree__item``. Without the
    mangling every recorded call into a private method replays as unreplayable (anytree's
    ``RenderTree.__item``, ``Resolver.__match``), and the task gets no behaviour check."""
    (tmp_path / "mangle_demo.py").write_text(
        "class _Tree:\n"
        "    def __item(self, x):\n        return x + 1\n"
        "    def __len__(self):\n        return 3\n"
        "    class __Inner:\n"
        "        def __deep(self):\n            return 'deep'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    item = probe._resolve("mangle_demo", "_Tree.__item")
    assert item(None, 1) == 2 and item.__qualname__ == "_Tree.__item"
    assert probe._resolve("mangle_demo", "_Tree.__len__")(None) == 3  # a dunder is not mangled
    assert probe._resolve("mangle_demo", "_Tree.__Inner.__deep")(None) == "deep"
    assert probe._mangled("___", "__x") == "__x"  # a class named only underscores mangles nothing



class _HoldsAGenerator:
    # made from a generator, which does not pickle, so it cannot be made again from its arguments either
    def __init__(self, items):
        self.items = items

    def size(self, n):
        return n + 1


def _takes_a_test_object(value):
    return value


def test_the_recorder_says_why_it_kept_no_call(tmp_path):
    """A call whose ``self`` does not pickle, or whose arguments need a module outside the standard
    library and the project (pytest's own classes), is counted by why; the recording's "no
    replayable call" names those reasons (the lever for what to replay next)."""
    import sys

    rel = "tests/swesynth/test_behaviour.py"
    recorder = probe._Recorder({"targets": [[rel, "_HoldsAGenerator.size"], [rel, "_takes_a_test_object"]],
                                "allowed_modules": ["termgym"], "max_per_target": 8, "max_bytes": 4000,
                                "out": str(tmp_path / "calls.json"), "dropped_out": str(tmp_path / "dropped.json")})
    sys.settrace(recorder.on_call)
    try:
        _HoldsAGenerator(i for i in range(3)).size(1)
        _HoldsAGenerator(i for i in range(4)).size(2)
        _takes_a_test_object(pytest.MonkeyPatch())
    finally:
        sys.settrace(None)
    recorder.write()
    dropped = json.loads((tmp_path / "dropped.json").read_text())
    assert json.loads((tmp_path / "calls.json").read_text()) == []
    [(outside_reason, once), (generator_reason, twice)] = sorted(dropped.items())
    assert generator_reason.startswith("self (") and "_HoldsAGenerator) does not pickle: cannot pickle 'generator'" \
        in generator_reason
    assert twice == 2
    assert outside_reason == ("its arguments need _pytest.monkeypatch.MonkeyPatch, outside the "
                              "standard library and the project") and once == 1


class _Splitter:
    """Holds a generator (does not pickle); made again from its constructor's arguments it splits alike."""

    def __init__(self, sep, *, limit=-1):
        self.rule = lambda text: text.split(sep, limit)
        self.pending = (part for part in (sep, limit))
        self.sep = sep

    def parse(self, text):
        return self.rule(text)


class _CommaSplitter(_Splitter):
    def __init__(self):
        super().__init__(",", limit=1)


def test_a_self_that_does_not_pickle_is_recorded_as_the_constructor_call_that_made_it(tmp_path):
    """A method whose ``self`` holds a local function: the recorder keeps the outermost ``__init__``'s
    arguments and pickles ``self`` as that call (the subclass's, not the ``super()`` one); the replay
    makes a fresh object that answers alike, perturbed variants pickle the same way, and the state
    the test gave the object stays among the tests' digests."""
    import base64
    import pickle
    import sys

    rel = "tests/swesynth/test_behaviour.py"
    recorder = probe._Recorder({"targets": [[rel, "_Splitter.parse"]], "allowed_modules": ["termgym", "tests"],
                                "max_per_target": 8, "max_bytes": 4000, "out": str(tmp_path / "calls.json"),
                                "digests_out": str(tmp_path / "digests.json")})
    sys.settrace(recorder.on_call)
    try:
        assert _Splitter(";").parse("a;b;c") == ["a", "b", "c"]
        assert _CommaSplitter().parse("x,y,z") == ["x", "y,z"]
        late = _Splitter("-")
        late.sep = "changed after the constructor"
        late.parse("p-q")
    finally:
        sys.settrace(None)
        probe._BUILT.clear()
    recorder.write()
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(_Splitter(";"))  # the process's own pickling is untouched
    calls = json.loads((tmp_path / "calls.json").read_text())
    assert len(calls) == 3
    made = [probe.loads(base64.b64decode(c["args"]), allowed={"tests"}) for c in calls]
    assert [type(m["pos"][0]) for m in made] == [_Splitter, _CommaSplitter, _Splitter]
    assert [m["pos"][0].parse(m["pos"][1]) for m in made] == [["a", "b", "c"], ["x", "y,z"], ["p", "q"]]
    # the tests' object with its later attribute is digested as it was, beside the fresh one
    assert len(json.loads((tmp_path / "digests.json").read_text())) == 4
    variants = probe.perturb(calls[:1], 9)
    probe._BUILT.clear()
    texts = {probe.loads(base64.b64decode(v["args"]), allowed={"tests"})["pos"][1] for v in variants}
    assert "a;b;c" in texts and len(texts) > 2


class _TomlArray(list):
    """As tomlkit's ``Array``: a list whose pickling reads what ``__init__`` sets."""

    def __init__(self, value, trivia, multiline=False):
        super().__init__(value)
        self._value, self.trivia, self.multiline = list(value), trivia, multiline

    def __reduce__(self):
        return type(self), (self._value, self.trivia, self.multiline)


def test_a_constructor_whose_self_is_not_built_yet_is_recorded_on_a_blank_object(tmp_path):
    """A bug in ``__init__`` of a class whose pickling reads what ``__init__`` sets: at the call's
    entry ``self`` does not pickle (tomlkit's ``Array`` has no ``_value`` yet), so such a bug had no
    replayable call. The recorder pickles that ``self`` as what ``__new__`` makes, and the replay's
    ``__init__`` on it builds the same object. Sabotage: without the blank ``self`` nothing is kept."""
    import base64
    import sys

    rel = "tests/swesynth/test_behaviour.py"

    def record(out):
        recorder = probe._Recorder({"targets": [[rel, "_TomlArray.__init__"]], "allowed_modules": ["termgym", "tests"],
                                    "max_per_target": 8, "max_bytes": 4000, "out": str(out)})
        sys.settrace(recorder.on_call)
        try:
            _TomlArray([1, 2], "# two", multiline=True)
        finally:
            sys.settrace(None)
        recorder.write()
        return json.loads(out.read_text()), recorder.dropped

    calls, _ = record(tmp_path / "calls.json")
    assert len(calls) == 1
    call = probe.loads(base64.b64decode(calls[0]["args"]), allowed={"tests"})
    blank = call["pos"][0]
    assert type(blank) is _TomlArray and not hasattr(blank, "_value")
    _TomlArray.__init__(*call["pos"], **call["kw"])
    assert (blank, blank._value, blank.trivia, blank.multiline) == ([1, 2], [1, 2], "# two", True)
    # perturbed variants of the call (held-out inputs) pickle their self as a blank object too
    try:
        variants = probe.perturb(calls, 6)
        assert len(variants) == 7
        for variant in variants:
            again = probe.loads(base64.b64decode(variant["args"]), allowed={"tests"})["pos"]
            assert type(again[0]) is _TomlArray and not hasattr(again[0], "_value")
        assert len({variant["args"] for variant in variants}) > 3
    finally:
        probe._BUILT.clear()
    original = probe._Blank
    probe._Blank = lambda cls, args, kwargs: (_ for _ in ()).throw(TypeError("no blank self"))
    try:
        calls, dropped = record(tmp_path / "sabotaged.json")
    finally:
        probe._Blank = original
    assert calls == [] and any("_value" in why for why in dropped)


class _Resolver:
    """As anytree's: a private method handed on as a callback, and (as its ``AbstractIter``) a
    private static method as a default."""

    def __init__(self, ignorecase, match=None):
        self.ignorecase = ignorecase
        self.match = match or _Resolver.__always

    @staticmethod
    def __always(name):
        return True

    def __cmp(self, name, pat):
        return name.lower() == pat.lower() if self.ignorecase else name == pat

    def start(self):
        return self.__cmp


def test_a_private_method_passed_on_loads_again_as_its_mangled_name():
    """``self.__cmp`` handed to a helper: the standard pickle reduces it to ``getattr(obj,
    '__cmp')``, which fails on load (every anytree resolver call was unreplayable so); the
    recorder's pickle names ``_Resolver__cmp`` and the method comes back bound to an equal object.
    Sabotage: without that reduction the load fails as before."""
    import pickle

    call = {"pos": [_Resolver(True, len).start(), "Root"], "kw": {}, "var": [], "varkw": {}}
    with pytest.raises(AttributeError, match="__cmp"):
        pickle.loads(pickle.dumps(call))
    method, name = probe.loads(probe.dumps(call), allowed={"tests"})["pos"]
    assert method(name, "root") is True and method.__self__.ignorecase is True
    assert probe._private_method_reduce(_Resolver(False).start())[1][1] == "_Resolver__cmp"
    assert probe._private_method_reduce(_Resolver(False).__init__) is None  # a dunder mangles nothing
    original = probe._private_method_reduce
    probe._private_method_reduce = lambda method: None
    try:
        with pytest.raises(AttributeError, match="__cmp"):
            probe.loads(probe.dumps(call), allowed={"tests"})
    finally:
        probe._private_method_reduce = original
    # the private static method it keeps as a default: the standard pickle cannot find it by name
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(_Resolver(True).match)
    again = probe.loads(probe.dumps(_Resolver(True)), allowed={"tests"})
    assert again.match is _Resolver._Resolver__always and again.match("x") is True
    assert probe._private_function_reduce(_sums) is None  # a module's function: found by name as usual
    original = probe._private_function_reduce
    probe._private_function_reduce = lambda func: None
    try:
        with pytest.raises((pickle.PicklingError, AttributeError)):
            probe.dumps(_Resolver(True))
    finally:
        probe._private_function_reduce = original


class _MadeBase:
    """As marko's ``Parser``: a base class that ``Markdown`` joins with its extensions' mixins."""

    def render(self):
        return f"<p>{self.text}</p>"


class _MadeMixin:
    def render(self):
        return super().render().upper()


def test_a_class_made_at_run_time_and_a_function_cached_under_its_name_load_again():
    """marko's ``Markdown`` makes ``type("_Parser", mixins + (Parser,), {})`` at run time, and
    jsonschema's resolver keeps ``lru_cache(1024)(urljoin)``: the standard pickle looks both up by
    name, finds nothing (or ``urllib.parse.urljoin`` itself) and fails, so every call whose
    arguments held them was unreplayable. The recorder's pickle makes the class again with the
    same call, once for all its objects, and caches the function again with the same parameters.
    Sabotage: with either reduction off, the dump fails as before."""
    import pickle
    import urllib.parse

    made = type("_Parser", (_MadeMixin, _MadeBase), {})
    first, second = made(), made()
    first.text, second.text = "a", "b"
    cached = functools.lru_cache(64)(urllib.parse.urljoin)
    call = {"pos": [first, second, cached], "kw": {}, "var": [], "varkw": {}}
    for part in ([first], [cached]):
        with pytest.raises((pickle.PicklingError, AttributeError)):
            pickle.dumps(part)
    assert "__slotnames__" in vars(made)  # the standard pickle's cache, left on the class it failed on
    again, other, join = probe.loads(probe.dumps(call), allowed={"tests"})["pos"]
    assert (again.render(), other.render()) == ("<P>A</P>", "<P>B</P>")
    assert type(again) is type(other) and type(again).__name__ == "_Parser" and type(again) is not made
    assert type(again).__mro__[1:] == made.__mro__[1:]
    assert join("http://a/b/", "c") == "http://a/b/c" and join.cache_parameters() == {"maxsize": 64, "typed": False}
    assert probe._run_time_class_reduce(_MadeBase) is None  # found by name: pickled as usual
    assert probe._run_time_class_reduce(functools._CacheInfo)[0] is not type  # kept under another name
    for reduction in ("_run_time_class_reduce", "_lru_cache_reduce"):
        original = getattr(probe, reduction)
        setattr(probe, reduction, lambda obj: None)
        try:
            with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
                probe.dumps(call)
        finally:
            setattr(probe, reduction, original)


class _Token(tuple):
    """As cssselect's: a tuple of two whose ``__new__`` takes a third value kept as an attribute."""

    def __new__(cls, type_, value, pos):
        made = tuple.__new__(cls, (type_, value))
        made.pos = pos
        return made


class _ParseResult(collections.namedtuple("_ParseResult", "scheme host")):
    """As rfc3986's: a namedtuple whose ``__new__`` also wants a value that is no field."""

    def __new__(cls, scheme, host, uri_ref):
        made = super().__new__(cls, scheme, host)
        made.uri_ref = uri_ref
        return made


class _Paragraph:
    """As mistletoe's block tokens: a ``__new__`` that needs an argument."""

    def __new__(cls, lines):
        made = object.__new__(cls)
        made.lines = list(lines)
        return made


class _Query:
    """As tinydb's: every unknown attribute is a deeper query, read from ``self._path``."""

    def __init__(self, path=()):
        self._path = path

    def __getattr__(self, item):
        return _Query(self._path + (item,))


def test_objects_whose_new_or_getattr_refuse_the_standard_load_load_again():
    """The recorder's loader makes an object whose class's ``__new__`` refuses what its pickle
    hands back by its built-in base's ``__new__`` (a tuple subclass, a namedtuple with an extra
    argument, a plain class whose ``__new__`` needs one), and looks ``__setstate__`` up on the
    class, so an instance whose ``__getattr__`` reads its own attributes does not recurse while
    its state is still missing. The standard pickle fails on each (the calls were unreplayable:
    every recorded call of tinydb's queries, cssselect's token streams, rfc3986's results)."""
    import pickle

    values = [_Token("IDENT", "a", 3), _ParseResult("http", "x.org", "http://x.org"), _Paragraph("ab"),
              _Query(("name",))]
    for value in values:
        with pytest.raises((TypeError, RecursionError)):
            pickle.loads(pickle.dumps(value))
    token, result, paragraph, query = probe.loads(probe.dumps(values), allowed={"tests"})
    assert type(token) is _Token and tuple(token) == ("IDENT", "a") and token.pos == 3
    assert type(result) is _ParseResult and result.host == "x.org" and result.uri_ref == "http://x.org"
    assert type(paragraph) is _Paragraph and paragraph.lines == ["a", "b"]
    assert type(query) is _Query and query._path == ("name",) and query.age._path == ("name", "age")
    assert probe._unreplayable(probe.dumps(values), {"tests"}) is None
    # sabotage: the standard unpickler's ways back fail on them again
    loader = probe._Loader
    saved = loader.dispatch[pickle.NEWOBJ[0]], loader.dispatch[pickle.BUILD[0]]
    loader.dispatch[pickle.NEWOBJ[0]] = pickle._Unpickler.load_newobj
    try:
        assert "do not load again" in probe._unreplayable(probe.dumps(values[:1]), {"tests"})
    finally:
        loader.dispatch[pickle.NEWOBJ[0]] = saved[0]
    loader.dispatch[pickle.BUILD[0]] = pickle._Unpickler.load_build
    try:
        assert "RecursionError" in probe._unreplayable(probe.dumps(values[3:]), {"tests"})
    finally:
        loader.dispatch[pickle.BUILD[0]] = saved[1]


def test_what_a_project_module_holds_is_recorded_as_where_it_lives():
    """glom's default scope: a module-level ``ChainMap`` whose first map holds a registry of local
    functions, chained into every call's scope. The scope pickles with that map as the lookup that
    finds it (``_DEFAULT_SCOPE.maps[0]``); so do a module-level dict's values and list's items."""
    import collections
    import pickle
    import sys
    import types

    def local_handler():
        return "handled"

    registry = types.SimpleNamespace(handlers=[local_handler])
    fake = types.ModuleType("scopes_of_a_project")
    fake._DEFAULT_SCOPE = collections.ChainMap({"registry": registry})
    fake.HANDLERS = {"default": types.SimpleNamespace(run=local_handler)}
    fake.CHAIN = [types.SimpleNamespace(run=local_handler)]
    sys.modules[fake.__name__] = fake
    probe.HELD_PACKAGES[0] = None  # any package's (a recorder narrows it to the replayable ones)
    probe._HELD.update(modules=-1, index={})  # built again once modules come and go, as here
    try:
        scope = fake._DEFAULT_SCOPE.new_child({"target": [1, 2]})
        call = {"pos": [scope, fake.HANDLERS["default"], fake.CHAIN[0]], "kw": {}, "var": [], "varkw": {}}
        with pytest.raises((pickle.PicklingError, AttributeError)):
            pickle.dumps(call)
        data = probe.dumps(call)
        assert probe.LAST_DUMP_REBUILT[0] is True
        again = probe.loads(data, allowed={"scopes_of_a_project"})["pos"]
        assert again[0].maps[0] == {"target": [1, 2]} and again[0].maps[0] is not scope.maps[0]
        assert again[0].maps[1] is fake._DEFAULT_SCOPE.maps[0] and again[0]["registry"] is registry
        assert again[1] is fake.HANDLERS["default"] and again[2] is fake.CHAIN[0]
        probe.dumps({"plain": [1, "x"]})
        assert probe.LAST_DUMP_REBUILT[0] is False
    finally:
        del sys.modules[fake.__name__]
        probe._HELD.update(modules=-1, index={})
    with pytest.raises((pickle.PicklingError, AttributeError)):  # no module holds it now
        probe.dumps(registry)


def test_regex_matches_and_memoryviews_are_recorded_as_the_calls_that_make_them_again():
    """The standard pickler refuses both; the recorder's pickles rebuild them from standard-library
    calls only (what the replay's loader allows), without changing pickling for the code under test."""
    import pickle
    import re

    match = re.compile(r"(?P<word>\w+)-(\d+)").search("say hello-42 twice", 2)
    call = {"pos": [match, memoryview(b"frame")], "kw": {}, "var": [], "varkw": {}}
    with pytest.raises(TypeError):
        pickle.dumps(match)  # the process's own pickling is untouched
    again = probe.loads(probe.dumps(call), allowed=set())
    rebuilt, view = again["pos"]
    assert (rebuilt.group(0), rebuilt.group("word"), rebuilt.span(), rebuilt.re.pattern) == (
        "hello-42", "hello", (4, 12), match.re.pattern)
    assert type(view) is memoryview and view.tobytes() == b"frame" and view.readonly
    # a replay that receives them answers the same as a call with the originals
    assert probe.canonical(rebuilt.groups()) == probe.canonical(match.groups())


def test_the_packages_a_projects_code_imports_are_replayable(tmp_path):
    """Objects of a third-party package the project's own code imports (wsproto's h11) are allowed in
    recorded calls; the standard library, the project itself and what only the tests import are not."""
    from types import SimpleNamespace

    from termgym.factory.swesynth.behaviour_record import imported_packages

    pkg = tmp_path / "wire"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import json\nimport h11\nfrom . import frames\nfrom wire.frames import X\n"
                                     "try:\n    import test.support\nexcept ImportError:\n    pass\n")
    (pkg / "frames.py").write_text("from ply.lex import lex\nimport os.path, attr\nX = 1\n")
    (pkg / "broken.py").write_text("def (:\n")  # unparsable files are skipped
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_wire.py").write_text("import pytest\nimport hypothesis\n")
    record = SimpleNamespace(repo_dir=str(tmp_path), project=None)
    assert imported_packages(record, ["wire"]) == ["attr", "h11", "ply"]
    assert imported_packages(SimpleNamespace(repo_dir=None, project=None), ["wire"]) == []


def _make_sentinel(name):
    class Sentinel:
        def __repr__(self):
            return name
    return Sentinel()


#: A sentinel as glom and boltons make them: the one instance of a class defined inside a function.
MISSING_VALUE = _make_sentinel("MISSING_VALUE")


def test_a_module_level_sentinel_of_a_local_class_is_recorded_as_the_name_that_holds_it():
    """``make_sentinel.<locals>.Sentinel`` does not pickle; held by a module attribute it is recorded
    as that attribute (the same object when replayed). One no module holds still does not pickle."""
    import pickle
    import sys

    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(MISSING_VALUE)
    module = sys.modules[__name__]
    # a test module is not where a replay can import it from: bound in a project module, it works
    import types
    fake = types.ModuleType("sentinels_of_a_project")
    fake.MISSING_VALUE = MISSING_VALUE
    sys.modules[fake.__name__] = fake
    probe.HELD_PACKAGES[0] = None  # any package's (a recorder narrows it to the replayable ones)
    try:
        data = probe.dumps({"pos": [MISSING_VALUE, 1], "kw": {}, "var": [], "varkw": {}})
        assert probe.loads(data, allowed={"sentinels_of_a_project"})["pos"][0] is MISSING_VALUE
    finally:
        del sys.modules[fake.__name__]
    assert module.MISSING_VALUE is MISSING_VALUE
    with pytest.raises((pickle.PicklingError, AttributeError)):  # only a test module holds it
        probe.dumps(MISSING_VALUE)


def test_a_match_of_the_regex_package_is_recorded_like_an_re_match():
    """parsimonious's nodes hold ``regex`` matches: they pickle as the call that finds them again."""
    regex = pytest.importorskip("regex")
    match = regex.compile(r"(\w+)-(\d+)").search("x ab-12 y")
    again = probe.loads(probe.dumps({"pos": [match]}), allowed={"regex"})["pos"][0]
    assert type(again) is type(match) and (again.span(), again.groups()) == ((2, 7), ("ab", "12"))


def _sums(values):
    return sum(values)


def test_a_function_with_only_large_calls_keeps_its_smallest_one(tmp_path):
    """Every call of ``_sums`` pickles over ``max_bytes``: the smallest one up to ``max_large_bytes``
    is stored (one large input rather than no check), while a function that also has a small call
    keeps only that; calls over the large bound stay out, and the tests' digests hold every call.
    Sabotage: without ``max_large_bytes`` the large-only function keeps nothing."""
    import base64
    import sys

    rel = "tests/swesynth/test_behaviour.py"

    def record(config_extra):
        recorder = probe._Recorder({"targets": [[rel, "_sums"], [rel, "_takes_a_test_object"]],
                                    "allowed_modules": ["termgym"], "max_per_target": 8, "max_bytes": 600,
                                    "out": str(tmp_path / "calls.json"), "digests_out": str(tmp_path / "d.json"),
                                    **config_extra})
        sys.settrace(recorder.on_call)
        try:
            _sums(list(range(5000)))  # far over both bounds
            _sums(list(range(1500)))
            _sums(list(range(900)))  # the smallest large call
            _takes_a_test_object(list(range(2000)))
            _takes_a_test_object([1, 2])
        finally:
            sys.settrace(None)
        recorder.write()
        calls = json.loads((tmp_path / "calls.json").read_text())
        return {c["target"][1]: [probe.loads(base64.b64decode(x["args"]))["pos"][0]
                                 for x in calls if x["target"] == c["target"]] for c in calls}

    kept = record({"max_large_bytes": 8000})
    assert [len(v) for v in kept["_sums"]] == [900]
    assert kept["_takes_a_test_object"] == [[1, 2]]
    assert len(json.loads((tmp_path / "d.json").read_text())) == 5
    sabotaged = record({})
    assert "_sums" not in sabotaged and sabotaged["_takes_a_test_object"] == [[1, 2]]


def test_the_stored_inputs_cover_each_function_and_two_answers():
    """``choose_inputs`` (what a check stores): with ten telling inputs of one changed function
    recorded before the only one of the other, both functions get a held-out telling input; when
    every held-out telling input answers alike, a held-out input answering otherwise comes in. The
    old order (the first ten telling inputs, then the rest) stored neither: the sabotage."""
    from termgym.factory.swesynth import behaviour_record as rec

    def inp(i, fn):
        return {"id": f"i{i}", "module": "pkg", "qualname": fn, "args": "A" * 40}

    stable = [*(inp(i, "first") for i in range(14)), inp(14, "second"), *(inp(i, "first") for i in range(15, 30))]
    telling = {f"i{i}" for i in range(15)}
    held = {c["id"] for c in stable}
    answers = {c["id"]: {"h": "same", "r": "True"} for c in stable}
    answers["i29"] = {"h": "other", "r": "False"}  # the last quiet held-out input answers otherwise
    kept = rec.choose_inputs(stable, telling, held, answers)
    assert "i14" in kept and "i29" in kept and len(kept) <= rec.MAX_INPUTS
    assert sum(i in telling for i in kept) <= rec.MAX_DISCRIMINATING

    def old_order(stable, telling, held, answers):
        first = [c for c in stable if c["id"] in telling][:rec.MAX_DISCRIMINATING]
        return {c["id"] for c in [*first, *(c for c in stable if c["id"] not in telling)][:rec.MAX_INPUTS]}

    before = old_order(stable, telling, held, answers)
    assert "i14" not in before and "i29" not in before


def test_candidates_take_each_changed_function_in_turn():
    """180 recorded and perturbed inputs of one function before the 5 of another: in turns, the
    first ``MAX_CANDIDATES`` hold all 5; in recorded order (the sabotage) none."""
    from termgym.factory.swesynth import behaviour_record as rec

    items = [{"target": ["a.py", "first"], "args": str(i)} for i in range(180)]
    items += [{"target": ["a.py", "second"], "args": str(i)} for i in range(5)]
    turns = rec.in_turns(items)
    assert sorted(map(id, turns)) == sorted(map(id, items))
    assert sum(i["target"][1] == "second" for i in turns[:rec.MAX_CANDIDATES]) == 5
    assert sum(i["target"][1] == "second" for i in items[:rec.MAX_CANDIDATES]) == 0
    assert [i["args"] for i in turns if i["target"][1] == "first"] == [str(i) for i in range(180)]


def test_telling_test_calls_are_perturbed_further_only_where_serving_needs_it():
    """``_calls_to_perturb_further``: a changed function whose bug only a test call tells apart gets
    that call perturbed further; a function with a held-out telling input does not, unless every
    held-out answer is one outcome (then one constant would pass: every telling test call goes)."""
    from termgym.factory.swesynth import behaviour_record as rec

    def answer(value):
        return probe.answer_of({"return": value, "raises": None, "args_after": ["list", []]})

    calls = [{"target": ["m.py", "f"], "args": "F0"}, {"target": ["m.py", "g"], "args": "G0"}]
    cands = [{"id": "i0", "module": "m", "qualname": "f", "args": "F0", "origin": "test:0"},
             {"id": "i1", "module": "m", "qualname": "f", "args": "F1", "origin": "perturbed:0:pos:0"},
             {"id": "i2", "module": "m", "qualname": "g", "args": "G0", "origin": "test:1"},
             {"id": "i3", "module": "m", "qualname": "g", "args": "G1", "origin": "perturbed:1:pos:0"}]
    clean = {"i0": answer(1), "i1": answer(2), "i2": answer(3), "i3": answer(4)}
    buggy = {"i0": answer(0), "i1": answer(0), "i2": answer(0), "i3": answer(4)}  # g's variant does not tell
    held = {"i1", "i3"}
    got = rec._calls_to_perturb_further(cands, held, clean, clean, set(), buggy, calls)
    assert got == [calls[1]]  # g only: f has a held-out telling input
    one_outcome = {**clean, "i3": answer(2)}  # the held-out answers are all 2
    got = rec._calls_to_perturb_further(cands, held, one_outcome, one_outcome, set(), buggy, calls)
    assert got == calls
    told = {**buggy, "i3": answer(0)}  # every function has one, two outcomes: nothing to do
    assert rec._calls_to_perturb_further(cands, held, clean, clean, set(), told, calls) == []
    # an unrepeatable test call is no lead
    assert rec._calls_to_perturb_further(cands, held, clean, clean, {"i2"}, buggy, calls) == []


def _near_three(a, b, c):
    return a + b + c


def test_perturbing_further_reaches_variants_the_first_round_leaves_out():
    """A bug that shows only while ``a % 10 == 3`` and the other arguments stay as the test has
    them: of ``_near_three(3, 1, 1)``'s first-round variants none keeps that (``a`` becomes 4, 2, 9;
    ``b`` and ``c`` change); the deeper round's reach ``a == 13``. Sabotage: the deeper round with
    the first round's budget finds none."""
    import base64

    from termgym.factory.swesynth import behaviour_record as rec

    call = {"target": ["tests/swesynth/test_behaviour.py", "_near_three"],
            "args": base64.b64encode(probe.dumps({"pos": [3, 1, 1], "var": [], "kw": {}, "varkw": {}})).decode()}

    def telling(per_call):
        made = probe.perturb([call], per_call)
        args = [probe.loads(base64.b64decode(m["args"]))["pos"] for m in made if m["origin"] != "test:0"]
        return [a for a in args if isinstance(a[0], int) and a[0] % 10 == 3 and a[1:] == [1, 1]]

    assert telling(rec.PERTURB_PER_CALL) == []
    assert telling(rec.DEEP_PER_CALL) == [[13, 1, 1]]
