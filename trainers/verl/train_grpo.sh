#!/usr/bin/env bash
# Online GRPO on a termgym env with veRL (one H200; see docs/training.md).
#
#   trainers/verl/train_grpo.sh --env termgym/SweSynth-v0 --train 0-899 --val 900-999 \
#       [--model Qwen/Qwen3-4B] [--experiment NAME] [--lora-adapter DIR] [--env-kwargs JSON] [--wandb] \
#       [--hours H] [--seconds-per-step S] \
#       [-- extra Hydra overrides]
#
# Re-running the same command resumes from the last checkpoint (trainer.resume_mode=auto).
# Environment: TERMGYM_LOG_SAMPLE_RATE (default 0.05) of episodes are written as JSON under
# logs/NAME/trajectories; TERMGYM_HEALTH_CHECK_INTERVAL (default 60 s) runs the health monitor in
# every agent-loop worker; TERMGYM_MAX_CONCURRENT_EPISODES (default 8 per worker, 8 workers).
# TERMGYM_DRY_RUN=1 writes the data and prints the veRL command instead of running it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENV_ID="" TRAIN="" VAL="" MODEL="Qwen/Qwen3-4B" EXPERIMENT="" ENV_KWARGS="{}" EXTRA_LAUNCH=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --env) ENV_ID="$2"; shift 2 ;;
    --train) TRAIN="$2"; shift 2 ;;
    --val) VAL="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --experiment) EXPERIMENT="$2"; shift 2 ;;
    --env-kwargs) ENV_KWARGS="$2"; shift 2 ;;
    --lora-adapter) EXTRA_LAUNCH+=(--lora-adapter "$2"); shift 2 ;;
    --wandb) EXTRA_LAUNCH+=(--wandb); shift ;;
    --hours) EXTRA_LAUNCH+=(--hours "$2"); shift 2 ;;            # steps that fit in H hours (plan.py)
    --seconds-per-step) EXTRA_LAUNCH+=(--seconds-per-step "$2"); shift 2 ;;  # measured, for --hours
    --) shift; break ;;
    *) echo "train_grpo.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [[ -z "$ENV_ID" || -z "$TRAIN" || -z "$VAL" ]]; then
  echo "train_grpo.sh: --env, --train and --val are required" >&2; exit 2
fi
EXPERIMENT="${EXPERIMENT:-$(echo "$ENV_ID" | tr '/A-Z' '-a-z')-grpo}"
DATA_DIR="$ROOT/data/$EXPERIMENT"
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
python -m trainers.verl.prepare_data rl --env "$ENV_ID" --train "$TRAIN" --val "$VAL" \
  --env-kwargs "$ENV_KWARGS" --out "$DATA_DIR"
export TERMGYM_TRAJECTORY_DIR="${TERMGYM_TRAJECTORY_DIR:-$ROOT/logs/$EXPERIMENT/trajectories}"
export TERMGYM_LOG_SAMPLE_RATE="${TERMGYM_LOG_SAMPLE_RATE:-0.05}"
export TERMGYM_HEALTH_CHECK_INTERVAL="${TERMGYM_HEALTH_CHECK_INTERVAL:-60}"
[[ "${TERMGYM_DRY_RUN:-0}" == 1 ]] && EXTRA_LAUNCH+=(--print)
exec python -m trainers.verl.launch grpo --check --data-dir "$DATA_DIR" --model "$MODEL" \
  --experiment "$EXPERIMENT" --ckpt-dir "$ROOT/checkpoints/$EXPERIMENT" ${EXTRA_LAUNCH[@]+"${EXTRA_LAUNCH[@]}"} -- "$@"
