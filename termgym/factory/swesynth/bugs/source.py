"""The shared machinery of every bug operator: mutations as exact spans of a module's text.

A :class:`Mutation` replaces one character span of one file. Operators find them by walking a
:class:`ModuleIndex` (the parsed module plus every node inside a function body) and collect them
with a :class:`Builder`, which drops edits that change nothing. Several mutations that only make
sense together (a coordinated bug) share a ``group`` and are planned, applied and undone as one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from termgym.tasks.swesynth import pyparse


@dataclass(frozen=True)
class Mutation:
    """One injectable bug: replace ``source[start:end]`` of ``path`` with ``replacement``.

    ``start``/``end`` are character offsets into the original file text. ``line`` is the first
    changed line (1-based) and ``function`` the qualified name of the enclosing function; both are
    for the task record and debugging, never shown to the agent.
    """

    bug_type: str
    path: str
    start: int
    end: int
    replacement: str
    line: int
    function: str | None
    description: str
    #: Mutations of one coordinated bug share a non-empty group id; they are drawn, applied and
    #: reverted together (see :func:`units`). Empty for a single-edit bug.
    group: str = ""

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.path, self.start, self.end)

    def to_dict(self) -> dict:
        return asdict(self)


class InjectionError(ValueError):
    """Mutations could not be applied (overlapping spans, or the result does not parse)."""


# -- source text helpers -----------------------------------------------------------------------


class SourceText:
    """A module's text with conversions from AST positions (UTF-8 byte columns) to offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line)
        self.starts.append(pos)

    def offset(self, lineno: int, col_byte: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col_byte].decode("utf-8", "ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset))

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def line_span(self, first: int, last: int) -> tuple[int, int]:
        """Offsets covering whole lines ``first..last`` (1-based, inclusive, with the newline)."""
        return (self.starts[first - 1], self.starts[last])

    def owns_lines(self, node: ast.stmt) -> bool:
        """True when the statement alone occupies its lines (nothing else before or after it)."""
        start, end = self.span(node)
        line_start, line_end = self.line_span(node.lineno, node.end_lineno)
        before = self.text[line_start:start]
        after = self.text[end:line_end]
        return before.strip() == "" and (after.strip() == "" or after.strip().startswith("#"))

    def indent_of(self, lineno: int) -> str:
        line = self.lines[lineno - 1]
        return line[: len(line) - len(line.lstrip())]


# -- the module index shared by all finders ----------------------------------------------------


@dataclass
class Site:
    """A node inside a function body, with its parent and the enclosing function."""

    node: ast.AST
    parent: ast.AST
    func: ast.FunctionDef | ast.AsyncFunctionDef
    qualname: str


class ModuleIndex:
    """Parsed module plus every node that lives inside a function body."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.src = SourceText(text)
        self.tree = pyparse.parse(text)
        self.sites: list[Site] = []
        self.functions: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = []
        self.docstrings: set[int] = set()
        self.in_fstring: set[int] = set()
        self._visit(self.tree, None, None, "")
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    self.docstrings.add(id(body[0].value))
            if isinstance(node, ast.JoinedStr):
                # Positions of the pieces inside an f-string are unreliable before Python 3.12.
                for inner in ast.walk(node):
                    if inner is not node:
                        self.in_fstring.add(id(inner))

    def _visit(self, node: ast.AST, parent: ast.AST | None, func, qual: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{qual}.{child.name}" if qual else child.name
                self.functions.append((child, name))
                for stmt in child.body:
                    self._record(stmt, child, child, name)
                    self._visit(stmt, child, child, name)
            elif isinstance(child, ast.ClassDef):
                name = f"{qual}.{child.name}" if qual else child.name
                for stmt in child.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self._visit(ast.Module(body=[stmt], type_ignores=[]), child, func, name)
            elif isinstance(child, ast.Lambda):
                continue
            else:
                if func is not None:
                    self._record(child, node, func, qual)
                self._visit(child, node, func, qual)

    def _record(self, node, parent, func, qual) -> None:
        self.sites.append(Site(node, parent, func, qual))

    def nodes(self, *types: type) -> Iterable[Site]:
        for site in self.sites:
            if isinstance(site.node, types) and id(site.node) not in self.in_fstring:
                yield site


# -- small building blocks ---------------------------------------------------------------------

_ATOMIC = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict,
           ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)

_BINOP_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
    ast.MatMult: "@",
}
_CMP_PATTERNS = {
    ast.Lt: r"<(?!=)", ast.LtE: r"<=", ast.Gt: r">(?!=)", ast.GtE: r">=", ast.Eq: r"==", ast.NotEq: r"!=",
    ast.In: r"(?<!not )\bin\b", ast.NotIn: r"\bnot\s+in\b", ast.Is: r"\bis\b(?!\s+not\b)",
    ast.IsNot: r"\bis\s+not\b",
}


def _paren(text: str, node: ast.AST) -> str:
    return text if isinstance(node, _ATOMIC) else f"({text})"


def _find_operator(gap: str, pattern: str) -> re.Match | None:
    """Find an operator token in the text between two operands (parens and comments allowed)."""
    code = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), gap)
    matches = list(re.finditer(pattern, code))
    return matches[0] if len(matches) == 1 else None


def _binop_pattern(symbol: str) -> str:
    # An operator symbol not glued to another operator character (so * is not part of ** or *=).
    return rf"(?<![*/<>=!&|^%@+\-]){re.escape(symbol)}(?![*/<>=&|^%@])"


class _Builder:
    """Collects mutations for one module, dropping those that do not parse or change nothing."""

    def __init__(self, index: ModuleIndex, bug_type: str) -> None:
        self.index = index
        self.bug_type = bug_type
        self.out: list[Mutation] = []
        self._seen: set[tuple[int, int, str]] = set()

    def add(self, start: int, end: int, replacement: str, site: Site | None, description: str) -> None:
        mutation = self.make(start, end, replacement, site, description)
        if mutation is not None:
            self.out.append(mutation)

    def make(self, start: int, end: int, replacement: str, site: Site | None, description: str,
             group: str = "") -> Mutation | None:
        """The mutation for this span (``None`` when it changes nothing or was already made)."""
        # Parsing the mutated module is left to check_mutation, when a candidate is actually
        # drawn: most candidates are never tried, and parsing each one made scans 100x slower.
        text = self.index.src.text
        if text[start:end] == replacement or (start, end, replacement, group) in self._seen:
            return None
        self._seen.add((start, end, replacement, group))
        line = text.count("\n", 0, start) + 1
        return Mutation(
            bug_type=self.bug_type, path=self.index.path, start=start, end=end, replacement=replacement,
            line=line, function=site.qualname if site else None, description=description, group=group,
        )


#: The public name of the collector (operators outside this package use it).
Builder = _Builder


def check_mutation(text: str, mutation: Mutation, original_dump: str | None = None) -> bool:
    """True when applying ``mutation`` to ``text`` parses and changes the module's AST.

    ``original_dump`` (``ast.dump`` of the unmodified module) saves re-parsing it per call.
    """
    new_text = text[: mutation.start] + mutation.replacement + text[mutation.end:]
    try:
        return ast.dump(pyparse.parse(new_text)) != (original_dump or ast.dump(pyparse.parse(text)))
    except SyntaxError:
        return False


def units(mutations: Iterable[Mutation]) -> list[tuple[Mutation, ...]]:
    """Group candidates into the units a plan draws: one per single edit, one per coordinated group.

    Order follows the first appearance of each unit, so the result is as deterministic as the input.
    """
    out: dict[object, list[Mutation]] = {}
    for m in mutations:
        key = (m.bug_type, m.group) if m.group else m
        out.setdefault(key, []).append(m)
    return [tuple(ms) for ms in out.values()]


def check_unit(files: dict[str, str], unit: Sequence[Mutation], dumps: dict[str, str] | None = None) -> bool:
    """True when every file a unit touches still parses after it and at least one AST changes.

    ``dumps`` caches ``ast.dump`` of the unmodified files (path -> dump) across calls.
    """
    dumps = {} if dumps is None else dumps
    by_path: dict[str, list[Mutation]] = {}
    for m in unit:
        if m.path not in files:
            return False
        by_path.setdefault(m.path, []).append(m)
    changed = False
    for path, ms in by_path.items():
        ordered = sorted(ms, key=lambda m: (m.start, m.end))
        if any(c.start < a.end or (c.start == a.start == a.end) for a, c in zip(ordered, ordered[1:], strict=False)):
            return False
        text = files[path]
        for m in reversed(ordered):
            text = text[: m.start] + m.replacement + text[m.end:]
        try:
            new_dump = ast.dump(pyparse.parse(text))
        except SyntaxError:
            return False
        if path not in dumps:
            dumps[path] = ast.dump(pyparse.parse(files[path]))
        changed = changed or new_dump != dumps[path]
    return changed


def _stable_pick(options: Sequence, salt: int):
    return options[salt % len(options)]


def _function_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """Local variable names of a function and the line where each is first bound."""
    names: dict[str, int] = {}
    args = func.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            names.setdefault(arg.arg, func.lineno)
    # Names bound in a nested scope (a comprehension's variable, a lambda's or inner function's
    # parameters and locals) are not bound where the function reads its own: using one raises
    # NameError, a slip no person makes.
    nested = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef,
              ast.AsyncFunctionDef, ast.ClassDef)
    stack: list[ast.AST] = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, nested):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.setdefault(node.name, node.lineno)  # the inner definition's own name is local
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.setdefault(node.id, node.lineno)
            names[node.id] = min(names[node.id], node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    names.pop("self", None)
    names.pop("cls", None)
    return names


def _is_block_list(parent: ast.AST, stmt: ast.stmt) -> list[ast.stmt] | None:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block:
            return block
    if isinstance(parent, ast.ExceptHandler) and stmt in parent.body:
        return parent.body
    return None


def _delete_statement(b: _Builder, site: Site, description: str) -> None:
    """Remove a statement that owns its lines, if its block keeps at least one other statement."""
    stmt = site.node
    block = _is_block_list(site.parent, stmt)
    if block is None or len(block) < 2 or not b.index.src.owns_lines(stmt):
        return
    start, end = b.index.src.line_span(stmt.lineno, stmt.end_lineno)
    b.add(start, end, "", site, description)


def _string_literal(src: SourceText, node: ast.Constant) -> tuple[str, str, str] | None:
    """(prefix+quote, body, quote) of a simple one-token string literal, else None."""
    seg = src.segment(node)
    m = re.fullmatch(r"([rRuU]?)('''|\"\"\"|'|\")(.*)\2", seg, re.S)
    if not m or "\\" in m.group(3):
        return None
    return m.group(1) + m.group(2), m.group(3), m.group(2)


_SEPARATOR_SWAPS = {" ": "", "-": "_", "_": "-", ",": ";", ";": ",", ".": ",", ":": ";", "/": "\\\\",
                    ", ": ",", "\n": " ", "": " ", "=": ":", "|": ",", "+": "-"}


def _mutate_string(body: str, salt: int) -> str | None:
    if body in _SEPARATOR_SWAPS:
        return _SEPARATOR_SWAPS[body]
    if len(body) > 40 or "\n" in body:
        return None
    options = []
    if len(body) >= 4 and body.replace(" ", "").isalpha():
        # a word's case ('Error' for 'error'); never a code such as a file mode ('Rb+' for 'rb+')
        options.append(body[0].swapcase() + body[1:])
    if len(body) > 1:
        options.append(body[:-1])
    if body.strip() != body:
        options.append(body.strip())
    return _stable_pick(options, salt) if options else None


def _mutate_number(value: int | float, salt: int) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if value in (0, 1):
            return value + 2
        return _stable_pick([value * 2, value // 2 if value // 2 != value else value * 10, value * 10], salt)
    if value == 0:
        return 1.0
    return _stable_pick([value * 2, value / 2, value * 10], salt)


def _constant_replacement(src: SourceText, node: ast.Constant, salt: int) -> str | None:
    value = node.value
    if isinstance(value, bool):
        return "False" if value else "True"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        new = _mutate_number(value, salt)
        return None if new is None else repr(new)
    if isinstance(value, str):
        lit = _string_literal(src, node)
        if lit is None:
            return None
        opening, body, quote = lit
        new = _mutate_string(body, salt)
        if new is None or quote in new:
            return None
        return f"{opening}{new}{quote}"
    return None
