"""GRPO with Tinker on Harbor tasks through termgym: seed 002's trainer as a tinker-cookbook config.

Seed 002 runs Harbor tasks with the Terminus-2 agent, samples and trains through the Tinker API,
and keeps token ids and logprobs per turn for GRPO. Here the tasks are ``termgym/Harbor-v0``
(any Harbor/Terminal-Bench folder, ``protocol="terminus"``), the rollouts are tinker-cookbook's
(:mod:`termgym.integrations.tinker`: every turn's sampled tokens and logprobs are a cookbook
``Transition``), and ``tinker_cookbook.rl.train`` runs GRPO (rewards centred per group of
``group_size`` episodes of one task). The command line takes seed 002's keys::

    python -m trainers.tinker.train model_name=Qwen/Qwen3-235B-A22B-Instruct-2507 \\
        tasks_dir=./terminal-bench-2 learning_rate=3e-4 batch_size=8 group_size=4 max_tokens=4096 \\
        temperature=0.7 n_epochs=1 loss_fn=ppo environment_type=docker wandb_project=train-qwen
    # no Tinker service: build the config and dataset, start the first group's episodes, stop
    python -m trainers.tinker.train dry_run=True tokenizer=/path/to/local/tokenizer environment_type=local

Training needs ``TINKER_API_KEY`` and the Tinker service; ``dry_run=True`` runs up to there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

import chz

logger = logging.getLogger("termgym.tinker")

#: Seed 002's ``environment_type`` values termgym has a sandbox backend for.
BACKENDS = {"docker": "docker", "local": "local"}


@chz.chz
class CLIConfig:
    """Seed 002's training parameters (same names, same defaults), plus termgym's env settings."""

    model_name: str = "Qwen/Qwen3-235B-A22B-Instruct-2507"
    tasks_dir: str | None = None  # a Harbor dataset folder; None: termgym's bundled Harbor samples
    lora_rank: int = 32
    learning_rate: float = 5e-5
    batch_size: int = 8  # tasks per batch
    group_size: int = 4  # rollouts per task (GRPO group)
    max_turns: int | None = None  # None: the env's own step limit
    max_tokens: int = 4096
    temperature: float = 0.7
    n_epochs: int = 1
    loss_fn: str = "importance_sampling"
    environment_type: str = "docker"
    wandb_project: str | None = None
    wandb_name: str | None = None
    # termgym additions
    protocol: str = "terminus"  # Terminus-2's JSON protocol, as seed 002's agent speaks
    wait: str = "duration"  # Terminus-2 sleeps each command's duration; "idle" ends a wait once the shell is back
    split: str | None = None  # None: all tasks (docker) or the local-eligible ones (local)
    renderer_name: str | None = None  # None: the cookbook's recommendation for model_name
    tokenizer: str | None = None  # tokenizer to load instead of model_name's (a local folder works)
    max_trajectory_tokens: int = 32 * 1024
    process_rewards: bool = False  # seed 002 trains on the verifier's reward alone
    time_limit: float | None = 900.0
    log_path: str = "/tmp/termgym-tinker"
    save_every: int = 20
    eval_every: int = 0
    dry_run: bool = False
    seed: int = 0


def dataset_builder(cli: CLIConfig):
    """The cookbook dataset builder: Harbor tasks as groups of ``group_size`` termgym episodes."""
    from termgym.integrations.tinker import TermgymDatasetBuilder

    if cli.environment_type not in BACKENDS:
        raise ValueError(f"environment_type={cli.environment_type!r}: termgym runs Harbor tasks on "
                         f"{' or '.join(BACKENDS)} (seed 002's modal/daytona/e2b/runloop are not available)")
    if cli.batch_size < 1 or cli.group_size < 1:
        raise ValueError(f"batch_size and group_size must be at least 1, got {cli.batch_size} and {cli.group_size}")
    if cli.wait not in ("duration", "idle"):
        raise ValueError(f"wait must be 'duration' or 'idle', got {cli.wait!r}")
    if cli.max_turns is not None and cli.max_turns < 1:
        raise ValueError(f"max_turns must be at least 1 or None, got {cli.max_turns}")
    backend = BACKENDS[cli.environment_type]
    env_kwargs: dict[str, Any] = {"backend": backend, "protocol": cli.protocol, "time_limit": cli.time_limit}
    if cli.protocol == "terminus" and cli.wait != "duration":
        env_kwargs["protocol_options"] = {"wait": cli.wait}
    if cli.tasks_dir is not None:
        env_kwargs["tasks_dir"] = cli.tasks_dir
    if cli.max_turns is not None:
        env_kwargs["max_steps"] = cli.max_turns
    split = cli.split if cli.split is not None else ("local" if backend == "local" else None)
    return TermgymDatasetBuilder(
        env_id="termgym/Harbor-v0", model_name_for_tokenizer=cli.tokenizer or cli.model_name,
        renderer_name=renderer_name(cli), batch_size=cli.batch_size, group_size=cli.group_size, split=split,
        env_kwargs=env_kwargs, process_rewards={} if cli.process_rewards else None,
        max_trajectory_tokens=cli.max_trajectory_tokens, seed=cli.seed)


def renderer_name(cli: CLIConfig) -> str:
    if cli.renderer_name:
        return cli.renderer_name
    from tinker_cookbook import model_info

    return model_info.get_recommended_renderer_name(cli.model_name)


def train_config(cli: CLIConfig):
    """The ``tinker_cookbook.rl.train.Config`` of the run."""
    from tinker_cookbook.rl.train import Config

    return Config(
        learning_rate=cli.learning_rate, dataset_builder=dataset_builder(cli), model_name=cli.model_name,
        recipe_name="termgym_harbor_grpo", max_tokens=cli.max_tokens, log_path=cli.log_path,
        renderer_name=renderer_name(cli), lora_rank=cli.lora_rank, temperature=cli.temperature,
        loss_fn=cli.loss_fn, num_epochs=cli.n_epochs, wandb_project=cli.wandb_project, wandb_name=cli.wandb_name,
        save_every=cli.save_every, eval_every=cli.eval_every)


async def dry_run(cli: CLIConfig) -> dict[str, Any]:
    """Build the config and the dataset, start the first group's episodes (real sandboxes), and stop."""
    config = train_config(cli)
    train, _test = await config.dataset_builder()
    group = train.get_batch(0)[0]
    envs = await group.make_envs()
    try:
        prompts = [await env.initial_observation() for env in envs]
    finally:
        await group.cleanup()
    summary = {"batches": len(train), "groups_in_first_batch": len(train.get_batch(0)), "first_task": group.task_id,
               "group_size": len(envs), "prompt_tokens": [ob.length for ob, _stop in prompts],
               "renderer": config.renderer_name, "loss_fn": config.loss_fn, "learning_rate": config.learning_rate}
    logger.info("dry run: %s", summary)
    print("dry run: stopping here. Sampling and training go through the Tinker service "
          "(set TINKER_API_KEY and run without dry_run=True).", file=sys.stderr)
    return summary


async def cli_main(cli: CLIConfig) -> Any:
    if cli.dry_run:
        return await dry_run(cli)
    if not os.environ.get("TINKER_API_KEY"):
        raise SystemExit("training needs the Tinker service: set TINKER_API_KEY (or use dry_run=True)")
    from tinker_cookbook.rl.train import main

    return await main(train_config(cli))


def main(argv: list[str] | None = None) -> Any:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cli = chz.entrypoint(CLIConfig, argv=argv if argv is not None else sys.argv[1:])
    return asyncio.run(cli_main(cli))


if __name__ == "__main__":
    main()
