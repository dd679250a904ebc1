"""AST-guided, format-preserving bug injection.

Each bug type has a *finder* that walks a module's AST and returns every place it could inject that
kind of bug as a :class:`Mutation`: an exact character span of the original source and the text
that replaces it. Only that span changes, so the diff touches only the lines the bug changes and
the file keeps its formatting, comments and quoting everywhere else. Every mutation is checked to
parse and to change the AST before it is offered.

Finders only look inside function bodies (and at parameter defaults for ``wrong-default``): code
there runs when tests call it, while module-level edits tend to break imports wholesale.

This module holds the classic single-edit finders, the registry of every procedural bug type
(:data:`FINDERS` per module, :data:`REPO_FINDERS` over the whole repository) and the planner. The
harder operators live in :mod:`termgym.factory.swesynth.bugs` (value flow, coordinated 2-3-edit bugs,
cross-module helpers), as do the difficulty signals.

Choosing among candidates is the caller's job (:func:`plan_attempts` does it deterministically from
a seed); validation decides which candidates become tasks.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# The mutation machinery lives in bugs.source; its names stay importable from here.
from termgym.factory.swesynth.bugs.callgraph import RepoIndex
from termgym.factory.swesynth.bugs.coordinated import REPO_DESCRIPTIONS, find_cross_module_helper
from termgym.factory.swesynth.bugs.coordinated import REPO_FINDERS as _COORDINATED
from termgym.factory.swesynth.bugs.flow import FLOW_DESCRIPTIONS, FLOW_FINDERS
from termgym.factory.swesynth.bugs.placement import PLACEMENT_DESCRIPTIONS, PLACEMENT_FINDERS
from termgym.factory.swesynth.bugs.source import (  # noqa: F401  (re-exported for callers of inject)
    _ATOMIC,
    _BINOP_SYMBOLS,
    _CMP_PATTERNS,
    _SEPARATOR_SWAPS,
    Builder,
    InjectionError,
    ModuleIndex,
    Mutation,
    Site,
    SourceText,
    _binop_pattern,
    _Builder,
    _constant_replacement,
    _delete_statement,
    _find_operator,
    _function_names,
    _is_block_list,
    _mutate_number,
    _mutate_string,
    _paren,
    _stable_pick,
    _string_literal,
    check_mutation,
    check_unit,
    units,
)
from termgym.factory.swesynth.plausible import is_fixed_order_call, is_string_like
from termgym.tasks.swesynth import pyparse

#: Every bug type of the reference taxonomy, with the sentence the LLM breaker is given.
BUG_TYPE_DESCRIPTIONS: dict[str, str] = {
    "off-by-one": "a boundary error: < versus <=, a range or slice bound or an index off by one",
    "logic-inversion": "an inverted condition: a negation added or dropped, == versus !=, and versus or",
    "wrong-variable": "a different variable of the same scope used in place of the right one",
    "missing-check": "a validation guard that raises on bad input is removed",
    "type-error": "a type conversion is dropped (int(), float(), str(), bool(), tuple())",
    "wrong-operator": "an arithmetic or bitwise operator replaced by a related one",
    "missing-return": "a return statement loses its 'return', so the function yields None there",
    "exception-swallow": "an exception that should propagate is silently ignored",
    "wrong-constant": "a literal number, string or boolean in the logic has the wrong value",
    "string-format": "a formatted string renders its pieces in the wrong order, spec or separator",
    "order-dependency": "two dependent statements or arguments are swapped",
    "early-exit": "a loop stops too early (continue becomes break, or a stray break)",
    "wrong-default": "a parameter default or a fallback value is wrong",
    "missing-edge-case": "a guard or elif branch handling a special case (empty input, zero, None) is removed",
    "incomplete-update": "one of several state updates is forgotten",
    "state-corruption": "a defensive copy is dropped so callers share and corrupt state",
    "semantic-error": "the code does something plausible but subtly different from what it should",
    "wrong-context": "the right operation is applied to the wrong object, scope or context",
    "silent-failure": "an error condition returns a plausible value instead of signalling failure",
    "resource-leak": "a resource is opened but not closed or released on some path",
    "timing-error": "an operation happens at the wrong time relative to another",
}


# -- the finders, one per bug type -------------------------------------------------------------


def _replace_comparisons(b: _Builder, index: ModuleIndex, replacements: dict[type, str]) -> None:
    """Add a mutation per comparison operator in ``replacements``: the operator text becomes its value."""
    src = index.src
    for site in index.nodes(ast.Compare):
        node = site.node
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            if type(op) not in replacements:
                continue
            gap_start, gap_end = src.span(operands[i])[1], src.span(operands[i + 1])[0]
            m = _find_operator(src.text[gap_start:gap_end], _CMP_PATTERNS[type(op)])
            if m:
                b.add(gap_start + m.start(), gap_start + m.end(), replacements[type(op)], site,
                      f"comparison {m.group()} became {replacements[type(op)]}")


def find_off_by_one(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "off-by-one")
    src = index.src
    _replace_comparisons(b, index, {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"})
    for site in index.nodes(ast.Call):
        node = site.node
        if isinstance(node.func, ast.Name) and node.func.id == "range" and node.args and not node.keywords:
            arg = node.args[1] if len(node.args) >= 2 else node.args[0]
            start, end = src.span(arg)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                b.add(start, end, repr(arg.value + 1), site, "range bound moved by one")
            else:
                delta = " + 1" if (node.lineno + node.col_offset) % 2 else " - 1"
                b.add(start, end, _paren(src.segment(arg), arg) + delta, site, "range bound moved by one")
    for site in index.nodes(ast.Subscript):
        node = site.node
        bounds = [node.slice.lower, node.slice.upper] if isinstance(node.slice, ast.Slice) else [node.slice]
        for bound in bounds:
            if isinstance(bound, ast.Constant) and type(bound.value) is int:
                start, end = src.span(bound)
                b.add(start, end, repr(bound.value + 1), site, "index or slice bound moved by one")
            elif isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub) \
                    and isinstance(bound.operand, ast.Constant) and type(bound.operand.value) is int:
                start, end = src.span(bound)
                b.add(start, end, f"-{bound.operand.value + 1}", site, "negative index moved by one")
    for site in index.nodes(ast.BinOp):
        node = site.node
        if isinstance(node.op, (ast.Add, ast.Sub)) and isinstance(node.right, ast.Constant) \
                and node.right.value == 1 and type(node.right.value) is int and isinstance(node.left, _ATOMIC):
            start, end = src.span(node)
            b.add(start, end, src.segment(node.left), site, "a +/- 1 adjustment was dropped")
    return b.out


def find_logic_inversion(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "logic-inversion")
    src = index.src
    swaps = {ast.Eq: "!=", ast.NotEq: "==", ast.In: "not in", ast.NotIn: "in", ast.Is: "is not",
             ast.IsNot: "is"}
    _replace_comparisons(b, index, swaps)
    for site in index.nodes(ast.BoolOp):
        node = site.node
        if len(node.values) != 2:
            continue
        gap_start, gap_end = src.span(node.values[0])[1], src.span(node.values[1])[0]
        word = "and" if isinstance(node.op, ast.And) else "or"
        m = _find_operator(src.text[gap_start:gap_end], rf"\b{word}\b")
        if m:
            other = "or" if word == "and" else "and"
            b.add(gap_start + m.start(), gap_start + m.end(), other, site, f"'{word}' became '{other}'")
    for site in index.nodes(ast.UnaryOp):
        node = site.node
        if isinstance(node.op, ast.Not):
            start = src.span(node)[0]
            op_start = src.span(node.operand)[0]
            prefix = src.text[start:op_start]
            m = re.match(r"not\s*", prefix)
            if m:
                b.add(start, start + m.end(), "", site, "a negation was dropped")
    for site in index.nodes(ast.If, ast.IfExp):
        test = site.node.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) or (
                isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in swaps):
            continue  # dropping that 'not' / flipping that comparison is already a candidate above
        start, end = src.span(test)
        text = src.segment(test)
        b.add(start, end, f"not {_paren(text, test)}" if isinstance(test, _ATOMIC) else f"not ({text})",
              site, "a condition was negated")
    return b.out


def find_wrong_variable(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "wrong-variable")
    cache: dict[int, dict[str, int]] = {}
    for site in index.nodes(ast.Name):
        node = site.node
        if not isinstance(node.ctx, ast.Load):
            continue
        names = cache.setdefault(id(site.func), _function_names(site.func))
        if node.id not in names:
            continue
        alternatives = sorted(n for n, line in names.items() if n != node.id and line < node.lineno)
        if not alternatives:
            continue
        alt = _stable_pick(alternatives, node.lineno * 31 + node.col_offset)
        start, end = index.src.span(node)
        b.add(start, end, alt, site, f"{node.id} replaced by {alt}")
    return b.out


def _guard(site: Site, kinds: tuple[type, ...]) -> bool:
    node = site.node
    return isinstance(node, ast.If) and not node.orelse and isinstance(node.body[-1], kinds) \
        and len(node.body) <= 2


def find_missing_check(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "missing-check")
    for site in index.nodes(ast.If):
        if _guard(site, (ast.Raise,)):
            _delete_statement(b, site, "a validation guard was removed")
    return b.out


def _special_case_assignment(site: Site) -> bool:
    """``if x is None: x = []``, ``if isinstance(v, str): v = [v]``: a guard of one or two statements
    whose last gives a name its condition reads a new value (the special case made ordinary)."""
    node = site.node
    if not _guard(site, (ast.Assign, ast.AugAssign)):
        return False
    last = node.body[-1]
    targets = last.targets if isinstance(last, ast.Assign) else [last.target]
    assigned = {t.id for t in targets if isinstance(t, ast.Name)}
    return bool(assigned & {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)})


def _drop_elif(b: _Builder, site: Site) -> None:
    """Remove the ``elif`` branch that ``site``'s ``if`` continues with (one or two statements that
    own their lines), so its case falls through to the branches after it."""
    node, src = site.node, b.index.src
    if len(node.orelse) != 1 or not isinstance(node.orelse[0], ast.If):
        return
    branch = node.orelse[0]
    first, end = src.line_span(branch.lineno, branch.body[-1].end_lineno)
    if not src.text[first:].lstrip(" \t").startswith("elif ") or len(branch.body) > 2 \
            or not all(src.owns_lines(st) for st in branch.body) \
            or any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in branch.body):
        return
    b.add(first, end, "", site, "a special-case branch (elif) was removed")


def find_missing_edge_case(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "missing-edge-case")
    for site in index.nodes(ast.If):
        if _guard(site, (ast.Return, ast.Continue)):
            _delete_statement(b, site, "a special-case branch was removed")
        elif _special_case_assignment(site):
            _delete_statement(b, site, "a special case's normalisation was removed")
        _drop_elif(b, site)
    return b.out


def find_type_error(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "type-error")
    for site in index.nodes(ast.Call):
        node = site.node
        if isinstance(node.func, ast.Name) and node.func.id in {"int", "float", "str", "bool", "tuple", "Decimal"} \
                and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            arg = node.args[0]
            start, end = index.src.span(node)
            b.add(start, end, _paren(index.src.segment(arg), arg), site, f"{node.func.id}() conversion dropped")
    return b.out


def find_wrong_operator(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "wrong-operator")
    src = index.src
    swaps = {ast.Add: "-", ast.Sub: "+", ast.Mult: "/", ast.Div: "*", ast.FloorDiv: "/", ast.Mod: "//",
             ast.Pow: "*", ast.BitAnd: "|", ast.BitOr: "&", ast.LShift: ">>", ast.RShift: "<<"}
    for site in index.nodes(ast.BinOp, ast.AugAssign):
        node = site.node
        if type(node.op) not in swaps:
            continue
        left = node.target if isinstance(node, ast.AugAssign) else node.left
        right = node.value if isinstance(node, ast.AugAssign) else node.right
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)) and (
                isinstance(node.left, (ast.Constant, ast.JoinedStr)) and isinstance(node.left.value, str)
                if isinstance(node.left, ast.Constant) else isinstance(node.left, ast.JoinedStr)):
            continue  # string concatenation / %-formatting: not arithmetic
        if isinstance(node.op, (ast.Add, ast.Mod, ast.Mult)) and (is_string_like(left) or is_string_like(right)):
            continue  # 'a' - 'b', [x] / 2: an operation the operands' types refuse is no person's slip
        symbol = _BINOP_SYMBOLS[type(node.op)] + ("=" if isinstance(node, ast.AugAssign) else "")
        gap_start, gap_end = src.span(left)[1], src.span(right)[0]
        pattern = _binop_pattern(symbol) if isinstance(node, ast.BinOp) else re.escape(symbol)
        m = _find_operator(src.text[gap_start:gap_end], pattern)
        if m:
            new = swaps[type(node.op)] + ("=" if isinstance(node, ast.AugAssign) else "")
            b.add(gap_start + m.start(), gap_start + m.end(), new, site, f"operator {symbol} became {new}")
    return b.out


def find_missing_return(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "missing-return")
    for site in index.nodes(ast.Return):
        node = site.node
        if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
            continue
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(site.func)):
            continue
        start = index.src.span(node)[0]
        value_start = index.src.span(node.value)[0]
        prefix = index.src.text[start:value_start]
        m = re.match(r"return[ \t]*", prefix)
        if m and "\n" not in prefix:
            b.add(start, start + m.end(), "", site, "'return' dropped from a return statement")
    return b.out


def find_exception_swallow(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "exception-swallow")
    for site in index.nodes(ast.Raise):
        node = site.node
        if not index.src.owns_lines(node):
            continue
        start, end = index.src.span(node)
        b.add(start, end, "pass", site, "a raise was replaced by pass")
    return b.out


def find_wrong_constant(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "wrong-constant")
    for site in index.nodes(ast.Constant):
        node = site.node
        if id(node) in index.docstrings:
            continue
        if isinstance(site.parent, ast.Subscript) or isinstance(site.parent, ast.Slice):
            continue  # indices belong to off-by-one
        if isinstance(site.parent, ast.Call) and isinstance(site.parent.func, ast.Attribute) \
                and site.parent.func.attr in {"get", "pop", "setdefault"} and node in site.parent.args[1:]:
            continue  # fallbacks belong to wrong-default
        new = _constant_replacement(index.src, node, node.lineno + node.col_offset)
        if new is not None:
            start, end = index.src.span(node)
            b.add(start, end, new, site, f"constant {index.src.segment(node)} became {new}")
    return b.out


def _fstring_fields(body: str) -> list[tuple[int, int]]:
    """Top-level ``{...}`` replacement fields of an f-string body, as (start, end) offsets."""
    fields, depth, i, start = [], 0, 0, 0
    while i < len(body):
        ch = body[i]
        if depth == 0 and body.startswith("{{", i):
            i += 2
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                fields.append((start, i + 1))
        i += 1
    return fields


def find_string_format(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "string-format")
    src = index.src
    for site in index.sites:
        node = site.node
        if isinstance(node, ast.JoinedStr) and id(node) not in index.in_fstring:
            seg = src.segment(node)
            m = re.fullmatch(r"([fFrR]{1,2})('|\")(.*)\2", seg, re.S)
            if not m or "\n" in seg:
                continue
            base = src.span(node)[0] + len(m.group(1)) + 1
            body = m.group(3)
            fields = _fstring_fields(body)
            if len(fields) >= 2:
                (s1, e1), (s2, e2) = fields[0], fields[1]
                swapped = body[s2:e2] + body[e1:s2] + body[s1:e1]
                if body[s1:e1] != body[s2:e2]:
                    b.add(base + s1, base + e2, swapped, site, "two formatted fields swapped places")
            for s, e in fields:
                spec = re.search(r":([<>^]?)(\d*)\.(\d+)([fe%])\}$", body[s:e])
                if spec:
                    digits = int(spec.group(3))
                    new_field = body[s:e][: spec.start(3)] + str(digits + 1 if digits < 2 else digits - 1) \
                        + body[s:e][spec.end(3):]
                    b.add(base + s, base + e, new_field, site, "a format precision changed")
            if len(fields) >= 2:
                between = body[fields[0][1]:fields[1][0]]
                if between and between in _SEPARATOR_SWAPS and "{" not in _SEPARATOR_SWAPS[between]:
                    b.add(base + fields[0][1], base + fields[1][0], _SEPARATOR_SWAPS[between], site,
                          "a separator in a formatted string changed")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str) \
                and id(node) not in index.in_fstring:
            attr = node.func.attr
            if attr == "format" and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args):
                a0, a1 = node.args[0], node.args[1]
                t0, t1 = src.segment(a0), src.segment(a1)
                if t0 != t1:
                    s0, e0 = src.span(a0)
                    s1, e1 = src.span(a1)
                    b.add(s0, e1, t1 + src.text[e0:s1] + t0, site, "format arguments swapped")
            elif attr == "join":
                new = _constant_replacement(src, node.func.value, 0)
                if new is not None:
                    start, end = src.span(node.func.value)
                    b.add(start, end, new, site, "join separator changed")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str) and isinstance(node.right, ast.Tuple) \
                and len(node.right.elts) >= 2:
            a0, a1 = node.right.elts[0], node.right.elts[1]
            t0, t1 = src.segment(a0), src.segment(a1)
            if t0 != t1:
                s0, e0 = src.span(a0)
                s1, e1 = src.span(a1)
                b.add(s0, e1, t1 + src.text[e0:s1] + t0, site, "%-format arguments swapped")
    return b.out


def _names(node: ast.AST, ctx: type) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ctx):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ctx):
            out.add(ast.unparse(n))
        elif isinstance(n, ast.Attribute) and ctx is ast.Load:
            out.add(ast.unparse(n))
    return out


def _writes(stmt: ast.stmt) -> set[str]:
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    out = set()
    for t in targets:
        out |= _names(t, ast.Store)
    if isinstance(stmt, ast.AugAssign):
        out |= {ast.unparse(stmt.target)}
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        out.add(ast.unparse(stmt.value.func.value))  # a mutating method call like items.append(x)
    return out


def _reads(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        value = stmt.value
        reads = _names(value, ast.Load) if value is not None else set()
        if isinstance(stmt, ast.AugAssign):
            reads.add(ast.unparse(stmt.target))
        return reads
    return _names(stmt, ast.Load)


def find_order_dependency(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "order-dependency")
    src = index.src
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
    for func, qual in index.functions:
        site_for = Site(func, func, func, qual)
        for node in ast.walk(func):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if not isinstance(block, list):
                    continue
                for s1, s2 in zip(block, block[1:], strict=False):
                    if not (isinstance(s1, simple) and isinstance(s2, simple)):
                        continue
                    if isinstance(s1, ast.Expr) and isinstance(s1.value, ast.Constant):
                        continue  # a docstring
                    if not (src.owns_lines(s1) and src.owns_lines(s2)) or s2.lineno != s1.end_lineno + 1:
                        continue
                    w1, w2 = _writes(s1), _writes(s2)
                    if not ((w1 & _reads(s2)) or (w2 & _reads(s1)) or (w1 & w2)):
                        continue
                    a_start, a_end = src.line_span(s1.lineno, s1.end_lineno)
                    c_start, c_end = src.line_span(s2.lineno, s2.end_lineno)
                    first, second = src.text[a_start:a_end], src.text[c_start:c_end]
                    if not second.endswith("\n"):
                        continue
                    b.add(a_start, c_end, second + first, site_for, "two dependent statements swapped")
    for site in index.nodes(ast.Call):
        node = site.node
        if len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Name) \
                and node.args[0].id != node.args[1].id and not is_fixed_order_call(node):
            # isinstance(Duration, other): nobody writes a built-in's arguments the wrong way round
            a0, a1 = node.args[0], node.args[1]
            s0, e0 = src.span(a0)
            s1, e1 = src.span(a1)
            b.add(s0, e1, a1.id + src.text[e0:s1] + a0.id, site, "two call arguments swapped")
    return b.out


def find_early_exit(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "early-exit")
    src = index.src
    for site in index.nodes(ast.Continue):
        start, end = src.span(site.node)
        b.add(start, end, "break", site, "continue became break")
    for site in index.nodes(ast.For):
        node = site.node
        last = node.body[-1]
        if node.orelse or isinstance(last, (ast.Break, ast.Return, ast.Raise, ast.Continue)):
            continue
        if not src.owns_lines(last) or last.lineno == node.lineno:
            continue
        _, end = src.line_span(last.end_lineno, last.end_lineno)
        if not src.text[:end].endswith("\n"):
            continue
        b.add(end, end, f"{src.indent_of(last.lineno)}break\n", site, "the loop stops after its first pass")
    return b.out


def find_wrong_default(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "wrong-default")
    for func, qual in index.functions:
        site = Site(func, func, func, qual)
        for default in [*func.args.defaults, *(d for d in func.args.kw_defaults if d is not None)]:
            if isinstance(default, ast.Constant):
                new = _constant_replacement(index.src, default, default.lineno + default.col_offset)
                if new is not None:
                    start, end = index.src.span(default)
                    b.add(start, end, new, site, f"default {index.src.segment(default)} became {new}")
    for site in index.nodes(ast.Call):
        node = site.node
        if isinstance(node.func, ast.Attribute) and node.func.attr in {"get", "pop", "setdefault"} \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            new = _constant_replacement(index.src, node.args[1], node.lineno)
            if new is not None:
                start, end = index.src.span(node.args[1])
                b.add(start, end, new, site, "a fallback value changed")
    return b.out


_MUTATING_METHODS = {"append", "add", "update", "extend", "insert", "remove", "discard", "setdefault",
                     "appendleft", "clear", "pop"}


def find_incomplete_update(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "incomplete-update")
    for site in index.nodes(ast.AugAssign, ast.Assign, ast.Expr):
        node = site.node
        if isinstance(node, ast.Assign) and not any(isinstance(t, (ast.Attribute, ast.Subscript))
                                                    for t in node.targets):
            continue
        if isinstance(node, ast.Expr) and not (isinstance(node.value, ast.Call)
                                               and isinstance(node.value.func, ast.Attribute)
                                               and node.value.func.attr in _MUTATING_METHODS):
            continue
        _delete_statement(b, site, "a state update was removed")
    return b.out


def find_state_corruption(index: ModuleIndex) -> list[Mutation]:
    b = _Builder(index, "state-corruption")
    src = index.src
    for site in index.nodes(ast.Call):
        node = site.node
        target = None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "copy" and not node.args:
            target = node.func.value
        elif isinstance(node.func, ast.Name) and node.func.id in {"list", "dict"} and len(node.args) == 1 \
                and not node.keywords and isinstance(node.args[0], (ast.Name, ast.Attribute)):
            target = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr in {"copy", "deepcopy"} \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "copy" and len(node.args) == 1:
            target = node.args[0]
        if target is not None and isinstance(target, _ATOMIC):
            start, end = src.span(node)
            b.add(start, end, src.segment(target), site, "a defensive copy was dropped")
    for site in index.nodes(ast.Subscript):
        node = site.node
        if isinstance(node.slice, ast.Slice) and node.slice.lower is None and node.slice.upper is None \
                and node.slice.step is None and isinstance(node.ctx, ast.Load) and isinstance(node.value, _ATOMIC):
            start, end = src.span(node)
            b.add(start, end, src.segment(node.value), site, "a defensive copy was dropped")
    return b.out


#: The procedural injectors, by bug type.
FINDERS: dict[str, Callable[[ModuleIndex], list[Mutation]]] = {
    "off-by-one": find_off_by_one,
    "logic-inversion": find_logic_inversion,
    "wrong-variable": find_wrong_variable,
    "missing-check": find_missing_check,
    "type-error": find_type_error,
    "wrong-operator": find_wrong_operator,
    "missing-return": find_missing_return,
    "exception-swallow": find_exception_swallow,
    "wrong-constant": find_wrong_constant,
    "string-format": find_string_format,
    "order-dependency": find_order_dependency,
    "early-exit": find_early_exit,
    "wrong-default": find_wrong_default,
    "missing-edge-case": find_missing_edge_case,
    "incomplete-update": find_incomplete_update,
    "state-corruption": find_state_corruption,
    # Value-flow operators (bugs/flow.py): the wrong value surfaces away from the changed line.
    **FLOW_FINDERS,
    # Placement operators (bugs/placement.py): whole statements in the wrong place or left out.
    **PLACEMENT_FINDERS,
}
#: Repository-level operators (bugs/coordinated.py): coordinated 2-3-edit bugs and value bugs in
#: helpers other modules call. Each takes the whole repository's :class:`RepoIndex`.
REPO_FINDERS: dict[str, Callable[[RepoIndex], list[Mutation]]] = {
    **_COORDINATED,
    "cross-module-helper": lambda repo: find_cross_module_helper(repo, FINDERS),
}
for _types in (FLOW_DESCRIPTIONS, REPO_DESCRIPTIONS, PLACEMENT_DESCRIPTIONS):
    for _t, _text in _types.items():
        BUG_TYPE_DESCRIPTIONS.setdefault(_t, _text)
PROCEDURAL_TYPES: tuple[str, ...] = (*FINDERS, *REPO_FINDERS)
#: The operators made to be harder (multi-edit, cross-module, wrong value surfacing elsewhere).
HARD_TYPES: tuple[str, ...] = (*REPO_FINDERS, *FLOW_FINDERS, *PLACEMENT_FINDERS)
#: Types only the LLM breaker produces.
LLM_ONLY_TYPES: tuple[str, ...] = tuple(t for t in BUG_TYPE_DESCRIPTIONS if t not in PROCEDURAL_TYPES)


class NoCandidatesError(ValueError):
    """No place in the given source files admits any of the requested bug types."""


def check_bug_types(bug_types: Iterable[str] | None, *, allow_llm: bool = False) -> list[str]:
    """Validate a user's list of bug types (``None``: every procedural type)."""
    if bug_types is None:
        return list(PROCEDURAL_TYPES)
    known = set(BUG_TYPE_DESCRIPTIONS) if allow_llm else set(PROCEDURAL_TYPES)
    out = []
    for t in bug_types:
        if t not in known:
            hint = " (it needs the LLM breaker: pass an endpoint)" if t in BUG_TYPE_DESCRIPTIONS else ""
            raise ValueError(f"unknown bug type {t!r}{hint}; known: {', '.join(sorted(known))}")
        if t not in out:
            out.append(t)
    if not out:
        raise ValueError("bug_types is empty")
    return out


