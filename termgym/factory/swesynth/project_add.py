"""Add a PyPI project to the SWE-SYNTH project set: ``termgym swesynth add-project NAME==VERSION``.

What a bundled project folder holds (:mod:`termgym.tasks.swesynth.projects`) is made here from a
pinned requirement, for projects nobody here named as well as for the bundled ones:

1. the **sdist** is downloaded (``pip download --no-deps --no-binary :all:``) or taken from a file,
   and must be a ``.tar.gz`` holding one top folder;
2. its **licence** is read from the licence file (falling back to the package metadata) and must be
   one of :data:`~termgym.tasks.swesynth.projects.ALLOWED_LICENCES` (the permissive ones and MPL-2.0,
   whose conditions bind each file); the licence files are copied out;
3. the **layout** is found: the packages (``src/`` or top level) become ``source_dirs``, the test
   folder ``test_dirs``, ``src`` the ``python_path``; each can be given instead;
4. the **test lock** is resolved: pytest 7.2.1 and its pinned dependencies (the lock every bundled
   project shares), the project's declared runtime dependencies
   (:func:`~.project_config.declared_dependencies`) and the extra test requirements, downloaded as
   wheels for the runtime's interpreter with every transitive dependency, each with the sha256 of
   the wheel pip chose;
5. the folder is written to a staging directory and its test environment **provisioned**; the
   project's pytest configuration is read as pytest reads it (:mod:`.project_config`): ``TestCase``
   files its ``python_files`` misses are added to it, and ``addopts`` the lock's pytest cannot
   satisfy (asked in a sandbox, :func:`probe_lock_pytest`) are dropped, each with a note printed and
   kept in ``project.toml``;
6. the clean suite is **run in a sandbox under the grader** (:func:`~projects.run_clean_suite`). Only when
   every collected test passes (or is skipped) is the folder moved into the project set, with the
   measured ``lines``, ``tests`` and ``suite_seconds``. Otherwise the failing tests are listed with
   their messages, to be left out with ``--deselect TEST=REASON`` (every left-out test says why);
7. once it passes, the **flaky-test probe** (:mod:`.flaky`, on unless ``flaky_probe=False``, the
   CLI's ``--no-flaky-probe``) runs the suite again under CPU load above the core count and in
   reverse order, and its timing tests several more times under load: every test whose outcome
   changes is left out (``[[deselect]]`` with ``flaky: <what changed it>``), so none reaches a
   task's required set, and the suite is run once more without them. Before that, a clean run
   that fails a few tests has them run again alone: those that pass there are flaky too, left out
   the same way (``flaky: passed when run again ... (failed on the first run: ...)``).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path, PurePosixPath

from termgym.archives import extract_all
from termgym.factory.swesynth.flaky import FlakyReport, ProbeRun, probe, recheck_failures, summary_messages
from termgym.factory.swesynth.project_config import (
    MODULE_OF,
    PROBE_PLUGIN,
    LockPytest,
    ReadingError,
    addopts_overrides,
    declared_dependencies,
    declared_test_dependencies,
    defines_test,
    filterwarnings_overrides,
    parse_probe,
    plugin_names,
    python_files_overrides,
    read_pytest_config,
    requirement_name,
)
from termgym.tasks.swesynth.projects import (
    ALLOWED_LICENCES,
    PROJECTS_DIR,
    TARGET_PLATFORMS,
    TARGET_PYTHON,
    CleanRun,
    Project,
    ProjectError,
    file_sha256,
    load_project,
    normalise_name,
    project_sandbox_spec_parts,
    project_tree,
    provision,
    run_clean_suite,
)
from termgym.tasks.swesynth.tree import VENDORED_DIRS

#: The pytest every bundled project runs under, and the versions of its dependencies in their lock.
BASE_LOCK: tuple[str, ...] = ("pytest==7.2.1", "attrs==22.2.0", "iniconfig==1.1.1", "packaging==23.0",
                              "pluggy==1.0.0")
#: A failing clean run whose failures are this few has them run again (flaky ones pass there and
#: are left out); more than this is a broken environment, not chance.
MAX_RECHECKED = 20
#: Folder names that hold tests (in the order they are looked for).
TEST_FOLDERS = ("tests", "test", "testing", "t")
#: Top-level folders that are never the project's source.
NOT_SOURCE = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "bench",
                        "scripts", "tools", "build", "dist", "t"})
#: Configuration files a fix never needs to touch (those present become ``protected_files``).
CONFIG_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "pytest.ini")
#: LICENSE, LICENSE.txt, LICENSE-MIT, COPYING, apache-2.0.LICENSE, MIT-LICENSE (ordered-set's only one).
_LICENCE_FILE = re.compile(r"(?i)^(licen[cs]e|copying|copyright)([-._][A-Za-z0-9.]+)?$|^[A-Za-z0-9.-]+[-.]licen[cs]e$")
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
_CLASSIFIERS = {"MIT License": "MIT", "Apache Software License": "Apache-2.0", "ISC License (ISCL)": "ISC",
                "Python Software Foundation License": "PSF-2.0", "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0"}


class AddProjectError(ValueError):
    """The project cannot be added as asked; the message says what was wrong and where."""


@dataclass
class Layout:
    """Where things are in an unpacked sdist (paths relative to its top folder)."""

    source_dirs: list[str]
    test_dirs: list[str]
    python_path: list[str]
    licence_files: list[str]
    licence: str
    test_style: str
    protected_files: list[str] = field(default_factory=list)


@dataclass
class AddResult:
    """What :func:`add_project` did: the project (moved into place when ``ok``) and its clean run;
    when not ``ok``, what to leave out for it to pass (``proposed``: test or file, reason)."""

    project: Project
    run: CleanRun
    ok: bool
    failures: dict[str, str]
    folder: Path
    provision_seconds: float
    proposed: list[tuple[str, str]] = field(default_factory=list)
    #: What the flaky-test probe ran and found (None when it did not run).
    probe: FlakyReport | None = None
    #: ``(test, reason)`` of every test left out as flaky: by the probe, or failing once and passing
    #: when run again.
    flaky: list[tuple[str, str]] = field(default_factory=list)


def parse_requirement(text: str, what: str = "requirement") -> tuple[str, str]:
    """``name==version`` -> ``(name, version)``; anything looser is refused (a lock pins exactly)."""
    match = _REQUIREMENT.match(text.strip())
    if not match:
        raise AddProjectError(f"{what} {text!r} is not pinned as 'name==version'")
    return match.group(1), match.group(2)


def _pip(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
                          capture_output=True, text=True, timeout=timeout)


#: The package index the sdists come from when pip is not told another (``$PIP_INDEX_URL``).
DEFAULT_INDEX = "https://pypi.org/simple"


def index_sdist(name: str, version: str, dest: Path, *, index: str | None = None, timeout: float = 60.0) -> Path | None:
    """Download the ``.tar.gz`` sdist of ``name==version`` straight from the package index's JSON
    listing (PEP 691) into ``dest``, its SHA-256 checked against the listing; ``None`` when the
    index cannot be read or lists no such file (then ``pip download`` is tried). Nothing of the
    sdist runs: ``pip download --no-binary`` builds the metadata, which runs the release's build
    backend on this machine and fails for old releases whose backend no longer builds."""
    import hashlib
    import os
    import urllib.error
    import urllib.parse
    import urllib.request

    base = (index or os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")
    request = urllib.request.Request(f"{base}/{normalise_name(name)}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            listing = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    want = f"{normalise_name(name)}-{normalise_name(version)}"
    files = listing.get("files") if isinstance(listing, dict) else None
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict):
            continue
        filename = str(entry.get("filename", ""))
        if not filename.endswith(".tar.gz") or normalise_name(filename[: -len(".tar.gz")]) != want:
            continue
        url = urllib.parse.urljoin(f"{base}/{normalise_name(name)}/", str(entry.get("url", "")))
        digest = (entry.get("hashes") or {}).get("sha256")
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                data = response.read()
        except (OSError, urllib.error.URLError):
            return None
        if digest is None or hashlib.sha256(data).hexdigest() != digest:
            raise AddProjectError(f"{filename} from {url}: its SHA-256 is not the one the index lists "
                                  f"({digest or 'none listed'})")
        dest.mkdir(parents=True, exist_ok=True)
        path = dest / Path(filename).name
        path.write_bytes(data)
        return path
    return None


def fetch_sdist(requirement: str, dest: Path) -> Path:
    """Download the sdist of ``name==version`` from the package index into ``dest``: straight from
    the index's listing (:func:`index_sdist`), else with ``pip download``."""
    name, version = parse_requirement(requirement, "project")
    dest.mkdir(parents=True, exist_ok=True)
    direct = index_sdist(name, version, dest)
    if direct is not None:
        return direct
    proc = _pip("download", "--no-deps", "--no-binary", ":all:", f"{name}=={version}", "-d", str(dest))
    if proc.returncode != 0:
        raise AddProjectError(f"pip download {name}=={version} failed: {(proc.stdout + proc.stderr).strip()[-600:]}")
    found = [p for p in dest.iterdir() if normalise_name(p.name).startswith(f"{normalise_name(name)}-{normalise_name(version)}")]
    if not found:
        raise AddProjectError(f"pip download {name}=={version} left no sdist in {dest}")
    return found[0]


