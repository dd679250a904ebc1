"""LIVEWEB: how much browsing a task needs, and what shortcuts still solve.

``python -m benchmarks.liveweb_browsing [--tasks 120] [--seed 29] [--json out.json]``

Over held-out (``test`` split) tasks of every family, reproducible episodes (``start="fixed"``,
frozen clock), it measures:

* **oracle requests** — the efficient agent (the task's own oracle) runs in a real bubblewrap
  sandbox and reaches the sites through the forwarded ports; every request it makes is counted
  (distribution: min, median, p90, max, mean) and every task must score 1.0;
* **first page** — an agent that reads only the landing page (``/``) of every site, turns each table
  row into a record (exact ``data-value`` attributes where a page has them, else the displayed text)
  and computes the answers from that: the share of tasks it solves (score >= 0.8);
* **API paging** — one generic script that asks every host for ``/api``, pages through every
  collection it lists (following ``next``) and computes the answers from what it got;
* **templates** — how many distinct templates the tasks draw, and the largest one's share of all
  questions;
* three questions picked by a fixed seed, with the oracle's request trace (where the server keeps
  one).

Everything is measured, not modelled; the numbers depend on the code, not on the machine (the
wall time printed at the end does).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from html.parser import HTMLParser
from typing import Any

from termgym.tasks.liveweb import LiveWebSuite
from termgym.tasks.liveweb.answers import compute, sources
from termgym.tasks.liveweb.grading import parse_number
from termgym.tasks.liveweb.server import WorldServer
from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.world import SimClock

#: How a first-page reader maps a column heading to a record field when a cell has no ``data-field``.
HEADINGS = {
    "#": "rank", "rank": "rank", "price": None, "24h": "change_24h_pct", "7d": "change_7d_pct",
    "market cap": None, "24h volume": "volume_24h_usd", "volume": "volume", "symbol": "symbol",
    "last": "price", "change": "change_pct", "sector": "sector", "emission": "emission_pct",
    "neurons": "neurons", "netuid": "netuid", "name": "name", "coin": "name", "title": "title",
    "author": "author", "genre": "genre", "rating": "rating",
}
_PRICE_FIELD = {"crypto": "price_usd", "subnets": "price_tao", "stocks": "price", "books": "price"}
_CAP_FIELD = {"crypto": "market_cap_usd", "subnets": "market_cap_tao", "stocks": "market_cap"}


def _get(port: int, host: str, path: str) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


class _Rows(HTMLParser):
    """Table rows of a page: cells with their text, links and ``data-*`` attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.rows: list[list[dict]] = []
        self._cell: dict | None = None
        self._row: list[dict] | None = None
        self._row_attrs: dict = {}
        self.row_attrs: list[dict] = []
        self._th = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self._row, self._row_attrs = [], a
        elif tag == "th":
            self._th, self._cell = True, {"text": ""}
        elif tag == "td" and self._row is not None:
            self._cell = {"text": "", "attrs": a, "href": None}
        elif tag == "a" and self._cell is not None and "href" in a:
            self._cell["href"] = a["href"]

    def handle_endtag(self, tag):
        if tag == "th" and self._cell is not None:
            self.headings.append(self._cell["text"].strip().lower())
            self._th, self._cell = False, None
        elif tag == "td" and self._cell is not None and self._row is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row:
            self.rows.append(self._row)
            self.row_attrs.append(self._row_attrs)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data


def first_page_records(site_key: str, html: str) -> list[dict]:
    """Records a reader builds from the tables of one page (generously: exact attributes first)."""
    parser = _Rows()
    parser.feed(html)
    spec = next(iter(SITES[site_key].collections.values()))
    out = []
    for row, row_attrs in zip(parser.rows, parser.row_attrs, strict=True):
        record: dict[str, Any] = {}
        if row_attrs.get("data-key"):
            record[spec.key_field] = row_attrs["data-key"]
        for i, cell in enumerate(row):
            attrs = cell.get("attrs", {})
            field = attrs.get("data-field")
            heading = parser.headings[i] if i < len(parser.headings) else ""
            if field is None:
                field = HEADINGS.get(heading, "")
                if heading == "price":
                    field = _PRICE_FIELD.get(site_key)
                elif heading == "market cap":
                    field = _CAP_FIELD.get(site_key)
            text = cell["text"].strip()
            value = attrs.get("data-value", text)
            if cell.get("href") and spec.key_field not in record:
                record[spec.key_field] = re.split(r"[/=]", cell["href"].rstrip("/"))[-1]
                record.setdefault(spec.name_field, text)
            if not field:
                continue
            number = parse_number(value)
            record[field] = number if number is not None and field not in ("name", "title", "author", "symbol",
                                                                              "genre", "sector") else value
        if spec.key_field in record:
            for k in (spec.key_field,):
                number = parse_number(record[k])
                if number is not None and float(number).is_integer():
                    record[k] = int(number)
            out.append(record)
    return out


def _answers(task, data: dict[str, list[dict]]) -> dict[str, Any]:
    out = {}
    for q in task.questions:
        srcs = sources(q.spec)
        meta = {s: {"key_field": collection_spec(s.split("@")[0]).key_field,
                    "name_field": collection_spec(s.split("@")[0]).name_field} for s in srcs}
        try:
            out[q.qid] = compute(q.spec, {s: data.get(s, []) for s in srcs}, meta)
        except Exception:  # noqa: BLE001 - a shortcut that cannot compute an answer gives none
            out[q.qid] = None
    return out


