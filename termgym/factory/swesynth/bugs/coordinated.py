"""Repository-level operators: coordinated 2-3-edit bugs and bugs in helpers other modules call.

Coordinated bugs are the half-finished refactor: a shared definition changes (a helper's parameter
order, the order of the pair it returns, what it counts from, a constant, a dict key) and one or
two of its users are updated to match, while the others -- and the tests -- still expect the old
contract. Reverting only the definition breaks the updated users, so the fix needs every edit;
the failure shows up at an untouched user, not at any changed line. The edits of one bug share a
``group`` id (see :func:`~termgym.factory.swesynth.bugs.source.units`).

``cross-module-helper`` keeps the single-edit value operators but only inside functions that
*another* module calls (found through :class:`~termgym.factory.swesynth.bugs.callgraph.RepoIndex`),
so the failing test tends to exercise the caller's module rather than the buggy one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from termgym.factory.swesynth.bugs.callgraph import CallSite, Definition, RepoIndex, module_name, module_stem
from termgym.factory.swesynth.bugs.source import Mutation, Site, _Builder, _constant_replacement

#: At most this many users are updated along with the definition (a bug has 2-3 edits in all).
MAX_COMPENSATED = 2


def _group(bug_type: str, definition: str, detail: str) -> str:
    return f"{bug_type}:{definition}:{detail}"


class _Group:
    """Collects the edits of one coordinated bug across files; all or nothing."""

    def __init__(self, repo: RepoIndex, bug_type: str, group: str) -> None:
        self.repo = repo
        self.bug_type = bug_type
        self.group = group
        self.edits: list[Mutation] = []
        self.ok = True

    def add(self, path: str, start: int, end: int, replacement: str, function: str | None, description: str) -> None:
        index = self.repo.modules[path]
        site = Site(index.tree, index.tree, None, function) if function else None  # type: ignore[arg-type]
        m = _Builder(index, self.bug_type).make(start, end, replacement, site, description, group=self.group)
        if m is None:
            self.ok = False
        else:
            self.edits.append(m)

    def result(self) -> list[Mutation]:
        spans = sorted((m.path, m.start, m.end) for m in self.edits)
        overlap = any(a[0] == c[0] and c[1] < a[2] for a, c in zip(spans, spans[1:], strict=False))
        return self.edits if self.ok and len(self.edits) >= 2 and not overlap else []


def _compensated(definition: Definition, calls: list[CallSite],
                 usable: Callable[[CallSite], bool]) -> list[CallSite]:
    """The users to update: up to MAX_COMPENSATED usable calls in source order (deterministic).

    At least one user stays as it was when there are several. A private helper (``_name``) whose
    every call would be updated is skipped: nothing outside could see the changed contract, so the
    bug would be an equivalent rewrite rather than a bug.
    """
    ok = sorted((c for c in calls if usable(c)), key=lambda c: (c.path, c.node.lineno, c.node.col_offset))
    private = any(part.startswith("_") and not part.startswith("__") for part in definition.qualname.split("."))
    if not ok or (private and len(calls) < 2):
        return []
    keep = MAX_COMPENSATED if len(calls) > MAX_COMPENSATED else max(1, len(calls) - 1)
    return ok[:keep]


def _positional(call: ast.Call, count: int) -> bool:
    return len(call.args) >= count and not any(isinstance(a, ast.Starred) for a in call.args[:count])


def _params(definition: Definition) -> list[ast.arg]:
    """The required positional parameters (without ``self``/``cls``): the ones callers pass by position."""
    args = definition.node.args
    params = [*args.posonlyargs, *args.args]
    required = params[: len(params) - len(args.defaults)]
    if definition.class_name and required and required[0].arg in {"self", "cls"}:
        required = required[1:]
    return required


def find_param_swap(repo: RepoIndex) -> list[Mutation]:
    """Swap a helper's first two required parameters in its signature and at 1-2 call sites."""
    out: list[Mutation] = []
    for definition, calls in sorted(repo.calls.items(), key=lambda kv: (kv[0].path, kv[0].qualname)):
        if any(isinstance(d, ast.Name) and d.id in {"staticmethod", "classmethod", "property"}
               for d in definition.node.decorator_list) and definition.class_name:
            continue
        params = _params(definition)
        if len(params) < 2 or not calls:
            continue
        a, c = params[0], params[1]
        if a.annotation is not None and c.annotation is not None and \
                ast.dump(a.annotation) != ast.dump(c.annotation):
            continue  # differently typed parameters: a swap would be caught by any type checker
        users = _compensated(definition, calls, lambda call: _positional(call.node, 2))
        if not users:
            continue
        src = repo.modules[definition.path].src
        group = _Group(repo, "coordinated-param-swap", _group("param-swap", f"{definition.path}:{definition.qualname}", ""))
        (s0, e0), (s1, e1) = src.span(a), src.span(c)
        group.add(definition.path, s0, e1, src.text[s1:e1] + src.text[e0:s1] + src.text[s0:e0],
                  definition.qualname, f"parameters {a.arg} and {c.arg} of {definition.qualname} swapped")
        for user in users:
            usrc = repo.modules[user.path].src
            x, y = user.node.args[0], user.node.args[1]
            (t0, f0), (t1, f1) = usrc.span(x), usrc.span(y)
            group.add(user.path, t0, f1, usrc.text[t1:f1] + usrc.text[f0:t1] + usrc.text[t0:f0], user.caller,
                      f"the call in {user.caller} follows the new parameter order")
        out.extend(group.result())
    return out


