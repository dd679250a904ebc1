"""Computing a LIVEWEB question's answer from site records (standard library only).

This module is self-contained on purpose: the grader calls :func:`compute` on the world's
records at submission time, and the oracle ships this very file into the sandbox and calls it on
the records it read from the sites' HTML pages (their ``data-field``/``data-value`` markup), so the
two can only disagree if the data they saw differs.

A question spec is a JSON object with a ``kind``; ``data`` maps ``"site/collection"`` to its
records and ``meta`` maps the same keys to ``{"key_field", "name_field"}``. A source may carry a
moment, ``"site/collection@T"``: the collection as it was at unix time ``T`` (what the sites'
history pages show). A reference (``ref``) is ``{"src", "key", "field"}``: one value of one record.
Conditions (``where``) are ``{"field", "op", "value"}`` with ``op`` one of ``> >= < <= == between``
(``between`` takes ``lo`` and ``hi``, both inclusive).

Kinds: ``value``, ``abs_change``, ``delta``, ``pick``, ``nth``, ``top``, ``members``, ``count``,
``share_pct``, ``hop`` (a field of the k-th record of a ranking); over references: ``product``,
``ratio``, ``ratio_pct``, ``pick_refs``, ``expr`` (``op``: ``sub``, ``pct_change``, ``sum``,
``mean``, ``max``, ``min``, ``range``), ``count_refs`` and ``pick_change`` (whose percentage
change from ``then`` to ``now`` is largest or smallest).
"""

from __future__ import annotations

from typing import Any


def _find(records: list[dict], key_field: str, key: Any) -> dict:
    for r in records:
        if str(r[key_field]) == str(key):
            return r
    raise LookupError(f"no record with {key_field}={key!r}")


def _ref(ref: dict, data: dict, meta: dict) -> dict:
    return _find(data[ref["src"]], meta[ref["src"]]["key_field"], ref["key"])


def _holds(record: dict, cond: dict) -> bool:
    v, op = record[cond["field"]], cond["op"]
    if op == "between":
        return cond["lo"] <= v <= cond["hi"]
    x = cond["value"]
    return {">": v > x, ">=": v >= x, "<": v < x, "<=": v <= x, "==": v == x}[op]


def _where(records: list[dict], conds: list[dict]) -> list[dict]:
    return [r for r in records if all(_holds(r, c) for c in conds)]


def _ordered(records: list[dict], field: str, order: str, key_field: str) -> list[dict]:
    # Ties broken by key so that the grader and the oracle agree on an order.
    sign = -1 if order == "desc" else 1
    return sorted(records, key=lambda r: (sign * r[field], str(r[key_field])))


def _value(ref: dict, data: dict, meta: dict) -> Any:
    return _ref(ref, data, meta)[ref["field"]]


_EXPR = {
    "sub": lambda v: v[0] - v[1],
    "pct_change": lambda v: 100.0 * (v[0] / v[1] - 1.0),
    "sum": sum,
    "mean": lambda v: sum(v) / len(v),
    "max": max,
    "min": min,
    "range": lambda v: max(v) - min(v),
}


def compute(q: dict, data: dict[str, list[dict]], meta: dict[str, dict]) -> Any:
    """The answer to question spec ``q`` given ``data`` (see the module docstring)."""
    kind = q["kind"]
    if kind == "expr":
        return _EXPR[q["op"]]([_value(r, data, meta) for r in q["refs"]])
    if kind == "count_refs":
        return sum(_holds({"v": _value(r, data, meta)}, {**q["cond"], "field": "v"}) for r in q["refs"])
    if kind == "pick_change":
        changes = [(_value(i["now"], data, meta) / _value(i["then"], data, meta), i["now"]) for i in q["items"]]
        best = max(changes, key=lambda p: p[0]) if q["mode"] == "max" else min(changes, key=lambda p: p[0])
        return _ref(best[1], data, meta)[meta[best[1]["src"]]["name_field"]]
    if kind in ("product", "ratio", "ratio_pct", "pick_refs"):
        if kind == "pick_refs":
            values = [(_ref(r, data, meta)[r["field"]], r) for r in q["refs"]]
            best = max(values, key=lambda p: p[0]) if q["mode"] == "max" else min(values, key=lambda p: p[0])
            rec = _ref(best[1], data, meta)
            return rec[meta[best[1]["src"]]["name_field"]]
        a = _ref(q["a"], data, meta)[q["a"]["field"]]
        b = _ref(q["b"], data, meta)[q["b"]["field"]]
        return a * b if kind == "product" else (a / b if kind == "ratio" else 100.0 * a / b)
    records = data[q["src"]]
    key_field, name_field = meta[q["src"]]["key_field"], meta[q["src"]]["name_field"]
    scoped = _where(_where(records, q.get("scope", [])), q.get("filter", []))
    if kind == "value":
        return _find(records, key_field, q["key"])[q["field"]]
    if kind == "abs_change":  # the price now minus the price the change is measured from, as shown
        r = _find(records, key_field, q["key"])
        return r[q["price_field"]] - r[q["prev_field"]]
    if kind == "hop":
        ranked = _ordered(scoped, q["field"], q["order"], key_field)
        return ranked[q["k"] - 1][q["then"]]
    if kind == "delta":
        a, b = (_find(records, key_field, k)[q["field"]] for k in q["keys"])
        return a - b
    if kind == "pick":
        chosen = [_find(records, key_field, k) for k in q["keys"]]
        order = "desc" if q["mode"] == "max" else "asc"
        return _ordered(chosen, q["field"], order, key_field)[0][name_field]
    if kind == "nth":
        ranked = _ordered(scoped, q["field"], q["order"], key_field)
        return ranked[q["k"] - 1][name_field]
    if kind == "top":
        ranked = _ordered(scoped, q["field"], q["order"], key_field)
        return [r[name_field] for r in ranked[: q["n"]]]
    if kind == "members":
        chosen = [_find(records, key_field, k) for k in q["keys"]]
        return sorted(r[name_field] for r in _where(chosen, q["where"]))
    if kind == "count":
        return len(_where(scoped, q["where"]))
    if kind == "share_pct":
        return 100.0 * len(_where(scoped, q["where"])) / max(1, len(scoped))
    raise ValueError(f"unknown question kind {kind!r}")


def refs_of(q: dict) -> list[dict]:
    """Every reference a spec names (``refs``, ``a``/``b``, ``items``' ``now``/``then``)."""
    refs = list(q.get("refs") or [])
    refs += [q[k] for k in ("a", "b") if k in q]
    for item in q.get("items") or []:
        refs += [item["now"], item["then"]]
    return refs


def sources(q: dict) -> list[str]:
    """The ``"site/collection"`` keys (with ``@T`` where a moment is meant) whose records ``compute(q, ...)`` reads."""
    if "src" in q:
        return [q["src"]]
    return sorted({r["src"] for r in refs_of(q)})
