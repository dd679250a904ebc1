"""``taostats.test``: a blockchain subnet explorer modelled on taostats (Bittensor subnets).

Subnets are registered over time (a new one every two and a half days), each with an alpha token
whose price in TAO wanders; emission shares follow prices; a block is produced every 12 seconds.
"""

from __future__ import annotations

import math
from typing import Any

from termgym.tasks.liveweb.noise import DAY, EPOCH, sig, value_noise, wander
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site, WorldView
from termgym.tasks.liveweb.sites.crypto import tao_usd
from termgym.tasks.liveweb.sites.naming import unique_words

PER_PAGE = 16
INITIAL_SUBNETS = 40
MAX_SUBNETS = 128
REGISTRATION_EVERY = 2.5 * DAY
BLOCK_SECONDS = 12
GENESIS = EPOCH - 900 * DAY

SUBNETS = CollectionSpec(
    site="subnets", name="subnets", noun="subnet", plural="subnets", key_field="netuid", name_field="name",
    alias_fields=("name", "netuid", "label"), api_path="/api/subnets", mention="SN{netuid} ({name})",
    change_field="change_24h_pct", price_field="price_tao", prev_field="price_24h_ago_tao",
    api_fields=("price_tao", "market_cap_tao"), history="hourly",
    fields={
        "price_tao": FieldSpec("price_tao", "alpha price in TAO", "money", "TAO", tol_rel=0.01, sig_digits=6,
                               history=True),
        "market_cap_tao": FieldSpec("market_cap_tao", "market cap in TAO", "money", "TAO", tol_rel=0.01,
                                    decimals=2, history=True),
        "emission_pct": FieldSpec("emission_pct", "emission share in percent", "pct", "%", 0.01, 0.02,
                                  decimals=3, history=True),
        "neurons": FieldSpec("neurons", "number of registered neurons", "int", "", 0.0, 0.0, history=True),
        "registered": FieldSpec("registered", "registration time (unix)", "int", "", 0.0, 0.0, rankable=False),
        "price_24h_ago_tao": FieldSpec("price_24h_ago_tao", "alpha price 24 hours ago in TAO", "money", "TAO",
                                       0.01, rankable=False, listed=False, sig_digits=6),
        "change_24h_pct": FieldSpec("change_24h_pct", "24-hour alpha price change in percent", "pct", "%", 0.0, 0.3,
                                    decimals=2),
    },
)
NETWORK = CollectionSpec(
    site="subnets", name="network", noun="network", plural="network", key_field="chain", name_field="chain",
    alias_fields=("chain",), api_path="/api/network",
    fields={"block": FieldSpec("block", "current block number", "int", "", 0.0, 30.0, rankable=False),
            "subnets": FieldSpec("subnets", "number of subnets", "int", "", 0.0, 0.0, rankable=False),
            "tao_price_usd": FieldSpec("tao_price_usd", "TAO price in USD", "money", "USD", 0.01, rankable=False,
                                   sig_digits=6)},
)


