"""Behaviour checks hold no input whose answer moves with the clock (or with chance).

The full oracle sweep of the v2 suite (session 13) found two cachetools tasks whose *clean* code no
longer reproduced its recorded answers: their inputs held a ``TTLCache`` timed by ``datetime.now``,
which expires entries while being unpickled once the recorded expiry (a day later) had passed, so
every grade of those tasks became an infrastructure error. One timed by ``time.monotonic`` depends
on how long the replaying machine has been up. The recorder now refuses such inputs, ``termgym
swesynth behaviour --drop-clock`` repairs stored checks, and no bundled check holds one.

Session 14's sweep found the rest of it: calls that read the clock inside the code (more-itertools'
``time_limited`` comparing ``time.monotonic()`` with a recorded start) or draw from the shared random
generator (``_sample_unweighted``). A watched replay (a profile function) now finds both at
recording and in the repair.
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


# -- clocks read inside the code: a replay that watches ------------------------------------------------

#: A package whose functions read the clock in the ways project code does, and some that do not.
CLOCK_PACKAGE = {
    "__init__.py": "",
    "helpers.py": "import time\n\ndef ticks():\n    return time.perf_counter()\n",
    "core.py": '''
import datetime as _dt
import logging
import time
from datetime import date, datetime
from time import monotonic

from . import helpers

log = logging.getLogger(__name__)


class Deadline:
    def __init__(self, limit, start):
        self.limit, self.start = limit, start

    def expired(self):  # more-itertools' time_limited: compares the clock with a recorded start
        return monotonic() - self.start > self.limit


class Stamped:
    """Reads the clock while being unpickled (as a cache timed by the clock expires entries)."""
    def __setstate__(self, state):
        self.__dict__.update(state, seen=time.time() > 0)


class Moment(datetime):
    pass


def wall_clock(x):
    return int(time.time()) > x


def this_year(x):
    return datetime.now().year >= x


def today_later(x):
    return date.today() > x


def subclass_now(x):
    return Moment.now().year >= x


def through_a_helper(x):
    return helpers.ticks() > x


def module_attribute(x):
    return _dt.datetime.utcnow().year >= x


def logs_a_warning(x):
    log.warning("value %s", x)  # logging stamps the record with time.time_ns(): no answer shows it
    return x + 1


def pure(x):
    return x * 2


def unpickled(value):
    return value.seen


import random
import secrets
import uuid


def shuffled(xs):
    xs = list(xs)
    random.shuffle(xs)  # the shared generator, seeded by the OS when the process starts
    return sorted(xs)  # the same answer every time: still a draw the check must not hang on


def coin(x):
    return random.random() < x


def token(x):
    return len(uuid.uuid4().hex) == x


def secret(x):
    return len(secrets.token_hex(x))


def seeded_die(x):
    return random.Random(x).randint(1, 6)  # a generator of its own with a fixed seed: repeatable
''',
}
READS_CLOCK = ["expired", "wall_clock", "this_year", "today_later", "subclass_now", "through_a_helper",
               "module_attribute", "unpickled"]
DRAWS_CHANCE = ["shuffled", "coin", "token", "secret"]


def _replay_sample(tmp_path, watch: bool):
    """Replay one input per function of :data:`CLOCK_PACKAGE` with the real probe, as a script."""
    import importlib
    import subprocess
    import sys

    from termgym.tasks.swesynth.behaviour import PROBE_SOURCE, parse_replay_output, replay_spec

    root = tmp_path / "src"
    (root / "clockwatch_sample").mkdir(parents=True, exist_ok=True)
    for name, text in CLOCK_PACKAGE.items():
        (root / "clockwatch_sample" / name).write_text(text)
    sys.path.insert(0, str(root))
    try:
        core = importlib.import_module("clockwatch_sample.core")
        stamped = core.Stamped.__new__(core.Stamped)
        stamped.name = "entry"  # some state, so unpickling calls __setstate__
        args = {"expired": [core.Deadline(5, 1000.0)], "wall_clock": [0], "this_year": [2000],
                "today_later": [datetime.date(2000, 1, 1)], "subclass_now": [2000], "through_a_helper": [-1.0],
                "module_attribute": [2000], "logs_a_warning": [1], "pure": [21], "unpickled": [stamped],
                "shuffled": [[3, 1, 2]], "coin": [2], "token": [32], "secret": [4], "seeded_die": [7]}
        inputs = []
        for name, pos in args.items():
            qualname = "Deadline.expired" if name == "expired" else name  # its one argument is self
            payload = {"pos": pos, "kw": {}, "var": [], "varkw": {}}
            inputs.append({"id": name, "module": "clockwatch_sample.core", "qualname": qualname,
                           "args": base64.b64encode(pickle.dumps(payload, protocol=4)).decode()})
    finally:
        sys.path.remove(str(root))
        for module in [m for m in sys.modules if m.startswith("clockwatch_sample")]:
            del sys.modules[module]
    spec = replay_spec(inputs, [str(root)], watch=watch)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    shutil.copy(PROBE_SOURCE, tmp_path / "probe.py")
    out = subprocess.run([sys.executable, "-s", "-B", "probe.py", "replay", "spec.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"})
    answers, problem = parse_replay_output(out.stdout, [item["id"] for item in inputs])
    assert answers is not None, (problem, out.stderr[-2000:])
    return answers


def test_a_watched_replay_names_every_input_that_reads_a_clock_or_draws_chance_and_no_other(tmp_path):
    watched = _replay_sample(tmp_path, watch=True)
    assert sorted(i for i, answer in watched.items() if answer.get("clock")) == sorted(READS_CLOCK)
    assert sorted(i for i, answer in watched.items() if answer.get("chance")) == sorted(DRAWS_CHANCE)
    assert watched["pure"]["c"]["return"] == 42 and watched["logs_a_warning"]["c"]["return"] == 2
    assert watched["shuffled"]["c"]["return"] == ["list", [1, 2, 3]] or watched["shuffled"]["c"]["return"] == [1, 2, 3]


def test_an_unwatched_replay_gives_the_same_answers_and_no_clock_marks(tmp_path):
    plain = _replay_sample(tmp_path / "plain", watch=False)
    watched = _replay_sample(tmp_path / "watched", watch=True)
    assert not any("clock" in answer or "chance" in answer for answer in plain.values())
    repeatable = set(plain) - {"token"} - {"coin"}  # answers that are the same every time
    assert {i: plain[i]["h"] for i in repeatable} == {i: watched[i]["h"] for i in repeatable}


# -- the task the v2 sweep caught: more-itertools' time_limited ---------------------------------------

#: more-itertools-6c2b4b8419 (a bug in ``time_limited.__next__``) held these two inputs until session
#: 14: a ``time_limited`` not yet timed out, whose ``__next__`` compares ``time.monotonic()`` with the
#: start recorded in it (91,132 s of the recording machine's uptime). Replayed on a machine up for
#: less time the answer differed, and every grade of the task was an infrastructure error.
TIME_LIMITED_TASK = "more-itertools-6c2b4b8419"
TIME_LIMITED_INPUTS = {
    "iclock11": ("gASVtAAAAAAAAAB9lCiMA3Bvc5RdlIwTbW9yZV9pdGVydG9vbHMubW9yZZSMDHRpbWVfbGltaXRlZJSTlCmBlH2UKIwNbGltaXRf"
                 "c2Vjb25kc5RLAYwJX2l0ZXJhYmxllIwJaXRlcnRvb2xzlIwFY291bnSUk5RLAIWUUpSMC19zdGFydF90aW1llEdA9j/PD7t0YIwJ"
                 "dGltZWRfb3V0lIl1YmGMAmt3lH2UjAN2YXKUXZSMBXZhcmt3lH2UdS4=",
                 "a8c4fae24b5aa5a271561e6fffca24a95cdf9dbe7a2612d4b8a79d38d22d2f98"),
    "iclock14": ("gASVtwAAAAAAAAB9lCiMA3Bvc5RdlIwTbW9yZV9pdGVydG9vbHMubW9yZZSMDHRpbWVfbGltaXRlZJSTlCmBlH2UKIwNbGltaXRf"
                 "c2Vjb25kc5RK/////4wJX2l0ZXJhYmxllIwJaXRlcnRvb2xzlIwFY291bnSUk5RLAIWUUpSMC19zdGFydF90aW1llEdA9j/PD7t0"
                 "YIwJdGltZWRfb3V0lIl1YmGMAmt3lH2UjAN2YXKUXZSMBXZhcmt3lH2UdS4=",
                 "650236d402fa023f5e32a170019a9db95af31a215ebd8c3817ad1534377838ac"),
}


def _v2_suite():
    from termgym.tasks.swesynth.suite import SUITE_V2_DIR, SweSynthSuite

    return SweSynthSuite(SUITE_V2_DIR, behaviour="any")


#: more-itertools-f8afdf01d4 (a bug in ``_sample_unweighted``) held this input until session 14: a
#: reservoir sample of 4 from 5 drawn with the shared random generator, whose recorded answer came
#: back in every recording replay by chance and then failed the oracle's grade in the sweep.
SAMPLE_TASK = "more-itertools-f8afdf01d4"
SAMPLE_INPUTS = {
    "ichance15": ("gASVUwAAAAAAAAB9lCiMA3Bvc5RdlCiMCGJ1aWx0aW5zlIwEaXRlcpSTlF2UKEsBSwJLA0sESwVlhZRSlEsAYksEZYwCa3eUfZSM"
                  "A3ZhcpRdlIwFdmFya3eUfZR1Lg==",
                  "f7fc796b94eadaefd41ab6396b36faeec3f9e5d106fde6c4f93c56b86a3e06fb"),
}


def _with_inputs(check: dict, inputs: dict, qualname: str) -> dict:
    """The stored check with inputs it held before the repair put back."""
    check = json.loads(json.dumps(check))
    for input_id, (args, digest) in inputs.items():
        check["inputs"].append({"id": input_id, "module": "more_itertools.more", "qualname": qualname,
                                "args": args, "origin": "perturbed"})
        check["answers"][input_id] = {"h": digest}
        check["heldout"] = [*check.get("heldout", []), input_id]
    return check


def _with_time_limited_inputs(check: dict) -> dict:
    return _with_inputs(check, TIME_LIMITED_INPUTS, "time_limited.__next__")


@pytest.mark.parametrize(("task_id", "inputs", "qualname"), [
    (TIME_LIMITED_TASK, TIME_LIMITED_INPUTS, "time_limited.__next__"),
    (SAMPLE_TASK, SAMPLE_INPUTS, "_sample_unweighted"),
])
def test_a_watched_clean_replay_finds_the_calls_on_a_clock_or_chance_in_a_real_task(task_id, inputs, qualname):
    """Real sandbox, real project: of the stored check plus the inputs it held before the repair,
    exactly those read the clock or draw chance (nothing the stored check holds now does; the
    sample's task has no check left: only random draws told its bug apart)."""
    from termgym.factory.swesynth.behaviour_record import clock_or_chance_inputs

    record = _v2_suite().record(task_id)
    stored = record.behaviour or {"version": 1, "canonical": 2, "inputs": [], "answers": {}}
    assert clock_or_chance_inputs(record, _with_inputs(stored, inputs, qualname)) == list(inputs)


def test_drop_clock_prunes_calls_that_read_the_clock_from_a_compact_suite(tmp_path, capsys):
    """`termgym swesynth behaviour --drop-clock` on a one-task compact suite cut from v2, its check
    holding the two clock-reading inputs again: they are dropped, what is left is the stored check
    (proven to reproduce in a fresh sandbox), and a second run finds nothing to do."""
    from termgym.cli import main
    from termgym.tasks.swesynth.suite import SUITE_V2_DIR

    suite = _v2_suite()
    stored = suite.behaviour_check_of(TIME_LIMITED_TASK)
    out = tmp_path / "suite"
    for folder in ("records", "baselines", "behaviour"):
        (out / folder).mkdir(parents=True)
    index = json.loads((SUITE_V2_DIR / "suite.json").read_text())
    index["repos"] = {"more-itertools": index["repos"]["more-itertools"]}
    index["splits"] = {name: [t for t in ids if t == TIME_LIMITED_TASK] if isinstance(ids, list) else ids
                       for name, ids in index["splits"].items()}
    (out / "suite.json").write_text(json.dumps(index))
    line = next(text for text in (SUITE_V2_DIR / "records/more-itertools.jsonl").read_text().splitlines()
                if json.loads(text)["task_id"] == TIME_LIMITED_TASK)
    (out / "records/more-itertools.jsonl").write_text(line + "\n")
    shutil.copy(SUITE_V2_DIR / "baselines/more-itertools.json", out / "baselines/more-itertools.json")
    (out / "behaviour/more-itertools.jsonl").write_text(json.dumps(
        {"task_id": TIME_LIMITED_TASK, "behaviour": _with_time_limited_inputs(stored)}) + "\n")

    assert main(["swesynth", "behaviour", "--suite", str(out), "--drop-clock", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["clock_pruned"] == 1 and stats["rerecorded"] == 0 and stats["errors"] == 0, stats
    lines = [json.loads(text) for text in (out / "behaviour/more-itertools.jsonl").read_text().splitlines()]
    assert lines[-1]["behaviour"]["inputs"] == stored["inputs"] and lines[-1]["behaviour"]["answers"] == stored["answers"]

    assert main(["swesynth", "behaviour", "--suite", str(out), "--drop-clock", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["clock_free"] == 1 and again["clock_pruned"] == again["rerecorded"] == 0, again


def test_the_recorder_keeps_no_input_whose_call_reads_the_clock(tmp_path):
    """The recorder's own run on the real task (its tests under the recorder, perturbations, replays):
    the check it makes still tells the bug apart, and none of its inputs reads the clock."""
    from termgym.factory.swesynth.behaviour_record import clock_or_chance_inputs, record_behaviour

    record = _v2_suite().record(TIME_LIMITED_TASK)
    check = record_behaviour(record, cache_dir=tmp_path)
    assert check["telling"]
    assert clock_or_chance_inputs(record, check) == []
