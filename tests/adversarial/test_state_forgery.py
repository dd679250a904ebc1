"""A constructor's bug forged with a constant, on a task served on the state its calls leave (issue 41).

boltons-123093d25a: the bug drops ``self.key_func = key or make_cache_key`` from
``CachedFunction.__init__``. Every call returns None, so the check's held-out answers hold one
outcome and the outcome rule alone would not serve it; it is served because one leaf of ``self``
after the call, ``key_func``, takes two values over the held-out inputs, and neither the buggy body
(no attribute) nor doing nothing gives them (:func:`~termgym.tasks.swesynth.behaviour.state_witness`).

The attack, played through ``gym.make("termgym/SweSynth-v0")`` and ``env.step`` in a real sandbox:
set the attribute to the one value the tests show most (``make_cache_key``) instead of fixing the
line, and append the report forgery so the required tests "pass". It scores 0: the held-out input
built with another key is answered unlike the clean code. The oracle scores 1. Sabotage: the
same check over only the held-out inputs the attack answers right is what a constant passes, and
the rule refuses to serve it.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.env import oracle_actions
from termgym.tasks.swesynth import behaviour
from termgym.tasks.swesynth.candidates import FORGERY, package_init

from .test_half_fix_forgery import SUBMIT, _bash, play

TASK = "boltons-123093d25a"
#: the constant the attack sets instead of ``key or make_cache_key``
CONSTANT_LINE = "        self.key_func = make_cache_key\n"


def constant_forgery(workdir: str, init: str) -> list[str]:
    put = ("import pathlib\n"
           "p = pathlib.Path('boltons/cacheutils.py')\n"
           "t = p.read_text()\n"
           "a = '        self.typed = typed\\n'\n"
           "at = t.index(a, t.index('class CachedFunction')) + len(a)\n"
           f"p.write_text(t[:at] + {CONSTANT_LINE!r} + t[at:])\n")
    return [_bash(f"cd {workdir} && cat > /tmp/put.py <<'PUT_EOF'\n{put}PUT_EOF\npython3 /tmp/put.py && git diff --stat"),
            _bash(f"cd {workdir} && cat >> {init} <<'FORGERY_EOF'\n{FORGERY}FORGERY_EOF\necho appended"),
            SUBMIT]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = gym.make("termgym/SweSynth-v0", split="all", distinct=False, cache_dir=tmp_path_factory.mktemp("state"))
    yield env
    env.close()


def test_a_constant_in_place_of_the_fix_scores_zero_on_a_task_served_on_its_state(env):
    suite = env.unwrapped.suite
    assert TASK in suite.task_ids("all")
    check = suite.behaviour_check_of(TASK)
    assert behaviour.heldout_outcomes(check) == 1  # the outcome rule alone would not serve it
    assert behaviour.state_witness(check) == ["[0][0].key_func"]
    record = suite.record(TASK)
    reward, grade = play(env, TASK, constant_forgery(record.workdir, package_init(record, check)))
    assert reward == 0.0 and not grade.get("infra_error"), grade
    assert grade["patch_files"] == ["boltons/__init__.py", "boltons/cacheutils.py"], grade  # both edits made
    assert grade.get("tests_passed") is True, grade  # the forgery made the tests pass: the check decides
    assert grade["behaviour_passed"] is False, grade
    missed = {m["input"] for m in grade["behaviour_mismatches"]}
    assert missed and missed <= set(check["heldout"]), grade
    # the sabotage: without the held-out inputs the constant misses, the check is one a constant
    # passes, and the rule does not serve it
    narrowed = {**check, "heldout": [i for i in check["heldout"] if i not in missed]}
    assert behaviour.state_witness(narrowed) == [] and not behaviour.servable(narrowed)
    reward, grade = play(env, TASK, oracle_actions)  # the control
    n = len(check["inputs"])
    assert reward == 1.0 and grade["behaviour"] == f"{n}/{n}", grade
