"""Fold a LoRA adapter into its base model: the SFT warm start becomes GRPO's starting *and* reference model.

    python -m trainers.verl.merge_adapter --model BASE_HF_DIR --adapter BASE_HF_DIR/lora_adapter --out SFT_MODEL

GRPO with LoRA uses the adapter-disabled actor as its KL reference. Starting GRPO from the SFT
adapter would make that reference the *pre-SFT* base model; merging the SFT adapter into the
weights first and training a fresh adapter makes the reference the SFT model (the hybrid flow in
``run_hybrid.sh``). The merged folder holds the model and the base folder's tokenizer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def merge_adapter(model_dir: str | Path, adapter_dir: str | Path, out_dir: str | Path) -> Path:
    """Write ``model_dir`` + ``adapter_dir`` merged into ``out_dir`` (HF format, with the tokenizer)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir, adapter_dir, out_dir = Path(model_dir), Path(adapter_dir), Path(out_dir)
    for path, what in ((model_dir / "config.json", "--model"), (adapter_dir / "adapter_config.json", "--adapter")):
        if not path.is_file():
            raise FileNotFoundError(f"{what}: {path} not found (expected a Hugging Face model folder / a PEFT adapter)")
    base = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out_dir)
    return out_dir


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.merge_adapter", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the base model folder (veRL's model merger output)")
    parser.add_argument("--adapter", required=True, help="the LoRA adapter folder (its lora_adapter/)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    print(merge_adapter(args.model, args.adapter, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
