"""What a user would have seen of one failing test: the call, its concrete input, the outcome.

:func:`read_failure` reads a pytest failure (the junit text of the long traceback) together with the
test's source and returns a :class:`Failure`: the expression the test evaluated with its parameters
filled in (``Account('2000', 'x').normal_side``), the public function or method it exercises, what came
back (the value from pytest's assertion introspection, or the exception raised) and what the test
expected. Only test-side facts are read, never the code under test, so nothing here can point at a fix.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from termgym.tasks.swesynth import pyparse

#: Literals whose methods are the built-in types' (``', '.join(...)``, ``[].extend``), never the behaviour.
_LITERALS = (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set)
#: Builtins a behaviour is never named after (``len(parse(x))`` is about ``parse``).
_PLAIN_BUILTINS = {n for n in dir(builtins) if not n[:1].isupper()}
#: Comparison operators and how the report states the expectation.
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_SWAPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!=", "is": "is", "is not": "is not"}
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Warning|Exit)|StopIteration|"
                       r"KeyboardInterrupt|GeneratorExit)(?::\s?(.*))?$")
_MAX_VALUE = 100  # longest repr quoted in a report
_MAX_CALL = 160


@dataclass
class Failure:
    """One failing test, in the terms a user would use (see the module docstring)."""

    test: str
    call: str | None = None            # the evaluated expression, parameters filled in
    setup: list[str] = field(default_factory=list)  # statements needed before ``call`` (a repro)
    behaviour: str | None = None       # ``Account.normal_side`` / ``slugify()``
    relation: str | None = None        # "==", "!=", "<", "in", "truthy", "falsy", "raises", "returns"
    observed: str | None = None        # repr of what came back
    expected: str | None = None        # repr of what should have come back (or the relation's operand)
    error: tuple[str, str] | None = None   # exception raised instead: (type, first message line)
    expected_error: str | None = None  # exception the call should have raised
    expected_message: str | None = None  # its message, when a run of the clean code showed it
    expected_type: str | None = None   # the type of what should come back, when its value is too long to quote
    self_contained: bool = True        # every name in call/setup is importable or built in the repro
    names: set[str] = field(default_factory=set)  # identifiers a user sees in the repro
    imports: list[str] = field(default_factory=list)  # the import lines the repro needs (set by the writer)
    #: the test's id as filed under the module that defines its class, when junit filed it elsewhere
    #: (a mixin's test under ``tests/__init__.py``): that module's imports are the repro's
    home: str | None = None

    @property
    def usable(self) -> bool:
        """Enough for a report: a call, a behaviour, what happened and what was expected."""
        if not self.call or not self.behaviour:
            return False
        if self.error is not None:
            return True
        if self.relation == "raises":
            return self.expected_error is not None
        if self.observed is None or self.observed == self.expected:  # equal reprs explain nothing
            return False
        return self.expected is not None or self.relation in ("truthy", "falsy")


#: Standard-library modules: a value's repr such as ``datetime.timedelta(seconds=120)`` is a repro as is.
_STDLIB = frozenset(m for m in sys.stdlib_module_names if not m.startswith("_"))


# -- reading the test source -------------------------------------------------------------------------

_trees: dict[tuple[Path, int, int], ast.Module | None] = {}


def _parse_file(path: Path) -> ast.Module | None:
    """The test file's syntax tree (cached per path and version), ``None`` if unreadable."""
    try:
        st = path.stat()
    except OSError:
        return None
    key = (path.resolve(), st.st_mtime_ns, st.st_size)
    if key not in _trees:
        try:
            _trees[key] = pyparse.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            _trees[key] = None
    return _trees[key]


def split_test_id(test: str) -> tuple[str | None, list[str], str, str | None]:
    """``path::Class::name[params]`` as (path, classes, function name, parameter id)."""
    params = None
    m = re.search(r"\[(.*)\]$", test)
    if m:
        params, test = m.group(1), test[:m.start()]
    parts = test.split("::")
    path = parts[0] if parts[0].endswith(".py") else None
    rest = parts[1:] if path else parts
    return path, rest[:-1], (rest[-1] if rest else ""), params


def find_test_function(tree: ast.Module, classes: list[str], name: str) -> ast.FunctionDef | None:
    """The test's function node (inside its classes), or ``None``."""
    body: list[ast.stmt] = tree.body
    for cls in classes:
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if node is None:
            return None
        body = node.body
    return next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def test_names(test: str, repo: Path | None) -> set[str]:
    """Identifiers written in the test's module and the ``conftest.py`` files above it (what a user
    reading the tests sees: the calls, fixtures and helpers a report's repro is built from), less
    the test's own name."""
    path, classes, name, _ = split_test_id(test)
    if repo is None or path is None:
        return set()
    root = Path(repo)
    trees = [_parse_file(root / path)]
    folder = (root / path).parent
    while root == folder or root in folder.parents:
        trees.append(_parse_file(folder / "conftest.py"))
        if folder == root:
            break
        folder = folder.parent
    key = tuple(id(t) for t in trees)  # the parsed trees are cached per file version: so are their names
    if key not in _names:
        _names[key] = (trees, _tree_names(filter(None, trees)))  # the trees kept: their ids stay theirs
    names = set(_names[key][1])
    names.discard(name)
    return {n for n in names if not n.startswith("test_") and not n.startswith("Test")}


_names: dict[tuple[int, ...], tuple[list, frozenset[str]]] = {}