def find_mutations(path: str, text: str, bug_types: Iterable[str] | None = None) -> list[Mutation]:
    """Every candidate mutation of one module, for the given bug types (default: all procedural).

    ``path`` is the file's path relative to the repository root (it is recorded in each mutation).
    Files that do not parse yield nothing (:func:`find_bugs` names them instead). Repository-level
    types see this one module as the whole repository.
    """
    try:
        index = ModuleIndex(path, text)
    except SyntaxError:
        return []
    types = check_bug_types(bug_types)
    out: list[Mutation] = []
    for bug_type in types:
        if bug_type in FINDERS:
            out.extend(FINDERS[bug_type](index))
    repo_types = [t for t in types if t in REPO_FINDERS]
    if repo_types:
        repo = RepoIndex({path: text})
        for bug_type in repo_types:
            out.extend(REPO_FINDERS[bug_type](repo))
    return out


def find_bugs(files: dict[str, str], bug_types: Iterable[str] | None = None, *,
              strict: bool = True, test_texts: dict[str, str] | None = None) -> list[Mutation]:
    """Every candidate of a repository's source files (path -> text), module and repository operators.

    With ``strict`` (the default) a file that does not parse raises :class:`SyntaxError` naming the
    file and line, and finding no candidate at all raises :class:`NoCandidatesError` naming the
    types and files; without it unparsable files are skipped (real sdists ship Python-2 leftovers).
    ``test_texts`` (test file -> text) steers the cross-module operator away from helpers the tests
    call by name.
    """
    types = check_bug_types(bug_types)
    repo = RepoIndex(files, test_texts)
    if strict and repo.unparsable:
        path = repo.unparsable[0]
        try:
            pyparse.parse(files[path])
        except SyntaxError as exc:
            raise SyntaxError(f"cannot scan {path} for bugs: it does not parse "
                              f"(line {exc.lineno}: {exc.msg})") from None
    out: list[Mutation] = []
    for index in repo.modules.values():
        for bug_type in types:
            if bug_type in FINDERS:
                out.extend(FINDERS[bug_type](index))
    for bug_type in types:
        if bug_type in REPO_FINDERS:
            out.extend(REPO_FINDERS[bug_type](repo))
    if strict and not out:
        shown = ", ".join(sorted(files)[:5]) + (" ..." if len(files) > 5 else "")
        raise NoCandidatesError(f"no candidate site for bug types {', '.join(types)} in "
                                f"{len(files)} file(s): {shown or '(none)'}")
    return out


