"""How a project's maintainers run it, read from its unpacked sdist (for ``add-project``).

Three readings, each plain data in, plain data out, so each is tested on a small folder:

* **declared runtime dependencies** (:func:`declared_dependencies`): the ``Requires-Dist`` of
  ``PKG-INFO``, else the egg-info's ``requires.txt``, else ``[project] dependencies`` of
  ``pyproject.toml``, else ``install_requires`` of ``setup.cfg``; requirements that only apply with
  an extra, or whose environment marker is false for the sandbox's CPython
  (:data:`~termgym.tasks.swesynth.projects.TARGET_PYTHON` on x86-64 Linux), are left out;
* **the pytest configuration** pytest itself would pick (:func:`read_pytest_config`) and, given
  what the test lock's pytest knows (:data:`PROBE_PLUGIN`, run in a sandbox by ``add-project``),
  the ``addopts`` it cannot satisfy (:func:`neutralise_addopts`): options no installed plugin
  defines (``--cov`` without pytest-cov), ``-p`` plugins that are not importable, and report files
  (``--junitxml``) the grader's read-only tree cannot take;
* **unittest files pytest would miss** (:func:`missed_unittest_files`): ``TestCase`` modules whose
  names pytest's ``python_files`` does not match but unittest's discovery (``test*.py``) or the
  project's own scripts and configuration name (polib's ``tests/tests.py``).
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import json
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.projects import TARGET_PYTHON, normalise_name

#: PEP 508 marker variables of the sandbox's interpreter (the runtime's CPython on x86-64 Linux);
#: ``extra`` is empty, so a requirement of an extra (``extra == "dev"``) never applies.
MARKER_ENVIRONMENT = {
    "implementation_name": "cpython", "implementation_version": f"{TARGET_PYTHON}.0", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "",
    "platform_system": "Linux", "platform_version": "", "python_full_version": f"{TARGET_PYTHON}.0",
    "python_version": TARGET_PYTHON, "sys_platform": "linux", "extra": "",
}
#: pytest's own default ``python_files``.
PYTEST_PYTHON_FILES = ("test_*.py", "*_test.py")
#: unittest's default discovery pattern (``python -m unittest`` with no arguments).
UNITTEST_PATTERN = "test*.py"
#: Where pytest looks for its configuration, in its order, and the section each must hold to count
#: (pytest.ini counts even without one).
PYTEST_CONFIG_FILES = (("pytest.ini", "pytest"), (".pytest.ini", "pytest"), ("pyproject.toml", "tool.pytest.ini_options"),
                       ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))
#: Files in which a project names how its tests are run (a test file named there is one it runs).
RUNNER_FILES = ("tox.ini", "setup.cfg", "setup.py", "pyproject.toml", "Makefile", "noxfile.py", "runtests.py",
                "runtests.sh", "run_tests.py", "run_tests.sh", "test.sh")
#: pytest options that write a report file where they are told, in the tree by default; the grader's
#: copy of the tree is read-only, so pytest would fail at the end of the session writing it.
REPORT_FILE_OPTIONS = frozenset({"--junitxml", "--junit-xml", "--log-file", "--debug", "--resultlog", "--result-log",
                                 "--report-log"})
#: Directories pytest does not recurse into by default (``norecursedirs``).
_NORECURSE = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")


class ReadingError(ValueError):
    """Something the sdist declares cannot be read (the message names the file and the text)."""


# -- declared runtime dependencies -----------------------------------------------------------------

def evaluate_marker(marker: str, environment: dict[str, str] = MARKER_ENVIRONMENT) -> bool:
    """A PEP 508 environment marker (``python_version < "3.8" and extra == "dev"``) in ``environment``
    (read and evaluated by ``packaging``, as pip does).

    Raises :class:`ReadingError` for text that is not a marker or names an unknown variable.
    """
    try:
        return Marker(marker).evaluate(dict(environment))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName) as exc:
        raise ReadingError(f"marker {marker!r}: {exc}") from None


_DECLARED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


@dataclass
class DeclaredDependencies:
    """The runtime requirements a project declares, as pip reads them (``name[extras]specifier``)."""

    source: str  # "PKG-INFO Requires-Dist", "setup.cfg install_requires", ... or "" when none is declared
    requirements: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # "text (why)": a marker false here, a URL


def parse_declared(text: str) -> tuple[str, str | None]:
    """One PEP 508 line -> ``(name[extras]specifier without spaces, marker or None)``; URL requirements
    and what is no requirement raise :class:`ReadingError`."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise ReadingError(f"{text!r} is not a requirement: {exc}") from None
    if requirement.url:
        raise ReadingError(f"{text!r} names a URL, which a locked wheel cannot stand for")
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return requirement.name + extras + str(requirement.specifier), (str(requirement.marker) if requirement.marker else None)


