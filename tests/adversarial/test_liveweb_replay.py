"""LIVEWEB answers cannot be memorised: replaying an earlier episode's answers scores < 0.1.

Each reset of a LIVEWEB task draws a fresh world variant, a start anywhere in a 120-day history
and questions (subjects, thresholds) from that state. The attack: play a task once, keep the
*perfect* answers of that episode, reset the same task id and submit them again. Measured over
held-out (test split) tasks of every family, for both ``start`` modes, and end to end through the
real env (bubblewrap sandbox, forwarded ports, real clock).
"""

from __future__ import annotations

import json
import random

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.env import oracle_actions
from termgym.tasks.liveweb import FAMILIES, LiveWebSuite


def _test_ids(suite: LiveWebSuite, n: int, seed: int = 13) -> list[str]:
    ids = list(suite.task_ids("test"))
    return random.Random(seed).sample(ids, n)


@pytest.mark.parametrize("start", ["random", "fixed"])
def test_replayed_perfect_answers_of_an_earlier_reset_score_below_0_1(start, capsys):
    suite = LiveWebSuite(speed=0, start=start)
    ids = _test_ids(suite, 60)
    assert {tid.split("-")[1] for tid in ids} == set(FAMILIES)
    replayed = []
    for tid in ids:
        earlier = suite.load(tid)
        answers = earlier.expected_answers(earlier.start_time())
        assert earlier.grade_submission(json.dumps(answers), at=earlier.start_time()).score == 1.0
        later = suite.load(tid)  # the next reset of the same task id
        replayed.append(later.grade_submission(json.dumps(answers), at=later.start_time()).score)
    mean = sum(replayed) / len(replayed)
    with capsys.disabled():
        print(f"\nLIVEWEB replay ({start}): mean score {mean:.3f} over {len(ids)} test tasks "
              f"({sum(s > 0 for s in replayed)} tasks with any credit)")
    assert mean < 0.1


def test_replaying_answers_from_the_same_moment_of_another_variant_fails():
    """Even knowing *when* an episode starts does not help: the world variant moves every number."""
    suite = LiveWebSuite(speed=0, start="fixed")  # reproducible episodes
    replayed = []
    for tid in _test_ids(suite, 30, seed=5):
        a, b = suite.load(tid), suite.load(tid)
        # b's questions, answered from a's world at b's start time
        b_on_a = {q.qid: v for q, v in zip(b.questions, _answers_in(a.world, b, b.start_time()), strict=True)}
        replayed.append(b.grade_submission(json.dumps(b_on_a), at=b.start_time()).score)
    print(f"answers from another variant at the same moment: mean score {sum(replayed) / len(replayed):.3f}")
    assert sum(replayed) / len(replayed) < 0.35


def _answers_in(world, task, t):
    from termgym.tasks.liveweb.answers import compute, sources
    from termgym.tasks.liveweb.task import _meta

    out = []
    for q in task.questions:
        meta = _meta(sources(q.spec))
        try:
            out.append(compute(q.spec, {s: world.collection(s, t) for s in meta}, meta))
        except (LookupError, ArithmeticError):
            out.append(None)
    return out


def test_replay_through_the_env_fails_while_the_oracle_scores_one(capsys):
    """Real episodes: the oracle scores 1.0 through the sandbox network; its submission, replayed
    after the next reset of the same task id, scores (almost) nothing."""
    env = gym.make("termgym/LiveWeb-v0", split="test")  # real clock (speed 1), paged API
    oracle, replayed, requests = [], [], []
    try:
        for tid in ("liveweb-crypto-00020", "liveweb-cross-00040", "liveweb-news-00060", "liveweb-books-00080"):
            env.reset(options={"task_id": tid})
            task = env.unwrapped.task
            before = task.episode.requests
            submission = task.oracle_submission(env.unwrapped.sandbox)
            requests.append(task.episode.requests - before)
            actions = oracle_actions(env.unwrapped, submission)
            for action in actions:
                _, reward, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            oracle.append(reward)
            env.reset(options={"task_id": tid})
            # the new episode may ask more questions: the replay fills the extra keys with nothing
            replay = json.loads(submission)
            for q in env.unwrapped.task.questions:
                replay.setdefault(q.qid, None)
            _, reward, terminated, _, info = env.step(env.unwrapped.protocol.submit_message(json.dumps(replay)))
            assert terminated, info.get("submission_error")
            replayed.append(reward)
    finally:
        env.close()
    with capsys.disabled():
        print(f"\nLIVEWEB env: oracle {oracle}, replayed {replayed}, oracle requests per run {requests}")
    assert oracle == [1.0] * len(oracle)
    assert sum(replayed) / len(replayed) < 0.25


def _guess(q) -> object:
    """An answer from the question's text alone: the first item it names, a count of 3, a change of 0."""
    import re

    named = re.findall(r"(SN\d+ \([^)]+\)|“[^”]+”|[A-Z][\w ]+ \([A-Z]{2,5}\))", q.text)
    if q.answer_type == "name":
        return named[0] if named else ""
    if q.answer_type == "names_set":
        return named[: (len(named) + 1) // 2]
    if q.answer_type == "names_list":
        return named[:3]
    return 3 if q.answer_type == "integer" else 0.0


def test_guessing_from_the_question_scores_below_0_1(capsys):
    suite = LiveWebSuite(speed=0, start="fixed")
    scores = []
    for tid in _test_ids(suite, 60, seed=17):
        task = suite.load(tid)
        guess = {q.qid: _guess(q) for q in task.questions}
        scores.append(task.grade_submission(json.dumps(guess), at=task.start_time()).score)
    mean = sum(scores) / len(scores)
    with capsys.disabled():
        print(f"\nLIVEWEB guessing from the question: mean score {mean:.3f} over {len(scores)} test tasks")
    assert mean < 0.1