def _tree_names(trees) -> frozenset[str]:
    """Every identifier written in ``trees`` (see :func:`test_names`)."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("test"):
                names.add(node.name)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
                names.update(node.name.split("."))  # ``import pkg.mod`` shows both names
            if isinstance(node, ast.ImportFrom) and node.module:
                names.update(node.module.split("."))  # ``from pkg.mod import f`` shows where f lives
    return frozenset(names)


def _module_names(tree: ast.Module, repo: Path | None) -> tuple[set[str], set[str]]:
    """(names bound to modules by imports, all names imported or defined at module level)."""
    modules, known = set(), set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                known.add(bound)
                top = alias.name.split(".")[0]
                if repo is None or (repo / top).is_dir() or (repo / f"{top}.py").is_file() \
                        or (repo / "src" / top).is_dir():
                    modules.add(bound)  # a project module: users call its functions by name
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "").replace(".", "/")
            for alias in node.names:
                if alias.name == "*" and repo is not None and base and not node.level:
                    known |= _star_names(repo, base)  # ``from funcy.colls import *``
                    continue
                bound = alias.asname or alias.name
                known.add(bound)
                if repo is not None and base and any((root / base / f"{alias.name}.py").is_file()
                                                     or (root / base / alias.name / "__init__.py").is_file()
                                                     for root in (repo, repo / "src")):
                    modules.add(bound)  # ``from wsproto import frame_protocol as fp`` (src layout too)
    return modules, known


def _module_places(tree: ast.Module, repo: Path) -> dict[str, Path]:
    """The folders of the project packages ``tree`` binds to names by ``import`` (``import h2``:
    ``{"h2": repo/h2}``), where :class:`_Fill` looks for the submodules of a dotted name."""
    places: dict[str, Path] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".") if alias.asname else alias.name.split(".")[:1]
                for base in (repo, repo / "src"):
                    if (base.joinpath(*parts) / "__init__.py").is_file():
                        places[alias.asname or parts[0]] = base.joinpath(*parts)
                        break
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                parts = [*node.module.split("."), alias.name]
                for base in (repo, repo / "src"):
                    if (base.joinpath(*parts) / "__init__.py").is_file():
                        places[alias.asname or alias.name] = base.joinpath(*parts)
                        break
    return places


def _innermost_function(tree: ast.Module, line: int) -> ast.FunctionDef | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def _statement_at(func: ast.FunctionDef, line: int) -> ast.stmt | None:
    """The smallest statement of ``func`` spanning ``line`` (a ``with pytest.raises`` block counts)."""
    best = None
    for node in ast.walk(func):
        if isinstance(node, ast.stmt) and node is not func and not isinstance(node, (ast.FunctionDef, ast.ClassDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno - node.lineno) <= (best.end_lineno - best.lineno):
                best = node
    return best


# -- reading the pytest output ------------------------------------------------------------------------


def _location(message: str, test_file: str, within: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """(line number, offset of the location line) of the last frame in ``test_file`` (and between the
    lines ``within``, the test function, when that frame exists: a helper's frame is not the user's call)."""
    name = re.escape(Path(test_file).name)
    found = list(re.finditer(rf"^(?:.*[\s/])?{name}:(\d+):", message, re.M))
    if within is not None:
        inside = [m for m in found if within[0] <= int(m.group(1)) <= within[1]]
        found = inside or found
    return (int(found[-1].group(1)), found[-1].start()) if found else None


def _frame_args(message: str, end: int, params: list[str]) -> dict[str, str]:
    """The ``name = repr`` arguments pytest prints atop a long traceback frame ending at ``end``."""
    if not params:
        return {}
    start = max(message.rfind("\n_ _", 0, end), message.rfind("\n____", 0, end), 0)
    chunk = message[start:end]
    m = re.search(rf"^{re.escape(params[0])} = .*(?:\n(?!\s*$)(?!    ).*)*", chunk, re.M)
    if not m:
        return {}
    text = ", ".join(line.strip() for line in m.group(0).splitlines())
    marks = []
    pos = 0
    for p in params:
        head = f"{p} = " if not marks else f", {p} = "
        i = text.find(head, pos)
        if i < 0:
            break
        marks.append((p, i, i + len(head)))
        pos = i + len(head)
    values = {}
    for k, (p, _, vstart) in enumerate(marks):
        vend = marks[k + 1][1] if k + 1 < len(marks) else len(text)
        values[p] = text[vstart:vend]
    return values


def _literal_repr(text: str) -> str | None:
    """``text`` if it is a complete Python literal (not truncated, not an object address)."""
    text = text.strip()
    if not text or "..." in text or "object at 0x" in text:
        return None
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _value_repr(text: str) -> str | None:
    """``text`` as a value a report may quote: a literal or a constructor-like expression, complete."""
    text = text.strip()
    lit = _literal_repr(text)
    if lit is not None:
        return lit if len(lit) <= _MAX_VALUE else None
    if not text or len(text) > _MAX_VALUE or "..." in text or "\u2026" in text or "object at 0x" in text \
            or text.startswith("<"):
        return None
    try:
        pyparse.parse(text, mode="eval")
    except SyntaxError:
        return None
    return text


_NAMED_REPR = re.compile(r"<(?:function|built-in function) ([A-Za-z_]\w*)(?: at 0x[0-9a-fA-F]+)?>"
                         r"|<class '(?:[\w.]+\.)?([A-Za-z_]\w*)'>")


def _named_repr(text: str) -> str | None:
    """The name in a function's or a class's repr (``<function md5 at 0x7f..>``, ``<class
    'validators.hashes.Hash'>``): a test parametrized over the project's functions passes them
    so, and a user calls them by that name. ``None`` for any other text (a method's
    ``<function Cart.add ..>``, an object's address)."""
    m = _NAMED_REPR.fullmatch(text.strip())
    return (m.group(1) or m.group(2)) if m else None


def _exporting_module(name: str, tree: ast.Module, repo: Path) -> str | None:
    """The one project package the test module imports as a module (``import idna``) whose public
    names (:func:`_star_names`) hold ``name``: what a function passed as ``<function decode ..>``
    is to the test (``idna.decode``). ``None`` when no such package, or more than one, holds it."""
    owners = []
    places = _module_places(tree, repo)
    for node in tree.body:  # a single-file module (``import six``, ``from shop import cart``) has no folder
        bound_files = []
        if isinstance(node, ast.Import):
            bound_files = [(a.asname or a.name, a.name.replace(".", "/")) for a in node.names
                           if a.asname or "." not in a.name]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            bound_files = [(a.asname or a.name, node.module.replace(".", "/") + "/" + a.name) for a in node.names]
        for bound, file in bound_files:
            for base in (repo, repo / "src"):
                if (base / f"{file}.py").is_file():
                    places.setdefault(bound, base / file)
    for bound, place in places.items():
        for base in (repo, repo / "src"):
            try:
                rel = place.relative_to(base)
            except ValueError:
                continue
            if name in _star_names(base, "/".join(rel.parts)):
                owners.append(bound)
            break
    return owners[0] if len(owners) == 1 else None


def _split_compare(line: str, op: str, known: str | None, known_left: bool) -> tuple[str, str] | None:
    """Split pytest's ``assert LEFT op RIGHT`` summary; ``known`` is one side's repr if known."""
    sep = f" {op} "
    if known is not None:
        if known_left and line.startswith(known + sep):
            return known, line[len(known) + len(sep):]
        if not known_left and line.endswith(sep + known):
            return line[:-len(known) - len(sep)], known
    for m in re.finditer(re.escape(sep), line):
        left, right = line[:m.start()], line[m.end():]
        if _value_repr(left) is not None and _value_repr(right) is not None:
            return left, right
    return None


# -- rewriting the failing expression ------------------------------------------------------------------


class _Fill(ast.NodeTransformer):
    """Replace parameter names by their values, drop module prefixes (``slug.slugify`` -> ``slugify``,
    ``h2.settings.SettingCodes.ENABLE_PUSH`` -> ``SettingCodes.ENABLE_PUSH``: the modules and the
    submodules ``where`` finds under them, never the name after them; the names so freed are in
    ``unprefixed``: importable from the project) and spread literal star-arguments
    (``f(*[1, 'a'])`` -> ``f(1, 'a')``, ``f(**{'k': 1})`` -> ``f(k=1)``)."""

    def __init__(self, values: dict[str, ast.expr], modules: set[str], where: dict[str, Path] | None = None) -> None:
        self.values, self.modules, self.where = values, modules, where or {}
        self.unprefixed: set[str] = set()

    def _submodules(self, module: str, attrs: list[str]) -> int:
        """How many of ``attrs`` (read after the module name ``module``) name submodules."""
        place, count = self.where.get(module), 0
        while place is not None and place.is_dir() and count < len(attrs) - 1:
            step = attrs[count]
            if (place / step / "__init__.py").is_file():
                place = place / step
            elif (place / f"{step}.py").is_file():
                place = None
            else:
                break
            count += 1
        return count

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        args: list[ast.expr] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred) and isinstance(arg.value, (ast.List, ast.Tuple)):
                args.extend(arg.value.elts)
            else:
                args.append(arg)
        keywords: list[ast.keyword] = []
        for kw in node.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Dict) and all(
                    isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.isidentifier()
                    for k in kw.value.keys):
                keywords.extend(ast.keyword(arg=k.value, value=v) for k, v in zip(kw.value.keys, kw.value.values))
            else:
                keywords.append(kw)
        node.args, node.keywords = args, keywords
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return ast.copy_location(self.values[node.id], node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.modules and root.id not in self.values:
            # only the modules go: ``arrow.Arrow.range`` -> ``Arrow.range`` (not the builtin ``range``)
            attrs = []
            link: ast.expr = node
            while isinstance(link, ast.Attribute):
                attrs.append(link.attr)
                link = link.value
            attrs.reverse()
            attrs = attrs[self._submodules(root.id, attrs):]
            self.unprefixed.add(attrs[0])
            made: ast.expr = ast.Name(id=attrs[0], ctx=node.ctx if len(attrs) == 1 else ast.Load())
            for i, attr in enumerate(attrs[1:], 2):
                made = ast.Attribute(value=made, attr=attr, ctx=node.ctx if i == len(attrs) else ast.Load())
            return ast.copy_location(made, node)
        self.generic_visit(node)
        return node


def _free_names(node: ast.AST) -> set[str]:
    """Names read in ``node`` that it does not bind itself (comprehension variables are bound)."""
    bound = {n.id for c in ast.walk(node) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
             if isinstance(n, ast.Name)}
    for fn in ast.walk(node):  # parameters and locals of lambdas and functions defined inside
        if isinstance(fn, (ast.Lambda, ast.FunctionDef)):
            bound |= _params(fn)
        if isinstance(fn, ast.FunctionDef):
            bound |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def is_literal_repr(value: str) -> bool:
    """Whether ``value`` (a repr a report quotes) is a Python literal: nothing a reader would have
    to define or import to read it."""
    try:
        return _is_literal(pyparse.parse(value, mode="eval").body)
    except (SyntaxError, ValueError):
        return False


def _has_call(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)) for n in ast.walk(node))


def _constructed(setup: list[ast.stmt]) -> dict[str, str]:
    """Variables assigned from a class call in the setup (``q = PriorityQueue()`` -> PriorityQueue)."""
    types = {}
    for stmt in setup:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) \
                and stmt.value.func.id[:1].isupper():
            types[stmt.targets[0].id] = stmt.value.func.id
    return types


#: Built-ins that call a protocol method of their argument (``len(cache)`` is ``LRUCache.__len__``).
_PROTOCOL = {"len": "__len__", "iter": "__iter__", "repr": "__repr__", "str": "__str__", "bool": "__bool__",
             "hash": "__hash__", "reversed": "__reversed__", "list": "__iter__", "set": "__iter__",
             "tuple": "__iter__", "sorted": "__iter__", "frozenset": "__iter__"}
#: Helpers of test suites, not behaviour (``raises(TypeError, f)``, ``assert_equal(a, b)``).
_TEST_HELPER = re.compile(r"^(?:assert|raises|check|verify|expect|eq_|ok_)", re.I)


