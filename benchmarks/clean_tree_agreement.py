"""Clean-tree agreement: does termgym's grader report what raw pytest reports, on projects it never saw?

For each PyPI project of :data:`PROJECTS` (none of them bundled; several with plain
``unittest.TestCase`` suites, several whose own code uses frames or ``inspect``):

1. download its pinned sdist (``pip download --no-deps --no-binary :all:``) and unpack it;
2. provision its test dependencies (wheels for the runtime's Python, ``pip install --target``) into
   a directory the sandbox mounts read-only, like a bundled project's test environment;
3. run the suite **raw** in a fresh sandbox of the task runtime (``python3 -m pytest -rA``, a
   writable tree, no termgym plugin) and read each test's outcome from pytest's own summary;
4. run it through the **grader** (:func:`~termgym.tasks.swesynth.grading.run_graded_tests`: the
   plugin, the HMAC chain, the read-only tree) in another fresh sandbox, and, for comparison, through
   the grader plugin as it was before issue 25 (``--old-plugin REV``, read from git);
5. compare per test: the required set is every test raw pytest passed; the grader agrees when it
   reports exactly those as passed, with no tamper flag.

Results go to a JSON file and a Markdown table::

    python -m benchmarks.clean_tree_agreement                      # every project, old plugin from 6602a88
    python -m benchmarks.clean_tree_agreement --project idna --project six --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from termgym.archives import extract_all

#: Where the test environment appears in the sandbox (read-only).
ENV_MOUNT = "/opt/agreement-testenv"
#: The grader plugin before issue 25 (the in-process monitor with its denials and integrity checks).
OLD_PLUGIN_REV = "6602a88"


@dataclass(frozen=True)
class PyPIProject:
    """A project checked here: its pinned sdist, extra test dependencies and how to run its tests."""

    name: str
    version: str
    style: str  # "unittest" (TestCase classes), "pytest", or "mixed"
    uses: str = ""  # what of the interpreter's internals the project's own code uses (frames, inspect)
    deps: tuple[str, ...] = ()
    args: str = ""  # pytest arguments (paths, --ignore ...)
    python_path: tuple[str, ...] = ()  # relative to the tree (``src``)
    source_dirs: tuple[str, ...] = ()


#: Small, permissively licensed, offline-testable projects with fast suites, none of them bundled.
PROJECTS: tuple[PyPIProject, ...] = (
    PyPIProject("six", "1.16.0", "pytest", "sys._getframe (exec_)", args="test_six.py"),
    PyPIProject("idna", "3.7", "unittest", args="tests"),
    PyPIProject("more-itertools", "10.2.0", "unittest", "inspect", args="tests"),
    PyPIProject("cachetools", "5.3.3", "unittest", args="tests", python_path=("src",)),
    PyPIProject("pathspec", "0.12.1", "unittest", args="tests"),
    PyPIProject("decorator", "5.1.1", "unittest", "inspect (signatures, code objects)", args="src/tests/test.py",
                python_path=("src",)),
    PyPIProject("typing_extensions", "4.11.0", "unittest", "sys._getframe", args="src/test_typing_extensions.py",
                python_path=("src",)),
    PyPIProject("jsonpointer", "2.4", "unittest", args="tests.py"),
    PyPIProject("pycparser", "2.22", "unittest", args="tests"),
    PyPIProject("pyflakes", "3.2.0", "unittest", "ast, sys._getframe in tests", args="pyflakes/test"),
    PyPIProject("inflection", "0.5.1", "pytest", args="test_inflection.py"),
    PyPIProject("wcwidth", "0.2.13", "pytest", args="tests -o addopts=\"\""),
    PyPIProject("addict", "2.4.0", "unittest", args="test_addict.py"),
    PyPIProject("parameterized", "0.9.0", "unittest", "inspect.stack, frames", args="parameterized/test.py",
                deps=("mock==5.1.0",)),
    PyPIProject("pyasn1", "0.6.0", "unittest", args="tests"),
    PyPIProject("xmltodict", "0.13.0", "unittest", args="tests"),
    PyPIProject("jmespath", "1.0.1", "unittest", args="tests"),
    PyPIProject("boltons", "24.0.0", "pytest", "sys._getframe, inspect (funcutils, tbutils)", args="tests"),
    PyPIProject("markupsafe", "2.1.5", "pytest", args="tests", python_path=("src",)),
    PyPIProject("schema", "0.7.5", "pytest", "inspect", args="test_schema.py"),
    PyPIProject("mock", "5.1.0", "unittest", "inspect, frames", args="mock/tests"),
    PyPIProject("simplejson", "3.19.2", "unittest", args="simplejson/tests"),
    # Refused by the grader before issue 25 (docs/swesynth.md, "How the projects were chosen"):
    PyPIProject("jinja2", "3.1.3", "pytest", "compile(), frames (debug)", args="tests", python_path=("src",),
                deps=("markupsafe==2.1.5",)),
    PyPIProject("pydash", "7.0.7", "pytest", "inspect, compile()", args="tests -o addopts=\"\"", python_path=("src",),
                deps=("typing_extensions==4.11.0",)),
    PyPIProject("semver", "3.0.2", "pytest", "sys._getframe, inspect", args="tests -o addopts=\"\"", python_path=("src",)),
    PyPIProject("glom", "23.5.0", "pytest", "sys._getframe (via boltons)", args="glom/test",
                deps=("boltons==24.0.0", "face==22.0.0", "attrs==23.2.0")),
    PyPIProject("rfc3986", "2.0.0", "pytest", args="tests", python_path=("src",)),
    PyPIProject("tinycss2", "1.2.1", "pytest", args="tests", deps=("webencodings==0.5.1",)),
    PyPIProject("funcy", "2.0", "pytest", "inspect", args="tests", deps=("whatever==0.7",)),
    PyPIProject("colorama", "0.4.6", "unittest", args="colorama/tests"),
    PyPIProject("mistune", "3.0.2", "unittest", args="tests", python_path=("src",)),
    PyPIProject("icecream", "2.1.3", "unittest", "frames (executing)", args="tests",
                deps=("executing==2.0.1", "asttokens==2.4.1", "colorama==0.4.6", "pygments==2.17.2", "six==1.16.0")),
)


def cache_dir() -> Path:
    base = os.environ.get("TERMGYM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "termgym")
    return Path(base) / "agreement"


def fetch_tree(project: PyPIProject, root: Path) -> Path:
    """The project's unpacked sdist (downloaded once into ``root``)."""
    tree = root / "trees" / f"{project.name}-{project.version}"
    if (tree / ".unpacked").is_file():
        return tree
    sdists = root / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    spec = f"{project.name}=={project.version}"
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                           "--no-binary", ":all:", spec, "-d", str(sdists)], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download {spec} failed: {proc.stderr.strip()[-300:]}")
    stem = re.sub(r"[-_.]+", "[-_.]", project.name)
    sdist = next((p for p in sdists.iterdir() if re.match(rf"(?i){stem}-{re.escape(project.version)}\.(tar\.gz|zip)$",
                                                          p.name)), None)
    if sdist is None:
        raise RuntimeError(f"pip download {spec} left no sdist in {sdists}")
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        with tarfile.open(sdist) as tar:
            extract_all(tar, tmp)
        top = next(p for p in Path(tmp).iterdir() if p.is_dir())
        tree.parent.mkdir(parents=True, exist_ok=True)
        top.rename(tree)
    for egg in tree.rglob("*.egg-info"):
        subprocess.run(["rm", "-rf", str(egg)], check=True)
    (tree / ".unpacked").write_text(spec + "\n")
    return tree


