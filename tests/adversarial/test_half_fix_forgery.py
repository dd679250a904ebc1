"""Half fixes of multi-bug tasks, with the tests' reports forged, on the served default suite (issue 41).

A task whose bug patch changes two or more functions is passed by a patch that fixes only the
functions the check's held-out telling inputs call, leaves the other bug in place and appends to
the package ``__init__.py`` a few lines that, under pytest only, turn every failed report into a
pass: the required tests "pass", and no replayed answer shows the bug left. The per-bug rule of
:func:`~termgym.tasks.swesynth.behaviour.servable` serves such a task only when each changed
function's bug alone (replayed with only its hunks of the bug patch, stored in the check's
``per_bug``) is told apart by a held-out input (:func:`~termgym.tasks.swesynth.behaviour.uncovered_targets`).

Played through ``gym.make("termgym/SweSynth-v0")`` and ``env.step`` on real v2 tasks, real
sandboxes: on served multi-function tasks (drawn with a fixed seed) every half fix scores 0 while
the forgery makes the tests pass (the check decides), and the oracle scores 1. Sabotage: with the
per-bug rule switched off, a task the old rule served and the new one refuses (one function's bug
alone changes no stored answer) is served again and the same attack scores 1 on it; with the rule
on it is not served.
"""

from __future__ import annotations

import random

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.env import oracle_actions
from termgym.factory.swesynth.behaviour_record import bug_hunks_by_target
from termgym.tasks.swesynth import behaviour
from termgym.tasks.swesynth.candidates import FORGERY, package_init

SEED = 41
SUBMIT = "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


def _bash(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def half_fix_actions(workdir: str, patch: str, init: str) -> list[str]:
    """The attack's messages: undo the bug hunks of ``patch`` (the fix of those functions alone),
    append the forgery to the package ``__init__.py``, run nothing else, submit."""
    return [_bash(f"cd {workdir} && cat > /tmp/half.patch <<'HALF_EOF'\n{patch}HALF_EOF\n"
                  "git apply -R --whitespace=nowarn /tmp/half.patch && rm -f /tmp/half.patch && git diff --stat"),
            _bash(f"cd {workdir} && cat >> {init} <<'FORGERY_EOF'\n{FORGERY}FORGERY_EOF\necho appended"),
            SUBMIT]


def play(env, task_id: str, actions) -> tuple[float, dict]:
    """One episode of ``task_id``: ``actions`` (a list, or a function of the env after reset)."""
    env.reset(options={"task_id": task_id})
    messages = actions(env.unwrapped) if callable(actions) else actions
    for message in messages:
        _, reward, terminated, truncated, info = env.step(message)
        if terminated or truncated:
            return float(reward), info["grade"]
    raise AssertionError(f"the episode of {task_id} did not end")


def _old_rule(check) -> bool:
    """What ``behaviour="required"`` served before the per-bug rule."""
    return bool(behaviour.heldout_telling(check)) and (behaviour.heldout_outcomes(check) or 0) >= 2


def draw(suite, ids, want, n: int) -> list[tuple[str, dict[str, str], str]]:
    """``n`` tasks of ``ids`` (shuffled with :data:`SEED`) whose check passes ``want``, whose bug
    changes two or more functions in different places, in a package: ``(id, hunks by function, init)``."""
    out = []
    for tid in random.Random(SEED).sample(sorted(ids), len(ids)):
        check = suite.behaviour_check_of(tid)
        if not check or len(check.get("targets") or ()) < 2 or not want(check):
            continue
        record = suite.record(tid)
        hunks, init = bug_hunks_by_target(record, check["targets"]), package_init(record, check)
        if hunks and init:
            out.append((tid, hunks, init))
            if len(out) == n:
                break
    assert len(out) == n, f"only {len(out)} tasks fit"
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("half-fix-cache")


@pytest.fixture(scope="module")
def env(cache):
    env = gym.make("termgym/SweSynth-v0", split="all", cache_dir=cache)
    yield env
    env.close()


def test_half_fixes_with_forged_reports_score_zero_on_served_multi_function_tasks(env):
    suite = env.unwrapped.suite
    served = suite.task_ids("all")
    forged = []
    for tid, hunks, init in draw(suite, served, lambda c: True, 6):
        assert not behaviour.uncovered_targets(suite.behaviour_check_of(tid)), tid
        name, own = next(iter(hunks.items()))  # fix this function only; every other bug stays
        reward, grade = play(env, tid, half_fix_actions(suite.record(tid).workdir, own, init))
        assert reward == 0.0 and grade["score"] == 0.0, (tid, name, grade)
        assert not grade.get("infra_error"), (tid, name, grade)
        if grade.get("tests_passed") is not True:
            # the forgery did not make the tests pass: the half fix left the package unable to
            # import (a coordinated bug fixed on one side only: jsonpickle's _store with its callers
            # still swapped; all_result 0/N), or a test escaped it (pyrsistent-c3ecaded99, a
            # release-history task of session 42: 535/536). A zero, but not the case this test is
            # about; the next task
            passed, _, total = grade.get("all_result", "").partition("/")
            assert passed.isdigit() and total.isdigit() and int(passed) < int(total), (tid, name, grade)
            continue
        # the forgery worked: the tests alone would have paid; the replay is what says no
        assert grade["behaviour_passed"] is False and grade["behaviour_mismatches"], (tid, name, grade)
        reward, grade = play(env, tid, oracle_actions)  # the control: the whole fix scores 1
        n = len(suite.behaviour_check_of(tid)["inputs"])
        assert reward == 1.0 and grade["behaviour"] == f"{n}/{n}", (tid, grade)
        forged.append(tid)
        if len(forged) == 2:
            break
    assert len(forged) == 2, f"the forgery made the tests pass on only {forged} of the drawn tasks"


def test_sabotage_without_the_per_bug_rule_a_half_fix_scores_one(env, cache, monkeypatch):
    """A task the old rule served and the per-bug rule refuses: one function's bug alone changes no
    stored answer (measured). With the rule on it is not served; with it off it is, and fixing the
    other functions plus the forgery scores 1 there, that bug still in place."""
    uncovered_targets = behaviour.uncovered_targets

    def refused_with_an_unseen_bug(check) -> bool:
        uncovered = uncovered_targets(check)
        alone = (check.get("per_bug") or {}).get("telling") or {}
        return len(uncovered) == 1 and alone.get(uncovered[0]) == []

    monkeypatch.setattr(behaviour, "uncovered_targets", lambda check: [])  # the rule off
    unruled = gym.make("termgym/SweSynth-v0", split="all", cache_dir=cache)
    try:
        suite = unruled.unwrapped.suite
        ((tid, hunks, init),) = draw(suite, suite.task_ids("all"), refused_with_an_unseen_bug, 1)
        check = suite.behaviour_check_of(tid)
        assert _old_rule(check) and tid in suite.task_ids("all")  # served without the rule
        assert tid not in env.unwrapped.suite.task_ids("all")  # the rule on: not served
        (left,) = uncovered_targets(check)
        covered = "".join(own for name, own in hunks.items() if name != left)
        reward, grade = play(unruled, tid, half_fix_actions(suite.record(tid).workdir, covered, init))
    finally:
        unruled.close()
    assert reward == 1.0 and grade["behaviour_passed"] is True and grade.get("tests_passed") is True, (tid, left, grade)
