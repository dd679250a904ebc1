"""LIVEWEB cannot be shortcut with one request: the JSON API is paged, and its snapshot pin is bounded.

Before, one ``GET /api/<collection>`` returned the whole collection and answered most tasks. Now
(the default ``api="paged"``) a collection comes 20 records at a time; an agent that makes one
request per collection and computes from what it got is measured over held-out tasks and must
answer few of them. The oracle itself still scores 1.0 (tests/liveweb/test_suite.py, and
tests/adversarial/test_liveweb_replay.py through the env) with a measured 3+ requests per task.
"""

from __future__ import annotations

import json
import random
import urllib.request

import pytest

from termgym.tasks.liveweb import LiveWebSuite
from termgym.tasks.liveweb.answers import compute, sources
from termgym.tasks.liveweb.server import WorldServer
from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.sites.base import API_PAGE_SIZE, API_PIN_WINDOW
from termgym.tasks.liveweb.task import _meta
from termgym.tasks.liveweb.world import SimClock


@pytest.fixture(scope="module")
def server():
    srv = WorldServer().start()
    yield srv
    srv.stop()


def get(port: int, host: str, path: str) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_paged_api_is_the_default_and_no_request_holds_a_collection(server):
    suite = LiveWebSuite(speed=0)
    assert suite.options["api"] == "paged"
    task = suite.load("liveweb-cross-00020")
    assert task.api == "paged" and "a page at a time" in task.instruction
    episode = server.open_episode(task.world, SimClock(task.start_time(), speed=0))
    try:
        for site in SITES.values():
            for name in site.collections:
                total = len(task.world.collection(f"{site.key}/{name}", task.start_time()))
                status, page = get(episode.port, site.host, f"/api/{name}")
                assert status == 200 and len(page["items"]) == min(total, API_PAGE_SIZE)
                assert page["count"] == total and (page["next"] is None) == (total <= API_PAGE_SIZE)
    finally:
        server.close_episode(episode)


def test_one_request_per_collection_answers_few_tasks(server, capsys):
    suite = LiveWebSuite(speed=0, start="fixed")  # reproducible episodes
    ids = random.Random(8).sample(list(suite.task_ids("test")), 120)
    scores = []
    for tid in ids:
        task = suite.load(tid)
        episode = server.open_episode(task.world, SimClock(task.start_time(), speed=0))
        try:
            srcs = sorted({s for q in task.questions for s in sources(q.spec)})
            meta = _meta(srcs)
            data = {}
            for src in srcs:  # the shortcut: one GET /api/<collection> each
                spec = collection_spec(src)
                data[src] = get(episode.port, SITES[spec.site].host, spec.api_path)[1]["items"]
            answers = {}
            for q in task.questions:
                try:
                    answers[q.qid] = compute(q.spec, data, meta)
                except (LookupError, ArithmeticError, IndexError):
                    answers[q.qid] = None
            scores.append(task.grade_submission(json.dumps(answers), at=task.start_time()).score)
        finally:
            server.close_episode(episode)
    solved = sum(s >= 0.8 for s in scores) / len(scores)
    with capsys.disabled():
        print(f"\nLIVEWEB one GET per collection: mean score {sum(scores) / len(scores):.3f}, "
              f"{solved:.0%} of {len(ids)} test tasks solved")
    assert solved < 0.2


def test_the_bulk_api_is_opt_in_and_still_whole(server):
    task = LiveWebSuite(speed=0, api="bulk").load("liveweb-crypto-00020")
    episode = server.open_episode(task.world, SimClock(task.start_time(), speed=0), api=task.api)
    try:
        _, body = get(episode.port, "coingecko.test", "/api/coins")
        assert len(body["items"]) == body["count"] == len(task.world.collection("crypto/coins", task.start_time()))
    finally:
        server.close_episode(episode)


def test_the_snapshot_pin_cannot_reach_the_future_or_far_past(server):
    task = LiveWebSuite(speed=0).load("liveweb-stocks-00020")
    now = int(task.start_time())
    episode = server.open_episode(task.world, SimClock(now, speed=0))
    try:
        for at in (now + 60, now + 86400, now - API_PIN_WINDOW - 120, "soon"):
            status, body = get(episode.port, "stooq.test", f"/api/quotes?page=1&at={at}")
            assert status == 400 and "at" in body["error"], at
            status, body = get(episode.port, "stooq.test", f"/api/quotes/{task.world.collection('stocks/quotes', now)[0]['symbol']}?at={at}")
            assert status == 400, at
        status, body = get(episode.port, "stooq.test", f"/api/quotes?page=1&at={now - 120}")
        assert status == 200 and body["time"] == now - 120
        status, body = get(episode.port, "stooq.test", "/api/quotes?page=99")
        assert status == 404 and "pages are 1.." in body["error"]
    finally:
        server.close_episode(episode)
