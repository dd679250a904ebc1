"""Examples from the calls a failing test makes, for tests whose source shows no concrete call.

Some suites read their cases from data files: a markdown parser's fixtures turned into test methods
in a loop, a query language's compliance cases, a test that loops over a table. The failing test's
source then says ``result = mistune.html(text)`` and nothing says what ``text`` was, so the
static reading (:func:`~termgym.factory.swesynth.failures.read_failure`) finds no example a user
could run. The screening plugin can record, as the test runs on the buggy tree, each line of test
code that calls into the project and the caller's local variables there, written as Python
literals where their value is one (``ScreenWorker.run(..., calls=True)``). :func:`traced_failures`
writes the call on that line with those values filled in (``mistune.html('# a\\n')``); what it
returns, on the buggy and on the clean tree, is left to the example's runs
(:class:`~termgym.factory.swesynth.report.ExampleRuns`), which keep it only where the two differ.

A call is written only when a reader could type it: its function is reached from a name the test
module imports (a local variable, ``self`` or a fixture is no such name), and every variable of its
arguments holds a literal. Whether the names are importable by a user is the writer's check
(``report._add_imports``), as for every other example.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.failures import Failure, _behaviour, _module_helpers, _parse_file
from termgym.tasks.swesynth import pyparse

#: The longest call an example shows (a fixture's whole document is no repro a reader pastes).
MAX_CALL = 400

#: Nodes whose names are bound inside the argument (a lambda's parameters, a comprehension's
#: target): what the recorded locals say of those names is not what the argument reads.
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr)


def traced_failures(test: str, sites: list[dict[str, Any]], repo: str | Path) -> list[Failure]:
    """The examples ``test``'s recorded calls into the project give (``sites``: the plugin's
    ``calls`` of that test, each ``{"file", "line", "callee", "locals"}``), the last call first (a
    failing case ends the test). Each is a :class:`Failure` with its call and behaviour, its outcome
    and the expected one left to the runs; one per distinct call."""
    root = Path(repo)
    found: list[Failure] = []
    seen: set[str] = set()
    modules_of: dict[str, tuple[ast.Module, set[str], set[str], dict[str, Any]] | None] = {}  # per test file
    for site in reversed(sites):
        path = str(site.get("file", ""))
        if path not in modules_of:
            tree = _parse_file(root / path)
            modules_of[path] = None if tree is None else (tree, *_imports(tree), _module_helpers(tree)[0])
        if modules_of[path] is None:
            continue
        tree, modules, whole, helpers = modules_of[path]
        line = int(site.get("line", 0))
        made = assignments(tree, line)
        for call in calls_on_line(tree, line, str(site.get("callee", ""))):
            text = filled_call(call, site.get("locals") or {}, modules, made)
            if text is None or text in seen:
                continue
            node = pyparse.parse(text, mode="eval").body
            behaviour = _behaviour(node, {}, {}, helpers, modules)
            if behaviour is None:
                continue
            if isinstance(node, ast.Call) and behaviour == f"{_last(node.func)}()" and _root(node.func) in whole:
                behaviour = f"{ast.unparse(node.func)}()"  # ``mistune.html()``: named as the call reaches it
            seen.add(text)
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            found.append(Failure(test=test, call=text, behaviour=behaviour, names=names))
    return found


def calls_on_line(tree: ast.Module, line: int, callee: str = "") -> list[ast.Call]:
    """The calls of the statement running at ``line``, those whose function is named ``callee``
    (the project function the plugin saw called; ``__call__`` and ``__init__``: any) first, then
    the innermost: ``self.assertEqual(normalize(mistune.html(text)), html)`` gives ``mistune.html(text)``
    before the assertion."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)]

    def named(call: ast.Call) -> bool:
        return _last(call.func) == callee or callee in ("__call__", "__init__", "__new__")

    def span(call: ast.Call) -> tuple[int, int]:
        return ((call.end_lineno or call.lineno) - call.lineno, (call.end_col_offset or 0) - call.col_offset)

    return sorted(calls, key=lambda c: (not named(c), span(c)))


