"""Regenerating the bundled default suite from the bundled corpus.

``termgym swesynth bundle`` (or :func:`build_default_suite`) runs the generator over every corpus
project with fixed seeds and writes the task folders into ``termgym_data/swesynth/tasks``. The
corpus registry (``corpus/__init__.py``: ``CORPUS_DIR`` and ``PROJECTS``) says how to test each
project. Generation validates with the machine's ``/usr/bin/python3`` when it exists, the
interpreter the local sandbox grades with.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from termgym.tasks.swesynth.generate import GenerationResult, Stats, generate
from termgym.tasks.swesynth.suite import BUNDLED_DIR

#: Tasks per corpus project and the seed of each (task ids are stable while the corpus is).
DEFAULT_TASKS_PER_PROJECT = 150
DEFAULT_SEED = 2024
#: The projects the shipped suite is generated from (``--project textkit`` adds the third corpus
#: project; its tasks are not shipped yet).
DEFAULT_PROJECTS: tuple[str, ...] = ("ledgerly", "planwise")


def corpus_projects() -> dict[str, dict[str, Any]]:
    """``{name: {"path", "test_command", "source_dirs", "test_dirs"}}`` for the bundled corpus."""
    import importlib

    corpus = importlib.import_module("termgym.tasks.swesynth.corpus")
    # Until the corpus registry exists the folder is a namespace package (no __file__).
    base = Path(getattr(corpus, "CORPUS_DIR", None) or Path(__file__).parent / "corpus")
    projects = getattr(corpus, "PROJECTS", None)
    out: dict[str, dict[str, Any]] = {}
    if projects:
        for name, info in projects.items():
            info = dict(info)
            path = base / info.get("dir", info.get("path", name))
            out[name] = {"path": path, "test_command": info.get("test_command", "python3 -m pytest -q"),
                         "source_dirs": list(info.get("source_dirs", [])),
                         "test_dirs": list(info.get("test_dirs", ["tests"]))}
        return out
    for path in sorted(p for p in base.iterdir() if (p / "tests").is_dir()):
        out[path.name] = {"path": path, "test_command": "python3 -m pytest -q", "source_dirs": [path.name],
                          "test_dirs": ["tests"]}
    return out


def host_test_command(sandbox_command: str) -> str:
    """The sandbox's command, run on the host with Debian's python3 when it is there."""
    if sandbox_command.startswith("python3 ") and os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3 " + sandbox_command[len("python3 "):]
    return sandbox_command


def build_default_suite(out: str | Path = BUNDLED_DIR, *, per_project: int = DEFAULT_TASKS_PER_PROJECT,
                        seed: int = DEFAULT_SEED, workers: int = 2, projects: Sequence[str] | None = None,
                        clean: bool = False, progress: Callable[[str, Stats], None] | None = None
                        ) -> dict[str, GenerationResult]:
    """Generate ``per_project`` tasks from each corpus project into ``out`` (merging ``suite.json``).

    With ``clean`` the folder is emptied first; otherwise projects regenerate one at a time and
    keep the others' tasks.
    """
    out = Path(out)
    available = corpus_projects()
    chosen = list(projects or DEFAULT_PROJECTS)
    for name in chosen:
        if name not in available:
            raise KeyError(f"no corpus project {name!r}; projects: {', '.join(available)}")
    if clean and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in chosen:
        info = available[name]
        for folder in out.glob(f"{name}-*"):  # the project's old tasks
            shutil.rmtree(folder)
        _drop_from_index(out, name)
        results[name] = generate(
            info["path"], host_test_command(info["test_command"]), n=per_project, seed=seed, out=out, name=name,
            workers=workers, source_dirs=info["source_dirs"], test_dirs=info["test_dirs"],
            sandbox_test_command=info["test_command"],
            repo_dir_ref=os.path.relpath(info["path"], out), suite_name="swesynth-default",
            progress=(lambda s, name=name: progress(name, s)) if progress else None,
        )
    return results


def _drop_from_index(out: Path, name: str) -> None:
    import json

    index = out / "suite.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text())
    prefix = f"{name}-"
    data["splits"] = {k: [t for t in v if not t.startswith(prefix)] for k, v in (data.get("splits") or {}).items()}
    index.write_text(json.dumps(data, indent=2) + "\n")
