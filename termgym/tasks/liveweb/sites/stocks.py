"""``stooq.test``: stock quotes, modelled on Stooq (a quote table, per-symbol quote pages).

The simulated exchange trades around the clock; a "day" is a UTC day, so ``prev_close`` is the
last price before midnight and ``change_pct`` is measured against it.
"""

from __future__ import annotations

import math
from typing import Any

from termgym.tasks.liveweb.noise import DAY, TICK, sig, unit01, wander
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site, WorldView
from termgym.tasks.liveweb.sites.naming import symbol_for, unique_words

N_STOCKS = 40
PER_PAGE = 20
SECTORS = {
    "Technology": ["Systems", "Software", "Semiconductor", "Networks"],
    "Health": ["Pharma", "Biotech", "Health"],
    "Energy": ["Energy", "Power", "Solar"],
    "Finance": ["Bank", "Capital", "Insurance"],
    "Consumer": ["Foods", "Retail", "Apparel", "Motors"],
    "Industrials": ["Robotics", "Aerospace", "Mining", "Logistics"],
}

QUOTES = CollectionSpec(
    site="stocks", name="quotes", noun="stock", plural="stocks", key_field="symbol", name_field="name",
    alias_fields=("symbol", "name"), api_path="/api/quotes", mention="{name} ({symbol})",
    change_field="change_pct", price_field="price", prev_field="prev_close", period="since the previous close",
    api_fields=("price",), history="hourly",
    fields={
        "price": FieldSpec("price", "last price in USD", "money", "USD", tol_rel=0.005, sig_digits=6,
                           history=True),
        "prev_close": FieldSpec("prev_close", "previous close in USD", "money", "USD", tol_rel=0.005,
                                listed=False, sig_digits=6),
        "open": FieldSpec("open", "opening price today in USD", "money", "USD", tol_rel=0.005,
                          listed=False, sig_digits=6),
        "change_pct": FieldSpec("change_pct", "change since the previous close in percent", "pct", "%", 0.0, 0.2,
                                decimals=2),
        "volume": FieldSpec("volume", "number of shares traded today", "float", "shares", tol_rel=0.03,
                            decimals=0, history=True),
        "market_cap": FieldSpec("market_cap", "market capitalisation in USD", "money", "USD", tol_rel=0.01,
                                decimals=0),
    },
)


def _price(s: dict, t: float) -> float:
    return sig(s["base"] * math.exp(wander(s["key"], t, s["vol"])), 6)


