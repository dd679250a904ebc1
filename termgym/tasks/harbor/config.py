"""The task model shared by every on-disk layout, and the parsers that fill it.

Three layouts map onto one :class:`HarborTaskConfig`:

* Harbor ``task.toml`` with ``version = "1.0"`` (``[metadata]``, ``memory = "2G"``, ``storage = "10G"``);
* Harbor ``task.toml`` with ``schema_version = "1.1"`` (``[task]``, ``memory_mb``, ``storage_mb``,
  ``allow_internet``, ``[verifier.env]``, ``[environment.env]``);
* the older Terminal-Bench ``task.yaml`` (inline ``instruction``, ``max_agent_timeout_sec``,
  ``max_test_timeout_sec``, ``parser_name``).

Every error is a :class:`TaskFormatError` naming the file and the field, so a user can fix the task
without reading termgym's source.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: Harbor's defaults where task.toml says nothing (EnvironmentConfig / VerifierConfig in Harbor).
DEFAULT_VERIFIER_TIMEOUT = 600.0
DEFAULT_BUILD_TIMEOUT = 600.0
#: Terminal-Bench's defaults for task.yaml.
TB_DEFAULT_AGENT_TIMEOUT = 360.0
TB_DEFAULT_TEST_TIMEOUT = 60.0


class TaskFormatError(ValueError):
    """A task folder could not be read. ``path`` is the offending file, ``field`` the setting (if any)."""

    def __init__(self, path: str | Path, message: str, field: str | None = None) -> None:
        self.path = str(path)
        self.field = field
        where = f"{self.path}: [{field}] " if field else f"{self.path}: "
        super().__init__(where + message)


@dataclass
class StepConfig:
    """One ``[[steps]]`` entry of a multi-step task (its files live under ``steps/<name>/``)."""

    name: str
    agent_timeout_sec: float | None = None
    agent_user: str | None = None
    verifier_timeout_sec: float | None = None
    verifier_env: dict[str, str] = field(default_factory=dict)
    verifier_user: str | None = None
    min_reward: float | dict[str, float] | None = None


@dataclass
class HarborTaskConfig:
    """Everything termgym needs from a task's configuration file, whatever its layout.

    ``layout`` is ``"harbor"`` or ``"terminal-bench"``; ``schema_version`` is the task.toml
    generation (``"1.0"``, ``"1.1"``) or ``"tb"``. Timeouts are seconds; ``agent_timeout_sec`` is
    ``None`` when the task sets none (the env's ``time_limit`` then applies alone).
    """

    layout: str = "harbor"
    schema_version: str = "1.1"
    name: str | None = None  # [task] name ("org/name") in 1.1
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_timeout_sec: float | None = None
    verifier_timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    build_timeout_sec: float = DEFAULT_BUILD_TIMEOUT
    docker_image: str | None = None
    # Harbor sets no resource limit where the task sets none; neither does termgym.
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int = 0
    workdir: str | None = None  # [environment] workdir: overrides the image's WORKDIR
    agent_user: str | None = None  # [agent] user: who the agent's shell runs as (None: root)
    verifier_user: str | None = None  # [verifier] user: who runs tests/test.sh (None: root)
    verifier_separate: bool = False  # the verifier runs in a fresh container, not the agent's
    verifier_docker_image: str | None = None  # [verifier.environment] docker_image (tests bundled)
    verifier_workdir: str | None = None  # [verifier.environment] workdir
    #: Container paths copied from the agent's sandbox into a separate verifier's (besides /logs/artifacts).
    artifacts: list[str] = field(default_factory=list)
    steps: list[StepConfig] = field(default_factory=list)  # [[steps]]: a multi-step task
    multi_step_reward_strategy: str = "mean"  # "mean" (per-key mean over steps) or "final"
    #: Harbor features this task uses that termgym does not run, each naming its task.toml key;
    #: a task with any is refused when loaded (never run with the feature silently dropped).
    unsupported: list[str] = field(default_factory=list)
    allow_internet: bool = True  # Harbor's default; network_mode, when given, decides instead
    environment_env: dict[str, str] = field(default_factory=dict)
    parser_name: str | None = None  # Terminal-Bench: how run-tests.sh output is judged


# -- small typed readers: each names the file and field it complains about -------------------


def _number(path: Path, section: dict[str, Any], key: str, where: str, *, positive: bool = True) -> float | None:
    if key not in section:
        return None
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TaskFormatError(path, f"{key} must be a number, got {value!r}", where)
    if positive and value <= 0:
        raise TaskFormatError(path, f"{key} must be positive, got {value!r}", where)
    return float(value)


def _bool(path: Path, section: dict[str, Any], key: str, where: str) -> bool | None:
    if key not in section:
        return None
    value = section[key]
    if not isinstance(value, bool):
        raise TaskFormatError(path, f"{key} must be true or false, got {value!r}", where)
    return value


def _string(path: Path, section: dict[str, Any], key: str, where: str) -> str | None:
    if key not in section or section[key] is None:
        return None
    value = section[key]
    if not isinstance(value, str):
        raise TaskFormatError(path, f"{key} must be a string, got {value!r}", where)
    return value


def _table(path: Path, data: dict[str, Any], key: str, where: str | None = None) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise TaskFormatError(path, f"{key} must be a table, got {value!r}", where or key)
    return value


def _env_table(path: Path, section: dict[str, Any], where: str) -> dict[str, str]:
    env = _table(path, section, "env", where)
    out: dict[str, str] = {}
    for key, value in env.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TaskFormatError(path, f"env.{key} must be a string, got {value!r}", where)
        out[str(key)] = str(value)
    return out


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])I?B?\s*$", re.IGNORECASE)
_SIZE_FACTOR_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_size_mb(text: str) -> int:
    """Parse a Harbor 1.0 size such as ``"2G"``, ``"512M"``, ``"1.5GB"`` into megabytes."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"expected a size like '2G' or '512M', got {text!r}")
    return max(1, int(float(match.group(1)) * _SIZE_FACTOR_MB[match.group(2).upper()]))


_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def resolve_env(env: dict[str, str], path: Path | str, where: str, host_env: dict[str, str] | None = None) -> dict[str, str]:
    """Resolve Harbor's ``${VAR}`` and ``${VAR:-default}`` templates from the host environment.

    A template naming a variable the host lacks (and with no default) is an error naming the key.
    """
    host = os.environ if host_env is None else host_env
    out: dict[str, str] = {}
    for key, value in env.items():

        def sub(match: re.Match[str], key: str = key) -> str:
            name, default = match.group(1), match.group(2)
            if name in host:
                return host[name]
            if default is not None:
                return default
            raise TaskFormatError(
                path, f"env.{key} refers to ${{{name}}}, which is not set on the host (set it or give a default)", where
            )

        out[key] = _TEMPLATE.sub(sub, value)
    return out


# -- task.toml --------------------------------------------------------------------------------


def parse_task_toml(path: Path) -> HarborTaskConfig:
    """Read a Harbor ``task.toml`` of either generation."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(path, f"is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TaskFormatError(path, f"is not UTF-8 text: {exc}") from None

    # Harbor renamed `version` to `schema_version`; both name the generation.
    version = data.get("schema_version", data.get("version", "1.1"))
    if not isinstance(version, str) or not re.fullmatch(r"1(\.\d+)?", version):
        raise TaskFormatError(
            path, f"schema_version/version {version!r} is not supported (termgym reads 1.0 and 1.1)", "version"
        )
    cfg = HarborTaskConfig(layout="harbor", schema_version=version)

    task = _table(path, data, "task")
    if task:
        cfg.name = _string(path, task, "name", "task")
        cfg.description = _string(path, task, "description", "task") or ""
        for key in ("authors", "keywords"):
            if key in task:
                cfg.metadata[key] = task[key]
    cfg.metadata.update(_table(path, data, "metadata"))

    verifier = _table(path, data, "verifier")
    cfg.verifier_timeout_sec = _number(path, verifier, "timeout_sec", "verifier") or DEFAULT_VERIFIER_TIMEOUT
    cfg.verifier_env = _env_table(path, verifier, "verifier")
    cfg.verifier_user = _user(path, verifier, "verifier")
    mode = _string(path, verifier, "environment_mode", "verifier")
    if mode not in (None, "shared", "separate"):
        raise TaskFormatError(path, f"environment_mode must be 'shared' or 'separate', got {mode!r}", "verifier")
    venv = verifier.get("environment")
    if venv is not None:
        if not isinstance(venv, dict):
            raise TaskFormatError(path, f"environment must be a table, got {venv!r}", "verifier")
        if mode == "shared":
            raise TaskFormatError(path, "environment_mode = 'shared' conflicts with [verifier.environment]", "verifier")
        cfg.verifier_docker_image = _string(path, venv, "docker_image", "verifier.environment") or None
        cfg.verifier_workdir = _string(path, venv, "workdir", "verifier.environment")
        unknown = sorted(set(venv) - {"docker_image", "workdir", "build_timeout_sec", "cpus", "memory_mb",
                                      "storage_mb", "network_mode", "allow_internet", "env", "os"})
        if unknown:
            cfg.unsupported.append(f"[verifier.environment] {', '.join(unknown)}")
    cfg.verifier_separate = venv is not None or mode == "separate"
    for item in data.get("artifacts", []) or []:
        source = item.get("source") if isinstance(item, dict) else item
        if not isinstance(source, str) or not source.startswith("/"):
            raise TaskFormatError(path, f"artifacts entries need an absolute source path, got {item!r}", "artifacts")
        if isinstance(item, dict) and item.get("service") not in (None, "main"):
            cfg.unsupported.append(f"artifacts from the compose service {item.get('service')!r}")
        cfg.artifacts.append(source)
    if verifier.get("collect"):
        cfg.unsupported.append("[[verifier.collect]] hooks")

    agent = _table(path, data, "agent")
    cfg.agent_timeout_sec = _number(path, agent, "timeout_sec", "agent")
    cfg.agent_user = _user(path, agent, "agent")
    cfg.steps = _steps(path, data, cfg)
    strategy = data.get("multi_step_reward_strategy") or "mean"
    if strategy not in ("mean", "final"):
        raise TaskFormatError(path, f"multi_step_reward_strategy must be 'mean' or 'final', got {strategy!r}")
    cfg.multi_step_reward_strategy = strategy

    solution = _table(path, data, "solution")
    cfg.solution_env = _env_table(path, solution, "solution")

    env = _table(path, data, "environment")
    cfg.build_timeout_sec = _number(path, env, "build_timeout_sec", "environment") or DEFAULT_BUILD_TIMEOUT
    cfg.docker_image = _string(path, env, "docker_image", "environment") or None
    cfg.cpus = _number(path, env, "cpus", "environment")
    gpus = _number(path, env, "gpus", "environment", positive=False)
    cfg.gpus = int(gpus or 0)
    cfg.memory_mb = _size(path, env, "memory_mb", "memory")
    cfg.storage_mb = _size(path, env, "storage_mb", "storage")
    workdir = _string(path, env, "workdir", "environment")
    if workdir is not None and not workdir.startswith("/"):
        raise TaskFormatError(path, f"workdir must be an absolute path, got {workdir!r}", "environment")
    cfg.workdir = workdir
    if str(env.get("os", "linux")).lower() != "linux":
        cfg.unsupported.append(f"[environment] os = {env.get('os')!r} (termgym runs Linux containers only)")
    if cfg.gpus:
        cfg.unsupported.append("[environment] gpus (termgym sandboxes have no GPU)")
    if env.get("healthcheck"):
        cfg.unsupported.append("[environment.healthcheck]")
    allow = _bool(path, env, "allow_internet", "environment")
    cfg.allow_internet = True if allow is None else allow
    mode = _string(path, env, "network_mode", "environment")
    if mode is not None:
        if mode not in ("public", "no-network", "allowlist"):
            raise TaskFormatError(
                path, f"network_mode must be 'public', 'no-network' or 'allowlist', got {mode!r}", "environment"
            )
        # termgym cannot filter by host; an allowlist needs the network, so it opens it (see docs).
        cfg.allow_internet = mode != "no-network"
    cfg.environment_env = _env_table(path, env, "environment")
    return cfg


_STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _steps(path: Path, data: dict[str, Any], cfg: HarborTaskConfig) -> list[StepConfig]:
    raw = data.get("steps") or []
    if not isinstance(raw, list):
        raise TaskFormatError(path, "steps must be an array of tables ([[steps]])", "steps")
    steps: list[StepConfig] = []
    for i, item in enumerate(raw):
        where = f"steps[{i}]"
        if not isinstance(item, dict):
            raise TaskFormatError(path, f"must be a table, got {item!r}", where)
        name = item.get("name")
        if not isinstance(name, str) or not _STEP_NAME.match(name):
            raise TaskFormatError(path, f"name must be a folder name under steps/, got {name!r}", where)
        if any(s.name.lower() == name.lower() for s in steps):
            raise TaskFormatError(path, f"step name {name!r} is used twice", where)
        agent = _table(path, item, "agent", where)
        verifier = _table(path, item, "verifier", where)
        if verifier.get("environment") is not None or verifier.get("environment_mode") == "separate":
            cfg.unsupported.append(f"[[steps]] {name!r}: a separate verifier environment per step")
        if item.get("healthcheck"):
            cfg.unsupported.append(f"[[steps]] {name!r}: healthcheck")
        min_reward = item.get("min_reward")
        if min_reward is not None and not (
            (isinstance(min_reward, (int, float)) and not isinstance(min_reward, bool))
            or (isinstance(min_reward, dict) and all(isinstance(v, (int, float)) for v in min_reward.values()))
        ):
            raise TaskFormatError(path, f"min_reward must be a number or a table of numbers, got {min_reward!r}", where)
        steps.append(StepConfig(
            name=name,
            agent_timeout_sec=_number(path, agent, "timeout_sec", f"{where}.agent"),
            agent_user=_user(path, agent, f"{where}.agent"),
            verifier_timeout_sec=_number(path, verifier, "timeout_sec", f"{where}.verifier"),
            verifier_env=_env_table(path, verifier, f"{where}.verifier"),
            verifier_user=_user(path, verifier, f"{where}.verifier"),
            min_reward=min_reward,
        ))
    return steps


def _user(path: Path, section: dict[str, Any], where: str) -> str | None:
    """``user = "name"`` or a numeric uid (as a string; ``runuser`` takes ``#uid``)."""
    value = section.get("user")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise TaskFormatError(path, f"user must be a user name or a uid, got {value!r}", where)
    return str(value)


def _size(path: Path, env: dict[str, Any], mb_key: str, legacy_key: str) -> int | None:
    """``memory_mb = 2048`` (1.1) or ``memory = "2G"`` (1.0); the explicit megabytes win; ``None`` if unset."""
    mb = _number(path, env, mb_key, "environment")
    legacy = None
    if legacy_key in env:
        try:
            legacy = parse_size_mb(env[legacy_key])
        except ValueError as exc:
            raise TaskFormatError(path, f"{legacy_key}: {exc}", "environment") from None
    if mb is not None and legacy is not None and int(mb) != legacy:
        # Harbor rejects the pair too rather than pick one.
        raise TaskFormatError(path, f"{legacy_key} = {env[legacy_key]!r} ({legacy} MB) conflicts with "
                              f"{mb_key} = {int(mb)}", "environment")
    return int(mb) if mb is not None else legacy


# -- Terminal-Bench task.yaml -----------------------------------------------------------------


def parse_task_yaml(path: Path) -> tuple[HarborTaskConfig, str]:
    """Read a Terminal-Bench ``task.yaml``; returns the config and the inline instruction."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TaskFormatError(path, f"is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise TaskFormatError(path, "must be a YAML mapping")

    instruction = data.get("instruction")
    if instruction is None and isinstance(data.get("descriptions"), list):
        # Early Terminal-Bench tasks keep variants under `descriptions`; the "base" one is the task.
        for item in data["descriptions"]:
            if isinstance(item, dict) and item.get("key", "base") == "base":
                instruction = item.get("description")
                break
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskFormatError(path, "instruction is missing or empty (task.yaml must carry the instruction inline)", "instruction")

    cfg = HarborTaskConfig(layout="terminal-bench", schema_version="tb")
    cfg.agent_timeout_sec = _number(path, data, "max_agent_timeout_sec", "max_agent_timeout_sec") or TB_DEFAULT_AGENT_TIMEOUT
    cfg.verifier_timeout_sec = _number(path, data, "max_test_timeout_sec", "max_test_timeout_sec") or TB_DEFAULT_TEST_TIMEOUT
    parser = _string(path, data, "parser_name", "parser_name") or "pytest"
    if parser not in ("pytest", "exit_code"):
        raise TaskFormatError(path, f"parser_name {parser!r} is not supported (termgym knows 'pytest')", "parser_name")
    cfg.parser_name = parser
    keep = ("author_name", "author_email", "difficulty", "category", "tags", "expert_time_estimate_min",
            "junior_time_estimate_min", "run_tests_in_same_shell")
    cfg.metadata = {k: data[k] for k in keep if k in data}
    return cfg, instruction