def _sdist_stem(sdist: Path) -> tuple[str, str]:
    """The project name and version as the sdist's file name spells them."""
    if not sdist.name.endswith(".tar.gz"):
        raise AddProjectError(f"{sdist.name}: only .tar.gz sdists can be bundled (the project set's format)")
    stem = sdist.name[: -len(".tar.gz")]
    name, sep, version = stem.rpartition("-")
    if not sep or not name or not version[:1].isdigit():
        raise AddProjectError(f"{sdist.name}: the file name is not '<name>-<version>.tar.gz'")
    return name, version


def unpack(sdist: Path, dest: Path) -> Path:
    """Unpack the sdist into ``dest``; returns its single top folder."""
    with tarfile.open(sdist, "r:gz") as tar:
        tops = {PurePosixPath(m.name).parts[0] for m in tar.getmembers() if PurePosixPath(m.name).parts}
        if len(tops) != 1:
            raise AddProjectError(f"{sdist.name}: the sdist has no single top folder ({sorted(tops)[:5]})")
        try:
            extract_all(tar, dest)
        except tarfile.TarError as exc:  # a member landing or pointing out of the tree
            raise AddProjectError(f"{sdist.name}: the sdist does not unpack safely: {exc}") from None
    return dest / tops.pop()


def licence_from_text(text: str) -> str | None:
    """The SPDX id of a licence text a project may carry, or None when it is none of them."""
    flat = " ".join(text.split())
    if "Apache License" in flat and "Version 2.0" in flat:
        return "Apache-2.0"
    if "Permission is hereby granted, free of charge" in flat:
        return "MIT"
    if "Redistribution and use in source and binary forms" in flat:
        third = re.search(r"(?i)neither the name|endorse or promote|names? of (its|the) contributors may", flat)
        return "BSD-3-Clause" if third else "BSD-2-Clause"
    if re.search(r"Permission to use, copy, modify, and(/or)? distribute this software for any purpose", flat):
        return "ISC"
    if "PYTHON SOFTWARE FOUNDATION LICENSE" in flat.upper():
        return "PSF-2.0"
    if re.search(r"Mozilla Public License,? (Version|v\.) ?2\.0", flat):
        return "MPL-2.0"
    return None


