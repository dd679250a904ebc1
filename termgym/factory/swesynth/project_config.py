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

import configparser
import fnmatch
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

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
    pyproject = top / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project") or {}
        except tomllib.TOMLDecodeError as exc:
            raise ReadingError(f"{top.name}/pyproject.toml: not valid TOML ({exc})") from None
        if project.get("dependencies"):
            return "pyproject.toml [project] dependencies", [str(d) for d in project["dependencies"]]
    setup_cfg = top / "setup.cfg"
    if setup_cfg.is_file():
        cfg = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            cfg.read_string(setup_cfg.read_text(encoding="utf-8", errors="replace"))
        except configparser.Error as exc:
            raise ReadingError(f"{top.name}/setup.cfg: {exc}") from None
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

    @property
    def where(self) -> str:
        return f"{self.file} [{self.section}]"


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
                                        required_plugins=_ini_args(values.get("required_plugins")))
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


def _holds_unittest_tests(text: str) -> bool:
    return bool(re.search(r"^\s*def test", text, re.M) and re.search(r"^class \w+\(.*TestCase\b", text, re.M))


def missed_unittest_files(top: Path, test_dirs: list[str] | tuple[str, ...],
                          python_files: list[str] | tuple[str, ...] = PYTEST_PYTHON_FILES) -> list[str]:
    """Test modules (``TestCase`` classes with ``test`` methods) under ``test_dirs`` that pytest's
    ``python_files`` misses but the maintainers run: unittest's discovery pattern (``test*.py``)
    matches them, or a runner file (:data:`RUNNER_FILES`) names them. Paths relative to ``top``."""
    named = "\n".join((top / f).read_text(encoding="utf-8", errors="replace")
                      for f in RUNNER_FILES if (top / f).is_file())
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
            if not (fnmatch.fnmatch(path.name, UNITTEST_PATTERN) or rel in named or module in named):
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
    return (["python_files=" + " ".join([*patterns, *names])],
            [f"python_files: added {' '.join(names)} ({', '.join(missed)}: unittest TestCase files that "
             f"pytest's {' '.join(patterns)} misses)"])


__all__ = ["MARKER_ENVIRONMENT", "PROBE_PLUGIN", "PYTEST_PYTHON_FILES", "REPORT_FILE_OPTIONS", "DeclaredDependencies",
           "LockPytest", "PytestConfig", "ReadingError", "addopts_overrides", "declared_dependencies", "evaluate_marker",
           "missed_unittest_files", "neutralise_addopts", "parse_declared", "parse_probe", "plugin_names",
           "python_files_overrides", "read_pytest_config", "requirement_name"]
