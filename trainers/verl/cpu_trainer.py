"""veRL's own v1 trainer, on CPU, for a few steps: the recipe's config with only the device pieces swapped.

    python -m trainers.verl.cpu_trainer --out /tmp/run --steps 3           # train, checkpoint
    python -m trainers.verl.cpu_trainer --out /tmp/run --steps 4           # resume, one more step

This runs ``verl.trainer.main_ppo``'s ``run_ppo`` with ``TaskRunnerV1`` (the path
``trainers/verl/train_grpo.sh`` launches) over the GRPO recipe (``config/grpo_qwen3_4b_h200.yaml``)
on a tiny random Qwen3 and the smoke suite (:mod:`trainers.verl.smoke_suite`, real sandboxes).
What differs from the recipe, and why:

* the device: veRL's CPU platform is :mod:`trainers.verl.cpu_platform` (veRL 0.9.1 has none),
  FSDP2 (FSDP1 needs an accelerator), sdpa attention (no flash-attn on CPU), fp32;
* generation: :mod:`trainers.verl.hf_rollout` (HF ``generate`` behind veRL's replica/server
  protocol) instead of vLLM; the LoRA adapter is merged for the weight sync (the stand-in loads
  full weights) and is rank 8 on the tiny model;
* sizes: tiny model, 2 groups x 4 rollouts, short responses, one agent-loop worker.

Everything else — veRL's dataloader, agent-loop workers, TransferQueue, replay buffer, actor
worker and FSDP engine, log-prob/advantage/update pipeline, weight sync, metrics, checkpoints
and resume — is veRL's own code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.verl import launch

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CpuSetup:
    """What a CPU run trains on: the suite, the tiny model's extra tokens, how the rollout answers.

    :data:`SMOKE` (the smoke suite: scripted solutions next to random text, ProcessReward on) is the
    default; :func:`trainers.verl.learning.learning_setup` is a task a policy can learn.
    """

    env_id: str
    import_module: str
    train: str
    val: str
    epochs: int
    scripts: dict[str, list[str | None]] = field(default_factory=dict)
    choices: tuple[str, ...] = ()
    #: prompt words the tiny tokenizer keeps as one token each (``build_tiny_tokenizer(words=...)``)
    words: tuple[str, ...] = ()
    #: ``gym.make`` arguments of every row (``extra_info.env_kwargs``), e.g. a suite option
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: the suite split whose task list ``train`` and ``val`` index (``None``: the suite's default)
    split: str | None = None
    wrappers: tuple[str, ...] = ()
    max_tokens_per_turn: int = 48
    groups: int = 2
    n: int = 4
    response_length: int = 384
    #: the tiny model's random-weight std (:func:`trainers.verl.tiny_model.build_tiny_model`)
    initializer_range: float = 0.02
    #: the tiny model's random-weight seed
    seed: int = 0


def smoke_setup() -> CpuSetup:
    """The smoke suite as the trainer test has always run it."""
    from trainers.verl.smoke_suite import ENV_ID, SCRIPTS

    return CpuSetup(env_id=ENV_ID, import_module="trainers.verl.smoke_suite", train="0-2", val="3", epochs=4,
                    scripts=SCRIPTS, wrappers=("termgym.wrappers.rewards:ProcessReward",))


def cpu_overrides(*, data_dir: str | Path, model_dir: str | Path, ckpt_dir: str | Path, agent_loops: str | Path,
                  steps: int, groups: int = 2, n: int = 4, response_length: int = 384,
                  scripts: dict[str, list[str | None]] | None = None, choices: Sequence[str] = (),
                  ray_address: str | None = None) -> list[str]:
    """The GRPO recipe's overrides, then the CPU ones (later overrides win in Hydra); ``ray_address``: see
    :func:`ray_overrides`."""
    values = launch.placeholders(data_dir=str(data_dir), model=str(model_dir), experiment="cpu-trainer",
                                 ckpt_dir=str(ckpt_dir))
    overrides = launch.load_overrides("grpo", values)
    overrides += [
        # device: CPU platform, FSDP2, sdpa, fp32; the HF rollout stand-in
        "trainer.device=cpu",
        *ray_overrides(ray_address),
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=trainers.verl.hf_rollout.setup_cpu_worker",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.model.use_remove_padding=false",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        # LoRA as in the recipe (the reference policy is the adapter-disabled actor), merged for the
        # weight sync: the rollout stand-in loads full weights
        "actor_rollout_ref.model.lora_rank=8",
        "actor_rollout_ref.model.lora_alpha=16",
        "actor_rollout_ref.model.lora.merge=true",
        "actor_rollout_ref.actor.fsdp_config.model_dtype=fp32",
        "actor_rollout_ref.actor.fsdp_config.dtype=float32",
        "actor_rollout_ref.ref.fsdp_config.model_dtype=fp32",
        "actor_rollout_ref.ref.fsdp_config.dtype=float32",
        "actor_rollout_ref.rollout.name=termgym_hf",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loops}",
        f"+actor_rollout_ref.rollout.custom={{termgym_scripts:{_hydra_json(scripts or {})},"
        f"termgym_choices:{_hydra_json(list(choices))}}}",
        "reward.num_workers=1",
        # sizes
        f"data.train_batch_size={groups}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={groups}",
        f"actor_rollout_ref.rollout.n={n}",
        "data.max_prompt_length=1024",
        f"data.max_response_length={response_length}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.rollout.max_model_len={1024 + response_length}",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=4096",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        # schedule: every step checkpointed, no validation (the smoke suite has no held-out tasks)
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.logger=[console,file]",
        "trainer.log_val_generations=0",
    ]
    return overrides


def ray_overrides(address: str | None = None) -> list[str]:
    """How veRL starts Ray: a one-node cluster of its own (``address`` ``None``), or the running cluster at
    ``address`` (``"auto"``, ``"HOST:PORT"``), whose nodes bring their own CPUs and resources: then one of
    them must declare a GPU (``ray start --num-gpus=1``) for veRL to place its workers, and sandbox nodes
    are best started with ``--num-cpus=0`` so that none of veRL's workers lands beside the sandboxes
    (TransferQueue's storage units are then kept to the nodes with a GPU)."""
    if address is not None:
        # TransferQueue spreads its storage units over every node (node affinity, one CPU each): keep
        # them on the GPU node, not on sandbox nodes that offer no CPU to veRL
        return [f"+ray_kwargs.ray_init.address={address}",
                "++transfer_queue.backend.SimpleStorage.required_node_resource=GPU"]
    return [
        "+ray_kwargs.ray_init.num_cpus=16",
        # veRL checks the cluster for a "GPU" resource before placing its workers: declare one logical
        # GPU (nothing requests it; the CPU platform places workers on CPU bundles)
        "+ray_kwargs.ray_init.num_gpus=1",
        "+ray_kwargs.ray_init.include_dashboard=false",  # nothing looks at it; it costs start-up time
    ]


def _hydra_str(text: str) -> str:
    """A string as a quoted Hydra value (Hydra unescapes only a backslash before a quote)."""
    return "'" + text.replace("'", "\\'") + "'"


def _hydra_json(value: Any) -> str:
    """A JSON value as a quoted Hydra string (the rollout stand-in parses it back)."""
    # Hydra keeps backslashes in quoted strings (it only unescapes \' and a backslash before a quote)
    return _hydra_str(json.dumps(value))


def write_agent_loops(path: str | Path, *, max_tokens_per_turn: int = 48, setup: CpuSetup | None = None,
                      agent_loop: str | None = None, trajectory_dir: str | Path | None = None) -> Path:
    """The recipe's agent-loop yaml with the setup's suite imported and its wrappers (the smoke
    suite's: process rewards on); ``agent_loop`` replaces the loop class (``module.Class``).
    ``trajectory_dir``: every episode recorded there, so the trainer's credit checks
    (:func:`trainers.verl.metrics.credit_metrics`) can match each trajectory to its episode."""
    import yaml

    setup = setup or smoke_setup()
    entries = yaml.safe_load((launch.CONFIG_DIR / "agent_loops.yaml").read_text())
    entry = dict(entries[0])
    entry.update(max_tokens_per_turn=max_tokens_per_turn, import_modules=[setup.import_module],
                 wrappers=list(setup.wrappers), max_concurrent_episodes=8,
                 trajectory_dir=str(trajectory_dir) if trajectory_dir else None,
                 log_sample_rate=1.0 if trajectory_dir else 0.0, health_check_interval=0)
    if agent_loop:
        entry["_target_"] = agent_loop
    path = Path(path)
    path.write_text(yaml.safe_dump([entry], sort_keys=False))
    return path


def prepare(out: str | Path, setup: CpuSetup | None = None, *, agent_loop: str | None = None) -> dict[str, Path]:
    """Model, data and agent-loop config under ``out`` (reused when present); every episode is recorded
    under ``out/episodes`` (termgym's episode records, one file per training step)."""
    import importlib

    from trainers.verl.prepare_data import write_rl
    from trainers.verl.tiny_model import save_tiny_checkpoint

    setup = setup or smoke_setup()
    importlib.import_module(setup.import_module)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = out / "model"
    if not (model_dir / "config.json").exists():
        save_tiny_checkpoint(model_dir, seed=setup.seed, extra_tokens=setup.choices, words=setup.words,
                             initializer_range=setup.initializer_range)
    data_dir = out / "data"
    if not (data_dir / "train.parquet").exists():
        write_rl(setup.env_id, data_dir, train=setup.train, val=setup.val, epochs=setup.epochs,
                 env_kwargs=setup.env_kwargs or None, split=setup.split)
    agent_loops = write_agent_loops(out / "agent_loops.yaml", max_tokens_per_turn=setup.max_tokens_per_turn,
                                    setup=setup, agent_loop=agent_loop, trajectory_dir=out / "episodes")
    return {"model": model_dir, "data": data_dir, "agent_loops": agent_loops, "ckpt": out / "checkpoints",
            "episodes": out / "episodes"}


def run(out: str | Path, *, steps: int, extra: Sequence[str] = (), log_name: str | None = None,
        setup: CpuSetup | None = None, agent_loop: str | None = None, platform: str | None = "cpu",
        ray_address: str | None = None) -> Path:
    """Run veRL's v1 trainer until ``steps`` (resuming from ``out``'s checkpoints); returns the metrics log.

    ``setup`` picks the suite (default: the smoke suite); ``agent_loop`` replaces the agent-loop class
    and ``extra`` are further Hydra overrides (later ones win). ``platform=None`` leaves veRL's own
    device platform (CUDA) in place: :mod:`trainers.verl.gpu_step_split` runs this path on a GPU.
    ``ray_address``: join that running Ray cluster instead of starting one (:func:`ray_overrides`);
    with the setup's ``env_kwargs`` ``{"ray": ...}`` every sandbox then runs on the cluster's sandbox nodes.
    """
    from omegaconf import OmegaConf

    from trainers.verl.cpu_platform import use_cpu_platform
    from trainers.verl.hf_rollout import setup_cpu_worker
    setup = setup or smoke_setup()
    if platform == "cpu":
        use_cpu_platform()
        setup_cpu_worker()
    else:
        from trainers.verl.hf_rollout import setup_gpu_worker

        setup_gpu_worker()
    paths = prepare(out, setup, agent_loop=agent_loop)
    log_path = Path(out) / (log_name or f"metrics_to_step{steps}.jsonl")
    os.environ["VERL_FILE_LOGGER_PATH"] = str(log_path)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    overrides = cpu_overrides(data_dir=paths["data"], model_dir=paths["model"], ckpt_dir=paths["ckpt"],
                              agent_loops=paths["agent_loops"], steps=steps, groups=setup.groups, n=setup.n,
                              response_length=setup.response_length, scripts=setup.scripts,
                              choices=setup.choices, ray_address=ray_address) + list(extra)
    if ray_address is not None:
        # the workers of a running cluster do not inherit this process's environment: veRL's file logger
        # (in the TaskRunner) learns where to write through the job's runtime env
        overrides.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={_hydra_str(str(log_path.resolve()))}")
    config = launch.compose("grpo", overrides)
    # the same checks and entry point as ``python -m verl.trainer.main_ppo``
    import ray
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    OmegaConf.set_struct(config, True)
    try:
        for attempt in range(3):
            try:
                run_ppo(config, task_runner_class=TaskRunnerV1)
                break
            except Exception as exc:
                # Ray gives its raylet a fixed 30 s to register; on a loaded machine that can pass. Nothing
                # has run yet then: start the cluster again.
                if "timed out during startup" not in str(exc) or attempt == 2:
                    raise
                ray.shutdown()
    finally:
        ray.shutdown()  # a later run (the resume) starts from a clean cluster, as a relaunch would
    return log_path


def read_metrics(path: str | Path) -> dict[int, dict[str, Any]]:
    """Step -> metrics dict, from veRL's file logger."""
    steps = {}
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        steps[int(record["step"])] = record["data"]
    return steps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.cpu_trainer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for model, data, checkpoints and metrics")
    parser.add_argument("--steps", type=int, default=3, help="train until this global step (resumes)")
    args, extra = parser.parse_known_args(argv)
    log = run(args.out, steps=args.steps, extra=extra)
    for step, metrics in sorted(read_metrics(log).items()):
        print(step, {k: round(v, 4) if isinstance(v, float) else v for k, v in sorted(metrics.items())
                     if k.startswith(("termgym/", "actor/pg_loss"))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
