"""Behaviour checks hold no input whose answer moves with the clock.

The full oracle sweep of the v2 suite (session 13) found two cachetools tasks whose *clean* code no
longer reproduced its recorded answers: their inputs held a ``TTLCache`` timed by ``datetime.now``,
which expires entries while being unpickled once the recorded expiry (a day later) had passed, so
every grade of those tasks became an infrastructure error. One timed by ``time.monotonic`` depends
on how long the replaying machine has been up. The recorder now refuses such inputs, ``termgym
swesynth behaviour --drop-clock`` repairs stored checks, and no bundled check holds one.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import pickle
import shutil
import time

import pytest

from termgym.factory.swesynth.behaviour_record import drop_clock_inputs, without_clock_inputs
from termgym.tasks.swesynth.behaviour import clock_reference

#: Arguments of two inputs the v2 suite held before the repair (cachetools-a8bb549cb0's i1, a
#: ``TTLCache(3, 600, time.monotonic)`` call, and cachetools-02502793ae's i46, a cache timed by
#: ``datetime.now`` whose recorded entry had expired by the sweep).
MONOTONIC_TTL = ("gASVYAAAAAAAAAB9lCiMA3Bvc5RdlCiMCmNhY2hldG9vbHOUjAhUVExDYWNoZZSTlCmBlEsDTVgCjAR0aW1llIwJbW9ub3Rvbmlj"
                 "lJOUTmWMAmt3lH2UjAN2YXKUXZSMBXZhcmt3lH2UdS4=")
NOW_TTL = ("gASVrAEAAAAAAAB9lCiMA3Bvc5RdlCiMCmNhY2hldG9vbHOUjAhUVExDYWNoZZSTlCmBlH2UKIwMX0NhY2hlX19kYXRhlH2UjBBfQ2Fj"
           "aGVfX2N1cnJzaXpllEsBjA9fQ2FjaGVfX21heHNpemWUSwGMEl9UaW1lZENhY2hlX190aW1lcpRoA4wSX1RpbWVkQ2FjaGUuX1RpbWVy"
           "lJOUjAhidWlsdGluc5SMB2dldGF0dHKUk5SMCGRhdGV0aW1llIwIZGF0ZXRpbWWUk5SMA25vd5SGlFKUhZRSlIwPX1RUTENhY2hlX19y"
           "b290lGgDjA5UVExDYWNoZS5fTGlua5STlE5OhpRSlIwQX1RUTENhY2hlX19saW5rc5SMC2NvbGxlY3Rpb25zlIwLT3JkZXJlZERpY3SU"
           "k5QpUpRLAWgcSwFoFEMKB+oLHA0BFgNHo5SFlFKUhpRSlHOMDl9UVExDYWNoZV9fdHRslGgSjAl0aW1lZGVsdGGUk5RLAUsASwCHlFKU"
           "dWJoFEMKB+oLHA0BFgNNjZSFlFKUZYwCa3eUfZSMA3ZhcpRdlIwFdmFya3eUfZR1Lg==")


def _args(*pos, protocol: int = 4) -> str:
    return base64.b64encode(pickle.dumps({"pos": list(pos), "kw": {}, "var": [], "varkw": {}},
                                         protocol=protocol)).decode()


class Timed:
    """A stand-in for a cache that keeps the callable it reads the time with."""

    def __init__(self, timer):
        self.timer = timer


def test_the_inputs_the_sweep_caught_are_named_by_their_clock():
    assert clock_reference(MONOTONIC_TTL) == "time.monotonic"
    assert clock_reference(NOW_TTL) == "datetime.datetime.now"


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize(("value", "clock"), [
    (time.monotonic, "time.monotonic"),
    (time.time, "time.time"),
    (time.perf_counter_ns, "time.perf_counter_ns"),
    (datetime.datetime.now, "datetime.datetime.now"),
    (datetime.datetime.utcnow, "datetime.datetime.utcnow"),
    (datetime.date.today, "datetime.date.today"),
    (functools.partial(time.time), "time.time"),
    (Timed(time.monotonic), "time.monotonic"),
    ([datetime.datetime(2026, 1, 2), Timed(datetime.datetime.now)], "datetime.datetime.now"),
])
def test_a_pickled_clock_is_found_however_it_is_written(value, clock, protocol):
    assert clock_reference(_args(1, value, protocol=protocol)) == clock


@pytest.mark.parametrize("value", [
    datetime.datetime(2026, 11, 28, 13, 1, 22),  # a moment is a value, not a clock
    datetime.timedelta(days=1),
    datetime.date(2026, 12, 1),
    "now", ["datetime", "now"], {"time": "monotonic"},  # the words alone are data
    time.sleep, datetime.datetime.fromtimestamp, datetime.datetime.strptime,
    Timed(len),
])
def test_values_and_other_callables_are_not_clocks(value):
    assert clock_reference(_args(value)) is None
    assert clock_reference(_args(value, protocol=2)) is None


def test_bytes_that_are_not_a_pickle_are_left_to_the_replay():
    assert clock_reference("not base64!") is None
    assert clock_reference(base64.b64encode(b"\x80\x04garbage").decode()) is None


def test_the_recorder_leaves_clocked_candidates_out():
    items = [{"args": _args(1)}, {"args": MONOTONIC_TTL}, {"args": _args("x")}, {"args": NOW_TTL}]
    kept, clocks = without_clock_inputs(items)
    assert kept == [items[0], items[2]]
    assert clocks == ["time.monotonic", "datetime.datetime.now"]


def _check(telling: list[str]) -> dict:
    inputs = [{"id": "i0", "module": "m", "qualname": "f", "args": _args(1)},
              {"id": "i1", "module": "m", "qualname": "f", "args": NOW_TTL},
              {"id": "i2", "module": "m", "qualname": "f", "args": _args(2)}]
    return {"version": 1, "inputs": inputs, "answers": {i["id"]: {"h": str(n) * 64} for n, i in enumerate(inputs)},
            "telling": telling, "heldout": ["i1", "i2"], "discriminating": len(telling)}


def test_a_stored_check_loses_its_clocked_inputs_and_keeps_the_rest():
    pruned, dropped = drop_clock_inputs(_check(["i1", "i2"]))
    assert dropped == ["i1"]
    assert [i["id"] for i in pruned["inputs"]] == ["i0", "i2"] and sorted(pruned["answers"]) == ["i0", "i2"]
    assert pruned["telling"] == ["i2"] and pruned["heldout"] == ["i2"] and pruned["discriminating"] == 1
    clean = _check(["i2"])
    clean["inputs"].pop(1)
    assert drop_clock_inputs(clean) == (clean, [])


def test_a_check_told_apart_only_by_clocked_inputs_is_gone():
    assert drop_clock_inputs(_check(["i1"])) == (None, ["i1"])


def test_no_bundled_check_holds_a_clocked_input():
    from termgym.tasks.swesynth.suite import NAMED_SUITES, SweSynthSuite

    found = []
    for name in ("v2", "v1", "toy"):
        suite = SweSynthSuite(NAMED_SUITES[name], behaviour="any")
        for task_id in suite.task_ids("all"):
            check = suite.behaviour_check_of(task_id)
            found += [f"{task_id}:{item['id']} ({clock})" for item in (check or {}).get("inputs", ())
                      if (clock := clock_reference(item["args"]))]
    assert not found, f"{len(found)} bundled inputs answer by the clock, e.g. {found[:5]}"


def test_drop_clock_repairs_stored_checks_in_real_sandboxes(tmp_path, capsys):
    """`termgym swesynth behaviour --drop-clock` on three toy task folders: one check with a clocked
    input beside the inputs that tell the bug apart (pruned back to what the recorder stored, proven
    in a fresh sandbox), one told apart *only* by a clocked input (recorded again), one untouched."""
    from termgym.cli import main
    from termgym.tasks.swesynth import default_suite
    from termgym.tasks.swesynth.behaviour import servable

    toy = default_suite("toy")
    ids = sorted(t for t in toy.task_ids("all") if toy.record(t).behaviour)[:3]
    root = tmp_path / "tasks"
    root.mkdir()
    original = {}
    for task_id in ids:
        folder = toy._folders[task_id]
        shutil.copytree(folder, root / task_id)
        repo_dir = json.loads((folder / "task.json").read_text())["repo_dir"]
        link = root / task_id / repo_dir
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to((folder / repo_dir).resolve())
        original[task_id] = json.loads((folder / "behaviour.json").read_text())["behaviour"]
    clocked = {"id": "iclock", "module": "m", "qualname": "f", "args": NOW_TTL}
    for task_id, only_clock in ((ids[0], False), (ids[1], True)):
        check = json.loads(json.dumps(original[task_id]))
        check["inputs"].insert(0, clocked)
        check["answers"]["iclock"] = {"h": "0" * 64}
        check["telling"] = ["iclock"] if only_clock else ["iclock", *check["telling"]]
        check["heldout"] = ["iclock", *check.get("heldout", [])]
        (root / task_id / "behaviour.json").write_text(json.dumps({"task_id": task_id, "behaviour": check}))

    assert main(["swesynth", "behaviour", "--suite", str(root), "--drop-clock", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["clock_pruned"] == 1 and stats["rerecorded"] == 1 and stats["errors"] == 0, stats
    pruned = json.loads((root / ids[0] / "behaviour.json").read_text())["behaviour"]
    assert pruned["inputs"] == original[ids[0]]["inputs"] and pruned["answers"] == original[ids[0]]["answers"]
    assert servable(pruned) == servable(original[ids[0]])
    again = json.loads((root / ids[1] / "behaviour.json").read_text())["behaviour"]
    assert again and again["telling"] and "iclock" not in again["answers"]
    assert not any(clock_reference(item["args"]) for item in again["inputs"])
    untouched = json.loads((root / ids[2] / "behaviour.json").read_text())["behaviour"]
    assert untouched == original[ids[2]]

    assert main(["swesynth", "behaviour", "--suite", str(root), "--drop-clock", "--quiet"]) == 0
    nothing = json.loads(capsys.readouterr().out)
    assert nothing["clock_pruned"] == nothing["rerecorded"] == 0, nothing


def test_the_recorder_refuses_a_task_whose_every_input_holds_a_clock(monkeypatch, tmp_path):
    """The recorder's own run on a toy task (real sandbox, the tests under the recorder): with every
    recorded input taken for clocked, no check is made, and the reason names the clock."""
    import termgym.factory.swesynth.behaviour_record as recorder
    from termgym.factory.swesynth.behaviour_record import NoCheck, record_behaviour
    from termgym.tasks.swesynth import default_suite

    toy = default_suite("toy", cache_dir=tmp_path)
    task_id = sorted(t for t in toy.task_ids("all") if toy.record(t).behaviour)[0]
    monkeypatch.setattr(recorder, "clock_reference", lambda args: "time.monotonic")
    with pytest.raises(NoCheck, match=r"every recorded input's arguments hold a clock \(time.monotonic\)"):
        record_behaviour(toy.record(task_id), cache_dir=tmp_path)
