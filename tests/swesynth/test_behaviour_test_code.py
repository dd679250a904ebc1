"""Calls whose arguments are the tests' own code: a lambda passed as a key, a helper function a test
defines, a ``Timer`` class a test hands to a cache, a subclass defined inside a test; and closures
of the project's code (the lambda ``adder(2)`` returns).

The recorder pickles such functions and classes as their source (with the values of the names they
read), so a replay needs no test module: it runs with the project alone on its path, as the grade's
replay does. Before, such calls were dropped ("Can't pickle local object ...", "its arguments need
tests.test_x.Timer"), and 534 tasks of the bundled suite had no behaviour check for that reason.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import sys

import pytest

from termgym.tasks.swesynth import behaviour_probe as probe
from termgym.tasks.swesynth.behaviour import PROBE_SOURCE, parse_replay_output, replay_spec

PROJECT = '''
class Base:
    def __init__(self, n):
        self.n = n

    def value(self):
        return self.n


def apply(f, x, key=None):
    return f(x) if key is None else key(f(x))


def total(objs):
    return sum(o.value() for o in objs)


def adder(k):
    return lambda v: v + k
'''

TESTS = '''
import dataclasses
import math

import keyed

OFFSET = 10


def scaled(v, scale=2):
    return v * scale + OFFSET


class Timer:
    def __init__(self, start=0):
        self.time = start

    def __call__(self, _):
        self.time += 1
        return self.time


@dataclasses.dataclass
class Point:
    x: int
    y: int = 2


def test_lambdas_and_helpers():
    y = 3
    assert keyed.apply(lambda a: a + y, 1) == 4
    assert keyed.apply(scaled, 1, key=lambda r: math.sqrt(r)) == math.sqrt(12)


def test_local_functions():
    z = 5

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def inner(q, w=7):
        return fact(q) + z + w

    assert keyed.apply(inner, 3) == 18


def test_classes():
    extra = 100
    base = keyed.Base

    class Plus(base):
        def value(self):
            return super().value() + extra

    assert keyed.total([Plus(1), keyed.Base(2)]) == 103
    assert keyed.apply(Timer(5), None) == 6
    assert keyed.apply(lambda p: p.x * p.y, Point(4)) == 8
    assert keyed.apply(keyed.adder(2), 5) == 7
'''

#: What each recorded call returns, in the order the tests make them.
EXPECTED = [4, math.sqrt(12), 18, 103, 6, 8, 7]


def _record(tmp_path, monkeypatch):
    """Run the toy tests under the real recorder; returns (calls, dropped reasons)."""
    src, tests = tmp_path / "src", tmp_path / "tests"
    (src / "keyed").mkdir(parents=True)
    (src / "keyed" / "__init__.py").write_text(PROJECT)
    tests.mkdir()
    (tests / "test_keyed.py").write_text(TESTS)
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.syspath_prepend(str(tests))
    for name in ("keyed", "test_keyed"):
        sys.modules.pop(name, None)
    import test_keyed

    saved = probe.HELD_PACKAGES[0]
    recorder = probe._Recorder({"targets": [["keyed/__init__.py", "apply"], ["keyed/__init__.py", "total"]],
                                "allowed_modules": ["keyed"], "max_per_target": 8, "max_bytes": 4000,
                                "out": str(tmp_path / "calls.json"), "dropped_out": str(tmp_path / "dropped.json")})
    sys.settrace(recorder.on_call)
    try:
        test_keyed.test_lambdas_and_helpers()
        test_keyed.test_local_functions()
        test_keyed.test_classes()
    finally:
        sys.settrace(None)
        probe.HELD_PACKAGES[0] = saved
        probe._BUILT.clear()
        for name in ("keyed", "test_keyed"):
            sys.modules.pop(name, None)
    recorder.write()
    return (json.loads((tmp_path / "calls.json").read_text()),
            json.loads((tmp_path / "dropped.json").read_text()))


def _replay(tmp_path, calls):
    """Replay the calls with the real probe as a script, with only the project on its path."""
    inputs = [{"id": f"i{n}", "module": "keyed", "qualname": call["target"][1], "args": call["args"]}
              for n, call in enumerate(calls)]
    spec = replay_spec(inputs, [str(tmp_path / "src")])
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    shutil.copy(PROBE_SOURCE, tmp_path / "probe.py")
    out = subprocess.run([sys.executable, "-s", "-B", "probe.py", "replay", "spec.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"})
    answers, problem = parse_replay_output(out.stdout, [item["id"] for item in inputs])
    assert answers is not None, (problem, out.stderr[-2000:])
    return [answers[item["id"]] for item in inputs]


def test_the_tests_own_functions_and_classes_are_recorded_as_their_source_and_replay_without_them(
        tmp_path, monkeypatch):
    calls, dropped = _record(tmp_path, monkeypatch)
    assert dropped == {}
    assert [c["target"][1] for c in calls] == ["apply", "apply", "apply", "total", "apply", "apply", "apply"]
    # the test module is gone where the replay runs: the answers come from the stored source alone
    shutil.rmtree(tmp_path / "tests")
    answers = _replay(tmp_path, calls)
    assert [a["c"]["raises"] for a in answers] == [None] * len(EXPECTED)
    assert [a["c"]["return"] for a in answers] == [probe.canonical(v) for v in EXPECTED]
    # the subclass's state and the timer's are part of the answer, under the names the tests gave them
    assert "test_keyed.Plus" in json.dumps(answers[3]["c"]["args_after"])
    assert '"time", 6' in json.dumps(answers[4]["c"]["args_after"])


def test_perturbed_variants_of_such_calls_pickle_again(tmp_path, monkeypatch):
    calls, _ = _record(tmp_path, monkeypatch)
    saved = probe.HELD_PACKAGES[0]
    probe.HELD_PACKAGES[0] = None  # as in the perturbing process, which knows no replayable packages
    try:
        variants = probe.perturb(calls, 6)
        made = [probe.loads(base64.b64decode(v["args"]), allowed={"keyed"}) for v in variants]
    finally:
        probe.HELD_PACKAGES[0] = saved
    assert len(variants) > len(calls)
    # a function remade from its source keeps what it needs to pickle once more
    timer = made[[v["origin"] for v in variants].index("test:4")]["pos"][0]
    assert type(timer).__name__ == "Timer" and timer(None) == 6


def test_a_name_the_replay_cannot_import_keeps_the_call_out():
    """A lambda that reads ``pytest`` (importable where the tests run, not where the replay does)
    is not pickled as its source."""
    saved = probe.HELD_PACKAGES[0]
    probe.HELD_PACKAGES[0] = frozenset({"termgym"})
    try:
        def uses_pytest():
            return pytest.approx(1)

        def uses_math():
            return math.floor(1.5)

        assert probe._by_source(__name__, uses_pytest.__qualname__)
        assert probe._source_reduce(uses_pytest) is None
        made, (source, name, namespace, _, _) = probe._source_reduce(uses_math)
        assert made is probe.source_function and name == "uses_math" and namespace["math"] is math
        assert made(source, name, namespace, None, None)() == 1
    finally:
        probe.HELD_PACKAGES[0] = saved


def test_sabotage_without_source_pickling_those_calls_are_dropped(tmp_path, monkeypatch):
    """Switched off, the recorder drops every call that carries the tests' code, naming why: this
    test and the one above can fail."""
    monkeypatch.setattr(probe, "_by_source", lambda module, qualname: False)
    calls, dropped = _record(tmp_path, monkeypatch)
    assert calls == []
    reasons = " ".join(dropped)
    assert "Can't pickle local object" in reasons or "does not pickle" in reasons
    assert "test_keyed" in reasons
