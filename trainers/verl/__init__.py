"""termgym's veRL recipe: multi-turn GRPO on any termgym env.

* :mod:`trainers.verl.agent_loop` — ``TermgymAgentLoop``, one termgym episode per veRL sample;
* :mod:`trainers.verl.advantage` — the ``termgym_turn_grpo`` advantage estimator (process rewards);
* :mod:`trainers.verl.prepare_data` — env/task ranges → veRL RL parquet, offline samples → SFT parquet;
* :mod:`trainers.verl.metrics` / :mod:`trainers.verl.registry` — the ``termgym_sync`` trainer (episode
  metrics in veRL's logs) and the Ray setup hook that registers it and the estimator;
* :mod:`trainers.verl.launch` / :mod:`trainers.verl.plan` — the GRPO / SFT launch configs as Hydra
  overrides; the step-time projection and the ``--hours`` budget;
* :mod:`trainers.verl.merge_adapter` / :mod:`trainers.verl.checkpoints` — the hybrid flow's SFT merge
  and last-checkpoint lookup;
* :mod:`trainers.verl.cpu_trainer` (+ ``cpu_platform``, ``hf_rollout``, ``smoke_suite``) — veRL's own
  v1 trainer for a few steps on CPU;
* :mod:`trainers.verl.monitor` — health monitor and sampled trajectory logging;
* :mod:`trainers.verl.tiny_model` — a tiny random Qwen3 + local tokenizer and an in-process token server,
  for CPU tests and smoke runs.

Pinned to veRL 0.9.1 (see ``pyproject.toml``); docs in ``docs/training.md``.
"""
