"""Who calls what across a repository's modules: the import and call graph the harder operators use.

:class:`RepoIndex` parses every source module once and resolves, for each call of a function the
repository defines, which module and function it names. The resolution is static and deliberately
simple (what a reader of the code would follow): plain calls of names bound by ``def`` or by
``from X import name`` (relative or absolute), ``module.name(...)`` after ``import X`` /
``from pkg import module``, and ``self.name(...)`` inside the class that defines ``name``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from termgym.factory.swesynth.bugs.source import ModuleIndex
from termgym.tasks.swesynth import pyparse

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def module_name(path: str) -> str:
    """The dotted module name of a repository-relative path (``pkg/sub/__init__.py`` -> ``pkg.sub``)."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(p for p in parts if p)


def module_stem(path: str) -> str:
    """The short name a test file would use for a module: ``pkg/_utils.py`` -> ``utils``."""
    name = module_name(path).rsplit(".", 1)[-1]
    return name.strip("_") or name


@dataclass(frozen=True)
class Definition:
    """A function the repository defines: its module file, qualified name and node."""

    path: str
    qualname: str
    node: FunctionNode = field(compare=False, hash=False, repr=False)
    class_name: str | None = None

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class CallSite:
    """One call of a :class:`Definition`: the calling file, the enclosing function and the node."""

    path: str
    caller: str | None
    node: ast.Call = field(compare=False, hash=False, repr=False)
    parent: ast.AST | None = field(compare=False, hash=False, repr=False, default=None)


