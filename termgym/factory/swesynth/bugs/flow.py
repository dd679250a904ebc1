"""Operators whose wrong value flows out: the mutated line runs fine, a later assertion fails.

A traceback points at the line that raised. Bugs that raise where they are (a removed guard, a
dropped conversion) hand the agent the line to fix; these operators instead change how a value is
*built* -- data preparation, aggregates, dict/keyword construction, comprehension filters -- so the
function returns a plausible but wrong result and the failure shows up in the caller or the test.
Each edit is one a person makes by accident: a forgotten ``.strip()``, ``min`` for ``max``, two
fields filled from each other's variables, a filter left out of a comprehension.
"""

from __future__ import annotations

import ast

from termgym.factory.swesynth.bugs.source import ModuleIndex, Mutation, _Builder

#: Zero-argument methods that normalise a value before use; dropping one is a classic slip.
_NORMALISERS = {"strip", "lstrip", "rstrip", "lower", "upper", "casefold", "title", "capitalize"}
#: One-argument builtins whose result differs from their argument's value in content or order.
_WRAPPERS = {"sorted", "abs", "reversed", "set", "frozenset"}
_AGGREGATE_SWAPS = {"min": "max", "max": "min", "any": "all", "all": "any"}
_SIMPLE = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant, ast.BinOp, ast.UnaryOp)


def find_dropped_normalization(index: ModuleIndex) -> list[Mutation]:
    """Drop a normalising step: ``s.strip()`` -> ``s``, ``sorted(xs)`` -> ``xs``, ``reverse=True`` dropped."""
    b = _Builder(index, "dropped-normalization")
    src = index.src
    for site in index.nodes(ast.Call):
        node = site.node
        func = node.func
        # "name = name.strip()" would become "name = name": that statement is dropped whole (placement's skipped-step)
        in_place = _normalises_in_place(site)
        if not in_place and isinstance(func, ast.Attribute) and func.attr in _NORMALISERS and not node.args \
                and not node.keywords:
            start, end = src.span(node)
            b.add(start, end, src.segment(func.value), site, f".{func.attr}() was dropped")
        elif not in_place and isinstance(func, ast.Name) and func.id in _WRAPPERS and len(node.args) == 1 \
                and not node.keywords and not isinstance(node.args[0], ast.Starred):
            arg = node.args[0]
            if func.id in {"sorted", "reversed"} and isinstance(arg, (ast.GeneratorExp,)):
                continue  # the bare generator would not be a sequence any more: it raises where it is
            start, end = src.span(node)
            text = src.segment(arg)
            b.add(start, end, text if isinstance(arg, (ast.Name, ast.Attribute, ast.Subscript, ast.Call,
                                                       ast.List, ast.ListComp)) else f"({text})",
                  site, f"{func.id}() was dropped")
        for kw in node.keywords:
            if kw.arg in {"reverse", "key"} and (isinstance(func, ast.Name) and func.id in {"sorted", "min", "max"}
                                                  or isinstance(func, ast.Attribute) and func.attr == "sort"):
                _drop_keyword(b, site, node, kw)
    return b.out


def _normalises_in_place(site) -> bool:
    """``name = name.strip()`` / ``name = sorted(name)``: the call is a whole assignment's value and its
    receiver (or only argument) is the assigned name, so dropping the call leaves ``name = name``."""
    node, parent = site.node, site.parent
    if not (isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name)):
        return False
    name, func = parent.targets[0].id, node.func
    receiver = func.value if isinstance(func, ast.Attribute) else (node.args[0] if len(node.args) == 1 else None)
    return isinstance(receiver, ast.Name) and receiver.id == name


