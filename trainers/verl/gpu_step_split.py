"""veRL's own trainer on one GPU with a Qwen3-4B-shaped model: measured seconds per step, by phase.

    python -m trainers.verl.gpu_step_split --out /tmp/split                 # on the GPU machine (cuda)
    python -m trainers.verl.gpu_step_split --out /tmp/split --tiny --device cpu --steps 2   # the same path here

It runs ``verl.trainer.main_ppo.run_ppo`` (``TaskRunnerV1``, the recipe's trainer) for ``--steps``
steps on the smoke suite (real bubblewrap sandboxes) with :mod:`trainers.verl.hf_rollout` as the
rollout server (HF ``generate`` on the same GPU, bf16: vLLM is not installed there) and a model
with **Qwen3-4B's shape and random weights**, built on the machine from the architecture numbers
of Qwen3-4B's config (nothing is downloaded; the tokenizer is the tiny local one, so sampled ids
are restricted to its vocabulary while every forward pass pays the full 151,936-wide head). The
actor is the recipe's: LoRA r64 on all linear layers, fp32 base weights with bf16 compute,
gradient checkpointing, the adapter-disabled actor as reference.

Printed, and written as JSON to ``$OUT/gpu_step_split.json`` when ``OUT`` is set (else
``--out``): per step veRL's own timers ``timing_s/gen``, ``old_log_prob``, ``ref``,
``update_actor``, ``update_weights`` and ``step``, with the tokens they processed
(``response_length/mean``, ``prompt_length/mean``, episodes), for comparison with
:mod:`trainers.verl.plan`'s terms. HF ``generate`` decodes one sequence at a time, so the
generation number is an upper bound on what vLLM would take, not a measurement of it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: Qwen3-4B's architecture (its config.json); the vocabulary is the real width, the tokenizer the tiny one.
QWEN3_4B_CONFIG = dict(vocab_size=151_936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40_960,
                       rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
TIMERS = ("gen", "old_log_prob", "ref", "adv", "update_actor", "update_weights", "step")


def build_model_dir(directory: str | Path, *, tiny: bool, device: str) -> Path:
    """Write a random Qwen3-4B-shaped (or tiny) checkpoint with the tiny tokenizer; reused when present."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainers.verl.tiny_model import build_tiny_tokenizer, save_tiny_checkpoint

    directory = Path(directory)
    if (directory / "config.json").exists():
        return directory
    if tiny:
        return save_tiny_checkpoint(directory)
    tokenizer = build_tiny_tokenizer()
    config = Qwen3Config(**QWEN3_4B_CONFIG, bos_token_id=None, eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tokenizer.pad_token_id, torch_dtype="bfloat16")
    torch.manual_seed(0)
    started = time.monotonic()
    with torch.device(device):  # random init on the GPU: seconds, where the CPU takes minutes
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: Qwen3-4B shape, {params / 1e9:.2f}B parameters, random, written in {time.monotonic() - started:.0f}s")
    del model
    return directory


def overrides(*, device: str, tiny: bool) -> list[str]:
    """The GPU pieces on top of the CPU trainer's overrides (later overrides win)."""
    if device == "cpu":
        return []
    lora = [] if tiny else ["actor_rollout_ref.model.lora_rank=64", "actor_rollout_ref.model.lora_alpha=128"]
    return [
        "trainer.device=cuda",
        "ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=trainers.verl.hf_rollout.setup_gpu_worker",
        "actor_rollout_ref.actor.fsdp_config.dtype=bfloat16",
        "actor_rollout_ref.ref.fsdp_config.dtype=bfloat16",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "+actor_rollout_ref.rollout.custom.termgym_server_device=cuda",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=32768",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=32768",
        "actor_rollout_ref.actor.optim.lr=1e-5",
        *lora,
    ]


def run(out: str | Path, *, steps: int, device: str, tiny: bool, groups: int, n: int, response_length: int,
        max_tokens_per_turn: int) -> list[dict[str, float]]:
    """Train ``steps`` steps; returns the per-step split (see the module docstring)."""
    from dataclasses import replace

    from trainers.verl import cpu_trainer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    build_model_dir(out / "model", tiny=tiny, device=device)
    setup = replace(cpu_trainer.smoke_setup(), groups=groups, n=n, response_length=response_length,
                    max_tokens_per_turn=max_tokens_per_turn)
    extra = [*overrides(device=device, tiny=tiny), "trainer.save_freq=-1"]
    if device != "cpu":
        # one GPU, shared by the actor worker and the rollout server (which asks for none)
        os.environ.setdefault("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES", "1")
    log = cpu_trainer.run(out, steps=steps, extra=extra, setup=setup, log_name="metrics.jsonl",
                          platform="cpu" if device == "cpu" else None)
    rows = []
    for step, metrics in sorted(cpu_trainer.read_metrics(log).items()):
        row = {"step": step, **{f"{name}_s": round(float(metrics.get(f"timing_s/{name}", float("nan"))), 3)
                                for name in TIMERS}}
        row.update(episodes=metrics.get("termgym/episodes"), response_tokens_mean=metrics.get("response_length/mean"),
                   prompt_tokens_mean=metrics.get("prompt_length/mean"), model_tokens_mean=metrics.get("termgym/tokens/mean"))
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.gpu_step_split", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/tmp/termgym-gpu-step-split", help="model, data and metrics folder")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="the tiny model instead of the Qwen3-4B shape (CPU check)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--n", type=int, default=2, help="rollouts per group")
    parser.add_argument("--response-length", type=int, default=768)
    parser.add_argument("--max-tokens-per-turn", type=int, default=48)
    args = parser.parse_args(argv)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device: run with --device cpu --tiny here, or on a GPU machine", file=sys.stderr)
            return 2
    started = time.monotonic()
    rows = run(args.out, steps=args.steps, device=args.device, tiny=args.tiny, groups=args.groups, n=args.n,
               response_length=args.response_length, max_tokens_per_turn=args.max_tokens_per_turn)
    result = {"device": args.device, "model": "tiny" if args.tiny else "Qwen3-4B shape (random)",
              "groups": args.groups, "n": args.n, "response_length": args.response_length,
              "wall_s": round(time.monotonic() - started, 1), "steps": rows}
    text = json.dumps(result, indent=2)
    print(text)
    target = Path(os.environ.get("OUT") or args.out) / "gpu_step_split.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n")
    if len(rows) < args.steps:
        print(f"only {len(rows)} of {args.steps} steps were logged", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