class SubnetsSite(Site, key="subnets", host="taostats.test", title="taostats (simulated)",
                  live_host="api.taostats.io"):
    collections = {"subnets": SUBNETS, "network": NETWORK}

    def generate(self, world: WorldView) -> Any:
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

    def records(self, world: WorldView, static: Any, t: int) -> dict[str, list[dict]]:
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
                "neurons": min(neurons, 256), "change_24h_pct": round(100 * (price / (p24 := _price(s, t - DAY)) - 1), 2),
                "price_24h_ago_tao": p24,
                "registered": s["registered"],
            })
        by_cap = sorted(out, key=lambda r: -r["market_cap_tao"])
        for i, r in enumerate(by_cap, 1):
            r["rank"] = i
        network = [{"chain": "finney-sim", "block": (t - GENESIS) // BLOCK_SECONDS, "subnets": len(out),
                    "tao_price_usd": tao_usd(world, t)}]
        return {"subnets": out, "network": network}

    NAV = [("/", "Dashboard"), ("/subnets", "Subnets"), ("/subnets?sort=registered&order=desc", "New subnets"),
           ("/validators", "Validators"), ("/docs", "Docs")]
    SKIN = markup.Skin(
        body_class="dark",
        head='<meta name="theme-color" content="#0b0f14"><style>.card{border-radius:8px}</style>',
        top=('<div class="layout"><div class="sidebar"><div class="brand">τ {title}</div><ul class="side">{nav}</ul>'
             '<div class="status">● Network live · {clock}</div></div>'),
        nav_item="<li>{link}</li>", nav_sep="",
        banner=('<div class="announce">dTAO is live: subnet tokens now trade against TAO. '
                '<a href="/docs">Read the docs</a></div>'),
        main_open='<div class="content">', main_close="</div></div>",
        heading='<div class="title"><h2>{text}</h2></div>',
        aside='<div class="promo card">Stake with a top validator — earn up to 18% APY. <a href="/validators">Compare</a></div>',
        footer=('<footer class="dark-foot">taostats (simulated) · Explorer · API status: '
                '<a href="/docs">docs</a> · <a href="/terms">Terms</a> · Built for the Bittensor community</footer>'),
    )
    PER_PAGE = 16
    _COLUMNS = [("#", "rank"), ("Netuid", "netuid"), ("Name", "name"), ("Price", "price_tao"), ("24h", "change_24h_pct"),
                ("Market cap", "market_cap_tao"), ("Emission", "emission_pct"), ("Neurons", "neurons"),
                ("Registered", "registered")]

    def detail_path(self, collection: str, key: object) -> str:
        return f"/subnets/{key}" if collection == "subnets" else "/"

    def history_path(self, collection: str, key: object, at: int) -> str:
        return f"/subnets/{key}/history?day={markup.day_iso(at)}"

    def list_path(self, collection: str, scope: list[dict], sort: str | None = None, order: str = "desc") -> str:
        if scope:
            raise ValueError(f"{self.host} lists have no filters, got {scope}")
        return "/subnets?per_page=100" + (f"&sort={sort}&order={order}" if sort else "")

    def _card(self, s: dict) -> str:
        return (markup.rec("subnets/subnets", s["netuid"]) + markup.val("rank", s["rank"])
                + markup.val("netuid", s["netuid"], markup.link(f"/subnets/{s['netuid']}", f"SN{s['netuid']}"), raw=True)
                + markup.val("name", s["name"])
                + markup.val("price_tao", s["price_tao"], f"{s['price_tao']:.4f} τ")
                + markup.val("change_24h_pct", s["change_24h_pct"], f"{s['change_24h_pct']:+.1f}%")
                + markup.val("market_cap_tao", s["market_cap_tao"], markup.compact(s["market_cap_tao"]) + " τ")
                + markup.val("emission_pct", s["emission_pct"], f"{s['emission_pct']:.2f}%")
                + markup.val("neurons", s["neurons"])
                + markup.val("registered", s["registered"], f"{markup.utc(s['registered']):%Y-%m-%d %H:%M}")
                + "</tr>")

    def html(self, world: WorldView, t: float, path: str, query: dict[str, str]) -> Response:
        data = world.records(self.key, t)
        if path in ("/", "/index.html"):
            net = data["network"][0]
            tao = markup.val("tao_price_usd", net["tao_price_usd"], f"${net['tao_price_usd']}", tag="b")
            body = (markup.rec("subnets/network", net["chain"], "div", "cards")
                    + f'<div class="card">Block {markup.val("block", net["block"], tag="b")}</div>'
                    f'<div class="card">Subnets {markup.val("subnets", net["subnets"], tag="b")}</div>'
                    f'<div class="card">TAO {tao}'
                    "</div></div><p>" + markup.link("/subnets", "Browse all subnets") + "</p>")
            return self.page("Network overview", body, t)
        if path in ("/validators", "/docs"):
            return self.page(path.strip("/").capitalize(), "<p>Coming soon. Subnet data: see Subnets.</p>", t)
        if path in ("/subnets", "/subnets/"):
            view = self.list_view(data["subnets"], SUBNETS, query, "rank", "asc")
            heads = [markup.sort_head(label, name, "/subnets", query, view) for label, name in self._COLUMNS]
            body = ("<p>All subnets, live. Click a heading to sort.</p>"
                    + markup.record_table(heads, [self._card(s) for s in view["shown"]], "subnets")
                    + markup.pager("/subnets", view["page"], view["pages"], query))
            return self.page("Subnets", body, t)
        if path.startswith("/subnets/"):
            rest = path[len("/subnets/"):].strip("/").lower()
            ref, _, sub = rest.partition("/")
            ref = ref.removeprefix("sn")
            s = next((x for x in data["subnets"] if str(x["netuid"]) == ref), None)
            if s is None:
                return self.not_found(path, t)
            if sub == "history":
                return self._history(world, t, s, query)
            if sub:
                return self.not_found(path, t)
            items = [("Alpha price", "price_tao", f"{s['price_tao']} τ"),
                     ("Price 24h ago", "price_24h_ago_tao", f"{s['price_24h_ago_tao']} τ"),
                     ("24h change", "change_24h_pct", f"{s['change_24h_pct']}%"),
                     ("Market cap", "market_cap_tao", f"{s['market_cap_tao']} τ"),
                     ("Emission", "emission_pct", f"{s['emission_pct']}%"), ("Neurons", "neurons", None),
                     ("Rank", "rank", None),
                     ("Registered", "registered", f"{markup.utc(s['registered']):%Y-%m-%d %H:%M} UTC")]
            cards = "".join(f'<div class="card"><span class="k">{label}</span>{markup.val(name, s[name], text, tag="span")}'
                            "</div>" for label, name, text in items)
            label = markup.val("netuid", s["netuid"], f"SN{s['netuid']}", tag="b")
            body = (markup.rec("subnets/subnets", s["netuid"], "div", "subnet")
                    + f'<p>{label} '
                    f'{markup.val("name", s["name"], tag="span")}</p>{cards}</div>'
                    + "<p>" + markup.link(self.history_path("subnets", s["netuid"], int(t)), "History (hourly)") + "</p>")
            return self.page(f"SN{s['netuid']} · {s['name']}", body, t)
        return self.not_found(path, t)

    def _history(self, world: WorldView, t: float, subnet: dict, query: dict[str, str]) -> Response:
        day = markup.parse_day(query.get("day", markup.day_iso(t)))
        if day is None:
            return self.page("History", "<p>Give the day as day=YYYY-MM-DD.</p>", t, status=400)
        rows = []
        for at in self.history_times("subnets", day, t):
            r = next((x for x in world.records(self.key, at)["subnets"] if x["netuid"] == subnet["netuid"]), None)
            if r is None:
                continue
            rows.append(markup.rec(f"subnets/subnets@{at}", subnet["netuid"]) + f"<td>{markup.utc(at):%H:%M}</td>"
                        + markup.val("name", r["name"])
                        + markup.val("price_tao", r["price_tao"]) + markup.val("market_cap_tao", r["market_cap_tao"])
                        + markup.val("emission_pct", r["emission_pct"]) + markup.val("neurons", r["neurons"]) + "</tr>")
        base = f"/subnets/{subnet['netuid']}/history"
        body = (f"<p>SN{subnet['netuid']} hourly on {markup.day_text(day)} (UTC).</p>"
                + (markup.record_table(["UTC", "Name", "Price (τ)", "Market cap (τ)", "Emission (%)", "Neurons"], rows, "subnets")
                   if rows else "<p>No data.</p>")
                + "<p>" + markup.link(f"{base}?day={markup.day_iso(day - DAY)}", "‹ prev") + " "
                + markup.link(f"{base}?day={markup.day_iso(day + DAY)}", "next ›") + "</p>")
        return self.page(f"SN{subnet['netuid']} history", body, t)


def _price(s: dict, t: float) -> float:
    return sig(s["base"] * math.exp(wander(s["key"], t, s["vol"])), 6)