def filled_call(call: ast.Call, local: dict[str, str | None], modules: set[str],
                made: dict[str, ast.expr] | None = None) -> str | None:
    """``call`` written with each local variable it reads replaced by its recorded literal, or,
    for a local that holds none, by the expression the one assignment of the test function made it
    from (``made``, :func:`assignments`; ``parsed = jmespath.compile(expression)`` before
    ``parsed.search(given)`` gives ``jmespath.compile('a.b').search({'a': {'b': 1}})``), filled in
    the same way. ``None`` when a reader could not type it: its function hangs off ``self`` or
    another local not made so rather than an imported name, it reads a local that holds no literal
    and was not made so, it binds names of its own (a lambda, a comprehension), or it is longer than
    :data:`MAX_CALL`."""
    made = made or {}
    if any(isinstance(n, _SCOPES) for n in ast.walk(call)):
        return None
    missing: list[str] = []

    class Fill(ast.NodeTransformer):
        def __init__(self) -> None:
            self.inlining: list[str] = []

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if not isinstance(node.ctx, ast.Load) or node.id not in local:
                return node
            value = local[node.id]
            if value is not None:
                return ast.copy_location(pyparse.parse(value, mode="eval").body, node)
            source = made.get(node.id)
            if source is None or node.id in self.inlining or len(self.inlining) >= 3 or \
                    any(isinstance(n, _SCOPES) for n in ast.walk(source)):
                missing.append(node.id)
                return node
            self.inlining.append(node.id)
            try:
                return ast.copy_location(self.visit(pyparse.parse(ast.unparse(source), mode="eval").body), node)
            finally:
                self.inlining.pop()

    copy = Fill().visit(pyparse.parse(ast.unparse(call), mode="eval").body)
    if missing or not isinstance(copy, ast.Call):
        return None
    head = _root(copy.func)
    if not head or head in local or head not in modules:
        return None
    text = ast.unparse(copy)
    return text if len(text) <= MAX_CALL else None


def assignments(tree: ast.Module, line: int) -> dict[str, ast.expr]:
    """The locals of the function running ``line`` that one plain assignment before that line
    makes (``name = expression``), that nothing else binds (a loop target, a second assignment),
    and that nothing reads between the assignment and ``line``: ``lookup.put_string(...)`` in
    between may change the object, which the expression alone would not rebuild."""
    scope = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.lineno <= line <= (n.end_lineno or n.lineno)
                  and not any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m is not n
                              and m.lineno <= line <= (m.end_lineno or m.lineno) for m in ast.walk(n))), None)
    if scope is None:
        return {}
    values: dict[str, ast.expr] = {}
    bound: dict[str, int] = {}
    made_at: dict[str, int] = {}
    for node in ast.walk(scope):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and node.lineno < line:
                values[targets[0].id] = node.value
                made_at[targets[0].id] = node.end_lineno or node.lineno
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    bound[name.id] = bound.get(name.id, 0) + 1
    read_between = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                    and n.id in made_at and made_at[n.id] < n.lineno < line}
    return {name: value for name, value in values.items() if bound.get(name) == 1 and name not in read_between}


def _last(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _root(func: ast.expr) -> str:
    """The name a call's function hangs off: ``jmespath`` for ``jmespath.compile('a').search``."""
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        func = func.func if isinstance(func, ast.Call) else func.value
    return func.id if isinstance(func, ast.Name) else ""


def _imports(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the test module's own import statements bind (anywhere in the module), and those
    of them bound to whole modules (``import mistune``)."""
    names: set[str] = set()
    whole: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            whole |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.name != "*"}
    return names | whole, whole


__all__ = ["MAX_CALL", "assignments", "calls_on_line", "filled_call", "traced_failures"]
