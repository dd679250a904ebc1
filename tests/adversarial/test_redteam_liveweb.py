"""Red-team attacks on LIVEWEB that the other adversarial tests do not cover, from a real sandbox.

Two live episodes run side by side (bubblewrap sandboxes, the shared world server on loopback). From
inside episode A's sandbox the agent tries to read episode B's world (B's own port, the server's main
port, B's key in a path prefix or header) and to tamper with the paged API's parameters (pages out of
range, its own page size, a bulk switch, ``at=`` in the future or written oddly). None may hand it
another world, a page of more than :data:`API_PAGE_SIZE` records, or a moment other than its own.
"""

from __future__ import annotations

import json
import shlex

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.tasks.liveweb.server import shared_server
from termgym.tasks.liveweb.sites.base import API_PAGE_SIZE

TASK = "liveweb-stocks-00020"


@pytest.fixture(scope="module")
def two_episodes():
    # The paged API (opt-in) has the most parameters to tamper with; the default limited one is a subset.
    envs = [gym.make("termgym/LiveWeb-v0", split="test", api="paged") for _ in range(2)]
    try:
        for env in envs:
            env.reset(options={"task_id": TASK})
        yield [env.unwrapped for env in envs]
    finally:
        for env in envs:
            env.close()


def curl(env, url: str, *headers: str) -> tuple[int, str]:
    """``curl`` from inside the episode's sandbox: (HTTP status or 0 when it cannot connect, body)."""
    args = " ".join(f"-H {shlex.quote(h)}" for h in headers)
    out = env.sandbox.exec(f"curl -s -m 5 -w '\\n%{{http_code}}' {args} {shlex.quote(url)}", timeout=30).output
    body, _, code = out.rstrip("\n").rpartition("\n")
    return int(code) if code.isdigit() else 0, body


def test_another_episodes_world_is_out_of_reach(two_episodes):
    a, b = two_episodes
    key_b, port_b, main_port = b.task.episode.key, b.task.episode.port, shared_server().port
    # B's own port and the server's main port are on the host's loopback, not in A's network.
    for port in (port_b, main_port):
        for path in ("/api/quotes", f"/_episode/{key_b}/api/quotes"):
            status, _ = curl(a, f"http://127.0.0.1:{port}{path}", "Host: stooq.test")
            assert status == 0, (port, path)
    # Through A's own relay, B's key in a path prefix or a header is not a way across.
    mine = json.loads(curl(a, "http://stooq.test/api/quotes")[1])
    status, _ = curl(a, f"http://stooq.test/_episode/{key_b}/api/quotes")
    assert status == 404
    status, body = curl(a, "http://stooq.test/api/quotes", f"X-Termgym-Episode: {key_b}")
    assert status == 200 and json.loads(body)["items"] == mine["items"]


def test_paged_api_parameters_cannot_be_tampered_with(two_episodes):
    a, _ = two_episodes
    now = int(a.task.episode.clock.now())
    pages = json.loads(curl(a, "http://stooq.test/api/quotes")[1])["pages"]
    refused = ["page=0", "page=-1", f"page={pages + 1}", "page=1e9", "page=1.5", "page=",
               f"at={now + 3600}", f"at={now + 86400 * 30}", "at=-1", "at=nan", f"at={now}.5"]
    for query in refused:
        status, body = curl(a, f"http://stooq.test/api/quotes?{query}")
        assert status in (400, 404) and "error" in json.loads(body), query
    # Page-size and mode switches a client might guess are ignored: still one page of the default size.
    for query in ("per_page=100000", "limit=100000", "page_size=100000", "api=bulk", "mode=bulk",
                  "page=1&page=1&per_page=999", "all=1"):
        status, body = curl(a, f"http://stooq.test/api/quotes?{query}")
        page = json.loads(body)
        assert status == 200 and len(page["items"]) <= API_PAGE_SIZE and page.get("per_page") == API_PAGE_SIZE, query