def _passes(call: ast.Call, name: str, position: int) -> bool | None:
    """Whether ``call`` passes parameter ``name`` (at 0-based ``position``); ``None`` if unknowable."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    return len(call.args) > position or any(k.arg == name for k in call.keywords)


def find_default_shift(repo: RepoIndex) -> list[Mutation]:
    """A parameter's default changes and one caller that relied on it now passes the old value."""
    out: list[Mutation] = []
    for definition, calls in sorted(repo.calls.items(), key=lambda kv: (kv[0].path, kv[0].qualname)):
        args = definition.node.args
        positional = [*args.posonlyargs, *args.args]
        offset = 1 if definition.class_name and positional and positional[0].arg in {"self", "cls"} else 0
        pairs = [(a, d, i - offset) for i, (a, d) in enumerate(
            zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True),
            start=len(positional) - len(args.defaults))]
        pairs += [(a, d, 10**6) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        src = repo.modules[definition.path].src
        for param, default, position in pairs:
            if not isinstance(default, ast.Constant) or default.value is None or param in args.posonlyargs:
                continue  # a positional-only parameter cannot be pinned with a keyword
            new = _constant_replacement(src, default, default.lineno + default.col_offset)
            if new is None:
                continue
            relying = [c for c in calls if _passes(c.node, param.arg, position) is False]
            users = _compensated(definition, relying, lambda c: True)[:1]
            if not users or len(relying) < 2 and definition.name.startswith("_"):
                continue
            old = src.segment(default)
            group = _Group(repo, "coordinated-default",
                           _group("default", f"{definition.path}:{definition.qualname}", param.arg))
            s0, e0 = src.span(default)
            group.add(definition.path, s0, e0, new, definition.qualname,
                      f"the default of {param.arg} in {definition.qualname} became {new}")
            for user in users:
                usrc = repo.modules[user.path].src
                call = user.node
                last = max([*call.args, *call.keywords], key=lambda n: (n.end_lineno, n.end_col_offset), default=None)
                if last is None:
                    end = usrc.span(call)[1] - 1
                    if usrc.text[end] != ")":
                        group.ok = False
                        continue
                    group.add(user.path, end, end, f"{param.arg}={old}", user.caller,
                              f"{user.caller} passes the old default explicitly")
                else:
                    end = usrc.span(last.value if isinstance(last, ast.keyword) else last)[1]
                    group.add(user.path, end, end, f", {param.arg}={old}", user.caller,
                              f"{user.caller} passes the old default explicitly")
            out.extend(group.result())
    return out


def _returns(func: ast.AST) -> list[ast.Return]:
    """Return statements of ``func`` itself (not of functions nested in it)."""
    out: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(out, key=lambda r: (r.lineno, r.col_offset))


def find_return_swap(repo: RepoIndex) -> list[Mutation]:
    """Swap the pair a helper returns and the unpacking at one call site."""
    out: list[Mutation] = []
    for definition, calls in sorted(repo.calls.items(), key=lambda kv: (kv[0].path, kv[0].qualname)):
        returns = [r for r in _returns(definition.node) if r.value is not None]
        if not returns or len(returns) > 2 or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) == 2
                                                     and not any(isinstance(e, ast.Starred) for e in r.value.elts)
                                                     for r in returns):
            continue

        def unpacks(call: CallSite) -> bool:
            p = call.parent
            return isinstance(p, ast.Assign) and p.value is call.node and len(p.targets) == 1 \
                and isinstance(p.targets[0], ast.Tuple) and len(p.targets[0].elts) == 2 \
                and all(isinstance(e, ast.Name) for e in p.targets[0].elts)

        users = _compensated(definition, calls, unpacks)[: 3 - len(returns)]
        if not users:
            continue
        src = repo.modules[definition.path].src
        group = _Group(repo, "coordinated-return-swap", _group("return-swap", f"{definition.path}:{definition.qualname}", ""))
        for r in returns:
            x, y = r.value.elts  # type: ignore[union-attr]
            (s0, e0), (s1, e1) = src.span(x), src.span(y)
            group.add(definition.path, s0, e1, src.text[s1:e1] + src.text[e0:s1] + src.text[s0:e0],
                      definition.qualname, f"{definition.qualname} returns its pair in the other order")
        for user in users:
            usrc = repo.modules[user.path].src
            x, y = user.parent.targets[0].elts  # type: ignore[union-attr]
            (t0, f0), (t1, f1) = usrc.span(x), usrc.span(y)
            group.add(user.path, t0, f1, usrc.text[t1:f1] + usrc.text[f0:t1] + usrc.text[t0:f0], user.caller,
                      f"the unpacking in {user.caller} follows the new order")
        out.extend(group.result())
    return out


