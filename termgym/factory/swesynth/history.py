"""Bugs from a project's release history: ``termgym swesynth history NAME``.

The package index keeps every release of a project, with its tests, so the difference between two
releases is what the maintainers really changed. For a project of the set (bundled, or added with
``termgym swesynth add-project``) whose tree is the *newer* release:

1. **earlier releases** are fetched from the package index (``pip download --no-deps --no-binary
   :all: NAME==OLD``) into the cache (:func:`history_cache`), with the index's version list; once
   fetched, mining runs offline;
2. **function-level reverts** (:func:`function_reverts`): every function or method (module level or
   in a class, not nested in a function) that both releases define, under the same qualified name
   and only once, whose code differs (the AST, docstring left out) becomes a candidate: the newer
   tree with that function's older text put back, keeping the newer docstring (the documentation
   of the newer release stays; so does the diff's size). A function whose older body reads a name
   the newer module no longer binds, or an attribute of ``self`` its class no longer has, is
   skipped (counted by reason), unless the name is a top-level constant, import or helper function
   the newer release dropped with the change (:func:`removed_definitions`: up to
   :data:`MAX_PUT_BACK` of them are put back: an import where the module's imports end, a constant
   or helper before the function, or for a method before the top-level statement that holds its
   class, each another edit of the same revert: module level is where its body looks them up).
   A method whose older body calls methods its newer class dropped gets them back beside it
   (:func:`removed_methods`, with what they call on ``self`` in turn, up to :data:`MAX_PUT_BACK`).
   An import put back that names something the project's newer tree no longer has (a name its
   module dropped, a module it removed) is skipped and counted: it would only fail at collection.
   Where the older text cannot go back whole for one of these reasons, each hunk of the release's
   change to the function is offered alone (:func:`partial_reverts`: a fix made beside a rename
   goes back without the rename), marked ``part`` in the task's ``origin``.
   A function whose signature changed in a release is also offered together with the changed
   functions that call it, in any file (:func:`call_groups`): a fix that really spanned them (a
   helper's parameters and its callers) only applies whole;
3. **the same pipeline as every task** (:func:`~termgym.factory.swesynth.generate.generate`, with
   :class:`ReleaseHistory` as its candidate source): the candidate runs the newer release's
   required tests that execute the changed lines in the sandbox; it is kept when one or more fail
   while the rest pass (within the failure limit), then gets a report written from the failing
   behaviour, the report checks, the repro check, validation in the sandbox (the oracle, which is
   the newer release's code, restores the clean tree; do-nothing fails the failing tests again) and
   its behaviour check. The task: the newer tree with the change reverted; the oracle: the newer
   code; the tests: the newer release's;
4. **the kind** of each task (:func:`classify_kind`), kept in the record's ``origin`` with the two
   versions: no changelog is read (offline it is not always there, and never in a form a program
   can trust), the failing tests decide:

   * ``feature`` -- every failing test uses a name (a function, class, method, parameter or
     attribute the project defines) that the newer release defines and the older one did not: the
     test exercises something new. The report *asks for* the feature (``write_report(...,
     request=True)``) instead of calling it a bug;
   * ``behaviour-change`` -- otherwise, when a failing test existed in the older release (same
     class and name, in any test file: files get renamed) and its text there is not contained in
     its newer text: the maintainers changed what an existing test expects;
   * ``fix`` -- otherwise: the failing tests are new in the newer release, or extended there (lines
     and cases only added: the usual way a fix is pinned), or unchanged (the older body no longer
     fits the newer code around it), and they use only names the older release had.

The mined suite is a compact suite (``records/<project>.jsonl``) whose records carry ``origin``
(``source: "history"``, ``from_version``, ``to_version``, ``kind`` and why), held out by project
as the bundled suite decides (:func:`~termgym.factory.swesynth.bundle.project_held_out`); its
``suite.json`` keeps, per project, what mining found (``history``).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from termgym.factory.swesynth.bugs.source import Mutation
from termgym.factory.swesynth.failures import find_test_function, split_test_id
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.distinct import from_history

#: The bug type of every release-history task (its kind is in the record's ``origin``).
HISTORY_TYPE = "regression"
#: The kinds :func:`classify_kind` decides, in the order it tries them.
KINDS = ("feature", "behaviour-change", "fix")
#: Earlier releases mined when none are named: the ones just before the project's version.
DEFAULT_RELEASES = 3
#: Functions offered together at most (a fix that spanned a few functions, not a rewrite).
MAX_GROUP = 3
#: The most definitions (constants, imports, helpers) the newer module dropped that a revert puts back.
MAX_PUT_BACK = 3
#: The most partial reverts (one hunk of a release's change to a function each) offered per function.
MAX_PARTS = 3

_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__package__",
                                        "__builtins__", "__loader__", "__path__", "__class__", "__debug__"}
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|tests?|conftest)\.py$")
_TEST_DIR_NAMES = frozenset({"tests", "test", "testing"})


class HistoryError(RuntimeError):
    """Release history cannot be mined as asked; the message says what and what to do."""


# -- the package index, cached -------------------------------------------------------------------------


def history_cache(name: str) -> Path:
    """Where a project's earlier releases are kept: ``<cache>/swesynth/history/<name>``."""
    from termgym.tasks.swesynth.projects import cache_root, normalise_name

    return cache_root() / "history" / normalise_name(name)


def _sort_versions(versions: Iterable[str]) -> list[str]:
    """Final releases, oldest first; pre-releases, dev releases and names that are no version
    (``0.9.1.linux-x86_64``: an old built distribution's file name) are left out."""
    parsed = []
    for text in set(versions):
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if not (v.is_prerelease or v.is_devrelease):
            parsed.append((v, text))
    return [text for _, text in sorted(parsed)]


def release_versions(name: str, *, offline: bool = False, must_include: str | None = None) -> list[str]:
    """The project's final releases on the package index, oldest first, cached in
    ``versions.json``. The cache answers when it lists ``must_include`` (the project's own version:
    a list fetched before that release is stale) or when ``offline``; otherwise ``pip index
    versions`` asks the index."""
    path = history_cache(name) / "versions.json"
    cached: list[str] | None = None
    if path.is_file():
        cached = json.loads(path.read_text(encoding="utf-8")).get("versions")
    if cached is not None and (offline or must_include is None or must_include in cached):
        return _sort_versions(cached)
    if offline:
        raise HistoryError(f"no cached release list for {name} ({path}); run once with the package index "
                           "reachable, or name the releases with --versions")
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "index",
                           "versions", name], capture_output=True, text=True, timeout=300)
    match = re.search(r"^Available versions:\s*(.+)$", proc.stdout, re.M)
    if proc.returncode != 0 or not match:
        if cached is not None:
            return _sort_versions(cached)
        raise HistoryError(f"pip index versions {name} failed: {(proc.stdout + proc.stderr).strip()[-400:]}")
    versions = _sort_versions(v.strip() for v in match.group(1).split(","))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": name, "versions": versions, "fetched": time.strftime("%Y-%m-%d")}) + "\n",
                    encoding="utf-8")
    return versions