def call_behaviour(call: ast.expr) -> str | None:
    """The public function or method a call on its own exercises (no test context: no variable
    types, no test helpers), as :func:`_behaviour` names it."""
    return _behaviour(call, {})


#: Methods of the built-in types: ``labels(xs).index('a')`` is about ``labels()``, the list it
#: returned is Python's.
_BUILTIN_METHODS = frozenset(name for kind in (str, bytes, list, dict, set, frozenset, tuple, int, float)
                             for name in dir(kind) if not name.startswith("_"))


#: The tail :func:`chained_behaviour` puts after the call a method is chained to (``(...).find`` of
#: ``parse(...).find()``), for the readers of a report's named behaviour.
CHAIN_TAIL = r"\((?:\.\.\.)?\)\.[A-Za-z_]\w*"


def chained_behaviour(call: str, behaviour: str | None, methods: Collection[str] = ()) -> str | None:
    """The behaviour of a call that chains a method to a project call, named with both:
    ``parse('foo').update_or_create({}, 42)`` is about ``parse(...).update_or_create()`` (a report
    that said "`parse()` fails with `TypeError`" sent the agent to a function that does not fail).
    Only where ``behaviour`` names the chained-to call itself and the method is not one of a
    built-in type's (``labels(xs).index('a')`` stays ``labels()``), unless ``methods`` (the names of
    the functions the bug changes) holds it: ``parse(path).find(data)`` with the bug in
    ``Child.find``. ``None`` where the call is no such chain."""
    try:
        node = pyparse.parse(call, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)) or node.func.attr.startswith("_"):
        return None
    receiver, method = node.func.value, node.func.attr
    if behaviour is None or _direct_call(receiver) != behaviour:
        return None
    if method in _BUILTIN_METHODS and method not in methods:
        return None
    args = "(...)" if receiver.args or receiver.keywords else "()"
    return f"{behaviour[:-2]}{args}.{method}()"


def _direct_call(node: ast.AST) -> str | None:
    """The name ``node`` calls directly when it is a plain project-style call (``parse(x)``:
    ``parse()``, ``Version.parse(x)``: ``Version.parse()``); a chain, a call of a call's result or
    of a variable's method gives ``None``."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return f"{node.func.id}()"
    if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and _class_name(node.func.value.id):
        return f"{node.func.value.id}.{node.func.attr}()"
    return None


def _class_name(name: str) -> bool:
    """Whether ``name`` reads as a class (``Frame``, ``URIReference``), not a constant (``DEFAULTS``)."""
    return name[:1].isupper() and not name.isupper() and not name.startswith("_")


def _behaviour(expr: ast.AST, types: dict[str, str], origins: dict[str, ast.expr] | None = None,
               helpers: dict[str, ast.FunctionDef] | None = None,
               imported_modules: set[str] = frozenset()) -> str | None:
    """The public function or method ``expr`` exercises, outermost first, builtins and test helpers
    skipped (a helper's arguments, then the calls its body makes, give it); a variable holding a
    callable (``mf = memoize(f)``) stands for what made it."""
    origins, helpers = origins or {}, helpers or {}
    entered: set[str] = set()

    def owner(node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id[:1].isupper():
            return node.func.id
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            # a test helper ``iv(a, b)`` that returns ``Interval(a, b)``: an Interval
            ret = next((s.value for s in helpers[node.func.id].body if isinstance(s, ast.Return)), None)
            return owner(ret) if ret is not None else None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("copy.copy", "copy.deepcopy") and node.args:
            return owner(node.args[0])  # a copy is of its original's class
        if isinstance(node, ast.Name):
            return types.get(node.id)
        return None

    def visit(node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _PROTOCOL \
                and len(node.args) == 1 and owner(node.args[0]):  # ``len(cache)`` on an LRUCache
            return f"{owner(node.args[0])}.{_PROTOCOL[node.func.id]}()"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and owner(node.comparators[0]):
            return f"{owner(node.comparators[0])}.__contains__()"
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Call):  # merge_with(sum)(a, b): curried
                return visit(func)
            if isinstance(func, ast.Name):
                if func.id in origins and func.id not in types:
                    found = visit(origins[func.id])
                    if found:
                        return found
                    if not func.id.startswith("_") and func.id not in helpers:
                        return f"{func.id}()"
                elif func.id not in _PLAIN_BUILTINS and not func.id.startswith("_") \
                        and not _TEST_HELPER.match(func.id) and func.id not in helpers:
                    return f"{func.id}()"
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id in imported_modules and func.value.id in _STDLIB:
                pass  # ``pickle.loads(...)``: the standard library is not the behaviour; its arguments are
            elif isinstance(func, ast.Attribute) and isinstance(func.value, _LITERALS):
                pass  # ``''.join(...)``: a method of a built-in literal is not the behaviour; its arguments are
            elif isinstance(func, ast.Attribute) and not func.attr.startswith("_"):
                cls = owner(func.value)
                inner = visit(func.value)
                if cls:
                    return f"{cls}.{func.attr}()"
                if isinstance(func.value, ast.Name) and (func.value.id in types.values() or _class_name(func.value.id)):
                    return f"{func.value.id}.{func.attr}()"  # ``Frame.explain(...)``: a class's own method
                if inner and "(" not in inner:  # ``LRUCache.stats`` -> ``LRUCache.stats.hit_rate()``
                    return f"{inner}.{func.attr}()"
                if inner:  # a method of what a project function returned: that function is the API
                    return inner  # (:func:`chained_behaviour` names the method too where it is the project's)
                return f"{func.attr}()"
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                found = visit(arg)
                if found:
                    return found
            if isinstance(func, ast.Name) and func.id in helpers and func.id not in entered:
                entered.add(func.id)  # a helper of the test (``multi(root)``): the project call it makes
                return next((found for st in helpers[func.id].body if (found := visit(st))), None)
            return None
        if isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
            cls = owner(node.value)
            if cls:
                return f"{cls}.{node.attr}"
            if isinstance(node.value, ast.Name) and node.value.id not in imported_modules:
                return f"{node.value.id}.{node.attr}"  # ``inv.total`` on an object built in the setup
            return visit(node.value) or None
        if isinstance(node, ast.Subscript):
            cls = owner(node.value)
            return f"{cls}.__getitem__()" if cls else visit(node.value)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for gen in node.generators:  # what is iterated over is what is exercised, then the element
                found = visit(gen.iter)
                if found:
                    return found
            return visit(node.elt if not isinstance(node, ast.DictComp) else node.value)
        for child in ast.iter_child_nodes(node):
            found = visit(child)
            if found:
                return found
        return None

    return visit(expr)


def helper_behaviour(call: ast.expr, helpers: dict[str, ast.FunctionDef]) -> str | None:
    """The public API ``call`` exercises when it goes through functions its example defines
    (``helpers``): ``list(multi(root))[5]`` with ``def multi(root): ... RenderTree(root)`` is
    about ``RenderTree()``, never ``multi()``; ``None`` when nothing of the project is called."""
    return _behaviour(call, {}, {}, helpers)


def _raises_name(stmt: ast.stmt) -> str | None:
    """``E`` for ``with pytest.raises(E[, ...]):`` or ``with self.assertRaises(E):`` (or ``raises((E, F))``:
    the first)."""
    check = _unittest_check(stmt)
    if check is not None and check[0] in _UNITTEST_RAISES and check[1].args:  # ``self.assertRaises(E, f, x)``
        target = check[1].args[0]
        target = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
        return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    if not isinstance(stmt, ast.With):
        return None
    for item in stmt.items:
        call = item.context_expr
        if isinstance(call, ast.Call) and (getattr(call.func, "attr", None) in ("raises", *_UNITTEST_RAISES)
                                           or getattr(call.func, "id", None) == "raises") and call.args:
            target = call.args[0]
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            if isinstance(target, ast.Attribute):
                return target.attr
            if isinstance(target, ast.Name):
                return target.id
    return None


#: Test helpers named for an equality check, read as ``assert a == b``: nose's ``eq_`` (anytree's
#: ``tests/helper.py`` keeps one), ``assert_equal`` of a suite's own ``common.py`` (tabulate's).
_EQUALITY_HELPERS = frozenset({"eq_", "assert_equal", "assert_equals", "assert_eq"})


def _helper_check(stmt: ast.stmt) -> ast.Call | None:
    """The call of an equality helper's statement (``eq_(a, b)``: :data:`_EQUALITY_HELPERS`)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) \
            and stmt.value.func.id in _EQUALITY_HELPERS and len(stmt.value.args) == 2 and not stmt.value.keywords \
            and not any(isinstance(a, ast.Starred) for a in stmt.value.args):
        return stmt.value
    return None


def _compared(left: ast.expr, op: str, right: ast.expr) -> tuple[ast.expr, str, ast.expr, bool]:
    """:func:`_subject` of ``left OP right``: the side that calls something is what was evaluated,
    a display or a constant is what was expected (``expected == f(x)`` is ``f(x) == expected``)."""
    displays = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.Constant)
    if (_has_call(left) or not _has_call(right)) and not (isinstance(left, displays)
                                                         and not isinstance(right, displays)):
        return left, op, right, False
    return right, _SWAPPED[op], left, True