def _countlike(expr: ast.AST) -> bool:
    """An expression that is almost surely an integer count or index."""
    if isinstance(expr, ast.Call):
        f = expr.func
        return (isinstance(f, ast.Name) and f.id == "len") or (isinstance(f, ast.Attribute) and f.attr in
                                                                {"index", "find", "rfind", "count", "bit_length"})
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.FloorDiv)):
        return _countlike(expr.left) or _countlike(expr.right) or (
            isinstance(expr.right, ast.Constant) and type(expr.right.value) is int)
    return False


def _plus_one(text: str, value: ast.AST) -> str:
    """``text + 1``, folded into a trailing integer (``i + 1`` -> ``i + 2``, ``n - 1`` -> ``n``)."""
    if isinstance(value, ast.BinOp) and isinstance(value.right, ast.Constant) and type(value.right.value) is int:
        const = value.right.value
        head = text[: len(text) - len(str(const))].rstrip()
        if text.endswith(str(const)) and head.endswith(("+", "-")):
            shifted = const + 1 if isinstance(value.op, ast.Add) else const - 1
            if shifted == 0:
                return head[:-1].rstrip()
            return f"{head} {shifted}"
    return f"{text} + 1"


def find_offset_shift(repo: RepoIndex) -> list[Mutation]:
    """A helper's count/index is shifted by one and one caller subtracts it back (producer/consumer)."""
    out: list[Mutation] = []
    for definition, calls in sorted(repo.calls.items(), key=lambda kv: (kv[0].path, kv[0].qualname)):
        returns = [r for r in _returns(definition.node) if r.value is not None]
        if len(returns) != 1 or not _countlike(returns[0].value):
            continue

        def as_value(call: CallSite) -> bool:
            return not isinstance(call.parent, ast.Expr)

        users = _compensated(definition, calls, as_value)[:1]
        if not users:
            continue
        src = repo.modules[definition.path].src
        value = returns[0].value
        group = _Group(repo, "coordinated-offset", _group("offset", f"{definition.path}:{definition.qualname}", ""))
        s, e = src.span(value)
        group.add(definition.path, s, e, _plus_one(src.text[s:e], value), definition.qualname,
                  f"{definition.qualname} counts from one more")
        for user in users:
            usrc = repo.modules[user.path].src
            t0, f0 = usrc.span(user.node)
            wrap = isinstance(user.parent, (ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript, ast.Compare))
            new = f"({usrc.text[t0:f0]} - 1)" if wrap else f"{usrc.text[t0:f0]} - 1"
            group.add(user.path, t0, f0, new, user.caller, f"{user.caller} subtracts the extra one")
        out.extend(group.result())
    return out