def provision_env(project: PyPIProject, root: Path) -> Path | None:
    """A read-only directory of the project's test dependencies for the runtime's Python, or ``None``."""
    if not project.deps:
        return None
    env = root / "envs" / f"{project.name}-{project.version}"
    if (env / ".provisioned").is_file():
        return env
    tmp = Path(tempfile.mkdtemp(dir=root))
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps",
           "--only-binary", ":all:", "--target", str(tmp / "env"), "--python-version", "3.11", "--implementation",
           "cp", "--abi", "cp311", "--platform", "manylinux2014_x86_64", *project.deps]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"installing {project.deps} failed: {(proc.stdout + proc.stderr).strip()[-500:]}")
    env.parent.mkdir(parents=True, exist_ok=True)
    (tmp / "env").rename(env)
    os.rmdir(tmp)
    subprocess.run(["rm", "-rf", str(env / "bin")], check=True)
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(env)], check=True)
    (env / ".provisioned").write_text("\n".join(project.deps) + "\n")
    return env


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (.+)$")


def parse_summary(log: str, known_ids: Sequence[str] = ()) -> dict[str, str]:
    """Per-test outcomes from pytest's ``-rA`` short summary (skips carry no node id there).

    A ``PASSED`` line is the node id alone (ids may hold spaces); the other kinds may add
    `` - message``, so their id is the longest of ``known_ids`` the rest starts with (else the text
    before the first `` - ``)."""
    by_length = sorted(known_ids, key=len, reverse=True)
    outcomes: dict[str, str] = {}
    in_summary = False
    for line in log.splitlines():
        if "short test summary info" in line:
            in_summary = True
            continue
        if not in_summary:
            continue
        m = _SUMMARY.match(line)
        if not m:
            continue
        kind, rest = m.groups()
        if kind == "PASSED":
            nodeid = rest.rstrip()
        else:
            nodeid = next((k for k in by_length if rest == k or rest.startswith(k + " ")), rest.split(" - ")[0])
        outcome = {"PASSED": "passed", "XPASS": "passed", "XFAIL": "skipped"}.get(kind, "failed")
        if outcomes.get(nodeid) != "failed":  # a teardown error after a pass
            outcomes[nodeid] = outcome
    return outcomes


