"""What every simulated site is made of: collections of records, HTML pages and a JSON API.

A site declares its collections (:class:`CollectionSpec`: what one record is, which fields it
has and how precisely each must be answered), generates its static data per world, computes its
records at a tick, and renders pages. The JSON API is generic: ``/api/<collection>`` lists exact
records, ``/api/<collection>/<key>`` gives one. List pages are served from a five-minute cache and
round their numbers, as real list pages do; detail pages and the API are exact.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from termgym.tasks.liveweb.noise import TICK
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.markup import Response, json_response

if TYPE_CHECKING:
    from termgym.tasks.liveweb.world import World

#: List pages show the world as it was at the start of the current five-minute window.
LIST_LAG = 300
#: JSON API modes: ``paged`` lists a collection a page at a time (the default: no single request
#: holds a whole collection), ``bulk`` serves it in one response.
API_MODES = ("paged", "bulk")
API_PAGE_SIZE = 20
#: How far back a paging client may pin its snapshot (``at=``): the grader's grace window.
API_PIN_WINDOW = 300


@dataclass(frozen=True)
class FieldSpec:
    """One numeric field of a record: what it is, and how precisely the site shows it.

    ``decimals`` / ``sig_digits`` say how the site rounds the value (detail pages and the API show
    it exactly so): ``decimals=2`` for a percentage like ``-1.23``, ``sig_digits=6`` for a price
    like ``0.00123457``; neither (and ``kind="int"``) means a whole number. The offline grader's
    tolerances are built from this (:meth:`half_unit`), not from a percentage. ``tol_rel`` and
    ``tol_abs`` are the declared tolerances live mode uses, where the real sites' precision is not
    known: ``|a - e| <= tol_abs + tol_rel * |e|``.
    """

    name: str
    label: str
    kind: str = "float"
    unit: str = ""
    tol_rel: float = 0.01
    tol_abs: float = 0.0
    rankable: bool = True  # sensible to compare, rank and threshold on
    decimals: int | None = None
    sig_digits: int | None = None

    @property
    def exact(self) -> bool:
        """A whole number: an answer must match it exactly."""
        return self.kind == "int" or (self.decimals == 0 and self.sig_digits is None)

    def half_unit(self, value: float) -> float:
        """Half a unit in the last digit the site shows for ``value`` (0 for whole numbers)."""
        if self.exact:
            return 0.0
        if self.decimals is not None:
            return 0.5 * 10.0 ** -self.decimals
        if self.sig_digits is not None and value:
            return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - self.sig_digits + 1)
        return 0.0


@dataclass(frozen=True)
class CollectionSpec:
    """A list of things a site shows: coins, quotes, subnets, stories, books."""

    site: str
    name: str
    noun: str
    plural: str
    key_field: str
    name_field: str
    alias_fields: tuple[str, ...]
    fields: dict[str, FieldSpec]
    api_path: str
    #: Format of an item's mention in a question, with record fields: "{name} ({symbol})".
    mention: str = "{name}"
    change_field: str | None = None  # a "% change over 24 h" field, for price-change questions
    price_field: str | None = None

    @property
    def src(self) -> str:
        return f"{self.site}/{self.name}"

    def describe(self, record: dict) -> str:
        return self.mention.format(**record)


class Site:
    """Base class of the simulated sites; subclasses fill in the hooks and say who they are in the
    class line: ``class CryptoSite(Site, key="crypto", host="coingecko.test", title=..., live_host=...)``.
    """

    key: str = ""
    host: str = ""
    title: str = ""
    live_host: str = ""  # the real site this one is modelled on
    collections: dict[str, CollectionSpec] = {}
    #: The menu every HTML page of the site shows: ``(path, label)`` pairs.
    NAV: list[tuple[str, str]] = []

    def __init_subclass__(cls, *, key: str = "", host: str = "", title: str = "", live_host: str = "",
                          **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in (("key", key), ("host", host), ("title", title), ("live_host", live_host)):
            if value:
                setattr(cls, name, value)

    def generate(self, world: World) -> Any:
        """Static, time-independent data of this site in ``world``."""
        raise NotImplementedError

    def records(self, world: World, static: Any, t: int) -> dict[str, list[dict]]:
        """Exact records of every collection at tick time ``t``."""
        raise NotImplementedError

    def html(self, world: World, t: float, path: str, query: dict[str, str]) -> Response:
        """Render an HTML page (``t`` is the current simulated time)."""
        raise NotImplementedError

    # -- shared machinery -------------------------------------------------------------------------

    def page(self, title: str, body: str, status: int = 200) -> Response:
        """An HTML page of this site (its header, menu and footer around ``body``)."""
        return markup.page(self, title, body, self.NAV, status=status)

    def not_found(self, path: str) -> Response:
        """This site's 404 page for ``path``."""
        return markup.not_found(self, path, self.NAV)

    def find(self, world: World, t: float, collection: str, match: Callable[[dict], bool]) -> dict | None:
        """The first exact record of ``collection`` at ``t`` that ``match`` accepts (detail pages)."""
        return next((r for r in world.records(self.key, t)[collection] if match(r)), None)

    def rng(self, world: World, *parts: object) -> random.Random:
        return random.Random(f"{world.seed}:{self.key}:" + ":".join(map(str, parts)))

    def handle(self, world: World, t: float, path: str, query: dict[str, str], *, api: str = "paged") -> Response:
        """Route one GET request: the JSON API under ``/api/``, everything else to :meth:`html`.

        ``api`` is the API mode (:data:`API_MODES`): ``"paged"`` lists a collection
        :data:`API_PAGE_SIZE` records at a time, ``"bulk"`` all at once.
        """
        if path == "/api" or path.startswith("/api/"):
            return self.api(world, t, path, query, mode=api)
        return self.html(world, t, path, query)

    def api(self, world: World, t: float, path: str, query: dict[str, str], *, mode: str = "paged") -> Response:
        if mode not in API_MODES:
            raise ValueError(f"API mode must be one of {', '.join(API_MODES)}, got {mode!r}")
        parts = [p for p in path.split("/") if p][1:]
        t, problem = _pinned_time(t, query)
        if problem is not None:
            return json_response({"error": problem}, 400)
        data = world.records(self.key, t)
        if not parts:
            suffix = "?page=1" if mode == "paged" else ""
            index = {name: f"/api/{name}{suffix}" for name in data}
            out = {"site": self.host, "time": int(t), "collections": index}
            if mode == "paged":
                out["per_page"] = API_PAGE_SIZE
                out["paging"] = ("collections are listed in key order, one page at a time: follow 'next' until it is "
                                 "null; /api/<collection>/<key> gives one record; add at=<time> to any request to "
                                 "read the snapshot of that time (up to 300 s back)")
            return json_response(out)
        name = parts[0]
        if name not in data:
            return json_response({"error": f"no such collection {name!r}", "collections": sorted(data)}, 404)
        spec = self.collections.get(name)
        records = data[name]
        if len(parts) == 1:
            if mode == "paged":
                return self._api_page(world, t, name, query)
            tick = int(t // TICK) * TICK
            body = world.memo(("api", self.key, name, tick), lambda: json.dumps(
                {"time": tick, "count": len(records), "items": records}, separators=(",", ":")).encode())
            return Response(200, body, "application/json")
        if spec is None or len(parts) > 2:
            return json_response({"error": f"no such resource {path!r}"}, 404)
        for record in records:
            if str(record[spec.key_field]).lower() == parts[1].lower():
                return json_response({"time": int(t), "item": record})
        return json_response({"error": f"no {spec.noun} {parts[1]!r}"}, 404)

    def _api_page(self, world: World, t: float, name: str, query: dict[str, str]) -> Response:
        """One page of a collection, in key order (stable while ranks move); ``next`` pins the snapshot time."""
        tick = int(t // TICK) * TICK
        try:
            n = int(query.get("page", "1"))
        except ValueError:
            return json_response({"error": f"page must be a whole number, got {query.get('page')!r}"}, 400)
        spec = self.collections.get(name)
        records = world.records(self.key, tick)[name]
        key_field = spec.key_field if spec else next(iter(records[0]), None) if records else None
        ordered = sorted(records, key=lambda r: r[key_field]) if key_field else records
        pages = max(1, math.ceil(len(ordered) / API_PAGE_SIZE))
        if not 1 <= n <= pages:
            return json_response({"error": f"no page {n} of {name!r}: pages are 1..{pages}"}, 404)
        items = ordered[(n - 1) * API_PAGE_SIZE : n * API_PAGE_SIZE]
        next_url = f"/api/{name}?page={n + 1}&at={tick}" if n < pages else None
        return json_response({"time": tick, "page": n, "pages": pages, "per_page": API_PAGE_SIZE,
                              "count": len(ordered), "items": items, "next": next_url})

    def list_time(self, t: float) -> int:
        return int(t // LIST_LAG) * LIST_LAG


def _pinned_time(t: float, query: dict[str, str]) -> tuple[float, str | None]:
    """The time an API request reads: now, or ``at=`` (a client's pinned snapshot, at most
    :data:`API_PIN_WINDOW` seconds back and never ahead), with the reason when ``at`` is unusable."""
    if "at" not in query:
        return t, None
    try:
        at = int(query["at"])
    except ValueError:
        return t, f"at must be a whole number of seconds, got {query['at']!r}"
    tick = int(t // TICK) * TICK
    if not tick - API_PIN_WINDOW <= at <= t:
        return t, f"at={at} is outside the last {API_PIN_WINDOW} s (now {int(t)}); drop at= or use a later time"
    return float(at), None
