"""The H200-day plan: step-time projection, steps for a budget, the recipe's default within 24 h."""

from __future__ import annotations

import pytest

from trainers.verl import launch, plan


def test_step_time_by_hand():
    shape = plan.StepShape(episodes=64, mean_tokens=8000, mean_generated=3000)
    phases = plan.step_seconds(shape, update_rate=8000, forward_rate=32000, generation_rate=4000, overhead_s=10)
    # 512k tokens: 64 s of update + 2 x 16 s of forward; 192k generated tokens: 48 s
    assert phases == {"generate": 48.0, "actor": 96.0, "overhead": 10.0, "total": 154.0}


def test_steps_and_hours_are_inverse():
    assert plan.steps_for_hours(24, 180) == 432  # 24 h x 0.9 / 180 s
    assert plan.hours_for_steps(432, 180) == pytest.approx(24.0)
    assert plan.steps_for_hours(0.001, 180) == 1


def test_the_recipe_default_fits_one_h200_day():
    overrides = launch.load_overrides("grpo", launch.placeholders(data_dir="/tmp"))
    values = dict(o.split("=", 1) for o in overrides)
    shape = plan.StepShape.from_budget(groups=int(values["data.train_batch_size"]),
                                       rollouts=int(values["actor_rollout_ref.rollout.n"]),
                                       context=int(values["data.max_prompt_length"]) + int(values["data.max_response_length"]))
    steps = int(values["trainer.total_training_steps"])
    assert steps == plan.RECIPE_STEPS
    assert plan.hours_for_steps(steps, plan.step_seconds(shape)["total"]) <= 24.0
    assert launch.steps_within(overrides, 24) >= steps


def test_hours_knob_sets_the_step_count(capsys):
    assert launch.main(["grpo", "--data-dir", "/tmp", "--hours", "12", "--seconds-per-step", "200", "--print"]) == 0
    command = capsys.readouterr().out.split()
    steps = [arg for arg in command if arg.startswith("trainer.total_training_steps=")]
    assert steps[-1] == "trainer.total_training_steps=194"  # 12 h x 0.9 / 200 s; Hydra takes the last value


@pytest.mark.parametrize("bad", [dict(episodes=0, mean_tokens=1, mean_generated=1),
                                 dict(episodes=1, mean_tokens=10, mean_generated=20)])
def test_impossible_shapes_are_rejected(bad):
    with pytest.raises(ValueError, match="mean_generated"):
        plan.StepShape(**bad)


def test_hours_need_the_batch_keys():
    with pytest.raises(ValueError, match="data.train_batch_size"):
        launch.steps_within(["actor_rollout_ref.rollout.n=8"], 24)
    with pytest.raises(ValueError, match="positive"):
        plan.steps_for_hours(-1, 100)