def _drop_keyword(b: _Builder, site, call: ast.Call, kw: ast.keyword) -> None:
    """Remove one keyword argument with the comma that separates it from its neighbour."""
    src = b.index.src
    start, end = src.offset(kw.lineno, kw.col_offset), src.span(kw.value)[1]
    items = [*call.args, *call.keywords]
    items.sort(key=lambda n: (n.lineno, n.col_offset))
    pos = items.index(kw)
    if pos > 0:  # take the comma before it: "f(x, key=k)" -> "f(x)"
        prev_end = src.span(items[pos - 1].value if isinstance(items[pos - 1], ast.keyword) else items[pos - 1])[1]
        gap = src.text[prev_end:start]
        if gap.strip() != ",":
            return
        start = prev_end
    elif len(items) > 1:  # the first argument: take the comma after it
        nxt = items[pos + 1]
        nxt_start = src.offset(nxt.lineno, nxt.col_offset)
        if src.text[end:nxt_start].strip() != ",":
            return
        end = nxt_start
    if "\n" in src.text[start:end]:
        return
    b.add(start, end, "", site, f"the {kw.arg}= argument was dropped")


def find_wrong_aggregate(index: ModuleIndex) -> list[Mutation]:
    """The wrong aggregate of a sequence: ``min`` for ``max``, ``any`` for ``all``."""
    b = _Builder(index, "wrong-aggregate")
    src = index.src
    for site in index.nodes(ast.Call):
        func = site.node.func
        if isinstance(func, ast.Name) and func.id in _AGGREGATE_SWAPS and site.node.args:
            start, end = src.span(func)
            b.add(start, end, _AGGREGATE_SWAPS[func.id], site, f"{func.id}() became {_AGGREGATE_SWAPS[func.id]}()")
    return b.out


def find_swapped_values(index: ModuleIndex) -> list[Mutation]:
    """Two neighbouring fields filled from each other's values (dict literal, keyword arguments, tuple)."""
    b = _Builder(index, "swapped-values")
    src = index.src
    for site in index.nodes(ast.Dict, ast.Call, ast.Return):
        node = site.node
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values, strict=True) if k is not None]
            pairs = list(zip(values, values[1:], strict=False))
            what = "two dict values"
        elif isinstance(node, ast.Call):
            values = [kw.value for kw in node.keywords if kw.arg is not None]
            pairs = list(zip(values, values[1:], strict=False))
            what = "two keyword arguments' values"
        else:
            if not isinstance(node.value, ast.Tuple) or len(node.value.elts) < 2:
                continue
            values = node.value.elts
            pairs = list(zip(values, values[1:], strict=False))
            what = "two returned values"
        for a, c in pairs:
            if not (isinstance(a, _SIMPLE) and isinstance(c, _SIMPLE)):
                continue
            ta, tc = src.segment(a), src.segment(c)
            if ta == tc or "\n" in ta or "\n" in tc or isinstance(a, ast.Constant) or isinstance(c, ast.Constant):
                continue  # a literal moved into a value's place reads like a typo in data, not a wiring slip
            (s0, e0), (s1, e1) = src.span(a), src.span(c)
            b.add(s0, e1, tc + src.text[e0:s1] + ta, site, f"{what} swapped")
            break  # one swap per construction keeps the candidate count proportional to the code
    return b.out


def find_dropped_filter(index: ModuleIndex) -> list[Mutation]:
    """A comprehension keeps items it should filter out: its ``if`` clause is dropped."""
    b = _Builder(index, "dropped-filter")
    src = index.src
    for site in index.nodes(ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp):
        for gen in site.node.generators:
            if len(gen.ifs) != 1:
                continue
            cond = gen.ifs[0]
            iter_end = src.span(gen.iter)[1]
            cond_start, cond_end = src.span(cond)
            gap = src.text[iter_end:cond_start]
            if gap.strip() != "if" or "\n" in src.text[iter_end:cond_end]:
                continue
            b.add(iter_end, cond_end, "", site, "a comprehension's filter was dropped")
    return b.out


#: The value-flow operators, by bug type.
FLOW_FINDERS = {
    "dropped-normalization": find_dropped_normalization,
    "wrong-aggregate": find_wrong_aggregate,
    "swapped-values": find_swapped_values,
    "dropped-filter": find_dropped_filter,
}

FLOW_DESCRIPTIONS = {
    "dropped-normalization": "a normalising step (strip/lower, sorted, abs, a sort key or order) is left out, "
                             "so a wrong value flows on",
    "wrong-aggregate": "the wrong aggregate is taken (min for max, any for all)",
    "swapped-values": "two neighbouring fields of a dict, call or returned tuple get each other's values",
    "dropped-filter": "a comprehension keeps items its filter should drop",
}
