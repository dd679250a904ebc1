"""``coingecko.test``: crypto prices, modelled on CoinGecko (a ranked market table and coin pages)."""

from __future__ import annotations

import math
from typing import Any

from termgym.tasks.liveweb.noise import DAY, sig, wander
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site, WorldView
from termgym.tasks.liveweb.sites.naming import slug, symbol_for, unique_words

N_COINS = 50
PER_PAGE = 25
YEAR = 365 * DAY

COINS = CollectionSpec(
    site="crypto", name="coins", noun="coin", plural="coins", key_field="id", name_field="name",
    alias_fields=("name", "symbol", "id"), api_path="/api/coins", mention="{name} ({symbol})",
    change_field="change_24h_pct", price_field="price_usd",
    fields={
        "price_usd": FieldSpec("price_usd", "price in USD", "money", "USD", tol_rel=0.01, sig_digits=6, history=True),
        "market_cap_usd": FieldSpec("market_cap_usd", "market capitalisation in USD", "money", "USD", tol_rel=0.01,
                                     decimals=0, history=True),
        "volume_24h_usd": FieldSpec("volume_24h_usd", "24-hour trading volume in USD", "money", "USD", tol_rel=0.02,
                                     decimals=0, history=True),
        "change_24h_pct": FieldSpec("change_24h_pct", "24-hour price change in percent", "pct", "%", 0.0, 0.3,
                                     decimals=2),
        "change_7d_pct": FieldSpec("change_7d_pct", "7-day price change in percent", "pct", "%", 0.0, 0.3,
                                    decimals=2),
        "circulating_supply": FieldSpec("circulating_supply", "circulating supply", "float", "coins", 0.01,
                                         listed=False, decimals=0),
        "rank": FieldSpec("rank", "market-cap rank", "int", "", 0.0, 0.0, rankable=False),
        "price_24h_ago_usd": FieldSpec("price_24h_ago_usd", "price 24 hours ago in USD", "money", "USD", 0.01,
                                       rankable=False, listed=False, sig_digits=6),
    },
    prev_field="price_24h_ago_usd", api_fields=("price_usd", "market_cap_usd"), history="hourly",
)


def tao_usd(world: WorldView, t: float) -> float:
    """TAO's USD price: the crypto site lists it and the subnet explorer quotes it."""
    coins = world.static("crypto")
    tao = next(c for c in coins if c["symbol"] == "TAO")
    return _price(tao, t)


def _price(coin: dict, t: float) -> float:
    return sig(coin["base"] * math.exp(wander(coin["key"], t, coin["vol"])))