def earlier_releases(name: str, version: str, count: int | None = DEFAULT_RELEASES, *,
                     offline: bool = False) -> list[str]:
    """The ``count`` final releases just before ``version`` (``None``: every one), newest first."""
    if count is not None and count < 1:
        raise HistoryError(f"--releases must be at least 1, got {count}")
    known = release_versions(name, offline=offline, must_include=version)
    older = [v for v in known if Version(v) < Version(version)]
    if not older:
        raise HistoryError(f"the package index lists no release of {name} before {version} "
                           f"(known: {', '.join(known) or 'none'})")
    return older[::-1][:count]  # a slice to None keeps them all


def fetch_release(name: str, version: str, *, offline: bool = False) -> Path:
    """The unpacked tree of release ``name==version`` (the sdist's top folder), downloaded and
    unpacked into :func:`history_cache` once."""
    from termgym.factory.swesynth.project_add import AddProjectError, fetch_sdist, unpack

    folder = history_cache(name) / version
    done = folder / "tree.json"
    if done.is_file():
        return folder / json.loads(done.read_text(encoding="utf-8"))["tree"]
    if offline:
        raise HistoryError(f"release {name}=={version} is not in the cache ({folder}); run once with the "
                           "package index reachable")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        sdists = sorted(folder.glob("*.tar.gz")) or [fetch_sdist(f"{name}=={version}", folder)]
        shutil.rmtree(folder / "unpacked", ignore_errors=True)  # what an interrupted run left
        top = unpack(sdists[0], folder / "unpacked")
    except (AddProjectError, OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        raise HistoryError(f"cannot fetch and unpack {name}=={version} into {folder}: {exc} (only .tar.gz sdists "
                           "are read; remove the folder to download again)") from None
    done.write_text(json.dumps({"sdist": sdists[0].name, "tree": top.relative_to(folder).as_posix()}) + "\n",
                    encoding="utf-8")
    return top


def fetch_releases(name: str, version: str, count: int = DEFAULT_RELEASES, *, versions: Sequence[str] = (),
                   offline: bool = False,
                   log: Callable[[str], None] | None = None) -> tuple[list[Release], dict[str, str]]:
    """The releases to mine, fetched: exactly ``versions`` when given (any that cannot be fetched
    is an error: the user named it), else the ``count`` newest final releases before ``version``
    that can be fetched. A release whose sdist the package index does not give, or that does not
    unpack (a wheel-only release, a build backend pip cannot run), is skipped and the next older
    one taken instead; the skipped ones come back with their reasons. Raises
    :class:`HistoryError` when no release could be fetched."""
    say = log or (lambda _line: None)
    if versions:
        wanted, explicit = list(versions), True
    else:
        if count < 1:
            raise HistoryError(f"--releases must be at least 1, got {count}")
        wanted, explicit = earlier_releases(name, version, None, offline=offline), False
    fetched: list[Release] = []
    unfetchable: dict[str, str] = {}
    for candidate in wanted:
        if not explicit and len(fetched) >= count:
            break
        t0 = time.monotonic()
        try:
            tree = fetch_release(name, candidate, offline=offline)
        except HistoryError as exc:
            if explicit:
                raise
            unfetchable[candidate] = str(exc)
            say(f"{name} {candidate}: skipped, {exc}")
            continue
        fetched.append(Release(candidate, tree))
        say(f"{name} {candidate}: {tree} ({time.monotonic() - t0:.1f} s)")
    if not fetched:
        raise HistoryError(f"no release of {name} before {version} could be fetched: "
                           + "; ".join(f"{v}: {why}" for v, why in unfetchable.items()))
    return fetched, unfetchable


def counterpart(path: str, old_tree: Path) -> Path | None:
    """The file of ``old_tree`` that ``path`` (of the newer tree) was: the same path, or the same
    with ``src/`` added or taken away (a project that moved to or from the src layout), or the same
    module as a single file and as a package (``name.py`` and ``name/__init__.py``: inflection,
    schema and ordered-set began as one module and became a package), in either direction."""
    module = [path]
    if path.endswith("/__init__.py"):
        module.append(path[:-len("/__init__.py")] + ".py")
    elif path.endswith(".py"):
        module.append(path[:-len(".py")] + "/__init__.py")
    for option in module:
        for candidate in (option, option[len("src/"):] if option.startswith("src/") else f"src/{option}"):
            if (old_tree / candidate).is_file():
                return old_tree / candidate
    return None


# -- functions of a module -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSource:
    """One function or method of a module: its node, qualified name and whole lines (decorators
    included) as character offsets into the module's text."""

    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    start: int
    end: int
    line: int
    text: str
    owner: ast.ClassDef | None = None


def _line_starts(text: str) -> list[int]:
    starts, pos = [], 0
    for line in text.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    return starts


def module_functions(text: str, tree: ast.Module | None = None) -> dict[str, FunctionSource]:
    """Functions at module level and methods of classes (at any class depth), by qualified name
    (``Class.method``). A name defined twice (a property's getter and setter, overloads, a function
    defined in both branches of an ``if``) is left out: which one changed cannot be told."""
    tree = tree if tree is not None else pyparse.parse(text)
    starts = _line_starts(text)
    found: dict[str, list[FunctionSource]] = {}

    def visit(body: list[ast.stmt], prefix: str, owner: ast.ClassDef | None) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                last = node.end_lineno or node.lineno
                start, end = starts[first - 1], starts[min(last, len(starts) - 1)]
                found.setdefault(prefix + node.name, []).append(
                    FunctionSource(prefix + node.name, node, start, end, first, text[start:end], owner))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", node)
            elif isinstance(node, (ast.If, ast.Try)):  # conditional definitions at the same level
                for block in (node.body, node.orelse, getattr(node, "finalbody", []),
                              *(h.body for h in getattr(node, "handlers", []))):
                    visit(block, prefix, owner)

    visit(tree.body, "", None)
    return {name: sources[0] for name, sources in found.items() if len(sources) == 1}


def _docstring(node: ast.AST) -> ast.Expr | None:
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0]
    return None


