"""``stooq.test``: stock quotes, modelled on Stooq (a quote table, per-symbol quote pages).

The simulated exchange trades around the clock; a "day" is a UTC day, so ``prev_close`` is the
last price before midnight and ``change_pct`` is measured against it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from termgym.tasks.liveweb.noise import DAY, TICK, sig, unit01, wander
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site
from termgym.tasks.liveweb.sites.naming import symbol_for, unique_words

if TYPE_CHECKING:
    from termgym.tasks.liveweb.world import World

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
    change_field="change_pct", price_field="price",
    fields={
        "price": FieldSpec("price", "last price in USD", "money", "USD", tol_rel=0.005, sig_digits=6),
        "prev_close": FieldSpec("prev_close", "previous close in USD", "money", "USD", tol_rel=0.005,
                                sig_digits=6),
        "open": FieldSpec("open", "opening price in USD (today)", "money", "USD", tol_rel=0.005,
                          sig_digits=6),
        "change_pct": FieldSpec("change_pct", "change since the previous close in percent", "pct", "%", 0.0, 0.2,
                                decimals=2),
        "volume": FieldSpec("volume", "number of shares traded today", "float", "shares", tol_rel=0.03,
                            decimals=0),
        "market_cap": FieldSpec("market_cap", "market capitalisation in USD", "money", "USD", tol_rel=0.01,
                                decimals=0),
    },
)


def _price(s: dict, t: float) -> float:
    return sig(s["base"] * math.exp(wander(s["key"], t, s["vol"])), 6)


class StocksSite(Site, key="stocks", host="stooq.test", title="Stooq (simulated)",
                 live_host="stooq.com"):
    collections = {"quotes": QUOTES}

    def generate(self, world: World) -> Any:
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

    def records(self, world: World, static: Any, t: int) -> dict[str, list[dict]]:
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

    NAV = [("/", "All quotes"), ("/sectors", "Sectors")]

    def _rows(self, quotes: list[dict]) -> list[list[str]]:
        return [[markup.link(f"/q/?s={q['symbol'].lower()}", q["symbol"]), markup.esc(q["name"]), markup.esc(q["sector"]),
                 f"{q['price']:.2f}", f"{q['change_pct']:+.2f}%", markup.compact(q["volume"]),
                 markup.compact(q["market_cap"], "$")] for q in quotes]

    def html(self, world: World, t: float, path: str, query: dict[str, str]) -> Response:
        headers = ["Symbol", "Name", "Sector", "Last", "Change", "Volume", "Market cap"]
        if path in ("/", "/index.html"):
            quotes = world.records(self.key, self.list_time(t))["quotes"]
            shown, n, pages = markup.paginate(quotes, query, PER_PAGE)
            body = ("<p>Delayed quotes (refreshed every five minutes), sorted by symbol. Open a symbol for "
                    "the live quote.</p>" + markup.table(headers, self._rows(shown)) + markup.pager("/", n, pages))
            return self.page("Quotes", body)
        if path == "/sectors":
            items = "".join(f"<li>{markup.link(f'/sectors/{name.lower()}', name)}</li>" for name in sorted(SECTORS))
            return self.page("Sectors", f"<ul>{items}</ul>")
        if path.startswith("/sectors/"):
            name = path.rsplit("/", 1)[-1].capitalize()
            if name in SECTORS:
                quotes = [q for q in world.records(self.key, self.list_time(t))["quotes"] if q["sector"] == name]
                return self.page(f"{name} sector", markup.table(headers, self._rows(quotes)))
        if path in ("/q", "/q/"):
            sym = query.get("s", "").upper()
            q = self.find(world, t, "quotes", lambda q: q["symbol"] == sym)
            if q is not None:
                body = markup.dl([("Symbol", q["symbol"]), ("Name", q["name"]), ("Sector", q["sector"]),
                                  ("Last (USD)", q["price"]), ("Open (USD)", q["open"]),
                                  ("Previous close (USD)", q["prev_close"]), ("Change (%)", q["change_pct"]),
                                  ("Volume (shares)", q["volume"]), ("Market cap (USD)", q["market_cap"])])
                return self.page(f"{q['symbol']}: {q['name']}", body)
        return self.not_found(path)
