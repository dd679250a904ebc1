"""``coingecko.test``: crypto prices, modelled on CoinGecko (a ranked market table and coin pages)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from termgym.tasks.liveweb.noise import DAY, sig, wander
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site
from termgym.tasks.liveweb.sites.naming import slug, symbol_for, unique_words

if TYPE_CHECKING:
    from termgym.tasks.liveweb.world import World

N_COINS = 50
PER_PAGE = 25
YEAR = 365 * DAY

COINS = CollectionSpec(
    site="crypto", name="coins", noun="coin", plural="coins", key_field="id", name_field="name",
    alias_fields=("name", "symbol", "id"), api_path="/api/coins", mention="{name} ({symbol})",
    change_field="change_24h_pct", price_field="price_usd",
    fields={
        "price_usd": FieldSpec("price_usd", "price in USD", "money", "USD", tol_rel=0.01, sig_digits=6),
        "market_cap_usd": FieldSpec("market_cap_usd", "market capitalisation in USD", "money", "USD", tol_rel=0.01,
                                     decimals=0),
        "volume_24h_usd": FieldSpec("volume_24h_usd", "24-hour trading volume in USD", "money", "USD", tol_rel=0.02,
                                     decimals=0),
        "change_24h_pct": FieldSpec("change_24h_pct", "24-hour price change in percent", "pct", "%", 0.0, 0.3,
                                     decimals=2),
        "change_7d_pct": FieldSpec("change_7d_pct", "7-day price change in percent", "pct", "%", 0.0, 0.3,
                                    decimals=2),
        "circulating_supply": FieldSpec("circulating_supply", "circulating supply", "float", "coins", 0.01,
                                         decimals=0),
        "rank": FieldSpec("rank", "market-cap rank", "int", "", 0.0, 0.0, rankable=False),
    },
)


def tao_usd(world: World, t: float) -> float:
    """TAO's USD price: the crypto site lists it and the subnet explorer quotes it."""
    coins = world.static("crypto")
    tao = next(c for c in coins if c["symbol"] == "TAO")
    return _price(tao, t)


def _price(coin: dict, t: float) -> float:
    return sig(coin["base"] * math.exp(wander(coin["key"], t, coin["vol"])))


class CryptoSite(Site, key="crypto", host="coingecko.test", title="CoinGecko (simulated)",
                 live_host="api.coingecko.com"):
    collections = {"coins": COINS}

    def generate(self, world: World) -> Any:
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

    def records(self, world: World, static: Any, t: int) -> dict[str, list[dict]]:
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
            })
        out.sort(key=lambda r: -r["market_cap_usd"])
        for i, r in enumerate(out, 1):
            r["rank"] = i
        return {"coins": out}

    NAV = [("/", "Cryptocurrencies")]

    def html(self, world: World, t: float, path: str, query: dict[str, str]) -> Response:
        if path in ("/", "/index.html"):
            coins = world.records(self.key, self.list_time(t))["coins"]
            shown, n, pages = markup.paginate(coins, query, PER_PAGE)
            rows = [[str(c["rank"]), markup.link(f"/coins/{c['id']}", c["name"]), markup.esc(c["symbol"]),
                     "$" + markup.rounded_price(c["price_usd"]), f"{c['change_24h_pct']:+.1f}%",
                     f"{c['change_7d_pct']:+.1f}%", markup.compact(c["market_cap_usd"], "$"),
                     markup.compact(c["volume_24h_usd"], "$")] for c in shown]
            body = ("<p>Prices by market capitalisation. List prices are rounded and refreshed every five "
                    "minutes; open a coin for live figures.</p>"
                    + markup.table(["#", "Coin", "Symbol", "Price", "24h", "7d", "Market cap", "24h volume"], rows)
                    + markup.pager("/", n, pages))
            return self.page("Cryptocurrency prices by market cap", body)
        if path.startswith("/coins/"):
            cid = path[len("/coins/"):].strip("/").lower()
            c = self.find(world, t, "coins", lambda c: c["id"] == cid or c["symbol"].lower() == cid)
            if c is not None:
                body = markup.dl([("Name", c["name"]), ("Symbol", c["symbol"]), ("Market-cap rank", c["rank"]),
                                  ("Price (USD)", c["price_usd"]), ("24h change (%)", c["change_24h_pct"]),
                                  ("7d change (%)", c["change_7d_pct"]), ("Market cap (USD)", c["market_cap_usd"]),
                                  ("24h volume (USD)", c["volume_24h_usd"]),
                                  ("Circulating supply", c["circulating_supply"])])
                return self.page(f"{c['name']} ({c['symbol']}) price", body)
        return self.not_found(path)
