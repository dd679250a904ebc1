"""Running an evaluation: many episodes concurrently in one event loop, resumable, saved per episode.

:func:`run_evaluation` resolves the env and the tasks, reconciles the run directory (a rerun skips
finished episodes and retries infrastructure failures), plays the remaining episodes with ``-n``
of them in flight (locally or on Ray), writes each episode as it finishes and the summary at the end.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import re
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from termgym.agents import Agent, make_agent
from termgym.evaluation.config import PROGRESS_MODES, EvalConfig, import_modules
from termgym.evaluation.episode import EpisodeSpec, play_with_retries
from termgym.evaluation.progress import Progress
from termgym.evaluation.results import EpisodeResult, RunDir, summarize
from termgym.evaluation.selection import select_task_ids

#: Short names users of seed 000's ``--env-type`` know.
ENV_ALIASES = {
    "swe-synth": "termgym/SweSynth-v0",
    "swesynth": "termgym/SweSynth-v0",
    "liveweb": "termgym/LiveWeb-v0",
    "harbor": "termgym/Harbor-v0",
}
#: Agent options that change how requests are made but not what is evaluated: they may differ on resume.
OPERATIONAL_OPTIONS = frozenset({
    "base_url", "api_key", "api_key_env", "timeout", "max_retries", "backoff", "max_backoff",
    "max_concurrency", "headers",
})
SECRET_OPTIONS = frozenset({"api_key", "headers"})
#: Env options that change where episodes run but not what they return: they may differ on resume.
OPERATIONAL_ENV_OPTIONS = frozenset({"ray"})


class RunMismatch(ValueError):
    """The output directory holds a run of something else; resuming into it would mix results."""


@dataclass
class RunOutcome:
    """What :func:`run_evaluation` returns: the summary, every episode on disk, and timings."""

    run_dir: RunDir
    summary: dict[str, Any]
    results: list[EpisodeResult]
    ran: int
    skipped: int
    run_seconds: float


def resolve_env_id(env_id: str) -> str:
    """An env id after aliases (``swe-synth`` -> ``termgym/SweSynth-v0``); unknown ids are an error."""
    env_id = ENV_ALIASES.get(env_id, env_id)
    if env_id not in gym.registry:
        from termgym.registration import termgym_env_ids

        raise ValueError(f"unknown environment {env_id!r}; registered termgym ids: {', '.join(termgym_env_ids())} "
                         "(register your own with termgym.register_suite, and pass --import MODULE to load it)")
    return env_id


def list_task_ids(env_spec: Any, env_kwargs: dict[str, Any], split: str | None) -> list[str]:
    """The ids of ``split`` in the env's suite (builds the env, which starts no sandbox)."""
    try:
        env = gym.make(env_spec, disable_env_checker=True, **env_kwargs)
    except Exception as exc:  # a suite that cannot load (missing files, bad kwargs) stops the run here
        raise ValueError(f"cannot make {env_spec.id} with {env_kwargs}: {type(exc).__name__}: {exc}") from exc
    try:
        return [str(i) for i in env.get_wrapper_attr("suite").task_ids(split)]
    except KeyError as exc:
        raise ValueError(f"{env_spec.id}: {exc.args[0] if exc.args else exc}") from exc
    finally:
        env.close()


def run_evaluation(config: EvalConfig) -> RunOutcome:
    """Evaluate ``config`` (see :class:`EvalConfig`); returns when every episode has finished."""
    config.validate()
    started = time.monotonic()
    import_modules(config.imports)
    env_id = resolve_env_id(config.env_id)
    env_spec = gym.spec(env_id)
    env_kwargs = dict(config.env_kwargs)
    all_ids = list_task_ids(env_spec, env_kwargs, config.split)
    task_ids = select_task_ids(all_ids, config.task_ids, config.limit,
                               where=f"{env_id} split {config.split or '(default)'}")
    if not task_ids:
        raise ValueError(f"no tasks selected from {env_id} (split {config.split or '(default)'})")

    agent = config.agent if isinstance(config.agent, Agent) else None
    if agent is None and not config.ray_address:
        agent = make_agent(config.agent, **config.agent_options)
    record = _config_record(config, env_id, env_kwargs, task_ids, agent)
    store = RunDir(config.output_dir)
    _reconcile(store, record)
    store.write_config(record)

    finished = {r.key for r in store.episodes() if r.scored}
    process_rewards = None
    if config.process_rewards:
        process_rewards = dict(config.process_rewards) if isinstance(config.process_rewards, dict) else {}
    # Every episode is recorded: its result keeps only a summary and a reference to the record.
    _end_torn_line(store.record_path)
    record_path = str(store.record_path.resolve())
    record_metadata = {"agent": record["agent"], "model": record["agent_options"].get("model"),
                       "run_dir": str(store.path)}
    todo = [EpisodeSpec(env_spec=env_spec, env_kwargs=env_kwargs, task_id=task_id, attempt=attempt,
                        seed=config.seed + attempt, episode_timeout=config.episode_timeout,
                        infra_retries=config.infra_retries, infra_backoff=config.infra_backoff,
                        process_rewards=process_rewards, record_path=record_path,
                        record_name=store.record_path.name,
                        record_experiment=_slug(store.path.resolve().name), record_metadata=record_metadata)
            for attempt in range(config.attempts)  # attempt-major: pass@1 is known early
            for task_id in task_ids if (task_id, attempt) not in finished]
    skipped = len(task_ids) * config.attempts - len(todo)
    mode = PROGRESS_MODES[config.progress]
    progress = Progress(len(todo), done_before=skipped, enabled=mode != "off",
                        live={"bar": True, "lines": False}.get(mode))
    try:
        if config.ray_address:
            from termgym.evaluation.ray_runner import run_on_ray

            run_on_ray(config, todo, store, progress)
        else:
            assert agent is not None
            _run_coroutine(_run_local(todo, agent, store, progress, config.concurrency))
    finally:
        progress.close()
    results = store.episodes()
    summary = summarize(results, record)
    run_seconds = time.monotonic() - started
    summary["run_seconds"] = round(run_seconds, 3)
    store.write_summary(summary)
    from termgym.evaluation.harbor_job import write_job_result

    write_job_result(store, record, results)  # Harbor's job result.json, for runs of Harbor tasks
    return RunOutcome(run_dir=store, summary=summary, results=results, ran=len(todo), skipped=skipped,
                      run_seconds=run_seconds)