def _name_uses(repo: RepoIndex, path: str, name: str) -> list[tuple[str, Site]]:
    """Loads of ``name`` inside function bodies, in ``path`` and in modules that import it from there."""
    out: list[tuple[str, Site]] = []
    for other, index in repo.modules.items():
        local = name
        if other != path:
            local = None
            for node in ast.walk(index.tree):
                if isinstance(node, ast.ImportFrom) and repo.resolve_module(node.module or "", other, node.level) == path:
                    for alias in node.names:
                        if alias.name == name:
                            local = alias.asname or alias.name
            if local is None:
                continue
        for site in index.nodes(ast.Name):
            if site.node.id == local and isinstance(site.node.ctx, ast.Load):
                out.append((other, site))
    return sorted(out, key=lambda u: (u[0], u[1].node.lineno, u[1].node.col_offset))


_NO_PARENS = (ast.Call, ast.keyword, ast.Assign, ast.AnnAssign, ast.Return, ast.List, ast.Tuple, ast.Dict)


def find_constant_shift(repo: RepoIndex) -> list[Mutation]:
    """A module constant moves by one and one place that relies on it is adjusted to match."""
    out: list[Mutation] = []
    for path, index in repo.modules.items():
        for stmt in index.tree.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
                continue
            name = stmt.targets[0].id
            if not re.fullmatch(r"_?[A-Z][A-Z0-9_]*", name):
                continue
            uses = _name_uses(repo, path, name)
            if len(uses) < 2:
                continue  # with a single user the pair cancels out and nothing can fail
            value = stmt.value.value
            new_value = value + 1
            group = _Group(repo, "coordinated-constant", _group("constant", f"{path}:{name}", ""))
            s, e = index.src.span(stmt.value)
            group.add(path, s, e, repr(new_value), None, f"{name} changed from {value} to {new_value}")
            use_path, site = uses[0]
            usrc = repo.modules[use_path].src
            t0, f0 = usrc.span(site.node)
            local = usrc.text[t0:f0]
            new = f"{local} - 1" if isinstance(site.parent, _NO_PARENS) else f"({local} - 1)"
            group.add(use_path, t0, f0, new, site.qualname, f"{site.qualname} compensates for the new {name}")
            out.extend(group.result())
    return out


def _renamed_key(key: str) -> str | None:
    if not re.fullmatch(r"[a-z][a-z0-9_]{1,30}", key):
        return None
    if key.endswith("s") and len(key) > 3:
        return key[:-1]
    return key + "s"