def licence_from_metadata(top: Path) -> str | None:
    """The SPDX id the sdist's ``PKG-INFO`` declares (``License-Expression`` or a classifier)."""
    info = top / "PKG-INFO"
    if not info.is_file():
        return None
    meta = Parser().parsestr(info.read_text(encoding="utf-8", errors="replace"))
    expression = (meta.get("License-Expression") or "").strip()
    if expression in ALLOWED_LICENCES:
        return expression
    for classifier in meta.get_all("Classifier") or []:
        tail = classifier.rsplit("::", 1)[-1].strip()
        if tail in _CLASSIFIERS:
            return _CLASSIFIERS[tail]
    return None


def detect_layout(top: Path, *, source_dirs: Sequence[str] = (), test_dirs: Sequence[str] = (),
                  python_path: Sequence[str] | None = None, licence: str | None = None) -> Layout:
    """Find the packages, the tests, the licence files and the licence in an unpacked sdist."""
    where = top.name
    licence_files = sorted(p.name for p in top.iterdir() if p.is_file() and _LICENCE_FILE.match(p.name))
    if not licence_files:
        raise AddProjectError(f"{where}: no licence file (LICENSE, LICENCE, COPYING) at the top of the sdist")
    read = {f: (top / f).read_text(encoding="utf-8", errors="replace") for f in licence_files}
    recognised = [f for f in licence_files if licence_from_text(read[f])]
    licence_files = recognised or licence_files  # LICENSE.ABOUT and such beside the licence text stay out
    texts = "\n".join(read[f] for f in licence_files)
    found = licence or licence_from_text(texts) or licence_from_metadata(top)
    if found is None:
        raise AddProjectError(f"{where}: the licence is none that can be recognised; pass --license with its SPDX id "
                              f"if it is one of {', '.join(sorted(ALLOWED_LICENCES))}")
    if found not in ALLOWED_LICENCES:
        raise AddProjectError(f"{where}: licence {found!r} is not one of the licences a project may carry "
                              f"({', '.join(sorted(ALLOWED_LICENCES))}: permissive, or MPL-2.0 whose conditions "
                              "bind each file)")
    src = top / "src"
    if python_path is None:
        python_path = ["src"] if src.is_dir() and any((d / "__init__.py").is_file() or d.is_file() and d.suffix == ".py"
                                                      for d in src.iterdir()) else []
    if not source_dirs:
        base = top / python_path[0] if python_path else top
        source_dirs = [str((base / d.name).relative_to(top)) for d in sorted(base.iterdir())
                       if d.is_dir() and d.name not in NOT_SOURCE and (d / "__init__.py").is_file()]
        if not source_dirs:
            source_dirs = single_module(base, top)
        if not source_dirs:
            raise AddProjectError(f"{where}: no package (a folder with __init__.py) and no single module found; "
                                  "pass --source-dir")
    for d in source_dirs:
        if not ((top / d).is_dir() or d.endswith(".py") and (top / d).is_file()):
            raise AddProjectError(f"{where}: source dir {d!r} is neither a folder nor a .py module of the sdist")
    if not test_dirs:
        test_dirs = [d for d in TEST_FOLDERS if (top / d).is_dir()][:1]
        if not test_dirs:
            test_dirs = [f"{s}/{d}" for s in [*python_path[:1], *source_dirs] for d in TEST_FOLDERS
                         if (top / s / d).is_dir()][:1]
            if test_dirs and any(test_dirs[0].startswith(f"{s}/") for s in source_dirs):  # inside the package
                test_dirs = package_test_folders(top, source_dirs) or test_dirs
        if not test_dirs:  # test modules without a folder: beside a single module, under src/, in the package
            places = [top, *([top / python_path[0]] if python_path else []),
                      *(top / d for d in source_dirs if (top / d).is_dir())]
            test_dirs = next(([str(m.relative_to(top)) for m in found] for found in map(find_test_modules, places) if found),
                             [])
        if not test_dirs:
            raise AddProjectError(f"{where}: the sdist holds no test folder ({', '.join(TEST_FOLDERS)}); projects "
                                  "whose sdist leaves out its tests cannot be bundled (or pass --test-dir)")
    for d in test_dirs:
        if not (top / d).exists():
            raise AddProjectError(f"{where}: test dir {d!r} is not in the sdist")
    return Layout(source_dirs=list(source_dirs), test_dirs=list(test_dirs), python_path=list(python_path),
                  licence_files=licence_files, licence=found, test_style=test_style(top, test_dirs),
                  protected_files=[f for f in CONFIG_FILES if (top / f).is_file()])


