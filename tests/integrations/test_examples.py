"""The example trainers run their first steps on CPU and stop, saying so, where a GPU or the Tinker
service is needed; their command lines refuse bad values with the reason."""

from __future__ import annotations

import asyncio
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


def test_art_trainable_model_carries_the_settings(tmp_path):
    config, options = art_train.parse_args(["--lora-rank", "32", "--max-context-tokens", "16000",
                                            "--art-path", str(tmp_path)])
    model = art_train.trainable_model(config, options)
    assert model.trainable and model.base_model == "Qwen/Qwen3-4B" and model.name == "termgym-qwen3-4b"
    assert model._internal_config["peft_args"]["r"] == 32
    assert model._internal_config["init_args"]["max_seq_length"] == 16000
    assert model.read_state() is None  # a fresh run starts at step 0
    model.merge_state({"step": 4, "config_hash": config.hash()})
    assert art_train.initial_step(model.read_state(), config.hash()) == 5


def test_art_resume_starts_after_the_recorded_step(caplog):
    assert art_train.initial_step(None, "abc") == 0
    assert art_train.initial_step({"sft_done": True}, "abc") == 0
    assert art_train.initial_step({"step": 41, "config_hash": "abc"}, "abc") == 42
    with caplog.at_level("WARNING", logger="termgym.art"):
        assert art_train.initial_step({"step": 3, "config_hash": "zzz"}, "abc") == 4
    assert "changed config: zzz -> abc" in caplog.text


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


# -- the Tinker example (seed 002: Harbor tasks, Terminus-2, GRPO groups) ------------------------

from trainers.tinker import train as tinker_train  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer_dir(tiny_tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokenizer")
    tiny_tokenizer.save_pretrained(path)
    return str(path)


def _cli(tokenizer_dir, *extra):
    return ["environment_type=local", f"tokenizer={tokenizer_dir}", "renderer_name=qwen3", *extra]


def test_tinker_dry_run_starts_the_first_harbor_group(tokenizer_dir, capsys):
    summary = tinker_train.main(_cli(tokenizer_dir, "dry_run=True", "batch_size=2", "group_size=2"))
    assert summary["group_size"] == 2 and summary["groups_in_first_batch"] == 2
    assert summary["batches"] == 3  # the six local-eligible bundled Harbor tasks, two per batch
    assert all(n > 100 for n in summary["prompt_tokens"]) and len(set(summary["prompt_tokens"])) == 1
    assert (summary["loss_fn"], summary["learning_rate"]) == ("importance_sampling", 5e-5)
    assert "Tinker service" in capsys.readouterr().err


def test_tinker_config_carries_seed_002s_settings(tokenizer_dir):
    cli = tinker_train.CLIConfig(environment_type="local", tokenizer=tokenizer_dir, renderer_name="qwen3",
                                 learning_rate=3e-4, loss_fn="ppo", max_turns=12)
    config = tinker_train.train_config(cli)
    assert (config.model_name, config.lora_rank, config.max_tokens, config.temperature, config.loss_fn,
            config.learning_rate) == ("Qwen/Qwen3-235B-A22B-Instruct-2507", 32, 4096, 0.7, "ppo", 3e-4)
    builder = config.dataset_builder
    assert (builder.env_id, builder.batch_size, builder.group_size, builder.split) == ("termgym/Harbor-v0", 8, 4, "local")
    assert builder.env_kwargs == {"backend": "local", "protocol": "terminus", "time_limit": 900.0, "max_steps": 12}
    assert builder.process_rewards is None


def test_tinker_cookbook_rollout_solves_a_harbor_task_over_terminus(tokenizer_dir, tiny_tokenizer):
    """The cookbook's do_group_rollout plays a bundled Harbor task in Terminus-2 JSON: a sampler that
    types the task's reference solution gets the verifier's reward, with tokens and logprobs per turn."""
    from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs
    from tinker_cookbook.rl.data_processing import trajectory_to_data
    from tinker_cookbook.rl.rollouts import do_group_rollout

    from termgym.env import oracle_actions

    builder = tinker_train.dataset_builder(tinker_train.CLIConfig(
        environment_type="local", tokenizer=tokenizer_dir, renderer_name="qwen3", group_size=1, wait="idle"))
    [group] = builder.groups(["log-error-codes"])
    end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")

    class OracleSampler(TokenCompleter):
        """Types the reference solution as the Terminus-2 replies the protocol expects."""

        actions: list[str] | None = None

        async def __call__(self, model_input, stop, *, max_tokens=None):
            if self.actions is None:
                env = group.envs[0].gym_env.unwrapped
                self.actions = await asyncio.to_thread(oracle_actions, env)
            tokens = tiny_tokenizer.encode(self.actions.pop(0), add_special_tokens=False) + [end]
            return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.25] * len(tokens))

    result = asyncio.run(do_group_rollout(group, OracleSampler()))
    [trajectory] = result.trajectories_G
    assert result.get_total_rewards() == [1.0]
    last = trajectory.transitions[-1]
    assert last.episode_done and last.metrics["passed"] == 1.0 and trajectory.stop_reason == "completed"
    assert all(t.ac.tokens[-1] == end and t.ac.logprobs == [-0.25] * len(t.ac.tokens) for t in trajectory.transitions)
    [datum] = trajectory_to_data(trajectory, 1.0, include_provenance=False)
    assert sum(datum.loss_fn_inputs["mask"].to_torch().tolist()) == sum(len(t.ac.tokens) for t in trajectory.transitions)


def test_tinker_bad_settings_are_refused(tokenizer_dir, monkeypatch):
    with pytest.raises(ValueError, match="environment_type='modal'"):
        tinker_train.dataset_builder(tinker_train.CLIConfig(environment_type="modal"))
    with pytest.raises(ValueError, match="wait must be 'duration' or 'idle', got 'never'"):
        tinker_train.dataset_builder(tinker_train.CLIConfig(environment_type="local", wait="never"))
    with pytest.raises(ValueError, match="batch_size and group_size must be at least 1"):
        tinker_train.dataset_builder(tinker_train.CLIConfig(environment_type="local", group_size=0))
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="set TINKER_API_KEY"):
        tinker_train.main(_cli(tokenizer_dir))
