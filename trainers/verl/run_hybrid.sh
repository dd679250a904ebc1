#!/usr/bin/env bash
# Hybrid flow (seed 000): offline SFT warm start on recorded samples, then online GRPO from it.
#
#   trainers/verl/run_hybrid.sh --offline-data samples.json --env termgym/SweSynth-v0 \
#       --train 0-899 --val 900-999 [--model Qwen/Qwen3-4B] [--experiment NAME] [--sft-steps 500] \
#       [--min-score 1.0] [--hours 24] [--wandb] [-- extra GRPO Hydra overrides]
#
# Phase 1: samples -> sft_train.parquet (solved samples only unless --min-score says otherwise)
#          -> veRL's SFT trainer (LoRA rank 64, --sft-steps steps) -> veRL's model merger (HF folder +
#          lora_adapter/) -> the adapter merged into the weights (trainers/verl/merge_adapter.py).
# Phase 2: trainers/verl/train_grpo.sh from the merged SFT model with a fresh LoRA adapter, so GRPO's
#          KL reference (the adapter-disabled actor) is the SFT model, not the pre-SFT base.
# Re-running resumes: SFT resumes from its last checkpoint; a finished SFT phase is skipped.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SAMPLES="" ENV_ID="" TRAIN="" VAL="" MODEL="Qwen/Qwen3-4B" EXPERIMENT="" SFT_STEPS=500 MIN_SCORE="" GRPO_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --offline-data) SAMPLES="$2"; shift 2 ;;
    --env) ENV_ID="$2"; shift 2 ;;
    --train) TRAIN="$2"; shift 2 ;;
    --val) VAL="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --experiment) EXPERIMENT="$2"; shift 2 ;;
    --sft-steps) SFT_STEPS="$2"; shift 2 ;;
    --min-score) MIN_SCORE="$2"; shift 2 ;;
    --env-kwargs) GRPO_ARGS+=(--env-kwargs "$2"); shift 2 ;;
    --wandb) GRPO_ARGS+=(--wandb); shift ;;
    --hours) GRPO_ARGS+=(--hours "$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "run_hybrid.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [[ -z "$SAMPLES" || -z "$ENV_ID" || -z "$TRAIN" || -z "$VAL" ]]; then
  echo "run_hybrid.sh: --offline-data, --env, --train and --val are required" >&2; exit 2
fi
[[ -f "$SAMPLES" ]] || { echo "run_hybrid.sh: no such file: $SAMPLES" >&2; exit 2; }
EXPERIMENT="${EXPERIMENT:-$(echo "$ENV_ID" | tr '/A-Z' '-a-z')-hybrid}"
SFT_DATA="$ROOT/data/$EXPERIMENT/sft"
SFT_CKPT="$ROOT/checkpoints/$EXPERIMENT/sft"
SFT_HF="$SFT_CKPT/hf"          # veRL's model merger output: base weights + lora_adapter/
SFT_MODEL="$SFT_CKPT/merged"   # the adapter folded in: GRPO's start and reference
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

if [[ ! -f "$SFT_MODEL/config.json" ]]; then
  echo "== phase 1: SFT warm start ($SFT_STEPS steps) =="
  python -m trainers.verl.prepare_data sft --samples "$SAMPLES" --out "$SFT_DATA" ${MIN_SCORE:+--min-score "$MIN_SCORE"}
  # launch.py execs torchrun; run it as a child so this script continues afterwards
  python -m trainers.verl.launch sft --check --data-dir "$SFT_DATA" --model "$MODEL" \
    --experiment "$EXPERIMENT-sft" --ckpt-dir "$SFT_CKPT" -- "trainer.total_training_steps=$SFT_STEPS"
  # veRL's tracker file, else the highest global_step_N by number (trainers/verl/checkpoints.py)
  LAST="$(python -m trainers.verl.checkpoints "$SFT_CKPT" || true)"
  [[ -n "$LAST" ]] || { echo "run_hybrid.sh: SFT wrote no checkpoint under $SFT_CKPT" >&2; exit 1; }
  [[ -d "$LAST/actor" ]] && LAST="$LAST/actor"
  python -m verl.model_merger merge --backend fsdp --local_dir "$LAST" --target_dir "$SFT_HF"
  [[ -d "$SFT_HF/lora_adapter" ]] || { echo "run_hybrid.sh: $SFT_HF has no lora_adapter/ (was SFT run with LoRA?)" >&2; exit 1; }
  python -m trainers.verl.merge_adapter --model "$SFT_HF" --adapter "$SFT_HF/lora_adapter" --out "$SFT_MODEL"
fi

echo "== phase 2: online GRPO from $SFT_MODEL (fresh LoRA; the SFT model is the KL reference) =="
exec "$ROOT/trainers/verl/train_grpo.sh" --env "$ENV_ID" --train "$TRAIN" --val "$VAL" --model "$SFT_MODEL" \
  --experiment "$EXPERIMENT" ${GRPO_ARGS[@]+"${GRPO_ARGS[@]}"} -- "$@"