def _subject(stmt: ast.stmt) -> tuple[ast.expr, str, ast.expr | None, bool] | None:
    """(the evaluated expression, relation, the expected operand, whether that operand comes first in
    the source, as pytest's summary prints it) of the failing statement."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
            op = _OPS[type(test.ops[0])]
            left, right = test.left, test.comparators[0]
            if op in ("in", "not in"):
                return (right, op, left, True) if _has_call(right) or not _has_call(left) else None
            return _compared(left, op, right)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return test.operand, "falsy", None, False
        if not isinstance(test, (ast.BoolOp, ast.Compare)):
            return test, "truthy", None, False
        return None
    unittest_subject = _unittest_subject(stmt)
    if unittest_subject is not None:
        return unittest_subject
    if _unittest_check(stmt) is not None:
        return None  # a check this reader cannot phrase (assertIsInstance, assertAlmostEqual...)
    helper = _helper_check(stmt)
    if helper is not None:  # ``eq_(f(x), 3)``: the suite's own ``assert a == b``
        return _compared(helper.args[0], "==", helper.args[1])
    if isinstance(stmt, ast.With) and _raises_name(stmt):
        for inner in reversed(stmt.body):
            value = getattr(inner, "value", None)
            if isinstance(inner, (ast.Expr, ast.Assign, ast.AnnAssign)) and value is not None and _has_call(value):
                return value, "raises", None, False
        return None
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)) and stmt.value is not None:
        return stmt.value, "returns", None, False
    return None


def _used_in_a_loop(expr: ast.expr, name: str) -> bool:
    """Whether ``name`` is read inside a comprehension or lambda of ``expr`` (folding it in there would
    build the value again on every round)."""
    return any(isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.Lambda))
               and name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} for node in ast.walk(expr))


def _reads(node: ast.AST, name: str) -> int:
    """How many times ``node`` reads the variable ``name``."""
    return sum(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


def _inline(expr: ast.expr, setup: list[ast.stmt], later: list[ast.AST]) -> tuple[ast.expr, list[ast.stmt]]:
    """Fold single-use setup variables into ``expr`` (``q = Queue(); q.pop()`` stays two lines: q is
    used twice; ``d = date(2024, 1, 6); is_weekend(d)`` becomes ``is_weekend(date(2024, 1, 6))``).
    A variable ``expr`` reads twice stays too: ``s = IndexedSet(range(9)); (s.pop(4), s.pop(4))``
    pops one set twice, and written out it would pop two fresh sets once each."""
    changed = True
    while changed:
        changed = False
        for i, stmt in enumerate(setup):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            name = stmt.targets[0].id
            others = setup[:i] + setup[i + 1:]
            if any(name in _free_names(o) or _assigns(o, name) for o in others) \
                    or any(name in _free_names(o) for o in later):
                continue
            if name not in _free_names(expr) or len(ast.unparse(stmt.value)) > 60 or _used_in_a_loop(expr, name) \
                    or _reads(expr, name) > 1:
                continue  # (unread ones are _drop_unread's business)
            expr = _Fill({name: stmt.value}, set()).visit(expr)
            setup = others
            changed = True
            break
    return expr, setup


def _module_helpers(tree: ast.Module) -> tuple[dict[str, ast.FunctionDef], dict[str, ast.Assign]]:
    """Small plain functions (at most 8 lines, no decorator), short literal constants and aliases
    (``D = datetime.date``) the test module defines at top level."""
    helpers, constants = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.decorator_list and not node.name.startswith("test") \
                and node.end_lineno - node.lineno <= 7:
            helpers[node.name] = node
        elif isinstance(node, ast.ClassDef) and not node.decorator_list and not node.name.startswith("Test") \
                and node.end_lineno - node.lineno <= 12:  # a small stand-in (a fake clock) the repro needs
            helpers[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and len(ast.unparse(node.value)) <= 400 and not any(isinstance(n, ast.Lambda) for n in ast.walk(node)):
            constants[node.targets[0].id] = node
    return helpers, constants


def _is_dotted(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _locals(node: ast.AST) -> set[str]:
    """Names a helper binds itself (its parameters and assignments)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names | (_params(node) if isinstance(node, ast.FunctionDef) else set())


def _params(func: ast.FunctionDef | ast.Lambda) -> set[str]:
    a = func.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                            *([a.kwarg] if a.kwarg else [])]}


def _is_fixture(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "fixture":
            return not (isinstance(dec, ast.Call) and any(k.arg == "params" for k in dec.keywords))
    return False


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node) if node.id == self.old else node


def _fixture_places(tree: ast.Module, test_file: Path, root: Path) -> list[ast.Module]:
    """Where pytest looks for a fixture a test in ``test_file`` (whose module is ``tree``) asks for:
    that module, then the ``conftest.py`` of its folder and of each folder above it up to ``root``."""
    modules = [tree]
    folder = test_file.parent
    while True:
        conf = _parse_file(folder / "conftest.py")
        if conf is not None:
            modules.append(conf)
        if folder == root or root not in folder.parents:
            break
        folder = folder.parent
    return modules


def _fixture_def(name: str, modules: list[ast.Module]) -> tuple[ast.FunctionDef, ast.Module] | None:
    """The fixture function ``name`` (and its module) as pytest finds it in ``modules`` (:func:`_fixture_places`)."""
    for mod in modules:
        found = next((n for n in mod.body if _is_fixture(n) and n.name == name), None)
        if found is not None:
            return found, mod
    return None


def _fixture_setup(names: list[str], test_file: Path, root: Path, tree: ast.Module,
                   depth: int = 0, used: list[ast.Module] | None = None) -> tuple[list[ast.stmt], set[str]]:
    """Statements building the fixtures ``names`` (from the test module or a ``conftest.py`` above it)
    and the names those modules import (the modules themselves added to ``used``); a fixture that
    cannot be built this way is left out."""
    modules = _fixture_places(tree, test_file, root)
    stmts: list[ast.stmt] = []
    imported: set[str] = set()
    for name in names:
        found, mod = _fixture_def(name, modules) or (None, None)
        if mod is not None:
            imported |= _module_names(mod, root)[1]
            if used is not None and all(mod is not m for m in used):
                used.append(mod)
        if found is None and name == "tmp_path":  # pytest's own fixture: a fresh folder, as a user makes one
            stmts += pyparse.parse("import pathlib\nimport tempfile\ntmp_path = pathlib.Path(tempfile.mkdtemp())").body
            continue
        if found is None or depth > 1 or len(found.body) > 10:
            continue
        inner = [a.arg for a in found.args.args if a.arg not in ("self", "request")]
        if "request" in _free_names(ast.Module(body=found.body, type_ignores=[])):
            continue  # pytest's request object (its param, its node): nothing a user's code has
        sub, sub_names = _fixture_setup(inner, test_file, root, tree, depth + 1, used)
        built: list[ast.stmt] = []
        for st in found.body:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) or isinstance(st, ast.Assert):
                continue
            value = st.value if isinstance(st, ast.Return) else \
                st.value.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Yield) else None
            if value is None and isinstance(st, (ast.Return, ast.Expr)) and isinstance(getattr(st, "value", None),
                                                                                     ast.Yield):
                break
            if value is not None:
                if isinstance(value, ast.Name) and value.id != name:  # ``return book``: call it ``ledger``
                    built = [_Rename(value.id, name).visit(b) for b in built]
                else:
                    built.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value, lineno=0))
                break
            built.append(st)
        else:
            continue  # no return: nothing to build
        stmts += sub + built
        imported |= sub_names
    return [ast.fix_missing_locations(s) for s in stmts], imported


def _test_decorated(func: ast.FunctionDef) -> bool:
    """Whether a decorator of ``func`` is the test framework's (``@pytest.fixture``, ``@mock.patch``):
    a function the project's own decorators make (``@click.command()``, ``@retry(stop=...)``) is
    what a user pastes into a report, the test suite's are not."""
    return any(isinstance(n, ast.Name) and n.id in ("pytest", "mock", "unittest", "patch", "fixture")
               for deco in func.decorator_list for n in ast.walk(deco))


