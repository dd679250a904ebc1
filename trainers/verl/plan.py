"""How long a GRPO run takes on one H200, and how many steps fit in a time budget.

    python -m trainers.verl.plan                                  # the recipe's default, projected
    python -m trainers.verl.plan --hours 12                       # steps that fit in 12 h
    python -m trainers.verl.plan --hours 24 --seconds-per-step 190   # re-plan from a measured step

One step = generate ``episodes`` trajectories, then three passes over their tokens on the actor:
old log-probs and reference log-probs (forward) and the update (forward + backward)::

    step_s = episodes * mean_tokens * (1 / update_rate + 2 / forward_rate)
           + episodes * mean_generated / generation_rate + overhead_s

The actor rates were measured on a lent H200 (2026-11-25, Qwen3-4B shape, bf16 compute, gradient
checkpointing, LoRA r64, fp32 base weights): update 6.3k tokens/s (1 x 32k micro-batch) to 9.9k
(4 x 8k), forward log-probs 24k-35k. The generation rate is an **estimate** (vLLM has not been
measured on this recipe yet): replace it with the measured one after the first steps
(``--generation-rate``, or simply ``--seconds-per-step``).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

#: Measured on one H200 (see the module docstring); the middle of the measured ranges.
UPDATE_TOKENS_PER_S = 8_000.0
FORWARD_TOKENS_PER_S = 30_000.0
#: ESTIMATE, not measured: vLLM decode summed over ~64 concurrent Qwen3-4B sequences on one H200.
GENERATION_TOKENS_PER_S = 4_000.0
#: Weight sync, vLLM wake/sleep, batch balancing, logging: an estimate per step.
OVERHEAD_S = 15.0


@dataclass(frozen=True)
class StepShape:
    """What one step processes: episodes and their mean lengths (prompt + response, and generated)."""

    episodes: int
    mean_tokens: float
    mean_generated: float

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.mean_tokens <= 0 or not 0 < self.mean_generated <= self.mean_tokens:
            raise ValueError(f"a step needs episodes >= 1 and 0 < mean_generated <= mean_tokens, got {self}")

    @classmethod
    def from_budget(cls, *, groups: int, rollouts: int, context: int, fill: float = 0.5,
                    generated_share: float = 0.4) -> StepShape:
        """Episodes that use ``fill`` of the ``context`` budget on average, ``generated_share`` of it model tokens.

        The defaults follow the issue's measurement plan (~16k tokens of a 32k budget) and assume
        the model writes ~40% of a trajectory (the rest: prompt and command output).
        """
        if not 0 < fill <= 1 or not 0 < generated_share <= 1:
            raise ValueError(f"fill and generated_share must be within (0, 1], got {fill}, {generated_share}")
        mean = context * fill
        return cls(episodes=groups * rollouts, mean_tokens=mean, mean_generated=mean * generated_share)


def step_seconds(shape: StepShape, *, update_rate: float = UPDATE_TOKENS_PER_S, forward_rate: float = FORWARD_TOKENS_PER_S,
                 generation_rate: float = GENERATION_TOKENS_PER_S, overhead_s: float = OVERHEAD_S) -> dict[str, float]:
    """Projected seconds of one step, by phase (``generate``, ``actor``, ``overhead``, ``total``)."""
    tokens = shape.episodes * shape.mean_tokens
    actor = tokens / update_rate + 2 * tokens / forward_rate
    generate = shape.episodes * shape.mean_generated / generation_rate
    return {"generate": generate, "actor": actor, "overhead": overhead_s, "total": generate + actor + overhead_s}


def steps_for_hours(hours: float, seconds_per_step: float, *, reserve: float = 0.1) -> int:
    """Steps that fit in ``hours`` of wall clock, keeping ``reserve`` of it for validation and checkpoints."""
    if hours <= 0 or seconds_per_step <= 0:
        raise ValueError(f"hours and seconds_per_step must be positive, got {hours}, {seconds_per_step}")
    return max(1, math.floor(hours * 3600 * (1 - reserve) / seconds_per_step))


def hours_for_steps(steps: int, seconds_per_step: float, *, reserve: float = 0.1) -> float:
    """Wall-clock hours for ``steps`` (the inverse of :func:`steps_for_hours`)."""
    return steps * seconds_per_step / (1 - reserve) / 3600


#: The recipe's shape (config/grpo_qwen3_4b_h200.yaml): 8 groups x 8 rollouts, 4k prompt + 12k response.
RECIPE = {"groups": 8, "rollouts": 8, "context": 16_384}
RECIPE_STEPS = 400


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=None, help="print the steps that fit in this many hours")
    parser.add_argument("--steps", type=int, default=RECIPE_STEPS)
    parser.add_argument("--groups", type=int, default=RECIPE["groups"], help="data.train_batch_size")
    parser.add_argument("--rollouts", type=int, default=RECIPE["rollouts"], help="actor_rollout_ref.rollout.n")
    parser.add_argument("--context", type=int, default=RECIPE["context"], help="max_prompt_length + max_response_length")
    parser.add_argument("--fill", type=float, default=0.5, help="mean share of the context an episode uses")
    parser.add_argument("--generation-rate", type=float, default=GENERATION_TOKENS_PER_S,
                        help="generated tokens/s (ESTIMATE until measured)")
    parser.add_argument("--seconds-per-step", type=float, default=None,
                        help="a measured step time (veRL's timing_s/step, mean of steps 2-10) instead of the model")
    args = parser.parse_args(argv)
    shape = StepShape.from_budget(groups=args.groups, rollouts=args.rollouts, context=args.context, fill=args.fill)
    phases = step_seconds(shape, generation_rate=args.generation_rate)
    per_step = args.seconds_per_step or phases["total"]
    print(f"{shape.episodes} episodes x {shape.mean_tokens:,.0f} tokens ({shape.mean_generated:,.0f} generated) per step")
    if args.seconds_per_step is None:
        print(f"projected step: generate {phases['generate']:.0f}s (estimate) + actor {phases['actor']:.0f}s "
              f"+ overhead {phases['overhead']:.0f}s = {per_step:.0f}s")
    else:
        print(f"measured step: {per_step:.0f}s")
    if args.hours is not None:
        steps = steps_for_hours(args.hours, per_step)
        print(f"{args.hours:g} h -> trainer.total_training_steps={steps}")
    else:
        print(f"{args.steps} steps -> {hours_for_steps(args.steps, per_step):.1f} h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
