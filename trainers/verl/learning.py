"""Tasks a tiny random policy can learn in a few steps, for the "it learns" tests and demos.

Each assistant turn is one of :data:`CHOICES` — three complete mini-swe-agent actions that write a
colour to ``answer.txt`` — and the task's own grader, run in the episode's real sandbox, checks the
file (``grep -qx blue answer.txt``). The tiny model (:mod:`trainers.verl.tiny_model`) has each
choice as one token of its vocabulary, and the rollout server samples a turn as one of those
tokens followed by ``<|im_end|>`` (``TinyTokenServer(choices=...)``), so a random policy is right
a third of the time and what it learns is visible as P(choice):

* ``termgym-learn/Pick-v0`` — one turn (``max_steps=1``): the reward is 1 when that turn picked
  blue;
* ``termgym-learn/PickTwice-v0`` — two turns (``max_steps=2``), the second overwrites the file, so
  the reward (placed on the second turn's last token) depends on the second turn only;
* ``termgym-learn/ReadPick-v0`` — one turn, but each task asks for its own colour, in one of several
  wordings, and some wordings are held out of training: the right action depends on the prompt, so
  this one shows the policy reads what termgym shows it (:func:`read_pick_suite`, :func:`run_reading`).

Importing this module registers the three ids (list it under the agent loop's ``import_modules``).
"""

from __future__ import annotations

from functools import partial

import termgym
from termgym import CommandTask, ListSuite
from trainers.verl.cpu_trainer import CpuSetup, read_metrics, run

SINGLE_TURN_ID = "termgym-learn/Pick-v0"
TWO_TURN_ID = "termgym-learn/PickTwice-v0"
TARGET = "blue"
COLOURS = ("red", "green", "blue")
#: One token each in the tiny model's vocabulary (``build_tiny_tokenizer(extra_tokens=CHOICES)``).
CHOICES = tuple(f"THOUGHT: {colour}.\n\n```bash\necho {colour} > answer.txt\n```" for colour in COLOURS)
#: The share of turns a uniform policy gets right.
CHANCE = 1 / len(CHOICES)
#: The tiny model's random-weight std for these tasks. Its output layer is its (tied) embedding matrix
#: and the last hidden state is RMS-normalised (norm sqrt(64) = 8), so two choice logits can differ by at
#: most |e_blue - e_red| * 8 ~ std * sqrt(2 * 64) * 8 = 90 * std: 1.8 at the default 0.02, which caps P(blue) near 0.75
#: whatever the LoRA adapter (which cannot touch the embeddings) learns -- measured: P(blue) 0.365 -> 0.72
#: and flat at lr 3e-3 and 1e-2 alike. At 0.08 the cap is ~7 (P(blue) up to ~0.999; measured 0.47 -> 0.99
#: in 4 steps) while the untrained policy still picks blue 0.47 of the time.
INITIALIZER_RANGE = 0.08


def pick_suite(n_tasks: int = 5, *, turns: int = 1) -> ListSuite:
    """``n_tasks`` identical "write blue" tasks (distinct ids, so veRL sees distinct prompts)."""
    if turns not in (1, 2):
        raise ValueError(f"turns must be 1 or 2, got {turns}")
    when = "In your last turn, write" if turns == 2 else "Write"
    return ListSuite([CommandTask(f"pick{k}", f"Task {k}: {when} the colour {TARGET} to answer.txt.",
                                  grade_command=f"grep -qx {TARGET} answer.txt") for k in range(n_tasks)],
                     name=f"pick{turns}")


termgym.register_suite(SINGLE_TURN_ID, partial(pick_suite, turns=1), max_steps=1)
termgym.register_suite(TWO_TURN_ID, partial(pick_suite, turns=2), max_steps=2)


# --- A task that must be read: the colour asked for is drawn per task ------------------------------------

