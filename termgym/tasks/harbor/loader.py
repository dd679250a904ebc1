"""Reading task folders: one Harbor / Terminal-Bench task, or a directory of them.

Harbor layout::

    my-task/
      instruction.md        what the agent is asked
      task.toml             version = "1.0" or schema_version = "1.1"
      environment/          the build context: Dockerfile (or [environment] docker_image)
      tests/test.sh (+...)  the verifier; writes /logs/verifier/reward.txt or reward.json
      solution/solve.sh     the reference solution (optional)

Terminal-Bench layout::

    my-task/
      task.yaml             instruction inline, max_agent_timeout_sec, max_test_timeout_sec
      Dockerfile            the build context is the task folder
      run-tests.sh          runs the tests (default: pytest $TEST_DIR/test_outputs.py -rA)
      tests/                test_outputs.py and friends
      solution.sh | solution.yaml
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from termgym.tasks.harbor.config import TaskFormatError, parse_task_toml, parse_task_yaml
from termgym.tasks.harbor.dockerfile import parse_dockerfile
from termgym.tasks.harbor.task import HarborTask, TaskStep

#: What Terminal-Bench runs when a task has no run-tests.sh (pytest is in termgym's base image).
DEFAULT_RUN_TESTS = """#!/bin/bash
# termgym's stand-in for Terminal-Bench's default run-tests.sh (no network: uses the image's pytest)
python3 -m pytest "$TEST_DIR/test_outputs.py" -rA
"""


def is_task_dir(path: Path) -> bool:
    """True if ``path`` looks like one task (it has a task.toml or a task.yaml)."""
    return (path / "task.toml").is_file() or (path / "task.yaml").is_file()


def load_task(task_dir: str | Path, *, backend: str | None = None) -> HarborTask:
    """Load one task folder (either layout). Raises :class:`TaskFormatError` naming file and field."""
    task_dir = Path(task_dir).resolve()
    if not task_dir.is_dir():
        raise TaskFormatError(task_dir, "is not a directory")
    if (task_dir / "task.toml").is_file():
        return _load_harbor(task_dir, backend)
    if (task_dir / "task.yaml").is_file():
        return _load_terminal_bench(task_dir, backend)
    raise TaskFormatError(task_dir, "is not a task: it has neither task.toml (Harbor) nor task.yaml (Terminal-Bench)")


#: Compose files Harbor reads from environment/ (a multi-container environment).
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")


def _load_harbor(task_dir: Path, backend: str | None) -> HarborTask:
    config = parse_task_toml(task_dir / "task.toml")
    compose = [name for name in COMPOSE_FILES if (task_dir / "environment" / name).is_file()]
    if compose:
        config.unsupported.append(
            f"environment/{compose[0]} (a Docker Compose environment: this machine has no Docker Compose v2, "
            "which Harbor drives, so termgym cannot start the task's services)"
        )
    if config.unsupported:
        # Refuse rather than run the task without the feature: its score would not be Harbor's.
        raise TaskFormatError(
            task_dir / "task.toml",
            "uses Harbor feature(s) termgym does not run: " + "; ".join(config.unsupported)
            + " (see docs/harbor.md, 'What termgym refuses')",
        )
    steps = _steps(task_dir, config) if config.steps else []
    if steps:
        instruction = steps[0].instruction  # what a listing shows; each step brings its own
    else:
        instruction = _instruction(task_dir / "instruction.md")
        test_sh = task_dir / "tests" / "test.sh"
        if not test_sh.is_file():
            raise TaskFormatError(test_sh, "is missing (the verifier entry point; it writes /logs/verifier/reward.txt)")
    dockerfile_path = task_dir / "environment" / "Dockerfile"
    dockerfile = parse_dockerfile(dockerfile_path) if dockerfile_path.is_file() else None
    if dockerfile is None and not config.docker_image:
        raise TaskFormatError(task_dir / "task.toml", f"no {dockerfile_path} and no docker_image is set", "environment")
    solve = task_dir / "solution" / "solve.sh"
    return HarborTask(
        task_dir.name,
        instruction,
        task_dir=task_dir,
        config=config,
        dockerfile=dockerfile,
        tests_dir=task_dir / "tests",
        test_script="test.sh",
        solution_dir=solve.parent if solve.is_file() else None,
        solution_script="solve.sh" if solve.is_file() else None,
        backend=backend,
        steps=steps,
    )


def _instruction(path: Path) -> str:
    if not path.is_file():
        raise TaskFormatError(path, "is missing (a Harbor task states its instruction there)")
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        raise TaskFormatError(path, "is empty")
    return text


def _steps(task_dir: Path, config) -> list[TaskStep]:
    """The files of each ``[[steps]]`` entry: ``steps/<name>/instruction.md``, ``tests/``, ``solution/``, ``workdir/``."""
    shared_tests = task_dir / "tests"
    out = []
    for step in config.steps:
        folder = task_dir / "steps" / step.name
        tests_dirs = [d for d in (shared_tests, folder / "tests") if d.is_dir()]
        if not any((d / "test.sh").is_file() for d in tests_dirs):
            raise TaskFormatError(folder / "tests" / "test.sh",
                                  f"is missing, and so is {shared_tests / 'test.sh'} (step {step.name!r} has no verifier)")
        solution = folder / "solution"
        out.append(TaskStep(
            config=step,
            instruction=_instruction(folder / "instruction.md"),
            tests_dirs=tests_dirs,
            solution_dir=solution if (solution / "solve.sh").is_file() else None,
            workdir_dir=folder / "workdir" if (folder / "workdir").is_dir() else None,
        ))
    return out


def _load_terminal_bench(task_dir: Path, backend: str | None) -> HarborTask:
    config, instruction = parse_task_yaml(task_dir / "task.yaml")
    dockerfile_path = task_dir / "Dockerfile"
    if not dockerfile_path.is_file():
        raise TaskFormatError(dockerfile_path, "is missing (a Terminal-Bench task builds its image from it)")
    tests_dir = task_dir / "tests"
    if not tests_dir.is_dir():
        raise TaskFormatError(tests_dir, "is missing (Terminal-Bench tests live there)")
    run_tests = task_dir / "run-tests.sh"
    solution_dir = solution_script = solution_commands = solution_files = None
    if (task_dir / "solution.sh").is_file():
        # Only solution.sh goes to /solution, not the whole task folder.
        solution_dir, solution_script, solution_files = task_dir, "solution.sh", [task_dir / "solution.sh"]
    elif (task_dir / "solution.yaml").is_file():
        solution_commands = _solution_yaml(task_dir / "solution.yaml")
    return HarborTask(
        task_dir.name,
        instruction.strip(),
        task_dir=task_dir,
        config=config,
        dockerfile=parse_dockerfile(dockerfile_path),
        tests_dir=tests_dir,
        test_script="run-tests.sh",
        solution_dir=solution_dir,
        solution_script=solution_script,
        solution_commands=solution_commands,
        solution_files=solution_files,
        run_tests_script=run_tests.read_bytes() if run_tests.is_file() else DEFAULT_RUN_TESTS.encode(),
        backend=backend,
    )


def _solution_yaml(path: Path) -> list[str]:
    """Terminal-Bench's ``solution.yaml``: a list of ``{command: ..., min_timeout_sec, block, append_enter}``."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TaskFormatError(path, f"is not valid YAML: {exc}") from None
    if not isinstance(data, list) or not data:
        raise TaskFormatError(path, "must be a non-empty list of {command: ...} entries")
    commands = []
    for i, item in enumerate(data):
        command = item.get("command") if isinstance(item, dict) else None
        if not isinstance(command, str) or not command.strip():
            raise TaskFormatError(path, f"entry {i} has no command string", f"{i}.command")
        commands.append(command)
    return commands


@dataclass
class TaskDirectory:
    """The tasks found under a directory: the loadable ones by id, and the broken ones with why."""

    root: Path
    tasks: dict[str, HarborTask] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def discover(tasks_dir: str | Path, *, backend: str | None = None) -> TaskDirectory:
    """Load every task under ``tasks_dir`` (or ``tasks_dir`` itself if it is one task).

    A task that fails to load is recorded in ``broken`` with its error; the others still load.
    Sub-folders that are not tasks (no task.toml/task.yaml) are skipped silently.
    """
    root = Path(tasks_dir).expanduser().resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"tasks_dir {root} does not exist or is not a directory")
    found = TaskDirectory(root)
    candidates = [root] if is_task_dir(root) else sorted(p for p in root.iterdir() if p.is_dir())
    for path in candidates:
        if not is_task_dir(path):
            continue
        try:
            found.tasks[path.name] = load_task(path, backend=backend)
        except (TaskFormatError, OSError, UnicodeDecodeError, ValueError) as exc:
            found.broken[path.name] = str(exc)
    return found
