"""The H200-day plan: step-time projection, steps for a budget, the recipe's default within 24 h."""

from __future__ import annotations

import pytest

from trainers.verl import launch, plan


def test_decode_step_by_hand():
    # 4B bf16 weights (8.04 GB) + 64 sequences x 6,144 tokens x 147,456 B of KV per token (57.98 GB),
    # read at 4.8 TB/s x 0.6
    model = plan.QWEN3_4B
    assert model.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2 == 147_456
    step = plan.H200.decode_step_s(model, 64, 6144)
    assert step == pytest.approx((8.04e9 + 64 * 6144 * 147_456) / 2.88e12)
    assert 64 / step == pytest.approx(2_792, rel=1e-3)  # tokens/s over the batch


def test_step_time_term_by_term():
    shape = plan.StepShape(episodes=64, mean_tokens=8000, mean_generated=3000, context=16000, generated_share=0.4,
                           tokens_per_turn=200)
    terms = plan.step_seconds(shape, update_rate=8000, forward_rate=32000, prefill_rate=40000, command_s=2,
                              grade_s=6, overhead_s=10)
    device, model = plan.H200, plan.QWEN3_4B
    assert terms["bulk_decode"] == pytest.approx(3000 * device.decode_step_s(model, 64, 6000))
    # the slowest episode fills the context: 6,400 generated, 3,400 of them with 16 sequences still running
    assert terms["tail_decode"] == pytest.approx(3400 * device.decode_step_s(model, 16, 14400))
    assert terms["prefill"] == pytest.approx(64 * 5000 / 40000)
    assert terms["slowest_env"] == pytest.approx(32 * 2 + 6)  # 6,400 / 200 turns, then grading
    # 512k tokens: 16 s of old log-probs, 16 s of reference, 64 s of update
    assert (terms["old_log_prob"], terms["ref"], terms["update"]) == (16.0, 16.0, 64.0)
    parts = ["bulk_decode", "tail_decode", "prefill", "slowest_env", "old_log_prob", "ref", "update", "overhead"]
    assert terms["total"] == pytest.approx(sum(terms[p] for p in parts))


def test_a_measured_generation_rate_replaces_the_decode_model():
    shape = plan.StepShape(episodes=64, mean_tokens=8000, mean_generated=3000, context=16000)
    terms = plan.step_seconds(shape, generation_rate=2000)
    assert terms["bulk_decode"] == pytest.approx(64 * 3000 / 2000)
    assert terms["tail_decode"] == pytest.approx(3400 * 64 / 2000)


def test_every_term_is_printed(capsys):
    assert plan.main([]) == 0
    out = capsys.readouterr().out
    for term in plan.TERMS:
        assert term in out
    assert f"{plan.RECIPE_STEPS} steps ->" in out


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
    # Qwen3's thinking is off (plan.py's generation terms assume it)
    assert values["+data.apply_chat_template_kwargs.enable_thinking"] == "false"
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