def find_key_rename(repo: RepoIndex) -> list[Mutation]:
    """A dict key is renamed where the dict is built and at one reader; other readers miss it."""
    out: list[Mutation] = []
    producers: dict[str, list[tuple[str, Site, ast.Constant]]] = {}
    readers: dict[str, list[tuple[str, Site, ast.Constant]]] = {}
    for path, index in repo.modules.items():
        for site in index.nodes(ast.Dict):
            for k in site.node.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    producers.setdefault(k.value, []).append((path, site, k))
        for site in index.nodes(ast.Subscript):
            s = site.node.slice
            if isinstance(s, ast.Constant) and isinstance(s.value, str) and isinstance(site.node.ctx, ast.Load):
                readers.setdefault(s.value, []).append((path, site, s))
        for site in index.nodes(ast.Call):
            f = site.node.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and site.node.args and \
                    isinstance(site.node.args[0], ast.Constant) and isinstance(site.node.args[0].value, str):
                readers.setdefault(site.node.args[0].value, []).append((path, site, site.node.args[0]))
    for key in sorted(producers):
        new = _renamed_key(key)
        made = producers[key]
        if new is None or len(made) != 1 or key not in readers or new in producers or new in readers:
            continue
        ppath, psite, pnode = made[0]
        reads = [r for r in readers[key] if r[1].qualname != psite.qualname]
        if not reads:
            continue
        group = _Group(repo, "coordinated-key-rename", _group("key", f"{ppath}:{psite.qualname}", key))
        for path, site, node in [(ppath, psite, pnode), reads[0]]:
            src = repo.modules[path].src
            s, e = src.span(node)
            quote = src.text[s]
            if quote not in "'\"" or src.text[s:e] != f"{quote}{key}{quote}":
                group.ok = False
                continue
            group.add(path, s, e, f"{quote}{new}{quote}", site.qualname, f"key {key!r} renamed to {new!r}")
        out.extend(group.result())
    return out


def find_attribute_rename(repo: RepoIndex) -> list[Mutation]:
    """An instance attribute is made private (or public) where it is set and at one reader, not all."""
    out: list[Mutation] = []
    for path, index in repo.modules.items():
        for cls in [n for n in ast.walk(index.tree) if isinstance(n, ast.ClassDef)]:
            stores: dict[str, list[tuple[ast.Attribute, str]]] = {}
            loads: dict[str, list[tuple[ast.Attribute, str]]] = {}
            names: set[str] = set()
            for method in [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]:
                names.add(method.name)
                for node in ast.walk(method):
                    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                        names.add(node.attr)
                        kind = stores if isinstance(node.ctx, ast.Store) else loads
                        kind.setdefault(node.attr, []).append((node, f"{cls.name}.{method.name}"))
            for stmt in cls.body:
                names.update(t.id for t in ast.walk(stmt) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store))
            for attr in sorted(stores):
                if len(stores[attr]) != 1 or len(loads.get(attr, [])) < 2 or attr.startswith("__"):
                    continue
                new = attr[1:] if attr.startswith("_") else f"_{attr}"
                if not new or new in names or not new.isidentifier():
                    continue
                group = _Group(repo, "coordinated-attribute-rename", _group("attribute", f"{path}:{cls.name}", attr))
                store = stores[attr][0]
                # The reader that follows lives in another method when one exists: a reader on the
                # next line would make one visible change, not two.
                readers = sorted(loads[attr], key=lambda u: (u[1] == store[1], abs(u[0].lineno - store[0].lineno) <= 1,
                                                             u[0].lineno, u[0].col_offset))
                if abs(readers[0][0].lineno - store[0].lineno) <= 1:
                    continue
                for node, qual in [store, readers[0]]:
                    end = index.src.span(node)[1]
                    start = end - len(attr)
                    if index.src.text[start:end] != attr:
                        group.ok = False
                        continue
                    group.add(path, start, end, new, qual, f"self.{attr} renamed to self.{new}")
                out.extend(group.result())
    return out


#: Single-edit operators reused inside cross-module helpers: they change values, not control flow
#: that raises where it is (missing-check, exception-swallow and type-error are left out).
CROSS_MODULE_BASE_TYPES: tuple[str, ...] = (
    "off-by-one", "wrong-operator", "wrong-constant", "logic-inversion", "missing-edge-case", "wrong-default",
    "missing-return", "dropped-normalization", "wrong-aggregate", "swapped-values", "dropped-filter",
)


