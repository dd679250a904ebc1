"""termgym's packaging: what the code imports is declared, and a built wheel works on its own.

1. Every import of a third-party module in ``termgym/``, ``benchmarks/`` and ``trainers/`` maps to
   a distribution declared in ``pyproject.toml``: in the core dependencies, or in the extra that the
   importing code belongs to (:data:`EXTRA_OF`). An AST scan, so lazy imports inside functions count.
2. A wheel built from the checkout, installed into a fresh venv outside the checkout with only the
   core dependencies, imports every termgym module, lists the environments and runs one SWE-SYNTH
   episode; with the ``bench`` extra added, every benchmark module imports and ``termgym bench``
   runs from the checkout. The wheel carries the ``termgym`` package only (no top-level ``tests``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("termgym", "benchmarks", "trainers")
#: termgym's own data package, shipped in the same wheel.
OWN_DATA = ("termgym_data",)
# Bundled data that happens to be Python (task repositories, Harbor samples): not termgym's code.
DATA_DIRS = ("termgym_data/swesynth/toy", "termgym_data/harbor/samples")
#: Code that may import an extra's distributions (path prefix -> extras); the rest: the core only.
#: The first matching prefix wins, so the more specific ones come first.
EXTRA_OF = {
    "benchmarks/ray_step.py": ("bench", "eval"),  # the remote step's overhead, on a Ray cluster
    "benchmarks/ray_scaling.py": ("bench", "eval"),  # episodes/s on one sandbox node and on two
    "benchmarks/": ("bench",),
    # ART's GPU training script: its CUDA check needs torch (ART's GPU backend brings it) and its
    # health monitor is the veRL recipe's (trainers/verl/monitor.py)
    "trainers/art/": ("art", "verl"),
    "trainers/tinker/": ("tinker",),
    "trainers/": ("verl",),
    "termgym/sandbox/docker/": ("docker",),
    "termgym/sandbox/images.py": ("docker",),
    "termgym/commands/doctor.py": ("docker",),  # reports whether the SDK is there
    "termgym/tasks/harbor/task.py": ("docker",),  # Harbor images are Docker images
    "termgym/data/": ("data",),
    "termgym/evaluation/ray_runner.py": ("eval",),
    "termgym/remote/": ("eval",),  # envs as Ray actors
    "termgym/agents/minisweagent.py": ("bench",),  # mini-swe-agent itself
    "termgym/agents/harbor.py": ("harbor",),
    "termgym/protocols/terminus.py": ("harbor",),  # Harbor's own prompt templates, when installed
    "termgym/integrations/art.py": ("art",),
    "termgym/integrations/tinker.py": ("tinker",),
}
#: Code that runs inside the sandbox under the task runtime's own Python, not termgym's: its imports
#: come from the runtime (docs/sandbox.md), not from termgym's dependencies.
RUNTIME_CODE = {"termgym/tasks/swesynth/grader_plugin.py": {"pytest", "pluggy"},
                "termgym/tasks/swesynth/pinned_hypothesis.py": {"pytest", "hypothesis"},
                "termgym/factory/swesynth/screen_plugin.py": {"pytest"}}
#: Distributions an extra cannot declare, installed on their own as its docs say.
INSTALLED_APART = {"tinker-cookbook"}  # declares tml-renderers>=0.4.1, which PyPI lacks: pip --no-deps
#: Import names whose distribution is named otherwise, for when it is not installed here.
KNOWN_DISTRIBUTIONS = {"yaml": "pyyaml", "minisweagent": "mini-swe-agent", "hydra": "hydra-core"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalize(re.split(r"[\s<>=!~;\[@]", requirement.strip(), maxsplit=1)[0])


def declared() -> dict[str, set[str]]:
    """``{"": core distributions, extra: its distributions}`` from pyproject.toml."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    out = {"": {_requirement_name(r) for r in project["dependencies"]}}
    for extra, requirements in project["optional-dependencies"].items():
        out[extra] = {_requirement_name(r) for r in requirements}
    return out


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports in ``path`` that are neither stdlib nor our own."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in SCANNED and n not in OWN_DATA}


def distribution_of(module: str, installed: dict[str, list[str]]) -> str:
    if module in installed:
        return _normalize(installed[module][0])
    return _normalize(KNOWN_DISTRIBUTIONS.get(module, module))


def extras_for(relative: str) -> tuple[str, ...]:
    return next((extras for prefix, extras in EXTRA_OF.items() if relative.startswith(prefix)), ())


def scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if not relative.startswith(DATA_DIRS):
                files.append(path)
    return files


def test_every_import_is_a_declared_dependency_of_its_code():
    deps = declared()
    installed = importlib.metadata.packages_distributions()
    missing = []
    for path in scanned_files():
        relative = path.relative_to(REPO).as_posix()
        allowed = set(deps[""]).union(*(deps[extra] for extra in extras_for(relative)))
        allowed |= RUNTIME_CODE.get(relative, set()) | INSTALLED_APART
        for module in sorted(third_party_imports(path)):
            dist = distribution_of(module, installed)
            if dist not in allowed:
                where = " or ".join(f"[{e}]" for e in extras_for(relative)) or "the core dependencies"
                missing.append(f"{relative} imports {module} ({dist}), not declared in {where}")
    assert not missing, "\n".join(missing)