def first_page_agent(task, port: int) -> float:
    data: dict[str, list[dict]] = {}
    for site in SITES.values():
        status, html = _get(port, site.host, "/")
        records = first_page_records(site.key, html) if status == 200 else []
        for name in site.collections:
            data[f"{site.key}/{name}"] = records if name == next(iter(site.collections)) else []
    return task.grade_submission(json.dumps(_answers(task, data)), at=task.start_time()).score


def api_paging_agent(task, port: int) -> float:
    data: dict[str, list[dict]] = {}
    for site in SITES.values():
        status, body = _get(port, site.host, "/api")
        if status != 200:
            continue
        try:
            index = json.loads(body)
        except ValueError:
            continue
        for name, url in (index.get("collections") or {}).items():
            items: list[dict] = []
            for _ in range(60):
                status, body = _get(port, site.host, url)
                if status != 200:
                    break
                page = json.loads(body)
                items += page.get("items", [])
                url = page.get("next")
                if not url:
                    break
            data[f"{site.key}/{name}"] = items
    return task.grade_submission(json.dumps(_answers(task, data)), at=task.start_time()).score


def measure(n_tasks: int, seed: int) -> dict[str, Any]:
    from termgym.sandbox.local import BubblewrapSandbox

    suite = LiveWebSuite(speed=0, start="fixed")
    ids = random.Random(seed).sample(list(suite.task_ids("test")), n_tasks)
    server = WorldServer().start()
    requests, oracle_scores, first, paging, templates, traces = [], [], [], [], Counter(), []
    planned, tiers = [], Counter()
    started = time.perf_counter()
    first_task = suite.load(ids[0])
    first_task._server = server
    try:
        with BubblewrapSandbox(first_task.sandbox_spec()) as box:
            relay = first_task.episode
            for tid in ids:
                task = suite.load(tid)
                relay.world, relay.clock = task.world, SimClock(task.start_time(), speed=0)
                relay.api = task.api
                task.episode = relay
                log = getattr(relay, "log", None)
                if log is not None:
                    log.clear()
                before = relay.requests
                submission = task.oracle_submission(box)
                requests.append(relay.requests - before)
                planned.append(task.metadata.get("oracle_requests"))
                tiers[task.metadata.get("difficulty")] += 1
                oracle_scores.append(task.grade_submission(submission, at=task.start_time()).score)
                traces.append((tid, task, list(log) if log is not None else None))
                templates.update(q.template for q in task.questions)
                side = server.open_episode(task.world, SimClock(task.start_time(), speed=0), api=task.api)
                try:
                    first.append(first_page_agent(task, side.port))
                    paging.append(api_paging_agent(task, side.port))
                finally:
                    server.close_episode(side)
                task.episode = None
    finally:
        first_task.episode = relay
        first_task.teardown()
        server.stop()
    elapsed = time.perf_counter() - started
    req = sorted(requests)
    total_q = sum(templates.values())
    # Three questions picked by a fixed seed from tasks of three different families, each with the
    # pages the oracle's plan fetches for it and the whole task's request trace.
    rng = random.Random(f"examples:{seed}")
    order = rng.sample(range(len(traces)), len(traces))
    examples, families = [], set()
    for i in order:
        tid, task, log = traces[i]
        if task.family in families or len(examples) == 3:
            continue
        families.add(task.family)
        k = rng.randrange(len(task.questions))
        q, plan = task.questions[k], task.oracle_plan()[k]
        pages = [f"{host}{path}" + (" (and its next pages)" if follow else "") for host, path, follow, _ in plan["fetch"]]
        if plan["hop"]:
            pages.append(f"{plan['hop']['host']}{plan['hop']['path']} (the chosen item)")
        examples.append({"task": tid, "template": q.template, "question": q.text, "question_pages": pages,
                         "task_trace": [f"{h}{p}" for h, p in log] if log is not None else None,
                         "task_requests": requests[i]})
    return {
        "tasks": n_tasks, "seed": seed, "seconds": round(elapsed, 1),
        "oracle_mean_score": sum(oracle_scores) / len(oracle_scores),
        "oracle_all_one": all(s == 1.0 for s in oracle_scores),
        "requests": {"min": req[0], "median": statistics.median(req), "p90": req[int(0.9 * (len(req) - 1))],
                     "max": req[-1], "mean": round(sum(req) / len(req), 2),
                     "histogram": dict(sorted(Counter(req).items()))},
        "planned_equals_measured": sum(p == r for p, r in zip(planned, requests, strict=True)) / len(requests),
        "tiers": dict(tiers),
        "first_page_solved": sum(s >= 0.8 for s in first) / len(first),
        "first_page_mean": sum(first) / len(first),
        "api_paging_solved": sum(s >= 0.8 for s in paging) / len(paging),
        "api_paging_mean": sum(paging) / len(paging),
        "templates": len(templates), "questions": total_q,
        "largest_template": max(templates.items(), key=lambda kv: kv[1])[0],
        "largest_template_share": max(templates.values()) / total_q,
        "examples": examples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=120)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    result = measure(args.tasks, args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    return 0 if result["oracle_all_one"] else 1


if __name__ == "__main__":
    sys.exit(main())