def _requires_txt(text: str) -> list[str]:
    """setuptools' ``requires.txt``: bare lines apply always, ``[:marker]`` sections under their marker,
    ``[extra]`` and ``[extra:marker]`` sections only with the extra (left out here, as ``extra == ...``)."""
    out: list[str] = []
    extra, marker = "", ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            continue
        conditions = [f'extra == "{extra}"'] * bool(extra) + [f"({marker})"] * bool(marker)
        out.append(line + ("; " + " and ".join(conditions) if conditions else ""))
    return out


def _setup_cfg_list(value: str) -> list[str]:
    # setuptools' list-semi: one requirement a line, or ';'-separated on one line
    lines = value.strip().splitlines() if "\n" in value.strip() else value.split(";")
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _toml(top: Path, name: str) -> dict | None:
    """``top/name`` parsed as TOML, None when there is no such file (:class:`ReadingError` when it is not TOML)."""
    path = top / name
    if not path.is_file():
        return None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ReadingError(f"{top.name}/{name}: not valid TOML ({exc})") from None


def _ini(top: Path, name: str) -> configparser.ConfigParser | None:
    """``top/name`` parsed as an ini file, None when there is no such file."""
    path = top / name
    if not path.is_file():
        return None
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except configparser.Error as exc:
        raise ReadingError(f"{top.name}/{name}: {exc}") from None
    return cfg


def _declared_lines(top: Path) -> tuple[str, list[str]]:
    info = top / "PKG-INFO"
    if info.is_file():
        requires = Parser().parsestr(info.read_text(encoding="utf-8", errors="replace")).get_all("Requires-Dist")
        if requires:
            return "PKG-INFO Requires-Dist", [str(r) for r in requires]
    for requires_txt in sorted(top.glob("*.egg-info/requires.txt")) + sorted(top.glob("src/*.egg-info/requires.txt")):
        lines = _requires_txt(requires_txt.read_text(encoding="utf-8", errors="replace"))
        if lines:
            return str(requires_txt.relative_to(top)), lines
    project = (_toml(top, "pyproject.toml") or {}).get("project") or {}
    if project.get("dependencies"):
        return "pyproject.toml [project] dependencies", [str(d) for d in project["dependencies"]]
    cfg = _ini(top, "setup.cfg")
    if cfg is not None:
        value = cfg.get("options", "install_requires", fallback="")
        if value.strip() and not value.strip().startswith(("file:", "attr:")):
            return "setup.cfg [options] install_requires", _setup_cfg_list(value)
    return "", []


def declared_dependencies(top: Path, environment: dict[str, str] = MARKER_ENVIRONMENT) -> DeclaredDependencies:
    """The runtime requirements the sdist in ``top`` declares that apply in ``environment``.

    The first source that declares any is read (see the module docstring for their order): an sdist's
    ``PKG-INFO`` is what its build tool resolved from the others, so it is the most faithful.
    """
    source, lines = _declared_lines(top)
    out = DeclaredDependencies(source=source)
    own = normalise_name(re.sub(r"-\d.*$", "", top.name))
    for line in lines:
        try:
            requirement, marker = parse_declared(line)
            applies = marker is None or evaluate_marker(marker, environment)
        except ReadingError as exc:  # a URL, a marker nobody can read: printed, not guessed at
            out.left_out.append(f"{line} ({exc})")
            continue
        if not applies:
            if not re.search(r"\bextra\b", marker or ""):  # an extra's requirements are not runtime ones
                out.left_out.append(f"{line} (marker false for CPython {TARGET_PYTHON} on Linux)")
        elif requirement_name(requirement) != own:
            out.requirements.append(requirement)
    return out