def package_test_folders(top: Path, source_dirs: Sequence[str]) -> list[str]:
    """Every test folder inside the packages, subpackages' included (aniso8601 keeps
    ``aniso8601/tests`` and ``aniso8601/builders/tests``): a folder named like one
    (:data:`TEST_FOLDERS`) that is a package or holds test modules, not inside another such folder."""
    found: list[str] = []
    for d in source_dirs:
        if not (top / d).is_dir():
            continue
        for folder in sorted((top / d).rglob("*")):
            rel = str(folder.relative_to(top))
            if (folder.is_dir() and folder.name in TEST_FOLDERS and any(folder.glob("test*.py"))
                    and not any(rel.startswith(f + "/") for f in found)):
                found.append(rel)
    return found


def importable_with(lock: Sequence[tuple[str, str, str]], layout: Layout) -> Callable[[str], bool]:
    """Whether a top-level module can be imported in the test environment: the standard library,
    the lock's distributions (by their module names), the project's own packages."""
    names = {"pytest", "_pytest", *sys.stdlib_module_names}
    names |= {MODULE_OF.get(normalise_name(n), normalise_name(n).replace("-", "_")) for n, _, _ in lock}
    names |= {PurePosixPath(d).name.removesuffix(".py") for d in layout.source_dirs}
    return names.__contains__


def find_test_modules(folder: Path) -> list[Path]:
    """The test modules directly in ``folder``: names unittest's discovery (``test*.py``) or pytest
    (``*_test.py``) would look at -- ``test.py``, ``tests.py``, ``test_six.py``, ``testtimeparse.py``
    -- that define a test (``def test...``)."""
    return [p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix == ".py"
            and (p.name.startswith("test") or p.stem.endswith("_test"))
            and defines_test(p.read_text(encoding="utf-8", errors="replace"))]


def single_module(base: Path, top: Path) -> list[str]:
    """A single-module project's source (``["xmltodict.py"]``): the one top-level module that is not
    packaging, configuration or a test, or the one named after the project when there are several."""
    from termgym.tasks.swesynth.tree import NON_SOURCE_FILES

    modules = [p for p in sorted(base.iterdir()) if p.is_file() and p.suffix == ".py"
               and p.name not in NON_SOURCE_FILES and p.name not in CONFIG_FILES
               and not p.name.startswith(("test_", "tests", "conftest")) and not p.stem.endswith("_test")]
    if len(modules) > 1:
        name = re.sub(r"[-_.]+", "_", re.sub(r"-\d.*$", "", top.name)).lower()
        modules = [p for p in modules if p.stem.lower() == name]
    return [str(p.relative_to(top)) for p in modules] if len(modules) == 1 else []


