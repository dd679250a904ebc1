"""Is a task solvable from its report? The checks, run at generation and over a whole suite.

A task is solvable from its report when the report describes what the grade asks for and a user
could have written it. Each check has a name (:data:`CHECKS`) used in the generator's rejection
counts (``quality check failed, <name>``) and in the audit (``termgym swesynth audit``):

* ``each bug breaks a test`` -- every bug of a multi-bug task breaks at least one required test on
  its own (run at generation, one bug at a time; the audit runs the same);
* ``report names every symptom`` -- for each bug, the report shows the call of one of the tests
  that bug breaks (a multi-bug report names each symptom);
* ``repro has its imports`` -- every name the repro uses is imported, defined in it or built in;
* ``repro uses no test-only names`` -- nothing the repro needs exists only in the test suite (a
  helper, a fixture, a constant of a test module, an import from the tests);
* ``repro calls the project`` -- the repro calls into the project, not only the standard library;
* ``named API is public`` -- the function the report names as broken is the project's, public;
* ``expected matches the tests`` -- when every broken test expects an exception, the report
  expects one too (never "a normal result");
* ``repro shows the difference`` -- run as written in the task's sandbox (the project's test
  environment), the repro behaves differently on the clean and on the buggy tree, and the buggy
  run shows what the report says (the exception it names, or the value it quotes).

Static checks read the report, the target tests' source and the clean tree; the two run checks need
a sandbox (:func:`run_repro`) and, for the first, the project's tests (:func:`bug_groups`).
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.failures import (
    CHAIN_TAIL,
    Failure,
    find_test_function,
    read_failure,
    split_test_id,
)
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.repro import repro_code
from termgym.tasks.swesynth.tree import list_source_files

#: The checks, in the order the audit prints them.
CHECKS = ("each bug breaks a test", "report names every symptom", "repro has its imports",
          "repro uses no test-only names", "repro calls the project", "named API is public",
          "expected matches the tests", "repro shows the difference")
_BUILTINS = frozenset(dir(builtins))
_STDLIB = frozenset(__import__("sys").stdlib_module_names)
_EXPECTED = re.compile(r"(?:I expected|should give|expected result is|- Expected:) `([^`\n]+)`")
_RAISES = re.compile(r"\b(pytest\.raises|assertRaises|assertRaisesRegex|raises)\s*\(")


# -- reading a report ---------------------------------------------------------------------------------


def named_api(statement: str) -> str | None:
    """The API the report names as broken: in its opening, the first backticked ``name()`` or dotted
    name (an exception's name is the symptom, not the API), without ``()``."""
    first = statement.strip().split("\n\n", 1)[0]
    spans = re.findall(rf"`([A-Za-z_][\w.]*(?:{CHAIN_TAIL})?)(\(\))?`", first)
    for name, call in spans:
        if call or ("." in name and name.split(".")[0] not in _BUILTINS):
            return name
    return next((name for name, _ in spans if name not in _BUILTINS), None)


def free_names(code: str) -> set[str]:
    """Names the code reads that it neither binds nor imports (built-ins left out)."""
    tree = pyparse.parse(code)
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - bound - _BUILTINS


def imports_of(code: str) -> dict[str, str]:
    """``{bound name: module}`` for the imports the code makes (``"=module"`` for a plain ``import``)."""
    out: dict[str, str] = {}
    for node in ast.walk(pyparse.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = "=" + alias.name
    return out


# -- the project and its tests -------------------------------------------------------------------------


def project_packages(repo: Path, source_dirs: Sequence[str] = ()) -> set[str]:
    """Top-level importable names of the project's source (``isodate``, ``voluptuous`` ...)."""
    out = set()
    for path in list_source_files(repo, source_dirs):
        parts = path.split("/")
        for i in range(len(parts)):
            folder = repo.joinpath(*parts[:i])
            if i == len(parts) - 1 or (folder / parts[i] / "__init__.py").is_file():
                out.add(parts[i].removesuffix(".py"))
                break
    return out


@dataclass
class TestModule:
    """What a target test's module binds at its top: imports (name -> module) and its own names."""

    imports: dict[str, str] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)   # defined in the test module or a conftest: test-only
    project_modules: set[str] = field(default_factory=set)  # modules it imports (names used unprefixed)
    repo: Path | None = None                      # the tree (to read what project modules export)
    expects_raise: bool = False                   # the test function expects an exception
    #: ``from pkg import module as alias``: the name each alias stands for (``{"pr": "parseresult"}``)
    aliases: dict[str, str] = field(default_factory=dict)


def read_test_module(test: str, repo: Path) -> TestModule:
    """The imports and test-only names around ``test`` (its module and the conftest files above)."""
    path, classes, name, _ = split_test_id(test)
    out = TestModule(repo=repo)
    if path is None:
        return out
    files = [repo / path]
    folder = (repo / path).parent
    while folder == repo or repo in folder.parents:
        files.append(folder / "conftest.py")
        if folder == repo:
            break
        folder = folder.parent
    for file in files:
        try:
            tree = pyparse.parse(file.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    out.imports.setdefault(alias.asname or alias.name, f"{node.module}")
                    if alias.asname and alias.asname != alias.name:
                        out.aliases.setdefault(alias.asname, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    # "=" marks a plain import (``import datetime as dt``), not ``from ... import``
                    out.imports.setdefault(alias.asname or alias.name.split(".")[0], "=" + alias.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.own.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.own |= {t.id for t in targets if isinstance(t, ast.Name)}
        if file == repo / path:
            func = find_test_function(tree, classes, name)
            # expecting an exception for every parameter: a raising check at the top of the body,
            # not one inside a branch taken for some parameters only, and no value checked beside it
            # (an ``assert`` or a unittest ``self.assertEqual``: simplejson's test_bytes_key checks both)
            out.expects_raise = func is not None and any(_RAISES.search(ast.unparse(s)) for s in func.body
                                                         if isinstance(s, (ast.With, ast.Expr))) \
                and not any(_checks_a_value(s) for s in func.body)
        out.project_modules |= {m.lstrip("=") for m in out.imports.values()}
        # ``from shop import cart``: ``cart`` may be a module whose functions a repro calls unprefixed
        out.project_modules |= {f"{m}.{name}" for name, m in out.imports.items() if not m.startswith((".", "="))}
    return out


def _checks_a_value(statement: ast.stmt) -> bool:
    """An ``assert`` or a unittest assertion of a value (``self.assertEqual(...)``; not
    ``assertRaises``/``assertWarns``), at the top of a test's body."""
    if isinstance(statement, ast.Assert):
        return True
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        name = call.func.attr
        return name.startswith("assert") and not name.startswith(("assertRaises", "assertWarns"))
    return False


_EXPORTS: dict[tuple[Path, str], frozenset[str]] = {}


def exports(repo: Path, module: str) -> frozenset[str]:
    """Names bound at the top of a project module (``pkg`` or ``pkg.mod``), read from its source."""
    key = (repo, module)
    if key not in _EXPORTS:
        _EXPORTS[key] = frozenset()  # a module star-importing itself back ends here
        rel = module.replace(".", "/")
        names: set[str] = set()
        for base in (repo, repo / "src"):
            for file in (base / rel / "__init__.py", base / f"{rel}.py"):
                if file.is_file():
                    try:
                        tree = pyparse.parse(file.read_text(encoding="utf-8", errors="replace"))
                    except (SyntaxError, ValueError):
                        continue
                    for node in tree.body:
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                            names.add(node.name)
                        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                            # ``from .more import *`` (more-itertools): what that module exports publicly
                            package = module.split(".") if file.name == "__init__.py" else module.split(".")[:-1]
                            parent = package[:len(package) - node.level + 1] if node.level else []
                            target = ".".join([*parent, *([node.module] if node.module else [])])
                            if target and target != module:
                                names |= {n for n in exports(repo, target) if not n.startswith("_")}
                        elif isinstance(node, (ast.Import, ast.ImportFrom)):
                            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
                        elif isinstance(node, ast.Assign):
                            names |= {x.id for x in node.targets if isinstance(x, ast.Name)}
        _EXPORTS[key] = frozenset(names)
    return _EXPORTS[key]


def exporter(name: str, module: TestModule, packages: set[str]) -> str | None:
    """The project module the test module imports that binds ``name`` (its package first)."""
    if module.repo is None:
        return None
    found = sorted((m for m in module.project_modules if _top(m) in packages and name in exports(module.repo, m)),
                   key=lambda m: (m.count("."), m))
    return found[0] if found else None


def _top(module: str) -> str:
    return module.lstrip("=.").split(".")[0]


def resolve(name: str, module: TestModule, packages: set[str]) -> str:
    """Where a repro's name comes from: ``"project"``, ``"stdlib"``, ``"test"`` or ``"unknown"``."""
    if name in module.imports:
        top = _top(module.imports[name])
        if module.imports[name].startswith((".", "=.")) or top in {"tests", "test", "conftest"} or top.startswith("test"):
            return "test"
        return "project" if top in packages else "stdlib" if top in _STDLIB else "unknown"
    if name in packages:
        return "project"
    if exporter(name, module, packages):
        return "project"  # ``import parse`` in the test, ``search(...)`` in the report
    if name in module.own:
        return "test"
    return "stdlib" if name in _STDLIB else "unknown"


def import_lines(code: str, module: TestModule, packages: set[str]) -> list[str] | None:
    """The imports a repro needs, as the test module makes them; ``None`` when a name it uses exists
    only in the test suite (or nowhere a user could import it from)."""
    lines = []
    called = {n.func.id for n in ast.walk(pyparse.parse(code)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for name in sorted(free_names(code)):
        if name in packages and name in called and module.repo is not None and name in exports(module.repo, name):
            lines.append(f"from {name} import {name}")  # ``parse.parse(...)`` written ``parse(...)``
            continue
        where = resolve(name, module, packages)
        if where in ("test", "unknown"):
            return None
        source = module.imports.get(name)
        if source is not None and not source.startswith("=") and _top(source) in packages \
                and module.repo is not None and name in exports(module.repo, _top(source)):
            source = _top(source)  # the package's public name (``from pkg import f``), not its module
        if source is None:
            home = exporter(name, module, packages)
            lines.append(f"from {home} import {name}" if home else f"import {name}")
        elif source.startswith("="):
            full = source[1:]
            lines.append(f"import {full}" if full.split(".")[0] == name else f"import {full} as {name}")
        elif name in module.aliases:  # ``from rfc3986 import parseresult as pr``, not ``import pr``
            lines.append(f"from {source} import {module.aliases[name]} as {name}")
        else:
            lines.append(f"from {source} import {name}")
    merged: dict[str, list[str]] = {}
    plain = []
    for line in sorted(set(lines)):
        m = re.fullmatch(r"from (\S+) import (\w+)", line)
        if m:
            merged.setdefault(m.group(1), []).append(m.group(2))
        else:
            plain.append(line)
    return sorted(plain + [f"from {module} import {', '.join(names)}" for module, names in merged.items()])


# -- the static checks ----------------------------------------------------------------------------------


def static_checks(statement: str, target_tests: Sequence[str], repo: Path, source_dirs: Sequence[str] = (),
                  groups: Sequence[Sequence[Failure]] | None = None) -> dict[str, str]:
    """``{check: ""}`` for each static check passed, ``{check: why}`` for each failed.

    ``groups`` (one list of :class:`~termgym.factory.swesynth.failures.Failure` per bug, from
    running each bug alone) adds ``report names every symptom``.
    """
    out: dict[str, str] = {}
    packages = project_packages(repo, source_dirs)
    modules = [read_test_module(t, repo) for t in target_tests[:20]]
    merged = TestModule(repo=repo)
    for m in modules:
        for k, v in m.imports.items():
            merged.imports.setdefault(k, v)
        merged.own |= m.own
        merged.project_modules |= m.project_modules
    code = repro_code(statement)
    imported: dict[str, str] = {}
    tree = None
    if code is not None:
        try:
            tree = pyparse.parse(code)
        except SyntaxError as exc:
            code_problem = f"the repro does not parse: {exc.msg}"
        else:
            imported = imports_of(code)
    else:
        code_problem = "the report shows no code to run"
    if tree is None:
        for check in ("repro has its imports", "repro uses no test-only names", "repro calls the project"):
            out[check] = code_problem
    else:
        free = free_names(code)
        out["repro has its imports"] = "" if not free else f"not imported: {', '.join(sorted(free))}"
        seen = TestModule(imports={**merged.imports, **imported}, own=merged.own,
                          project_modules=merged.project_modules, repo=repo)
        test_only = sorted(n for n in free | set(imported) if resolve(n, seen, packages) == "test")
        out["repro uses no test-only names"] = "" if not test_only else f"test-only: {', '.join(test_only)}"
        calls = {_root(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        if not any(resolve(c, seen, packages) == "project" for c in calls if c):
            out["repro calls the project"] = "the repro calls only the standard library or built-ins"
        else:
            out["repro calls the project"] = ""
    api = named_api(statement)
    if api is None:
        out["named API is public"] = "the report names no function"
    else:
        parts = re.sub(r"\((?:\.\.\.)?\)", "", api).split(".")  # ``parse(...).find``: parse, find
        head = parts[0]
        private = [p for p in parts if p.startswith("_") and not (p.startswith("__") and p.endswith("__"))]
        seen = TestModule(imports={**merged.imports, **imported}, own=merged.own,
                          project_modules=merged.project_modules, repo=repo)
        where = resolve(_made_from(head, tree), seen, packages)
        if private:
            out["named API is public"] = f"`{api}` is private"
        elif where != "project":
            out["named API is public"] = f"`{api}` is not the project's ({where})"
        else:
            out["named API is public"] = ""
    leftover = [v for v in _EXPECTED.findall(statement) if re.fullmatch(r"[A-Za-z_]\w*", v)
                and v not in ("True", "False", "None", "inf", "nan") and not v[0].isupper()]
    if leftover:  # "It should give `expected`": a variable of the test, not a value
        out["expected matches the tests"] = f"the expected value `{leftover[0]}` is a name from the test, not a value"
    elif modules and all(m.expects_raise for m in modules) and not re.search(
            r"(should|to) (raise|refuse|reject)|expected (an? )?`\w*(Error|Exception|Invalid)\w*`"
            r"|- Expected: an? `", statement):
        out["expected matches the tests"] = "every broken test expects an exception; the report does not"
    else:
        out["expected matches the tests"] = ""
    if groups is not None:
        missing = [i for i, group in enumerate(groups)
                   if not any(f.call and f.call in statement for f in group)]
        out["report names every symptom"] = "" if not missing else \
            f"bug {', '.join(str(i + 1) for i in missing)} of {len(groups)} has no symptom in the report"
    return out


def _made_from(name: str, tree: ast.Module | None) -> str:
    """What a repro's variable was made from (``schema = Schema(...)``: ``Schema``); else the name."""
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name for x in node.targets):
            return _root(node.value) or name
    return name


def _root(node: ast.AST) -> str:
    """The name a call's callee starts from (``Duration`` of ``Duration(1).total``)."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


# -- running the repro -------------------------------------------------------------------------------

#: Runs the repro's statements; the last one, when an expression, is printed as its ``repr``. Prints
#: one JSON line: ``{"raised": type name or null, "value": repr or null}`` (with ``"message"`` for an
#: exception, ``"type"``, the value's type name, for a value).
#: The runner's ``run(code)``: one example's outcome, also the batch runner's (audit.py).
RUN_EXAMPLE = r'''
def run(code):
    tree = compile(code, "<repro>", "exec", ast.PyCF_ONLY_AST)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    scope = {"__name__": "__main__"}
    out = {"raised": None, "value": None}
    try:
        exec(compile(ast.Module(body=body, type_ignores=[]), "<repro>", "exec"), scope)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<repro>", "eval"), scope)
            out["value"], out["type"] = repr(value)[:2000], type(value).__name__
    except BaseException as exc:
        out["raised"] = type(exc).__name__
        out["message"] = str(exc)[:300]
    return out
'''
_RUNNER = r'''
import ast, json, sys
''' + RUN_EXAMPLE + r'''
code = open(sys.argv[1]).read()
sys.argv[:] = ["repro.py"]  # what a script of the user's would see (the batch runner gives the same)
print("\n@@REPRO@@" + json.dumps(run(code)))
'''


def _outcome(text: str) -> dict[str, Any] | None:
    marker = text.rfind("@@REPRO@@")
    if marker < 0:
        return None
    try:
        return json.loads(text[marker + len("@@REPRO@@"):].strip().splitlines()[0])
    except (ValueError, IndexError):
        return None


def run_repro(record, code: str, *, backend: str = "local", cache_dir: Path | None = None,
              timeout: float = 60.0) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Run ``code`` in ``record``'s sandbox (the project's test environment, the clean tree), then
    on the buggy tree; ``(clean outcome, buggy outcome)``, ``None`` for a run that printed nothing."""
    from termgym.factory.swesynth.behaviour_record import _apply, _clean_spec
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.behaviour import task_sys_path
    from termgym.tasks.swesynth.task import SweSynthTask

    task = SweSynthTask(record, cache_dir=cache_dir)
    folder = "/tmp/.tg-repro"
    path = ":".join(task_sys_path(task))
    command = (f"cd {shlex.quote(record.workdir)} && env -u PYTHONSTARTUP PYTHONPATH={shlex.quote(path)} "
               f"PYTHONHASHSEED=0 python3 -B {folder}/runner.py {folder}/repro.py 2>&1 | tail -c 8000")
    with FreshSandboxes(backend) as new_sandbox:
        box = new_sandbox(_clean_spec(task))
        box.exec(f"mkdir -p {folder}", timeout=30)
        box.write_file(f"{folder}/runner.py", _RUNNER)
        box.write_file(f"{folder}/repro.py", code)
        clean = _outcome(box.exec(command, timeout=timeout).output)
        _apply(box, record.workdir, record.bug_patch)
        buggy = _outcome(box.exec(command, timeout=timeout).output)
    return clean, buggy


def shows_difference(statement: str, clean: dict[str, Any] | None, buggy: dict[str, Any] | None) -> str:
    """Why the two runs do not show the report's difference (``""``: they do)."""
    if clean is None or buggy is None:
        return "the repro printed nothing (it could not run)"
    if clean.get("raised") and clean.get("raised") == buggy.get("raised"):
        return f"the repro raises {clean['raised']} on the clean tree too"
    if clean == buggy:
        return "the repro behaves the same on the clean and the buggy tree"
    if buggy.get("raised"):
        if f"`{buggy['raised']}`" not in statement and buggy["raised"] not in statement:
            return f"the buggy tree raises {buggy['raised']}, which the report does not say"
        return ""
    if clean.get("raised"):  # the clean tree refuses the input, the buggy one accepts it
        return ""
    value = (buggy.get("value") or "")[:60]
    return "" if value and value in statement else f"the report does not show the buggy result {value!r}"


def check_messages(record, messages: Mapping[str, str], repo: Path) -> list[Failure]:
    """The target tests' failures as a user would see them (for ``report names every symptom``)."""
    return [read_failure(t, messages.get(t, ""), repo) for t in record.target_tests]


__all__ = ["CHECKS", "check_messages", "repro_check", "report_quality", "free_names", "import_lines", "imports_of", "named_api", "project_packages",
           "read_test_module", "resolve", "run_repro", "shows_difference", "static_checks"]


# -- at generation ------------------------------------------------------------------------------------


def report_quality(statement: str, groups: Sequence[Sequence[str]], messages: Mapping[str, str], repo: Path,
                   source_dirs: Sequence[str] = ()) -> str:
    """The first static check a freshly written report fails (``""``: none). ``groups`` are the
    tests each bug breaks on its own (one group: a single bug)."""
    failures = ([[read_failure(t, messages.get(t, ""), repo) for t in group] for group in groups]
                if len(groups) > 1 else None)
    targets = sorted(set().union(*map(set, groups)))
    results = static_checks(statement, targets, Path(repo), source_dirs, failures)
    return next((check for check in CHECKS if results.get(check)), "")


def repro_check(record, *, backend: str = "local", cache_dir: Path | None = None,
                keep: dict[str, Any] | None = None) -> str:
    """Run the report's repro on the clean and the buggy tree in the task's sandbox; why it does not
    show the report's difference (``""``: it does). The outcome (``clean``, ``buggy``) goes into
    ``keep`` when given, else into ``record.validation`` (when the record has one)."""
    code = repro_code(record.problem_statement)
    if code is None:
        return "the report shows no code to run"
    clean, buggy = run_repro(record, code, backend=backend, cache_dir=cache_dir)
    problem = shows_difference(record.problem_statement, clean, buggy)
    if not problem:
        if keep is not None:
            keep.update(clean=clean, buggy=buggy)
        elif record.validation is not None:
            record.validation["repro"] = {"clean": clean, "buggy": buggy}
    return problem