READ_ID = "termgym-learn/ReadPick-v0"
#: How a ReadPick task asks for its colour. Each wording is a task per colour; the last
#: :data:`HELD_OUT_WORDINGS` are the suite's ``test`` split, never trained on (the runs' validation set).
WORDINGS = (
    "Write the colour {colour} to answer.txt.",
    "Put the word {colour} into answer.txt.",
    "answer.txt must hold one line: {colour}.",
    "Save {colour} as the only line of answer.txt.",
    "The file answer.txt should say {colour}.",
    "Please record {colour} in answer.txt, nothing else.",
    "Which colour goes in answer.txt? {colour}.",
)
HELD_OUT_WORDINGS = 3
#: What ``masked=True`` writes where the colour was: the prompts of one wording are then the same for all
#: three colours, so a policy can do no better than chance on them, whatever it learns.
MASK = "???"


def read_pick_suite(masked: bool = False) -> ListSuite:
    """One single-turn task per (wording, colour): write the colour the prompt names to ``answer.txt``.

    The grader (``grep -qx <colour> answer.txt``) checks the colour the task drew, so the one right
    action differs from task to task and a policy that ignores its prompt is right a third of the time.
    Splits: ``train`` (the first wordings) and ``test`` (the held-out ones), each with every colour.
    ``masked=True`` (``gym.make(READ_ID, masked=True)``) hides the colour word from the prompt, the
    grader unchanged: the no-signal baseline.
    """
    def task(wording: int, colour: str) -> CommandTask:
        instruction = WORDINGS[wording].format(colour=MASK if masked else colour)
        return CommandTask(f"w{wording}-{colour}", instruction, grade_command=f"grep -qx {colour} answer.txt",
                           metadata={"colour": colour, "wording": wording})

    trained = len(WORDINGS) - HELD_OUT_WORDINGS
    return ListSuite({"train": [task(w, c) for w in range(trained) for c in COLOURS],
                      "test": [task(w, c) for w in range(trained, len(WORDINGS)) for c in COLOURS]},
                     name="read-pick-masked" if masked else "read-pick")


#: ReadPick's prompt: mini-swe-agent's protocol with a one-line system prompt and the bare instruction (67
#: tokens of the tiny tokenizer). The default templates make it 862 tokens, over which the tiny random model's
#: attention spreads the one colour token too thin to start from: with :func:`run_reading`'s recipe, in a
#: scratch in-process GRPO loop (exact P from the model, no sandboxes), held-out P(right colour) was
#: 0.336 / 0.366 after 6 steps at 862 tokens and 0.94 / 0.96 at 67 (seeds 0 / 1; docs/training.md).
READ_PROTOCOL_OPTIONS = {"system_template": "You are a helpful assistant that can interact with a computer shell "
                                            "to solve programming tasks.",
                         "task_template": "$instruction"}
termgym.register_suite(READ_ID, read_pick_suite, max_steps=1, protocol_options=READ_PROTOCOL_OPTIONS)


def learning_setup(turns: int = 1, *, groups: int = 4, n: int = 8) -> CpuSetup:
    """The pick-a-colour task for :func:`trainers.verl.cpu_trainer.run`: every turn one of three actions."""
    return CpuSetup(env_id=SINGLE_TURN_ID if turns == 1 else TWO_TURN_ID, import_module="trainers.verl.learning",
                    train="0-3", val="4", epochs=16, choices=CHOICES, max_tokens_per_turn=4, groups=groups, n=n,
                    response_length=256, initializer_range=INITIALIZER_RANGE)


def recipe_overrides(lr: float) -> list[str]:
    """The learning runs' optimiser and sampling: weight decay 0 (so only the loss moves the adapter),
    ``lr``, no checkpoints, temperature 1, data seed 0."""
    return ["actor_rollout_ref.actor.optim.weight_decay=0", f"actor_rollout_ref.actor.optim.lr={lr}",
            "trainer.save_freq=-1", "actor_rollout_ref.rollout.temperature=1.0", "data.seed=0"]


