"""termgym.integrations.art: real termgym episodes (bubblewrap sandboxes) played by a scripted
OpenAI-compatible server on loopback, through ART's own client, gatherer, types and tokenizer."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

art = pytest.importorskip("art", reason="install the [art] extra (see docs/integrations.md)")

import scripted_model  # noqa: E402
from art.preprocessing.tokenize import tokenize_trajectory_groups  # noqa: E402
from openai.types.chat.chat_completion import Choice  # noqa: E402
from token_server import TokenScriptedModel, logprob_of  # noqa: E402

from termgym.data.samples import OfflineSample  # noqa: E402
from termgym.integrations.art import (  # noqa: E402
    RolloutConfig,
    TrajectoryLogger,
    config_hash,
    gather_groups,
    rollout,
    sample_to_trajectory,
    trajectory_group,
)
from termgym.integrations.episodes import EnvRecipe  # noqa: E402

TASKS = ["right-1", "explore", "wrong-answer", "bad-format"]
ROLLOUTS = 2


@pytest.fixture(scope="module")
def server(tiny_tokenizer):
    with TokenScriptedModel(tiny_tokenizer) as srv:
        yield srv


@pytest.fixture(scope="module")
def model(server, tmp_path_factory):
    return art.Model(name="scripted-1", project="termgym-tests", inference_base_url=server.base_url,
                     inference_api_key="sk-test", base_path=str(tmp_path_factory.mktemp("art")))


@pytest.fixture(scope="module")
def config():
    return RolloutConfig(EnvRecipe(scripted_model.ENV_ID, process_rewards={}), temperature=0.7, max_tokens=256)


@pytest.fixture(scope="module")
def groups(model, config):
    return asyncio.run(gather_groups(model, TASKS, config, rollouts_per_group=ROLLOUTS, max_concurrent=4,
                                     pbar_desc=None))


def _by_task(groups):
    return {g.metadata["task_id"]: g for g in groups}


def test_one_group_per_task_with_outcomes_and_process_rewards(groups):
    assert sorted(_by_task(groups)) == sorted(TASKS)
    for group in groups:
        assert isinstance(group, art.TrajectoryGroup)
        assert len(group.trajectories) == ROLLOUTS and group.exceptions == []
        for trajectory in group.trajectories:
            assert trajectory.metadata["task_id"] == group.metadata["task_id"]
            assert trajectory.metadata["env_id"] == scripted_model.ENV_ID
            assert trajectory.metadata["end_reason"] == "submitted"
            # the reward is the process-reward return: shaping events plus the outcome
            assert trajectory.reward == pytest.approx(trajectory.metrics["process/return"])
            assert len(trajectory.logs) == trajectory.metrics["steps"]
    tasks = _by_task(groups)
    right = tasks["right-1"].trajectories[0]
    assert right.metrics["passed"] == 1.0 and right.metrics["score"] == 1.0
    assert right.metrics["process/count/target_tests"] == 1.0
    assert right.metrics["process/count/valid_command"] == 1.0
    wrong = tasks["wrong-answer"].trajectories[0]
    assert wrong.metrics["passed"] == 0.0 and wrong.reward < right.reward
    bad = tasks["bad-format"].trajectories[0]
    assert bad.metrics["format_errors"] == 2.0 and bad.metrics["process/count/invalid_format"] == 2.0
    assert bad.metrics["passed"] == 1.0 and bad.reward < right.reward  # same outcome, two penalties
    assert tasks["explore"].trajectories[0].metrics["steps"] == 3.0


def test_trajectories_are_valid_art_objects_with_choices(groups):
    for group in groups:
        art.TrajectoryGroup(trajectories=[art.Trajectory.model_validate(dict(t)) for t in group])
        for trajectory in group:
            roles = [m["role"] for m in trajectory.messages()]
            assert roles[:2] == ["system", "user"]
            choices = [m for m in trajectory.messages_and_choices if isinstance(m, Choice)]
            assert len(choices) == trajectory.metrics["steps"]
            assert all(c.logprobs and c.logprobs.content for c in choices)
            # every assistant turn is followed by what the env answered
            assistant_at = [i for i, m in enumerate(trajectory.messages_and_choices) if isinstance(m, Choice)]
            assert all(not isinstance(trajectory.messages_and_choices[i + 1], Choice) for i in assistant_at)
            json.dumps(trajectory.for_logging(), default=str)


def test_the_model_saw_exactly_the_trajectory_history(groups, server):
    explore = _by_task(groups)["explore"].trajectories[0].messages()
    requests = [r for r in server.requests if r["task"] == "explore"]
    assert len(requests) == 3 * ROLLOUTS
    for request in requests:
        turn = request["turn"]
        body = request["body"]
        # turn k: system, task, then k (assistant, observation) pairs
        assert body["messages"] == explore[: 2 + 2 * turn]
        assert body["logprobs"] is True and body["temperature"] == 0.7 and body["max_tokens"] == 256
        assert body["model"] == "scripted-1"
        assert request["authorization"] == "Bearer sk-test"


def test_art_tokenizes_the_groups_with_the_sampled_tokens_and_logprobs(groups, tiny_tokenizer):
    results = list(tokenize_trajectory_groups(tiny_tokenizer, groups, allow_training_without_logprobs=False,
                                              scale_rewards=True, shuffle_group_trajectories=False,
                                              drop_zero_advantage_trajectories=False))
    assert len(results) == len(TASKS) * ROLLOUTS
    end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    for result in results:
        choices = [m for m in result.trajectory.messages_and_choices if isinstance(m, Choice)]
        expected_ids: list[int] = []
        expected_logprobs: list[float] = []
        for choice in choices:
            ids = tiny_tokenizer.encode(choice.message.content, add_special_tokens=False) + [end]
            expected_ids += ids
            expected_logprobs += [logprob_of(i) for i in range(len(ids))]
        trained = [i for i, m in enumerate(result.assistant_mask) if m]
        assert [result.token_ids[i] for i in trained] == expected_ids
        assert [result.logprobs[i] for i in trained] == pytest.approx(expected_logprobs)
        assert all(math.isnan(result.logprobs[i]) for i, m in enumerate(result.assistant_mask) if not m)
        # the untrained part is the env's side of the conversation
        assert "<returncode>" in tiny_tokenizer.decode([t for t, m in zip(result.token_ids, result.assistant_mask)
                                                        if not m])
    # GRPO within a group: equal scripted rollouts get equal advantages
    assert results[0].advantage == pytest.approx(results[1].advantage)


def test_offline_sample_becomes_an_sft_trajectory(tiny_tokenizer):
    sample = OfflineSample.from_dict({"task_id": 7, "score": 1.0, "extra": {"all_passed": True, "conversation": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Create hello.txt"},
        {"role": "assistant", "content": "THOUGHT: Create the file.\n```bash\necho hi > hello.txt\n```"},
        {"role": "user", "content": "<returncode>0</returncode>"},
        {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}]}})
    trajectory = sample_to_trajectory(sample)
    assert trajectory.reward == 1.0 and trajectory.metadata == {"task_id": "7", "source": "offline"}
    # ART's SFT batcher imports unsloth (GPU only); its trajectory tokenizer is the same masking
    # logic for assistant messages without logprobs, and runs here.
    [result] = tokenize_trajectory_groups(tiny_tokenizer, [art.TrajectoryGroup([trajectory])],
                                          allow_training_without_logprobs=True, scale_rewards=False,
                                          drop_zero_advantage_trajectories=False)
    trained = tiny_tokenizer.decode([t for t, m in zip(result.token_ids, result.assistant_mask) if m])
    assert "echo hi > hello.txt" in trained and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in trained
    assert "Create hello.txt" not in trained and "<returncode>" not in trained
    no_assistant = OfflineSample.from_dict({"task_id": 8, "score": 0.0, "extra": {"conversation": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}})
    with pytest.raises(ValueError, match="8.*no assistant turn"):
        sample_to_trajectory(no_assistant)


def test_endpoint_failures_land_in_the_group_and_refusals_are_graded(model, server):
    flaky = RolloutConfig(EnvRecipe(scripted_model.ENV_ID), model_call_retries=0)
    [down] = asyncio.run(gather_groups(model, ["down"], flaky, rollouts_per_group=2, max_exceptions=2, pbar_desc=None))
    assert down.trajectories == [] and len(down.exceptions) == 2
    assert "InternalServerError" in down.exceptions[0].type
    # an HTTP 400 ("context too long") ends the episode, which is graded like a cut episode
    trajectory = asyncio.run(rollout(model, "too-long", flaky))
    assert trajectory.metrics["end/context_limit"] == 1.0 and trajectory.metrics["passed"] == 0.0
    assert trajectory.metadata["end_reason"] == "context_limit" and trajectory.reward == 0.0
    assert "context_limit" in trajectory.logs[-1]


def test_trajectory_logger_samples_reproducibly(groups, tmp_path):
    digest = config_hash({"lr": 5e-7, "model": "Qwen/Qwen3-4B"})
    assert digest == config_hash({"model": "Qwen/Qwen3-4B", "lr": 5e-7}) != config_hash({"lr": 1e-6})
    everything = TrajectoryLogger(tmp_path / "all", "exp", 1.0, digest).log(3, groups)
    assert len(everything) == len(TASKS) * ROLLOUTS
    record = json.loads(everything[0].read_text())
    assert record["config_hash"] == digest and record["step"] == 3 and record["messages"][2]["trainable"] is True
    half = [p.name for p in TrajectoryLogger(tmp_path / "a", "exp", 0.5, digest).log(0, groups)]
    again = [p.name for p in TrajectoryLogger(tmp_path / "b", "exp", 0.5, digest).log(0, groups)]
    assert half == again and 0 < len(half) < len(everything)
    assert TrajectoryLogger(tmp_path / "none", "exp", 0.0, digest).log(0, groups) == []


def test_bad_input_is_refused_with_the_reason(model, config):
    with pytest.raises(ValueError, match="nope/Missing-v0.*not registered"):
        EnvRecipe("nope/Missing-v0")
    with pytest.raises(TypeError, match="env_kwargs must be a mapping"):
        EnvRecipe(scripted_model.ENV_ID, env_kwargs=["backend", "local"])
    with pytest.raises(TypeError, match="RolloutConfig.env must be an EnvRecipe"):
        RolloutConfig(env=scripted_model.ENV_ID)
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        RolloutConfig(EnvRecipe(scripted_model.ENV_ID), max_tokens=0)
    with pytest.raises(ValueError, match="rollouts per group must be at least 1"):
        trajectory_group(model, "right-1", config, 0)
    with pytest.raises(ValueError, match="at least one task id"):
        asyncio.run(gather_groups(model, [], config, rollouts_per_group=2))
    with pytest.raises(ValueError, match="max_concurrent must be at least 1"):
        asyncio.run(gather_groups(model, ["right-1"], config, rollouts_per_group=2, max_concurrent=0))
    with pytest.raises(ValueError, match="sample rate must be within 0..1"):
        TrajectoryLogger("logs", "exp", 1.5, "abc")


def test_function_calling_protocol_keeps_tool_calls_and_results(model):
    config = RolloutConfig(EnvRecipe(scripted_model.ENV_ID, env_kwargs={"protocol": "toolcall"}))
    trajectory = asyncio.run(rollout(model, "right-2", config))
    assert trajectory.metrics["passed"] == 1.0 and trajectory.reward == 1.0
    assert trajectory.tools and {t["function"]["name"] for t in trajectory.tools} >= {"bash", "submit"}
    first = next(m for m in trajectory.messages_and_choices if isinstance(m, Choice))
    [call] = first.message.tool_calls
    assert call.function.name == "bash" and "answer.txt" in call.function.arguments
    results = [m for m in trajectory.messages_and_choices if isinstance(m, dict) and m["role"] == "tool"]
    assert results and results[0]["tool_call_id"] == call.id