#: The names under which projects declare what their tests need: extras, dependency groups (PEP 735),
#: poetry groups. ``dev`` is read too, but only what a test imports is ever taken from any of them.
TEST_GROUPS = ("test", "tests", "testing", "dev")
#: Requirement files that name what the tests need (tox.ini's ``[testenv] deps`` are read too).
TEST_REQUIREMENT_FILES = ("requirements-test.txt", "requirements-tests.txt", "requirements_test.txt",
                          "requirements-testing.txt", "requirements.testing.txt", "test-requirements.txt",
                          "test_requirements.txt", "tests/requirements.txt", "requirements-dev.txt",
                          "requirements_dev.txt", "dev-requirements.txt")
#: Distributions whose module is not their name (the ones test suites import most).
MODULE_OF = {"pyyaml": "yaml", "python-dateutil": "dateutil", "beautifulsoup4": "bs4", "pillow": "PIL",
             "attrs": "attr", "scikit-learn": "sklearn", "typing-extensions": "typing_extensions",
             "msgpack-python": "msgpack", "pyjwt": "jwt", "python-multipart": "multipart"}


def _group_lines(top: Path) -> list[tuple[str, str, str]]:
    """Every requirement the sdist declares in a test group, as ``(line, where, group)``."""
    out: list[tuple[str, str, str]] = []
    info = top / "PKG-INFO"
    if info.is_file():
        for line in Parser().parsestr(info.read_text(encoding="utf-8", errors="replace")).get_all("Requires-Dist") or []:
            try:
                requirement = Requirement(str(line))
            except InvalidRequirement:
                continue
            marker = str(requirement.marker or "")
            groups = [g for g in TEST_GROUPS if re.search(rf"""\bextra\s*==\s*['"]{g}['"]""", marker)]
            if groups:
                out.append((str(line), f"PKG-INFO extra {groups[0]!r}", groups[0]))
    for requires_txt in sorted(top.glob("*.egg-info/requires.txt")) + sorted(top.glob("src/*.egg-info/requires.txt")):
        for line in _requires_txt(requires_txt.read_text(encoding="utf-8", errors="replace")):
            group = re.search(r'extra == "([^"]+)"', line)
            if group and group.group(1) in TEST_GROUPS:
                out.append((line, f"{requires_txt.name} [{group.group(1)}]", group.group(1)))
    data = _toml(top, "pyproject.toml")
    if data is not None:
        for kind, table in (("[project.optional-dependencies]", (data.get("project") or {}).get("optional-dependencies")),
                            ("[dependency-groups]", data.get("dependency-groups"))):
            for group in TEST_GROUPS:
                out += [(line, f"pyproject.toml {kind} {group}", group) for line in (table or {}).get(group) or []
                        if isinstance(line, str)]
        poetry = (data.get("tool") or {}).get("poetry") or {}
        tables = [("[tool.poetry.dev-dependencies]", poetry.get("dev-dependencies"))]
        tables += [(f"[tool.poetry.group.{g}.dependencies]", ((poetry.get("group") or {}).get(g) or {}).get("dependencies"))
                   for g in TEST_GROUPS]
        for where, table in tables:  # poetry's constraints are not PEP 440: the name alone is taken
            out += [(name, f"pyproject.toml {where}", "dev") for name in (table or {}) if name.lower() != "python"]
    cfg = _ini(top, "setup.cfg")
    if cfg is not None:
        for group in TEST_GROUPS:
            value = cfg.get("options.extras_require", group, fallback="")
            out += [(line, f"setup.cfg [options.extras_require] {group}", group) for line in _setup_cfg_list(value)]
    tox = _ini(top, "tox.ini")
    if tox is not None:  # the deps of tox's default test environment ("py311: pkg" factor lines as well)
        for line in tox.get("testenv", "deps", fallback="").splitlines():
            line = re.sub(r"^[\w.,!-]+:\s+", "", line.split(" #")[0].strip())
            if line and not line.startswith(("#", "-", "{", ".")):
                out.append((line, "tox.ini [testenv] deps", ""))
    for name in TEST_REQUIREMENT_FILES:
        path = top / name
        if path.is_file():
            out += [(line.split(" #")[0].strip(), name, "") for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                    if line.strip() and not line.strip().startswith(("#", "-", "."))]
    return out


