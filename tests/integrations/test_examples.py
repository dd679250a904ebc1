"""The example trainers run their first steps on CPU and stop, saying so, where a GPU or the Tinker
service is needed; their command lines refuse bad values with the reason."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("art", reason="install the [art] extra (see docs/integrations.md)")
pytest.importorskip("tinker_cookbook", reason="install the [tinker] extra (see docs/integrations.md)")

import scripted_model  # noqa: E402
from token_server import TokenScriptedModel  # noqa: E402

from trainers.art import train as art_train  # noqa: E402


def test_art_dry_run_plays_and_logs_one_step(tiny_tokenizer, tmp_path, capsys):
    with TokenScriptedModel(tiny_tokenizer) as server:
        summary = art_train.main([
            "--dry-run", "--base-url", server.base_url, "--served-model", "scripted-1", "--api-key", "sk-dry",
            "--env-id", scripted_model.ENV_ID, "--task-ids", "right-1,wrong-answer,explore",
            "--groups-per-step", "2", "--rollouts-per-group", "2", "--log-dir", str(tmp_path / "logs"),
            "--log-sample-rate", "1", "--art-path", str(tmp_path / ".art"), "--health-check-interval", "0",
            "--experiment-name", "dry"])
        assert {r["body"]["model"] for r in server.requests} == {"scripted-1"}
    assert summary["step"] == 0 and len(summary["tasks"]) == 2 and summary["trajectories"] == 4.0
    assert summary["exceptions"] == 0.0 and 0.0 < summary["passed"] <= 1.0
    assert len(summary["logged"]) == 4
    record = json.loads(open(summary["logged"][0]).read())
    assert record["config_hash"] == summary["config_hash"] and record["experiment"] == "dry"
    assert all(p.startswith(str(tmp_path / "logs" / "dry" / "step_00000")) for p in summary["logged"])
    err = capsys.readouterr().err
    assert "dry run: stopping here" in err and "CUDA GPU" in err


def test_art_defaults_are_seed_000s_and_the_hash_follows_the_config():
    config, options = art_train.parse_args([])
    assert (config.base_model, config.lora_rank, config.learning_rate, config.rollouts_per_group,
            config.temperature, config.max_new_tokens, config.process_rewards) == (
        "Qwen/Qwen3-4B", 64, 5e-7, 16, 0.7, 4096, True)
    assert (config.groups_per_step, config.max_concurrent, options.log_sample_rate) == (8, 32, 0.0)
    other, _ = art_train.parse_args(["--learning-rate", "1e-6", "--env-kwarg", "protocol=terminus",
                                     "--env-kwarg", "max_steps=20"])
    assert other.env_kwargs == {"protocol": "terminus", "max_steps": 20}
    assert config.hash() == art_train.parse_args([])[0].hash() != other.hash()


def test_art_resume_starts_after_the_recorded_step():
    assert art_train.initial_step(None, "abc") == 0
    assert art_train.initial_step({"sft_done": True}, "abc") == 0
    assert art_train.initial_step({"step": 41, "config_hash": "abc"}, "abc") == 42
    with pytest.raises(SystemExit, match="written by config zzz"):
        art_train.initial_step({"step": 3, "config_hash": "zzz"}, "abc")


def test_art_training_without_a_gpu_stops_with_the_reason(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: training would start")
    with pytest.raises(SystemExit, match="training needs a CUDA GPU"):
        art_train.main(["--env-id", scripted_model.ENV_ID, "--task-ids", "right-1", "--health-check-interval", "0",
                        "--art-path", str(tmp_path / ".art"), "--log-dir", str(tmp_path / "logs")])


@pytest.mark.parametrize("argv, message", [
    (["--log-sample-rate", "1.5"], "--log-sample-rate must be within 0..1"),
    (["--rollouts-per-group", "0"], "--rollouts-per-group must be at least 1"),
    (["--env-kwarg", "protocol"], "--env-kwarg must look like KEY=VALUE"),
    (["--dry-run"], "--dry-run needs --base-url"),
    (["--task-ids", ","], "--task-ids is empty"),
])
def test_art_command_line_refuses_bad_values(argv, message, capsys):
    with pytest.raises(SystemExit):
        art_train.parse_args(argv)
    assert message in capsys.readouterr().err
