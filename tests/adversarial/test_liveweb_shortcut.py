"""LIVEWEB cannot be shortcut: not by paging the JSON API, not by reading the landing pages.

v1 served every field of every collection through ``/api``; one generic script that paged through
it solved 100 % of tasks (``benchmarks/liveweb_browsing.py``, measured before the change). Now the
API is limited as real sites limit theirs (the default ``api="limited"``: summary fields only, 20
records a page, :data:`API_QUOTA` requests per episode, no history) and questions need detail,
filtered, sorted and history pages. Measured here over held-out tasks with the benchmark's own
shortcut agents: the API-paging script must solve < 20 % of tasks, a reader of the landing page of
every site <= 5 %.
"""

from __future__ import annotations

import json
import random
import urllib.request

import pytest

from benchmarks.liveweb_browsing import api_paging_agent, first_page_agent
from termgym.tasks.liveweb import LiveWebSuite
from termgym.tasks.liveweb.answers import sources
from termgym.tasks.liveweb.server import WorldServer
from termgym.tasks.liveweb.sites import SITES
from termgym.tasks.liveweb.sites.base import API_PAGE_SIZE, API_PIN_WINDOW, API_QUOTA
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


def test_the_limited_api_is_the_default_summary_only_and_rate_limited(server):
    suite = LiveWebSuite(speed=0)
    assert suite.options["api"] == "limited"
    task = suite.load("liveweb-cross-00020")
    assert task.api == "limited" and "/api" not in task.instruction
    episode = server.open_episode(task.world, SimClock(task.start_time(), speed=0), api=task.api)
    try:
        status, index = get(episode.port, "coingecko.test", "/api")
        assert status == 200 and "summary fields only" in index["plan"]
        status, page = get(episode.port, "coingecko.test", "/api/coins")
        spec = SITES["crypto"].collections["coins"]
        assert len(page["items"]) == API_PAGE_SIZE and set(page["items"][0]) == {"id", "name", *spec.api_fields}
        status, _ = get(episode.port, "taostats.test", "/api/network")
        assert status == 404  # no summary of it is offered
        for _ in range(API_QUOTA):
            status, body = get(episode.port, "stooq.test", "/api/quotes")
        assert status == 429 and "rate limited" in body["error"]
        html = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(urllib.request.Request(
            f"http://127.0.0.1:{episode.port}/", headers={"Host": "stooq.test"}), timeout=30)
        assert html.status == 200  # the web pages have no quota
    finally:
        server.close_episode(episode)
    off = server.open_episode(task.world, SimClock(task.start_time(), speed=0), api="off")
    try:
        assert get(off.port, "coingecko.test", "/api/coins")[0] == 404
    finally:
        server.close_episode(off)


def test_generic_shortcuts_solve_few_tasks(server, capsys):
    suite = LiveWebSuite(speed=0, start="fixed")  # reproducible episodes
    ids = random.Random(8).sample(list(suite.task_ids("test")), 40)
    paging, first = [], []
    for tid in ids:
        task = suite.load(tid)
        for agent, scores in ((api_paging_agent, paging), (first_page_agent, first)):
            episode = server.open_episode(task.world, SimClock(task.start_time(), speed=0), api=task.api)
            try:
                scores.append(agent(task, episode.port))
            finally:
                server.close_episode(episode)
    solved_paging = sum(s >= 0.8 for s in paging) / len(paging)
    solved_first = sum(s >= 0.8 for s in first) / len(first)
    with capsys.disabled():
        print(f"\nLIVEWEB shortcuts over {len(ids)} test tasks: API paging solves {solved_paging:.0%} "
              f"(mean {sum(paging) / len(paging):.2f}), the landing pages {solved_first:.0%} "
              f"(mean {sum(first) / len(first):.2f})")
    assert solved_paging < 0.2
    assert solved_first <= 0.05


def test_the_shortcut_agents_are_real_the_full_api_lets_paging_win(server):
    """The sabotage check: with every field served (``api="paged"``), the same paging script solves
    present-tense questions again: the limit, not a broken script, is what stops it."""
    suite = LiveWebSuite(speed=0, start="fixed", api="paged")
    solved = 0
    for n in range(12):
        task = suite.load_episode("liveweb-crypto-00040", n)
        if any("@" in s for q in task.questions for s in sources(q.spec)):
            continue
        episode = server.open_episode(task.world, SimClock(task.start_time(), speed=0), api="paged")
        try:
            solved += api_paging_agent(task, episode.port) >= 0.8
        finally:
            server.close_episode(episode)
    assert solved >= 1


def test_the_snapshot_pin_cannot_reach_the_future_or_far_past(server):
    task = LiveWebSuite(speed=0, api="paged").load("liveweb-stocks-00020")
    now = int(task.start_time())
    episode = server.open_episode(task.world, SimClock(now, speed=0), api="paged")
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
