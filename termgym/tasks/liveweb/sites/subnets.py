"""``taostats.test``: a blockchain subnet explorer modelled on taostats (Bittensor subnets).

Subnets are registered over time (a new one every two and a half days), each with an alpha token
whose price in TAO wanders; emission shares follow prices; a block is produced every 12 seconds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from termgym.tasks.liveweb.noise import DAY, EPOCH, sig, value_noise, wander
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site
from termgym.tasks.liveweb.sites.crypto import tao_usd
from termgym.tasks.liveweb.sites.naming import unique_words

if TYPE_CHECKING:
    from termgym.tasks.liveweb.world import World

PER_PAGE = 16
INITIAL_SUBNETS = 40
MAX_SUBNETS = 128
REGISTRATION_EVERY = 2.5 * DAY
BLOCK_SECONDS = 12
GENESIS = EPOCH - 900 * DAY

SUBNETS = CollectionSpec(
    site="subnets", name="subnets", noun="subnet", plural="subnets", key_field="netuid", name_field="name",
    alias_fields=("name", "netuid", "label"), api_path="/api/subnets", mention="SN{netuid} ({name})",
    change_field="change_24h_pct", price_field="price_tao",
    fields={
        "price_tao": FieldSpec("price_tao", "alpha price in TAO", "money", "TAO", tol_rel=0.01, sig_digits=6),
        "market_cap_tao": FieldSpec("market_cap_tao", "market cap in TAO", "money", "TAO", tol_rel=0.01,
                                    decimals=2),
        "emission_pct": FieldSpec("emission_pct", "emission share in percent", "pct", "%", 0.01, 0.02,
                                  decimals=3),
        "neurons": FieldSpec("neurons", "number of registered neurons", "int", "", 0.0, 0.0),
        "change_24h_pct": FieldSpec("change_24h_pct", "24-hour alpha price change in percent", "pct", "%", 0.0, 0.3,
                                    decimals=2),
    },
)
NETWORK = CollectionSpec(
    site="subnets", name="network", noun="network", plural="network", key_field="chain", name_field="chain",
    alias_fields=("chain",), api_path="/api/network",
    fields={"block": FieldSpec("block", "current block number", "int", "", 0.0, 30.0, rankable=False),
            "tao_price_usd": FieldSpec("tao_price_usd", "TAO price in USD", "money", "USD", 0.01, rankable=False,
                                   sig_digits=6)},
)


class SubnetsSite(Site, key="subnets", host="taostats.test", title="taostats (simulated)",
                  live_host="api.taostats.io"):
    collections = {"subnets": SUBNETS, "network": NETWORK}

    def generate(self, world: World) -> Any:
        rng = self.rng(world, "subnets")
        names = unique_words(rng, MAX_SUBNETS)
        first = world.base_time - 30 * DAY
        subnets = []
        for i, name in enumerate(names):
            netuid = i + 1
            registered = first - (INITIAL_SUBNETS - netuid) * 9 * DAY if netuid <= INITIAL_SUBNETS \
                else first + (netuid - INITIAL_SUBNETS) * REGISTRATION_EVERY
            subnets.append({"netuid": netuid, "name": name, "registered": int(registered),
                            "base": 10 ** rng.uniform(-2.6, -0.7), "vol": rng.uniform(0.15, 0.35),
                            "supply": rng.uniform(1e6, 8e6), "growth": rng.uniform(5e3, 4e4),
                            "key": world.noise_key("subnet", netuid)})
        return subnets

    def records(self, world: World, static: Any, t: int) -> dict[str, list[dict]]:
        live = [s for s in static if s["registered"] <= t]
        prices = {s["netuid"]: _price(s, t) for s in live}
        weights = {n: p ** 0.8 for n, p in prices.items()}
        total = sum(weights.values())
        out = []
        for s in live:
            price = prices[s["netuid"]]
            supply = s["supply"] + s["growth"] * (t - s["registered"]) / DAY
            neurons = 64 + int(192 * (0.5 + 0.5 * value_noise(s["key"] + 7, t / (0.5 * DAY))))
            out.append({
                "netuid": s["netuid"], "name": s["name"], "label": f"SN{s['netuid']}", "price_tao": price,
                "market_cap_tao": round(price * supply, 2), "emission_pct": round(100 * weights[s["netuid"]] / total, 3),
                "neurons": min(neurons, 256), "change_24h_pct": round(100 * (price / _price(s, t - DAY) - 1), 2),
                "registered": s["registered"],
            })
        by_cap = sorted(out, key=lambda r: -r["market_cap_tao"])
        for i, r in enumerate(by_cap, 1):
            r["rank"] = i
        network = [{"chain": "finney-sim", "block": (t - GENESIS) // BLOCK_SECONDS, "subnets": len(out),
                    "tao_price_usd": tao_usd(world, t)}]
        return {"subnets": out, "network": network}

    NAV = [("/", "Home"), ("/subnets", "Subnets")]

    def html(self, world: World, t: float, path: str, query: dict[str, str]) -> Response:
        if path in ("/", "/index.html"):
            net = world.records(self.key, t)["network"][0]
            body = markup.dl([("Block", net["block"]), ("Subnets", net["subnets"]),
                              ("TAO price (USD)", net["tao_price_usd"])])
            return self.page("Network overview", body + f"<p>{markup.link('/subnets', 'Browse subnets')}</p>")
        if path in ("/subnets", "/subnets/"):
            subnets = sorted(world.records(self.key, self.list_time(t))["subnets"], key=lambda r: r["rank"])
            shown, n, pages = markup.paginate(subnets, query, PER_PAGE)
            rows = [[str(s["rank"]), markup.link(f"/subnets/{s['netuid']}", f"SN{s['netuid']}"), markup.esc(s["name"]),
                     f"{s['price_tao']:.4f} τ", f"{s['change_24h_pct']:+.1f}%", markup.compact(s["market_cap_tao"]) + " τ",
                     f"{s['emission_pct']:.2f}%", str(s["neurons"])] for s in shown]
            body = ("<p>Subnets ranked by market cap (refreshed every five minutes; open a subnet for live "
                    "figures).</p>" + markup.table(["#", "Netuid", "Name", "Price", "24h", "Market cap", "Emission",
                                                    "Neurons"], rows) + markup.pager("/subnets", n, pages))
            return self.page("Subnets", body)
        if path.startswith("/subnets/"):
            ref = path.rsplit("/", 1)[-1].lower().removeprefix("sn")
            s = self.find(world, t, "subnets", lambda s: str(s["netuid"]) == ref)
            if s is not None:
                body = markup.dl([("Netuid", s["netuid"]), ("Name", s["name"]), ("Rank by market cap", s["rank"]),
                                  ("Alpha price (TAO)", s["price_tao"]), ("24h change (%)", s["change_24h_pct"]),
                                  ("Market cap (TAO)", s["market_cap_tao"]), ("Emission (%)", s["emission_pct"]),
                                  ("Registered neurons", s["neurons"]), ("Registered at (unix)", s["registered"])])
                return self.page(f"SN{s['netuid']}: {s['name']}", body)
        return self.not_found(path)


def _price(s: dict, t: float) -> float:
    return sig(s["base"] * math.exp(wander(s["key"], t, s["vol"])), 6)
