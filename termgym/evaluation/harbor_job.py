"""A Harbor-style job ``result.json`` for an evaluation run of Harbor tasks.

``harbor run`` ends with ``<job>/result.json``: the job's id and times, trial counts, per
agent/model/dataset statistics (the mean of every reward key over the trials that have a valid
reward, the trial names behind each reward value, the exceptions) and one result per trial. The
file :func:`write_job_result` writes beside termgym's ``summary.json`` has the same fields (schema
version 1 of Harbor 0.26's ``JobResult``), so tools that read Harbor jobs read termgym runs, and
``termgym compare`` reads either.

How termgym's episodes map onto Harbor's trials: one episode is one trial named
``<task>__a<attempt>``; its grade's ``rewards`` are the verifier result; an episode without a valid
reward has none (``RewardFileNotFoundError`` and friends are recorded as the termgym error text
under ``exception_info``); an ``agent_error`` is an ``AgentError`` exception, an ``infra_error`` an
``EnvironmentError`` — Harbor counts both as errored trials. A task from a registered dataset is
named by its git repository, path and commit (Harbor's ``GitTaskId``); a task folder by its path.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from termgym.evaluation.results import EpisodeResult, RunDir, write_json_atomic

#: The file name Harbor gives a job's result.
JOB_RESULT = "result.json"
HARBOR_ENV_IDS = ("termgym/Harbor-v0",)


def is_harbor_run(record: dict[str, Any], results: list[EpisodeResult]) -> bool:
    """Whether a run is of Harbor tasks (its env, or grades that carry Harbor's ``reward_valid``)."""
    return record.get("env_id") in HARBOR_ENV_IDS or any("reward_valid" in (r.grade or {}) for r in results)


def _task_sources(record: dict[str, Any]) -> tuple[str | None, dict[str, dict[str, Any]], Path]:
    """``(dataset name, {task: git source}, tasks folder)`` from the run's env kwargs."""
    kwargs = record.get("env_kwargs") or {}
    if kwargs.get("dataset"):
        from termgym.tasks.harbor.registry import cached_dataset, parse_ref

        name, _ = parse_ref(str(kwargs["dataset"]))
        try:
            dataset = cached_dataset(str(kwargs["dataset"]))
        except ValueError:
            dataset = None
        if dataset is not None:
            return name, {t["name"]: t for t in dataset.manifest["tasks"]}, dataset.path
        return name, {}, Path(".")
    from termgym.tasks.harbor.suite import SAMPLES_DIR

    return None, {}, Path(kwargs.get("tasks_dir") or SAMPLES_DIR).expanduser().resolve()


def _checksum(folder: Path) -> str:
    from termgym.tasks.harbor.registry import tree_hash

    return tree_hash(folder) if folder.is_dir() else ""


def _iso(text: str | None, seconds: float = 0.0) -> str | None:
    if not text:
        return None
    try:
        start = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return (start + _dt.timedelta(seconds=seconds)).isoformat()


def trial_result(result: EpisodeResult, record: dict[str, Any], job_id: str, run_dir: Path,
                 sources: tuple[str | None, dict[str, dict[str, Any]], Path]) -> dict[str, Any]:
    """One episode as Harbor's ``TrialResult`` (see the module docstring)."""
    dataset, git, folder = sources
    trial_name = f"{result.task_id}__a{result.attempt}"
    source = git.get(result.task_id)
    task_dir = folder / result.task_id
    if source is not None:
        task_id: dict[str, Any] = {"git_url": source["git_url"], "git_commit_id": source["commit"], "path": source["path"]}
        task_config: dict[str, Any] = {"path": source["path"], "git_url": source["git_url"],
                                       "git_commit_id": source["commit"], "source": dataset}
    else:
        task_id = {"path": str(task_dir)}
        task_config = {"path": str(task_dir), "source": dataset}
    grade = result.grade or {}
    rewards = grade.get("rewards") if result.status == "completed" and grade.get("reward_valid") else None
    if rewards is None and result.status == "completed" and "reward_valid" not in grade:
        rewards = {"reward": result.score}  # a non-Harbor task: its score is its one reward
    options = record.get("agent_options") or {}
    model = options.get("model")
    agent_name = str((record.get("agent_description") or {}).get("agent") or record.get("agent") or "agent")
    exception = None
    if result.status != "completed" or (grade and grade.get("reward_valid") is False):
        kind = {"agent_error": "AgentError", "infra_error": "EnvironmentError"}.get(result.status, "VerifierError")
        message = (result.error or {}).get("message") or grade.get("error") or result.status
        exception = {"exception_type": (result.error or {}).get("type") or kind, "exception_message": str(message),
                     "exception_traceback": "", "occurred_at": _iso(result.started_at, result.wall_time)
                     or _dt.datetime.now(_dt.timezone.utc).isoformat()}
    started = result.started_at
    finished = _iso(started, result.wall_time)
    usage = {"n_input_tokens": result.prompt_tokens or None, "n_cache_tokens": None,
             "n_output_tokens": result.completion_tokens or None, "cost_usd": None,
             "metadata": {"termgym_status": result.status, "steps": result.steps, "end_reason": result.end_reason}}
    env_kwargs = record.get("env_kwargs") or {}
    return {
        "schema_version": 1,
        "id": str(uuid.uuid5(uuid.UUID(job_id), trial_name)),
        "task_name": result.task_id,
        "trial_name": trial_name,
        "trial_uri": (run_dir / "episodes" / f"{trial_name}.json").resolve().as_uri(),
        "task_id": task_id,
        "source": dataset,
        "task_checksum": source["tree_hash"] if source else _checksum(task_dir),
        "config": {"task": task_config, "trial_name": trial_name, "trials_dir": str(run_dir),
                   "timeout_multiplier": float(env_kwargs.get("timeout_multiplier") or 1.0),
                   "agent": {"name": agent_name if agent_name != "harbor" else options.get("harbor_agent"),
                             "model_name": model},
                   # termgym's sandbox as Harbor names an external environment (harbor run --environment-import-path)
                   "environment": {"import_path": "termgym.agents.harbor:TermgymSandboxEnvironment",
                                   "kwargs": {"backend": env_kwargs.get("backend") or "docker"},
                                   "force_build": bool(env_kwargs.get("force_build"))},
                   "job_id": job_id},
        "agent_info": {"name": agent_name, "version": "termgym",
                       "model_info": {"name": model, "provider": None} if model else None},
        "agent_result": usage,
        "verifier_result": {"rewards": rewards} if rewards is not None else None,
        "exception_info": exception,
        "started_at": started,
        "finished_at": finished,
    }


def job_result(run: RunDir, record: dict[str, Any], results: list[EpisodeResult]) -> dict[str, Any]:
    """The run as Harbor's ``JobResult`` (schema version 1), with its per-key reward means."""
    job_id = str(uuid.uuid5(uuid.NAMESPACE_URL, str(run.path.resolve())))
    sources = _task_sources(record)
    trials = [trial_result(r, record, job_id, run.path, sources) for r in results]
    evals: dict[str, dict[str, Any]] = {}
    live_rewards: dict[str, list[dict[str, float]]] = defaultdict(list)
    n_errored = 0
    tokens = {"n_input_tokens": None, "n_output_tokens": None}
    for trial in trials:
        model = (trial["agent_info"]["model_info"] or {}).get("name")
        key = "__".join(p for p in (trial["agent_info"]["name"], model, trial["source"] or "adhoc") if p)
        stats = evals.setdefault(key, {"n_trials": 0, "n_errors": 0, "metrics": [], "pass_at_k": {},
                                       "reward_stats": {}, "exception_stats": {}})
        rewards = (trial["verifier_result"] or {}).get("rewards")
        if rewards and trial["exception_info"] is None:
            stats["n_trials"] += 1
            live_rewards[key].append(rewards)
            for name, value in rewards.items():
                stats["reward_stats"].setdefault(name, {}).setdefault(str(value), []).append(trial["trial_name"])
        if trial["exception_info"] is not None:
            stats["n_errors"] += 1
            n_errored += 1
            stats["exception_stats"].setdefault(trial["exception_info"]["exception_type"], []).append(
                trial["trial_name"])
        for field in tokens:
            value = trial["agent_result"][field]
            if value is not None:
                tokens[field] = (tokens[field] or 0) + value
    for key, rewards in live_rewards.items():
        evals[key]["metrics"] = [mean_metric(rewards)]
    starts = [t["started_at"] for t in trials if t["started_at"]]
    ends = [t["finished_at"] for t in trials if t["finished_at"]]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat()
    return {
        "schema_version": 1,
        "id": job_id,
        "started_at": min(starts) if starts else now,
        "updated_at": now,
        "finished_at": max(ends) if ends else now,
        "n_total_trials": len(trials),
        "stats": {"n_completed_trials": len(trials), "n_errored_trials": n_errored, "n_running_trials": 0,
                  "n_pending_trials": 0, "n_cancelled_trials": 0, "n_retries": 0, "evals": evals,
                  "n_input_tokens": tokens["n_input_tokens"], "n_cache_tokens": None,
                  "n_output_tokens": tokens["n_output_tokens"], "cost_usd": None},
        "trial_results": trials,
    }


def mean_metric(rewards: list[dict[str, float]]) -> dict[str, float]:
    """Harbor's ``mean`` metric: with one reward key ``{"mean": m}``, else the mean of each key
    (a key a trial lacks counts 0), over the trials that have a valid reward."""
    keys = sorted({k for r in rewards for k in r})
    if len(keys) <= 1:
        values = [next(iter(r.values()), 0) for r in rewards]
        return {"mean": sum(values) / len(values)}
    return {k: sum(r.get(k, 0) for r in rewards) / len(rewards) for k in keys}


def write_job_result(run: RunDir, record: dict[str, Any], results: list[EpisodeResult]) -> Path | None:
    """Write ``result.json`` into the run directory when the run is of Harbor tasks; its path, else ``None``."""
    if not is_harbor_run(record, results):
        return None
    path = run.path / JOB_RESULT
    write_json_atomic(path, job_result(run, record, results))
    return path


def read_job_rewards(job_dir: str | Path) -> dict[tuple[str, int], float | None]:
    """``{(task, attempt): reward}`` from a Harbor job directory's ``result.json`` (or its trials'
    ``result.json`` files, when the job's omits them); ``None`` for a trial without a valid reward."""
    import json

    job_dir = Path(job_dir)
    path = job_dir / JOB_RESULT
    if not path.is_file():
        raise FileNotFoundError(f"{job_dir} is neither a termgym run (config.json) nor a Harbor job (result.json)")
    data = json.loads(path.read_text())
    trials = data.get("trial_results") or []
    if not trials:
        trials = [json.loads(p.read_text()) for p in sorted(job_dir.glob("*/result.json"))]
    out: dict[tuple[str, int], float | None] = {}
    seen: dict[str, int] = defaultdict(int)
    for trial in sorted(trials, key=lambda t: str(t.get("trial_name"))):
        task = str(trial.get("task_name"))
        rewards = (trial.get("verifier_result") or {}).get("rewards") or None
        value = None
        if rewards and not trial.get("exception_info"):
            value = float(rewards["reward"] if "reward" in rewards else next(iter(rewards.values())))
        out[(task, seen[task])] = value
        seen[task] += 1
    return out


__all__ = ["JOB_RESULT", "job_result", "mean_metric", "read_job_rewards", "trial_result", "write_job_result"]