class ModuleMap:
    """Dotted module names of a repository's files and static resolution of imports to those files.

    Cheap to build (no parsing): the signals of a task use it to see which modules a test imports.
    ``read`` returns a file's text on demand (to follow ``from .sub import name`` re-exports in a
    package ``__init__``); without it re-exports are not followed.
    """

    def __init__(self, paths: Iterable[str], read: Callable[[str], str] | None = None) -> None:
        self.by_name: dict[str, str] = {module_name(p): p for p in sorted(paths) if p.endswith(".py")}
        self._read = read
        self._trees: dict[str, ast.Module | None] = {}

    @classmethod
    def of_directory(cls, root: str | Path) -> ModuleMap:
        """Every ``.py`` file under ``root`` (hidden folders, virtual environments and caches skipped)."""
        root = Path(root)
        paths = []
        for path in root.rglob("*.py"):
            rel = path.relative_to(root)
            if any(part.startswith(".") or part in _SKIP_DIRS for part in rel.parts[:-1]):
                continue
            paths.append(rel.as_posix())
        return cls(paths, lambda p: (root / p).read_text(encoding="utf-8", errors="replace"))

    def resolve_module(self, dotted: str, importer: str | None = None, level: int = 0) -> str | None:
        """The file of module ``dotted`` as imported from file ``importer`` (``level`` dots), if ours."""
        if level:
            if importer is None:
                return None
            package = module_name(importer).split(".")
            if not importer.endswith("__init__.py"):
                package = package[:-1]
            if level > 1:
                package = package[: len(package) - (level - 1)]
            dotted = ".".join([*package, dotted] if dotted else package)
        if dotted in self.by_name:
            return self.by_name[dotted]
        # src/ layouts and repositories nested one folder down: match on the dotted suffix.
        matches = [p for name, p in self.by_name.items() if name.endswith("." + dotted)]
        return matches[0] if len(matches) == 1 else None

    def _tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = pyparse.parse(self._read(path)) if self._read else None
            except (SyntaxError, OSError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def _reexported(self, package_file: str, name: str, depth: int = 0) -> str | None:
        """The module a package ``__init__`` takes ``name`` from (``from .money import total``)."""
        tree = self._tree(package_file) if package_file.endswith("__init__.py") and depth < 3 else None
        for node in tree.body if tree else []:
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                source = self.resolve_module(node.module or "", package_file, node.level)
                if source is not None:
                    return self._reexported(source, name, depth + 1) or source
        return None

    def imports_of(self, path: str, text: str) -> set[str]:
        """Repository files the module ``path`` with source ``text`` imports directly.

        ``from pkg import name`` counts the submodule ``pkg.name`` when it is one, else the module
        the package re-exports ``name`` from, else the package itself.
        """
        out: set[str] = set()
        for node in ast.walk(pyparse.parse(text)):
            if isinstance(node, ast.Import):
                out.update(t for t in (self.resolve_module(a.name, path) for a in node.names) if t)
            elif isinstance(node, ast.ImportFrom):
                source = self.resolve_module(node.module or "", path, node.level)
                for alias in node.names:
                    sub = self.resolve_module(f"{node.module}.{alias.name}" if node.module else alias.name,
                                              path, node.level)
                    if sub is not None:
                        out.add(sub)
                    elif source is not None:
                        out.add(self._reexported(source, alias.name) or source)
        return out


#: Method names of builtin types, plus a few generic verbs: a call ``x.name()`` with one of these
#: names says nothing about which class ``x`` is.
_COMMON_METHODS = {n for t in (dict, list, str, set, bytes, int, float, tuple, frozenset, object) for n in dir(t)} | {
    "read", "write", "close", "open", "send", "run", "start", "stop", "load", "dump", "dumps", "loads", "parse",
    "render", "reset", "flush", "seek", "next", "call", "apply", "match", "search", "sub", "group",
}

_SKIP_DIRS = {"venv", "site-packages", "__pycache__", "node_modules", "build", "dist"}


class RepoIndex(ModuleMap):
    """Every parsable module of a repository plus the calls between the functions it defines.

    ``files`` maps repository-relative paths to their text (the source files bugs may go into).
    Files that do not parse are left out and listed in :attr:`unparsable`. ``test_texts`` (test
    file -> text, optional) lets operators see which functions the tests call by name.
    """

    def __init__(self, files: Mapping[str, str], test_texts: Mapping[str, str] | None = None) -> None:
        self.test_texts = dict(test_texts or {})
        self._test_words: set[str] | None = None
        self._methods: dict[str, list[Definition]] | None = None
        self.modules: dict[str, ModuleIndex] = {}
        self.unparsable: list[str] = []
        for path in sorted(files):
            try:
                self.modules[path] = ModuleIndex(path, files[path])
            except SyntaxError:
                self.unparsable.append(path)
        super().__init__(self.modules, lambda p: files[p])
        self.definitions: dict[tuple[str, str], Definition] = {}
        for path, index in self.modules.items():
            for stmt in index.tree.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._define(path, stmt.name, stmt, None)
                elif isinstance(stmt, ast.ClassDef):
                    for inner in stmt.body:
                        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self._define(path, f"{stmt.name}.{inner.name}", inner, stmt.name)
        self.calls: dict[Definition, list[CallSite]] = {d: [] for d in self.definitions.values()}
        for path in self.modules:
            self._collect_calls(path)

    def _define(self, path: str, qualname: str, node: FunctionNode, class_name: str | None) -> None:
        self.definitions[(path, qualname)] = Definition(path, qualname, node, class_name)

    def imported_names(self, path: str) -> tuple[dict[str, Definition], dict[str, str]]:
        """What module ``path`` binds at import: ``(functions by local name, modules by local name)``."""
        functions: dict[str, Definition] = {}
        modules: dict[str, str] = {}
        index = self.modules[path]
        for stmt in index.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[stmt.name] = self.definitions[(path, stmt.name)]
        for node in ast.walk(index.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = self.resolve_module(alias.name, path)
                    if target and alias.asname:
                        modules[alias.asname] = target
                    elif target:
                        modules[alias.name] = target
            elif isinstance(node, ast.ImportFrom):
                source = self.resolve_module(node.module or "", path, node.level)
                for alias in node.names:
                    local = alias.asname or alias.name
                    sub = self.resolve_module(f"{node.module}.{alias.name}" if node.module else alias.name,
                                              path, node.level)
                    if sub is not None:
                        modules[local] = sub
                    elif source is not None and (source, alias.name) in self.definitions:
                        functions[local] = self.definitions[(source, alias.name)]
        return functions, modules

    # -- calls ---------------------------------------------------------------------------------

    def _collect_calls(self, path: str) -> None:
        functions, modules = self.imported_names(path)
        index = self.modules[path]
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(index.tree):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        for site in index.nodes(ast.Call):
            call = site.node
            target: Definition | None = None
            if isinstance(call.func, ast.Name):
                target = functions.get(call.func.id)
            elif isinstance(call.func, ast.Attribute):
                owner = call.func.value.id if isinstance(call.func.value, ast.Name) else None
                if owner in modules:
                    target = self.definitions.get((modules[owner], call.func.attr))
                elif owner == "self" and "." in site.qualname:
                    cls = site.qualname.split(".")[-2]
                    target = self.definitions.get((path, f"{cls}.{call.func.attr}"))
                if target is None and owner not in modules:
                    target = self._unique_method(call.func.attr)
            if target is not None:
                self.calls[target].append(CallSite(path, site.qualname, call, parents.get(id(call))))

    def _unique_method(self, name: str) -> Definition | None:
        """``obj.name(...)``: the method when exactly one class of the repository defines ``name``.

        Names builtin types also carry (``get``, ``append``, ``format``...) and dunders are never
        resolved this way: the receiver could be anything.
        """
        if self._methods is None:
            self._methods = {}
            for d in self.definitions.values():
                if d.class_name:
                    self._methods.setdefault(d.name, []).append(d)
        found = self._methods.get(name, [])
        if len(found) != 1 or name in _COMMON_METHODS or name.startswith("__"):
            return None
        return found[0]

    def named_in_tests(self, name: str) -> bool | None:
        """Whether any test file mentions ``name`` as a word (``None`` without test texts)."""
        if not self.test_texts:
            return None
        if self._test_words is None:
            self._test_words = set(re.findall(r"[A-Za-z_]\w*", "\n".join(self.test_texts.values())))
        return name in self._test_words

    def callers(self, definition: Definition) -> list[CallSite]:
        return self.calls.get(definition, [])

    def cross_module_helpers(self) -> Iterator[tuple[Definition, list[str]]]:
        """Functions called from at least one other module, with those modules' files (sorted)."""
        for definition in sorted(self.calls, key=lambda d: (d.path, d.qualname)):
            others = sorted({c.path for c in self.calls[definition] if c.path != definition.path})
            if others:
                yield definition, others