def _drop_unread(setup: list[ast.stmt], after: list[ast.AST]) -> list[ast.stmt]:
    """Leave out ``x = ...`` when nothing after it reads ``x`` (a result an earlier check looked at),
    unless computing it touches an object of the setup that is used later (``popped = q.pop()``);
    and an ``if`` that calls nothing and only binds such names (``if decode is None: decode =
    idna.decode``, a parameter's default the example has filled in)."""
    made = {n.id for st in setup for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    kept: list[ast.stmt] = []
    for i, stmt in enumerate(setup):
        if isinstance(stmt, ast.If) and not _has_call(stmt):
            inner = [*stmt.body, *stmt.orelse]
            if all(isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets) for s in inner):
                bound = {t.id for s in inner for t in s.targets}
                if not bound & set().union(*(_free_names(r) for r in [*setup[i + 1:], *after])):
                    continue
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            names = {t.id for t in stmt.targets}
            readers = [*setup[i + 1:], *after]
            read_later = set().union(*(_free_names(r) for r in readers))
            if not names & read_later and not (_free_names(stmt.value) & made & read_later):
                continue
        kept.append(stmt)
    return kept


def _drop_dead_stores(setup: list[ast.stmt]) -> list[ast.stmt]:
    """Leave out ``x = ...`` when ``x`` is assigned again before anything reads it."""
    kept = []
    for i, stmt in enumerate(setup):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            for later in setup[i + 1:]:
                if name in _free_names(later):
                    break
                if isinstance(later, ast.Assign) and _assigns(later, name):
                    stmt = None
                    break
        if stmt is not None:
            kept.append(stmt)
    return kept


def _assigns(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(node))


# -- putting it together -------------------------------------------------------------------------------


def only_what_the_call_reads(f: Failure) -> Failure:
    """``f`` with the setup statements its call does not read left out: what only the test's
    expected operand needed (``expected = '[a|b]'`` when the report quotes that value anyway)."""
    call = pyparse.parse(f.call, mode="eval").body if f.call else None
    setup = [pyparse.parse(line).body[0] for line in f.setup]
    setup = _drop_unread(setup, [call] if call is not None else [])
    shown = [*([call] if call is not None else []), *setup]
    return replace(f, setup=[ast.unparse(s) for s in setup], names=_shown_names(shown))