def held_out_validation(steps: int, val_n: int) -> list[str]:
    """Validation before training (logged as step 0) and after step ``steps``, ``val_n`` episodes a task
    sampled at temperature 1 (so the mean estimates the policy's probability of the right action)."""
    return ["trainer.val_before_train=true", f"trainer.test_freq={steps}",
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0", f"actor_rollout_ref.rollout.val_kwargs.n={val_n}"]


def run_learning(out, *, turns: int = 1, steps: int = 6, sabotage: str | None = None, shuffled_first: bool = False,
                 groups: int = 4, n: int = 8, kl_loss: bool = True, lr: float = 1e-2, extra=()) -> dict[int, dict]:
    """veRL's own trainer (``run_ppo``, CPU path) on the pick task; returns step -> logged metrics.

    Weight decay is 0 (so any LoRA change comes from the loss), one optimiser step per training
    step, ``lr`` (1e-2) on the rank-8 adapter, sampling temperature 1. ``sabotage``: ``"flipped_sign"``
    (the advantages negated) or ``"scheduled"`` (:class:`trainers.verl.sabotage.ScheduledSabotageLoop`:
    one agent-loop sabotage per step). ``shuffled_first``: step 1's rewards also shuffled across its
    episodes (:class:`trainers.verl.sabotage.ShuffledFirstStepLoop`). ``kl_loss=False`` drops the
    recipe's KL loss, so a step without reward has no gradient at all.
    """
    overrides = recipe_overrides(lr)
    if not kl_loss:
        overrides.append("actor_rollout_ref.actor.use_kl_loss=false")
    agent_loop = None
    if sabotage is not None or shuffled_first:
        from trainers.verl import sabotage as sabotages

        overrides.append(sabotages.WORKER_HOOK_OVERRIDE)
        if sabotage == "flipped_sign":
            overrides.append(f"algorithm.adv_estimator={sabotages.FLIPPED_ESTIMATOR}")
        elif sabotage == "scheduled":
            agent_loop = sabotages.SCHEDULED_LOOP
        elif sabotage is not None:
            raise ValueError(f"sabotage must be 'flipped_sign' or 'scheduled', not {sabotage!r}")
        if shuffled_first:
            if agent_loop is not None:
                raise ValueError("shuffled_first and the scheduled sabotages are two agent loops; pick one")
            agent_loop = sabotages.SHUFFLED_FIRST_LOOP
    log = run(out, steps=steps, setup=learning_setup(turns, groups=groups, n=n), agent_loop=agent_loop,
              extra=[*overrides, *extra], log_name="metrics.jsonl")
    return read_metrics(log)


def read_setup(*, masked: bool = False, groups: int = 12, n: int = 8, epochs: int = 8, seed: int = 0) -> CpuSetup:
    """ReadPick for :func:`trainers.verl.cpu_trainer.run`: the training wordings to train on, the held-out
    ones (the ``test`` split) to validate on; the colour words are single tokens of the tiny model.

    The rows keep the suite's order (``w0-red, w0-green, w0-blue, w1-red...``, ``epochs`` copies) and
    :func:`run_reading` turns veRL's shuffling off, so with ``groups`` 12 every step is the twelve
    training tasks once each, every colour asked equally often (shuffled, a 12-row batch drawn from the
    copies would repeat some tasks and miss others).
    """
    trained, held_out = len(read_pick_suite().task_ids("train")), len(read_pick_suite().task_ids("test"))
    return CpuSetup(env_id=READ_ID, import_module="trainers.verl.learning", train=f"0-{trained - 1}",
                    val=f"{trained}-{trained + held_out - 1}", split="all", epochs=epochs, choices=CHOICES,
                    words=COLOURS, env_kwargs={"masked": True} if masked else {}, max_tokens_per_turn=4,
                    groups=groups, n=n, response_length=16, initializer_range=INITIALIZER_RANGE, seed=seed)


def run_reading(out, *, steps: int = 6, masked: bool = False, groups: int = 12,
                n: int = 8, lr: float = 3e-3, mini_batch: int = 3, ppo_epochs: int = 4, val_n: int = 8, seed: int = 0,
                shuffled: bool = False, extra=()) -> dict[int, dict]:
    """veRL's own trainer (``run_ppo``, CPU path) on ReadPick; returns step -> logged metrics.

    Each step trains on every training task (``groups`` 12) with ``n`` episodes each, in ``ppo_epochs``
    passes over mini-batches of ``mini_batch`` tasks' episodes: 16 optimiser steps a training step at
    lr 3e-3 (with 6 tasks a step and one optimiser step, as the pick recipe, the training reward was
    still 0.33 after 10 steps), weight decay 0, sampling temperature 1. Validation on the held-out wordings
    before training (logged as step 0) and after the last step (:func:`held_out_reward`): ``val_n``
    sampled episodes per task at temperature 1, so the mean estimates the policy's P(right colour) rather
    than which colour its argmax lands on. ``masked``: the colour word hidden from every prompt (the
    no-signal baseline). ``shuffled``: the prompts intact but each step's returns permuted across its
    batch before the advantages (:data:`trainers.verl.sabotage.SHUFFLED_ESTIMATOR`), the other no-signal
    baseline: the signal is there to read, the credit for reading it is not.
    """
    overrides = [*recipe_overrides(lr), "data.shuffle=false", f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch}",
                 f"actor_rollout_ref.actor.ppo_epochs={ppo_epochs}", *held_out_validation(steps, val_n)]
    if shuffled:
        from trainers.verl.sabotage import SHUFFLED_OVERRIDES

        overrides += SHUFFLED_OVERRIDES
    log = run(out, steps=steps, setup=read_setup(masked=masked, groups=groups, n=n, seed=seed),
              extra=[*overrides, *extra], log_name="metrics.jsonl")
    return read_metrics(log)


