"""Operators that put whole statements in the wrong place, or leave one out: mistakes spanning lines.

The value operators change a token; people also get *where* code runs wrong, and those bugs take a
multi-line fix. Each operator here moves or removes whole statements the way a person does by
accident:

* ``late-check`` — a guard (``if <cond>: raise/return``) moved below the statement that uses what it
  checks, so the use runs first (and fails, or has its effect) before the check can stop it;
* ``reset-in-loop`` — an accumulator initialised once before its loop is re-initialised inside it,
  so only the last pass counts;
* ``update-after-loop`` — the last statement of a loop body, an update meant for every pass
  (``total += x``, ``seen.add(x)``), dedented so it runs once, after the loop;
* ``shared-default`` — the ``None`` default a function replaces with a fresh ``[]``/``{}`` on each call
  becomes that mutable literal, its ``if x is None`` guard gone: every call shares one object;
* ``skipped-step`` — a normalising statement (``name = name.strip()``, ``items = sorted(items)``)
  dropped, so the raw value flows on;
* ``missing-handler`` — the ``try``/``except`` around one to three statements is gone, the
  statements kept: the error the handler turned into a fallback (``except ValueError: return
  None``, ``except KeyError: continue``) now escapes to the caller. Only a ``try`` with one handler
  that names what it catches and does not raise again, no ``else`` or ``finally``, and a body of
  plain statements (no nested ``try``, definition or multi-line string, whose indent would change)
  is unwrapped.

What a reader would call machine-made is never produced: only statements that own their lines move,
a block never empties, a guard moves only past a statement that reads a name its condition reads
(and does not assign one), and nothing is rewritten into ``x = x``.
"""

from __future__ import annotations

import ast

from termgym.factory.swesynth.bugs.source import ModuleIndex, Mutation, Site, _Builder, _is_block_list

_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
#: Zero-argument methods that normalise a value, and one-argument built-ins that do.
_NORMALISING_METHODS = {"strip", "lstrip", "rstrip", "lower", "upper", "casefold", "title"}
_NORMALISING_CALLS = {"sorted", "str", "int", "float", "list", "tuple", "set", "frozenset", "abs", "bool"}
_MUTATORS = {"append", "add", "extend", "update", "insert", "appendleft", "setdefault"}


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stores(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _blocks(func: ast.AST):
    """Every statement list inside ``func`` (its body, branches, loop bodies), not nested functions'."""
    stack = [func]
    while stack:
        node = stack.pop()
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)  # an except handler's body is a block of its own, reached here


def _text(index: ModuleIndex, stmt: ast.stmt) -> str | None:
    """The whole lines of ``stmt`` (with their newline), or ``None`` when it shares a line."""
    src = index.src
    if not src.owns_lines(stmt):
        return None
    start, end = src.line_span(stmt.lineno, stmt.end_lineno)
    text = src.text[start:end]
    return text if text.endswith("\n") else None


def _reindent(text: str, old: str, new: str) -> str | None:
    """``text``'s lines with their leading ``old`` indent replaced by ``new`` (``None`` if one lacks it)."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.strip() and not line.startswith(old):
            return None
        out.append(new + line[len(old):] if line.strip() else line)
    return "".join(out)


def find_late_check(index: ModuleIndex) -> list[Mutation]:
    """Move a guard below the next statement, which reads what the guard checks."""
    b = _Builder(index, "late-check")
    for func, qual in index.functions:
        site = Site(func, func, func, qual)
        for block in _blocks(func):
            for guard, use in zip(block, block[1:], strict=False):
                if not (isinstance(guard, ast.If) and not guard.orelse and len(guard.body) <= 2
                        and isinstance(guard.body[-1], (ast.Raise, ast.Return))):
                    continue
                if not isinstance(use, _SIMPLE) or use.lineno != guard.end_lineno + 1:
                    continue
                checked = _loads(guard.test)
                if not checked & _loads(use) or checked & _stores(use):
                    continue
                first, second = _text(index, guard), _text(index, use)
                if first is None or second is None:
                    continue
                start = index.src.line_span(guard.lineno, guard.lineno)[0]
                end = index.src.line_span(use.end_lineno, use.end_lineno)[1]
                b.add(start, end, second + first, site, "a check was moved below the statement that uses what it checks")
    return b.out


def _empty_value(node: ast.AST) -> bool:
    """``[]``, ``{}``, ``set()``, ``list()``, ``dict()``, ``0``, ``0.0`` or ``""``: what an accumulator starts as."""
    if isinstance(node, (ast.List, ast.Dict, ast.Tuple)) and not getattr(node, "elts", None) and not getattr(node, "keys", None):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"set", "list", "dict"} \
            and not node.args and not node.keywords:
        return True
    return isinstance(node, ast.Constant) and node.value in (0, "", b"") and not isinstance(node.value, bool)


def _accumulates(loop: ast.AST, name: str) -> bool:
    """Whether ``loop``'s body adds to ``name`` (``name += ...``, ``name.append(...)``, ``name[k] = ...``)."""
    for node in ast.walk(loop):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                                and t.value.id == name for t in node.targets):
            return True
    return False


