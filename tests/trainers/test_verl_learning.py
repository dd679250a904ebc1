"""It learns: veRL's own trainer (``run_ppo``, v1, CPU) raises a tiny policy's reward on a two-turn termgym
task to >= 0.9 within a few steps, the same run with the advantage sign flipped drives it down, and the
trainer's checks fail when the signal is broken.

The task (:mod:`trainers.verl.learning`, ``termgym-learn/PickTwice-v0``): every assistant turn is one of
three actions that write a colour to ``answer.txt``, the second overwrites the first, and the task's
grader, run in the episode's real bubblewrap sandbox, passes only on blue, so a random policy earns
about 1/3. Two launches of veRL's trainer, each with 4 groups x 8 rollouts per step, lr 1e-2 on the
rank-8 LoRA adapter, weight decay 0, the reward set by the second turn (placed on its last token),
anchor-state grouping, no KL loss (so a step without reward has no gradient):

* intact: the mean episode reward starts near chance and reaches >= 0.9 within 3 steps
  (``learning.check_learns``); steps 4-7 then each apply one agent-loop sabotage
  (:data:`trainers.verl.sabotage.SCHEDULE`: observations trained on, no reward, rewards shifted by
  one turn, the env handed a random other action), and each fails its check;
* the advantage sign flipped: it falls to <= 0.15 (``learning.check_unlearns``).

Rewards shuffled across a step's episodes (``reward_shuffled``) are shown failing the credit check in
:mod:`test_credit_checks` (the real agent loop, seconds), not here: a shuffle is visible only while
returns still differ, i.e. in a step that still moves the policy, and one shuffled step at lr 1e-2
moved it anywhere (measured 2026-12-02: put at step 1 of the sign-flipped run, it sent the policy
from 0.28 to 0.88, and the flipped steps after it could not bring it below 0.8 by step 3), which made
the flipped run's curve a draw. ``learning.run_learning(..., shuffled_first=True)`` runs it.

Single-turn learning is :mod:`test_verl_reading` (a task whose right answer depends on its prompt,
judged on held-out wordings); the one-turn pick task's curves are in docs/training.md.

Every step of the intact runs passes every check of :data:`trainers.verl.learning.STEP_CHECKS`, the
credit checks included (every episode is recorded; each trajectory is matched to its record by id).
The reward curves and the sabotage table are printed (with ``-s`` or not).
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

pytest.importorskip("verl")
# two launches of veRL's trainer, ~1-2.5 min of Ray and worker start-up each on a 2-core machine
pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(1800)]

from trainers.verl import learning  # noqa: E402
from trainers.verl.sabotage import INTACT_STEPS, SCHEDULE  # noqa: E402

STEPS = INTACT_STEPS
TWO_TURNS = dict(turns=2, kl_loss=False, extra=["+algorithm.termgym_turn_grouping=anchor"])
#: sabotage -> the check it must break (at least); "flipped_sign" breaks learning itself.
EXPECTED = {"mask_all_ones": "observations masked", "reward_zeroed": "score = episode return",
            "reward_shifted": "rewards on their turns", "action_replaced": "env ran the policy's tokens"}
#: ``TERMGYM_LEARNING_CURVES=path.json`` keeps the measured curves (docs/training.md's plot is drawn from them).
CURVES_ENV = "TERMGYM_LEARNING_CURVES"


def _print(request, *lines: str) -> None:
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + "\n".join(lines))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is required: the episodes run in real sandboxes")
    out = tmp_path_factory.mktemp("verl-learning")
    launches = {
        "two turns": dict(TWO_TURNS, steps=max(SCHEDULE), sabotage="scheduled"),
        "two turns, sign flipped": dict(TWO_TURNS, steps=STEPS, sabotage="flipped_sign"),
    }
    results, seconds = {}, {}
    for k, (name, kwargs) in enumerate(launches.items()):
        started = time.monotonic()
        results[name] = learning.run_learning(out / f"run{k}", **kwargs)
        seconds[name] = time.monotonic() - started
    results["sabotaged"] = {step: metrics for step, metrics in results["two turns"].items() if step in SCHEDULE}
    results["two turns"] = {step: metrics for step, metrics in results["two turns"].items() if step <= STEPS}
    curves = {name: learning.reward_curve(results[name]) for name in launches}
    (out / "curves.json").write_text(json.dumps(curves, indent=1))
    if os.environ.get(CURVES_ENV):
        shutil.copy(out / "curves.json", os.environ[CURVES_ENV])
    _print(request, "mean episode reward per step (veRL run_ppo on CPU, tiny Qwen3, 4 x 8 episodes a step):",
           *(f"  {name:26s} " + "  ".join(f"{r:.3f}" for r in curve) + f"   ({seconds[name]:.0f} s launch)"
             for name, curve in curves.items()))
    return results


def test_the_second_turn_learns(runs):
    learning.check_learns(learning.reward_curve(runs["two turns"]))


def test_the_second_turn_unlearns_with_the_sign_flipped(runs):
    learning.check_unlearns(learning.reward_curve(runs["two turns, sign flipped"]))


def test_every_step_of_the_intact_runs_passes_every_check(runs):
    for name in ("two turns", "two turns, sign flipped"):
        for step, metrics in runs[name].items():
            assert learning.failing_checks(metrics) == {}, (name, step)


def test_each_sabotage_fails_its_check(runs, request):
    table = {}
    curve = learning.reward_curve(runs["two turns, sign flipped"])
    with pytest.raises(AssertionError, match="never reached"):
        learning.check_learns(curve)  # what test_the_second_turn_learns asserts
    table["flipped_sign"] = "learning (the reward falls: " + " ".join(f"{r:.2f}" for r in curve) + ")"
    for step, sabotage in sorted(SCHEDULE.items()):
        failed = learning.failing_checks(runs["sabotaged"][step])
        table[sabotage] = ", ".join(sorted(failed)) or "NOTHING"
        assert EXPECTED[sabotage] in failed, (sabotage, failed)
    _print(request, "sabotage -> failing checks", *(f"  {s:30s} -> {failed}" for s, failed in table.items()))