def _test_files(top: Path, test_dirs: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for d in test_dirs:
        path = top / d
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def test_style(top: Path, test_dirs: Sequence[str]) -> str:
    """``unittest`` (tests are ``TestCase`` methods), ``pytest`` (plain functions/classes) or ``mixed``."""
    unit = plain = 0
    for path in _test_files(top, test_dirs):
        text = path.read_text(encoding="utf-8", errors="replace")
        if not defines_test(text):
            continue
        if re.search(r"TestCase\b", text):
            unit += 1
        else:
            plain += 1
    if unit and unit >= 4 * plain:
        return "unittest"
    if plain and plain >= 4 * unit:
        return "pytest"
    return "mixed" if unit or plain else "pytest"


test_style.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def count_lines(top: Path, source_dirs: Sequence[str], test_dirs: Sequence[str]) -> int:
    """Non-blank lines of the ``*.py`` files of ``source_dirs``, test folders, test files and vendored
    copies of other projects (:data:`~termgym.tasks.swesynth.tree.VENDORED_DIRS`) left out."""
    tests = {(top / d).resolve() for d in test_dirs}
    total = 0
    for d in source_dirs:
        for path in [top / d] if (top / d).is_file() else sorted((top / d).rglob("*.py")):
            resolved = path.resolve()
            if any(resolved == t or t in resolved.parents for t in tests):
                continue
            if path.name.startswith("test_") or any(p in TEST_FOLDERS or p in VENDORED_DIRS
                                                    for p in path.relative_to(top).parts[:-1]):
                continue
            total += sum(1 for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                         if line.strip())
    return total


def resolve_lock(extra: Sequence[str], work: Path, base: Sequence[str] = BASE_LOCK,
                 declared: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """The full lock ``[(name, version, sha256)]`` of pytest, ``extra`` and ``declared``, as wheels for the runtime.

    ``extra`` are pinned (``name==version``, replacing a ``base`` pin of the same name); ``declared``
    are the project's own runtime requirements as it states them (``typing-extensions>=3.10``),
    which pip pins to the newest version that fits, alongside a ``base`` pin of the same name (both
    must hold). pip resolves every transitive dependency for CPython :data:`TARGET_PYTHON` on the
    runtime's platforms, binary wheels only; the digest is the wheel's, which ``--require-hashes`` checks.
    """
    wanted = {normalise_name(parse_requirement(r)[0]): r for r in base}
    for requirement in extra:
        wanted[normalise_name(parse_requirement(requirement, "test requirement")[0])] = requirement
    pinned = {normalise_name(parse_requirement(r)[0]) for r in extra}
    loose = [r for r in declared if requirement_name(r) not in pinned]
    wheels = work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = ["download", "--only-binary", ":all:", "--python-version", TARGET_PYTHON, "--implementation", "cp",
           "--abi", "cp" + TARGET_PYTHON.replace(".", ""), "-d", str(wheels)]
    for platform in TARGET_PLATFORMS:
        cmd += ["--platform", platform]
    proc = _pip(*cmd, *wanted.values(), *loose)
    if proc.returncode != 0:
        hint = (f"; the project declares {', '.join(loose)}: pin one with --dep NAME==VERSION or leave it out "
                "with --no-dep NAME" if loose else "")
        raise AddProjectError("resolving the test lock failed (every test requirement must exist as a wheel for "
                              f"CPython {TARGET_PYTHON}){hint}: {(proc.stdout + proc.stderr).strip()[-800:]}")
    lock: dict[str, tuple[str, str, str]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        name = name.replace("_", "-")
        lock[normalise_name(name)] = (name, version, file_sha256(wheel))
    if "pytest" not in lock:
        raise AddProjectError("the resolved lock holds no pytest")
    return [lock["pytest"], *sorted(v for k, v in lock.items() if k != "pytest")]


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _toml_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_toml_string(v) for v in values) + "]"


def test_command(layout_test_dirs: Sequence[str], deselect: Sequence[tuple[str, str]], pytest_args: str = "",
                 ini: Sequence[str] = ()) -> str:
    """The command run from the tree's root: pytest, each ``ini`` override (``-o python_files=...``),
    the extra arguments (after the overrides, so a user's ``-o`` wins), each left-out test, the test dirs."""
    parts = ["python3 -m pytest -q -p no:cacheprovider", *(f"-o {shlex.quote(item)}" for item in ini)]
    if pytest_args.strip():
        parts.append(pytest_args.strip())
    for test, _ in deselect:
        if "::" in test:
            if any(c in test for c in " '\""):
                raise AddProjectError(f"deselected test {test!r}: ids with spaces or quotes cannot be left out "
                                      "by --deselect; leave out its file or pass -k through --pytest-args")
            parts.append(shlex.quote(f"--deselect={test}"))  # natsort's ids hold '<lambda>': a redirect unquoted
        else:
            parts.append(f"--ignore={test}")
    return " ".join([*parts, *layout_test_dirs])


test_command.__test__ = False  # type: ignore[attr-defined]


def write_manifest(folder: Path, *, name: str, version: str, sdist: Path, layout: Layout, domain: str,
                   description: str, command: str, lock: Sequence[tuple[str, str, str]],
                   deselect: Sequence[tuple[str, str]], measured: dict[str, float | int] | None = None,
                   declared: Sequence[str] = (), notes: Sequence[str] = (), flaky_probe: str = "") -> Path:
    """Write ``project.toml`` in the project set's format (measured fields when given; ``flaky_probe``
    says what the flaky-test probe ran, beside them).

    ``declared`` (the project's own runtime requirements, pinned in the lock) and ``notes`` (what was
    changed so that the lock runs its suite) are kept for the next reader: the project loads them as
    ``extra``."""
    lines = [
        f"name = {_toml_string(name)}",
        f"version = {_toml_string(version)}",
        f"sdist = {_toml_string(sdist.name)}",
        f"sha256 = {_toml_string(file_sha256(sdist))}",
        f"license = {_toml_string(layout.licence)}",
        f"license_files = {_toml_list(layout.licence_files)}",
        f"domain = {_toml_string(domain)}",
        f"description = {_toml_string(description)}",
        f"source_dirs = {_toml_list(layout.source_dirs)}",
        f"test_dirs = {_toml_list(layout.test_dirs)}",
        f"python_path = {_toml_list(layout.python_path)}",
        f"test_command = {_toml_string(command)}",
        f"protected_files = {_toml_list(layout.protected_files)}",
        f"test_style = {_toml_string(layout.test_style)}",
    ]
    if declared or notes:
        lines += ["# What add-project read from the sdist: its declared runtime dependencies (pinned in the lock",
                  "# below) and what it changed so that the lock runs the suite the way its maintainers do."]
        lines += [f"declared_dependencies = {_toml_list(declared)}"] * bool(declared)
        lines += [f"add_project_notes = {_toml_list(notes)}"] * bool(notes)
    if measured:
        lines += [f"# Measured by add-project on {time.strftime('%Y-%m-%d', time.gmtime())} (run_clean_suite, local "
                  "sandbox, under the grader):",
                  f"lines = {measured['lines']}", f"tests = {measured['tests']}",
                  f"suite_seconds = {measured['suite_seconds']}"]
        lines += [f"flaky_probe = {_toml_string(flaky_probe)}"] * bool(flaky_probe)
    lines += ["# The full lock of the test environment (installed with --no-deps --require-hashes),",
              "# the pytest this project's suite runs under included.", "test_requirements = ["]
    lines += [f"    {_toml_string(f'{n}=={v}')}," for n, v, _ in lock]
    lines += ["]", "", "[test_hashes]"]
    lines += [f"{_toml_string(n)} = {_toml_string(h)}" for n, _, h in lock]
    for test, reason in deselect:
        lines += ["", "[[deselect]]", f"test = {_toml_string(test)}", f"reason = {_toml_string(reason)}"]
    path = folder / "project.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def failures_of(run: CleanRun) -> dict[str, str]:
    """``test id -> message`` of every test of a clean run that neither passed nor was skipped."""
    messages = summary_messages(run.log_tail)
    bad = {t: messages.get(t, o) for t, o in run.outcomes.items() if o not in ("passed", "skipped")}
    if not bad and not run.ok:
        bad["(the run)"] = ("; ".join(run.tamper) or f"pytest exit {run.exit_code}") + "\n" + run.log_tail[-1500:]
    return bad


def proposed_deselects(run: CleanRun, failures: dict[str, str]) -> list[tuple[str, str]]:
    """What to leave out so that a clean suite can pass: ``(test or file, reason)`` for each failure
    of ``run`` (:func:`failures_of`), a whole file where every test of it that ran failed, each with
    the failure that makes it so. Empty when the run itself failed (nothing to name per test)."""
    if not failures or "(the run)" in failures:
        return []
    by_file: dict[str, list[str]] = {}
    for test in run.outcomes:
        by_file.setdefault(test.split("::", 1)[0], []).append(test)
    out: list[tuple[str, str]] = []
    for path, tests in sorted(by_file.items()):
        failed = [t for t in tests if t in failures]
        if not failed:
            continue
        if len(failed) == len(tests) and len(tests) > 1:
            first = " ".join(failures[failed[0]].split())[:160]
            out.append((path, f"all {len(tests)} tests fail on the clean tree in the sandbox (first: {first})"))
        else:
            out += [(t, f"fails on the clean tree in the sandbox: {' '.join(failures[t].split())[:160]}")
                    for t in failed]
    return out


def parse_deselect(items: Sequence[str]) -> list[tuple[str, str]]:
    """``TEST=REASON`` strings -> pairs; a reason is required and must say something."""
    out = []
    for item in items:
        test, sep, reason = item.partition("=")
        if not sep or not test.strip() or len(reason.strip()) < 10:
            raise AddProjectError(f"--deselect {item!r}: write it as TEST=REASON with a reason of ten characters "
                                  "or more (why the test cannot run in a sandbox offline)")
        out.append((test.strip(), reason.strip()))
    return out


def probe_lock_pytest(project: Project, plugins: Sequence[str] = (), *, backend: str = "local",
                      timeout: float = 120.0) -> LockPytest:
    """What the project's provisioned pytest knows: :data:`~.project_config.PROBE_PLUGIN` run in a
    sandbox holding the clean tree and the test environment, as the suite will run.

    The project's ``addopts`` and ``required_plugins`` are turned off for the probe (they are what is
    being judged). When its conftest files cannot even be loaded, the probe runs again outside the
    tree (pytest's options and the lock's plugins only) so that the clean run shows the real error.
    """
    from termgym.sandbox import make_sandbox
    from termgym.sandbox.base import SandboxSpec

    parts = project_sandbox_spec_parts(project)
    spec = SandboxSpec(workdir="/app", copy_dirs={str(project_tree(project)): "/app"}, env=dict(parts.env),
                       ro_binds=dict(parts.ro_binds))
    probe_dir, out = "/tmp/tg-probe", "/tmp/tg-probe/options.json"
    env = (f"env -u PYTEST_ADDOPTS -u PYTEST_PLUGINS PYTHONDONTWRITEBYTECODE=1 "
           f"PYTHONPATH={shlex.quote(':'.join([probe_dir, *parts.python_path]))} TG_PROBE_OUT={out} "
           f"TG_PROBE_PLUGINS={shlex.quote(' '.join(plugins))}")
    pytest = "python3 -m pytest -p no:cacheprovider -o addopts= -o required_plugins= -p tg_probe"
    box = make_sandbox(backend, spec)
    try:
        box.start()
        box.write_file(f"{probe_dir}/tg_probe.py", PROBE_PLUGIN)
        result = None
        for where, args in (("/app", " ".join(shlex.quote(d) for d in project.test_dirs)), (probe_dir, "")):
            result = box.exec(f"rm -f {out}; cd {where} && {env} {pytest} {args}", timeout=timeout)
            try:
                return parse_probe(box.read_file(out).decode("utf-8", "replace"))
            except (FileNotFoundError, OSError, ReadingError):
                continue
        raise AddProjectError(f"{project.name}: the test lock's pytest could not be asked which options it knows "
                              f"(exit {result.exit_code if result else '?'}): "
                              f"{(result.output if result else '').strip()[-800:]}")
    finally:
        box.close()


def add_project(requirement: str | None = None, *, sdist: str | Path | None = None, domain: str, description: str,
                deps: Sequence[str] = (), no_deps: Sequence[str] = (), deselect: Sequence[tuple[str, str]] = (),
                pytest_args: str = "", source_dirs: Sequence[str] = (), test_dirs: Sequence[str] = (),
                python_path: Sequence[str] | None = None, licence: str | None = None, root: str | Path | None = None,
                replace: bool = False, timeout: float = 600.0, deselect_failing: bool = False,
                flaky_probe: bool = True, probe_busy: int | None = None,
                log: Callable[[str], None] = print) -> AddResult:
    """Make, provision and check a project folder; move it into ``root`` when its clean suite passes.

    ``requirement`` (``name==version``) is downloaded from the package index, or ``sdist`` (a local
    ``.tar.gz``) is used as is. The project's declared runtime dependencies join the lock (``deps``
    pins one instead, ``no_deps`` names those left out); its pytest configuration is adapted to the
    lock. See the module docstring for each step. Raises :class:`AddProjectError` for what cannot be
    bundled (licence, layout, lock, an existing folder).

    A clean suite that fails names what to leave out (:func:`proposed_deselects`, in the result's
    ``proposed``); ``deselect_failing`` takes that proposal (each test or file with its failure as the
    reason) and runs the suite once more.

    A suite that passes meets the flaky-test probe (:func:`.flaky.probe`, ``probe_busy`` busy
    processes for its load phase, default one more than the cores) unless ``flaky_probe`` is false:
    each test it reports is left out with its reason (``flaky: ...``, logged), and the suite runs
    once more without them. With the probe on, a clean run that fails at most
    :data:`MAX_RECHECKED` tests first has them run again alone: those that pass there are left out
    the same way. The result's ``probe`` holds what the probe ran and found, its ``flaky`` every
    test left out as flaky.
    """
    deselect = list(deselect)
    if (requirement is None) == (sdist is None):
        raise AddProjectError("give either a pinned requirement (name==version) or --sdist FILE, not both")
    if not domain.strip() or not description.strip():
        raise AddProjectError("a project needs a --domain and a --description (they go into the docs' tables)")
    root = Path(root) if root is not None else PROJECTS_DIR
    work = Path(tempfile.mkdtemp(prefix="termgym-add-project-"))
    try:
        if sdist is None:
            sdist_path = fetch_sdist(str(requirement), work / "sdist")
        else:
            sdist_path = Path(sdist)
            if not sdist_path.is_file():
                raise AddProjectError(f"--sdist {sdist_path}: no such file")
        name, version = _sdist_stem(sdist_path)
        if requirement is not None and normalise_name(parse_requirement(requirement)[0]) != normalise_name(name):
            raise AddProjectError(f"{requirement}: pip returned {sdist_path.name}, another project")
        target = root / name
        if target.exists() and not replace:
            raise AddProjectError(f"{target} exists already (pass --replace to make it again)")
        top = unpack(sdist_path, work / "tree")
        layout = detect_layout(top, source_dirs=source_dirs, test_dirs=test_dirs, python_path=python_path,
                               licence=licence)
        log(f"{name} {version}: {layout.licence}, source {layout.source_dirs}, tests {layout.test_dirs} "
            f"({layout.test_style}), python_path {layout.python_path}")
        try:
            declared = _declared_for_lock(name, top, layout.test_dirs, no_deps, log)
            config = read_pytest_config(top, layout.test_dirs)
            ini, notes = python_files_overrides(top, layout.test_dirs, config)
        except ReadingError as exc:
            raise AddProjectError(f"{name}: {exc}") from None
        lock = resolve_lock(deps, work, declared=declared)
        log(f"{name}: test lock {', '.join(f'{n}=={v}' for n, v, _ in lock)}")
        more_ini, more_notes = filterwarnings_overrides(config, importable_with(lock, layout))
        ini, notes = ini + more_ini, notes + more_notes
        itself = [f"{n}=={v}" for n, v, _ in lock if normalise_name(n) == normalise_name(name)]
        if itself:
            raise AddProjectError(f"{name}: the test lock installs the project itself ({itself[0]}, a dependency of "
                                  "pytest, of a --dep or of a declared dependency): its tests would import that copy, not the tree under repair")
        stage = work / "stage" / name
        stage.mkdir(parents=True)
        shutil.copy2(sdist_path, stage / sdist_path.name)
        for f in layout.licence_files:
            shutil.copy2(top / f, stage / f)

        def write(measured: dict[str, float | int] | None = None, probed: str = "") -> Project:
            write_manifest(stage, name=name, version=version, sdist=stage / sdist_path.name, layout=layout,
                           domain=domain, description=description,
                           command=test_command(layout.test_dirs, deselect, pytest_args, ini), lock=lock,
                           deselect=deselect, measured=measured, declared=declared, notes=notes,
                           flaky_probe=probed)
            try:
                return load_project(stage)
            except ProjectError as exc:
                raise AddProjectError(str(exc)) from None

        project = write()
        started = time.monotonic()
        provision([project], log=log)
        provision_seconds = time.monotonic() - started
        if config is not None and (config.addopts or config.required_plugins):
            more_ini, more_notes = addopts_overrides(config, probe_lock_pytest(project, plugin_names(config.addopts)))
            ini, notes = more_ini + ini, more_notes + notes
            project = write()
        for note in notes:
            log(f"{name}: {note}")
        run = run_clean_suite(project, timeout=timeout)
        failures = failures_of(run)
        counts = ", ".join(f"{v} {k}" for k, v in sorted(run.counts.items()))
        log(f"{name}: clean suite under the grader in {run.seconds:.1f}s: {counts or 'nothing collected'}; "
            f"pytest exit {run.exit_code}")
        flaky: list[tuple[str, str]] = []
        if not run.ok and flaky_probe and 0 < len(failures) <= MAX_RECHECKED and "(the run)" not in failures:
            flaky, run = _recheck_failures(project, run, deselect, write, timeout=timeout, log=log)
            project = load_project(stage)
            failures = failures_of(run)
        proposed = proposed_deselects(run, failures)
        if not run.ok and deselect_failing and proposed:
            for test, reason in proposed:
                log(f"{name}: left out (--deselect-failing): {test}: {reason}")
            deselect += proposed
            project = write()
            run = run_clean_suite(project, timeout=timeout)
            failures = failures_of(run)
            proposed = proposed_deselects(run, failures)
            counts = ", ".join(f"{v} {k}" for k, v in sorted(run.counts.items()))
            log(f"{name}: clean suite again in {run.seconds:.1f}s: {counts or 'nothing collected'}; "
                f"pytest exit {run.exit_code}")
        report = None
        if run.ok and flaky_probe:
            report, run = _leave_out_flaky(project, run, deselect, write, busy=probe_busy, timeout=timeout, log=log)
            flaky += report.deselect()
            project = load_project(stage)
            failures = failures_of(run)
            proposed = proposed_deselects(run, failures)
        elif run.ok:
            log(f"{name}: flaky-test probe skipped (--no-flaky-probe): tests whose outcome depends on load or "
                "order may reach the required sets of tasks made from this project")
        if not run.ok:
            kept = work.parent / f"termgym-add-project-{name}-{version}"
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(stage, kept)
            return AddResult(project=project, run=run, ok=False, failures=failures, folder=kept,
                             provision_seconds=provision_seconds, proposed=proposed, probe=report, flaky=flaky)
        write({"lines": count_lines(project_tree(project), layout.source_dirs, layout.test_dirs),
               "tests": sum(1 for o in run.outcomes.values() if o == "passed"),
               "suite_seconds": round(run.seconds, 2)},
              probed=report.summary() if report else "skipped (--no-flaky-probe)")
        if target.exists():
            shutil.rmtree(target)
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(stage, target)
        return AddResult(project=load_project(target), run=run, ok=True, failures={}, folder=target,
                         provision_seconds=provision_seconds, probe=report, flaky=flaky)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _recheck_failures(project: Project, run: CleanRun, deselect: list[tuple[str, str]],
                      write: Callable[[], Project], *, timeout: float,
                      log: Callable[[str], None]) -> tuple[list[tuple[str, str]], CleanRun]:
    """Run the failing tests of a clean run again (:func:`.flaky.recheck_failures`); leave out those
    that pass there as flaky, and run the suite once more without them when there are any."""
    from termgym.factory.swesynth.screen import ProjectEnv

    found = recheck_failures(project_tree(project), project.test_command, ProjectEnv.for_project(project),
                             ProbeRun.from_clean_run(run), timeout=max(60.0, 5 * run.seconds))
    if not found:
        return [], run
    taken = [(f.test, f"flaky: {f.reason}") for f in found]
    return taken, _run_without(project, taken, deselect, write, timeout=timeout, log=log)


def _run_without(project: Project, taken: list[tuple[str, str]], deselect: list[tuple[str, str]],
                 write: Callable[[], Project], *, timeout: float, log: Callable[[str], None]) -> CleanRun:
    """Leave the flaky tests ``taken`` out (``deselect`` grows, the manifest is written again) and run the
    clean suite once more without them."""
    name = project.name
    for test, reason in taken:
        log(f"{name}: left out as flaky: {test}: {reason}")
    deselect += taken
    write()
    again = run_clean_suite(load_project(project.folder), timeout=timeout)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(again.counts.items()))
    log(f"{name}: clean suite without the flaky tests in {again.seconds:.1f}s: {counts or 'nothing collected'}; "
        f"pytest exit {again.exit_code}")
    return again


def _leave_out_flaky(project: Project, run: CleanRun, deselect: list[tuple[str, str]],
                     write: Callable[[], Project], *, busy: int | None, timeout: float,
                     log: Callable[[str], None]) -> tuple[FlakyReport, CleanRun]:
    """Probe a passing clean suite for flaky tests; leave each out (``deselect`` grows, the manifest
    is written again) and run the suite once more without them. Returns the report and the last run."""
    from termgym.factory.swesynth.screen import ProjectEnv

    name = project.name
    log(f"{name}: probing for flaky tests (the suite under CPU load and in reverse order, its timing tests "
        "again under load; --no-flaky-probe skips this)")
    report = probe(project_tree(project), project.test_command, ProjectEnv.for_project(project),
                   first=ProbeRun.from_clean_run(run), busy=busy, log=lambda line: log(f"{name}: probe: {line}"))
    for note in report.notes:
        log(f"{name}: probe: {note}")
    if not report.flaky:
        log(f"{name}: no flaky test found ({report.summary()})")
        return report, run
    return report, _run_without(project, report.deselect(), deselect, write, timeout=timeout, log=log)


def _declared_for_lock(name: str, top: Path, test_dirs: Sequence[str], no_deps: Sequence[str],
                       log: Callable[[str], None]) -> list[str]:
    """The project's declared runtime requirements, and the declared test requirements its tests import,
    that go into its lock (``no_deps`` left out)."""
    declared = declared_dependencies(top)
    tests = declared_test_dependencies(top, [*_test_files(top, test_dirs), *sorted(top.rglob("conftest.py"))],
                              runtime=declared.requirements)
    skip = {normalise_name(n) for n in no_deps}
    every = declared.requirements + tests.requirements
    unknown = sorted(skip - {requirement_name(r) for r in every})
    if unknown:
        raise AddProjectError(f"{name}: --no-dep {', '.join(unknown)}: the project declares no such dependency "
                              f"(it declares {', '.join(every) or 'none'})")
    for line in declared.left_out + tests.left_out:
        log(f"{name}: declared dependency left out: {line}")
    kept = [r for r in every if requirement_name(r) not in skip]
    if declared.requirements:
        log(f"{name}: declared runtime dependencies ({declared.source}): {', '.join(declared.requirements)}")
    if tests.requirements:
        log(f"{name}: declared test dependencies its tests import ({tests.source}): {', '.join(tests.requirements)}")
    if skip:
        log(f"{name}: left out by --no-dep: {', '.join(sorted(skip))}")
    return kept


__all__ = ["BASE_LOCK", "AddProjectError", "AddResult", "Layout", "add_project", "count_lines", "detect_layout",
           "failures_of", "fetch_sdist", "proposed_deselects", "licence_from_metadata", "licence_from_text", "parse_deselect",
           "parse_requirement", "probe_lock_pytest", "resolve_lock", "test_command", "test_style", "unpack",
           "write_manifest"]
