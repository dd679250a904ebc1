"""What an evaluation run is asked to do: :class:`EvalConfig` (the ``termgym eval`` flags), and
the ``--import`` modules it loads first.

Its own module so that the local runner (:mod:`termgym.evaluation.runner`) and the Ray runner
(:mod:`termgym.evaluation.ray_runner`) both read it without importing each other.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from termgym.agents import Agent

PROGRESS_MODES = {None: "auto", "auto": "auto", True: "bar", "bar": "bar", "lines": "lines", False: "off", "off": "off"}


@dataclass
class EvalConfig:
    """What to evaluate and how (the ``termgym eval`` flags, as a dataclass).

    ``agent`` is a registered name, an import path ``"pkg.mod:Class"`` or an :class:`Agent`
    instance (local runs only); ``agent_options`` go to its constructor. ``env_kwargs`` go to
    ``gym.make`` (``backend``, ``protocol``, ``max_steps``…). ``task_ids`` is a selection such as
    ``"101-110,200"`` or a list (see :mod:`termgym.evaluation.selection`). ``attempts`` is k of pass@k;
    ``concurrency`` the number of episodes in flight. ``imports`` are modules imported first (where
    custom suites are registered). ``ray_address`` (``"auto"``, ``"ray://host:10001"``) spreads the
    episodes over a Ray cluster, ``ray_cpus_per_episode`` CPUs each, with ``ray_runtime_env`` for
    the workers. ``process_rewards`` wraps each env in :class:`termgym.wrappers.rewards.ProcessReward` (a dict:
    its options); ``record`` also appends every episode to ``output_dir/episodes.jsonl`` in
    :mod:`termgym.wrappers.recording`'s format (for offline samples and replay). ``progress``: ``"auto"``
    (``None``: a live bar when stderr is a terminal, one line per episode otherwise), ``"bar"``
    (``True``), ``"lines"`` or ``"off"`` (``False``).
    """

    env_id: str
    output_dir: str
    agent: str | Agent = "openai"
    agent_options: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    task_ids: str | Iterable[str | int] | None = None
    split: str | None = None
    limit: int | None = None
    attempts: int = 1
    concurrency: int = 4
    seed: int = 0
    episode_timeout: float | None = None
    infra_retries: int = 2
    infra_backoff: float = 2.0
    imports: list[str] = field(default_factory=list)
    ray_address: str | None = None
    ray_cpus_per_episode: float = 1.0
    ray_runtime_env: dict[str, Any] | None = None
    process_rewards: bool | dict[str, Any] = False
    record: bool = False
    progress: bool | str | None = None

    def validate(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts (-k) must be at least 1, got {self.attempts}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency (-n) must be at least 1, got {self.concurrency}")
        if self.infra_retries < 0:
            raise ValueError(f"infra_retries must be >= 0, got {self.infra_retries}")
        if self.episode_timeout is not None and self.episode_timeout <= 0:
            raise ValueError(f"episode_timeout must be positive, got {self.episode_timeout}")
        if self.progress not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of auto, bar, lines, off (or None/True/False), not {self.progress!r}")
        if self.ray_address and isinstance(self.agent, Agent):
            raise ValueError("with Ray, give the agent by name or import path (each worker builds its own)")


def import_modules(modules: Iterable[str]) -> None:
    """Import the modules that register custom suites or agents (``--import``)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ValueError(f"--import {name}: {exc}") from exc