def apply_mutations(text: str, mutations: Sequence[Mutation]) -> str:
    """Apply mutations of one file's ``text`` (original offsets), refusing overlapping spans."""
    ordered = sorted(mutations, key=lambda m: (m.start, m.end))
    for a, c in zip(ordered, ordered[1:], strict=False):
        if c.start < a.end or (c.start == a.start and a.start == a.end):
            raise InjectionError(f"mutations overlap in {a.path} at offsets {a.start}-{a.end} and {c.start}-{c.end}")
    out = text
    for m in reversed(ordered):
        out = out[: m.start] + m.replacement + out[m.end:]
    try:
        pyparse.parse(out)
    except SyntaxError as exc:
        raise InjectionError(f"mutated {ordered[0].path} does not parse: {exc}") from None
    return out


def mutate_files(files: dict[str, str], mutations: Sequence[Mutation]) -> dict[str, str]:
    """New text of every file the mutations touch: ``{path: mutated text}``."""
    by_path: dict[str, list[Mutation]] = {}
    for m in mutations:
        if m.path not in files:
            raise InjectionError(f"mutation targets {m.path!r}, which is not among the repository's source files")
        by_path.setdefault(m.path, []).append(m)
    return {path: apply_mutations(files[path], ms) for path, ms in by_path.items()}