@dataclass
class Comparison:
    """One project's raw run against the grader's (and the old plugin's)."""

    project: str
    version: str
    style: str
    uses: str
    collected: int = 0
    raw_passed: int = 0
    raw_seconds: float = 0.0
    grader_passed_of_required: int = 0
    grader_seconds: float = 0.0
    disagreements: list[str] = field(default_factory=list)  # on the required set (what decides a grade)
    other_differences: list[str] = field(default_factory=list)  # tests raw pytest did not pass
    tamper: list[str] = field(default_factory=list)
    old_passed_of_required: int | None = None
    old_tamper: list[str] = field(default_factory=list)
    old_seconds: float | None = None
    error: str = ""

    @property
    def agrees(self) -> bool:
        return not self.error and self.raw_passed > 0 and not self.disagreements and not self.tamper


def _spec(tree: Path, env: Path | None, python_path: list[str]):
    from termgym.sandbox.base import Limits, SandboxSpec

    ro = {str(env): ENV_MOUNT} if env else {}
    return SandboxSpec(workdir="/app", copy_dirs={str(tree): "/app"}, ro_binds=ro,
                       env={"PYTHONPATH": ":".join(python_path)} if python_path else {},
                       limits=Limits(command_timeout=900.0))


class _OldKeyfile:
    """A sandbox that gets the pre-issue-25 grader plugin instead of the current one, with the key file
    that plugin reads (the current grader writes both; nothing global is swapped, so grades in other
    threads are untouched)."""

    def __init__(self, box, plugin_source: Path, workdir: str, source_dirs: list[str], trusted: list[str]) -> None:
        self._box, self._plugin = box, plugin_source.read_bytes()
        self._extra = {"workdir": workdir, "source_dirs": source_dirs, "trusted_dirs": trusted}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._box, name)

    def write_file(self, path: str, data, mode: int = 0o644):
        name = PurePosixPath(path).name
        if "/.tg-k-" in path:
            config = json.loads(data)
            grader_dir = "/tmp/.tg-" + path.split("/.tg-k-", 1)[1].split("/", 1)[0]
            config.update(self._extra, protected=[grader_dir, str(PurePosixPath(path).parent)])
            data = json.dumps(config)
        elif path.startswith("/tmp/.tg-") and name.startswith("tg_") and name.endswith("_pins.py"):
            data = b"# the pre-issue-25 grader pinned nothing\n"  # its plugin would police this one's code
        elif path.startswith("/tmp/.tg-") and name.startswith("tg_") and name.endswith(".py"):
            data = self._plugin
        return self._box.write_file(path, data, mode=mode)