def held_out_reward(metrics: dict) -> float | None:
    """The held-out wordings' mean reward in one step's metrics (veRL's ``val-core/<env id>/reward/mean@<val_n>``)."""
    for key, value in metrics.items():
        if key.startswith(f"val-core/{READ_ID}/") and "reward/mean@" in key:
            return round(float(value), 4)
    return None


# --- Checks on what veRL logged: each raises AssertionError saying what broke -------------------------

def check_score_is_episode_return(metrics: dict) -> None:
    """veRL's ``critic/score/mean`` (the rewards it trained on) equals the env's mean episode return."""
    score, ret = metrics["critic/score/mean"], metrics["termgym/return/mean"]
    assert abs(score - ret) <= 1e-4, f"veRL's score {score:.4f} is not the mean episode return {ret:.4f}"


def check_observations_masked(metrics: dict) -> None:
    """Fewer tokens are trained on than the responses hold: observation tokens are masked out."""
    trained, response = metrics["termgym/trained_tokens/mean"], metrics["termgym/response_tokens/mean"]
    assert trained < response, f"all {response:.1f} response tokens are trained on ({trained:.1f}): observations are not masked"


def check_rewards_on_their_turns(metrics: dict) -> None:
    """Each turn's reward sits on that turn's tokens, as the advantage estimator reads them."""
    share = metrics["termgym/reward_misplaced"]
    assert share == 0, f"{share:.0%} of episodes have rewards on other turns than the env gave them"


def check_update_from_the_loss(metrics: dict) -> None:
    """Where some group's episodes earned different returns, the update has a gradient (weight decay is 0
    in these runs, so the loss is all that moves the weights)."""
    norm, signal = metrics["actor/grad_norm"], metrics["termgym/groups_with_signal"]
    assert signal == 0 or norm > 1e-8, (f"{signal:.0%} of the groups had different returns, yet the actor's gradient "
                                        f"norm is {norm}: nothing in the loss moved the policy")


def _check_credit_matched(metrics: dict) -> None:
    checked = metrics.get("termgym/credit_checked", 0.0)
    assert checked >= 1.0, (f"only {checked:.0%} of the trajectories matched their episode's record: record every episode "
                            "(the agent loop's trajectory_dir, log_sample_rate 1; cpu_trainer.prepare does)")