def find_reset_in_loop(index: ModuleIndex) -> list[Mutation]:
    """Move an accumulator's initialisation from before its loop to the top of the loop's body."""
    b = _Builder(index, "reset-in-loop")
    src = index.src
    for func, qual in index.functions:
        site = Site(func, func, func, qual)
        for block in _blocks(func):
            for init, loop in zip(block, block[1:], strict=False):
                if not (isinstance(init, ast.Assign) and len(init.targets) == 1 and isinstance(init.targets[0], ast.Name)
                        and _empty_value(init.value) and isinstance(loop, (ast.For, ast.While))):
                    continue
                name = init.targets[0].id
                first = loop.body[0]
                text = _text(index, init)
                if text is None or loop.lineno != init.end_lineno + 1 or first.lineno <= loop.lineno \
                        or not _accumulates(loop, name) or not src.owns_lines(first):
                    continue
                moved = _reindent(text, src.indent_of(init.lineno), src.indent_of(first.lineno))
                if moved is None:
                    continue
                start, _ = src.line_span(init.lineno, init.end_lineno)
                header_start, _ = src.line_span(loop.lineno, loop.lineno)
                body_start, _ = src.line_span(first.lineno, first.lineno)
                b.add(start, body_start, src.text[header_start:body_start] + moved, site,
                      f"{name} is reset on every pass of the loop instead of once before it")
    return b.out


def find_update_after_loop(index: ModuleIndex) -> list[Mutation]:
    """Dedent a loop body's last statement, an update meant for every pass, so it runs once after the loop."""
    b = _Builder(index, "update-after-loop")
    src = index.src
    for site in index.nodes(ast.For):
        loop = site.node
        if loop.orelse or len(loop.body) < 2:
            continue
        last = loop.body[-1]
        target = _stores(loop.target)
        if isinstance(last, ast.AugAssign) and isinstance(last.target, ast.Name):
            name = last.target.id
        elif isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) \
                and isinstance(last.value.func, ast.Attribute) and last.value.func.attr in _MUTATORS \
                and isinstance(last.value.func.value, ast.Name):
            name = last.value.func.value.id
        else:
            continue
        per_pass = target | {n for stmt in loop.body[:-1] for n in _stores(stmt)}
        if name in per_pass or not _loads(last) & per_pass:
            continue  # the update must use what each pass makes: after the loop it sees only the last one
        text = _text(index, last)
        if text is None or last.end_lineno != loop.end_lineno:
            continue
        moved = _reindent(text, src.indent_of(last.lineno), src.indent_of(loop.lineno))
        if moved is None:
            continue
        start, end = src.line_span(last.lineno, last.end_lineno)
        b.add(start, end, moved, site, f"the update of {name} runs once after the loop instead of on every pass")
    return b.out


def _none_guard(stmt: ast.stmt, name: str) -> ast.AST | None:
    """The fresh value of ``if name is None: name = <empty>`` (or ``name = name or <empty>``), else ``None``."""
    if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 and isinstance(stmt.test, ast.Compare) \
            and isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == name \
            and len(stmt.test.ops) == 1 and isinstance(stmt.test.ops[0], ast.Is) \
            and isinstance(stmt.test.comparators[0], ast.Constant) and stmt.test.comparators[0].value is None:
        assign = stmt.body[0]
    elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BoolOp) and isinstance(stmt.value.op, ast.Or) \
            and len(stmt.value.values) == 2 and isinstance(stmt.value.values[0], ast.Name) \
            and stmt.value.values[0].id == name:
        return stmt.value.values[1] if _mutable_empty(stmt.value.values[1]) and _assigns(stmt, name) else None
    else:
        return None
    if isinstance(assign, ast.Assign) and _assigns(assign, name) and _mutable_empty(assign.value):
        return assign.value
    return None


def _assigns(stmt: ast.Assign, name: str) -> bool:
    return len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name