def graded(tree: Path, env: Path | None, python_path: list[str], source_dirs: list[str], command: str,
           timeout: float, plugin_source: Path | None = None):
    """One grader run of ``command`` on ``tree`` in a fresh sandbox (``plugin_source``: another plugin)."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth import grading

    trusted = [ENV_MOUNT] if env else []
    with FreshSandboxes("local") as new_sandbox:
        box = new_sandbox(_spec(tree, env, python_path))
        if plugin_source is not None:
            box = _OldKeyfile(box, plugin_source, "/app", source_dirs, trusted)
        started = time.monotonic()
        run = grading.run_graded_tests(box, command, "/app", source_dirs, timeout, python_path=python_path,
                                       trusted_dirs=trusted)
        return run, time.monotonic() - started


def compare(project: PyPIProject, root: Path, *, old_plugin: Path | None = None, timeout: float = 300.0) -> Comparison:
    """Raw pytest against the grader on the project's clean tree (see the module docstring)."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.grading import default_source_dirs

    result = Comparison(project.name, project.version, project.style, project.uses)
    try:
        tree = fetch_tree(project, root)
        env = provision_env(project, root)
    except Exception as exc:  # reported per project
        result.error = f"{type(exc).__name__}: {exc}"[:400]
        return result
    python_path = [f"/app/{p}" for p in project.python_path] + ([ENV_MOUNT] if env else [])
    source_dirs = list(project.source_dirs) or default_source_dirs(tree) or list(project.python_path)
    command = f"python3 -m pytest {project.args}".strip()
    with FreshSandboxes("local") as new_sandbox:
        box = new_sandbox(_spec(tree, env, python_path))
        started = time.monotonic()
        box.exec(f"cd /app && {command} -p no:cacheprovider -rA --color=no -o console_output_style=classic "
                 f"> /tmp/raw.log 2>&1", timeout=timeout)
        result.raw_seconds = round(time.monotonic() - started, 2)
        log = box.read_file("/tmp/raw.log").decode("utf-8", "replace")
    if "short test summary info" not in log or " PASSED" not in log and "\nPASSED" not in log:
        result.error = "raw pytest passed no test: " + " | ".join(log.strip().splitlines()[-4:])[-400:]
        return result
    run, seconds = graded(tree, env, python_path, source_dirs, command, timeout)
    raw = parse_summary(log, run.collected)
    required = sorted(t for t, o in raw.items() if o == "passed")
    result.raw_passed = len(required)
    result.grader_seconds = round(seconds, 2)
    result.collected = len(run.collected)
    result.tamper = list(run.tamper)[:5]
    result.grader_passed_of_required = sum(run.outcomes.get(t) == "passed" for t in required)
    for tid in required:
        if run.outcomes.get(tid) != "passed":
            result.disagreements.append(f"{tid}: raw passed, grader {run.outcomes.get(tid, 'missing')}")
    for tid, outcome in run.outcomes.items():
        if outcome == "passed" and raw.get(tid, "skipped") != "passed":
            result.other_differences.append(f"{tid}: raw {raw.get(tid, 'skipped/absent')}, grader passed")
    if not run.ran and not run.tamper:
        result.disagreements.append(f"the graded session did not finish (exit {run.exit_code}): {run.log_tail[-300:]}")
    if old_plugin is not None:
        old, old_seconds = graded(tree, env, python_path, source_dirs, command, timeout, plugin_source=old_plugin)
        result.old_seconds = round(old_seconds, 2)
        result.old_tamper = list(old.tamper)[:3]
        result.old_passed_of_required = 0 if old.tamper else sum(old.outcomes.get(t) == "passed" for t in required)
    result.disagreements = result.disagreements[:20]
    result.other_differences = result.other_differences[:20]
    return result


