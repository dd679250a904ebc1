"""Spreading an evaluation's episodes over a Ray cluster (``termgym eval --ray-address ...``).

Each episode is one Ray task: the worker builds the agent from its name or import path, makes the
env from the pickled ``EnvSpec`` (so suites registered only in the driver still work), plays the
episode with the usual infrastructure retries and returns the result with its episode records
(written to a scratch file on the worker, read back, returned); the driver appends the records to
the run's ``episodes.jsonl`` and writes the result as they arrive, so no file system is shared with
the workers and a killed driver resumes like a local run. A worker or node lost mid-episode is an
infrastructure failure: the episode is resubmitted up to ``infra_retries`` times; a lost try
returned nothing, so it leaves no record behind.

Workers must be able to import termgym and whatever ``--import`` names. On a local cluster the
driver's ``PYTHONPATH`` is passed on; elsewhere install your packages on the nodes or give a
``runtime_env`` (``EvalConfig.ray_runtime_env``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import time
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from termgym.evaluation.config import EvalConfig, import_modules
from termgym.evaluation.episode import EpisodeSpec, play_with_retries
from termgym.evaluation.results import EpisodeResult, RunDir
from termgym.wrappers.recording import append_jsonl, read_jsonl

if TYPE_CHECKING:
    from termgym.evaluation.progress import Progress


def ray_episode(spec: EpisodeSpec, agent: str, agent_options: dict[str, Any], imports: list[str]) -> dict[str, Any]:
    """Play one episode on a Ray worker.

    Returns ``{"result": the EpisodeResult as a dict, "records": [episode records]}``: the records
    (one per try; see :mod:`termgym.wrappers.recording`) are written to a scratch file on the worker,
    never to ``spec.record_path`` (the driver's file, which this node need not see).
    """
    from termgym.agents import make_agent

    import_modules(imports)
    built = make_agent(agent, **agent_options)
    with tempfile.TemporaryDirectory(prefix="termgym-ray-episode-") as scratch:
        local = spec
        if spec.record_path is not None:
            local = dataclasses.replace(spec, record_path=os.path.join(scratch, "episodes.jsonl"),
                                        record_name=spec.record_name or spec.record_path)

        async def play() -> EpisodeResult:
            try:
                return await play_with_retries(local, built)
            finally:
                await built.close()

        result = asyncio.run(play())
        records = list(read_jsonl(local.record_path)) if local.record_path and os.path.exists(local.record_path) \
            else []
    return {"result": result.to_dict(), "records": records}


def keep_episode(store: RunDir, returned: dict[str, Any]) -> EpisodeResult:
    """Append a returned episode's records to the run's recording, then write its result."""
    for record in returned.get("records") or ():
        append_jsonl(store.record_path, record)
    result = EpisodeResult.from_dict(returned["result"])
    store.write_episode(result)
    return result


def run_on_ray(config: EvalConfig, todo: list[EpisodeSpec], store: RunDir, progress: Progress) -> None:
    """Run ``todo`` on the Ray cluster at ``config.ray_address`` with at most ``config.concurrency`` in flight."""
    try:
        import ray
    except ImportError:
        raise ValueError("--ray-address needs Ray: pip install 'termgym[eval]'") from None
    assert isinstance(config.agent, str)
    started_here = False
    if not ray.is_initialized():
        runtime_env = dict(config.ray_runtime_env or {})
        if "PYTHONPATH" in os.environ:
            env_vars = dict(runtime_env.get("env_vars") or {})
            env_vars.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
            runtime_env["env_vars"] = env_vars
        ray.init(address=config.ray_address, runtime_env=runtime_env or None, log_to_driver=False,
                 configure_logging=False)
        started_here = True
    remote = ray.remote(num_cpus=config.ray_cpus_per_episode, max_retries=0)(ray_episode)
    queue = deque(todo)
    in_flight: dict[Any, EpisodeSpec] = {}
    lost: Counter[tuple[str, int]] = Counter()
    try:
        while queue or in_flight:
            while queue and len(in_flight) < config.concurrency:
                spec = queue.popleft()
                ref = remote.remote(spec, config.agent, config.agent_options, list(config.imports))
                in_flight[ref] = spec
                progress.episode_started()
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                spec = in_flight.pop(ref)
                try:
                    returned = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker or its node died, or the task failed to run
                    key = (spec.task_id, spec.attempt)
                    lost[key] += 1
                    if lost[key] <= spec.infra_retries:
                        progress.episode_requeued()
                        time.sleep(min(spec.infra_backoff, 5.0))
                        queue.append(spec)
                        continue
                    result = EpisodeResult(
                        task_id=spec.task_id, attempt=spec.attempt, status="infra_error", seed=spec.seed,
                        error={"kind": "infra", "type": type(exc).__name__, "message": str(exc)[:4000],
                               "where": "ray", "retriable": True})
                    store.write_episode(result)
                else:
                    result = keep_episode(store, returned)
                progress.episode_finished(result)
    finally:
        for ref in in_flight:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        if started_here:
            ray.shutdown()
