"""Question templates: turning a world (or a live snapshot) into 2–4 sub-questions.

Each template looks at the records of one collection (or, for the cross-site ones, several) at a
reference time — and, for history questions, at named moments before it — picks subjects and
thresholds with a seeded RNG, and returns a :class:`Question`: the text the agent reads, a spec
:func:`~termgym.tasks.liveweb.answers.compute` evaluates against the data at grading time, and the
answer type. Thresholds sit in gaps between current values (whole numbers for whole-number
fields, "at least 9" rather than "above 8.5"), and counting questions whose answer would be 0 or
everything are not asked, so a question is decided by the data, not by noise or construction.

The templates (``TEMPLATES``, which sites each applies to in ``TEMPLATE_SITES``) ask for what a
person browsing the sites would look up: a value on a record's page, a value at a past moment on
its history page, a change since a named moment, rankings and counts over a filtered and sorted
list, comparisons across several record pages, a hop from a ranking to a record's page, searches
by author, and (``CROSS_TEMPLATES``) combinations across two sites.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from termgym.tasks.liveweb.answers import _holds
from termgym.tasks.liveweb.noise import DAY, HOUR
from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec
from termgym.tasks.liveweb.sites.markup import day_text, moment_text

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

Data = Callable[[str], list[dict]]  # "site/collection[@T]" -> records at the reference time (or at T)


@dataclass
class Ctx:
    rng: random.Random
    data: Data
    t_ref: float
    #: History pages exist (the offline world); live sites only show the present.
    history: bool = True


def subjects(ctx: Ctx, spec: CollectionSpec) -> list[dict]:
    """Records a question may name: ones that will still be listed for the next day or so."""
    records = ctx.data(spec.src)
    if spec.src == "news/stories" and ctx.history:
        records = [r for r in records if ctx.t_ref - 40 * HOUR <= r["posted"] <= ctx.t_ref - HOUR]
    if len(records) < 5:
        raise Skip(f"too few {spec.plural} to ask about")
    return list(records)


def population(ctx: Ctx, spec: CollectionSpec) -> tuple[list[dict], list[dict], str]:
    """(records, scope conditions, words) for ranking and counting questions over a list a site shows."""
    records = ctx.data(spec.src)
    host = SITES[spec.site].host
    if spec.src == "news/stories":
        if not ctx.history:
            return [r for r in records if r["rank"] <= 30], [{"field": "rank", "op": "<=", "value": 30}], \
                f"on the {host} front page"
        day = int(ctx.t_ref // DAY) * DAY - ctx.rng.choice((1, 2)) * DAY
        scope = [{"field": "posted", "op": "between", "lo": day, "hi": day + DAY - 1}]
        return [r for r in records if day <= r["posted"] < day + DAY], scope, \
            f"posted on {host} on {day_text(day)} (UTC)"
    if spec.src == "books/books":
        genre = ctx.rng.choice(sorted({r["genre"] for r in records}))
        return [r for r in records if r["genre"] == genre], [{"field": "genre", "op": "==", "value": genre}], \
            f"in the {genre} section of {host}"
    if spec.src == "stocks/quotes" and ctx.rng.random() < 0.5:
        sector = ctx.rng.choice(sorted({r["sector"] for r in records}))
        chosen = [r for r in records if r["sector"] == sector]
        if len(chosen) >= 5:
            return chosen, [{"field": "sector", "op": "==", "value": sector}], f"in the {sector} sector on {host}"
    return list(records), [], f"listed on {host}"


def numeric_fields(spec: CollectionSpec, *, ratio: bool = False, listed: bool = False) -> list[FieldSpec]:
    """Fields worth comparing: rankable ones (``listed``: only those list pages show and sort by)."""
    out = [f for f in spec.fields.values() if f.rankable and (f.listed or not listed)]
    return [f for f in out if f.kind != "pct"] if ratio else out


def history_fields(spec: CollectionSpec) -> list[FieldSpec]:
    return [f for f in spec.fields.values() if f.history and f.rankable]


def article(label: str) -> str:
    """``a`` or ``an`` before ``label``."""
    return "an" if label[:1].lower() in "aeio" else "a"


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


def gap_threshold(values: list[float], rng: random.Random, q_lo: float, q_hi: float, exact: bool = False) -> float:
    """A threshold in the widest gap between sorted ``values`` whose position lies in [q_lo, q_hi].

    For whole-number fields (``exact``) it is the whole number just above the gap, to be used as
    "at least x" (``>=``) or "below x" (``<``): never ``9.5`` copies.
    """
    v = sorted(values)
    n = len(v)
    if n < 3:
        raise Skip("too few values")
    lo_i, hi_i = max(0, int(n * q_lo)), min(n - 2, max(int(n * q_hi), int(n * q_lo)))
    candidates = [(v[i + 1] - v[i]) / (abs(v[i]) + abs(v[i + 1]) + 1e-12) for i in range(lo_i, hi_i + 1)]
    if not candidates or max(candidates) <= 0:
        raise Skip("no gap")
    best = max(range(len(candidates)), key=lambda j: (candidates[j], rng.random()))
    i = lo_i + best
    if exact:
        return int(v[i + 1])
    return nice((v[i] + v[i + 1]) / 2, v[i], v[i + 1])


def above(f: FieldSpec, x: float) -> tuple[dict, str]:
    """The condition "``f`` above the threshold" and its words."""
    if f.exact:
        return {"field": f.name, "op": ">=", "value": x}, f"{article(f.label)} {f.label} of at least {fmt(x)}"
    return {"field": f.name, "op": ">", "value": x}, f"{article(f.label)} {f.label} above {fmt(x)}"


def below(f: FieldSpec, x: float) -> tuple[dict, str]:
    return {"field": f.name, "op": "<", "value": x}, f"{article(f.label)} {f.label} below {fmt(x)}"


def fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.10g}"


def ordinal(k: int) -> str:
    return {1: "highest", 2: "second-highest", 3: "third-highest", 4: "fourth-highest", 5: "fifth-highest"}[k]


def lowest(k: int) -> str:
    return {1: "lowest", 2: "second-lowest", 3: "third-lowest"}[k]


def _number_question(f: FieldSpec, text: str, spec: dict, template: str) -> Question:
    kind = "integer" if f.exact else "number"
    return Question("", template, text, spec, kind, f.tol_rel, f.tol_abs)


def _unit(f: FieldSpec) -> str:
    """A hint on the unit to answer in, unless the label already says it."""
    if not f.unit or f.unit in f.label or (f.kind == "pct" and "percent" in f.label):
        return ""
    return " (in percent)" if f.unit == "%" else f" (in {f.unit})"


def _nontrivial(n: int, total: int) -> None:
    """Skip a count that is 0 or everything: the answer would follow from the question."""
    if not 0 < n < total:
        raise Skip("degenerate count")


def _ref(spec: CollectionSpec, r: dict, field: str, at: int | None = None) -> dict:
    src = spec.src if at is None else f"{spec.src}@{at}"
    return {"src": src, "key": r[spec.key_field], "field": field}


def _host(spec: CollectionSpec) -> str:
    return SITES[spec.site].host


def _past_hour(ctx: Ctx) -> int:
    """A whole hour between 2 and 60 hours before the reference time."""
    return int(ctx.t_ref // HOUR) * HOUR - ctx.rng.randint(2, 60) * HOUR


def _past_moment(ctx: Ctx, spec: CollectionSpec) -> tuple[int, str]:
    """A past moment the collection's history pages show, and how a question names it."""
    if not ctx.history or not spec.history:
        raise Skip("no history pages")
    if spec.history == "daily":
        day = int(ctx.t_ref // DAY) * DAY - ctx.rng.randint(1, 20) * DAY
        return day + 12 * HOUR, f"on {day_text(day)}"
    at = _past_hour(ctx)
    return at, f"at {moment_text(at)}"


def _since(when: str) -> str:
    """``at 14:00 UTC on 3 March`` / ``on 3 March`` -> what follows "since"."""
    return when.removeprefix("at ").removeprefix("on ")


def _past_day(ctx: Ctx, spec: CollectionSpec) -> int:
    """The start of a whole past UTC day (1–3 days ago) with hourly history."""
    if not ctx.history or spec.history != "hourly":
        raise Skip("no hourly history")
    return int(ctx.t_ref // DAY) * DAY - ctx.rng.randint(1, 3) * DAY


def _record_at(ctx: Ctx, spec: CollectionSpec, key: Any, at: int) -> dict:
    for r in ctx.data(f"{spec.src}@{at}"):
        if r[spec.key_field] == key:
            return r
    raise Skip("the record did not exist then")


# -- single-site templates: the present ---------------------------------------------------------------


def t_lookup(ctx: Ctx, spec: CollectionSpec) -> Question:
    r = ctx.rng.choice(subjects(ctx, spec))
    f = ctx.rng.choice([f for f in spec.fields.values() if f.rankable or f.name == "rank"])
    text = f"What is the {f.label} of {spec.describe(r)} on {_host(spec)}?{_unit(f)}"
    return _number_question(f, text, {"kind": "value", "src": spec.src, "key": r[spec.key_field], "field": f.name},
                            "lookup")


def t_compare(ctx: Ctx, spec: CollectionSpec) -> Question:
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(numeric_fields(spec))
    if a[f.name] == b[f.name]:
        raise Skip("tie")
    mode = ctx.rng.choice(("max", "min"))
    word = "higher" if mode == "max" else "lower"
    text = (f"On {_host(spec)}, which has the {word} {f.label}: {spec.describe(a)} or {spec.describe(b)}? "
            f"Answer with its name.")
    return Question("", "compare", text, {"kind": "pick", "src": spec.src, "keys": [a[spec.key_field], b[spec.key_field]],
                                          "field": f.name, "mode": mode}, "name")


def _no_ties(records: list[dict], field: str, n: int, reverse: bool = True) -> None:
    """Skip rankings whose top ``n`` values are not all distinct (the answer would be arbitrary)."""
    top = sorted((r[field] for r in records), reverse=reverse)[:n]
    if len(set(top)) < len(top) or len(top) < n:
        raise Skip("ties in the ranking")


def t_rank(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    k = ctx.rng.randint(1, 5)
    f = ctx.rng.choice(numeric_fields(spec, listed=True))
    _no_ties(records, f.name, k + 1)
    text = f"Of the {spec.plural} {words}, which has the {ordinal(k)} {f.label}? Answer with its name."
    return Question("", "rank", text, {"kind": "nth", "src": spec.src, "field": f.name, "order": "desc", "k": k,
                                       "scope": scope}, "name")


def t_rank_low(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    k = ctx.rng.randint(1, 3)
    f = ctx.rng.choice(numeric_fields(spec, listed=True))
    _no_ties(records, f.name, k + 1, reverse=False)
    text = f"Of the {spec.plural} {words}, which has the {lowest(k)} {f.label}? Answer with its name."
    return Question("", "rank_low", text, {"kind": "nth", "src": spec.src, "field": f.name, "order": "asc", "k": k,
                                           "scope": scope}, "name")


def t_top3(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    f = ctx.rng.choice(numeric_fields(spec, listed=True))
    _no_ties(records, f.name, 4)
    text = f"List the three {spec.plural} {words} with the highest {f.label}, highest first (names)."
    return Question("", "top3", text, {"kind": "top", "src": spec.src, "field": f.name, "order": "desc", "n": 3,
                                       "scope": scope}, "names_list")


def t_hop(ctx: Ctx, spec: CollectionSpec) -> Question:
    """From a ranking to the record's own page: a field the list does not show."""
    records, scope, words = population(ctx, spec)
    hidden = [f for f in spec.fields.values() if not f.listed and f.rankable]
    if not hidden:
        raise Skip("the list shows every field")
    k = ctx.rng.randint(1, 3)
    by = ctx.rng.choice(numeric_fields(spec, listed=True))
    _no_ties(records, by.name, k + 1)
    then = ctx.rng.choice(hidden)
    text = (f"Of the {spec.plural} {words}, take the one with the {ordinal(k)} {by.label}. "
            f"What is its {then.label}?{_unit(then)}")
    q = {"kind": "hop", "src": spec.src, "field": by.name, "order": "desc", "k": k, "scope": scope, "then": then.name}
    return _number_question(then, text, q, "hop")


def t_price_change(ctx: Ctx, spec: CollectionSpec) -> Question:
    if not spec.change_field:
        raise Skip("no change field")
    r = ctx.rng.choice(subjects(ctx, spec))
    f = spec.fields[spec.change_field]
    text = (f"By what percentage has the price of {spec.describe(r)} changed {spec.period} on "
            f"{_host(spec)}? (Percent, negative for a fall.)")
    return _number_question(f, text, {"kind": "value", "src": spec.src, "key": r[spec.key_field], "field": f.name},
                            "price_change")


def t_abs_change(ctx: Ctx, spec: CollectionSpec) -> Question:
    if not (spec.prev_field and spec.price_field):
        raise Skip("no reference price")
    r = ctx.rng.choice(subjects(ctx, spec))
    price, prev = spec.fields[spec.price_field], spec.fields[spec.prev_field]
    text = (f"By how much has the price of {spec.describe(r)} changed {spec.period} on {_host(spec)}, i.e. its "
            f"{price.label.replace(' in ' + price.unit, '')} minus its {prev.label.replace(' in ' + prev.unit, '')}? "
            f"Answer in {price.unit}, negative for a fall.")
    q = {"kind": "abs_change", "src": spec.src, "key": r[spec.key_field], "price_field": spec.price_field,
         "prev_field": spec.prev_field}
    return Question("", "abs_change", text, q, "number", 0.02, 0.004 * abs(r[spec.price_field]))


def t_threshold(ctx: Ctx, spec: CollectionSpec) -> Question:
    chosen = ctx.rng.sample(subjects(ctx, spec), 5)
    f = ctx.rng.choice(numeric_fields(spec))
    x = gap_threshold([r[f.name] for r in chosen], ctx.rng, 0.2, 0.6, f.exact)
    cond, words = above(f, x)
    names = "; ".join(spec.describe(r) for r in chosen)
    text = (f"On {_host(spec)}, which of these {spec.plural} have {words}: {names}? "
            "Answer with a list of names (empty if none).")
    q = {"kind": "members", "src": spec.src, "keys": [r[spec.key_field] for r in chosen], "where": [cond]}
    return Question("", "threshold", text, q, "names_set")


def t_multi_condition(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    fields = numeric_fields(spec, listed=True)
    if len(fields) < 2:
        raise Skip("needs two fields")
    f1, f2 = ctx.rng.sample(fields, 2)
    a = gap_threshold([r[f1.name] for r in records], ctx.rng, 0.25, 0.6, f1.exact)
    b = gap_threshold([r[f2.name] for r in records], ctx.rng, 0.4, 0.8, f2.exact)
    (c1, w1), (c2, w2) = above(f1, a), below(f2, b)
    n = sum(1 for r in records if _holds(r, c1) and _holds(r, c2))
    _nontrivial(n, len(records))
    text = f"How many {spec.plural} {words} have {w1} and {w2}?"
    return Question("", "multi_condition", text, {"kind": "count", "src": spec.src, "where": [c1, c2], "scope": scope},
                    "integer")


def t_delta(ctx: Ctx, spec: CollectionSpec) -> Question:
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(numeric_fields(spec))
    text = (f"On {_host(spec)}, what is the {f.label} of {spec.describe(a)} minus that of "
            f"{spec.describe(b)}?{_unit(f)}")
    tol = 2 * f.tol_abs + f.tol_rel * (abs(a[f.name]) + abs(b[f.name]))
    q = {"kind": "delta", "src": spec.src, "keys": [a[spec.key_field], b[spec.key_field]], "field": f.name}
    return Question("", "delta", text, q, "integer" if f.exact else "number", 0.0, tol)


def t_range_count(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    f = ctx.rng.choice(numeric_fields(spec, listed=True))
    values = [r[f.name] for r in records]
    lo = gap_threshold(values, ctx.rng, 0.1, 0.4, f.exact)
    hi = gap_threshold(values, ctx.rng, 0.55, 0.9, f.exact)
    if f.exact:
        hi -= 1  # both ends inclusive: the whole number below the upper gap
    if not lo < hi:
        raise Skip("empty range")
    cond = {"field": f.name, "op": "between", "lo": lo, "hi": hi}
    _nontrivial(sum(_holds(r, cond) for r in records), len(records))
    text = f"How many {spec.plural} {words} have {article(f.label)} {f.label} between {fmt(lo)} and {fmt(hi)} (inclusive)?"
    return Question("", "range_count", text, {"kind": "count", "src": spec.src, "where": [cond], "scope": scope},
                    "integer")


def t_percentage(ctx: Ctx, spec: CollectionSpec) -> Question:
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(numeric_fields(spec, ratio=True))
    if not b[f.name]:
        raise Skip("division by zero")
    text = (f"On {_host(spec)}, what is the {f.label} of {spec.describe(a)} as a percentage of that of "
            f"{spec.describe(b)}? (Percent.)")
    tol_rel = 2 * f.tol_rel + 0.003 + (2 * f.tol_abs / abs(b[f.name]) if f.tol_abs else 0.0)
    q = {"kind": "ratio_pct", "a": _ref(spec, a, f.name), "b": _ref(spec, b, f.name)}
    return Question("", "percentage", text, q, "number", tol_rel, 0.0)


def t_share(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    f = ctx.rng.choice(numeric_fields(spec, listed=True))
    x = gap_threshold([r[f.name] for r in records], ctx.rng, 0.3, 0.7, f.exact)
    cond, cwords = above(f, x)
    _nontrivial(sum(_holds(r, cond) for r in records), len(records))
    text = f"What percentage of the {spec.plural} {words} have {cwords}? (Percent.)"
    q = {"kind": "share_pct", "src": spec.src, "where": [cond], "scope": scope}
    return Question("", "share", text, q, "number", 0.0, 0.6)


def _several(ctx: Ctx, spec: CollectionSpec, n: int, *, additive: bool) -> tuple[list[dict], FieldSpec]:
    chosen = ctx.rng.sample(subjects(ctx, spec), n)
    fields = [f for f in numeric_fields(spec, ratio=additive) if not (additive and f.kind == "pct")]
    hidden = [f for f in fields if not f.listed]
    return chosen, ctx.rng.choice(hidden if hidden and ctx.rng.random() < 0.6 else fields)


def t_sum_of(ctx: Ctx, spec: CollectionSpec) -> Question:
    chosen, f = _several(ctx, spec, 3, additive=True)
    names = ", ".join(spec.describe(r) for r in chosen[:-1]) + f" and {spec.describe(chosen[-1])}"
    text = f"On {_host(spec)}, what is the combined {f.label} of {names}?{_unit(f)}"
    q = {"kind": "expr", "op": "sum", "refs": [_ref(spec, r, f.name) for r in chosen]}
    return Question("", "sum_of", text, q, "integer" if f.exact else "number")


def t_mean_of(ctx: Ctx, spec: CollectionSpec) -> Question:
    chosen, f = _several(ctx, spec, 4, additive=False)
    names = "; ".join(spec.describe(r) for r in chosen)
    text = f"On {_host(spec)}, what is the average {f.label} of these four {spec.plural}: {names}?{_unit(f)}"
    q = {"kind": "expr", "op": "mean", "refs": [_ref(spec, r, f.name) for r in chosen]}
    return Question("", "mean_of", text, q, "number")


def t_compare_many(ctx: Ctx, spec: CollectionSpec) -> Question:
    chosen, f = _several(ctx, spec, 4, additive=False)
    if len({r[f.name] for r in chosen}) < 4:
        raise Skip("tie")
    mode = ctx.rng.choice(("max", "min"))
    names = "; ".join(spec.describe(r) for r in chosen)
    text = (f"On {_host(spec)}, which of these {spec.plural} has the {'highest' if mode == 'max' else 'lowest'} "
            f"{f.label}: {names}? Answer with its name.")
    q = {"kind": "pick", "src": spec.src, "keys": [r[spec.key_field] for r in chosen], "field": f.name, "mode": mode}
    return Question("", "compare_many", text, q, "name")


# -- single-site templates: history ----------------------------------------------------------------------


def t_value_at(ctx: Ctx, spec: CollectionSpec) -> Question:
    at, when = _past_moment(ctx, spec)
    r = ctx.rng.choice(subjects(ctx, spec))
    _record_at(ctx, spec, r[spec.key_field], at)
    f = ctx.rng.choice(history_fields(spec))
    text = f"What was the {f.label} of {spec.describe(r)} on {_host(spec)} {when}?{_unit(f)}"
    return _number_question(f, text, {"kind": "value", "src": f"{spec.src}@{at}", "key": r[spec.key_field],
                                      "field": f.name}, "value_at")


def _price_then(ctx: Ctx, spec: CollectionSpec) -> tuple[dict, FieldSpec, int, str]:
    if not spec.price_field:
        raise Skip("no price")
    at, when = _past_moment(ctx, spec)
    r = ctx.rng.choice(subjects(ctx, spec))
    _record_at(ctx, spec, r[spec.key_field], at)
    return r, spec.fields[spec.price_field], at, when


def t_change_since(ctx: Ctx, spec: CollectionSpec) -> Question:
    r, f, at, when = _price_then(ctx, spec)
    text = (f"By how much has the {f.label} of {spec.describe(r)} on {_host(spec)} changed since {_since(when)}"
            f"? (Now minus then, in {f.unit}; negative for a fall.)")
    q = {"kind": "expr", "op": "sub", "refs": [_ref(spec, r, f.name), _ref(spec, r, f.name, at)]}
    return Question("", "change_since", text, q, "integer" if f.exact else "number")


def t_pct_change_since(ctx: Ctx, spec: CollectionSpec) -> Question:
    r, f, at, when = _price_then(ctx, spec)
    text = (f"By what percentage has the price of {spec.describe(r)} on {_host(spec)} changed since "
            f"{_since(when)}? (Percent, negative for a fall.)")
    q = {"kind": "expr", "op": "pct_change", "refs": [_ref(spec, r, f.name), _ref(spec, r, f.name, at)]}
    return Question("", "pct_change_since", text, q, "number")


def _day_refs(ctx: Ctx, spec: CollectionSpec) -> tuple[dict, FieldSpec, int, list[dict]]:
    day = _past_day(ctx, spec)
    r = ctx.rng.choice(subjects(ctx, spec))
    f = ctx.rng.choice(history_fields(spec))
    hours = [day + h * HOUR for h in range(24)]
    for at in (hours[0], hours[-1]):
        _record_at(ctx, spec, r[spec.key_field], at)
    return r, f, day, [_ref(spec, r, f.name, at) for at in hours]


def _day_extreme(ctx: Ctx, spec: CollectionSpec, op: str, template: str) -> Question:
    r, f, day, refs = _day_refs(ctx, spec)
    word = {"max": "highest", "min": "lowest", "range": "difference between the highest and the lowest"}[op]
    text = (f"On {_host(spec)}, what was the {word} of the hourly {f.label} readings of {spec.describe(r)} on "
            f"{day_text(day)} (the 24 readings from 00:00 to 23:00 UTC)?{_unit(f)}")
    q = {"kind": "expr", "op": op, "refs": refs}
    return Question("", template, text, q, "integer" if f.exact else "number")


def t_day_high(ctx: Ctx, spec: CollectionSpec) -> Question:
    return _day_extreme(ctx, spec, "max", "day_high")


def t_day_low(ctx: Ctx, spec: CollectionSpec) -> Question:
    return _day_extreme(ctx, spec, "min", "day_low")


def t_day_range(ctx: Ctx, spec: CollectionSpec) -> Question:
    return _day_extreme(ctx, spec, "range", "day_range")


def t_hours_above(ctx: Ctx, spec: CollectionSpec) -> Question:
    r, f, day, refs = _day_refs(ctx, spec)
    values = [_record_at(ctx, spec, ref["key"], int(ref["src"].rsplit("@", 1)[1]))[f.name] for ref in refs]
    x = gap_threshold(values, ctx.rng, 0.25, 0.75, f.exact)
    cond, words = above(f, x)
    _nontrivial(sum(_holds({f.name: v}, cond) for v in values), len(values))
    text = (f"On {_host(spec)}, in how many of the 24 hourly readings of {spec.describe(r)} on {day_text(day)} "
            f"(00:00 to 23:00 UTC) did it have {words}?")
    q = {"kind": "count_refs", "refs": refs, "cond": {k: v for k, v in cond.items() if k != "field"}}
    return Question("", "hours_above", text, q, "integer")


def t_compare_at(ctx: Ctx, spec: CollectionSpec) -> Question:
    at, when = _past_moment(ctx, spec)
    a, b = ctx.rng.sample(subjects(ctx, spec), 2)
    f = ctx.rng.choice(history_fields(spec))
    if _record_at(ctx, spec, a[spec.key_field], at)[f.name] == _record_at(ctx, spec, b[spec.key_field], at)[f.name]:
        raise Skip("tie")
    mode = ctx.rng.choice(("max", "min"))
    text = (f"On {_host(spec)}, which had the {'higher' if mode == 'max' else 'lower'} {f.label} {when}: "
            f"{spec.describe(a)} or {spec.describe(b)}? Answer with its name.")
    q = {"kind": "pick_refs", "mode": mode, "refs": [_ref(spec, a, f.name, at), _ref(spec, b, f.name, at)]}
    return Question("", "compare_at", text, q, "name")


def t_rose_most_since(ctx: Ctx, spec: CollectionSpec) -> Question:
    if not spec.price_field:
        raise Skip("no price")
    at, when = _past_moment(ctx, spec)
    chosen = ctx.rng.sample(subjects(ctx, spec), 3)
    f = spec.price_field
    changes = [r[f] / _record_at(ctx, spec, r[spec.key_field], at)[f] for r in chosen]
    if max(changes) - sorted(changes)[-2] < 0.002:
        raise Skip("too close to call")
    names = "; ".join(spec.describe(r) for r in chosen)
    text = (f"On {_host(spec)}, which of these rose the most in percentage terms since {_since(when)} "
            f"(a fall counts as a negative rise): {names}? Answer with its name.")
    q = {"kind": "pick_change", "mode": "max",
         "items": [{"now": _ref(spec, r, f), "then": _ref(spec, r, f, at)} for r in chosen]}
    return Question("", "rose_most_since", text, q, "name")


# -- site-specific templates --------------------------------------------------------------------------------


def t_front_at(ctx: Ctx, spec: CollectionSpec) -> Question:
    at, when = _past_moment(ctx, spec)
    k = ctx.rng.randint(1, 10)
    text = f"Which story was at position {k} of the {_host(spec)} front page {when}? Answer with its title."
    return Question("", "front_at", text, {"kind": "nth", "src": f"{spec.src}@{at}", "field": "rank", "order": "asc",
                                           "k": k}, "name")


def t_front_top3_at(ctx: Ctx, spec: CollectionSpec) -> Question:
    at, when = _past_moment(ctx, spec)
    text = f"List the titles of the top three stories of the {_host(spec)} front page {when}, in order."
    return Question("", "front_top3_at", text, {"kind": "top", "src": f"{spec.src}@{at}", "field": "rank",
                                                "order": "asc", "n": 3}, "names_list")


def _by_group(ctx: Ctx, spec: CollectionSpec, field: str, at_least: int) -> tuple[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for r in ctx.data(spec.src):
        groups.setdefault(r[field], []).append(r)
    fit = sorted(g for g, rs in groups.items() if len(rs) >= at_least)
    if not fit:
        raise Skip(f"no {field} with {at_least} items")
    g = ctx.rng.choice(fit)
    return g, groups[g]


def t_user_count(ctx: Ctx, spec: CollectionSpec) -> Question:
    who, _ = _by_group(ctx, spec, "author", 2)
    text = f"How many stories has the user {who} submitted to {_host(spec)} in the last four days?"
    return Question("", "user_count", text, {"kind": "count", "src": spec.src, "where": [],
                                             "scope": [{"field": "author", "op": "==", "value": who}]}, "integer")


def t_domain_best(ctx: Ctx, spec: CollectionSpec) -> Question:
    domain, stories = _by_group(ctx, spec, "domain", 3)
    f = ctx.rng.choice(("points", "comments"))
    _no_ties(stories, f, 2)
    text = (f"Of the stories from {domain} on {_host(spec)} (the last four days), which has the most {f}? "
            "Answer with its title.")
    return Question("", "domain_best", text, {"kind": "nth", "src": spec.src, "field": f, "order": "desc", "k": 1,
                                              "scope": [{"field": "domain", "op": "==", "value": domain}]}, "name")


def t_author_count(ctx: Ctx, spec: CollectionSpec) -> Question:
    who, books = _by_group(ctx, spec, "author", 2)
    rated = ctx.rng.random() < 0.5
    where = [{"field": "rating", "op": ">=", "value": 4}] if rated else []
    n = sum(r["rating"] >= 4 for r in books) if rated else len(books)
    if rated:
        _nontrivial(n, len(books))
    text = (f"How many books by {who} does {_host(spec)} list"
            + (" with a rating of at least 4 stars?" if rated else "?"))
    return Question("", "author_count", text, {"kind": "count", "src": spec.src, "where": where,
                                               "scope": [{"field": "author", "op": "==", "value": who}]}, "integer")


def t_genre_cheapest(ctx: Ctx, spec: CollectionSpec) -> Question:
    records, scope, words = population(ctx, spec)
    stars = ctx.rng.choice((3, 4, 5))
    good = [r for r in records if r["rating"] >= stars]
    if len(good) < 2:
        raise Skip("too few")
    _no_ties(good, "price", 2, reverse=False)
    text = (f"Which is the cheapest book {words} with a rating of at least {stars} stars? Answer with its title.")
    q = {"kind": "nth", "src": spec.src, "field": "price", "order": "asc", "k": 1, "scope": scope,
         "filter": [{"field": "rating", "op": ">=", "value": stars}]}
    return Question("", "genre_cheapest", text, q, "name")


def t_sector_leader(ctx: Ctx, spec: CollectionSpec) -> Question:
    sector, stocks = _by_group(ctx, spec, "sector", 3)
    f = ctx.rng.choice(numeric_fields(spec, listed=True))
    _no_ties(stocks, f.name, 2)
    text = f"Which {sector}-sector stock on {_host(spec)} has the highest {f.label}? Answer with its name."
    return Question("", "sector_leader", text, {"kind": "nth", "src": spec.src, "field": f.name, "order": "desc",
                                                "k": 1, "scope": [{"field": "sector", "op": "==", "value": sector}]},
                    "name")


def t_sector_up(ctx: Ctx, spec: CollectionSpec) -> Question:
    sector, stocks = _by_group(ctx, spec, "sector", 4)
    up = ctx.rng.random() < 0.5
    cond = {"field": "change_pct", "op": ">" if up else "<", "value": 0}
    _nontrivial(sum(_holds(r, cond) for r in stocks), len(stocks))
    text = (f"How many {sector}-sector stocks on {_host(spec)} are {'up' if up else 'down'} since the previous "
            "close?")
    return Question("", "sector_up", text, {"kind": "count", "src": spec.src, "where": [cond],
                                            "scope": [{"field": "sector", "op": "==", "value": sector}]}, "integer")


def t_overnight_gap(ctx: Ctx, spec: CollectionSpec) -> Question:
    r = ctx.rng.choice(subjects(ctx, spec))
    text = (f"On {_host(spec)}, by how much did {spec.describe(r)} open above its previous close today, i.e. its "
            "opening price minus its previous close? (USD; negative if it opened below.)")
    q = {"kind": "expr", "op": "sub", "refs": [_ref(spec, r, "open"), _ref(spec, r, "prev_close")]}
    return Question("", "overnight_gap", text, q, "number")


def t_newest_subnet(ctx: Ctx, spec: CollectionSpec) -> Question:
    k = ctx.rng.randint(1, 3)
    records = ctx.data(spec.src)
    _no_ties(records, "registered", k + 1)
    which = {1: "most recently", 2: "second most recently", 3: "third most recently"}[k]
    text = f"Which subnet on {_host(spec)} was registered {which}? Answer with its name."
    return Question("", "newest_subnet", text, {"kind": "nth", "src": spec.src, "field": "registered",
                                                "order": "desc", "k": k}, "name")


def t_alpha_usd(ctx: Ctx, spec: CollectionSpec) -> Question:
    s = ctx.rng.choice(subjects(ctx, spec))
    text = (f"What is one alpha token of {spec.describe(s)} worth in USD, at the alpha price in TAO its page "
            f"shows and the TAO price on the {_host(spec)} dashboard?")
    q = {"kind": "product", "a": _ref(spec, s, "price_tao"),
         "b": {"src": "subnets/network", "key": "finney-sim", "field": "tao_price_usd"}}
    return Question("", "alpha_usd", text, q, "number", 0.02, 0.0)


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


def t_cross_value_at(ctx: Ctx) -> Question:
    subnets = collection_spec("subnets/subnets")
    at, when = _past_moment(ctx, subnets)
    s = ctx.rng.choice(subjects(ctx, subnets))
    _record_at(ctx, subnets, s["netuid"], at)
    text = (f"What was the market cap in USD of {subnets.describe(s)} {when}? Take its market cap in TAO then from "
            "taostats.test and TAO's USD price then from coingecko.test.")
    q = {"kind": "product", "a": {"src": f"subnets/subnets@{at}", "key": s["netuid"], "field": "market_cap_tao"},
         "b": {"src": f"crypto/coins@{at}", "key": "bittensor", "field": "price_usd"}}
    return Question("", "cross_value_at", text, q, "number", 0.02, 0.0)


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


def t_cross_since(ctx: Ctx) -> Question:
    coin, stock = _coin_near_stocks(ctx)
    at, when = _past_moment(ctx, collection_spec("crypto/coins"))
    coins, stocks = collection_spec("crypto/coins"), collection_spec("stocks/quotes")
    c_then = _record_at(ctx, coins, coin["id"], at)["price_usd"]
    s_then = _record_at(ctx, stocks, stock["symbol"], at)["price"]
    if abs(coin["price_usd"] / c_then - stock["price"] / s_then) < 0.003:
        raise Skip("too close to call")
    text = (f"Since {_since(when)}, which rose more in percentage terms: {stock['name']} "
            f"({stock['symbol']}) on stooq.test or {coin['name']} ({coin['symbol']}) on coingecko.test? "
            "(A fall counts as a negative rise.) Answer with its name.")
    q = {"kind": "pick_change", "mode": "max", "items": [
        {"now": {"src": "stocks/quotes", "key": stock["symbol"], "field": "price"},
         "then": {"src": f"stocks/quotes@{at}", "key": stock["symbol"], "field": "price"}},
        {"now": {"src": "crypto/coins", "key": coin["id"], "field": "price_usd"},
         "then": {"src": f"crypto/coins@{at}", "key": coin["id"], "field": "price_usd"}}]}
    return Question("", "cross_since", text, q, "name")


SiteTemplate = Callable[[Ctx, CollectionSpec], Question]
CrossTemplate = Callable[[Ctx], Question]

_ALL = ("subnets", "crypto", "stocks", "news", "books")
_PRICED = ("subnets", "crypto", "stocks", "books")
_HOURLY = ("subnets", "crypto", "stocks")
#: Each single-site template and the sites it asks about.
TEMPLATE_SITES: dict[str, tuple[SiteTemplate, tuple[str, ...]]] = {
    "lookup": (t_lookup, _ALL), "compare": (t_compare, _ALL), "rank": (t_rank, _ALL),
    "rank_low": (t_rank_low, _PRICED), "top3": (t_top3, _ALL), "hop": (t_hop, ("crypto", "stocks", "books")),
    "price_change": (t_price_change, _HOURLY), "abs_change": (t_abs_change, _HOURLY),
    "threshold": (t_threshold, _ALL), "multi_condition": (t_multi_condition, _ALL), "delta": (t_delta, _ALL),
    "range_count": (t_range_count, _ALL), "percentage": (t_percentage, _ALL), "share": (t_share, _ALL),
    "sum_of": (t_sum_of, _ALL), "mean_of": (t_mean_of, _ALL), "compare_many": (t_compare_many, _ALL),
    "value_at": (t_value_at, _PRICED), "change_since": (t_change_since, _PRICED),
    "pct_change_since": (t_pct_change_since, _PRICED), "day_high": (t_day_high, _HOURLY),
    "day_low": (t_day_low, _HOURLY), "day_range": (t_day_range, _HOURLY), "hours_above": (t_hours_above, _HOURLY),
    "compare_at": (t_compare_at, _PRICED), "rose_most_since": (t_rose_most_since, _PRICED),
    "front_at": (t_front_at, ("news",)), "front_top3_at": (t_front_top3_at, ("news",)),
    "user_count": (t_user_count, ("news",)), "domain_best": (t_domain_best, ("news",)),
    "author_count": (t_author_count, ("books",)), "genre_cheapest": (t_genre_cheapest, ("books",)),
    "sector_leader": (t_sector_leader, ("stocks",)), "sector_up": (t_sector_up, ("stocks",)),
    "overnight_gap": (t_overnight_gap, ("stocks",)), "newest_subnet": (t_newest_subnet, ("subnets",)),
    "alpha_usd": (t_alpha_usd, ("subnets",)),
}
TEMPLATES: dict[str, SiteTemplate] = {name: fn for name, (fn, _) in TEMPLATE_SITES.items()}
CROSS_TEMPLATES: dict[str, CrossTemplate] = {
    "cross_value": t_cross_value, "cross_value_at": t_cross_value_at, "cross_compare": t_cross_compare,
    "cross_ratio": t_cross_ratio, "cross_change": t_cross_change, "cross_since": t_cross_since,
}
#: Templates live mode can ask (the real sites show only the present, through their APIs).
LIVE_TEMPLATES = ("lookup", "compare", "rank", "rank_low", "top3", "price_change", "abs_change", "threshold",
                  "multi_condition", "delta", "range_count", "percentage", "share", "sum_of", "mean_of",
                  "compare_many")
#: The collections single-site questions are asked about, per site.
QUESTION_COLLECTIONS = {"subnets": "subnets/subnets", "crypto": "crypto/coins", "stocks": "stocks/quotes",
                        "news": "news/stories", "books": "books/books"}
#: Task families: one per site, plus "cross" (cross-site questions mixed with single-site ones).
FAMILIES = (*QUESTION_COLLECTIONS, "cross")


def applicable(site: str, *, history: bool = True) -> list[str]:
    """Names of the single-site templates that ask about ``site``."""
    return [name for name, (_, sites) in TEMPLATE_SITES.items()
            if site in sites and (history or name in LIVE_TEMPLATES)]


def make_questions(family: str, rng: random.Random, data: Data, t_ref: float, n: int | None = None, *,
                   history: bool = True) -> list[Question]:
    """Draw ``n`` (default 2–4) questions of ``family`` using distinct templates.

    ``history=False`` (live mode) keeps to the templates about the present.
    """
    if family not in FAMILIES:
        raise KeyError(f"unknown LIVEWEB task family {family!r}; families: {', '.join(FAMILIES)}")
    n = n or rng.randint(2, 4)
    ctx = Ctx(rng, data, t_ref, history)
    if family == "cross":
        names = [name for name in CROSS_TEMPLATES if history or name in ("cross_value", "cross_compare",
                                                                         "cross_ratio", "cross_change")]
        pool: list[tuple[str, Callable[[], Question]]] = [
            (name, (lambda fn=CROSS_TEMPLATES[name]: fn(ctx))) for name in names]
        rng.shuffle(pool)
        pool = pool[: rng.randint(1, min(2, n))]
        others = [(name, site) for site in QUESTION_COLLECTIONS for name in applicable(site, history=history)]
        rng.shuffle(others)
        pool += [(name, (lambda fn=TEMPLATES[name], src=QUESTION_COLLECTIONS[site]: fn(ctx, collection_spec(src))))
                 for name, site in others]
    else:
        spec = collection_spec(QUESTION_COLLECTIONS[family])
        names = applicable(family, history=history)
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