def check_reward_is_own_episode(metrics: dict) -> None:
    """Every trajectory's reward (the sum of its ``rm_scores``) is its own episode's return, as the env's
    record of that episode (matched by id) has it -- not the batch's mean, each row's."""
    _check_credit_matched(metrics)
    share = metrics["termgym/reward_not_own_episode"]
    assert share == 0, f"{share:.0%} of the trajectories are paid another return than their own episode's"


def check_env_ran_the_policys_tokens(metrics: dict) -> None:
    """What the env ran, turn for turn (its record), is the decoding of the trajectory's own response tokens."""
    _check_credit_matched(metrics)
    share = metrics["termgym/actions_not_own_tokens"]
    assert share == 0, (f"in {share:.0%} of the trajectories the env ran other text than the decoding of the "
                        "tokens the policy is trained on")


#: name -> check, run on every step's metrics (``check_observations_masked`` only where turns have observations).
STEP_CHECKS = {
    "score = episode return": check_score_is_episode_return,
    "observations masked": check_observations_masked,
    "rewards on their turns": check_rewards_on_their_turns,
    "update from the loss": check_update_from_the_loss,
    "reward = own episode's return": check_reward_is_own_episode,
    "env ran the policy's tokens": check_env_ran_the_policys_tokens,
}
#: The checks that match each trajectory to its episode's record (they need every episode recorded).
CREDIT_CHECKS = ("reward = own episode's return", "env ran the policy's tokens")


def reward_curve(steps: dict[int, dict]) -> list[float]:
    """Mean episode reward per step (the env's return, as logged by veRL's trainer)."""
    return [round(float(steps[s]["termgym/return/mean"]), 4) for s in sorted(steps)]


#: The mean episode reward the learning runs must reach (the issue's bar).
TARGET_REWARD = 0.9


def check_learns(curve: list[float], *, target: float = TARGET_REWARD) -> None:
    """The reward starts near chance, reaches ``target`` within the run and is still there at its last step.

    (Measured through veRL's ``run_ppo``, lr 1e-2, 4 x 8 episodes a step: one turn 0.44 -> 0.91-0.94, 0.97;
    two turns 0.28 -> 0.88, 0.97-1.0; docs/training.md.)
    """
    assert curve[0] <= CHANCE + 0.25, f"the first step's reward {curve[0]} is far above chance ({CHANCE:.2f})"
    assert max(curve[1:]) >= target, f"the reward never reached {target} (chance is {CHANCE:.2f}): {curve}"
    assert curve[-1] >= target - 0.1, f"the reward reached {max(curve):.2f} but fell back to {curve[-1]}: {curve}"


def check_unlearns(curve: list[float], *, floor: float = 0.15) -> None:
    """With the advantage sign flipped the reward falls from chance towards 0 (measured: 0.44 -> 0.16-0.19, 0)."""
    assert curve[0] >= CHANCE - 0.25, f"the first step's reward {curve[0]} is far below chance ({CHANCE:.2f})"
    assert curve[-1] <= floor and curve[-1] < curve[0], f"the reward did not fall below {floor}: {curve}"


def failing_checks(metrics: dict, checks: dict | None = None) -> dict[str, str]:
    """name -> message of every step check that fails on ``metrics``."""
    failed = {}
    for name, check in (checks or STEP_CHECKS).items():
        try:
            check(metrics)
        except AssertionError as exc:
            failed[name] = str(exc)
    return failed