class CryptoSite(Site, key="crypto", host="coingecko.test", title="CoinGecko (simulated)",
                 live_host="api.coingecko.com"):
    collections = {"coins": COINS}

    def generate(self, world: WorldView) -> Any:
        rng = self.rng(world, "coins")
        names = unique_words(rng, N_COINS)
        taken = {"TAO"}
        coins = [{"name": "Bittensor", "symbol": "TAO", "id": "bittensor", "base": rng.uniform(250, 650),
                  "supply": rng.uniform(7e6, 9e6), "inflation": 0.25, "vol": 0.16, "turnover": 0.04}]
        for name in names:
            coins.append({
                "name": name, "symbol": symbol_for(name, taken, rng, rng.choice((3, 3, 4))), "id": slug(name),
                # Draw the market cap and the price; the supply follows (real caps span 1e7..1e12).
                "base": (base := 10 ** rng.uniform(-3, 4.3)), "supply": 10 ** rng.uniform(7, 11.5) / base,
                "inflation": rng.uniform(0, 0.08), "vol": rng.uniform(0.08, 0.26),
                "turnover": rng.uniform(0.01, 0.15),
            })
        for coin in coins:
            coin["key"] = world.noise_key("coin", coin["id"])
        return coins

    def records(self, world: WorldView, static: Any, t: int) -> dict[str, list[dict]]:
        out = []
        for c in static:
            price = _price(c, t)
            supply = round(c["supply"] * (1 + c["inflation"] * (t - world.base_time) / YEAR))
            p24, p7 = _price(c, t - DAY), _price(c, t - 7 * DAY)
            mcap = round(price * supply)
            turnover = c["turnover"] * math.exp(0.5 * wander(c["key"] + 97, t, 1.0))
            out.append({
                "id": c["id"], "symbol": c["symbol"], "name": c["name"], "price_usd": price,
                "market_cap_usd": mcap, "volume_24h_usd": round(mcap * turnover),
                "change_24h_pct": round(100 * (price / p24 - 1), 2),
                "change_7d_pct": round(100 * (price / p7 - 1), 2), "circulating_supply": supply,
                "price_24h_ago_usd": p24,
            })
        out.sort(key=lambda r: -r["market_cap_usd"])
        for i, r in enumerate(out, 1):
            r["rank"] = i
        return {"coins": out}

    NAV = [("/", "Cryptocurrencies"), ("/?sort=change_24h_pct&order=desc", "Top gainers"),
           ("/?sort=volume_24h_usd&order=desc", "Most traded"), ("/learn", "Learn"), ("/search", "Search")]
    SKIN = markup.Skin(
        body_class="cg",
        head='<style>.cg table.coins td{padding:2px 6px}.ad{border:1px dashed #ccc}</style>',
        top=('<div class="cookie">We use cookies to improve your experience. <a href="/privacy">Learn more</a> '
             '<button>Accept</button></div><header class="topbar"><a class="logo" href="/">{title}</a>'
             '<form action="/search" role="search"><input name="query" placeholder="Search coins"></form>'
             '<nav class="menu">{nav}</nav></header>'),
        nav_item="<span>{link}</span>", nav_sep=" ",
        banner=('<div class="ad">Sponsored: Trade with zero fees on Exchangio — sign up today. '
                '<a href="/ads">Ad</a></div><p class="stats">Coins: 51 · Exchanges: 1,204 · '
                'Market data is live.</p>'),
        heading="<h1>{text}</h1>",
        aside=('<aside class="newsletter"><h3>Stay ahead</h3><p>Get the daily crypto digest in your inbox.</p>'
               '<a href="/newsletter">Subscribe</a></aside>'),
        footer=('<footer><p>CoinGecko (simulated) — prices are for information only, not advice.</p>'
                '<p><a href="/about">About</a> · <a href="/careers">Careers</a> · <a href="/privacy">Privacy</a> · '
                '<a href="/terms">Terms</a> · <a href="/methodology">Methodology</a></p></footer>'),
    )
    PER_PAGE = 25
    _COLUMNS = [("#", "rank"), ("Coin", "name"), ("Price", "price_usd"), ("24h", "change_24h_pct"),
                ("7d", "change_7d_pct"), ("Market Cap", "market_cap_usd"), ("24h Volume", "volume_24h_usd")]

    def detail_path(self, collection: str, key: object) -> str:
        return f"/coins/{key}"

    def history_path(self, collection: str, key: object, at: int) -> str:
        return f"/coins/{key}/history?date={markup.day_iso(at)}"

    def list_path(self, collection: str, scope: list[dict], sort: str | None = None, order: str = "desc") -> str:
        if scope:
            raise ValueError(f"{self.host} lists have no filters, got {scope}")
        sort_q = f"&sort={sort}&order={order}" if sort else ""
        return f"/?per_page=100{sort_q}"

    def _row(self, c: dict) -> str:
        return (markup.rec("crypto/coins", c["id"]) + markup.val("rank", c["rank"])
                + markup.val("name", c["name"], markup.link(f"/coins/{c['id']}", c["name"])
                             + f' <span class="sym">{markup.esc(c["symbol"])}</span>', raw=True)
                + markup.val("price_usd", c["price_usd"], "$" + markup.rounded_price(c["price_usd"]))
                + markup.val("change_24h_pct", c["change_24h_pct"], f"{c['change_24h_pct']:+.1f}%")
                + markup.val("change_7d_pct", c["change_7d_pct"], f"{c['change_7d_pct']:+.1f}%")
                + markup.val("market_cap_usd", c["market_cap_usd"], markup.compact(c["market_cap_usd"], "$"))
                + markup.val("volume_24h_usd", c["volume_24h_usd"], markup.compact(c["volume_24h_usd"], "$"))
                + "</tr>")

    def _listing(self, coins: list[dict], base: str, query: dict[str, str]) -> str:
        view = self.list_view(coins, COINS, query, "rank", "asc")
        heads = [markup.sort_head(label, name, base, query, view) for label, name in self._COLUMNS]
        return (markup.record_table(heads, [self._row(c) for c in view["shown"]], "coins")
                + markup.pager(base, view["page"], view["pages"], query)
                + '<p class="perpage">Show rows: ' + " ".join(
                    markup.link(markup.with_query(base, query, per_page=n, page=1), n) for n in (25, 50, 100)) + "</p>")

    def html(self, world: WorldView, t: float, path: str, query: dict[str, str]) -> Response:
        coins = world.records(self.key, t)["coins"]
        if path in ("/", "/index.html"):
            body = ("<p>The global cryptocurrency market, by market capitalisation. Click a column to sort; "
                    "open a coin for its full statistics and price history.</p>" + self._listing(coins, "/", query))
            return self.page("Cryptocurrency Prices by Market Cap", body, t)
        if path == "/search":
            q = query.get("query", "").strip().lower()
            hits = [c for c in coins if q and (q in c["name"].lower() or q == c["symbol"].lower())]
            body = markup.search_form("/search", "query", q, "Coin name or symbol")
            body += (f"<p>{len(hits)} result(s) for “{markup.esc(q)}”.</p>" + self._listing(hits, "/search", query)
                     if q else "<p>Type a coin's name or symbol.</p>")
            return self.page("Search", body, t)
        if path == "/learn":
            return self.page("Learn", "<p>Guides: What is market cap? · How is the 24h change computed? It is "
                             "the change from the price 24 hours ago, shown on each coin's page.</p>", t)
        if path.startswith("/coins/"):
            rest = path[len("/coins/"):].strip("/").lower()
            cid, _, sub = rest.partition("/")
            c = next((c for c in coins if c["id"] == cid or c["symbol"].lower() == cid), None)
            if c is None:
                return self.not_found(path, t)
            if sub == "history":
                return self._history(world, t, c, query)
            if sub:
                return self.not_found(path, t)
            rows = [("Price", "price_usd", f"${c['price_usd']}"), ("Price 24h ago", "price_24h_ago_usd",
                                                                     f"${c['price_24h_ago_usd']}"),
                    ("24h change", "change_24h_pct", f"{c['change_24h_pct']}%"),
                    ("7d change", "change_7d_pct", f"{c['change_7d_pct']}%"),
                    ("Market cap", "market_cap_usd", f"${c['market_cap_usd']:,}"),
                    ("24h trading volume", "volume_24h_usd", f"${c['volume_24h_usd']:,}"),
                    ("Circulating supply", "circulating_supply", f"{c['circulating_supply']:,} {c['symbol']}"),
                    ("Market cap rank", "rank", f"#{c['rank']}")]
            stats = "".join(f"<tr><th>{label}</th>{markup.val(name, c[name], text)}</tr>" for label, name, text in rows)
            body = (markup.rec("crypto/coins", c["id"], "section", "coin") + markup.val("name", c["name"], tag="h2")
                    + markup.val("symbol", c["symbol"], tag="span", cls="sym")
                    + f'<table class="stats">{stats}</table></section>'
                    + "<p>" + markup.link(self.history_path("coins", c["id"], int(t)), "Historical data")
                    + " (hourly prices, by day)</p>")
            return self.page(f"{c['name']} ({c['symbol']}) price", body, t)
        return self.not_found(path, t)

    def _history(self, world: WorldView, t: float, coin: dict, query: dict[str, str]) -> Response:
        day = markup.parse_day(query.get("date", markup.day_iso(t)))
        if day is None:
            return self.page("Historical data", "<p>Give the day as date=YYYY-MM-DD.</p>", t, status=400)
        rows = []
        for at in self.history_times("coins", day, t):
            r = next(x for x in world.records(self.key, at)["coins"] if x["id"] == coin["id"])
            rows.append(markup.rec(f"crypto/coins@{at}", coin["id"]) + f"<td>{markup.utc(at):%Y-%m-%d %H:%M}</td>"
                        + markup.val("name", r["name"], r["symbol"])
                        + markup.val("price_usd", r["price_usd"], f"${r['price_usd']}")
                        + markup.val("market_cap_usd", r["market_cap_usd"], f"${r['market_cap_usd']:,}")
                        + markup.val("volume_24h_usd", r["volume_24h_usd"], f"${r['volume_24h_usd']:,}") + "</tr>")
        prev_day, next_day = markup.day_iso(day - DAY), markup.day_iso(day + DAY)
        base = f"/coins/{coin['id']}/history"
        body = (f"<p>Hourly {markup.esc(coin['name'])} prices on {markup.day_text(day)} (UTC).</p>"
                + (markup.record_table(["Time (UTC)", "Coin", "Price", "Market Cap", "Volume"], rows, "history") if rows
                   else "<p>No data for this day yet.</p>")
                + f"<p>{markup.link(f'{base}?date={prev_day}', '« previous day')} · "
                  f"{markup.link(f'{base}?date={next_day}', 'next day »')}</p>")
        return self.page(f"{coin['name']} ({coin['symbol']}) historical data", body, t)