def imported_modules(files: list[Path]) -> set[str]:
    """The top-level modules the ``files`` import (``hypothesis.extra.pytz`` needs ``pytz`` too).

    A branch on the interpreter's version (``if sys.version_info < (2, 7): import unittest2``) is
    followed only where CPython :data:`TARGET_PYTHON` goes; a file that does not parse is read line
    by line instead."""
    names: set[str] = set()
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = pyparse.parse(text)
        except (SyntaxError, ValueError):
            dotted = [m.group(1) or m.group(2) for m in re.finditer(
                r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import|import\s+([A-Za-z_][\w., ]*))", text, re.M)]
            modules = [d.strip().split(" ")[0] for line in dotted for d in line.split(",")]
        else:
            modules = list(_imports(tree.body))
        for module in modules:
            parts = module.split(".")
            names.add(parts[0])
            if parts[:2] == ["hypothesis", "extra"] and len(parts) > 2:
                names.add(parts[2])
    return names


def _imports(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module and not node.level:
                yield node.module
        elif isinstance(node, ast.If):
            taken = _version_test(node.test)
            if taken is not False:
                yield from _imports(node.body)
            if taken is not True:
                yield from _imports(node.orelse)
        else:
            for child in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, child, None)
                if isinstance(block, list):
                    yield from _imports([n for n in block if isinstance(n, ast.stmt)] +
                                        [s for h in block if isinstance(h, ast.ExceptHandler) for s in h.body])


def _version_test(test: ast.expr) -> bool | None:
    """``sys.version_info < (2, 7)`` (or ``>=``, ``sys.version_info[0] == 2``) on the target interpreter;
    None for any other test (both branches are read)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and "version_info" in ast.unparse(test.left)):
        return None
    try:
        right = ast.literal_eval(test.comparators[0])
        version = tuple(int(v) for v in TARGET_PYTHON.split(".")) + (0,)
        left = ast.unparse(test.left)
        value = version[int(left.split("[")[1].rstrip("]"))] if "[" in left else version
        op = {ast.Lt: "__lt__", ast.LtE: "__le__", ast.Gt: "__gt__", ast.GtE: "__ge__", ast.Eq: "__eq__",
              ast.NotEq: "__ne__"}[type(test.ops[0])]
        result = getattr(value, op)(right)
    except (ValueError, TypeError, KeyError, IndexError, SyntaxError):
        return None
    return result if isinstance(result, bool) else None


def declared_test_dependencies(top: Path, test_files: list[Path], runtime: list[str] = (),
                      environment: dict[str, str] = MARKER_ENVIRONMENT) -> DeclaredDependencies:
    """What the sdist declares its tests need (:data:`TEST_GROUPS`, :data:`TEST_REQUIREMENT_FILES`) and
    its ``test_files`` import: tools a group also lists (pytest and its plugins, linters, type
    checkers, documentation builders) are not imported by a test, so they never reach the lock.
    ``runtime`` (already in the lock) and pytest are left out; a marker false here leaves one out."""
    out = DeclaredDependencies(source="")
    imported = {m.lower() for m in imported_modules(test_files)}
    own = normalise_name(re.sub(r"-\d.*$", "", top.name))
    taken = {requirement_name(r) for r in runtime} | {"pytest", own}
    sources: list[str] = []
    for line, where, group in _group_lines(top):
        try:
            requirement, marker = parse_declared(line)
        except ReadingError:
            continue
        name = requirement_name(requirement)
        if name in taken or (MODULE_OF.get(name) or name.replace("-", "_")).lower() not in imported:
            continue
        if marker is not None and not evaluate_marker(marker, {**environment, "extra": group}):
            out.left_out.append(f"{line} (marker false for CPython {TARGET_PYTHON} on Linux)")
            continue
        taken.add(name)
        out.requirements.append(requirement)
        sources += [where] * (where not in sources)
    out.source = ", ".join(sources)
    return out


def requirement_name(requirement: str) -> str:
    """The normalised project name of a requirement string (``Typing_Extensions>=4`` -> ``typing-extensions``)."""
    match = _DECLARED.match(requirement.strip())
    if not match:
        raise ReadingError(f"{requirement!r} is not a requirement")
    return normalise_name(match.group(1))


# -- the pytest configuration ------------------------------------------------------------------------


@dataclass
class PytestConfig:
    """The parts of a project's pytest configuration that decide whether and what the lock collects."""

    file: str  # relative to the sdist's top, e.g. "setup.cfg"
    section: str  # e.g. "tool:pytest"
    addopts: list[str] = field(default_factory=list)
    python_files: list[str] = field(default_factory=list)  # empty: pytest's default
    required_plugins: list[str] = field(default_factory=list)
    filterwarnings: list[str] = field(default_factory=list)  # one warning filter each, in order

    @property
    def where(self) -> str:
        return f"{self.file} [{self.section}]"


def _ini_lines(value: object) -> list[str]:
    # pytest's "linelist" ini values: a TOML list as is, a string one entry a line
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def filterwarnings_overrides(config: PytestConfig | None, importable: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """``(ini overrides, notes)`` dropping the ``filterwarnings`` entries whose warning class lives in a
    module the test environment cannot import (``importable(top-level module name)``).

    pytest stops before collecting anything (exit 4, "while parsing the following warning
    configuration") on such an entry: termcolor's ``ignore:...:coverage.exceptions.CoverageWarning``
    without coverage installed. A warning of a class nobody can import is never raised, so dropping
    the entry changes nothing else; the others are kept, in order, one a line in ``-o filterwarnings=``.
    """
    if config is None or not config.filterwarnings:
        return [], []
    kept, dropped = [], []
    for entry in config.filterwarnings:
        parts = entry.split(":")
        category = parts[2].strip() if len(parts) > 2 else ""
        module = category.rsplit(".", 1)[0] if "." in category else ""
        (dropped if module and not importable(module.split(".")[0]) else kept).append(entry)
    if not dropped:
        return [], []
    return (["filterwarnings=" + "\n".join(kept)],
            [f"{config.where} filterwarnings: dropped {'; '.join(repr(d) for d in dropped)} (the warning class's module "
             "is not in the test lock, and pytest would stop before collecting)"
             + (f"; kept {len(kept)} other filter(s)" if kept else "")])


def _ini_args(value: object) -> list[str]:
    # pytest's "args"/"linelist" ini values: a TOML list as is, a string split like a shell would
    if isinstance(value, list):
        return [str(v) for v in value]
    return shlex.split(str(value)) if value else []


def _config_in(path: Path, section: str) -> dict[str, object] | None:
    if path.name == "pyproject.toml":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ReadingError(f"{path.name}: not valid TOML ({exc})") from None
        return data.get("tool", {}).get("pytest", {}).get("ini_options")
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except configparser.Error as exc:
        raise ReadingError(f"{path.name}: {exc}") from None
    if not cfg.has_section(section):
        return {} if path.name in ("pytest.ini", ".pytest.ini") else None
    return dict(cfg.items(section))


def read_pytest_config(top: Path, test_dirs: list[str] | tuple[str, ...]) -> PytestConfig | None:
    """The configuration pytest would use when run on ``test_dirs`` from ``top`` (``None``: none).

    Like pytest: from the common folder of the test paths up to ``top``, the first ``pytest.ini``,
    ``.pytest.ini``, ``pyproject.toml`` with ``[tool.pytest.ini_options]``, ``tox.ini`` with ``[pytest]``
    or ``setup.cfg`` with ``[tool:pytest]``.
    """
    paths = [top / d for d in test_dirs if (top / d).exists()]
    start = Path(os.path.commonpath(paths)) if paths else top
    if start.is_file():
        start = start.parent
    for folder in [start, *start.parents]:
        for name, section in PYTEST_CONFIG_FILES:
            path = folder / name
            if path.is_file():
                values = _config_in(path, section)
                if values is not None:
                    return PytestConfig(file=str(path.relative_to(top)), section=section,
                                        addopts=_ini_args(values.get("addopts")),
                                        python_files=_ini_args(values.get("python_files")),
                                        required_plugins=_ini_args(values.get("required_plugins")),
                                        filterwarnings=_ini_lines(values.get("filterwarnings")))
        if folder == top:
            break
    return None


# -- what the test lock's pytest knows ---------------------------------------------------------------

#: A pytest plugin run once in a sandbox with the project's tree and its test environment: it writes
#: to ``$TG_PROBE_OUT`` every option pytest knows there (its own, the lock's plugins', the project's
#: conftest files') with how many values it takes, whether each ``-p`` name in ``$TG_PROBE_PLUGINS``
#: can be loaded, and the plugin distributions installed, then stops pytest before it collects
#: anything. It runs under the runtime's Python, not termgym's, so it is text written into the sandbox.
PROBE_PLUGIN = '''\
import importlib.metadata, importlib.util, json, os


def _loadable(name):
    from _pytest.config import builtin_plugins
    if name.startswith("no:") or name in builtin_plugins:
        return True
    if name in {ep.name for ep in importlib.metadata.entry_points(group="pytest11")}:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def pytest_cmdline_main(config):
    options = {}
    parser = config._parser
    for group in [*parser._groups, parser._anonymous]:
        for option in group.options:
            attrs = option.attrs()
            if attrs.get("action") in ("store_true", "store_false", "store_const", "append_const", "count",
                                       "help", "version") or attrs.get("nargs") == 0:
                arity = "none"
            else:
                arity = "optional" if attrs.get("nargs") == "?" else "one"
            for name in option.names():
                options[name] = arity
    plugins = {n: _loadable(n) for n in os.environ.get("TG_PROBE_PLUGINS", "").split()}
    dists = sorted({d.project_name for _, d in config.pluginmanager.list_plugin_distinfo()})
    with open(os.environ["TG_PROBE_OUT"], "w") as out:
        json.dump({"options": options, "plugins": plugins, "dists": dists}, out)
    return 0
'''


@dataclass
class LockPytest:
    """What the test lock's pytest knows, as :data:`PROBE_PLUGIN` wrote it."""

    options: dict[str, str]  # "--cov" -> "none" | "optional" | "one" (values it takes)
    plugins: dict[str, bool]  # "-p" name -> loadable
    dists: list[str]  # installed plugin distributions ("pytest-cov")


def parse_probe(text: str) -> LockPytest:
    """What :data:`PROBE_PLUGIN` wrote (:class:`ReadingError` when it is not that)."""
    try:
        data = json.loads(text)
        return LockPytest(options=dict(data["options"]), plugins=dict(data["plugins"]), dists=list(data["dists"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ReadingError(f"the pytest probe wrote no options ({exc}): {text[:200]!r}") from None


def plugin_names(addopts: list[str]) -> list[str]:
    """The ``-p`` names of an ``addopts`` (``-p xdist``, ``-pxdist``, ``-p no:randomly``)."""
    names, i = [], 0
    while i < len(addopts):
        token = addopts[i]
        if token == "-p" and i + 1 < len(addopts):
            names.append(addopts[i + 1])
            i += 1
        elif token.startswith("-p") and len(token) > 2 and not token.startswith("--"):
            names.append(token[2:])
        i += 1
    return names


def neutralise_addopts(addopts: list[str], lock: LockPytest) -> tuple[list[str], list[str], list[str]]:
    """``(kept, unsatisfied, report_files)``: ``addopts`` split into what ``lock`` runs as is, the
    options it cannot satisfy, and those that write report files (:data:`REPORT_FILE_OPTIONS`).

    An option no plugin defines is dropped with the value that follows it (``--cov pydash``), unless
    that next token is an option itself; a ``-p`` plugin that cannot be loaded is dropped with its
    name. Short flags may be bundled (``-vx``, ``-ra``), as argparse reads them.
    """
    kept: list[str] = []
    unsatisfied: list[str] = []
    report_files: list[str] = []
    i = 0
    while i < len(addopts):
        token = addopts[i]
        following = addopts[i + 1] if i + 1 < len(addopts) else None
        takes_next = following is not None and not following.startswith("-")
        if not token.startswith("-") or token == "-":
            kept.append(token)
            i += 1
            continue
        if token.startswith("-p") and not token.startswith("--"):
            name = token[2:] or following
            width = 1 if token[2:] else 2
            ok = name is not None and lock.plugins.get(name, name.startswith("no:"))
            (kept if ok else unsatisfied).extend(addopts[i:i + width])
            i += width
            continue
        if token.startswith("--"):
            name, has_value, _ = token.partition("=")
            arity = lock.options.get(name)
            if has_value or arity == "none" or (arity != "one" and not takes_next):
                width = 1
            else:  # its value is the next token (an unknown option's too, when it is no option itself)
                width = 2
            into = unsatisfied if arity is None else report_files if name in REPORT_FILE_OPTIONS else kept
            into.extend(addopts[i:i + width])
            i += width
            continue
        width, known = _short_option(token, takes_next, lock)
        (kept if known else unsatisfied).extend(addopts[i:i + width])
        i += width
    return kept, unsatisfied, report_files


def addopts_overrides(config: PytestConfig, lock: LockPytest) -> tuple[list[str], list[str]]:
    """``(ini overrides, notes)`` that make ``config`` runnable by ``lock``'s pytest under the grader:
    ``addopts=`` with only what can run there, ``required_plugins=`` when a required plugin is not
    installed."""
    ini: list[str] = []
    notes: list[str] = []
    kept, unsatisfied, report_files = neutralise_addopts(config.addopts, lock)
    if unsatisfied or report_files:
        ini.append("addopts=" + shlex.join(kept))
        why = [f"{shlex.join(unsatisfied)} (no plugin of the test lock defines them)"] * bool(unsatisfied) + [
            f"{shlex.join(report_files)} (report files: the tree is read-only under the grader)"] * bool(report_files)
        notes.append(f"{config.where} addopts: dropped {'; '.join(why)}; kept {shlex.join(kept) or 'nothing'}")
    installed = {normalise_name(d) for d in lock.dists}
    missing = [r for r in config.required_plugins if requirement_name(r) not in installed]
    if missing:
        ini.append("required_plugins=")
        notes.append(f"{config.where} required_plugins: {', '.join(missing)} not in the test lock, so not required")
    return ini, notes


def _short_option(token: str, takes_next: bool, lock: LockPytest) -> tuple[int, bool]:
    """``(tokens it spans, known)`` for a short option: ``-x``, bundled flags ``-vx``, a value in the
    token (``-ra``, ``-n4``) or after it (``-W error``, ``-n 4``)."""
    for at in range(1, len(token)):
        arity = lock.options.get("-" + token[at])
        if arity is None:
            return (2 if len(token) == 2 and takes_next else 1), False
        if arity != "none":
            in_token = at + 1 < len(token)
            return (1 if in_token or (arity == "optional" and not takes_next) else 2), True
    return 1, True


# -- unittest files pytest would miss ----------------------------------------------------------------


def _matches(rel: str, patterns: list[str] | tuple[str, ...]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(rel if "/" in p else name, p if "/" not in p else f"*{p}") for p in patterns)


def defines_test(text: str) -> bool:
    """Whether Python source defines a test function or method (``def test...``)."""
    return bool(re.search(r"^\s*def test", text, re.M))


def _holds_unittest_tests(text: str) -> bool:
    return defines_test(text) and bool(re.search(r"^class \w+\(.*TestCase\b", text, re.M))


def missed_unittest_files(top: Path, test_dirs: list[str] | tuple[str, ...],
                          python_files: list[str] | tuple[str, ...] = PYTEST_PYTHON_FILES) -> list[str]:
    """Test modules (``TestCase`` classes with ``test`` methods) under ``test_dirs`` that pytest's
    ``python_files`` misses but the maintainers run: unittest's discovery pattern (``test*.py``)
    matches them, a runner file (:data:`RUNNER_FILES`) names them, or they are in the package a
    ``test_suite`` names (setuptools runs each of its modules: parsedatetime's ``tests/TestUnits.py``).
    Paths relative to ``top``."""
    named = "\n".join((top / f).read_text(encoding="utf-8", errors="replace")
                      for f in RUNNER_FILES if (top / f).is_file())
    # setuptools' ``test_suite='tests'`` (setup.py, setup.cfg) runs every module of that package
    suites = [m.group(1) for m in re.finditer(r"""\btest_suite\s*=\s*['"]?([A-Za-z_][\w.]*)""", named)]
    out: list[str] = []
    for d in test_dirs:
        folder = top / d
        if not folder.is_dir():  # a test file given as a path is collected whatever its name
            continue
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(top).as_posix()
            if any(fnmatch.fnmatch(part, pattern) for part in path.relative_to(folder).parts[:-1]
                   for pattern in _NORECURSE):
                continue
            if path.name in ("__init__.py", "conftest.py") or _matches(rel, python_files):
                continue
            module = rel[:-3].replace("/", ".")
            if not (fnmatch.fnmatch(path.name, UNITTEST_PATTERN) or rel in named or module in named
                    or any(module.startswith(suite + ".") for suite in suites)):
                continue
            if _holds_unittest_tests(path.read_text(encoding="utf-8", errors="replace")):
                out.append(rel)
    return out


def python_files_overrides(top: Path, test_dirs: list[str] | tuple[str, ...],
                           config: PytestConfig | None) -> tuple[list[str], list[str]]:
    """``(ini overrides, notes)`` adding :func:`missed_unittest_files` to the ``python_files`` pytest
    uses (the project's own, else pytest's default), by name."""
    patterns = list(config.python_files) if config and config.python_files else list(PYTEST_PYTHON_FILES)
    missed = missed_unittest_files(top, test_dirs, patterns)
    if not missed:
        return [], []
    names = list(dict.fromkeys(m.rsplit("/", 1)[-1] for m in missed))
    others = {p.name for d in test_dirs if (top / d).is_dir() for p in (top / d).rglob("*.py")} - set(names)
    for pattern in ("Test*.py", "test*.py", "*Test.py", "*Tests.py"):  # one pattern for many files, when it fits
        if len(names) > 2 and all(fnmatch.fnmatchcase(n, pattern) for n in names) and not any(
                fnmatch.fnmatchcase(o, pattern) and not _matches(o, patterns) for o in others):
            names = [pattern]
            break
    return (["python_files=" + " ".join([*patterns, *names])],
            [f"python_files: added {' '.join(names)} ({', '.join(missed)}: unittest TestCase files that "
             f"pytest's {' '.join(patterns)} misses)"])


__all__ = ["MARKER_ENVIRONMENT", "PROBE_PLUGIN", "PYTEST_PYTHON_FILES", "REPORT_FILE_OPTIONS", "DeclaredDependencies",
           "LockPytest", "PytestConfig", "ReadingError", "addopts_overrides", "declared_dependencies",
           "declared_test_dependencies", "defines_test", "evaluate_marker", "filterwarnings_overrides",
           "imported_modules", "missed_unittest_files", "neutralise_addopts", "parse_declared", "parse_probe", "plugin_names",
           "python_files_overrides", "read_pytest_config", "requirement_name"]