def _shown_names(nodes: list[ast.AST]) -> set[str]:
    """The identifiers a user sees in a repro made of ``nodes``: every name and attribute written."""
    return {n.id if isinstance(n, ast.Name) else n.attr for node in nodes
            for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def without_expected(f: Failure) -> Failure:
    """``f`` to be stated as its example runs (the runs give what comes back and what should): its
    expected operand, a variable of the test (``assert r.get(root, 'sub0') == sub0``), and the setup
    statements only that operand read are left out (:func:`only_what_the_call_reads`)."""
    return replace(only_what_the_call_reads(f), expected=None, observed=None)


def read_failure(test: str, message: str, repo: str | Path | None) -> Failure:
    """What a user would have seen of ``test`` failing with ``message`` (junit failure text)."""
    failure = Failure(test=test)
    message = message or ""
    _read_outcome_kind(failure, message)
    path, _, _, _ = split_test_id(test)
    root = Path(repo) if repo is not None else None
    if root is None or path is None:
        return failure
    tree = _parse_file(root / path)
    _, classes, test_func, _ = split_test_id(test)
    own = find_test_function(tree, classes, test_func) if tree is not None else None
    chain = _class_chain(tree, root / path, root, classes) if tree is not None and classes else []
    if tree is not None and classes and not chain:
        # junit files an inherited test under the module defining the method (``tests/__init__.py``
        # for a mixin's test): the class itself is in a sibling module
        for sibling in sorted((root / path).parent.glob("*.py")):
            other = _parse_file(sibling)
            chain = _class_chain(other, sibling, root, classes) if other is not None else []
            if chain:
                tree = other
                failure.home = "::".join([str(sibling.relative_to(root)), *classes, test_func])
                break
    func_tree, func_path = tree, path
    if own is None and chain:  # a method a unittest mixin defines in another module of the suite
        for cls, other, file in chain:
            own = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == test_func), None)
            if own is not None:
                func_tree, func_path = other, str(file.relative_to(root))
                break
    loc = _location(message, func_path, (own.lineno, own.end_lineno) if own is not None else None)
    if tree is None or func_tree is None or loc is None:
        return failure
    line, loc_offset = loc
    func = _innermost_function(func_tree, line)
    stmt = _statement_at(func, line) if func else None
    if func is None or stmt is None:
        return failure
    is_unittest, stmt_line = _unittest_check(stmt) is not None, stmt.lineno
    set_up: list[ast.stmt] = []
    resolver = None
    fixture_modules: list[ast.Module] = []
    if chain and func.args.args and func.args.args[0].arg == "self":
        found = _set_up(chain, root)
        made = found[1] if found is not None else set()
        fixture_modules = found[2] if found is not None else []
        # ``self.formatter = formatter.DateTimeFormatter()``: the object is not the module it is named after
        imported = set().union(*(_module_names(m, root)[1] for m in (tree, func_tree, *fixture_modules)))
        resolver = _SelfResolver(chain, made, renamed={n: f"my_{n}" for n in made & imported})
        set_up = [resolver.visit(pyparse.parse(ast.unparse(s)).body[0]) for s in (found[0] if found else [])]
        stmt = ast.increment_lineno(resolver.visit(pyparse.parse(ast.unparse(stmt)).body[0]), stmt_line - 1)
    subject = _subject(stmt)
    if subject is None:
        return failure
    expr, relation, expected_node, expected_first = subject
    modules, module_level = _module_names(tree, root)
    for other in [func_tree, *fixture_modules]:
        if other is not tree:
            more_modules, more_names = _module_names(other, root)
            modules, module_level = modules | more_modules, module_level | more_names
    params = [a.arg for a in func.args.args + func.args.kwonlyargs if a.arg not in ("self", "cls")]
    values: dict[str, ast.expr] = {}
    for name, text in _frame_args(message, loc_offset, params).items():
        named = _named_repr(text)
        if named is not None:  # a function or class of the project, by the name the test module has for it
            if named in module_level or (text.startswith("<built-in") and named in dir(builtins)):
                values[name] = ast.Name(id=named, ctx=ast.Load())
            elif _exporting_module(named, tree, root) is not None:  # ``idna.decode``: ``decode`` to a user
                values[name] = ast.Name(id=named, ctx=ast.Load())
                module_level.add(named)
            continue
        lit = _literal_repr(text) or _value_repr(text)
        if lit is not None and len(lit) <= _MAX_VALUE:
            node = pyparse.parse(lit, mode="eval").body
            # a constructor repr (``Money('1.00', 'USD')``) counts when the test module imports its class
            if _is_literal(node) or _free_names(node) <= module_level | _STDLIB:
                values[name] = node
    top = next((s for s in func.body if s.lineno <= stmt_line <= s.end_lineno), stmt)
    # checks that passed before the failing one are not part of a repro (nor is a docstring)
    body = [s for s in func.body if s.end_lineno < top.lineno and not isinstance(s, ast.Assert)
            and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) and not _raises_name(s)
            and _unittest_check(s) is None and _helper_check(s) is None]
    if resolver is not None:  # ``setUp`` first, then the test, ``self.X`` written as a user would
        body = [resolver.visit(pyparse.parse(ast.unparse(s)).body[0]) for s in body]
        body = _needed(set_up, [*body, expr, *([expected_node] if expected_node is not None else [])]) + body
    # fixtures the test asks for are built as the fixture builds them, as a user would in their code
    fixtures, fixture_names = _fixture_setup([p for p in params if p not in values], root / path, root, tree,
                                             used=fixture_modules)
    body = fixtures + body
    module_level |= fixture_names
    for other in fixture_modules:  # ``cart.Cart()`` in a conftest fixture is ``Cart()`` too
        modules |= _module_names(other, root)[0]
    places = {}
    for other in [*fixture_modules, func_tree, tree]:  # the test module's own imports win
        places |= _module_places(other, root)
    fill = _Fill(values, modules, places)
    expr = fill.visit(pyparse.parse(ast.unparse(expr), mode="eval").body)
    expected_node = fill.visit(pyparse.parse(ast.unparse(expected_node), mode="eval").body) if expected_node else None
    setup = [fill.visit(pyparse.parse(ast.unparse(s)).body[0]) for s in body]
    module_level |= fill.unprefixed  # ``humanize.naturalsize`` became ``naturalsize``: importable
    later = [expected_node] if expected_node is not None else []
    setup = _drop_dead_stores(setup)
    expr, setup = _inline(expr, setup, later)
    setup = _drop_unread(setup, [expr, *later])
    types = _constructed(setup)
    origins = {s.targets[0].id: s.value for s in setup if isinstance(s, ast.Assign) and len(s.targets) == 1
               and isinstance(s.targets[0], ast.Name)}
    all_modules = {a.asname or a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    all_modules |= {a.asname or a.name.split(".")[0] for s in setup if isinstance(s, ast.Import) for a in s.names}
    # the test module's helpers and those the test defines itself (``def multi(root): ...``)
    test_helpers = {**_module_helpers(tree)[0], **{s.name: s for s in setup if isinstance(s, ast.FunctionDef)}}
    failure.behaviour = _behaviour(expr, types, origins, test_helpers, all_modules | modules)
    if failure.behaviour is None and relation in ("in", "not in") and isinstance(expr, ast.Name) \
            and expr.id in types:  # ``self.assertNotIn(1, cache)``: membership is the cache's behaviour
        failure.behaviour = f"{types[expr.id]}.__contains__()"
    subclasses = {s.name: s.bases[0].id for s in setup if isinstance(s, ast.ClassDef) and len(s.bases) == 1
                  and isinstance(s.bases[0], ast.Name)}
    head = (failure.behaviour or "").split(".")[0]
    if head in subclasses and subclasses[head] != head:  # a test's small subclass: its project base is named
        failure.behaviour = subclasses[head] + failure.behaviour[len(head):]
    if relation == "raises":
        if failure.relation != "raises" and failure.error is None:
            return failure  # it raised, but not the message the test wanted: nothing a user would phrase
        failure.expected_error = _raises_name(stmt)
    failure.relation = relation if failure.relation != "raises" else "raises"
    # the names the repro relies on must be importable, built in, made in the setup or a small helper
    # the test module defines (copied into the repro, as a user pastes one)
    helpers, constants = _module_helpers(tree)
    defined = set()
    for s in setup:
        defined |= {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if isinstance(s, (ast.ClassDef, ast.FunctionDef)):
            defined.add(s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            defined |= {a.asname or a.name.split(".")[0] for a in s.names}
    free = set().union(_free_names(expr), *(_free_names(s) for s in setup)) - defined
    consts = {n: constants[n].value for n in free if n in constants and _is_literal(constants[n].value)
              and len(ast.unparse(constants[n].value)) <= 60}
    if consts:  # literal constants go into the call itself
        expr = _Fill(consts, set()).visit(expr)
        setup = [_Fill(consts, set()).visit(s) for s in setup]
        free -= set(consts)
    # helper functions and aliases of the test module go in front, with what they use in turn
    prelude: set[str] = set()
    queue = [n for n in free if n in helpers or n in constants]
    while queue:
        name = queue.pop()
        if name in prelude:
            continue
        prelude.add(name)
        node = helpers.get(name) or constants[name]
        free |= _free_names(node) - _locals(node)
        queue += [n for n in _free_names(node) if (n in helpers or n in constants) and n not in prelude]
    free -= prelude
    defs = [n for n in tree.body if (helpers.get(getattr(n, "name", None)) is n)
            or any(constants.get(t.id) is n for t in getattr(n, "targets", []) if isinstance(t, ast.Name))]
    defs = [d for d in defs if getattr(d, "name", None) in prelude
            or any(isinstance(t, ast.Name) and t.id in prelude for t in getattr(d, "targets", []))]
    local = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | set(constants)
    failure.self_contained = (all(n in defined or (n in module_level and n not in local) or n in dir(builtins)
                                  or n in _STDLIB
                                  for n in free)
                              and all(isinstance(s, (ast.Assign, ast.Expr, ast.AugAssign, ast.AnnAssign, ast.Delete))
                                      or isinstance(s, ast.FunctionDef) and not _test_decorated(s)
                                      and s.end_lineno - s.lineno <= 5
                                      or isinstance(s, ast.ClassDef) and not s.decorator_list  # a small subclass
                                      and s.end_lineno - s.lineno <= 8
                                      or _stdlib_import(s) for s in setup) and len(setup) <= 10)
    setup = [*defs, *setup]
    failure.call = ast.unparse(expr)
    failure.setup = [ast.unparse(s) for s in setup]
    if len(failure.call) > _MAX_CALL or any(len(s) > 3 * _MAX_CALL for s in failure.setup):
        failure.call = None
        return failure
    failure.names = _shown_names([expr, *setup])
    _read_values(failure, message, relation, expected_node, expected_first, unittest=is_unittest)
    return failure


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0].strip() if message.strip() else ""


def _read_outcome_kind(failure: Failure, message: str) -> None:
    """Errors and missing errors, read from the first line of the failure text."""
    first = _first_line(message)
    if re.match(r"^(?:Failed: )?DID NOT RAISE\b", first) or re.match(r"^(?:AssertionError: )?\w+ not raised\b", first):
        failure.relation = "raises"
        return
    m = _EXC_LINE.match(first)
    if m and m.group(1) != "AssertionError":
        text = (m.group(2) or "").strip()
        if len(text) > 120 or "object at 0x" in text or "\u2026" in text or "..." in text:
            text = ""
        failure.error = (m.group(1), text)


def _read_values(failure: Failure, message: str, relation: str, expected_node: ast.expr | None,
                 expected_first: bool, unittest: bool = False) -> None:
    if failure.error is not None or relation == "raises":
        if expected_node is not None and relation == "==":
            failure.expected = _value_repr(ast.unparse(expected_node))
        return
    first = re.sub(r"^AssertionError: ", "", _first_line(message))
    m = re.match(r"^assert (.*)$", first)
    if not m:
        if unittest:
            _read_unittest_values(failure, first, relation, expected_node, expected_first)
        return
    summary = m.group(1)
    if relation in ("truthy", "falsy"):
        summary = re.sub(r"^not ", "", summary) if relation == "falsy" else summary
        failure.observed = _value_repr(summary)
        return
    known = _value_repr(ast.unparse(expected_node)) if expected_node is not None and _is_literal(expected_node) \
        else None
    # pytest prints the sides in source order, so the operator is the one written in the test
    op = _SWAPPED[relation] if expected_first and relation not in ("in", "not in") else relation
    parts = _split_compare(summary, op, known, expected_first)
    if parts is None:
        if relation == "==":
            _read_first_difference(failure, message, expected_first)
        return
    exp_text, obs_text = (parts[0], parts[1]) if expected_first else (parts[1], parts[0])
    failure.observed = _value_repr(obs_text)
    failure.expected = known or _value_repr(exp_text)
    if relation == "==" and (failure.observed is None or failure.expected is None):
        _read_first_difference(failure, message, expected_first)


def _read_first_difference(failure: Failure, message: str, expected_first: bool) -> None:
    """When pytest cut the values short, report the first differing item in full: pytest's
    ``At index 2 diff: A != B`` (sequences) or ``Differing items: {k: A} != {k: B}`` (dicts)."""
    key = left = right = None
    m = re.search(r"^\s*At index (\d+) diff: (.+)$", message, re.M)
    if m:
        parts = _split_compare(m.group(2).strip(), "!=", None, False)
        if parts:
            key, (left, right) = m.group(1), parts
    else:
        m = re.search(r"^\s*Differing items:\s*\n\s*(\{.+\}) != (\{.+\})\s*$", message, re.M)
        if m:
            try:
                a, b = pyparse.parse(m.group(1), mode="eval").body, pyparse.parse(m.group(2), mode="eval").body
            except SyntaxError:
                return
            if isinstance(a, ast.Dict) and isinstance(b, ast.Dict) and len(a.keys) == len(b.keys) == 1 \
                    and a.keys[0] is not None and ast.unparse(a.keys[0]) == ast.unparse(b.keys[0]):
                key, left, right = ast.unparse(a.keys[0]), ast.unparse(a.values[0]), ast.unparse(b.values[0])
    if key is None or failure.call is None:
        return
    exp_text, obs_text = (left, right) if expected_first else (right, left)
    observed, expected = _value_repr(obs_text), _value_repr(exp_text)
    if observed is None or expected is None:
        return
    node = pyparse.parse(failure.call, mode="eval").body
    base = failure.call if isinstance(node, (ast.Call, ast.Attribute, ast.Name, ast.Subscript)) else f"({failure.call})"
    failure.call = f"{base}[{key}]"
    failure.observed, failure.expected = observed, expected



# -- unittest-style tests: ``self.X`` and ``self.assertX(...)`` ----------------------------------------

#: ``self.assertX(a, b)`` comparisons and the operator they check (``a OP b``).
_UNITTEST_COMPARE = {
    "assertEqual": "==", "assertEquals": "==", "failUnlessEqual": "==", "assertListEqual": "==",
    "assertTupleEqual": "==", "assertDictEqual": "==", "assertSetEqual": "==", "assertSequenceEqual": "==",
    "assertMultiLineEqual": "==", "assertNotEqual": "!=", "assertNotEquals": "!=", "assertLess": "<",
    "assertLessEqual": "<=", "assertGreater": ">", "assertGreaterEqual": ">=", "assertIs": "is",
    "assertIsNot": "is not", "assertIn": "in", "assertNotIn": "not in",
}
_UNITTEST_TRUTH = {"assertTrue": "truthy", "assert_": "truthy", "failUnless": "truthy", "assertFalse": "falsy",
                   "failIf": "falsy"}
_UNITTEST_NONE = {"assertIsNone": "is", "assertIsNotNone": "is not"}
_UNITTEST_RAISES = ("assertRaises", "assertRaisesRegex", "assertRaisesRegexp")
#: How unittest words a failed check, by relation: the observed value is group ``obs``.
_UNITTEST_MESSAGES = {
    "truthy": re.compile(r"^(?P<obs>.+) is not true$"),
    "falsy": re.compile(r"^(?P<obs>.+) is not false$"),
    "in": re.compile(r"^(?P<exp>.+?) not found in (?P<obs>.+)$"),
    "not in": re.compile(r"^(?P<exp>.+?) unexpectedly found in (?P<obs>.+)$"),
}
_UNITTEST_SIDES = {"==": "!=", "!=": "==", "<": "not less than", "<=": "not less than or equal to",
                   ">": "not greater than", ">=": "not greater than or equal to", "is": "is not"}


def _unittest_check(stmt: ast.stmt) -> tuple[str, ast.Call] | None:
    """(method name, call) of a ``self.assertX(...)`` statement."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and (func.attr.startswith(("assert", "fail"))):
            return func.attr, stmt.value
    return None


def _unittest_subject(stmt: ast.stmt) -> tuple[ast.expr, str, ast.expr | None, bool] | None:
    """:func:`_subject` for ``self.assertEqual(expected, f(x))`` and its kin (``assertRaises(E, f, x)``
    is the call ``f(x)`` that should raise)."""
    check = _unittest_check(stmt)
    if check is None:
        return None
    name, call = check
    args = call.args
    if name in _UNITTEST_COMPARE and len(args) >= 2:
        op, left, right = _UNITTEST_COMPARE[name], args[0], args[1]
        if op in ("in", "not in"):
            return right, op, left, True
        return _compared(left, op, right)
    if name in _UNITTEST_TRUTH and args:
        return args[0], _UNITTEST_TRUTH[name], None, False
    if name in _UNITTEST_NONE and args:
        return args[0], _UNITTEST_NONE[name], ast.Constant(value=None), False
    if name in _UNITTEST_RAISES and len(args) >= 2 and not isinstance(args[1], ast.Starred):
        target = ast.Call(func=args[1], args=list(args[2:]), keywords=list(call.keywords))
        return ast.fix_missing_locations(ast.copy_location(target, call)), "raises", None, False
    return None


def _read_unittest_values(failure: Failure, first: str, relation: str, expected_node: ast.expr | None,
                          expected_first: bool) -> None:
    """Observed and expected values from unittest's wording of a failed check (``3 != 2``,
    ``'fig' not found in []``, ``False is not true``), the ``: msg`` a test adds left aside."""
    text = re.sub(r"^(?:Lists|Tuples|Sequences|Dicts?|Sets) differ: ", "", first)
    known = _value_repr(ast.unparse(expected_node)) if expected_node is not None and _is_literal(expected_node) \
        else None
    pattern = _UNITTEST_MESSAGES.get(relation)
    if pattern is not None:
        for candidate in (text, re.sub(r" : .*$", "", text)):
            m = pattern.match(candidate)
            if m and _value_repr(m.group("obs")) is not None:
                failure.observed = _value_repr(m.group("obs"))
                if "exp" in m.groupdict():
                    failure.expected = known or _value_repr(m.group("exp"))
                return
        return
    sep = _UNITTEST_SIDES.get(relation if not expected_first else _SWAPPED.get(relation, relation))
    if sep is None:
        return
    if relation in ("is", "is not") and expected_node is not None and ast.unparse(expected_node) == "None":
        m = re.match(r"^(.+) is not None$", text)  # assertIsNone
        if m and relation == "is":
            failure.observed, failure.expected = _value_repr(m.group(1)), "None"
        return
    for candidate in (text, re.sub(r" : [^']*$", "", text)):
        parts = _split_compare(candidate, sep, known, expected_first)
        if parts is not None:
            exp_text, obs_text = (parts[0], parts[1]) if expected_first else (parts[1], parts[0])
            failure.observed, failure.expected = _value_repr(obs_text), known or _value_repr(exp_text)
            if failure.observed is not None and failure.expected is not None:
                return
    failure.observed = failure.expected = None


def _class_chain(tree: ast.Module, path: Path, root: Path, names: list[str],
                 depth: int = 0) -> list[tuple[ast.ClassDef, ast.Module, Path]]:
    """The test class ``names[-1]`` (nested in ``names[:-1]``) and its bases, nearest first, each with
    its module and file: bases defined in the module or imported from a module of the test suite
    (``from . import CacheTestMixin``)."""
    body: list[ast.stmt] = tree.body
    node = None
    for name in names:
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if node is None:
            return []
        body = node.body
    chain = [(node, tree, path)]
    if depth > 3:
        return chain
    for base in node.bases:
        if not isinstance(base, ast.Name) or base.id in ("object", "TestCase"):
            continue
        if any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
            chain += _class_chain(tree, path, root, [base.id], depth + 1)
            continue
        for imp in tree.body:
            if not isinstance(imp, ast.ImportFrom) or not any((a.asname or a.name) == base.id for a in imp.names):
                continue
            real = next(a.name for a in imp.names if (a.asname or a.name) == base.id)
            folder = path.parent
            for _ in range(max(imp.level - 1, 0)):
                folder = folder.parent
            parts = (imp.module or "").split(".") if imp.module else []
            start = folder if imp.level else root
            target = start.joinpath(*parts) if parts else start
            for file in (target.with_suffix(".py") if parts else None, target / "__init__.py"):
                other = _parse_file(file) if file is not None else None
                if other is not None:
                    found = _class_chain(other, file, root, [real], depth + 1)
                    if found:
                        chain += found
                        break
    return chain


def _chain_method(chain: list[tuple[ast.ClassDef, ast.Module, Path]], name: str) -> ast.FunctionDef | None:
    for cls, _, _ in chain:
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
    return None


class _SelfResolver(ast.NodeTransformer):
    """Rewrite ``self.X`` as a user would write it: a class attribute by its value (``self.Cache`` ->
    ``LRUCache``), an attribute ``setUp`` made by its name (``self.cache`` -> ``cache``; ``renamed``: another
    name where the test module imports one of that name, ``self.formatter`` -> ``my_formatter``), and a small
    helper method (``self.cache(maxsize=2)``, one ``return``) by what it returns, arguments filled in.
    Anything else stays ``self.X`` (and makes the repro not self-contained)."""

    def __init__(self, chain: list[tuple[ast.ClassDef, ast.Module, Path]], made: set[str], depth: int = 0,
                 renamed: dict[str, str] | None = None) -> None:
        self.chain, self.made, self.depth, self.renamed = chain, made, depth, renamed or {}
        self.attrs: dict[str, ast.expr] = {}
        for cls, _, _ in reversed(chain):  # the nearest class's value wins
            for node in cls.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    value = node.value
                    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 1 \
                            and value.func.id in ("staticmethod", "classmethod"):
                        value = value.args[0]  # ``DECORATOR = staticmethod(lru_cache)``: the function itself
                    if not (isinstance(value, ast.Constant) and value.value is None):
                        self.attrs[node.targets[0].id] = value

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and func.attr not in self.attrs and func.attr not in self.made and self.depth < 3:
            method = _chain_method(self.chain, func.attr)
            inlined = self._inline(method, node) if method is not None else None
            if inlined is not None:
                return inlined
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            if node.attr in self.made:
                return ast.copy_location(ast.Name(id=self.renamed.get(node.attr, node.attr), ctx=node.ctx), node)
            if node.attr in self.attrs and isinstance(node.ctx, ast.Load):
                value = pyparse.parse(ast.unparse(self.attrs[node.attr]), mode="eval").body
                return ast.copy_location(self.visit(value), node)
            return node
        self.generic_visit(node)
        return node

    def _inline(self, method: ast.FunctionDef, call: ast.Call) -> ast.expr | None:
        body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None or method.decorator_list:
            return None
        a = method.args
        names = [x.arg for x in [*a.posonlyargs, *a.args]][1:]  # without self
        if any(isinstance(x, ast.Starred) for x in call.args) or (len(call.args) > len(names) and not a.vararg) \
                or any(k.arg is None for k in call.keywords):
            return None
        values: dict[str, ast.expr] = dict(zip(names, (self.visit(x) for x in call.args)))
        if a.vararg:  # ``def cart(self, *items)``: the extra arguments as a tuple, spread where passed on
            values[a.vararg.arg] = ast.Tuple(elts=[self.visit(x) for x in call.args[len(names):]], ctx=ast.Load())
        extra = []
        for k in call.keywords:
            if k.arg in names or k.arg in {x.arg for x in a.kwonlyargs}:
                values[k.arg] = self.visit(k.value)
            elif a.kwarg:
                extra.append(ast.keyword(arg=k.arg, value=self.visit(k.value)))
            else:
                return None
        defaults = dict(zip(names[len(names) - len(a.defaults):], a.defaults)) if a.defaults else {}
        defaults |= {x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
        for name in [*names, *(x.arg for x in a.kwonlyargs)]:
            if name not in values:
                if name not in defaults:
                    return None
                values[name] = defaults[name]
        expr = pyparse.parse(ast.unparse(body[0].value), mode="eval").body
        kwarg = a.kwarg.arg if a.kwarg else None
        for sub in ast.walk(expr):  # ``f(**kwargs)``: the keywords the call passed on
            if isinstance(sub, ast.Call) and kwarg:
                spread = [k for k in sub.keywords if k.arg is None and isinstance(k.value, ast.Name)
                          and k.value.id == kwarg]
                if spread:
                    sub.keywords = [k for k in sub.keywords if k not in spread] + extra
        if kwarg and kwarg in _free_names(expr):
            return None
        expr = _Fill(values, set()).visit(expr)
        inner = _SelfResolver(self.chain, self.made, self.depth + 1, self.renamed)
        return ast.fix_missing_locations(ast.copy_location(inner.visit(expr), call))


def _set_up(chain: list[tuple[ast.ClassDef, ast.Module, Path]],
            root: Path) -> tuple[list[ast.stmt], set[str], list[ast.Module]] | None:
    """What runs before a test method: the class-scoped fixtures its class names
    (:func:`_class_fixtures`), then the nearest ``setUp`` or ``setup_method`` (with
    what ``super().setUp()`` runs of the bases' in its place), ``self.x = ...`` written ``x = ...``;
    the names they make; and the modules the fixtures come from (the names they use are theirs).
    ``None`` when the set-up does something a repro cannot (a loop, a patch, another ``self`` call)."""
    fixtures, modules = _class_fixtures(chain, root)
    found = _set_up_method(chain)
    if found is None:
        return None
    stmts, made = [*fixtures, *found[0]], set(found[1])
    for st in fixtures:
        made |= {t.attr for t in st.targets if isinstance(t, ast.Attribute)}
    return stmts, made, modules


_SET_UPS = ("setUp", "setup_method")


def _set_up_method(chain: list[tuple[ast.ClassDef, ast.Module, Path]],
                   depth: int = 0) -> tuple[list[ast.stmt], set[str]] | None:
    """The statements of the nearest ``setUp`` or ``setup_method`` of ``chain`` and the names it makes."""
    at = next((i for i, (cls, _, _) in enumerate(chain) for n in cls.body
               if isinstance(n, ast.FunctionDef) and n.name in _SET_UPS), None)
    if at is None:
        return [], set()
    method = next(n for n in chain[at][0].body if isinstance(n, ast.FunctionDef) and n.name in _SET_UPS)
    stmts, made = [], set()
    for st in method.body:
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and "super" in ast.unparse(st.value.func):
            inherited = _set_up_method(chain[at + 1:], depth + 1) if depth < 3 else None
            if inherited is None:
                return None
            stmts += inherited[0]
            made |= inherited[1]
            continue
        if not isinstance(st, (ast.Assign, ast.Expr)) or len(method.body) > 10:
            return None
        for t in getattr(st, "targets", []):
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                made.add(t.attr)
        stmts.append(st)
    return stmts, made


def _fixture_names(cls: ast.ClassDef) -> list[str]:
    """The fixtures ``@pytest.mark.usefixtures("a", "b")`` on ``cls`` names, in order."""
    names = []
    for deco in cls.decorator_list:
        if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "usefixtures":
            names += [a.value for a in deco.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


class _OnTheClass(ast.NodeTransformer):
    """A class fixture's body as the test method sees it: ``request.cls.x`` is ``self.x`` and
    ``request.cls.__name__`` the test class's name; ``ok`` turns false where ``request`` is used
    any other way (its ``param``, its ``node``: nothing a repro can write)."""

    def __init__(self, class_name: str) -> None:
        self.class_name, self.ok = class_name, True

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "cls" and isinstance(value.value, ast.Name) \
                and value.value.id == "request":
            if node.attr == "__name__":
                return ast.copy_location(ast.Constant(self.class_name), node)
            return ast.copy_location(ast.Attribute(value=ast.Name("self", ast.Load()), attr=node.attr,
                                                   ctx=node.ctx), node)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "request":
            self.ok = False
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if all(isinstance(n, (ast.Subscript, ast.Constant, ast.Slice, ast.UnaryOp, ast.USub, ast.Load))
               for n in ast.walk(node)):
            try:  # ``'TestEnglishLocale'[4:]``: a literal the repro states folded
                folded = eval(compile(ast.Expression(ast.fix_missing_locations(node)), "<fixture>", "eval"),
                              {"__builtins__": {}})
            except Exception:  # noqa: BLE001 - any failure leaves the subscript as written
                return node
            if isinstance(folded, str | int | float | bytes):
                return ast.copy_location(ast.Constant(folded), node)
        return node


def _class_fixtures(chain: list[tuple[ast.ClassDef, ast.Module, Path]],
                    root: Path) -> tuple[list[ast.Assign], list[ast.Module]]:
    """The class-scoped fixtures ``@pytest.mark.usefixtures`` gives the test class (``chain[0]``) or
    its bases that set attributes on the class (``request.cls.parser = DateTimeParser()``, as arrow's
    conftest does), their statements written as ``setUp`` would (``self.parser = ...``); a fixture
    that takes other fixtures, yields, or uses ``request`` otherwise is left out. Also the modules
    they come from."""
    stmts: list[ast.Assign] = []
    modules: list[ast.Module] = []
    seen: set[str] = set()
    for cls, tree, path in reversed(chain):  # a base's fixtures first
        for name in _fixture_names(cls):
            if name in seen:
                continue
            seen.add(name)
            found = _fixture_def(name, _fixture_places(tree, path, root))
            if found is None:
                continue
            func, module = found
            if [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]] != ["request"]:
                continue
            body = [st for st in func.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
            made = []
            for st in body:
                if not isinstance(st, ast.Assign) or len(st.targets) != 1:
                    made = None
                    break
                fix = _OnTheClass(chain[0][0].name)
                new = fix.visit(pyparse.parse(ast.unparse(st)).body[0])
                if not fix.ok:
                    made = None
                    break
                made.append(new)
            if made:
                stmts += made
                if module not in modules:
                    modules.append(module)
    return stmts, modules


def _needed(set_up: list[ast.stmt], after: list[ast.AST]) -> list[ast.stmt]:
    """The ``setUp`` statements that make or change what ``after`` reads (``self.full = Cart()`` and
    ``self.full.add(...)`` stay only when the test uses ``full``)."""
    needed = set().union(*(_free_names(n) for n in after)) if after else set()
    kept: list[ast.stmt] = []
    for stmt in reversed(set_up):
        touched = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if isinstance(stmt, ast.Expr):
            root = stmt.value.func if isinstance(stmt.value, ast.Call) else stmt.value
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                root = root.func if isinstance(root, ast.Call) else root.value
            touched |= {root.id} if isinstance(root, ast.Name) else set()
        if touched & needed:
            kept.append(stmt)
            needed |= _free_names(stmt)
    return kept[::-1]


def _stdlib_import(stmt: ast.stmt) -> bool:
    """``import pickle`` inside a test: a repro may import the standard library as the test does."""
    if isinstance(stmt, ast.Import):
        return all(a.name.split(".")[0] in _STDLIB for a in stmt.names)
    return isinstance(stmt, ast.ImportFrom) and not stmt.level and (stmt.module or "").split(".")[0] in _STDLIB


def _star_names(repo: Path, base: str) -> set[str]:
    """The public names ``from base import *`` binds, read from the project's module (its ``__all__``
    when that is a literal list, else its top-level public definitions and imports)."""
    for folder in (repo, repo / "src"):
        for file in (folder / f"{base}.py", folder / base / "__init__.py"):
            tree = _parse_file(file)
            if tree is None:
                continue
            names: set[str] = set()
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                        for t in node.targets):
                    try:
                        return {n for n in ast.literal_eval(node.value) if isinstance(n, str)}
                    except (ValueError, TypeError, SyntaxError):
                        pass
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Assign):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
            return {n for n in names if not n.startswith("_")}
    return set()
