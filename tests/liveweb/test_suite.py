"""LiveWebSuite and LiveWebTask end to end: ids and splits, the oracle through the sandbox network,
stale answers, nothing to find on disk, the page reader, and the Gymnasium env."""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter

import gymnasium as gym
import pytest

import termgym  # noqa: F401 - registers termgym/LiveWeb-v0
from termgym.tasks.liveweb import FAMILIES, LiveWebSuite, default_suite
from termgym.tasks.liveweb.world import DAY, HISTORY


@pytest.fixture(scope="module")
def suite() -> LiveWebSuite:
    return LiveWebSuite(speed=0, start="fixed")


def test_task_ids_are_many_deterministic_and_split(suite):
    train, test = suite.task_ids("train"), suite.task_ids("test")
    assert len(train) + len(test) == 30_000 and len(test) == 1_500
    assert not set(train) & set(test)
    assert list(suite.task_ids()) == list(train) == list(LiveWebSuite().task_ids("train"))
    assert test[:6] == [f"liveweb-{f}-00000" for f in FAMILIES]
    assert set(suite.task_ids("all")) == set(train) | set(test)
    with pytest.raises(KeyError, match="no split 'dev'"):
        suite.task_ids("dev")


def test_episodes_are_reproducible_by_number_and_bad_ids_are_named(suite):
    # Was: every load of a task id gave the same questions (memorisable). Now each load is a new
    # episode; an episode by number is the same everywhere, and start="fixed" replays the sequence.
    a, b = suite.load_episode("liveweb-cross-00042", 3), LiveWebSuite().load_episode("liveweb-cross-00042", 3)
    assert a.instruction == b.instruction and 2 <= len(a.questions) <= 4 and a.start_time() == b.start_time()
    assert a.metadata["family"] == "cross" and a.metadata["seed"] == 42
    fixed = [LiveWebSuite(start="fixed").load("liveweb-cross-00042") for _ in range(2)]
    assert fixed[0].instruction == fixed[1].instruction  # the first episode of a fresh fixed suite
    again = LiveWebSuite(start="fixed")
    first, second = again.load("liveweb-cross-00042"), again.load("liveweb-cross-00042")
    assert first.instruction == fixed[0].instruction and second.instruction != first.instruction
    for bad in ("liveweb-weather-00001", "liveweb-crypto-99999", "crypto-1", ""):
        with pytest.raises(KeyError, match="no task"):
            suite.load(bad)


def test_suite_options_are_checked():
    with pytest.raises(ValueError, match="source"):
        default_suite(source="cached")
    with pytest.raises(ValueError, match="families"):
        default_suite(families=["crypto", "weather"])
    with pytest.raises(ValueError, match="questions"):
        default_suite(questions=7)
    with pytest.raises(ValueError, match="speed"):
        default_suite(speed=-1)
    with pytest.raises(TypeError):
        default_suite(colour="blue")
    assert [len(default_suite(questions=n).load("liveweb-news-00007").questions) for n in (2, 4)] == [2, 4]


def test_every_family_and_many_templates_occur_with_natural_wording(suite):
    """150 tasks: every family, most of the 49 templates, none dominating, and the wording of old
    ("a emission share", "a opening price", "below 9.5" on a whole-number field) gone."""
    from termgym.tasks.liveweb.questions import CROSS_TEMPLATES, TEMPLATES

    assert len(TEMPLATES) + len(CROSS_TEMPLATES) >= 40
    templates, families, texts = Counter(), set(), []
    for tid in suite.task_ids("all")[:150]:
        task = suite.load(tid)
        families.add(task.family)
        templates.update(task.metadata["templates"])
        texts += [q.text for q in task.questions]
        assert task.metadata["difficulty"] in ("easy", "medium", "hard") and task.metadata["oracle_requests"] >= 1
    assert families == set(FAMILIES)
    assert len(templates) >= 35 and max(templates.values()) / sum(templates.values()) < 0.1, templates.most_common(3)
    joined = "\n".join(texts)
    assert not re.search(r"\ba [aeio]", joined), re.search(r".{40}\ba [aeio].{20}", joined)
    assert not re.search(r"\d\.5\b(?! ?%)", "\n".join(t for t in texts if "copies" in t or "neurons" in t
                                                     or "reviews" in t or "points" in t or "comments" in t))
    assert "/api" not in suite.load("liveweb-cross-00001").instruction


