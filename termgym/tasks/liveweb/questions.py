"""Question templates: turning a world (or a live snapshot) into 2–4 sub-questions.

Each template looks at the records of one collection (or, for the cross-site ones, several) at a
reference time, picks subjects and thresholds with a seeded RNG, and returns a
:class:`Question`: the text the agent reads, a spec :func:`~termgym.tasks.liveweb.answers.compute`
evaluates against the data at grading time, the answer type and its tolerance. Thresholds are put
in gaps between current values so that questions are neither trivial nor decided by noise.

Templates (``TEMPLATES``): ``lookup``, ``compare``, ``rank``, ``top3``, ``price_change``,
``abs_change``, ``threshold``, ``multi_condition``, ``delta``, ``range_count``, ``percentage``,
``share``; across sites: ``cross_value``, ``cross_compare``, ``cross_ratio``, ``cross_change``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from termgym.tasks.liveweb.noise import HOUR
from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec

#: Answer types and what the agent must give: a number, a whole number, a name, a set of names
#: (any order) or a list of names (order matters).
ANSWER_TYPES = ("number", "integer", "name", "names_set", "names_list")


@dataclass
class Question:
    """One sub-question of a task."""

    qid: str
    template: str
    text: str
    spec: dict[str, Any]
    answer_type: str
    tol_rel: float = 0.0
    tol_abs: float = 0.0
    #: ``"display"``: the grader derives number tolerances from how the site shows the inputs
    #: (offline worlds); ``"declared"``: ``tol_rel``/``tol_abs`` are used (live sites).
    tolerance: str = "display"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Question:
        return cls(**data)


class Skip(Exception):
    """This template cannot make a sensible question from this data (try another)."""


# -- data access used by templates ----------------------------------------------------------------

Data = Callable[[str], list[dict]]  # "site/collection" -> records at the reference time


@dataclass
class Ctx:
    rng: random.Random
    data: Data
    t_ref: float


def subjects(ctx: Ctx, spec: CollectionSpec) -> list[dict]:
    """Records a question may name: ones that will still be listed for the next day or so."""
    records = ctx.data(spec.src)
    if spec.src == "news/stories":
        records = [r for r in records if ctx.t_ref - 40 * HOUR <= r["posted"] <= ctx.t_ref - HOUR]
    if len(records) < 5:
        raise Skip(f"too few {spec.plural} to ask about")
    return list(records)


def population(ctx: Ctx, spec: CollectionSpec) -> tuple[list[dict], list[dict], str]:
    """(records, scope conditions, words) for counting questions over a collection."""
    records = ctx.data(spec.src)
    if spec.src == "news/stories":
        scope = [{"field": "rank", "op": "<=", "value": 30}]
        return [r for r in records if r["rank"] <= 30], scope, "on the front page (the top 30)"
    return list(records), [], f"listed on {SITES[spec.site].host}"


def numeric_fields(spec: CollectionSpec, *, ratio: bool = False) -> list[FieldSpec]:
    out = [f for f in spec.fields.values() if f.rankable]
    return [f for f in out if f.kind != "pct"] if ratio else out


def nice(x: float, lo: float, hi: float) -> float:
    """A round number strictly between ``lo`` and ``hi`` (as round as the gap allows), near ``x``."""
    if lo >= hi:
        raise Skip("no gap")
    span = hi - lo
    for digits in range(-int(math.floor(math.log10(span))) - 1, 12):
        cand = round(x, digits)
        if lo < cand < hi:
            return int(cand) if digits <= 0 else cand
    raise Skip("no representable threshold")


def gap_threshold(values: list[float], rng: random.Random, q_lo: float, q_hi: float) -> float:
    """A threshold in the widest gap between sorted ``values`` whose position lies in [q_lo, q_hi]."""
    v = sorted(values)
    n = len(v)
    if n < 3:
        raise Skip("too few values")
    lo_i, hi_i = max(0, int(n * q_lo)), min(n - 2, max(int(n * q_hi), int(n * q_lo)))
    candidates = [(v[i + 1] - v[i]) / (abs(v[i]) + abs(v[i + 1]) + 1e-12) for i in range(lo_i, hi_i + 1)]
    if not candidates:
        raise Skip("no gap")
    best = max(range(len(candidates)), key=lambda j: (candidates[j], rng.random()))
    i = lo_i + best
    return nice((v[i] + v[i + 1]) / 2, v[i], v[i + 1])


def fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.10g}"


def ordinal(k: int) -> str:
    return {1: "highest", 2: "second-highest", 3: "third-highest", 4: "fourth-highest", 5: "fifth-highest"}[k]


def _number_question(f: FieldSpec, text: str, spec: dict, template: str) -> Question:
    kind = "integer" if f.exact else "number"
    return Question("", template, text, spec, kind, f.tol_rel, f.tol_abs)


def _unit(f: FieldSpec) -> str:
    """A hint on the unit to answer in, unless the label already says it."""
    if not f.unit or f.unit in f.label or (f.kind == "pct" and "percent" in f.label):
        return ""
    return " (in percent)" if f.unit == "%" else f" (in {f.unit})"


# -- single-site templates -------------------------------------------------------------------------


def t_lookup(ctx: Ctx, spec: CollectionSpec) -> Question:
    r = ctx.rng.choice(subjects(ctx, spec))
    f = ctx.rng.choice([f for f in spec.fields.values() if f.name != "rank" or spec.src == "crypto/coins"])
    host = SITES[spec.site].host
    text = f"What is the {f.label} of {spec.describe(r)} on {host}?{_unit(f)}"
    return _number_question(f, text, {"kind": "value", "src": spec.src, "key": r[spec.key_field], "field": f.name},
                            "lookup")


def t_compare(ctx: Ctx, spec: CollectionSpec) -> Question:
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(numeric_fields(spec))
    if a[f.name] == b[f.name]:
        raise Skip("tie")
    mode = ctx.rng.choice(("max", "min"))
    word = "higher" if mode == "max" else "lower"
    host = SITES[spec.site].host
    text = (f"On {host}, which has the {word} {f.label}: {spec.describe(a)} or {spec.describe(b)}? "
            f"Answer with its name.")
    return Question("", "compare", text, {"kind": "pick", "src": spec.src, "keys": [a[spec.key_field], b[spec.key_field]],
                                          "field": f.name, "mode": mode}, "name")


def t_rank(ctx: Ctx, spec: CollectionSpec) -> Question:
    k = ctx.rng.randint(1, 5)
    host = SITES[spec.site].host
    if spec.src == "news/stories":
        text = f"Which story is at position {k} of the {host} front page? Answer with its title."
        return Question("", "rank", text, {"kind": "nth", "src": spec.src, "field": "rank", "order": "asc", "k": k},
                        "name")
    records, scope, words = population(ctx, spec)
    f = ctx.rng.choice(numeric_fields(spec))
    _no_ties(records, f.name, k + 1)
    text = f"Of the {spec.plural} {words}, which has the {ordinal(k)} {f.label}? Answer with its name."
    return Question("", "rank", text, {"kind": "nth", "src": spec.src, "field": f.name, "order": "desc", "k": k,
                                       "scope": scope}, "name")


def t_top3(ctx: Ctx, spec: CollectionSpec) -> Question:
    host = SITES[spec.site].host
    if spec.src == "news/stories":
        text = f"List the titles of the top three stories on the {host} front page, in order."
        spec_q = {"kind": "top", "src": spec.src, "field": "rank", "order": "asc", "n": 3}
    else:
        records, scope, words = population(ctx, spec)
        f = ctx.rng.choice(numeric_fields(spec))
        _no_ties(records, f.name, 4)
        text = f"List the three {spec.plural} {words} with the highest {f.label}, highest first (names)."
        spec_q = {"kind": "top", "src": spec.src, "field": f.name, "order": "desc", "n": 3, "scope": scope}
    return Question("", "top3", text, spec_q, "names_list")


def _no_ties(records: list[dict], field: str, n: int) -> None:
    """Skip rankings whose top ``n`` values are not all distinct (the answer would be arbitrary)."""
    top = sorted((r[field] for r in records), reverse=True)[:n]
    if len(set(top)) < len(top):
        raise Skip("ties in the ranking")


def _period(spec: CollectionSpec) -> str:
    return "since the previous close" if spec.src == "stocks/quotes" else "over the last 24 hours"


def t_price_change(ctx: Ctx, spec: CollectionSpec) -> Question:
    if not spec.change_field:
        raise Skip("no change field")
    r = ctx.rng.choice(subjects(ctx, spec))
    f = spec.fields[spec.change_field]
    text = (f"By what percentage has the price of {spec.describe(r)} changed {_period(spec)} on "
            f"{SITES[spec.site].host}? (Percent, negative for a fall.)")
    return _number_question(f, text, {"kind": "value", "src": spec.src, "key": r[spec.key_field], "field": f.name},
                            "price_change")


def t_abs_change(ctx: Ctx, spec: CollectionSpec) -> Question:
    if not (spec.change_field and spec.price_field):
        raise Skip("no change field")
    r = ctx.rng.choice(subjects(ctx, spec))
    price = spec.fields[spec.price_field]
    text = (f"By how much has the price of {spec.describe(r)} changed {_period(spec)} on {SITES[spec.site].host}? "
            f"Answer in {price.unit}, negative for a fall.")
    q = {"kind": "abs_change", "src": spec.src, "key": r[spec.key_field], "price_field": spec.price_field,
         "change_field": spec.change_field}
    # The percentage is shown to 0.01 and moves; allow ~0.4% of the price either way.
    return Question("", "abs_change", text, q, "number", 0.02, 0.004 * abs(r[spec.price_field]))


def t_threshold(ctx: Ctx, spec: CollectionSpec) -> Question:
    chosen = ctx.rng.sample(subjects(ctx, spec), 5)
    f = ctx.rng.choice(numeric_fields(spec))
    x = gap_threshold([r[f.name] for r in chosen], ctx.rng, 0.2, 0.6)
    names = "; ".join(spec.describe(r) for r in chosen)
    text = (f"On {SITES[spec.site].host}, which of these {spec.plural} have a {f.label} above {fmt(x)}: {names}? "
            "Answer with a list of names (empty if none).")
    q = {"kind": "members", "src": spec.src, "keys": [r[spec.key_field] for r in chosen],
         "where": [{"field": f.name, "op": ">", "value": x}]}
    return Question("", "threshold", text, q, "names_set")


def t_multi_condition(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    fields = numeric_fields(spec)
    if len(fields) < 2:
        raise Skip("needs two fields")
    f1, f2 = ctx.rng.sample(fields, 2)
    a = gap_threshold([r[f1.name] for r in records], ctx.rng, 0.25, 0.6)
    b = gap_threshold([r[f2.name] for r in records], ctx.rng, 0.4, 0.8)
    where = [{"field": f1.name, "op": ">", "value": a}, {"field": f2.name, "op": "<", "value": b}]
    text = f"How many {spec.plural} {words} have a {f1.label} above {fmt(a)} and a {f2.label} below {fmt(b)}?"
    return Question("", "multi_condition", text, {"kind": "count", "src": spec.src, "where": where, "scope": scope},
                    "integer")


def t_delta(ctx: Ctx, spec: CollectionSpec) -> Question:
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(numeric_fields(spec))
    text = (f"On {SITES[spec.site].host}, what is the {f.label} of {spec.describe(a)} minus that of "
            f"{spec.describe(b)}?{_unit(f)}")
    tol = 2 * f.tol_abs + f.tol_rel * (abs(a[f.name]) + abs(b[f.name]))
    q = {"kind": "delta", "src": spec.src, "keys": [a[spec.key_field], b[spec.key_field]], "field": f.name}
    kind = "integer" if f.exact else "number"
    return Question("", "delta", text, q, kind, 0.0, tol)


def t_range_count(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    f = ctx.rng.choice(numeric_fields(spec))
    values = [r[f.name] for r in records]
    lo = gap_threshold(values, ctx.rng, 0.1, 0.4)
    hi = gap_threshold(values, ctx.rng, 0.55, 0.9)
    if not lo < hi:
        raise Skip("empty range")
    text = f"How many {spec.plural} {words} have a {f.label} between {fmt(lo)} and {fmt(hi)}?"
    q = {"kind": "count", "src": spec.src, "where": [{"field": f.name, "op": "between", "lo": lo, "hi": hi}],
         "scope": scope}
    return Question("", "range_count", text, q, "integer")


def t_percentage(ctx: Ctx, spec: CollectionSpec) -> Question:
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(numeric_fields(spec, ratio=True))
    if not b[f.name]:
        raise Skip("division by zero")
    text = (f"On {SITES[spec.site].host}, what is the {f.label} of {spec.describe(a)} as a percentage of that of "
            f"{spec.describe(b)}? (Percent.)")
    tol_rel = 2 * f.tol_rel + 0.003 + (2 * f.tol_abs / abs(b[f.name]) if f.tol_abs else 0.0)
    q = {"kind": "ratio_pct", "a": {"src": spec.src, "key": a[spec.key_field], "field": f.name},
         "b": {"src": spec.src, "key": b[spec.key_field], "field": f.name}}
    return Question("", "percentage", text, q, "number", tol_rel, 0.0)


def t_share(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    f = ctx.rng.choice(numeric_fields(spec))
    x = gap_threshold([r[f.name] for r in records], ctx.rng, 0.3, 0.7)
    text = f"What percentage of the {spec.plural} {words} have a {f.label} above {fmt(x)}? (Percent.)"
    q = {"kind": "share_pct", "src": spec.src, "where": [{"field": f.name, "op": ">", "value": x}], "scope": scope}
    return Question("", "share", text, q, "number", 0.0, 0.6)


# -- cross-site templates -----------------------------------------------------------------------------


def _coin_near_stocks(ctx: Ctx) -> tuple[dict, dict]:
    coins = [c for c in ctx.data("crypto/coins") if 3 <= c["price_usd"] <= 1500]
    stocks = ctx.data("stocks/quotes")
    if not coins:
        raise Skip("no comparable coin")
    coin = ctx.rng.choice(coins)
    stock = min(ctx.rng.sample(stocks, 8), key=lambda s: abs(math.log(s["price"] / coin["price_usd"])))
    return coin, stock


def t_cross_value(ctx: Ctx) -> Question:
    subnets = collection_spec("subnets/subnets")
    s = ctx.rng.choice(subjects(ctx, subnets))
    text = (f"What is the market cap in USD of {subnets.describe(s)}? Take its market cap in TAO from "
            "taostats.test and TAO's USD price from coingecko.test.")
    q = {"kind": "product", "a": {"src": "subnets/subnets", "key": s["netuid"], "field": "market_cap_tao"},
         "b": {"src": "crypto/coins", "key": "bittensor", "field": "price_usd"}}
    return Question("", "cross_value", text, q, "number", 0.02, 0.0)


def t_cross_compare(ctx: Ctx) -> Question:
    coin, stock = _coin_near_stocks(ctx)
    text = (f"Which costs more right now: one share of {stock['name']} ({stock['symbol']}) on stooq.test, or one "
            f"{coin['name']} ({coin['symbol']}) on coingecko.test? Answer with its name.")
    q = {"kind": "pick_refs", "mode": "max",
         "refs": [{"src": "stocks/quotes", "key": stock["symbol"], "field": "price"},
                  {"src": "crypto/coins", "key": coin["id"], "field": "price_usd"}]}
    return Question("", "cross_compare", text, q, "name")


def t_cross_ratio(ctx: Ctx) -> Question:
    coin, stock = _coin_near_stocks(ctx)
    text = (f"At current prices, how many shares of {stock['name']} ({stock['symbol']}, on stooq.test) is one "
            f"{coin['name']} ({coin['symbol']}, on coingecko.test) worth? (A decimal number.)")
    q = {"kind": "ratio", "a": {"src": "crypto/coins", "key": coin["id"], "field": "price_usd"},
         "b": {"src": "stocks/quotes", "key": stock["symbol"], "field": "price"}}
    return Question("", "cross_ratio", text, q, "number", 0.02, 0.0)


def t_cross_change(ctx: Ctx) -> Question:
    coin, stock = _coin_near_stocks(ctx)
    if abs(coin["change_24h_pct"] - stock["change_pct"]) < 0.5:
        raise Skip("too close to call")
    text = (f"Which rose more in percentage terms: {stock['name']} ({stock['symbol']}) since its previous close on "
            f"stooq.test, or {coin['name']} ({coin['symbol']}) over the last 24 hours on coingecko.test? "
            "(A fall counts as a negative rise.) Answer with its name.")
    q = {"kind": "pick_refs", "mode": "max",
         "refs": [{"src": "stocks/quotes", "key": stock["symbol"], "field": "change_pct"},
                  {"src": "crypto/coins", "key": coin["id"], "field": "change_24h_pct"}]}
    return Question("", "cross_change", text, q, "name")


SiteTemplate = Callable[[Ctx, CollectionSpec], Question]
CrossTemplate = Callable[[Ctx], Question]

TEMPLATES: dict[str, SiteTemplate] = {
    "lookup": t_lookup, "compare": t_compare, "rank": t_rank, "top3": t_top3, "price_change": t_price_change,
    "abs_change": t_abs_change, "threshold": t_threshold, "multi_condition": t_multi_condition, "delta": t_delta,
    "range_count": t_range_count, "percentage": t_percentage, "share": t_share,
}
CROSS_TEMPLATES: dict[str, CrossTemplate] = {
    "cross_value": t_cross_value, "cross_compare": t_cross_compare, "cross_ratio": t_cross_ratio,
    "cross_change": t_cross_change,
}
#: The collections single-site questions are asked about, per site.
QUESTION_COLLECTIONS = {"subnets": "subnets/subnets", "crypto": "crypto/coins", "stocks": "stocks/quotes",
                        "news": "news/stories", "books": "books/books"}
#: Task families: one per site, plus "cross" (cross-site questions mixed with single-site ones).
FAMILIES = (*QUESTION_COLLECTIONS, "cross")


def make_questions(family: str, rng: random.Random, data: Data, t_ref: float, n: int | None = None) -> list[Question]:
    """Draw ``n`` (default 2–4) questions of ``family`` using distinct templates."""
    if family not in FAMILIES:
        raise KeyError(f"unknown LIVEWEB task family {family!r}; families: {', '.join(FAMILIES)}")
    n = n or rng.randint(2, 4)
    ctx = Ctx(rng, data, t_ref)
    if family == "cross":
        pool: list[tuple[str, Callable[[], Question]]] = [
            (name, (lambda fn=fn: fn(ctx))) for name, fn in CROSS_TEMPLATES.items()]
        rng.shuffle(pool)
        pool = pool[: rng.randint(1, min(2, n))]
        others = [(name, site) for name in TEMPLATES for site in QUESTION_COLLECTIONS]
        rng.shuffle(others)
        pool += [(name, (lambda fn=TEMPLATES[name], src=QUESTION_COLLECTIONS[site]: fn(ctx, collection_spec(src))))
                 for name, site in others]
    else:
        spec = collection_spec(QUESTION_COLLECTIONS[family])
        names = list(TEMPLATES)
        rng.shuffle(names)
        pool = [(name, (lambda fn=TEMPLATES[name]: fn(ctx, spec))) for name in names]
    questions: list[Question] = []
    used: set[str] = set()
    for name, make in pool:
        if len(questions) == n:
            break
        if name in used:
            continue
        try:
            q = make()
        except Skip:
            continue
        used.add(name)
        q.qid = f"answer{len(questions) + 1}"
        questions.append(q)
    if len(questions) < 2:
        raise RuntimeError(f"could not make two questions for family {family!r}")  # never seen; a loud bug
    return questions