def _mutable_empty(node: ast.AST) -> bool:
    return _empty_value(node) and not isinstance(node, (ast.Constant, ast.Tuple))


def find_shared_default(index: ModuleIndex) -> list[Mutation]:
    """``def f(x=None): if x is None: x = []`` -> ``def f(x=[]):``: one list shared by every call."""
    b = _Builder(index, "shared-default")
    src = index.src
    for func, qual in index.functions:
        site = Site(func, func, func, qual)
        args = func.args
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        for arg, default in pairs:
            if not (isinstance(default, ast.Constant) and default.value is None):
                continue
            for stmt in body[:3]:  # the guard sits at the top, where people put it
                fresh = _none_guard(stmt, arg.arg)
                if fresh is None:
                    continue
                if len(func.body) < 2 or _text(index, stmt) is None:
                    break
                d_start, d_end = src.span(default)
                g_start, g_end = src.line_span(stmt.lineno, stmt.end_lineno)
                b.add(d_start, g_end, src.segment(fresh) + src.text[d_end:g_start], site,
                      f"the default of {arg.arg} is one {src.segment(fresh)} shared by every call")
                break
    return b.out


def find_skipped_step(index: ModuleIndex) -> list[Mutation]:
    """Drop a statement that normalises a variable in place: ``name = name.strip()``, ``xs = sorted(xs)``."""
    b = _Builder(index, "skipped-step")
    for site in index.nodes(ast.Assign):
        stmt = site.node
        if not (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
            continue
        name, call = stmt.targets[0].id, stmt.value
        func = call.func
        method = isinstance(func, ast.Attribute) and func.attr in _NORMALISING_METHODS \
            and isinstance(func.value, ast.Name) and func.value.id == name and not call.args and not call.keywords
        builtin = isinstance(func, ast.Name) and func.id in _NORMALISING_CALLS and len(call.args) == 1 \
            and isinstance(call.args[0], ast.Name) and call.args[0].id == name
        if not (method or builtin):
            continue
        block = _is_block_list(site.parent, stmt)
        if block is None or len(block) < 2 or _text(index, stmt) is None:
            continue
        start, end = index.src.line_span(stmt.lineno, stmt.end_lineno)
        b.add(start, end, "", site, f"the step {index.src.segment(stmt)} was skipped")
    return b.out


def find_missing_handler(index: ModuleIndex) -> list[Mutation]:
    """Unwrap a ``try`` whose one handler turns an error into a fallback: its body stays, dedented."""
    b = _Builder(index, "missing-handler")
    src = index.src
    for site in index.nodes(ast.Try):
        node = site.node
        if len(node.handlers) != 1 or node.orelse or node.finalbody or not 1 <= len(node.body) <= 3:
            continue
        handler = node.handlers[0]
        if handler.type is None or len(handler.body) > 2 or any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
            continue  # a bare except, a long recovery, or an error only re-raised as another
        inner = [n for st in node.body for n in ast.walk(st)]
        if any(isinstance(n, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                              ast.ImportFrom, ast.Lambda)) for n in inner) \
                or any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.lineno != n.end_lineno
                       for n in inner) or not all(src.owns_lines(st) for st in node.body) or _text(index, node) is None:
            continue
        body_start, body_end = src.line_span(node.body[0].lineno, node.body[-1].end_lineno)
        body = _reindent(src.text[body_start:body_end], src.indent_of(node.body[0].lineno), src.indent_of(node.lineno))
        if body is None:
            continue
        start, end = src.line_span(node.lineno, node.end_lineno)
        caught = src.segment(handler.type)
        b.add(start, end, body, site, f"the handler of {caught} was removed, so the error escapes")
    return b.out


#: The placement operators, by bug type.
PLACEMENT_FINDERS = {
    "late-check": find_late_check,
    "reset-in-loop": find_reset_in_loop,
    "update-after-loop": find_update_after_loop,
    "shared-default": find_shared_default,
    "skipped-step": find_skipped_step,
    "missing-handler": find_missing_handler,
}

PLACEMENT_DESCRIPTIONS = {
    "late-check": "a check runs after the statement that uses what it checks",
    "reset-in-loop": "an accumulator is reset on every pass of its loop, so only the last pass counts",
    "update-after-loop": "an update meant for every pass of a loop runs once, after it",
    "shared-default": "a mutable default is shared by every call instead of made fresh for each",
    "skipped-step": "a normalising statement is skipped, so the raw value flows on",
    "missing-handler": "an exception handler is gone, so an error the code turned into a fallback escapes",
}
