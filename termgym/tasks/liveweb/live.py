"""Live mode: the same templates against the real sites (opt-in; needs the internet and keys).

``LiveWebSuite(source="live")`` (or ``gym.make("termgym/LiveWeb-v0", source="live")``) builds each
task's questions from a snapshot of the real sites taken when the task is loaded, gives the
sandbox real network access, and grades against the sites' data fetched again at submission time.

Supported families and what they need:

* ``crypto`` — CoinGecko's public API (``COINGECKO_API_KEY`` optional, sent as a demo key);
* ``news`` — Hacker News' Firebase API (no key);
* ``subnets`` — the taostats API, which needs ``TAOSTATS_API_KEY``.

``stocks``, ``books`` and ``cross`` have no live source (their real counterparts have no
stable keyless API giving the same fields); asking for them is an error that says so. Every base
URL can be overridden (``LIVEWEB_COINGECKO_URL``, ``LIVEWEB_HN_URL``, ``LIVEWEB_TAOSTATS_URL``),
which is how the adapters are tested offline against recorded-shape responses.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from termgym.sandbox.base import SandboxSpec
from termgym.tasks.liveweb.grading import LLMValidator
from termgym.tasks.liveweb.questions import make_questions
from termgym.tasks.liveweb.sites import SITES
from termgym.tasks.liveweb.task import BROWSE_DIR, SANDBOX_PATH, LiveWebTask, browse_script
from termgym.tasks.liveweb.world import SimClock

#: What the question texts say in live mode instead of the simulated host names.
LIVE_HOSTS = {"coingecko.test": "www.coingecko.com (API: api.coingecko.com)",
              "news.test": "news.ycombinator.com (API: hacker-news.firebaseio.com)",
              "taostats.test": "taostats.io (API: api.taostats.io, key required)"}
LIVE_FAMILIES = ("crypto", "news", "subnets")
CACHE_SECONDS = 20.0


class LiveUnavailable(RuntimeError):
    """Live mode cannot run here: no network, a missing key, or an unsupported family."""


def _get_json(url: str, headers: dict[str, str] | None = None, timeout: float = 20.0) -> Any:
    request = urllib.request.Request(url, headers={"User-Agent": "termgym-liveweb/1", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise LiveUnavailable(f"{urlsplit(url).netloc} answered HTTP {exc.code} for {url}"
                              + (" (check the API key)" if exc.code in (401, 403) else "")) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LiveUnavailable(f"cannot reach {urlsplit(url).netloc} for live mode ({exc}); live mode needs "
                              "the internet — use the default offline mode otherwise") from exc


def fetch_coingecko() -> list[dict]:
    base = os.environ.get("LIVEWEB_COINGECKO_URL", "https://api.coingecko.com/api/v3").rstrip("/")
    key = os.environ.get("COINGECKO_API_KEY")
    rows = _get_json(f"{base}/coins/markets?vs_currency=usd&order=market_cap_desc&per_page=100&page=1"
                     "&price_change_percentage=24h,7d", {"x-cg-demo-api-key": key} if key else None)
    out = []
    for r in rows:
        if r.get("current_price") is None or r.get("market_cap") is None:
            continue
        out.append({
            "id": r["id"], "symbol": str(r["symbol"]).upper(), "name": r["name"], "price_usd": r["current_price"],
            "market_cap_usd": r["market_cap"], "volume_24h_usd": r.get("total_volume") or 0,
            "change_24h_pct": round(r.get("price_change_percentage_24h_in_currency")
                                    or r.get("price_change_percentage_24h") or 0.0, 2),
            "change_7d_pct": round(r.get("price_change_percentage_7d_in_currency") or 0.0, 2),
            "circulating_supply": r.get("circulating_supply") or 0, "rank": r.get("market_cap_rank") or 0,
            "price_24h_ago_usd": r["current_price"] - (r.get("price_change_24h") or 0.0),
        })
    return out


def fetch_hacker_news(n: int = 30) -> list[dict]:
    base = os.environ.get("LIVEWEB_HN_URL", "https://hacker-news.firebaseio.com/v0").rstrip("/")
    ids = _get_json(f"{base}/topstories.json")[:n]
    out = []
    for rank, sid in enumerate(ids, 1):
        item = _get_json(f"{base}/item/{sid}.json") or {}
        out.append({"id": sid, "title": item.get("title", ""), "author": item.get("by", ""),
                    "domain": urlsplit(item.get("url") or "").netloc, "points": item.get("score", 0),
                    "comments": item.get("descendants", 0), "posted": item.get("time", 0), "rank": rank})
    return out


def fetch_taostats() -> list[dict]:
    key = os.environ.get("TAOSTATS_API_KEY")
    if not key:
        raise LiveUnavailable("live subnet questions need TAOSTATS_API_KEY (a taostats.io API key) in the "
                              "environment")
    base = os.environ.get("LIVEWEB_TAOSTATS_URL", "https://api.taostats.io/api").rstrip("/")
    payload = _get_json(f"{base}/dtao/pool/latest/v1?limit=200", {"Authorization": key})
    rows = payload.get("data", payload) if isinstance(payload, dict) else payload
    out = []
    for r in rows:
        price = float(r.get("price") or 0)
        if not price:
            continue
        out.append({"netuid": int(r["netuid"]), "name": r.get("name") or f"SN{r['netuid']}",
                    "label": f"SN{r['netuid']}", "price_tao": price,
                    "market_cap_tao": round(float(r.get("market_cap") or 0) / 1e9, 2),  # rao -> TAO
                    "emission_pct": 0.0, "neurons": 0,
                    "change_24h_pct": round(float(r.get("price_change_1_day") or 0), 2), "registered": 0,
                    "price_24h_ago_tao": price / (1 + float(r.get("price_change_1_day") or 0) / 100)})
    for i, r in enumerate(sorted(out, key=lambda r: -r["market_cap_tao"]), 1):
        r["rank"] = i
    return out


LIVE_SOURCES: dict[str, Callable[[], list[dict]]] = {
    "crypto/coins": fetch_coingecko, "news/stories": fetch_hacker_news, "subnets/subnets": fetch_taostats,
}


class LiveWorld:
    """Quacks like :class:`~termgym.tasks.liveweb.world.World`, backed by the real sites.

    ``collection(src, t)`` ignores ``t`` (the real sites only show the present) and caches each
    fetch for ``CACHE_SECONDS`` so one grading does not hammer the APIs.
    """

    sites = SITES

    def __init__(self) -> None:
        self.base_time = time.time()
        self._cache: dict[str, tuple[float, list[dict]]] = {}
        self._lock = threading.Lock()

    def collection(self, src: str, t: float | None = None) -> list[dict]:
        if src not in LIVE_SOURCES:
            raise LiveUnavailable(f"live mode has no source for {src!r}")
        with self._lock:
            hit = self._cache.get(src)
            if hit and time.monotonic() - hit[0] < CACHE_SECONDS:
                return hit[1]
        records = LIVE_SOURCES[src]()
        with self._lock:
            self._cache[src] = (time.monotonic(), records)
        return records


class LiveTask(LiveWebTask):
    """A LIVEWEB task against the real sites: real network in the sandbox, graded on live data."""

    def open_episode(self):  # no world server: the sandbox talks to the internet
        raise LiveUnavailable("live tasks have no simulated episode")

    @property
    def clock(self) -> SimClock:
        return SimClock(time.time())

    def sandbox_spec(self) -> SandboxSpec:
        return SandboxSpec(workdir=self.workdir, files={f"{BROWSE_DIR}/browse": browse_script()},
                           setup_commands=[f"chmod 755 {BROWSE_DIR}/browse"], env={"PATH": SANDBOX_PATH},
                           network=True)

    def setup(self, sandbox: Any) -> None:
        pass

    def teardown(self) -> None:
        pass

    def grade_submission(self, submission: str | None, at: float | None = None):
        # Live data exists only for "now": no grace window into the past.
        self.grace_seconds = 0.0
        return super().grade_submission(submission, at)


def load_live_task(task_id: str, *, seed: int, family: str, rng: random.Random, n_questions: int | None,
                   validator: LLMValidator | None, workdir: str) -> LiveTask:
    """Build a live task: snapshot the real site(s) and draw the questions from them."""
    if family not in LIVE_FAMILIES:
        raise LiveUnavailable(f"live mode supports the families {', '.join(LIVE_FAMILIES)}, not {family!r} "
                              "(its real counterpart has no usable public API)")
    world = LiveWorld()
    questions = make_questions(family, rng, lambda src: world.collection(src), world.base_time, n_questions,
                               history=False)
    for q in questions:
        q.tolerance = "declared"  # the real sites' display precision is not known here
        for test_host, live_host in LIVE_HOSTS.items():
            q.text = q.text.replace(test_host, live_host)
    task = LiveTask(task_id, seed=seed, family=family, questions=questions, world=world,  # type: ignore[arg-type]
                    grace_seconds=0.0, workdir=workdir, validator=validator, live=True)
    return task