#: Below this many candidates among the most hidden helpers, less hidden ones join in.
MIN_HIDDEN_CANDIDATES = 20


def find_cross_module_helper(repo: RepoIndex, finders: dict[str, Callable],
                             min_hidden: int = MIN_HIDDEN_CANDIDATES) -> list[Mutation]:
    """Value bugs inside functions that other modules of the repository call.

    Helpers are taken in rounds, most hidden first, until ``min_hidden`` candidates are found:
    (1) helpers no test names, in modules no test file is named after (a failure can only surface
    through a caller's test); (2) helpers no test names, or in such modules; (3) every other
    cross-module helper. Without test texts every helper is in round (1).
    """
    every = list(repo.cross_module_helpers())
    test_names = [Path(t).name.lower() for t in repo.test_texts]

    def hidden_level(definition: Definition) -> int:
        stem = module_stem(definition.path).lower()
        named_module = any(stem in name for name in test_names)
        return int(bool(repo.named_in_tests(definition.name))) + int(named_module)

    out: list[Mutation] = []
    for level in range(3):
        out += _helper_mutations(repo, finders, [(d, u) for d, u in every if hidden_level(d) == level])
        if out and len(out) >= min_hidden:
            break
    return out


def _helper_mutations(repo: RepoIndex, finders: dict[str, Callable],
                      chosen: list[tuple[Definition, list[str]]]) -> list[Mutation]:
    helpers: dict[str, dict[str, list[str]]] = {}
    for definition, users in chosen:
        helpers.setdefault(definition.path, {})[definition.qualname] = users
    out: list[Mutation] = []
    for path in sorted(helpers):
        index = repo.modules[path]
        for base in CROSS_MODULE_BASE_TYPES:
            for m in finders[base](index):
                owner = _owning_helper(m.function, helpers[path])
                if owner is None:
                    continue
                users = ", ".join(module_name(p) for p in helpers[path][owner][:2])
                out.append(Mutation(
                    bug_type="cross-module-helper", path=m.path, start=m.start, end=m.end,
                    replacement=m.replacement, line=m.line, function=m.function,
                    description=f"{base}: {m.description} (in {owner}, called from {users})"))
    return out


def _owning_helper(function: str | None, helpers: dict[str, list[str]]) -> str | None:
    """The helper a function belongs to (itself or the helper it is nested in)."""
    while function:
        if function in helpers:
            return function
        function = function.rsplit(".", 1)[0] if "." in function else None
    return None


#: Repository-level operators, by bug type (each takes a RepoIndex).
REPO_FINDERS: dict[str, Callable[[RepoIndex], list[Mutation]]] = {
    "coordinated-param-swap": find_param_swap,
    "coordinated-return-swap": find_return_swap,
    "coordinated-offset": find_offset_shift,
    "coordinated-constant": find_constant_shift,
    "coordinated-key-rename": find_key_rename,
    "coordinated-default": find_default_shift,
    "coordinated-attribute-rename": find_attribute_rename,
}

REPO_DESCRIPTIONS = {
    "coordinated-param-swap": "a helper's parameter order changes and only some call sites follow",
    "coordinated-return-swap": "a helper returns its pair in the other order and only some unpackings follow",
    "coordinated-offset": "a helper's count or index shifts by one and only some callers compensate",
    "coordinated-constant": "a module constant changes and only some places relying on it are adjusted",
    "coordinated-key-rename": "a dict key is renamed where the dict is built and at some readers, not all",
    "coordinated-attribute-rename": "an instance attribute is renamed (made private or public) where it is set "
                                    "and at some readers, not all",
    "coordinated-default": "a parameter's default changes and only some callers that relied on it pin the old value",
    "cross-module-helper": "a value bug inside a helper that other modules of the project call",
}
