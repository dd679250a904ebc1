"""It reads: veRL's own trainer (``run_ppo``, v1, CPU) teaches the tiny policy to write the colour its prompt
asks for, on wordings it never trained on.

The task (``termgym-learn/ReadPick-v0``, :func:`trainers.verl.learning.read_pick_suite`): each task's
prompt asks for one of three colours in one of seven wordings, and the task's grader, run in the
episode's real bubblewrap sandbox, passes only on that colour; the colour words are single tokens of the
tiny model. Training uses four wordings (12 tasks); validation the three held-out wordings (9 tasks, 8
sampled episodes each). One launch (:func:`trainers.verl.learning.run_reading`), 6 steps of 12 tasks x
8 episodes: the held-out reward goes from near chance to at least :data:`READ_BAR`, and every step
passes every check on what veRL logged, the credit checks included.

The no-signal baseline cannot reach that bar: with the colour masked, a wording's three prompts are the
same tokens (checked here), so any policy picks each colour with the same probability for all three
and earns exactly 1/3 in expectation; 0.6 is 4.8 standard deviations of a 72-episode mean above that
(at most: tasks with unequal odds only narrow it). ``python -m benchmarks.read_task`` runs that baseline
through the trainer, over several seeds, next to the intact run.
"""

from __future__ import annotations

import shutil
import time

import pytest

pytest.importorskip("verl")
# one launch of veRL's trainer: Ray and worker start-up, then 6 steps of 96 episodes and two validations
pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(1800)]

from trainers.verl import learning  # noqa: E402

STEPS = 6
#: The held-out reward the trained policy must reach (measured: 0.40 before training, see docs/training.md).
READ_BAR = 0.6
#: What a single-turn task cannot have: no observation in the response.
SINGLE_TURN_CHECKS = {name: check for name, check in learning.STEP_CHECKS.items() if name != "observations masked"}


def _print(request, *lines: str) -> None:
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + "\n".join(lines))


def test_masked_prompts_are_the_same_for_every_colour_and_unmasked_ones_name_it_in_one_token():
    from termgym.data.rl import build_rl_rows
    from trainers.verl.tiny_model import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(extra_tokens=learning.CHOICES, words=learning.COLOURS)
    colour_ids = {tokenizer.convert_tokens_to_ids(c): c for c in learning.COLOURS}

    def prompts(masked: bool) -> dict[str, list[int]]:
        rows = build_rl_rows(learning.READ_ID, split="all", env_kwargs={"masked": masked})
        return {r["extra_info"]["task_id"]: tokenizer.apply_chat_template(list(r["prompt"]), add_generation_prompt=True,
                                                                            tokenize=False) for r in rows}

    masked, plain = prompts(True), prompts(False)
    assert len(plain) == len(learning.WORDINGS) * len(learning.COLOURS)
    for wording in range(len(learning.WORDINGS)):
        assert len({masked[f"w{wording}-{c}"] for c in learning.COLOURS}) == 1
        for colour in learning.COLOURS:
            ids = tokenizer.encode(plain[f"w{wording}-{colour}"], add_special_tokens=False)
            assert [colour_ids[i] for i in ids if i in colour_ids] == [colour]  # the colour, once, as one token
            assert not any(i in colour_ids for i in tokenizer.encode(masked[f"w{wording}-{colour}"],
                                                                      add_special_tokens=False))


@pytest.fixture(scope="module")
def run(tmp_path_factory, request):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is required: the episodes run in real sandboxes")
    started = time.monotonic()
    metrics = learning.run_reading(tmp_path_factory.mktemp("verl-reading"), steps=STEPS)
    curve = learning.reward_curve({s: m for s, m in metrics.items() if s >= 1})
    _print(request, f"ReadPick, veRL run_ppo on CPU, 12 tasks x 8 episodes a step ({time.monotonic() - started:.0f} s):",
           "  training reward per step  " + "  ".join(f"{r:.3f}" for r in curve),
           f"  held-out reward           {learning.held_out_reward(metrics[0])} before, "
           f"{learning.held_out_reward(metrics[STEPS])} after step {STEPS}")
    return metrics


def test_the_policy_reads_wordings_it_never_trained_on(run):
    before, after = learning.held_out_reward(run[0]), learning.held_out_reward(run[STEPS])
    assert before is not None and after is not None, sorted(k for k in run[STEPS] if k.startswith("val"))
    assert before <= learning.CHANCE + 0.17, f"the untrained policy already earns {before} on the held-out wordings"
    assert after >= READ_BAR, f"held-out reward {before} -> {after}: below {READ_BAR} (chance {learning.CHANCE:.2f})"


def test_every_step_passes_every_check(run):
    for step in range(1, STEPS + 1):
        assert learning.failing_checks(run[step], SINGLE_TURN_CHECKS) == {}, step
