"""How long a GRPO step takes on one H200, term by term, and how many steps fit in a time budget.

    python -m trainers.verl.plan                                  # the recipe's default, projected
    python -m trainers.verl.plan --hours 12                       # steps that fit in 12 h
    python -m trainers.verl.plan --hours 24 --seconds-per-step 190   # re-plan from a measured step

A step of veRL's synchronous trainer is: generate every episode of the batch (the step waits for
the slowest one), then three passes over all their tokens on the actor (old log-probs and
reference log-probs, forward; the update, forward + backward), then the weight sync::

    step_s = generate_s + old_log_prob_s + ref_s + update_s + overhead_s
    generate_s = bulk_decode_s + tail_decode_s + prefill_s + slowest_env_s

* **decode** (a bandwidth model of vLLM's decoding): every decode step reads the weights once and
  the KV cache of every running sequence, ``t(B, ctx) = (weight_bytes + B * ctx * kv_bytes_per_token)
  / (hbm_bandwidth * efficiency)`` for ``B`` sequences at ``ctx`` tokens, each advancing one token.
  ``bulk`` = the mean episode's generated tokens with the whole batch running (mean context);
  ``tail`` = the slowest episode's remaining tokens (it fills the context) with a quarter of the
  batch still running (near-full context) — the sync trainer's wait for the slowest episode;
* **prefill**: prompt and observation tokens, once each (prefix caching), compute-bound;
* **slowest_env**: the slowest episode's commands and its grading run between its turns, on its
  critical path (``turns * command_s + grade_s``);
* **actor**: ``tokens / update_rate`` + ``2 * tokens / forward_rate``.

Measured (on a lent H200, 2026-11-25, Qwen3-4B shape, bf16 compute, gradient checkpointing, LoRA
r64, fp32 base weights): update 6.3k tokens/s (1 x 32k micro-batch) to 9.9k (4 x 8k), forward
log-probs 24k-35k. Grading seconds: docs/benchmarks.md (median 1-12 s per task for two grades,
slowest project click). **Estimates**, to be replaced by measurements (``--seconds-per-step`` or
the rate flags): the bandwidth efficiency, prefill rate, command seconds and overhead.
``trainers/verl/gpu_step_split.py`` measures veRL's own generation / old log-prob / reference /
update split on a GPU.

Qwen3's thinking mode is off in the recipe (``data.apply_chat_template_kwargs.enable_thinking:
false``): the mini-swe-agent protocol already asks for a THOUGHT before each command, and thinking
adds hundreds to thousands of generated tokens per turn — the decode terms above scale with them
(``--generated-share``).
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
#: ESTIMATE: weight sync, vLLM wake/sleep, batch balancing, logging per step.
OVERHEAD_S = 15.0
#: ESTIMATE: prefill (compute-bound: ~8 GFLOP per token for 4B parameters at ~35% of 989 TFLOP/s).
PREFILL_TOKENS_PER_S = 40_000.0
#: ESTIMATE: seconds one agent command takes in its sandbox (mostly test runs on SWE-SYNTH).
COMMAND_S = 2.0
#: Measured: the slowest bundled project's median grading time (click: 12.0 s for two grades).
GRADE_S = 6.0
#: Share of the batch still running while the slowest episode finishes (ESTIMATE).
TAIL_SHARE = 0.25


@dataclass(frozen=True)
class ModelShape:
    """What decoding reads per step: the weights, and the KV cache per token of context."""

    params: float
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_value: int = 2  # bf16

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_value

    @property
    def kv_bytes_per_token(self) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value


#: Qwen3-4B (config.json: 36 layers, 8 KV heads of 128, 4.02B parameters).
QWEN3_4B = ModelShape(params=4.02e9, layers=36, kv_heads=8, head_dim=128)


@dataclass(frozen=True)
class Device:
    """Decode bandwidth: HBM bytes/s and the share of it decoding achieves (ESTIMATE: 0.6)."""

    hbm_bytes_per_s: float = 4.8e12  # H200
    efficiency: float = 0.6

    def decode_step_s(self, model: ModelShape, sequences: float, context: float) -> float:
        """Seconds of one decode step: ``sequences`` each at ``context`` tokens advance one token."""
        read = model.weight_bytes + sequences * context * model.kv_bytes_per_token
        return read / (self.hbm_bytes_per_s * self.efficiency)


H200 = Device()


@dataclass(frozen=True)
class StepShape:
    """What one step processes: episodes, their mean tokens (prompt + response) and generated tokens,
    and the slowest episode (it fills the context)."""

    episodes: int
    mean_tokens: float
    mean_generated: float
    context: float = 0.0
    generated_share: float = 0.4
    tokens_per_turn: float = 200.0

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.mean_tokens <= 0 or not 0 < self.mean_generated <= self.mean_tokens:
            raise ValueError(f"a step needs episodes >= 1 and 0 < mean_generated <= mean_tokens, got {self}")
        if self.context and self.context < self.mean_tokens:
            raise ValueError(f"context ({self.context}) must be at least mean_tokens ({self.mean_tokens})")

    @property
    def slowest_generated(self) -> float:
        """Generated tokens of the slowest episode: it runs until the context is full."""
        return max(self.mean_generated, (self.context or self.mean_tokens) * self.generated_share)

    @property
    def slowest_turns(self) -> float:
        return self.slowest_generated / self.tokens_per_turn

    @classmethod
    def from_budget(cls, *, groups: int, rollouts: int, context: int, fill: float = 0.5,
                    generated_share: float = 0.4, tokens_per_turn: float = 200.0) -> StepShape:
        """Episodes that use ``fill`` of the ``context`` budget on average, ``generated_share`` of it model tokens.

        The defaults: ~half the budget used, ~40% of a trajectory written by the model (the rest:
        prompt and command output), ~200 generated tokens per turn (a THOUGHT and one command,
        thinking off).
        """
        if not 0 < fill <= 1 or not 0 < generated_share <= 1:
            raise ValueError(f"fill and generated_share must be within (0, 1], got {fill}, {generated_share}")
        mean = context * fill
        return cls(episodes=groups * rollouts, mean_tokens=mean, mean_generated=mean * generated_share,
                   context=context, generated_share=generated_share, tokens_per_turn=tokens_per_turn)


def step_seconds(shape: StepShape, *, update_rate: float = UPDATE_TOKENS_PER_S, forward_rate: float = FORWARD_TOKENS_PER_S,
                 model: ModelShape = QWEN3_4B, device: Device = H200, prefill_rate: float = PREFILL_TOKENS_PER_S,
                 command_s: float = COMMAND_S, grade_s: float = GRADE_S, tail_share: float = TAIL_SHARE,
                 overhead_s: float = OVERHEAD_S, generation_rate: float | None = None) -> dict[str, float]:
    """Projected seconds of one step, term by term (see the module docstring); ``total`` is their sum.

    ``generation_rate`` (tokens/s over the batch, when measured) replaces the decode model: the bulk
    and the tail are then ``mean_generated * episodes / rate`` and the slowest episode's extra tokens
    at the same per-sequence speed.
    """
    tokens = shape.episodes * shape.mean_tokens
    context = shape.context or shape.mean_tokens
    extra = shape.slowest_generated - shape.mean_generated
    if generation_rate is None:
        bulk = shape.mean_generated * device.decode_step_s(model, shape.episodes, 0.75 * shape.mean_tokens)
        tail_sequences = max(1.0, shape.episodes * tail_share)
        tail = extra * device.decode_step_s(model, tail_sequences, 0.9 * context)
    else:
        bulk = shape.episodes * shape.mean_generated / generation_rate
        tail = extra * shape.episodes / generation_rate
    terms = {
        "bulk_decode": bulk,
        "tail_decode": tail,
        "prefill": shape.episodes * (shape.mean_tokens - shape.mean_generated) / prefill_rate,
        "slowest_env": shape.slowest_turns * command_s + grade_s,
        "old_log_prob": tokens / forward_rate,
        "ref": tokens / forward_rate,
        "update": tokens / update_rate,
        "overhead": overhead_s,
    }
    terms["generate"] = terms["bulk_decode"] + terms["tail_decode"] + terms["prefill"] + terms["slowest_env"]
    terms["actor"] = terms["old_log_prob"] + terms["ref"] + terms["update"]
    terms["total"] = terms["generate"] + terms["actor"] + terms["overhead"]
    return terms


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
#: The recipe's steps: what fits in 24 h by this projection (``python -m trainers.verl.plan``).
RECIPE_STEPS = 240

TERMS = ("bulk_decode", "tail_decode", "prefill", "slowest_env", "old_log_prob", "ref", "update", "overhead")


def format_terms(terms: dict[str, float]) -> str:
    """The projection as one line per term."""
    lines = [f"  {name:<13s}{terms[name]:7.1f} s" for name in TERMS]
    lines.append(f"  {'= step':<13s}{terms['total']:7.1f} s  (generate {terms['generate']:.0f} s, "
                 f"actor {terms['actor']:.0f} s, overhead {terms['overhead']:.0f} s)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=None, help="print the steps that fit in this many hours")
    parser.add_argument("--steps", type=int, default=RECIPE_STEPS)
    parser.add_argument("--groups", type=int, default=RECIPE["groups"], help="data.train_batch_size")
    parser.add_argument("--rollouts", type=int, default=RECIPE["rollouts"], help="actor_rollout_ref.rollout.n")
    parser.add_argument("--context", type=int, default=RECIPE["context"], help="max_prompt_length + max_response_length")
    parser.add_argument("--fill", type=float, default=0.5, help="mean share of the context an episode uses")
    parser.add_argument("--generated-share", type=float, default=0.4, help="share of an episode's tokens the model writes")
    parser.add_argument("--generation-rate", type=float, default=None,
                        help="measured generated tokens/s over the batch (replaces the decode model)")
    parser.add_argument("--grade-s", type=float, default=GRADE_S, help="seconds to grade one task")
    parser.add_argument("--command-s", type=float, default=COMMAND_S, help="seconds per agent command")
    parser.add_argument("--seconds-per-step", type=float, default=None,
                        help="a measured step time (veRL's timing_s/step, mean of steps 2-10) instead of the model")
    args = parser.parse_args(argv)
    shape = StepShape.from_budget(groups=args.groups, rollouts=args.rollouts, context=args.context, fill=args.fill,
                                  generated_share=args.generated_share)
    terms = step_seconds(shape, generation_rate=args.generation_rate, grade_s=args.grade_s, command_s=args.command_s)
    per_step = args.seconds_per_step or terms["total"]
    print(f"{shape.episodes} episodes x {shape.mean_tokens:,.0f} tokens ({shape.mean_generated:,.0f} generated) per step; "
          f"the slowest fills {shape.context:,.0f} ({shape.slowest_generated:,.0f} generated, "
          f"{shape.slowest_turns:.0f} turns)")
    if args.seconds_per_step is None:
        print("projected step:\n" + format_terms(terms))
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