def _run_coroutine(coro: Any) -> None:
    """``asyncio.run``, also from code that already runs an event loop (a Jupyter notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)
        return
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="termgym-eval") as pool:
        pool.submit(asyncio.run, coro).result()


async def _run_local(todo: list[EpisodeSpec], agent: Agent, store: RunDir, progress: Progress,
                     concurrency: int) -> None:
    queue = deque(todo)

    async def worker() -> None:
        while queue:
            spec = queue.popleft()
            progress.episode_started()
            result = await play_with_retries(spec, agent)
            store.write_episode(result)
            progress.episode_finished(result)

    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(todo)))))
    finally:
        await agent.close()


def _config_record(config: EvalConfig, env_id: str, env_kwargs: dict[str, Any], task_ids: list[str],
                   agent: Agent | None) -> dict[str, Any]:
    from termgym import __version__

    agent_name = config.agent if isinstance(config.agent, str) else f"{type(config.agent).__module__}:" \
        f"{type(config.agent).__qualname__}"
    options = {k: v for k, v in config.agent_options.items() if k not in SECRET_OPTIONS}
    return _jsonable({
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "agent": agent_name,
        "agent_options": options,
        "agent_description": agent.describe() if agent is not None else None,
        "split": config.split,
        "task_ids": task_ids,
        "attempts": config.attempts,
        "seed": config.seed,
        "episode_timeout": config.episode_timeout,
        "process_rewards": config.process_rewards,
        "imports": list(config.imports),
        "termgym_version": __version__,
        "updated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    })


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    options = {k: v for k, v in (record.get("agent_options") or {}).items() if k not in OPERATIONAL_OPTIONS}
    env_kwargs = record.get("env_kwargs")
    if isinstance(env_kwargs, dict):
        env_kwargs = {k: v for k, v in env_kwargs.items() if k not in OPERATIONAL_ENV_OPTIONS}
    return {"env_id": record.get("env_id"), "env_kwargs": env_kwargs, "agent": record.get("agent"),
            "agent_options": options, "seed": record.get("seed"),
            "process_rewards": record.get("process_rewards") or False}


def _reconcile(store: RunDir, record: dict[str, Any]) -> None:
    """Refuse to resume into a run of something else; merge task lists otherwise."""
    if not store.exists():
        return
    old = store.read_config()
    old_id, new_id = _identity(old), _identity(record)
    if old_id != new_id:
        diffs = [f"{k}: {old_id[k]!r} -> {new_id[k]!r}" for k in new_id if old_id.get(k) != new_id[k]]
        raise RunMismatch(f"{store.path} holds a run of a different configuration ({'; '.join(diffs)}); "
                          "use another --output-dir, or delete that directory to start over")
    # A rerun may select more tasks or attempts: the directory's config covers the union.
    merged = list(old.get("task_ids") or [])
    merged += [t for t in record["task_ids"] if t not in set(merged)]
    record["task_ids"] = merged
    record["attempts"] = max(int(old.get("attempts") or 1), record["attempts"])


def _end_torn_line(path: Path) -> None:
    """End a recording whose last line a killed run left torn, so the records a resumed run appends
    start on a line of their own (the torn line alone stays unreadable)."""
    try:
        with open(path, "rb+") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
    except FileNotFoundError:
        pass


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "eval"


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))
