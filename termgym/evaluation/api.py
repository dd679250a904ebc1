"""The evaluation entry points: benchmark agents on termgym environments, compare runs, write reports.

>>> from termgym.evaluation import evaluate, compare_models
>>> outcome = evaluate("termgym/SweSynth-v0", agent="openai", model="Qwen/Qwen3-4B",
...                    base_url="http://localhost:8000/v1", task_ids="0-9", attempts=3,
...                    concurrency=8, output_dir="runs/qwen3-4b")          # doctest: +SKIP
>>> outcome.summary["pass_at_k"]                                           # doctest: +SKIP
>>> compare_models(["Qwen/Qwen3-4B", "runs/my-finetune"], "swe-synth", task_ids=range(10),
...                base_url="http://localhost:8000/v1")                   # doctest: +SKIP

The command line has the same pieces: ``termgym eval``, ``termgym compare``, ``termgym view``.
See ``docs/evaluate.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from termgym.agents import Agent
from termgym.config import EnvConfig
from termgym.evaluation.compare import Comparison, compare_runs, load_run, paired_bootstrap
from termgym.evaluation.report import write_report
from termgym.evaluation.results import EpisodeResult, RunDir, format_summary, pass_at_k, summarize
from termgym.evaluation.runner import EvalConfig, RunMismatch, RunOutcome, run_evaluation

#: Options of the ``openai`` agent that ``evaluate`` accepts as keyword arguments directly.
_AGENT_SHORTCUTS = ("model", "base_url", "temperature", "max_tokens", "api_key_env")


def evaluate(
    env_id: str,
    *,
    agent: str | Agent = "openai",
    output_dir: str | Path,
    task_ids: str | Iterable[str | int] | None = None,
    split: str | None = None,
    limit: int | None = None,
    attempts: int = 1,
    concurrency: int = 4,
    agent_options: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool | None = None,
    **options: Any,
) -> RunOutcome:
    """Evaluate ``agent`` on ``env_id`` and return the outcome (summary, episodes, run directory).

    ``model``, ``base_url``, ``temperature``, ``max_tokens`` and ``api_key_env`` are shortcuts for
    ``agent_options``; the :class:`~termgym.config.EnvConfig` fields (``backend``, ``protocol``,
    ``max_steps``, ``time_limit``, ``command_timeout``, ``mode``…) for ``env_kwargs`` (``split`` is
    the evaluation's own); anything else is an :class:`EvalConfig` field
    (``seed``, ``episode_timeout``, ``infra_retries``, ``imports``, ``ray_address``…).
    Rerunning with the same ``output_dir`` resumes.
    """
    agent_options = dict(agent_options or {})
    env_kwargs = dict(env_kwargs or {})
    for key in _AGENT_SHORTCUTS:
        if key in options:
            agent_options[key] = options.pop(key)
    for key in EnvConfig.field_names():
        if key in options:
            env_kwargs[key] = options.pop(key)
    unknown = sorted(set(options) - set(EvalConfig.__dataclass_fields__))
    if unknown:
        raise TypeError(f"evaluate() got unknown option(s): {', '.join(unknown)}")
    config = EvalConfig(env_id=env_id, output_dir=str(output_dir), agent=agent, agent_options=agent_options,
                        env_kwargs=env_kwargs, task_ids=task_ids, split=split, limit=limit, attempts=attempts,
                        concurrency=concurrency, progress=progress, **options)
    return run_evaluation(config)


def compare_models(
    model_paths: Sequence[str | dict[str, Any] | Path],
    env_type: str,
    task_ids: str | Iterable[str | int] | None = None,
    *,
    output_dir: str | Path = "runs/compare",
    agent: str = "openai",
    base_url: str | None = None,
    metric: str = "score",
    attempts: int = 1,
    concurrency: int = 4,
    **options: Any,
) -> Comparison:
    """Evaluate several models (or reuse finished runs) on the same tasks and compare them.

    Each entry of ``model_paths`` is one of: an existing run directory (it is only loaded); a model
    name served at ``base_url``; or a dict of agent options (``{"model": ..., "base_url": ...}``, with
    an optional ``"label"``). ``env_type`` is an env id or an alias (``"swe-synth"``). New runs go to
    ``output_dir/<label>`` and resume if they exist. Returns a :class:`Comparison` (``print`` it for
    the tables; ``.to_dict()`` for JSON).
    """
    if len(model_paths) < 2:
        raise ValueError("compare_models needs at least two models or runs")
    paths, labels = [], []
    for entry in model_paths:
        if isinstance(entry, (str, Path)) and RunDir(entry).exists():
            paths.append(str(entry))
            labels.append(Path(entry).name)
            continue
        agent_options = dict(entry) if isinstance(entry, dict) else {"model": str(entry)}
        label = str(agent_options.pop("label", None) or agent_options.get("model") or f"run{len(paths)}")
        entry_agent = agent_options.pop("agent", agent)
        if base_url is not None and entry_agent == "openai":
            agent_options.setdefault("base_url", base_url)
        run_dir = Path(output_dir) / _slug(label)
        evaluate(env_type, agent=entry_agent, output_dir=run_dir, task_ids=task_ids, attempts=attempts,
                 concurrency=concurrency, agent_options=agent_options, **options)
        paths.append(str(run_dir))
        labels.append(label)
    return compare_runs(paths, metric=metric, labels=labels)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


__all__ = [
    "Comparison",
    "EpisodeResult",
    "EvalConfig",
    "RunDir",
    "RunMismatch",
    "RunOutcome",
    "compare_models",
    "compare_runs",
    "evaluate",
    "format_summary",
    "load_run",
    "paired_bootstrap",
    "pass_at_k",
    "run_evaluation",
    "summarize",
    "write_report",
]