def plot_curves(curves: dict[str, list[float]], path, *, xlabel: str = "training step (veRL run_ppo, CPU, tiny Qwen3)") -> str:
    """A PNG of the reward curves (matplotlib), or, without matplotlib, an SVG-free text table; returns the path."""
    from pathlib import Path

    path = Path(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = path.with_suffix(".txt")
        lines = ["step " + " ".join(f"{name:>24s}" for name in curves)]
        for i in range(max(len(c) for c in curves.values())):
            lines.append(f"{i + 1:4d} " + " ".join(f"{c[i]:24.3f}" if i < len(c) else " " * 24 for c in curves.values()))
        path.write_text("\n".join(lines) + "\n")
        return str(path)
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    for name, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), curve, marker="o", label=name)
    ax.axhline(CHANCE, color="grey", linestyle=":", label="chance (1/3)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean episode reward")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(range(1, max(len(c) for c in curves.values()) + 1))
    ax.legend(fontsize=8, loc="center right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


# --- The same signal path without Ray: for quick curves (the CI proof is run_learning, veRL's trainer) ---

def learn_in_process(*, turns: int = 1, steps: int = 6, sign: float = 1.0, groups: int = 4, n: int = 8,
                     lr: float = 1e-2, seed: int = 0, config: dict | None = None, shuffled: bool = False) -> list[float]:
    """Mean episode reward per step of a policy trained without veRL's trainer process: episodes played by
    ``TermgymAgentLoop`` in real sandboxes (choice turns from the tiny model), ``termgym_turn_grpo``
    advantages (times ``sign``), veRL's PPO-clip policy loss on the rank-8 LoRA, AdamW with weight decay 0.

    A fast stand-in for :func:`run_learning` (seconds per step instead of a Ray cluster), for trying
    settings (how the 0.75 plateau was traced to the model's init, docs/training.md) and for many seeds
    (``python -m benchmarks.learning_seeds``); the test of record is the trainer's. ``shuffled``: each
    step's returns permuted across its batch before the advantages
    (:func:`trainers.verl.sabotage.shuffled_credit_advantage`), the no-signal baseline.
    """
    import asyncio

    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from peft import LoraConfig, get_peft_model
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.trainer.ppo import core_algos
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from trainers.verl.advantage import compute_turn_grpo_advantage
    from trainers.verl.agent_loop import TermgymAgentLoop
    from trainers.verl.gpu_smoke import _actor_and_algorithm_config, _batch_from_outputs, _response_log_probs
    from trainers.verl.tiny_model import TinyTokenServer, build_tiny_model, build_tiny_tokenizer

    torch.manual_seed(seed)
    tokenizer = build_tiny_tokenizer(extra_tokens=CHOICES)
    model = get_peft_model(build_tiny_model(tokenizer, seed=seed, initializer_range=INITIALIZER_RANGE),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
    server = TinyTokenServer(model, tokenizer, seed=seed, choices=CHOICES)
    env_id = SINGLE_TURN_ID if turns == 1 else TWO_TURN_ID
    actor_config, algorithm = _actor_and_algorithm_config()
    algorithm = OmegaConf.merge(algorithm, config or {})
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.0)
    policy_loss = core_algos.get_policy_loss_fn(actor_config.policy_loss.loss_mode)
    loop_config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": 256}},
                                    "data": {"apply_chat_template_kwargs": {}}})

    async def play(task: str):
        loop = TermgymAgentLoop(trainer_config=DictConfigWrap(loop_config), server_manager=server, tokenizer=tokenizer,
                                processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(loop_config.data),
                                hf_model_type="qwen3", max_tokens_per_turn=4)
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=[],
                               extra_info={"env_id": env_id, "task_id": task})

    async def play_step():
        return await asyncio.gather(*[play(f"pick{g}") for g in range(groups) for _ in range(n)])

    curve = []
    for _ in range(steps):
        model.eval()
        outputs = asyncio.run(play_step())
        curve.append(round(float(np.mean([o.reward_score for o in outputs])), 4))
        index = np.array([f"g{i // n}" for i in range(len(outputs))], dtype=object)
        input_ids, attention, mask, rewards = _batch_from_outputs(outputs, tokenizer.pad_token_id)
        if shuffled:
            from trainers.verl.sabotage import shuffled_credit_advantage

            advantages, _ = shuffled_credit_advantage(rewards, mask, index, config=algorithm)
        else:
            advantages, _ = compute_turn_grpo_advantage(rewards, mask, index, config=algorithm)
        model.train()
        with torch.no_grad():
            old = _response_log_probs(model, input_ids, attention, mask.shape[1])
        new = _response_log_probs(model, input_ids, attention, mask.shape[1])
        loss, _ = policy_loss(old, new, sign * advantages, mask, "token-mean", actor_config)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, actor_config.grad_clip)
        optimizer.step()
    return curve
