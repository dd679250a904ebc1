"""Launch configs for the veRL recipe, as Hydra overrides of veRL's own configs.

``config/grpo_qwen3_4b_h200.yaml`` and ``config/sft_qwen3_4b_h200.yaml`` map override keys to
values; ``${NAME}`` placeholders are filled from :func:`placeholders`. :func:`compose` checks them
against veRL's schema exactly as ``python -m verl.trainer.main_ppo`` would (an unknown key
raises), and :func:`command` builds the command line the shell scripts run::

    python -m trainers.verl.launch grpo --data-dir data/swesynth --model Qwen/Qwen3-4B --print
    python -m trainers.verl.launch grpo --data-dir data/swesynth -- trainer.total_training_steps=10
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = Path(__file__).resolve().parent / "config"
RECIPES = {
    "grpo": ("grpo_qwen3_4b_h200.yaml", "ppo_trainer"),
    "sft": ("sft_qwen3_4b_h200.yaml", "sft_trainer_engine"),
}
_PLACEHOLDER = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")


def verl_config_dir() -> Path:
    """veRL's Hydra config folder (``verl/trainer/config``) in the installed package."""
    import verl

    return Path(verl.__file__).resolve().parent / "trainer" / "config"


def placeholders(*, data_dir: str, model: str = "Qwen/Qwen3-4B", experiment: str = "qwen3-4b-grpo",
                 ckpt_dir: str | None = None) -> dict[str, str]:
    """Values for the ``${NAME}`` placeholders in the recipe files."""
    return {
        "TERMGYM_ROOT": str(ROOT),
        "DATA_DIR": str(Path(data_dir).resolve()),
        "MODEL": model,
        "EXPERIMENT": experiment,
        "CKPT_DIR": str(Path(ckpt_dir or ROOT / "checkpoints" / experiment).resolve()),
    }


def load_overrides(recipe: str, values: Mapping[str, str]) -> list[str]:
    """The recipe's overrides as ``key=value`` strings, placeholders filled in."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    path = CONFIG_DIR / RECIPES[recipe][0]
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of override keys to values")
    return [f"{key}={_render(value, values, path, key)}" for key, value in data.items()]


def _render(value: Any, values: Mapping[str, str], path: Path, key: str) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_render(v, values, path, key) for v in value) + "]"
    if isinstance(value, str):
        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in values:
                raise ValueError(f"{path}: {key} uses ${{{name}}}, which has no value")
            return values[name]

        text = _PLACEHOLDER.sub(fill, value)
        if re.search(r"[\s,\[\]{}=:'\"]", text) and not text.startswith("/"):
            text = "'" + text.replace("'", "\\'") + "'"
        return text
    raise ValueError(f"{path}: {key} has a value of type {type(value).__name__} that Hydra overrides cannot express")


def compose(recipe: str, overrides: Sequence[str]):
    """Compose veRL's config for ``recipe`` with ``overrides`` (raises on an unknown key)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_name = RECIPES[recipe][1]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return hydra_compose(config_name=config_name, overrides=list(overrides))


def steps_within(overrides: Sequence[str], hours: float, *, seconds_per_step: float | None = None) -> int:
    """GRPO steps that fit in ``hours`` for the batch shape these overrides set (last value wins).

    The step time is :func:`trainers.verl.plan.step_seconds` for ``data.train_batch_size`` groups x
    ``actor_rollout_ref.rollout.n`` rollouts in a ``max_prompt_length + max_response_length``
    context, or ``seconds_per_step`` when measured.
    """
    from trainers.verl import plan

    values = dict(o.split("=", 1) for o in overrides if "=" in o)

    def number(key: str) -> int:
        if key not in values:
            raise ValueError(f"--hours needs {key} in the recipe or the overrides")
        try:
            return int(values[key])
        except ValueError:
            raise ValueError(f"--hours: {key}={values[key]!r} is not a whole number") from None

    if seconds_per_step is None:
        shape = plan.StepShape.from_budget(groups=number("data.train_batch_size"),
                                           rollouts=number("actor_rollout_ref.rollout.n"),
                                           context=number("data.max_prompt_length") + number("data.max_response_length"))
        seconds_per_step = plan.step_seconds(shape)["total"]
    return plan.steps_for_hours(hours, seconds_per_step)


def command(recipe: str, overrides: Sequence[str]) -> list[str]:
    """The command line that runs ``recipe`` with ``overrides``."""
    if recipe == "grpo":
        return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    return ["torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=1", "-m", "verl.trainer.sft_trainer", *overrides]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", choices=sorted(RECIPES))
    parser.add_argument("--data-dir", required=True, help="folder with train.parquet/val.parquet (grpo) or sft_train.parquet")
    parser.add_argument("--model", default="Qwen/Qwen3-4B", help="HF id or local path of the starting model")
    parser.add_argument("--experiment", default=None)
    parser.add_argument("--ckpt-dir", default=None, help="checkpoint folder (resume picks up its last step)")
    parser.add_argument("--lora-adapter", default=None, help="start GRPO from this LoRA adapter (the SFT warm start)")
    parser.add_argument("--hours", type=float, default=None,
                        help="grpo: set trainer.total_training_steps to what fits in this many hours (trainers/verl/plan.py)")
    parser.add_argument("--seconds-per-step", type=float, default=None,
                        help="with --hours: a measured step time (veRL's timing_s/step) instead of the projection")
    parser.add_argument("--wandb", action="store_true", help="also log to Weights & Biases (off by default)")
    parser.add_argument("--check", action="store_true", help="compose against veRL's config first (a few seconds)")
    parser.add_argument("--print", action="store_true", help="print the command instead of running it")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser.epilog = "Everything after -- is passed to veRL as Hydra overrides."
    args = parser.parse_args(argv)
    experiment = args.experiment or f"qwen3-4b-{args.recipe}"
    values = placeholders(data_dir=args.data_dir, model=args.model, experiment=experiment, ckpt_dir=args.ckpt_dir)
    overrides = load_overrides(args.recipe, values)
    if args.wandb:
        overrides.append("trainer.logger=[console,wandb]")
    if args.lora_adapter:
        if args.recipe != "grpo":
            parser.error("--lora-adapter applies to grpo")
        overrides.append(f"actor_rollout_ref.model.lora_adapter_path={Path(args.lora_adapter).resolve()}")
    overrides.extend(extra)
    if args.hours is not None:
        if args.recipe != "grpo":
            parser.error("--hours applies to grpo")
        steps = steps_within(overrides, args.hours, seconds_per_step=args.seconds_per_step)
        print(f"--hours {args.hours:g}: trainer.total_training_steps={steps}", file=sys.stderr)
        overrides.append(f"trainer.total_training_steps={steps}")
    if args.check:
        compose(args.recipe, overrides)
    cmd = command(args.recipe, overrides)
    if args.print:
        print(shlex.join(cmd))
        return 0
    env = dict(os.environ)
    # Ray workers import trainers.verl.* (agent loop, estimator) from the repository root.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    os.execvpe(cmd[0], cmd, env)


if __name__ == "__main__":
    sys.exit(main())
