"""The sites as a browser sees them: sort and filter links, search, history pages, detail pages,
clutter and varied markup, and the record markup every page shares (data-src/data-key/data-field)."""

from __future__ import annotations

import datetime
import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlsplit

import pytest

from termgym.tasks.liveweb.noise import DAY, HOUR
from termgym.tasks.liveweb.sites import SITES
from termgym.tasks.liveweb.sites.base import MAX_PER_PAGE
from termgym.tasks.liveweb.world import SimClock, World


class Records(HTMLParser):
    """``{(src, key): {field: data-value}}`` and the links of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.records: dict[tuple[str, str], dict[str, str]] = {}
        self.links: list[tuple[str, str]] = []
        self._cur: dict[str, str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-src" in a:
            self._cur = self.records.setdefault((a["data-src"], a["data-key"]), {})
        if "data-field" in a:
            assert self._cur is not None, f"a value outside any record: {a}"
            self._cur[a["data-field"]] = a["data-value"]
        if tag == "a" and "href" in a:
            self.links.append((a["href"], a.get("rel", "")))


def get(world: World, site: str, t: float, url: str):
    u = urlsplit(url)
    resp = SITES[site].handle(world, t, u.path, dict(parse_qsl(u.query)))
    parser = Records()
    parser.feed(resp.body.decode())
    return resp, parser


@pytest.fixture(scope="module")
def moment(world) -> float:
    return world.base_time + 4 * DAY + 5 * HOUR + 17 * 60


def test_sort_links_sort_and_per_page_is_clamped(world, moment):
    resp, page = get(world, "crypto", moment, "/?sort=change_7d_pct&order=desc&per_page=100")
    values = [float(r["change_7d_pct"]) for r in page.records.values()]
    assert resp.status == 200 and values == sorted(values, reverse=True) and len(values) == len(
        world.collection("crypto/coins", moment))
    _, asc = get(world, "crypto", moment, "/?sort=change_7d_pct&order=asc")
    assert [float(r["change_7d_pct"]) for r in asc.records.values()] == sorted(values)[:25]
    _, huge = get(world, "stocks", moment, "/?per_page=100000")
    assert len(huge.records) == min(MAX_PER_PAGE, len(world.collection("stocks/quotes", moment)))
    # A column heading links to the list sorted by that column.
    _, home = get(world, "subnets", moment, "/subnets")
    assert any("sort=emission_pct" in href for href, _ in home.links)


def test_filters_search_and_next_links(world, moment):
    quotes = world.collection("stocks/quotes", moment)
    sector = quotes[0]["sector"]
    _, page = get(world, "stocks", moment, f"/?sector={sector}&per_page=100")
    assert {k for (_, k) in page.records} == {q["symbol"] for q in quotes if q["sector"] == sector}
    books = world.collection("books/books", moment)
    author = books[3]["author"]
    _, found = get(world, "books", moment, f"/search?q={author}&per_page=100")
    assert {int(k) for (_, k) in found.records} == {b["id"] for b in books if author.lower() in b["author"].lower()
                                                    or author.lower() in b["title"].lower()}
    _, first = get(world, "books", moment, "/")
    nxt = [href for href, rel in first.links if rel == "next"]
    assert nxt and "page=2" in nxt[0]
    stories = world.collection("news/stories", moment)
    who = stories[0]["author"]
    _, mine = get(world, "news", moment, f"/user?id={who}")
    assert {int(k) for (_, k) in mine.records} == {s["id"] for s in stories if s["author"] == who}


def test_history_pages_show_the_world_as_it_was(world, moment):
    day = int(moment // DAY) * DAY - DAY
    coin = world.collection("crypto/coins", moment)[4]
    _, page = get(world, "crypto", moment, f"/coins/{coin['id']}/history?date="
                  + re.sub(r"T.*", "", datetime.datetime.utcfromtimestamp(day).isoformat()))
    assert len(page.records) == 24
    for (src, key), fields in page.records.items():
        at = int(src.split("@")[1])
        then = next(c for c in world.collection("crypto/coins", at) if c["id"] == key)
        assert float(fields["price_usd"]) == then["price_usd"] and day <= at < day + DAY
    # Today's page stops at the present; a past front page is the ranking then.
    today = int(moment // DAY) * DAY
    _, now_page = get(world, "stocks", moment, f"/q/d/?s={world.collection('stocks/quotes', moment)[0]['symbol']}")
    assert len(now_page.records) == int((moment - today) // HOUR) + 1
    at = today - 5 * HOUR
    _, front = get(world, "news", moment, f"/front?day={datetime.datetime.utcfromtimestamp(at):%Y-%m-%d}"
                   f"&hour={(at % DAY) // HOUR}")
    ranked = sorted((int(f["rank"]), f["title"]) for f in front.records.values())
    then = world.collection(f"news/stories@{at}", moment)
    assert [t for _, t in ranked] == [s["title"] for s in then[:30]]
    future, _ = get(world, "news", moment, f"/front?day={datetime.datetime.utcfromtimestamp(moment):%Y-%m-%d}"
                    "&hour=23")
    assert future.status == 404


@pytest.mark.parametrize("site", list(SITES))
def test_every_page_value_sits_in_a_record_and_sites_look_different(world, moment, site):
    """Detail pages show every field a question may ask about; each site has its own markup and clutter."""
    s = SITES[site]
    spec = next(iter(s.collections.values()))
    record = world.collection(spec.src, moment)[2]
    resp, page = get(world, site, moment, s.detail_path(spec.name, record[spec.key_field]))
    assert resp.status == 200
    shown = page.records[(spec.src, str(record[spec.key_field]))]
    for name, f in spec.fields.items():
        if f.rankable or name == "rank" or name == spec.prev_field:
            assert shown[name] == (repr(record[name]) if isinstance(record[name], float) else str(record[name])), name
    body = resp.body.decode()
    assert "/api" not in body  # pages no longer point at the API
    assert len(re.findall(r"<a ", body)) >= 6  # menus, footers, banners: clutter around the data
    others = {k: SITES[k].SKIN for k in SITES if k != site}
    assert all(skin != s.SKIN and skin.top != s.SKIN.top for skin in others.values())


@pytest.mark.parametrize("site, url, says", [
    ("crypto", "/coins/bittensor/history?date=March-3", "date=YYYY-MM-DD"),
    ("stocks", "/q/d/?s={symbol}&d=2026-03-03", "d=YYYYMMDD"),
    ("subnets", "/subnets/1/history?day=yesterday", "day=YYYY-MM-DD"),
    ("news", "/front?day=2026-03-03&hour=25", "hour=0..23"),
    ("news", "/past?day=soon", "day=YYYY-MM-DD"),
])
def test_malformed_history_requests_say_what_to_send(world, moment, site, url, says):
    symbol = world.collection("stocks/quotes", moment)[0]["symbol"].lower()
    resp, _ = get(world, site, moment, url.format(symbol=symbol))
    assert resp.status == 400 and says in resp.body.decode()


def test_unknown_api_modes_are_refused_by_name():
    from termgym.tasks.liveweb import LiveWebSuite
    from termgym.tasks.liveweb.server import WorldServer

    with pytest.raises(ValueError, match="api must be one of limited, off, paged, bulk, got 'full'"):
        LiveWebSuite(api="full")
    with pytest.raises(ValueError, match="API mode must be one of"):
        WorldServer().open_episode(World(1), SimClock(0, speed=0), api="everything")