def test_each_load_draws_a_new_world_time_and_questions():
    suite = LiveWebSuite(speed=0)
    tasks = [suite.load("liveweb-crypto-00003") for _ in range(6)]
    base = tasks[0].world.base_time
    starts = {t.start_time() for t in tasks}
    assert len(starts) == 6 and all(base <= s < base + HISTORY for s in starts)
    assert max(starts) - min(starts) > 10 * DAY  # spread over the long history, not one day
    assert len({t.world.variant for t in tasks}) == 6 and len({t.instruction for t in tasks}) == 6
    # the cast (names) is the seed's; the numbers are the episode's
    coins = [{c["name"] for c in t.world.collection("crypto/coins", base)} for t in tasks[:2]]
    assert coins[0] == coins[1]
    prices = [{c["name"]: c["price_usd"] for c in t.world.collection("crypto/coins", base)} for t in tasks[:2]]
    assert prices[0] != prices[1]


def _sample_ids(suite, n: int) -> list[str]:
    rng = random.Random(0)
    seeds = sorted(rng.sample(range(suite.seeds), (n + len(FAMILIES) - 1) // len(FAMILIES)))
    return [f"liveweb-{f}-{s:05d}" for s in seeds for f in FAMILIES][:n]


@pytest.mark.usefixtures("require_bwrap")
def test_oracle_through_the_sandbox_scores_one_and_stale_answers_score_less(suite, capsys):
    """36 tasks: the oracle browses the HTML pages over the sandbox network (forwarded ports,
    /etc/hosts names) and submits; then the same answers, a simulated day later, are stale. The
    requests it makes are the ones its plan counted (the difficulty tiers are measured, not guessed).

    To keep this fast one sandbox serves all 36 tasks: its forwarded ports lead to one episode of
    the world server, which is pointed at each task's world and clock in turn. (One sandbox per
    task, the real lifecycle, is what the browse, leak and env tests use.)
    """
    from termgym.sandbox.local import BubblewrapSandbox

    first = suite.load("liveweb-crypto-00001")
    fresh, stale, changed, requests = [], [], 0, []
    start = time.perf_counter()
    with BubblewrapSandbox(first.sandbox_spec()) as box:
        relay = first.episode
        for tid in _sample_ids(suite, 36):
            task = suite.load(tid)
            relay.world, relay.clock, relay.api = task.world, task.clock, task.api
            before = relay.requests
            submission = task.oracle_submission(box)
            requests.append(relay.requests - before)
            assert requests[-1] == task.metadata["oracle_requests"], (tid, relay.log[-requests[-1]:])
            assert not any(path.startswith("/api") for _, path in relay.log[-requests[-1]:])
            grade = task.grade_submission(submission)
            assert grade.score == 1.0 and grade.passed, (tid, grade.details["feedback"])
            fresh.append(grade.score)
            stale_grade = task.grade_submission(submission, at=task.clock.now() + DAY)
            stale.append(stale_grade.score)
            changed += stale_grade.score < 1.0
            task.teardown()
    first.teardown()
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\nliveweb oracle: 36 tasks in {elapsed:.1f}s; {sum(requests) / len(requests):.1f} requests per task "
              f"(min {min(requests)}, max {max(requests)}); stale mean score {sum(stale) / len(stale):.2f} "
              f"({changed} of 36 tasks lost points a simulated day later)")
    assert changed >= 27
    assert sum(stale) / len(stale) < 0.6
    assert sum(requests) / len(requests) >= 2  # browsing, not one page


def _distinctive(value) -> list[str]:
    """Forms of an answer that would be tell-tale in a file (not '24' or '3.5', which are everywhere)."""
    if isinstance(value, list):
        return [f for v in value for f in _distinctive(v)]
    if isinstance(value, str):
        return [value] if len(value) >= 5 else []
    if isinstance(value, int) and abs(value) >= 10_000:
        return [str(value)]
    if isinstance(value, float) and len(repr(value).strip("-0.")) >= 6:
        return [repr(value)]
    return []


@pytest.mark.usefixtures("require_bwrap")
def test_searching_the_sandbox_filesystem_reveals_no_answer(suite):
    from termgym.sandbox.local import BubblewrapSandbox

    for family in FAMILIES:
        task = suite.load(f"liveweb-{family}-00123")
        needles = sorted({n for v in task.expected_answers().values() for n in _distinctive(v)})
        # World data that is not an answer must not be there either: the names of every coin.
        needles += [c["name"] for c in task.world.collection("crypto/coins", task.clock.now())[:10]]
        assert needles
        with BubblewrapSandbox(task.sandbox_spec()) as box:
            task.setup(box)
            box.write_file("/tmp/needles", "\n".join(needles) + "\n")
            # /usr is the host's read-only system, the same for every task; everything else is searched,
            # including what every process in the sandbox has in its environment and command line.
            search = ("grep -rIlF -f /tmp/needles / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
                      "--exclude-dir=usr 2>/dev/null | grep -v '^/tmp/needles$'; "
                      "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' "
                      "| grep -F -f /tmp/needles; env | grep -F -f /tmp/needles; "
                      "find / -xdev -path /proc -prune -o -print 2>/dev/null | grep -F -f /tmp/needles; true")
            result = box.exec(search, timeout=120)
            assert result.output.strip() == "", (family, result.output[:2000])
        task.teardown()


@pytest.mark.usefixtures("require_bwrap")
def test_browse_reads_pages_as_text_and_follows_links(suite):
    from termgym.sandbox.local import BubblewrapSandbox

    task = suite.load("liveweb-crypto-00005")
    with BubblewrapSandbox(task.sandbox_spec()) as box:
        task.setup(box)
        page = box.exec("browse coingecko.test").output
        assert "URL: http://coingecko.test" in page and "Links:" in page
        top = task.world.collection("crypto/coins", task.clock.now())[0]
        row = next(line for line in page.splitlines() if line.startswith("1 | "))
        assert top["name"] in row and top["symbol"] in row
        n = int(re.search(re.escape(top["name"]) + r" \[(\d+)\]", row).group(1))
        detail = box.exec(f"browse coingecko.test {n}").output
        assert f"Price | ${top['price_usd']}" in detail
        api = box.exec("browse http://coingecko.test/api/coins/" + top["id"]).output  # the limited API
        assert json.loads(api.split("\n", 2)[2])["item"] == {k: top[k] for k in ("id", "name", "price_usd",
                                                                                "market_cap_usd")}
        raw = box.exec("browse --raw news.test/newest")
        assert raw.output.startswith("<!DOCTYPE html>")
        missing = box.exec("browse books.test/nope")
        assert missing.exit_code == 1 and "HTTP 404" in missing.output
        unknown = box.exec("browse elsewhere.test")
        assert unknown.exit_code == 1 and "cannot fetch" in unknown.output
        outside = box.exec("curl -s -m 3 http://example.com/; echo rc=$?")
        assert "rc=0" not in outside.output  # no network beyond the sites
    port = task.episode.port
    task.teardown()
    assert task.episode is None and port not in {e.port for e in task._server.episodes.values()}


@pytest.mark.usefixtures("require_bwrap")
def test_gym_make_plays_the_oracle_and_handles_a_malformed_submission():
    from termgym.env import oracle_actions

    env = gym.make("termgym/LiveWeb-v0", speed=0, start="fixed")
    try:
        obs, info = env.reset(options={"task_id": "liveweb-stocks-00011"})
        assert "stooq.test" in obs and info["task_id"] == "liveweb-stocks-00011"
        reward, terminated, info = 0.0, False, {}
        for action in oracle_actions(env.unwrapped):
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert terminated and reward == 1.0 and info["grade"]["success"] is True
        assert info["grade"]["per_question"] == [1.0] * len(info["grade"]["per_question"])

        env.reset(options={"task_id": "liveweb-books-00011"})
        bad = "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo 'the answers are 3 and 4'\n```"
        obs, reward, terminated, truncated, info = env.step(bad)
        # a malformed submission is refused with the reason, and the agent may submit again
        assert not terminated and reward == 0.0 and "grade" not in info
        assert "not valid JSON" in obs and "not valid JSON" in info["submission_error"]
        partial = ("THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; "
                   "echo '{\"answer1\": 3}'\n```")
        obs, reward, terminated, truncated, info = env.step(partial)
        assert not terminated and "lacks answer2" in obs
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.protocol.submit_message('{"answer1": 1, "answer2": 2, "answer3": 3, "answer4": 4}'))
        assert terminated and "grade" in info and "error" not in info["grade"]
    finally:
        env.close()