def old_plugin_file(rev: str, root: Path) -> Path:
    """The grader plugin as it was at git revision ``rev``, written to a file."""
    here = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "show", f"{rev}:termgym/tasks/swesynth/grader_plugin.py"], cwd=here,
                          capture_output=True, text=True, check=True).stdout
    path = root / f"grader_plugin_{rev}.py"
    path.write_text(text)
    return path


def markdown(results: list[Comparison]) -> str:
    """The agreement table (one row per project)."""
    lines = ["| project | suite style | own code uses | raw passed | grader: same outcome | old plugin | "
             "raw s | grader s |", "|---|---|---|---:|---|---|---:|---:|"]
    for r in results:
        if r.error:
            lines.append(f"| {r.project} {r.version} | {r.style} | {r.uses or '-'} | - | not run: {r.error[:80]} "
                         f"| - | - | - |")
            continue
        same = "yes" if r.agrees else f"**no** ({len(r.disagreements)} differ{'; tamper' if r.tamper else ''})"
        others = getattr(r, "other_differences", [])
        if others:
            same += f"; {len(others)} test(s) raw did not pass, grader passed"
        if r.old_passed_of_required is None:
            old = "-"
        elif r.old_tamper:
            old = f"refused: {r.old_tamper[0][:60]}"
        else:
            old = f"{r.old_passed_of_required}/{r.raw_passed}"
        lines.append(f"| {r.project} {r.version} | {r.style} | {r.uses or '-'} | {r.raw_passed} | "
                     f"{same} ({r.grader_passed_of_required}/{r.raw_passed}) | {old} | {r.raw_seconds:.1f} | "
                     f"{r.grader_seconds:.1f} |")
    ran = [r for r in results if not r.error]
    lines.append("")
    lines.append(f"{sum(r.agrees for r in ran)}/{len(ran)} projects agree test for test; "
                 f"{sum(bool(r.old_tamper) for r in ran)} were refused by the old plugin.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", action="append", default=None, help="only these projects (by name)")
    parser.add_argument("--old-plugin", default=OLD_PLUGIN_REV, help="git revision of the old plugin ('' to skip)")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    chosen = [p for p in PROJECTS if not args.project or p.name in args.project]
    unknown = sorted(set(args.project or ()) - {p.name for p in PROJECTS})
    if unknown:
        parser.error(f"unknown project(s) {', '.join(unknown)}; known: {', '.join(p.name for p in PROJECTS)}")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    old = old_plugin_file(args.old_plugin, root) if args.old_plugin else None
    results = []
    for project in chosen:
        result = compare(project, root, old_plugin=old, timeout=args.timeout)
        print(f"{project.name}: raw {result.raw_passed} passed, grader {result.grader_passed_of_required}, "
              f"agrees={result.agrees} old={result.old_passed_of_required} {result.old_tamper[:1]} "
              f"{result.error}", flush=True)
        results.append(result)
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1) + "\n")
    print(markdown(results))
    return 0 if all(r.agrees for r in results if not r.error) else 1


if __name__ == "__main__":
    raise SystemExit(main())
