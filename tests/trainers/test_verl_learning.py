"""It learns: veRL's own trainer (``run_ppo``, v1, CPU) raises a tiny policy's reward on a termgym task,
and the trainer's checks fail when the signal is broken.

The task (:mod:`trainers.verl.learning`): every assistant turn is one of three actions that write a
colour to ``answer.txt``, and the task's grader, run in the episode's real bubblewrap sandbox,
passes only on blue, so a random policy earns 1/3. Three launches of veRL's trainer, each on
the pick task with 4 groups x 8 rollouts per step, weight decay 0:

* single turn, ``termgym_turn_grpo`` (the recipe's loss, KL included): the mean episode reward
  rises from chance (1/3) by at least 0.3 within 6 steps (the issue asks for >= 0.9; measured
  without Ray at the same settings: 0.31 -> 0.78 at step 4, see ``learning.check_learns``);
* the same with the advantage sign flipped: it falls towards 0;
* two turns, the reward set by the second one (placed on its last token), anchor-state grouping,
  no KL loss (so a step without reward has no gradient): it rises too in steps 1-6; steps 7-9
  each apply one agent-loop sabotage (:data:`trainers.verl.sabotage.SCHEDULE`: observations
  trained on, no reward, rewards shifted by one turn), and each fails its check.

Every step of the intact runs passes every check of :data:`trainers.verl.learning.STEP_CHECKS`.
The reward curves and the sabotage table are printed (with ``-s`` or not).
"""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("verl")
# three launches of veRL's trainer: ~1.5 min of Ray and worker start-up each on a quiet 2-core machine
pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(2400)]

from trainers.verl import learning  # noqa: E402
from trainers.verl.sabotage import INTACT_STEPS, SCHEDULE  # noqa: E402

STEPS = INTACT_STEPS
#: sabotage -> the check it must break (at least); "flipped_sign" breaks learning itself.
EXPECTED = {"mask_all_ones": "observations masked", "reward_zeroed": "score = episode return",
            "reward_shifted": "rewards on their turns"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is required: the episodes run in real sandboxes")
    out = tmp_path_factory.mktemp("verl-learning")
    results = {
        "single turn": learning.run_learning(out / "single", turns=1, steps=STEPS),
        "single turn, sign flipped": learning.run_learning(out / "flipped", turns=1, steps=STEPS,
                                                           sabotage="flipped_sign"),
    }
    two = learning.run_learning(out / "two", turns=2, steps=max(SCHEDULE), sabotage="scheduled", kl_loss=False,
                                extra=["+algorithm.termgym_turn_grouping=anchor"])
    results["two turns"] = {step: metrics for step, metrics in two.items() if step <= STEPS}
    results["sabotaged"] = {step: metrics for step, metrics in two.items() if step in SCHEDULE}
    curves = {name: learning.reward_curve(steps) for name, steps in results.items() if name != "sabotaged"}
    (out / "curves.json").write_text(json.dumps(curves, indent=1))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\nmean episode reward per step (veRL run_ppo on CPU, tiny Qwen3, 4 x 8 episodes a step):")
        for name, curve in curves.items():
            print(f"  {name:28s} " + "  ".join(f"{r:.3f}" for r in curve))
    return results


def test_the_reward_rises_from_chance(runs):
    learning.check_learns(learning.reward_curve(runs["single turn"]))


def test_with_the_sign_flipped_the_reward_falls(runs):
    learning.check_unlearns(learning.reward_curve(runs["single turn, sign flipped"]))


def test_the_second_turn_learns(runs):
    curve = learning.reward_curve(runs["two turns"])
    learning.check_learns(curve)


def test_every_step_of_the_intact_runs_passes_every_check(runs):
    for name in ("single turn", "single turn, sign flipped", "two turns"):
        checks = dict(learning.STEP_CHECKS)
        if name != "two turns":
            checks.pop("observations masked")  # one turn, no observation in the response
        for step, metrics in runs[name].items():
            assert learning.failing_checks(metrics, checks) == {}, (name, step)


def test_each_sabotage_fails_its_check(runs, request):
    table = {"flipped_sign": "learning (the reward falls: " + " ".join(
        f"{r:.2f}" for r in learning.reward_curve(runs["single turn, sign flipped"])) + ")"}
    for step, sabotage in sorted(SCHEDULE.items()):
        failed = learning.failing_checks(runs["sabotaged"][step])
        table[sabotage] = ", ".join(sorted(failed)) or "NOTHING"
        assert EXPECTED[sabotage] in failed, (sabotage, failed)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\nsabotage -> failing checks")
        for sabotage, failed in table.items():
            print(f"  {sabotage:16s} -> {failed}")
