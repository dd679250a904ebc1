"""The GPU step-split and the learning runs compose against veRL's Hydra schema (the runs themselves:
tests/trainers/test_verl_learning.py here, ``python -m trainers.verl.gpu_step_split`` on a GPU)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

from trainers.verl import cpu_trainer, gpu_step_split, launch, learning  # noqa: E402


def _compose(tmp_path, extra, setup):
    overrides = cpu_trainer.cpu_overrides(data_dir=tmp_path, model_dir=tmp_path / "model", ckpt_dir=tmp_path / "ckpt",
                                          agent_loops=tmp_path / "loops.yaml", steps=3, groups=setup.groups, n=setup.n,
                                          response_length=setup.response_length, scripts=setup.scripts,
                                          choices=setup.choices)
    return launch.compose("grpo", overrides + list(extra))


def test_the_gpu_run_is_the_recipes_actor_on_cuda(tmp_path):
    config = _compose(tmp_path, gpu_step_split.overrides(device="cuda", tiny=False), cpu_trainer.smoke_setup())
    actor = config.actor_rollout_ref
    assert config.trainer.device == "cuda"
    assert config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook == "trainers.verl.hf_rollout.setup_gpu_worker"
    assert actor.model.lora_rank == 64 and actor.model.enable_gradient_checkpointing
    assert actor.actor.fsdp_config.model_dtype == "fp32" and actor.actor.fsdp_config.dtype == "bfloat16"
    assert actor.rollout.name == "termgym_hf" and actor.rollout.custom.termgym_server_device == "cuda"
    assert config.algorithm.adv_estimator == "termgym_turn_grpo"


def test_the_qwen3_4b_shape():
    shape = gpu_step_split.QWEN3_4B_CONFIG
    assert (shape["num_hidden_layers"], shape["hidden_size"], shape["num_key_value_heads"]) == (36, 2560, 8)
    assert shape["vocab_size"] == 151_936 and shape["tie_word_embeddings"]


def test_the_learning_setup_samples_among_single_token_choices(tmp_path):
    from trainers.verl.learning import CHOICES
    from trainers.verl.tiny_model import TinyTokenServer, build_tiny_model, build_tiny_tokenizer

    setup = learning.learning_setup(2)
    config = _compose(tmp_path, [], setup)
    # a JSON string through Hydra, parsed back by the rollout server (trainers/verl/hf_rollout.py)
    assert json.loads(config.actor_rollout_ref.rollout.custom.termgym_choices) == list(CHOICES)
    tokenizer = build_tiny_tokenizer(extra_tokens=CHOICES)
    assert all(len(tokenizer.encode(c, add_special_tokens=False)) == 1 for c in CHOICES)
    with pytest.raises(ValueError, match=r"is \d+ tokens for this tokenizer, not one"):
        plain = build_tiny_tokenizer()
        TinyTokenServer(build_tiny_model(plain), plain, choices=CHOICES)


def test_the_learning_model_can_express_a_confident_choice(tmp_path):
    """The tiny model's logits are (tied embedding) . RMSNorm(h), |RMSNorm(h)| = sqrt(hidden): the gap between
    two choice logits is at most |e_blue - e_other| * sqrt(hidden), whatever a LoRA adapter does to h. At the
    default init (std 0.02) that cap is ~1.8 and P(blue) cannot pass ~0.75 (the plateau measured in
    issue 27); the learning setup's model must be able to reach P(blue) > 0.99."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainers.verl.learning import CHOICES
    from trainers.verl.tiny_model import build_tiny_tokenizer, save_tiny_checkpoint

    def best_p_blue(model) -> float:
        tokenizer = build_tiny_tokenizer(extra_tokens=CHOICES)
        ids = [tokenizer.convert_tokens_to_ids(c) for c in CHOICES]
        emb = model.get_output_embeddings().weight.detach()[ids]
        scale = model.config.hidden_size ** 0.5 * float(model.model.norm.weight.detach().abs().max())
        gaps = [float((emb[2] - emb[k]).norm()) * scale for k in (0, 1)]
        return 1 / (1 + sum(torch.exp(-torch.tensor(g)).item() for g in gaps))  # an upper bound, both gaps at once

    setup = learning.learning_setup(1)
    learned = AutoModelForCausalLM.from_pretrained(
        save_tiny_checkpoint(tmp_path / "m", extra_tokens=CHOICES, initializer_range=setup.initializer_range))
    default = AutoModelForCausalLM.from_pretrained(save_tiny_checkpoint(tmp_path / "d", extra_tokens=CHOICES))
    assert best_p_blue(learned) > 0.99
    assert best_p_blue(default) < 0.9  # the cap the learning model's init removes
