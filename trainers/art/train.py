"""GRPO with OpenPipe ART on termgym envs: seed 004's training loop with seed 000's settings.

Seed 004's walkthrough (model registration with ``LocalBackend``, ``groups_per_step`` task groups
per step, ``backend.train``, resume from the last step in ``.art/.../state.json``, trajectory
logging with a sample rate and a config hash, a health monitor thread) on any termgym env, with
seed 000's defaults: Qwen3-4B, LoRA rank 64, learning rate 5e-7, 16 rollouts per task,
temperature 0.7, 4096 new tokens, process rewards (termgym's ``progress`` table; ``--process-table
seed000`` for seed 000's own), and an SFT warm start on
offline samples (``--offline-data``) through ART's ``model.train_sft``.

::

    python -m trainers.art.train --env-id termgym/SweSynth-v0 --offline-data samples.json
    # no GPU: play one step's groups against any OpenAI-compatible server, log them, stop
    python -m trainers.art.train --dry-run --base-url http://127.0.0.1:8000/v1 --served-model Qwen/Qwen3-4B

Training needs a CUDA GPU and ART's backend extra (``pip install 'openpipe-art[backend]==0.5.18'``:
vLLM + Unsloth). ``--dry-run`` runs everything up to the backend on CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # ART imports LiteLLM, which would fetch prices

logger = logging.getLogger("termgym.art")


@dataclass
class ExperimentConfig:
    """Everything that decides what a run learns (hashed into ``config_hash``)."""

    experiment_name: str = "default"
    model_name: str = "termgym-qwen3-4b"
    project: str = "termgym-art"
    base_model: str = "Qwen/Qwen3-4B"
    env_id: str = "termgym/SweSynth-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    split: str | None = None
    task_ids: list[str] | None = None
    process_rewards: bool = True
    process_table: str = "progress"
    num_epochs: int = 3
    groups_per_step: int = 8
    rollouts_per_group: int = 16
    max_concurrent: int = 32
    max_train_steps: int | None = 2000
    learning_rate: float = 5e-7
    lora_rank: int = 64
    temperature: float = 0.7
    max_new_tokens: int = 4096
    max_context_tokens: int = 28000
    offline_data: str | None = None
    sft_learning_rate: float = 5e-5
    sft_batch_size: int = 4
    eval_every: int = 100
    eval_split: str | None = None
    seed: int = 0

    def hash(self) -> str:
        from termgym.integrations.art import config_hash

        return config_hash(dataclasses.asdict(self))


@dataclass
class RunOptions:
    """How this process runs (not part of the experiment): logs, monitoring, dry run."""

    art_path: str = ".art"
    log_dir: str = "logs"
    log_sample_rate: float = 0.0
    health_check_interval: float = 60.0
    dry_run: bool = False
    base_url: str | None = None
    api_key: str = "EMPTY"
    served_model: str | None = None


def parse_args(argv: Sequence[str] | None = None) -> tuple[ExperimentConfig, RunOptions]:
    """The command line as an experiment config and run options; bad values exit with the reason."""
    defaults, run = ExperimentConfig(), RunOptions()
    p = argparse.ArgumentParser(prog="python -m trainers.art.train", description=__doc__.split("\n\n")[0])
    add = p.add_argument
    add("--experiment-name", default=defaults.experiment_name)
    add("--model-name", default=defaults.model_name, help="ART model name (its state lives under --art-path)")
    add("--project", default=defaults.project)
    add("--base-model", default=defaults.base_model, help="HuggingFace base model")
    add("--env-id", default=defaults.env_id, help="any registered termgym id")
    add("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
        help="gym.make keyword (VALUE parsed as JSON when it is JSON), e.g. protocol=terminus; repeatable")
    add("--split", default=None, help="the suite split to train on (default: the suite's)")
    add("--task-ids", default=None, help="comma-separated task ids instead of the split")
    add("--no-process-rewards", action="store_true", help="outcome reward only")
    add("--process-table", default=defaults.process_table, choices=("progress", "seed000"),
        help="process-reward table (docs/rewards.md): progress (default) or seed 000's")
    add("--num-epochs", type=int, default=defaults.num_epochs)
    add("--groups-per-step", type=int, default=defaults.groups_per_step, help="tasks per training step")
    add("--rollouts-per-group", type=int, default=defaults.rollouts_per_group, help="episodes per task (GRPO group)")
    add("--max-concurrent", type=int, default=defaults.max_concurrent, help="episodes running at once")
    add("--max-train-steps", type=int, default=defaults.max_train_steps, help="stop after this many steps")
    add("--learning-rate", type=float, default=defaults.learning_rate)
    add("--lora-rank", type=int, default=defaults.lora_rank)
    add("--temperature", type=float, default=defaults.temperature)
    add("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    add("--max-context-tokens", type=int, default=defaults.max_context_tokens)
    add("--offline-data", default=None, help="offline samples (.json/.jsonl, seed 000's format) for the SFT warm start")
    add("--sft-learning-rate", type=float, default=defaults.sft_learning_rate)
    add("--sft-batch-size", type=int, default=defaults.sft_batch_size)
    add("--eval-every", type=int, default=defaults.eval_every, help="evaluate every N steps (0: never)")
    add("--eval-split", default=None, help="split to evaluate on (default: no evaluation)")
    add("--seed", type=int, default=defaults.seed)
    add("--art-path", default=run.art_path)
    add("--log-dir", default=run.log_dir, help="trajectory logs go to LOG_DIR/EXPERIMENT/step_N/")
    add("--log-sample-rate", type=float, default=run.log_sample_rate, help="fraction of rollouts to log")
    add("--health-check-interval", type=float, default=run.health_check_interval, help="seconds (0: off)")
    add("--dry-run", action="store_true", help="play one step's groups against --base-url, log them and stop")
    add("--base-url", default=None, help="OpenAI-compatible endpoint for --dry-run")
    add("--api-key", default=os.environ.get("OPENAI_API_KEY", run.api_key))
    add("--served-model", default=None, help="model name the --base-url server knows (default: --base-model)")
    a = p.parse_args(argv)
    for name in ("num_epochs", "groups_per_step", "rollouts_per_group", "max_concurrent", "lora_rank",
                 "max_new_tokens", "max_context_tokens", "sft_batch_size"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    if a.max_train_steps is not None and a.max_train_steps < 1:
        p.error(f"--max-train-steps must be at least 1, got {a.max_train_steps}")
    if not 0.0 <= a.log_sample_rate <= 1.0:
        p.error(f"--log-sample-rate must be within 0..1, got {a.log_sample_rate}")
    if a.dry_run and not a.base_url:
        p.error("--dry-run needs --base-url (an OpenAI-compatible server to play the episodes with)")
    env_kwargs: dict[str, Any] = {}
    for item in a.env_kwarg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            p.error(f"--env-kwarg must look like KEY=VALUE, got {item!r}")
        try:
            env_kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            env_kwargs[key] = value
    task_ids = [t.strip() for t in a.task_ids.split(",") if t.strip()] if a.task_ids else None
    if a.task_ids is not None and not task_ids:
        p.error("--task-ids is empty")
    config = ExperimentConfig(
        experiment_name=a.experiment_name, model_name=a.model_name, project=a.project, base_model=a.base_model,
        env_id=a.env_id, env_kwargs=env_kwargs, split=a.split, task_ids=task_ids,
        process_rewards=not a.no_process_rewards, process_table=a.process_table, num_epochs=a.num_epochs, groups_per_step=a.groups_per_step,
        rollouts_per_group=a.rollouts_per_group, max_concurrent=a.max_concurrent, max_train_steps=a.max_train_steps,
        learning_rate=a.learning_rate, lora_rank=a.lora_rank, temperature=a.temperature,
        max_new_tokens=a.max_new_tokens, max_context_tokens=a.max_context_tokens, offline_data=a.offline_data,
        sft_learning_rate=a.sft_learning_rate, sft_batch_size=a.sft_batch_size, eval_every=a.eval_every,
        eval_split=a.eval_split, seed=a.seed)
    options = RunOptions(art_path=a.art_path, log_dir=a.log_dir, log_sample_rate=a.log_sample_rate,
                         health_check_interval=a.health_check_interval, dry_run=a.dry_run, base_url=a.base_url,
                         api_key=a.api_key, served_model=a.served_model)
    return config, options


def rollout_config(config: ExperimentConfig):
    """The per-episode settings: the env (process rewards with ``process_table`` unless turned off) and sampling."""
    from termgym.integrations.art import RolloutConfig
    from termgym.integrations.episodes import EnvRecipe

    rewards = {"table": config.process_table} if config.process_rewards else None
    env = EnvRecipe(config.env_id, dict(config.env_kwargs), rewards)
    return RolloutConfig(env, temperature=config.temperature, max_tokens=config.max_new_tokens)


def trainable_model(config: ExperimentConfig, options: RunOptions):
    """The ART model to train: the base model with a LoRA adapter of ``lora_rank``, sequences up to the context budget."""
    import art

    return art.TrainableModel(
        name=config.model_name, project=config.project, base_model=config.base_model, base_path=options.art_path,
        _internal_config=art.dev.InternalModelConfig(
            init_args={"max_seq_length": config.max_context_tokens},
            peft_args={"r": config.lora_rank, "lora_alpha": config.lora_rank}))


def initial_step(state: dict[str, Any] | None, config_hash: str) -> int:
    """Where to resume: the step after the last one ``state.json`` records (seed 004's rule).

    Resuming a run whose config changed (say, more steps or a new learning rate) is allowed but
    logged with both hashes, so the trajectory logs and metrics can be told apart.
    """
    if not state or "step" not in state:
        return 0
    if state.get("config_hash") not in (None, config_hash):
        logger.warning("resuming from step %d with a changed config: %s -> %s", int(state["step"]) + 1,
                       state["config_hash"], config_hash)
    return int(state["step"]) + 1


def summarize(groups: Sequence[Any]) -> dict[str, float]:
    """Step metrics: mean reward, solve rate, steps and format errors over the step's trajectories."""
    trajectories = [t for g in groups for t in g.trajectories]
    exceptions = sum(len(g.exceptions) for g in groups)
    n = max(1, len(trajectories))
    out = {"reward": sum(t.reward for t in trajectories) / n, "trajectories": float(len(trajectories)),
           "exceptions": float(exceptions)}
    for key in ("passed", "steps", "format_errors", "end/submitted"):
        out[key] = sum(t.metrics.get(key, 0.0) for t in trajectories) / n
    return out


async def run(config: ExperimentConfig, options: RunOptions) -> dict[str, Any]:
    """Train (or with ``dry_run``, play and log one step); returns the last step's summary."""
    import art
    from art.utils.iterate_dataset import iterate_dataset

    from termgym.integrations.art import TrajectoryLogger, gather_groups

    digest = config.hash()
    logger.info("experiment %s, config %s", config.experiment_name, digest)
    if options.health_check_interval > 0:
        from trainers.verl.monitor import start_health_monitor

        start_health_monitor(options.health_check_interval)
    rollouts = rollout_config(config)
    task_ids = config.task_ids or await asyncio.to_thread(rollouts.env.task_ids, config.split)
    if not task_ids:
        raise SystemExit(f"{config.env_id}: no tasks in split {config.split!r}")
    trajectory_log = TrajectoryLogger(options.log_dir, config.experiment_name, options.log_sample_rate, digest)

    async def play(model: Any, tasks: Sequence[str], rollouts_per_group: int) -> list[Any]:
        return await gather_groups(model, tasks, rollouts, rollouts_per_group=rollouts_per_group,
                                   max_concurrent=config.max_concurrent, max_exceptions=len(tasks) * rollouts_per_group // 4)

    if options.dry_run:
        model = art.Model(name=config.model_name, project=config.project, inference_base_url=options.base_url,
                          inference_api_key=options.api_key, inference_model_name=options.served_model or config.base_model,
                          base_path=options.art_path)
        batch = next(iterate_dataset(task_ids, config.groups_per_step, config.num_epochs, 0, use_tqdm=False))
        groups = await play(model, batch.items, config.rollouts_per_group)
        written = trajectory_log.log(batch.step, groups)
        summary = {"step": batch.step, "tasks": list(batch.items), "config_hash": digest,
                   "logged": [str(p) for p in written], **summarize(groups)}
        print(json.dumps(summary, indent=1))
        print("dry run: stopping here. Training needs ART's LocalBackend (vLLM + Unsloth) on a CUDA GPU: "
              "pip install 'openpipe-art[backend]==0.5.18', then run without --dry-run.", file=sys.stderr)
        return summary

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("training needs a CUDA GPU (ART's LocalBackend runs vLLM and Unsloth); "
                         "use --dry-run --base-url URL to check the rollouts on this machine")
    from art.local import LocalBackend

    backend = LocalBackend(path=options.art_path)
    model = trainable_model(config, options)
    await model.register(backend)
    state = model.read_state() or {}
    start = initial_step(state, digest)
    model.merge_state({"config_hash": digest})

    if config.offline_data and not state.get("sft_done"):
        from termgym.data.samples import read_samples
        from termgym.integrations.art import sample_to_trajectory

        warm = [sample_to_trajectory(s) for s in read_samples(config.offline_data)]
        logger.info("SFT warm start on %d offline samples", len(warm))
        await model.train_sft(warm, config=art.TrainSFTConfig(learning_rate=config.sft_learning_rate,
                                                              batch_size=config.sft_batch_size))
        model.merge_state({"sft_done": True})

    eval_ids = (await asyncio.to_thread(rollouts.env.task_ids, config.eval_split)) if config.eval_split else []
    summary: dict[str, Any] = {}
    for batch in iterate_dataset(task_ids, config.groups_per_step, config.num_epochs, start):
        if config.max_train_steps is not None and batch.step >= config.max_train_steps:
            break
        groups = await play(model, batch.items, config.rollouts_per_group)
        result = await backend.train(model, groups, learning_rate=config.learning_rate)
        summary = {"step": batch.step, **summarize(groups)}
        await model.log(groups, split="train", metrics={**result.metrics, **{f"termgym/{k}": v for k, v in
                                                                              summary.items() if k != "step"}})
        trajectory_log.log(batch.step, groups)
        model.merge_state({"step": batch.step, "config_hash": digest})
        if eval_ids and config.eval_every and batch.step % config.eval_every == 0:
            await model.log(await play(model, eval_ids, 1), split="val")
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config, options = parse_args(argv)
    return asyncio.run(run(config, options))


if __name__ == "__main__":
    main()
    sys.exit(0)
