"""What every simulated site is made of: collections of records, HTML pages and a JSON API.

A site declares its collections (:class:`CollectionSpec`: what one record is, which fields it
has and how precisely each must be answered), generates its static data per world, computes its
records at a tick, and renders pages. HTML is the full-fidelity channel: list pages (sortable,
filterable, paginated; rounded numbers in the text, the exact value in each cell's ``data-value``
as sortable tables carry it), search, detail pages and history pages (a record's hourly or daily
values in the past). Every value a page shows sits in an element with ``data-field`` and
``data-value`` inside a record element with ``data-src`` and ``data-key`` (:func:`markup.rec`),
whatever the visible markup of the site.

The JSON API is limited the way real sites limit theirs (:data:`API_MODES`): by default
(``"limited"``) it lists a collection 20 records at a time with a few summary fields only, has no
history and allows :data:`API_QUOTA` requests per episode; ``"off"`` has none; ``"paged"`` and
``"bulk"`` (opt-in) serve every field.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from termgym.tasks.liveweb.noise import DAY, HOUR, TICK
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.markup import Response, json_response

#: JSON API modes: ``limited`` (the default) lists a collection a page at a time with the
#: collection's summary fields only (:attr:`CollectionSpec.api_fields`) and a request quota per
#: episode; ``off``: no API; ``paged``: every field, a page at a time; ``bulk``: every field, one
#: response per collection.
API_MODES = ("limited", "off", "paged", "bulk")
DEFAULT_API = "limited"
API_PAGE_SIZE = 20
#: Requests the limited API answers per episode before it says 429 (rate limited).
API_QUOTA = 30
#: The most rows a list page shows (``per_page=``).
MAX_PER_PAGE = 100
#: How far back a paging client may pin its snapshot (``at=``): the grader's grace window.
API_PIN_WINDOW = 300


class WorldView(Protocol):
    """What a site reads of the world it belongs to (:class:`termgym.tasks.liveweb.world.World` is one):
    the seed and its time anchor, noise keys, the site's static data, any site's records at a moment,
    and a cache for values derived from them. Sites depend on this, not on the world's module, so the
    world can hold the sites without the sites importing it back."""

    seed: int
    base_time: int

    def noise_key(self, *parts: object) -> int: ...

    def static(self, site: str) -> Any: ...

    def records(self, site: str, t: float) -> dict[str, list[dict]]: ...

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any: ...


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
    #: Shown on the collection's list pages (else only on detail pages); list pages can sort by it.
    listed: bool = True
    #: Shown on the record's history pages.
    history: bool = False
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
    #: The price the change is measured from, shown on detail pages (previous close, 24 h ago).
    prev_field: str | None = None
    #: What the period of ``change_field`` is called in a question.
    period: str = "over the last 24 hours"
    #: Fields the limited JSON API serves (besides the key and the name).
    api_fields: tuple[str, ...] = ()
    #: History pages: ``"hourly"`` (a day's hourly values), ``"daily"`` (recent days) or None.
    history: str | None = None

    @property
    def src(self) -> str:
        return f"{self.site}/{self.name}"

    def field(self, name: str) -> FieldSpec:
        """The :class:`FieldSpec` of ``name``; ``KeyError`` naming the collection if it has none."""
        try:
            return self.fields[name]
        except KeyError:
            raise KeyError(f"{self.src} has no numeric field {name!r}") from None

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

    def generate(self, world: WorldView) -> Any:
        """Static, time-independent data of this site in ``world``."""
        raise NotImplementedError

    def records(self, world: WorldView, static: Any, t: int) -> dict[str, list[dict]]:
        """Exact records of every collection at tick time ``t``."""
        raise NotImplementedError

    def html(self, world: WorldView, t: float, path: str, query: dict[str, str]) -> Response:
        """Render an HTML page (``t`` is the current simulated time; every page is live)."""
        raise NotImplementedError

    # -- where things are (the question planner and the oracle use these) ---------------------------

    def detail_path(self, collection: str, key: object) -> str:
        """The path of a record's detail page (live values)."""
        raise NotImplementedError

    def history_path(self, collection: str, key: object, at: int) -> str:
        """The path of the history page that shows the record's values at ``at`` (a past moment)."""
        raise NotImplementedError(f"{self.host} has no history pages for {collection}")

    def list_path(self, collection: str, scope: list[dict], sort: str | None = None, order: str = "desc") -> str:
        """A list page holding every record ``scope`` admits, sorted by ``sort``, as many per page as allowed."""
        raise NotImplementedError

    def history_times(self, collection: str, at: int, now: float) -> list[int]:
        """The moments the history page of ``at`` lists: the hours of its UTC day (hourly), or the
        noons of the 30 days before now (daily); never later than ``now``."""
        spec = self.collections[collection]
        if spec.history == "hourly":
            day = int(at // DAY) * DAY
            times = [day + h * HOUR for h in range(24)]
        else:
            today = int(now // DAY) * DAY
            times = [today - d * DAY + 12 * HOUR for d in range(30, -1, -1)]
        return [x for x in times if x <= now]

    # -- shared machinery -------------------------------------------------------------------------

    SKIN: markup.Skin = markup.Skin()

    def page(self, title: str, body: str, t: float = 0.0, status: int = 200) -> Response:
        """An HTML page of this site (its own header, menu, banners and footer around ``body``)."""
        return markup.page(self, self.SKIN, title, body, self.NAV, t, status=status)

    def not_found(self, path: str, t: float = 0.0) -> Response:
        """This site's 404 page for ``path``."""
        return self.page("Page not found", f"<p>Nothing here at {markup.esc(path)}. Try the menu or the search.</p>",
                         t, status=404)

    def find(self, world: WorldView, t: float, collection: str, match: Callable[[dict], bool]) -> dict | None:
        """The first exact record of ``collection`` at ``t`` that ``match`` accepts (detail pages)."""
        return next((r for r in world.records(self.key, t)[collection] if match(r)), None)

    def rng(self, world: WorldView, *parts: object) -> random.Random:
        return random.Random(f"{world.seed}:{self.key}:" + ":".join(map(str, parts)))

    def list_view(self, records: list[dict], spec: CollectionSpec, query: dict[str, str], default_sort: str,
                  default_order: str) -> dict[str, Any]:
        """Sort and paginate ``records`` for a list page from ``?sort=&order=&page=&per_page=``.

        Unknown sort fields fall back to the default, as real sites do; ``per_page`` is clamped to
        1..:data:`MAX_PER_PAGE`.
        """
        sortable = {f.name for f in spec.fields.values() if f.listed} | {spec.name_field, spec.key_field}
        sort = query.get("sort", default_sort)
        if sort not in sortable:
            sort = default_sort
        order = query.get("order", default_order if sort == default_sort else "desc")
        order = order if order in ("asc", "desc") else "desc"
        key_field = spec.key_field
        ordered = sorted(records, key=lambda r: (r[sort], str(r[key_field])), reverse=order == "desc")
        try:
            per_page = min(max(int(query.get("per_page", "")), 1), MAX_PER_PAGE)
        except ValueError:
            per_page = self.PER_PAGE
        shown, n, pages = markup.paginate(ordered, query, per_page)
        return {"shown": shown, "page": n, "pages": pages, "per_page": per_page, "sort": sort, "order": order,
                "count": len(ordered)}

    PER_PAGE = 25

    def handle(self, world: WorldView, t: float, path: str, query: dict[str, str], *, api: str = DEFAULT_API) -> Response:
        """Route one GET request: the JSON API under ``/api/``, everything else to :meth:`html`.

        ``api`` is the API mode (:data:`API_MODES`).
        """
        if path == "/api" or path.startswith("/api/"):
            return self.api(world, t, path, query, mode=api)
        return self.html(world, t, path, query)

    def api(self, world: WorldView, t: float, path: str, query: dict[str, str], *, mode: str = DEFAULT_API) -> Response:
        if mode not in API_MODES:
            raise ValueError(f"API mode must be one of {', '.join(API_MODES)}, got {mode!r}")
        if mode == "off":
            return json_response({"error": f"{self.host} has no public API; its web pages have everything"}, 404)
        parts = [p for p in path.split("/") if p][1:]
        t, problem = _pinned_time(t, query)
        if problem is not None:
            return json_response({"error": problem}, 400)
        data = world.records(self.key, t)
        if mode == "limited":
            data = {name: records for name, records in data.items() if self.collections.get(name)
                    and self.collections[name].api_fields}
        if not parts:
            suffix = "?page=1" if mode != "bulk" else ""
            index = {name: f"/api/{name}{suffix}" for name in data}
            out = {"site": self.host, "time": int(t), "collections": index}
            if mode != "bulk":
                out["per_page"] = API_PAGE_SIZE
            if mode == "limited":
                out["plan"] = (f"free tier: {API_QUOTA} requests per session, summary fields only, no history; "
                               "the web pages show everything")
            return json_response(out)
        name = parts[0]
        if name not in data:
            return json_response({"error": f"no such collection {name!r}", "collections": sorted(data)}, 404)
        spec = self.collections.get(name)
        records = data[name]
        if mode == "limited" and spec is not None:
            keep = {spec.key_field, spec.name_field, *spec.api_fields}
            records = [{k: v for k, v in r.items() if k in keep} for r in records]
        if len(parts) == 1:
            if mode != "bulk":
                return self._api_page(world, t, name, query, records)
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

    def _api_page(self, world: WorldView, t: float, name: str, query: dict[str, str], records: list[dict]) -> Response:
        """One page of a collection, in key order (stable while ranks move); ``next`` pins the snapshot time."""
        tick = int(t // TICK) * TICK
        try:
            n = int(query.get("page", "1"))
        except ValueError:
            return json_response({"error": f"page must be a whole number, got {query.get('page')!r}"}, 400)
        spec = self.collections.get(name)
        key_field = spec.key_field if spec else next(iter(records[0]), None) if records else None
        ordered = sorted(records, key=lambda r: r[key_field]) if key_field else records
        pages = max(1, math.ceil(len(ordered) / API_PAGE_SIZE))
        if not 1 <= n <= pages:
            return json_response({"error": f"no page {n} of {name!r}: pages are 1..{pages}"}, 404)
        items = ordered[(n - 1) * API_PAGE_SIZE : n * API_PAGE_SIZE]
        next_url = f"/api/{name}?page={n + 1}&at={tick}" if n < pages else None
        return json_response({"time": tick, "page": n, "pages": pages, "per_page": API_PAGE_SIZE,
                              "count": len(ordered), "items": items, "next": next_url})


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