# -- choosing what to try ----------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One candidate bug to validate: its index in the plan and the mutations it combines."""

    index: int
    mutations: tuple[Mutation, ...]

    @property
    def bug_types(self) -> list[str]:
        out: list[str] = []
        for m in self.mutations:
            if m.bug_type not in out:
                out.append(m.bug_type)
        return out


def plan_attempts(candidates: Sequence[Mutation], seed: int, *, files: dict[str, str] | None = None,
                  bug_types: Sequence[str] | None = None, max_bugs: int = 1,
                  limit: int | None = None) -> Iterable[Attempt]:
    """Yield attempts deterministically from ``seed``, cycling through the bug types.

    Bug types take turns (in a seeded order) so a suite covers every type that has candidates;
    within a type the candidate is drawn at random without replacement. A coordinated bug (mutations
    sharing a ``group``) is one candidate: its edits are always drawn together. With ``max_bugs > 1``
    an attempt combines 1..max_bugs candidates of distinct types in distinct functions. The plan never
    looks at validation results, so it is the same whatever the number of workers. With ``files``
    (path -> original text) a drawn candidate that does not parse or changes nothing is skipped.
    """
    if max_bugs < 1 or max_bugs > 3:
        raise ValueError(f"max_bugs must be between 1 and 3, got {max_bugs}")
    rng = random.Random(f"swesynth:{seed}")
    dumps: dict[str, str] = {}
    verdicts: dict[tuple[Mutation, ...], bool] = {}

    def usable(unit: tuple[Mutation, ...]) -> bool:
        if files is None:
            return True
        if unit not in verdicts:
            verdicts[unit] = check_unit(files, unit, dumps)
        return verdicts[unit]

    def compatible(unit: tuple[Mutation, ...], chosen: list[Mutation]) -> bool:
        return all(m.path != c.path or (m.function != c.function and (m.end <= c.start or c.end <= m.start))
                   for m in unit for c in chosen)

    pools: dict[str, list[tuple[Mutation, ...]]] = {}
    ordered = sorted(candidates, key=lambda m: (m.bug_type, m.group, m.path, m.start, m.end, m.replacement))
    for unit in units(ordered):
        pools.setdefault(unit[0].bug_type, []).append(unit)
    order = [t for t in (bug_types or PROCEDURAL_TYPES) if pools.get(t)]
    rng.shuffle(order)
    for pool in pools.values():
        rng.shuffle(pool)
    i = 0
    cursor = 0
    while order and (limit is None or i < limit):
        cursor %= len(order)
        primary = order[cursor]
        k = 1 if max_bugs == 1 else rng.randint(1, max_bugs)
        types = [primary] + rng.sample([t for t in order if t != primary], min(k - 1, len(order) - 1))
        chosen: list[Mutation] = []
        for t in types:
            pool = pools[t]
            while pool and not usable(pool[0]):
                pool.pop(0)
            for j, unit in enumerate(pool):
                if not usable(unit):
                    continue
                if compatible(unit, chosen):
                    chosen.extend(pool.pop(j))
                    break
        # Types whose pool ran dry leave the rotation; the cursor then already points at the next.
        order = [t for t in order if t == primary or pools.get(t)]
        if pools.get(primary):
            cursor += 1
        else:
            order.remove(primary)
        if chosen:
            yield Attempt(index=i, mutations=tuple(chosen))
        i += 1


def _test_texts(root: Path, sources: dict[str, str]) -> dict[str, str]:
    """The repository's test files (``test_*.py``, ``*_test.py``), read as text for the call graph."""
    out: dict[str, str] = {}
    for path in sorted([*root.rglob("test_*.py"), *root.rglob("*_test.py")]):
        rel = path.relative_to(root).as_posix()
        if rel in sources or any(p.startswith(".") or p in {"venv", "site-packages", "node_modules"}
                                 for p in path.relative_to(root).parts[:-1]):
            continue
        try:
            out[rel] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    return out


def scan_repository(root: str | Path, source_files: Sequence[str], bug_types: Iterable[str] | None = None
                    ) -> tuple[dict[str, str], list[Mutation]]:
    """Read the source files of a repository and find every candidate mutation in them."""
    root = Path(root)
    files: dict[str, str] = {}
    # An empty list reads the files without scanning (the LLM breaker brings its own candidates).
    types = check_bug_types(bug_types) if bug_types is None or list(bug_types) else []
    for rel in source_files:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files[rel] = text
    # Lenient: a repository may ship files that do not parse, and a type may have no site in it.
    mutations = find_bugs(files, types, strict=False, test_texts=_test_texts(root, files)) if types else []
    return files, mutations
