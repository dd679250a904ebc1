"""Merging the SFT adapter into its base: the merged model computes what base + adapter computes."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

import torch  # noqa: E402

from trainers.verl.merge_adapter import merge_adapter  # noqa: E402


def test_merged_model_equals_base_plus_adapter(tmp_path, tiny_tokenizer, tiny_model):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    tiny_model.save_pretrained(tmp_path / "base")
    tiny_tokenizer.save_pretrained(tmp_path / "base")
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(tmp_path / "base"),
                                LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "adapter")
    ids = torch.tensor([tiny_tokenizer.encode("THOUGHT: ls -la")])
    with torch.no_grad():
        expected = peft_model(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(tmp_path / "base")(input_ids=ids).logits
    out = merge_adapter(tmp_path / "base", tmp_path / "adapter", tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
    with torch.no_grad():
        logits = merged(input_ids=ids).logits
    assert not torch.allclose(base, expected, atol=1e-3)  # the adapter changes the model...
    assert torch.allclose(logits, expected, atol=5e-2)  # ...and the merged weights carry it (bf16 storage)
    assert (out / "tokenizer.json").exists()


def test_missing_inputs_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="--model"):
        merge_adapter(tmp_path / "nope", tmp_path / "adapter", tmp_path / "out")