def code_dump(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The function's AST without its docstring and positions: equal dumps, same code."""
    doc = _docstring(node)
    body = node.body[1:] if doc is not None and len(node.body) > 1 else node.body
    return ast.dump(ast.Module(body=[*node.decorator_list, node.args, *body, *([node.returns] if node.returns else [])],
                               type_ignores=[])) + f"|{type(node).__name__}|{node.name}"


def _with_docstring_of(old: FunctionSource, new: FunctionSource) -> str:
    """The older function's text with the newer docstring in place of its own (both must have one
    on lines of their own); otherwise the older text as it is."""
    old_doc, new_doc = _docstring(old.node), _docstring(new.node)
    if old_doc is None or new_doc is None or old_doc.lineno == old.node.lineno or new_doc.lineno == new.node.lineno:
        return old.text
    old_lines = old.text.splitlines(keepends=True)
    new_lines = new.text.splitlines(keepends=True)
    a0, a1 = old_doc.lineno - old.line, (old_doc.end_lineno or old_doc.lineno) - old.line + 1
    b0, b1 = new_doc.lineno - new.line, (new_doc.end_lineno or new_doc.lineno) - new.line + 1
    return "".join(old_lines[:a0] + new_lines[b0:b1] + old_lines[a1:])


def _indent(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first[: len(first) - len(first.lstrip())]


def _reindent(text: str, old_indent: str, new_indent: str) -> str | None:
    """``text`` moved from ``old_indent`` to ``new_indent``; ``None`` when a line does not start with
    the old indentation (mixed tabs and spaces)."""
    if old_indent == new_indent:
        return text
    out = []
    for line in text.splitlines(keepends=True):
        if not line.strip():
            out.append(line)
        elif line.startswith(old_indent):
            out.append(new_indent + line[len(old_indent):])
        else:
            return None
    return "".join(out)


# -- names a body needs ----------------------------------------------------------------------------------


def module_names(tree: ast.Module) -> set[str]:
    """Names the module binds at its top level (definitions, imports, assignments, loop and
    ``with`` targets, also inside top-level ``if``/``try`` blocks); ``{"*"}`` marks a star import."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add("*" if alias.name == "*" else (alias.asname or alias.name.split(".")[0]))
            else:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        names.add(sub.id)
                for block in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(node, block, None), list):
                        visit(getattr(node, block))
                for handler in getattr(node, "handlers", []):
                    if handler.name:
                        names.add(handler.name)
                    visit(handler.body)
    visit(tree.body)
    return names


def _local_names(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            names.add(sub.id)
        elif isinstance(sub, ast.arg):
            names.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            names.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in sub.names)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            names.add(sub.name)
        elif isinstance(sub, (ast.Global, ast.Nonlocal)):
            names.update(sub.names)
        elif isinstance(sub, ast.MatchAs) and sub.name:
            names.add(sub.name)
    return names


def free_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the function reads that it does not bind itself (globals and builtins)."""
    loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loads - _local_names(node)


def class_attributes(cls: ast.ClassDef) -> set[str]:
    """What instances of ``cls`` have by its own code: methods, class-level names and every
    ``self.X = ...`` in its methods."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    for sub in ast.walk(cls):
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and \
                isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
            names.add(sub.attr)
    return names


def _self_reads(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")}


def gone_names(old: FunctionSource, new: FunctionSource, new_module: set[str]) -> list[str]:
    """What the older function reads that the newer code no longer has: a global the newer module
    does not bind (a builtin is fine; a star import makes every global fine), or an attribute of
    ``self`` that the older class defined and the newer class does not (a renamed method)."""
    missing = set()
    if "*" not in new_module:
        missing = free_names(old.node) - new_module - _BUILTINS
    if old.owner is not None and new.owner is not None:
        removed = class_attributes(old.owner) - class_attributes(new.owner)
        missing |= {f"self.{a}" for a in _self_reads(old.node) & removed}
    return sorted(missing)


# -- reverts ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Revert:
    """One function of the newer tree put back as an older release had it."""

    path: str
    qualname: str
    line: int
    start: int
    end: int
    replacement: str
    old_version: str
    #: the older signature differs (parameters, defaults, annotations): callers may need it too
    signature_changed: bool = False
    #: what else goes back with it, each an insertion ``(offset, line, text)`` elsewhere in its file: the
    #: imports it needs, at the end of the module's import block, and a method's module-level
    #: definitions, before the top-level statement that holds its class
    inserts: tuple[tuple[int, int, str], ...] = ()
    #: one hunk of the release's change to the function put back, not its whole older text
    #: (:func:`partial_reverts`)
    part: bool = False

    @property
    def own_group(self) -> str:
        """The group id that binds a revert's edits when it is proposed alone."""
        return f"history:{self.old_version}:{self.path}:{self.qualname}"

    def mutations(self, group: str = "") -> list[Mutation]:
        """The revert's edits: its insertions and the function's older text, in one ``group`` (its
        own when none is given) where there is more than one."""
        described = f"{self.qualname} {'in part ' if self.part else ''}as released in {self.old_version}"
        group = group or (self.own_group if self.inserts else "")
        return [*(Mutation(bug_type=HISTORY_TYPE, path=self.path, start=offset, end=offset, replacement=text,
                           line=line, function=self.qualname, group=group,
                           description=f"{described}: the module-level names it reads")
                  for offset, line, text in self.inserts),
                Mutation(bug_type=HISTORY_TYPE, path=self.path, start=self.start, end=self.end,
                         replacement=self.replacement, line=self.line, function=self.qualname,
                         description=described, group=group)]


def _parse_function(text: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        body = pyparse.parse(textwrap.dedent(text)).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return body[0]


def partial_reverts(old: FunctionSource, new: FunctionSource, new_module: set[str]) -> list[str]:
    """The newer text of a function with one hunk of its release's change put back, for a function
    whose older text cannot go back whole (it reads a name the newer code no longer has: a helper
    renamed in the same release, an import since moved): the change a release made to a function
    is often a fix beside a refactor, and the fix alone goes back. Each hunk of the line diff
    between the newer text and the older one (reindented, with the newer docstring) is put back
    alone; one is offered when the function still parses, its code differs from the newer code and
    it reads nothing the newer code no longer has (:func:`gone_names`). At most
    :data:`MAX_PARTS`, in the order of the function's lines; none when the change is one hunk (the
    part would be the whole)."""
    older = _reindent(_with_docstring_of(old, new), _indent(old.text), _indent(new.text))
    if older is None:
        return []
    a, b = new.text.splitlines(keepends=True), older.splitlines(keepends=True)
    if b and not b[-1].endswith("\n"):
        b[-1] += "\n"
    hunks = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(hunks) < 2:
        return []
    out: list[str] = []
    newer = code_dump(new.node)
    for _, i1, i2, j1, j2 in hunks:
        if len(out) >= MAX_PARTS:
            break
        text = "".join(a[:i1] + b[j1:j2] + a[i2:])
        node = _parse_function(text)
        if node is None or node.name != new.node.name or code_dump(node) == newer:
            continue  # a hunk that only parses with another, or changes only comments and blank lines
        part = FunctionSource(new.qualname, node, new.start, new.end, new.line, text, old.owner)
        if gone_names(part, new, new_module):
            continue
        out.append(text)
    return out


def function_reverts(path: str, new_text: str, old_text: str, old_version: str,
                     skipped: Counter | None = None, *, modules: dict[str, str] | None = None,
                     every_part: bool = False) -> list[Revert]:
    """Every function of ``new_text`` whose code differs in ``old_text``, as a :class:`Revert`
    (see the module docstring for what is skipped; ``skipped`` counts it by reason). ``modules``
    (the newer tree's source files, path -> text) lets an import put back be checked against the
    project's own module it names: one the newer release no longer defines is skipped here, not
    left to fail the test run at collection. With ``every_part``, a function that goes back whole
    is also offered in part (its hunks, :func:`partial_reverts`), not only one that cannot."""
    skipped = skipped if skipped is not None else Counter()
    try:
        new_tree, old_tree = pyparse.parse(new_text), pyparse.parse(old_text)
    except SyntaxError:
        skipped["module does not parse"] += 1
        return []
    new_funcs, old_funcs = module_functions(new_text, new_tree), module_functions(old_text, old_tree)
    bound = module_names(new_tree)
    out = []

    def add_parts() -> int:
        """The hunks of the function's change that go back alone, each a :class:`Revert` (how many)."""
        texts = partial_reverts(old, new, bound)
        for text in texts:
            node = _parse_function(text)
            out.append(Revert(path, qualname, new.line, new.start, new.end, text, old_version,
                              node is not None and ast.dump(node.args) != ast.dump(new.node.args), part=True))
        return len(texts)

    def in_part(reason: str) -> None:
        """The whole older text cannot go back (``reason``): its hunks that can, each alone."""
        skipped[reason] += 1
        offered = add_parts()
        if offered:
            skipped["offered in part instead (one hunk each)"] += offered

    for qualname, new in new_funcs.items():
        old = old_funcs.get(qualname)
        if old is None:
            continue
        if code_dump(old.node) == code_dump(new.node):
            continue
        if (old.owner is None) != (new.owner is None):
            skipped["moved in or out of a class"] += 1
            continue
        gone = gone_names(old, new, bound)
        # a constant, import or helper the newer release dropped with the change comes back with it:
        # an import at the end of the module's import block, the others before a function or before
        # the top-level statement holding a method's class
        constants = None
        inserts: list[tuple[int, int, str]] = []
        methods = ""  # methods the newer class dropped that the older body calls, put back beside it
        attributes = [g[len("self."):] for g in gone if g.startswith("self.")]
        if attributes:
            found = removed_methods(attributes, old.owner, old_text, class_attributes(new.owner))
            methods = _reindent(found[0], _indent(old.text), _indent(new.text)) if found else None
            if found is None or methods is None:
                in_part("reads attributes its newer class no longer has")
                continue
            gone = [g for g in gone if not g.startswith("self.")]
            gone += [n for n in found[1] if n not in bound and n not in _BUILTINS and n not in gone]
        if gone:
            constants = removed_definitions(gone, old_tree, old_text, bound)
            if constants is None:
                in_part("reads names the newer code no longer has")
                continue
            put_back = pyparse.parse(constants)  # parsed once for the import check and the split
            if modules and _imports_gone(put_back, path, modules):
                in_part("puts back an import of a name the newer project no longer has")
                continue
            imports, constants = _split_imports(constants, put_back)
            if old.owner is not None:  # a method's definitions go before its class, at module level
                if constants:
                    inserts.append((*_before_top_level(new_text, new_tree, new.line), constants))
                constants = None
            if imports:
                offset, line = _import_block_end(new_text, new_tree)
                if offset == new.start:  # the function follows the imports: one edit
                    constants = imports + "\n\n" + (constants or "")
                elif inserts and inserts[0][0] == offset:  # the class follows the imports: one insertion
                    inserts[0] = (offset, inserts[0][1], imports + inserts[0][2])
                else:
                    inserts.insert(0, (offset, line, imports))
        text = _reindent(_with_docstring_of(old, new), _indent(old.text), _indent(new.text))
        if text is None:
            skipped["indentation cannot be matched"] += 1
            continue
        if not text.endswith("\n"):
            text += "\n"
        out.append(Revert(path, qualname, new.line, new.start, new.end, (constants or "") + methods + text,
                          old_version, ast.dump(old.node.args) != ast.dump(new.node.args),
                          tuple(inserts)))
        if every_part:
            add_parts()
    return out


def _split_imports(definitions: str, tree: ast.Module) -> tuple[str, str]:
    """``definitions`` (:func:`removed_definitions`' text, parsed as ``tree``) as ``(its imports, a
    line each; the others, as they were)``."""
    lines = definitions.splitlines(keepends=True)
    imports, others = [], []
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        block = "".join(lines[first - 1:node.end_lineno or node.lineno])
        (imports if isinstance(node, (ast.Import, ast.ImportFrom)) else others).append(block)
    return "".join(imports), ("\n\n".join(others) + "\n\n" if others else "")


def _import_block_end(text: str, tree: ast.Module) -> tuple[int, int]:
    """``(offset, line)`` where an import goes: after the last top-level import that comes before the
    module's first function or class (else after its docstring and ``__future__`` imports)."""
    starts = _line_starts(text)
    after = 0
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (i == 0 and _docstring(tree) is node):
            after = node.end_lineno or node.lineno
    return starts[min(after, len(starts) - 1)], after + 1


def _project_module(path: str, node: ast.ImportFrom, modules: dict[str, str]) -> tuple[str | None, str] | None:
    """``(the project's file, its path stem)`` that ``from ... import`` in file ``path`` names
    (``None`` as the file: a module of the project that the newer tree does not have), or ``None``
    when it names no module of the project (the standard library, a dependency). A relative import
    is always the project's; an absolute one is when its top-level package is one of the tree's."""
    if node.level:
        base = Path(path).parent
        for _ in range(node.level - 1):
            base = base.parent
        stem = (base / Path(*node.module.split("."))).as_posix() if node.module else base.as_posix()
        return next((c for c in (f"{stem}.py", f"{stem}/__init__.py") if c in modules), None), stem
    if not node.module:
        return None
    top, tail = node.module.split(".")[0], node.module.replace(".", "/")
    roots = {m[: m.index(top)] for m in modules
             if m.startswith((f"{top}/", f"{top}.py")) or f"/{top}/" in m or m.endswith(f"/{top}.py")}
    roots = {r for r in roots if not r or r.endswith("/")}
    if not roots:
        return None  # not the project's
    for root in sorted(roots):
        for candidate in (f"{root}{tail}.py", f"{root}{tail}/__init__.py"):
            if candidate in modules:
                return candidate, f"{root}{tail}"
    return None, f"{sorted(roots)[0]}{tail}"


def _imports_gone(definitions: ast.Module, path: str, modules: dict[str, str]) -> list[str]:
    """The names ``definitions`` (what is put back into ``path``, parsed) import from the project's
    own modules that the newer tree no longer has: a module it no longer binds them in (and no
    submodule of that name), or a module that is gone (``jinja2._compat``)."""
    gone = []
    for node in definitions.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        found = _project_module(path, node, modules)
        if found is None:
            continue
        module, stem = found
        submodules = {alias.name: any(m in modules for m in (f"{stem}/{alias.name}.py", f"{stem}/{alias.name}/__init__.py"))
                      for alias in node.names}
        if module is None:
            gone += [a.name for a in node.names if not submodules[a.name]]
            continue
        try:
            bound = module_names(pyparse.parse(modules[module]))
        except SyntaxError:
            continue
        if "*" not in bound:
            gone += [a.name for a in node.names if a.name not in bound and not submodules[a.name]]
    return gone


def removed_methods(attributes: Sequence[str], old_class: ast.ClassDef, old_text: str, new_attributes: set[str],
                    limit: int = MAX_PUT_BACK) -> tuple[str, list[str]] | None:
    """The older class's methods named ``attributes`` (what the newer class no longer has), with
    the methods they read on ``self`` that the newer class lost too, as text at the older class's
    indentation in the older order, each followed by a blank line, and the globals they read;
    ``None`` when one is not a method defined once (an attribute set in ``__init__``, a property
    with a setter) or more than ``limit`` would come back: a method the fix folded into its caller
    goes back with it."""
    lines = old_text.splitlines(keepends=True)
    defined: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for node in old_class.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.setdefault(node.name, []).append(node)
    chosen: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    wanted = list(attributes)
    while wanted:
        name = wanted.pop(0)
        if name in chosen:
            continue
        if len(defined.get(name, ())) != 1 or len(chosen) == limit:
            return None
        node = chosen[name] = defined[name][0]
        wanted += sorted(_self_reads(node) - new_attributes - set(chosen))
    texts: list[str] = []
    needs: list[str] = []
    for node in sorted(chosen.values(), key=lambda n: n.lineno):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        text = "".join(lines[first - 1:node.end_lineno or node.lineno])
        texts.append(text if text.endswith("\n") else text + "\n")
        needs += [n for n in sorted(free_names(node)) if n not in needs]
    return "\n".join(texts) + "\n", needs


def _before_top_level(text: str, tree: ast.Module, line: int) -> tuple[int, int]:
    """Where module-level definitions go for a method at ``line``: ``(offset, line)`` before the
    top-level statement that holds it (its first decorator's line)."""
    starts = _line_starts(text)
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if first <= line <= (node.end_lineno or node.lineno):
            return starts[first - 1], first
    raise ValueError(f"no top-level statement holds line {line}")  # a method is always inside one


def removed_definitions(names: Sequence[str], old_tree: ast.Module, old_text: str, new_bound: set[str],
                        limit: int = MAX_PUT_BACK) -> str | None:
    """The older module's top-level definitions of ``names`` (what the newer module no longer
    binds), as text to put back before the function, in the older module's order, or ``None`` when
    one is anything else or more than ``limit`` would come back. A definition is a constant assigned
    a literal (``DEFAULT_CHARSET = "utf-8"``), an import of the name (that name alone), or a
    function (with its decorators) whose own globals the newer module binds or come back with it (a
    helper the fix folded into its caller). A class, a computed value or a name bound in a block
    would be more than a revert."""
    lines = old_text.splitlines(keepends=True)
    top: dict[str, tuple[int, str, ast.stmt]] = {}
    for node in old_tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            top[node.name] = (first, "".join(lines[first - 1:node.end_lineno or node.lineno]), node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    continue
                one = (ast.Import(names=[alias]) if isinstance(node, ast.Import)
                       else ast.ImportFrom(module=node.module, names=[alias], level=node.level))
                top[alias.asname or alias.name.split(".")[0]] = (node.lineno, ast.unparse(one) + "\n", node)
        else:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            value = getattr(node, "value", None)
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    try:
                        ast.literal_eval(value)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        top.pop(target.id, None)  # the last binding counts: a computed one is not put back
                        continue
                    top[target.id] = (node.lineno, "".join(lines[node.lineno - 1:node.end_lineno or node.lineno]), node)
    chosen: dict[str, tuple[int, str, ast.stmt]] = {}
    wanted = list(names)
    while wanted:
        name = wanted.pop(0)
        if name in chosen:
            continue
        if name not in top or len(chosen) == limit:
            return None
        chosen[name] = top[name]
        node = top[name][2]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            wanted += sorted(free_names(node) - new_bound - _BUILTINS - {node.name})
    texts = dict.fromkeys(text if text.endswith("\n") else text + "\n" for _, text, _ in sorted(chosen.values(),
                                                                                            key=lambda x: x[0]))
    return "\n\n".join(texts) + "\n\n"


def call_groups(reverts: Sequence[Revert], limit: int = MAX_GROUP) -> list[tuple[Revert, ...]]:
    """Reverts of one release offered together: a function with the changed functions its older
    body calls and those whose older body calls it (by name, or as a method: the call's last name;
    dunder names link nothing), in any file, at most ``limit`` in all, where the function called
    changed its signature: a helper whose parameters changed in a release goes back with its
    callers, as the maintainers changed them together (one alone would not apply cleanly). Where no
    signature changed, each function alone is the candidate (a group would only be a near-duplicate)."""
    by_version: dict[str, list[Revert]] = {}
    for r in reverts:
        by_version.setdefault(r.old_version, []).append(r)
    groups: dict[frozenset, tuple[Revert, ...]] = {}
    for members in by_version.values():
        calls: dict[int, set[str]] = {}
        for i, r in enumerate(members):
            try:
                tree = pyparse.parse(_dedent_block(r.replacement))
            except SyntaxError:
                tree = ast.Module(body=[], type_ignores=[])
            calls[i] = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
                        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}
        short = [r.qualname.rsplit(".", 1)[-1] for r in members]
        for i, r in enumerate(members):
            others = [j for j in range(len(members)) if j != i]
            callees = [j for j in others if short[j] in calls[i] and members[j].signature_changed]
            callers = [j for j in others if short[i] in calls[j] and r.signature_changed]
            partners = [j for j in [*callees, *callers] if not short[j].startswith("__") or not short[j].endswith("__")]
            if short[i].startswith("__") and short[i].endswith("__"):
                partners = [j for j in callees if j in partners]  # nothing calls a dunder by name
            chosen = list(dict.fromkeys(partners))[: limit - 1]
            if chosen:
                group = (r, *(members[j] for j in chosen))
                places = [(g.path, offset) for g in group for offset, _, _ in g.inserts]
                if len(set(places)) < len(places):
                    continue  # two functions putting names back at one place: each alone
                groups.setdefault(frozenset((g.path, g.qualname) for g in group), group)
    return list(groups.values())


def _dedent_block(text: str) -> str:
    indent = _indent(text)
    return "".join(line[len(indent):] if line.startswith(indent) else line for line in text.splitlines(keepends=True))


# -- the kind ----------------------------------------------------------------------------------------------


def defined_names(files: dict[str, str]) -> set[str]:
    """Names a project's source defines: functions, classes, methods, parameters, module and class
    level names, instance attributes (``self.x = ...``). A test using one the older release lacks
    exercises something new."""
    names: set[str] = set()
    for text in files.values():
        try:
            tree = pyparse.parse(text)
        except SyntaxError:
            continue
        names |= module_names(tree) - {"*"}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs])
            elif isinstance(node, ast.ClassDef):
                names |= class_attributes(node)
    return {n for n in names if not n.startswith("__")}


class ReleaseTests:
    """The test functions of a tree's test files, found by path, class and name, or (when the path
    is gone: test files get renamed between releases) by class and name anywhere."""

    def __init__(self, files: dict[str, str]) -> None:
        self.trees: dict[str, ast.Module] = {}
        for path, text in files.items():
            try:
                self.trees[path] = pyparse.parse(text)
            except SyntaxError:
                continue

    @classmethod
    def from_tree(cls, root: Path, test_dirs: Sequence[str] = ()) -> ReleaseTests:
        """Every test-looking Python file under ``root`` (``test_*.py``, ``*_test.py``, ``tests.py``,
        files under ``tests/``, ``test/``, ``testing/`` or ``test_dirs``)."""
        files = {}
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            parts = rel.split("/")
            if any(p.startswith(".") or p in ("build", "dist", "site-packages") for p in parts[:-1]):
                continue
            if _TEST_FILE.search(rel) or _TEST_DIR_NAMES & set(parts[:-1]) or \
                    any(rel.startswith(d.strip("/") + "/") for d in test_dirs):
                try:
                    files[rel] = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
        return cls(files)

    def function(self, test: str, anywhere: bool = True) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        path, classes, name, _ = split_test_id(test)
        tree = self.trees.get(path or "")
        if tree is not None:
            found = find_test_function(tree, classes, name)
            if found is not None or not anywhere:
                return found
        if not anywhere:
            return None
        for other in self.trees.values():
            found = find_test_function(other, classes, name)
            if found is not None:
                return found
        return None


def _used_names(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.keyword) and sub.arg:
            names.add(sub.arg)
    return names


def _lines_of(node: ast.AST) -> list[str]:
    return [line.strip() for line in ast.unparse(node).splitlines() if line.strip()]


def how_test_changed(test: str, new_tests: ReleaseTests, old_tests: ReleaseTests) -> str:
    """How the test ``test`` of the newer release was in the older one: ``"new"`` (absent),
    ``"same"``, ``"extended"`` (every line of the older test is still there: cases or checks were
    only added) or ``"changed"`` (a line of it was changed or removed); ``"unknown"`` when the newer
    test function cannot be read (inherited, generated)."""
    new = new_tests.function(test, anywhere=False)
    if new is None:
        return "unknown"
    old = old_tests.function(test)
    if old is None:
        return "new"
    if ast.dump(old) == ast.dump(new):
        return "same"
    left = Counter(_lines_of(new))
    for line in _lines_of(old):
        if left[line] <= 0:
            return "changed"
        left[line] -= 1
    return "extended"


@dataclass
class Kind:
    """A task's kind (one of :data:`KINDS`) and the sentence that says why."""

    kind: str
    reason: str


def classify_kind(failing: Sequence[str], new_tests: ReleaseTests, old_tests: ReleaseTests, new_names: set[str],
                  old_names: set[str]) -> Kind:
    """The kind of a release-history task from its failing tests (see the module docstring):
    ``feature`` when every failing test uses a name the newer source defines and the older did not;
    else ``behaviour-change`` when one of them existed in the older release and was changed there,
    not only added to; else ``fix``."""
    if not failing:
        raise ValueError("classify_kind needs the failing tests")
    added = {n for n in new_names - old_names if len(n.strip("_")) >= 3} - _BUILTINS
    uses_new: dict[str, list[str]] = {}
    changes: dict[str, str] = {}
    for test in failing:
        node = new_tests.function(test, anywhere=False)
        uses_new[test] = sorted(_used_names(node) & added) if node is not None else []
        changes[test] = how_test_changed(test, new_tests, old_tests)
    if all(uses_new.values()):
        names = sorted({n for ns in uses_new.values() for n in ns})
        return Kind("feature", f"every failing test uses what the older release did not define: "
                               f"{', '.join(names[:5])}")
    changed = [t for t, c in changes.items() if c == "changed"]
    if changed:
        return Kind("behaviour-change", f"{len(changed)} failing test(s) existed in the older release and "
                                        f"expected something else there (e.g. {changed[0]})")
    tally = Counter(changes.values())
    said = ", ".join(f"{n} {c}" for c, n in sorted(tally.items()))
    return Kind("fix", f"the failing tests ({said}) use only names the older release had, and none of them "
                       "changed an expectation the older release's tests had")


# -- the candidate source for generate --------------------------------------------------------------------


@dataclass
class Release:
    """An earlier release: its version and unpacked tree."""

    version: str
    tree: Path


@dataclass
class MiningStats:
    """What the function-level diff found (before any test ran)."""

    releases: list[str] = field(default_factory=list)
    files_compared: int = 0
    files_missing: int = 0
    reverts: int = 0
    duplicates: int = 0
    groups: int = 0
    skipped: Counter = field(default_factory=Counter)
    unfetchable: dict[str, str] = field(default_factory=dict)  # release -> why it was not mined

    def to_dict(self) -> dict[str, Any]:
        return {"releases": self.releases, "files_compared": self.files_compared,
                "files_missing": self.files_missing, "reverts": self.reverts, "duplicates": self.duplicates,
                "groups": self.groups, "skipped": dict(self.skipped.most_common()),
                "unfetchable": dict(self.unfetchable)}


class ReleaseHistory:
    """The candidate source :func:`~termgym.factory.swesynth.generate.generate` takes as its
    ``breaker``: it proposes function-level reverts to earlier releases (:meth:`propose`) and says
    where a kept task came from and what kind it is (:meth:`origin`)."""

    bug_types = (HISTORY_TYPE,)

    def __init__(self, new_tree: Path, version: str, releases: Sequence[Release], *, test_dirs: Sequence[str] = (),
                 groups: bool = True, parts_only: bool = False) -> None:
        self.new_tree = Path(new_tree)
        self.version = version
        self.releases = list(releases)
        self.test_dirs = list(test_dirs)
        self.groups = groups
        # only partial reverts (:func:`partial_reverts`), of every function whose change spans hunks
        self.parts_only = parts_only
        self.stats = MiningStats(releases=[r.version for r in self.releases])
        self._version_of: dict[tuple[str, int, int, str], str] = {}
        self._parts: set[tuple[str, int, int, str]] = set()  # edits that put back one hunk (partial_reverts)
        self._lock = threading.Lock()
        self._indexes: dict[str, tuple[ReleaseTests, set[str]]] = {}
        self._new: tuple[ReleaseTests, set[str]] | None = None
        self._proposed: tuple[dict[str, str], list[Mutation]] | None = None

    def propose(self, files: dict[str, str], bug_types: Sequence[str] = (), *, seed: int = 0) -> list[Mutation]:
        """Reverts of the functions of ``files`` (the newer tree's source files, path -> text) to
        each earlier release, newest release first; a revert that an earlier-listed release already
        proposed (the function was the same in both) is proposed once, with the newer release."""
        if self._proposed is not None and self._proposed[0] == files:
            return list(self._proposed[1])  # asked again for the same tree: the same candidates
        seen: set[tuple[str, str, str]] = set()
        out: list[Mutation] = []
        for release in self.releases:
            found: list[Revert] = []
            for path, text in sorted(files.items()):
                old_path = counterpart(path, release.tree)
                if old_path is None:
                    self.stats.files_missing += 1
                    continue
                try:
                    old_text = old_path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    self.stats.files_missing += 1
                    continue
                self.stats.files_compared += 1
                for r in function_reverts(path, text, old_text, release.version, self.stats.skipped,
                                          modules=files, every_part=self.parts_only):
                    key = (r.path, r.qualname, r.replacement)
                    if key in seen:
                        self.stats.duplicates += 1
                        continue
                    seen.add(key)
                    if r.part or not self.parts_only:
                        found.append(r)
            for r in found:
                out += [self._remember(m, r.old_version, r.part) for m in r.mutations()]
            self.stats.reverts += len(found)
            if self.groups:
                for group in call_groups(found):
                    gid = f"history:{release.version}:" + "+".join(f"{g.path}:{g.qualname}" for g in group)
                    out += [self._remember(m, g.old_version, g.part) for g in group for m in g.mutations(gid)]
                    self.stats.groups += 1
        self._proposed = (files, out)
        return out

    def _remember(self, m: Mutation, version: str, part: bool = False) -> Mutation:
        self._version_of[(m.path, m.start, m.end, m.replacement)] = version
        if part:
            self._parts.add((m.path, m.start, m.end, m.replacement))
        return m

    def _names(self, tree: Path) -> set[str]:
        from termgym.tasks.swesynth.tree import list_source_files

        files = {}
        for rel in list_source_files(tree, (), self.test_dirs):
            try:
                files[rel] = (tree / rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        return defined_names(files)

    def _release_index(self, version: str) -> tuple[ReleaseTests, set[str]]:
        with self._lock:
            if version not in self._indexes:
                tree = next(r.tree for r in self.releases if r.version == version)
                self._indexes[version] = (ReleaseTests.from_tree(tree, self.test_dirs), self._names(tree))
            if self._new is None:
                self._new = (ReleaseTests.from_tree(self.new_tree, self.test_dirs), self._names(self.new_tree))
            return self._indexes[version]

    def origin(self, mutations: Sequence[Mutation], target_tests: Sequence[str]) -> dict[str, Any]:
        """The record's ``origin`` for a kept candidate: ``source``, the two versions, the reverted
        functions, the ``kind`` and why (:func:`classify_kind`)."""
        versions = sorted({self._version_of.get((m.path, m.start, m.end, m.replacement), "?") for m in mutations})
        old_version = versions[0]
        old_index, old_names = self._release_index(old_version)
        new_index, new_names = self._new  # type: ignore[misc]
        kind = classify_kind(target_tests, new_index, old_index, new_names, old_names)
        origin = {"source": "history", "from_version": old_version, "to_version": self.version,
                  "functions": list(dict.fromkeys(f"{m.path}:{m.function}" for m in mutations)), "kind": kind.kind,
                  "kind_reason": kind.reason}
        if any((m.path, m.start, m.end, m.replacement) in self._parts for m in mutations):
            origin["part"] = True  # one hunk of the release's change, not the functions' whole older text
        return origin


def is_history(line: dict[str, Any]) -> bool:
    """Whether a task (a record line) came from release history (its ``origin.source``)."""
    return from_history(line.get("origin"))


# -- the command -------------------------------------------------------------------------------------------


@dataclass
class HistoryResult:
    """What :func:`mine_history` made: the generation result and what mining found before it."""

    generation: Any
    mining: MiningStats
    candidates: int  # reverts and groups proposed (each judged as one candidate)
    kinds: dict[str, int]
    out: Path


def mine_history(name: str, out: str | Path, *, releases: int = DEFAULT_RELEASES, versions: Sequence[str] = (),
                 n: int | None = None, seed: int = 0, workers: int = 1, backend: str = "local",
                 time_budget: float | None = None, stall_limit: int | None = None, groups: bool = True,
                 parts_only: bool = False,
                 max_per_function: int | None = 1, import_time: str = "run", offline: bool = False, flaky_check: bool = True,
                 resume: bool = False, extends: str | Path | None = None, log: Callable[[str], None] | None = None,
                 progress: Callable[[Any], None] | None = None) -> HistoryResult:
    """Mine release-history tasks of project ``name`` (of the project set) into the compact suite
    ``out``: fetch the ``releases`` releases before the project's version (or exactly
    ``versions``), propose function-level reverts and run them through
    :func:`~termgym.factory.swesynth.generate.generate`, keeping up to ``n`` tasks (default: as many
    as validate). ``max_per_function`` (default 1; ``None``: no cap) keeps at most that many tasks
    reverting any one function, whatever the size of their fixes: the same function put back as
    two releases had it, or alone and with its helper, are near-duplicates (whichever the seed's
    plan judges first is kept).
    ``import_time`` is generate's: ``"run"`` (the default here) judges a revert that changes code
    run at import (a signature, a decorator, a constant put back: common in release history) with a
    full run of the required tests. ``offline`` uses only what the cache holds. ``resume`` continues
    this project's earlier run into ``out`` with the same seed (generate's ``resume``): its tasks
    are kept and the candidates it judged are not judged again, so a mining run cut short by its
    time budget is carried on by running it again. ``extends`` names the compact suite the tasks are
    mined for (``merge OUT --into SUITE``): a revert that suite holds already (same bug patch) is
    skipped before any test runs, and its release-history tasks (not its procedural ones) count
    against ``max_per_function``, so mining older releases of a project mined before spends its runs
    on bugs the merge will take. ``parts_only`` proposes only partial reverts (:func:`partial_reverts`),
    of every function whose release change spans two or more hunks, whether or not it goes back
    whole: mining a project again for them after its whole reverts were judged."""
    from termgym.factory.swesynth.bundle import TEST_ID_FRACTION, project_held_out
    from termgym.factory.swesynth.generate import generate
    from termgym.factory.swesynth.inject import units
    from termgym.factory.swesynth.screen import ProjectEnv
    from termgym.tasks.swesynth.projects import ProjectError, get_project, project_tree
    from termgym.tasks.swesynth.store import locked_index, split_for
    from termgym.tasks.swesynth.tree import list_source_files

    say = log or (lambda _line: None)
    try:
        project = get_project(name)
    except ProjectError as exc:
        raise HistoryError(f"{exc}; add it first with `termgym swesynth add-project {name}==VERSION`") from None
    later = [v for v in versions if Version(v) >= Version(project.version)]
    if later:
        raise HistoryError(f"--versions {', '.join(later)}: not earlier than {project.name} {project.version}, "
                           "the project set's release")
    fetched, unfetchable = fetch_releases(project.name, project.version, releases, versions=versions,
                                          offline=offline, log=say)
    chosen = [r.version for r in fetched]
    tree = project_tree(project)
    source = ReleaseHistory(tree, project.version, fetched, test_dirs=project.test_dirs, groups=groups,
                            parts_only=parts_only)
    source.stats.unfetchable = unfetchable
    # the candidates are counted here, from the files generate reads (it asks again: same list)
    files = {}
    for rel in list_source_files(tree, list(project.source_dirs), list(project.test_dirs)):
        try:
            files[rel] = (tree / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    candidates = len(units(source.propose(files)))
    if not candidates:
        raise HistoryError(f"no function of {project.name} {project.version} differs in code from "
                           f"{', '.join(chosen)} in a way that can be put back: {source.stats.to_dict()}")
    say(f"{project.name}: {candidates} candidates ({source.stats.reverts} functions, {source.stats.groups} "
        f"groups) from {', '.join(chosen)}")
    out = Path(out)
    held_out = project_held_out(out, project.name)
    splitter = (lambda tid: "test") if held_out else (lambda tid: split_for(tid, TEST_ID_FRACTION, "test_id"))
    wanted = n if n is not None else candidates  # as many as validate unless told
    result = generate(tree, project.test_command, n=wanted, seed=seed, out=out, name=project.name,
                      source_dirs=list(project.source_dirs), test_dirs=list(project.test_dirs),
                      project_env=ProjectEnv.for_project(project.name, backend=backend), project=project.name,
                      storage="compact", exclude_tests=[d.test for d in project.deselect], breaker=source,
                      workers=workers, time_budget=time_budget, stall_limit=stall_limit, split=splitter,
                      max_per_function=max_per_function, sizes_apart=False, import_time=import_time,
                      backend=backend, suite_name=f"{project.name}-history", progress=progress,
                      flaky_check=flaky_check, resume=resume, extends=extends, extends_load=is_history)
    kinds = Counter(r.origin.get("kind", "?") for r in result.records)
    with locked_index(out) as index:
        entry = {"to_version": project.version, **source.stats.to_dict(),
                 "candidates": result.stats.candidates, "kept": result.stats.kept, "kinds": dict(kinds),
                 "held_out": held_out}
        index.setdefault("history", {})[project.name] = entry
        if held_out:
            index["held_out_projects"] = sorted({*(index.get("held_out_projects") or []), project.name})
    say(f"{project.name}: {result.stats.kept} tasks kept of {candidates} candidates ({dict(kinds)})")
    return HistoryResult(result, source.stats, candidates, dict(kinds), out)


__all__ = ["DEFAULT_RELEASES", "HISTORY_TYPE", "KINDS", "FunctionSource", "HistoryError", "HistoryResult", "Kind",
           "MiningStats", "Release", "ReleaseHistory", "Revert", "ReleaseTests", "call_groups", "class_attributes",
           "classify_kind", "code_dump", "counterpart", "defined_names", "earlier_releases", "fetch_release",
           "fetch_releases",
           "free_names", "function_reverts", "gone_names", "history_cache", "is_history", "mine_history", "module_functions",
           "module_names", "partial_reverts", "release_versions", "removed_definitions", "removed_methods",
           "how_test_changed"]
