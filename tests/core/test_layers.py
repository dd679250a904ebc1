"""termgym's import graph: no cycles, and no import back up the layers (docs/concepts.md, "Layers").

The graph is read from the source (``ast``), not by importing it: every ``import`` and
``from … import`` of a ``termgym`` module, at module level or inside a function (a lazy import
still runs), except those under ``if TYPE_CHECKING:`` (they never run).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import termgym

ROOT = Path(termgym.__file__).parent

#: The layers, bottom first. A module may import its own layer and the layers below it. The order
#: follows the data flow, task -> sandbox -> protocol -> env -> wrappers -> agents/evaluation ->
#: commands, except that a task *describes* its sandbox (a ``SandboxSpec``) and grades in one, so
#: the sandbox contract sits under the tasks: sandboxes know nothing of tasks.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("termgym.imports", "termgym.atomic", "termgym.jsonl", "termgym.archives", "termgym.encodable")),
    ("sandbox", ("termgym.sandbox",)),
    ("tasks", ("termgym.tasks",)),
    ("factory", ("termgym.factory",)),
    ("protocols", ("termgym.protocols",)),
    ("env", ("termgym.config", "termgym.env", "termgym.registration", "termgym.remote", "termgym")),
    ("wrappers", ("termgym.wrappers",)),
    ("data", ("termgym.data",)),
    ("agents", ("termgym.agents",)),
    ("evaluation", ("termgym.evaluation", "termgym.integrations")),
    ("commands", ("termgym.commands", "termgym.cli")),
]

#: Known cycles and upward imports still to remove (empty: none are allowed); each entry is checked
#: to still exist, so the lists can only shrink.
PENDING_CYCLES: set[frozenset[str]] = set()
PENDING_UPWARD: set[tuple[str, str]] = set()


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST, *, type_hints: bool = False):
    """Every node except what sits under ``if TYPE_CHECKING:`` (with ``type_hints``: every node)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not type_hints and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def import_graph(root: Path = ROOT, *, type_hints: bool = False) -> dict[str, set[str]]:
    """``{module: {modules under root it imports}}`` for every module under ``root``; with
    ``type_hints`` the imports under ``if TYPE_CHECKING:`` count too."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path)), type_hints=type_hints):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    # ``from termgym.sandbox import docker`` imports the submodule, not the package's names
                    submodule = f"{module}.{alias.name}"
                    targets.add(submodule if submodule in modules else module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def layer_of(module: str) -> int:
    best, rank = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    if rank is None:
        raise AssertionError(f"module {module} is in no layer: add it to LAYERS (and docs/concepts.md)")
    return rank


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_graph_is_read_from_the_source(graph):
    assert "termgym.tasks.base" in graph["termgym.env"]
    assert "termgym.sandbox.base" in graph["termgym.tasks.swesynth.task"]
    # a TYPE_CHECKING import is not an edge: protocols name tasks in type hints only
    assert "termgym.tasks.base" not in graph["termgym.protocols.base"]


def test_every_module_is_in_a_layer(graph):
    for module in graph:
        layer_of(module)


def test_no_import_cycles(graph):
    found = set(cycles(graph))
    new = [sorted(c) for c in found - PENDING_CYCLES]
    assert not new, f"import cycles: {new}"
    gone = [sorted(c) for c in PENDING_CYCLES - found]
    assert not gone, f"these cycles are gone: delete them from PENDING_CYCLES: {gone}"


def test_no_cycles_through_type_hints_either():
    """Two modules that name each other only in type hints still read as one tangle: a site that
    types its world while the world holds the sites wants a protocol the site owns instead."""
    found = [sorted(c) for c in cycles(import_graph(type_hints=True))]
    assert not found, f"import cycles counting TYPE_CHECKING imports: {found}"


def test_the_trainers_have_no_import_cycles():
    trainers = ROOT.parent / "trainers"
    found = [sorted(c) for c in cycles(import_graph(trainers, type_hints=True))]
    assert not found, f"import cycles in trainers/: {found}"


def test_no_import_goes_back_up_the_layers(graph):
    upward = {(a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a)}
    described = sorted(f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
                       for a, b in upward - PENDING_UPWARD)
    assert not described, "imports back up the layers:\n" + "\n".join(described)
    gone = sorted(PENDING_UPWARD - upward)
    assert not gone, f"these imports are gone: delete them from PENDING_UPWARD: {gone}"


def test_task_families_only_share_the_task_contract(graph):
    families = {m.split(".")[2] for m in graph if m.count(".") >= 2 and m.startswith("termgym.tasks.")
                and m != "termgym.tasks.base"}
    crossing = sorted((a, b) for a, targets in graph.items() for b in targets
                      if a.startswith("termgym.tasks.") and b.startswith("termgym.tasks.") and b != "termgym.tasks.base"
                      and a.split(".")[2] in families and b.split(".")[2] != a.split(".")[2])
    assert not crossing, f"one task family imports another: {crossing}"


def test_every_task_family_has_the_same_rooms():
    for family in ("swesynth", "liveweb", "harbor"):
        folder = ROOT / "tasks" / family
        assert (folder / "suite.py").is_file(), f"tasks/{family}/suite.py is missing"


def test_the_checker_sees_a_cycle_and_an_upward_import(tmp_path):
    package = tmp_path / "termgym"
    (package / "tasks").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tasks" / "__init__.py").write_text("")
    (package / "tasks" / "a.py").write_text("from termgym.tasks import b\n")
    (package / "tasks" / "b.py").write_text("import termgym.tasks.a\nfrom termgym.env import TerminalEnv\n")
    (package / "env.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import termgym.tasks.a\n")
    fake = import_graph(package)
    assert cycles(fake) == [frozenset({"termgym.tasks.a", "termgym.tasks.b"})]
    assert fake["termgym.env"] == set()
    assert layer_of("termgym.env") > layer_of("termgym.tasks.b")  # so tasks.b -> env is an upward import
    # counting type hints, env -> tasks.a closes a second cycle through b's runtime import of env
    assert cycles(import_graph(package, type_hints=True)) == [
        frozenset({"termgym.env", "termgym.tasks.a", "termgym.tasks.b"})]


#: The only modules outside the factory that may import it: the command line.
FACTORY_USERS = ("termgym.commands", "termgym.cli")


def factory_importers(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(module, factory module)`` for every import of ``termgym.factory`` from outside it and the CLI."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if b.startswith("termgym.factory") and not a.startswith("termgym.factory")
                  and not a.startswith(FACTORY_USERS))


def test_the_runtime_never_imports_the_factory(graph):
    assert any(m.startswith("termgym.factory.swesynth.") for m in graph), "the SWE-SYNTH factory has moved"
    assert not factory_importers(graph), f"the runtime imports the factory: {factory_importers(graph)}"


def test_the_factory_rule_sees_a_runtime_module_importing_the_factory(tmp_path):
    package = tmp_path / "termgym"
    for folder in ("tasks", "factory", "commands"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "factory" / "make.py").write_text("from termgym.tasks import serve\n")
    (package / "tasks" / "serve.py").write_text("def run():\n    from termgym.factory import make\n")
    (package / "commands" / "cli.py").write_text("from termgym.factory import make\n")
    assert factory_importers(import_graph(package)) == [("termgym.tasks.serve", "termgym.factory.make")]


MAKE_AND_LIST_LOADED = """
import json, sys
import gymnasium as gym
import termgym
env = gym.make("termgym/SweSynth-v0")
assert "termgym.factory" not in sys.modules
suite = env.unwrapped.suite
assert len(suite) > 0
suite.load(suite.task_ids()[0])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("termgym."))))
"""


def test_making_the_swesynth_env_loads_no_factory_module():
    """``gym.make`` serves the bundled suite from the runtime alone (no sandbox is started)."""
    out = subprocess.run([sys.executable, "-c", MAKE_AND_LIST_LOADED], capture_output=True, text=True, timeout=300,
                         cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "termgym.tasks.swesynth.task" in loaded, loaded
    assert not [m for m in loaded if m.startswith("termgym.factory")], loaded