class StocksSite(Site, key="stocks", host="stooq.test", title="Stooq (simulated)",
                 live_host="stooq.com"):
    collections = {"quotes": QUOTES}

    def generate(self, world: WorldView) -> Any:
        rng = self.rng(world, "stocks")
        words = unique_words(rng, N_STOCKS)
        taken: set[str] = set()
        stocks = []
        for word in words:
            sector = rng.choice(sorted(SECTORS))
            name = f"{word} {rng.choice(SECTORS[sector])}"
            symbol = symbol_for(word, taken, rng, rng.choice((3, 4, 4)))
            stocks.append({"symbol": symbol, "name": name, "sector": sector, "base": 10 ** rng.uniform(0.7, 2.9),
                           "vol": rng.uniform(0.025, 0.09), "shares": round(10 ** rng.uniform(7.5, 10)),
                           "avg_volume": 10 ** rng.uniform(5, 7.3), "key": world.noise_key("stock", symbol)})
        return stocks

    def records(self, world: WorldView, static: Any, t: int) -> dict[str, list[dict]]:
        day_start = int(t // DAY) * DAY
        frac = (t - day_start + TICK) / DAY
        out = []
        for s in static:
            price, prev = _price(s, t), _price(s, day_start - TICK)
            volume = s["avg_volume"] * frac * (0.6 + 0.8 * unit01(s["key"], day_start // DAY))
            out.append({
                "symbol": s["symbol"], "name": s["name"], "sector": s["sector"], "price": price,
                "open": _price(s, day_start), "prev_close": prev, "change_pct": round(100 * (price / prev - 1), 2),
                "volume": int(volume), "market_cap": round(price * s["shares"]),
            })
        out.sort(key=lambda r: r["symbol"])
        return {"quotes": out}

    NAV = [("/", "Quotes"), ("/sectors", "Sectors"), ("/?sort=change_pct&order=desc", "Gainers"),
           ("/?sort=change_pct&order=asc", "Losers"), ("/search", "Symbol search"), ("/help", "Help")]
    SKIN = markup.Skin(
        body_class="stq",
        head='<style>body{font-family:Verdana;font-size:11px}table.fth td{border:1px solid #ddd}</style>',
        top=('<table width="100%" class="hdr"><tr><td><b>{title}</b></td><td align="right">{clock}</td></tr>'
             '<tr><td colspan="2" class="menu">{nav}</td></tr></table>'),
        nav_sep=" &nbsp;|&nbsp; ",
        banner=('<table class="ticker"><tr><td>Indices: SIM500 +0.31% · TECH100 −0.12% · ENERGY20 +0.08%</td>'
                '<td class="ad">[advert] Open a brokerage account in 5 minutes</td></tr></table>'),
        main_open='<div id="content">', main_close="</div>",
        heading="<h3>{text}</h3>",
        footer=('<hr><div class="foot">© Stooq (simulated) · Quotes may be delayed for some markets · '
                '<a href="/terms">Terms</a> · <a href="/contact">Contact</a> · <a href="/help">Help</a></div>'),
    )
    PER_PAGE = 20
    _HEADERS = [("Symbol", "symbol"), ("Name", "name"), ("Sector", None), ("Last", "price"), ("Change %", "change_pct"),
                ("Volume", "volume"), ("Mkt cap", "market_cap")]

    def detail_path(self, collection: str, key: object) -> str:
        return f"/q/?s={str(key).lower()}"

    def history_path(self, collection: str, key: object, at: int) -> str:
        return f"/q/d/?s={str(key).lower()}&d={markup.utc(at):%Y%m%d}"

    def list_path(self, collection: str, scope: list[dict], sort: str | None = None, order: str = "desc") -> str:
        params = ["per_page=100"]
        for cond in scope:
            if cond["field"] != "sector" or cond["op"] != "==":
                raise ValueError(f"{self.host} lists filter by sector only, got {cond}")
            params.append(f"sector={cond['value']}")
        if sort:
            params += [f"sort={sort}", f"order={order}"]
        return "/?" + "&".join(params)

    def _row(self, q: dict) -> str:
        return (markup.rec("stocks/quotes", q["symbol"]) + markup.val("symbol", q["symbol"],
                markup.link(self.detail_path("quotes", q["symbol"]), q["symbol"]), raw=True)
                + markup.val("name", q["name"]) + markup.val("sector", q["sector"])
                + markup.val("price", q["price"], f"{q['price']:.2f}")
                + markup.val("change_pct", q["change_pct"], f"{q['change_pct']:+.2f}%")
                + markup.val("volume", q["volume"], markup.compact(q["volume"]))
                + markup.val("market_cap", q["market_cap"], markup.compact(q["market_cap"], "$")) + "</tr>")

    def _listing(self, quotes: list[dict], base: str, query: dict[str, str]) -> str:
        view = self.list_view(quotes, QUOTES, query, "symbol", "asc")
        heads = [markup.sort_head(label, name, base, query, view) for label, name in self._HEADERS]
        return (markup.record_table(heads, [self._row(q) for q in view["shown"]], "fth")
                + markup.pager(base, view["page"], view["pages"], query))

    def html(self, world: WorldView, t: float, path: str, query: dict[str, str]) -> Response:
        quotes = world.records(self.key, t)["quotes"]
        if path in ("/", "/index.html"):
            sector = query.get("sector", "")
            shown = [q for q in quotes if q["sector"] == sector] if sector else quotes
            filters = " ".join(markup.link(markup.with_query("/", {k: v for k, v in query.items() if k != "page"},
                                                             sector=name), name) for name in sorted(SECTORS))
            body = (f"<p>Filter by sector: {filters} · {markup.link('/', 'all')}</p>"
                    + self._listing(shown, "/", query))
            return self.page(f"{sector} stocks" if sector else "Stock quotes", body, t)
        if path == "/sectors":
            items = "".join(f"<tr><td>{markup.link(f'/?sector={name}', name)}</td><td>"
                            f"{sum(q['sector'] == name for q in quotes)}</td></tr>" for name in sorted(SECTORS))
            return self.page("Sectors", f'<table class="fth"><tr><th>Sector</th><th>Stocks</th></tr>{items}</table>', t)
        if path.startswith("/sectors/"):  # old links
            name = path.rsplit("/", 1)[-1].capitalize()
            if name in SECTORS:
                return self.html(world, t, "/", {"sector": name})
        if path == "/search":
            q = query.get("q", "").strip().lower()
            hits = [x for x in quotes if q and (q in x["name"].lower() or q == x["symbol"].lower())]
            body = markup.search_form("/search", "q", q, "Symbol or company")
            body += self._listing(hits, "/search", query) if q else "<p>Type a symbol or a company name.</p>"
            return self.page("Symbol search", body, t)
        if path == "/help":
            return self.page("Help", "<p>Change % is measured from the previous close (the last price before "
                             "00:00 UTC). Quote pages show last, open, previous close and volume; history pages "
                             "show a day's hourly prices.</p>", t)
        if path in ("/q", "/q/", "/q/d", "/q/d/"):
            sym = query.get("s", "").upper()
            q = next((x for x in quotes if x["symbol"] == sym), None)
            if q is None:
                return self.not_found(f"{path}?s={sym.lower()}", t)
            if path.startswith("/q/d"):
                return self._history(world, t, q, query)
            rows = [("Last", "price"), ("Open", "open"), ("Prev. close", "prev_close"), ("Change %", "change_pct"),
                    ("Volume", "volume"), ("Market cap (USD)", "market_cap")]
            cells = "".join(f"<tr><td>{label}</td>{markup.val(name, q[name])}</tr>" for label, name in rows)
            body = (markup.rec("stocks/quotes", q["symbol"], "div", "quote")
                    + f'<p>{markup.val("symbol", q["symbol"], tag="b")} · {markup.val("name", q["name"], tag="span")}'
                    f' · sector {markup.val("sector", q["sector"], tag="span")}</p>'
                    f'<table class="fth">{cells}</table></div>'
                    + "<p>" + markup.link(self.history_path("quotes", q["symbol"], int(t)), "Hourly history")
                    + " · prices in USD</p>")
            return self.page(f"{q['symbol']} - {q['name']}", body, t)
        return self.not_found(path, t)

    def _history(self, world: WorldView, t: float, quote: dict, query: dict[str, str]) -> Response:
        day = markup.parse_day(query.get("d", f"{markup.utc(t):%Y%m%d}"), compact=True)
        if day is None:
            return self.page("History", "<p>Give the day as d=YYYYMMDD.</p>", t, status=400)
        rows = []
        for at in self.history_times("quotes", day, t):
            r = next(x for x in world.records(self.key, at)["quotes"] if x["symbol"] == quote["symbol"])
            rows.append(markup.rec(f"stocks/quotes@{at}", quote["symbol"]) + f"<td>{markup.utc(at):%H:%M}</td>"
                        + markup.val("name", r["name"], r["symbol"])
                        + markup.val("price", r["price"]) + markup.val("volume", r["volume"]) + "</tr>")
        sym = quote["symbol"].lower()
        body = (f"<p>{markup.esc(quote['name'])}: hourly prices on {markup.day_text(day)}, UTC.</p>"
                + (markup.record_table(["Hour", "Symbol", "Price", "Volume (day so far)"], rows, "fth") if rows
                   else "<p>No quotes for this day yet.</p>")
                + "<p>" + markup.link(f"/q/d/?s={sym}&d={markup.utc(day - DAY):%Y%m%d}", "« day before") + " · "
                + markup.link(f"/q/d/?s={sym}&d={markup.utc(day + DAY):%Y%m%d}", "day after »") + "</p>")
        return self.page(f"{quote['symbol']} history", body, t)