def test_the_scan_sees_lazy_imports_and_knows_the_extras(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom . import x\n\ndef f():\n    import psutil.tests\n    from yaml import safe_load\n")
    assert third_party_imports(sample) == {"psutil", "yaml"}
    assert extras_for("benchmarks/throughput.py") == ("bench",)
    assert extras_for("termgym/env.py") == ()
    assert {e for extras in EXTRA_OF.values() for e in extras} <= {e for e in declared() if e}


# -- the built wheel, outside the checkout -----------------------------------------------------------


def _run(cmd: list[str], cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**environment, **env})
    assert proc.returncode == 0, f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)], cwd=out)
    (built,) = out.glob("termgym-*.whl")
    return built


@pytest.fixture(scope="module")
def core_venv(wheel, tmp_path_factory) -> Path:
    """A venv outside the checkout with the wheel and its core dependencies only."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=root)
    return python


def test_wheel_ships_the_termgym_package_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"termgym", "termgym_data", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops
    assert not any(name.startswith(("tests/", "benchmarks/", "trainers/")) for name in names)
    assert "termgym_data/swesynth/toy" in "\n".join(names), "the bundled SWE-SYNTH data is missing"


IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys, termgym
assert not termgym.__file__.startswith({repo!r}), termgym.__file__
skip = ()
extra_only = {extra_only!r}  # module -> the third-party names it may miss (its extra's, or the runtime's)
failed = []
for info in pkgutil.walk_packages(termgym.__path__, "termgym."):
    if info.name.startswith(skip):
        continue
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in extra_only.get(info.name, ()):
            failed.append(f"{{info.name}}: {{type(exc).__name__}}: {{exc}}")
    except Exception as exc:
        failed.append(f"{{info.name}}: {{type(exc).__name__}}: {{exc}}")
print("\\n".join(failed) or "ALL IMPORTED")
"""


@pytest.mark.slow
def test_core_wheel_imports_every_module_and_runs_an_episode(core_venv, tmp_path):
    # A module of an extra (docs: pip install 'termgym[art]', ...) or one that runs under the task
    # runtime's Python may need what the core lacks; every other module imports with the core alone.
    extra_only = {}
    for path in scanned_files():
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("termgym/") and (extras_for(relative) or relative in RUNTIME_CODE):
            module = relative[:-3].replace("/", ".").removesuffix(".__init__")
            extra_only[module] = sorted(third_party_imports(path) | ({"_pytest"} if relative in RUNTIME_CODE else set()))
    proc = _run([str(core_venv), "-c", IMPORT_EVERY_MODULE.format(repo=str(REPO), extra_only=extra_only)],
                cwd=tmp_path)
    assert proc.stdout.strip() == "ALL IMPORTED", proc.stdout
    termgym = core_venv.parent / "termgym"
    listing = _run([str(termgym), "list"], cwd=tmp_path).stdout
    assert "termgym/SweSynth-v0" in listing
    _run([str(termgym), "eval", "termgym/SweSynth-v0", "--agent", "oracle", "--split", "test", "--limit", "1",
          "--env-arg", "path=toy", "-o", str(tmp_path / "run")], cwd=tmp_path)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["episodes"] == 1 and summary["solved"] == 1, summary


IMPORT_BENCHMARKS = """
import importlib, pathlib, sys, termgym
assert not termgym.__file__.startswith({repo!r}), termgym.__file__
sys.path.append({repo!r})
import benchmarks
for name in sorted(p.stem for p in pathlib.Path({repo!r}, "benchmarks").glob("*.py") if p.stem != "__main__"):
    importlib.import_module("benchmarks." + name if name != "__init__" else "benchmarks")
print("ALL IMPORTED")
"""


@pytest.mark.slow
def test_bench_extra_imports_every_benchmark_and_termgym_bench_runs(core_venv, wheel, tmp_path):
    _run([str(core_venv), "-m", "pip", "install", "-q", f"termgym[bench] @ {wheel.as_uri()}"], cwd=tmp_path)
    proc = _run([str(core_venv), "-c", IMPORT_BENCHMARKS.format(repo=str(REPO))], cwd=tmp_path)
    assert proc.stdout.strip() == "ALL IMPORTED"
    # From the checkout (where benchmarks/ is), with termgym from the wheel; the quickest section.
    out = tmp_path / "bench"
    _run([str(core_venv.parent / "termgym"), "bench", "--quick", "--only", "step", "--out", str(out)], cwd=REPO)
    results = json.loads((out / "results.json").read_text())
    assert results["benchmarks"]["step"]["error"] is None, results["benchmarks"]["step"]
