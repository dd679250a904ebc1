"""TermgymAgentLoop with veRL's real classes, a tiny random Qwen3 behind a token server, and a real env."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

import gymnasium as gym  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, DictConfigWrap  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402

import termgym  # noqa: E402
from termgym import CommandTask, ListSuite, Truncate  # noqa: E402
from termgym.wrappers.rewards import OUTCOME_EVENTS, ProcessReward  # noqa: E402
from trainers.verl.agent_loop import TermgymAgentLoop, per_turn_token_rewards  # noqa: E402
from trainers.verl.tiny_model import TinyTokenServer  # noqa: E402

ENV_ID = "termgym-test/VerlTiny-v0"
MAX_TOKENS_PER_TURN = 48
RESPONSE_LENGTH = 420

COMMAND = "THOUGHT: write the file.\n```bash\necho hi > hello.txt\n```"
SUBMIT = "<think>\nThe file is there.\n</think>\nTHOUGHT: done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
LS = "THOUGHT: look.\n```bash\nls -la\n```"
RAMBLE = "THOUGHT: " + "let me think about this for a long while " * 8
# Task "hello": a sampled (random) turn, then a real command, then a submission that passes.
# Task "listing": a real command, a submission without doing the work (grade 0).
SCRIPTS = {
    "Create hello.txt": [None, COMMAND, SUBMIT],
    "List the workspace": [LS, SUBMIT],
    "Count the files": [RAMBLE],  # longer than MAX_TOKENS_PER_TURN: the turn is cut
}


def _suite() -> ListSuite:
    return ListSuite([
        CommandTask("hello", "Create hello.txt containing hi.", grade_command="grep -qx hi hello.txt"),
        CommandTask("listing", "List the workspace, then create done.txt.", grade_command="test -f done.txt"),
        CommandTask("random", "Print the date.", grade_command="true"),
        CommandTask("long", "Count the files.", grade_command="true"),
    ], name="verl-tiny")


@pytest.fixture(scope="module", autouse=True)
def registered_env():
    termgym.register_suite(ENV_ID, _suite(), max_steps=4)
    yield
    del gym.registry[ENV_ID]


class SandboxSpy(gym.Wrapper):
    """Records every sandbox its episodes start, so tests can check each one was closed."""

    started: list = []

    def reset(self, **kwargs):
        result = super().reset(**kwargs)
        SandboxSpy.started.append(self.unwrapped.sandbox)
        return result


def _all_closed(sandboxes) -> bool:
    def gone(box) -> bool:
        host_dir = getattr(box, "host_dir", None)  # the local backend's workspace on the host
        return box.closed and (host_dir is None or not Path(host_dir).exists())

    return bool(sandboxes) and all(gone(box) for box in sandboxes)


def _config(response_length: int = RESPONSE_LENGTH):
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": response_length,
                                          "full_determinism": False}},
        "data": {"apply_chat_template_kwargs": {}},
    })


def _loop(server, response_length: int = RESPONSE_LENGTH, **kwargs) -> TermgymAgentLoop:
    config = _config(response_length)
    return TermgymAgentLoop(
        trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=server.tokenizer, processor=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), hf_model_type="qwen3",
        **{"max_tokens_per_turn": MAX_TOKENS_PER_TURN, **kwargs},
    )


async def _play(server, task_ids, **kwargs):
    loops = [_loop(server, **kwargs) for _ in task_ids]  # veRL builds one loop per sample
    outputs = await asyncio.gather(*[
        loop.run({"temperature": 0.7, "logprobs": True}, raw_prompt=[],
                 extra_info={"env_id": ENV_ID, "task_id": task_id})
        for loop, task_id in zip(loops, task_ids, strict=False)
    ])
    return list(zip(loops, outputs, strict=False))


def _render(tokenizer, messages):
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)


def _replay_reward(episode) -> float:
    """The env's total reward for the same assistant messages, played on a fresh env: the turns the
    loop sent, then (when the loop, not the env, ended the episode) the grade of what was left."""
    messages = episode["messages"]
    env = gym.make(ENV_ID)
    env.reset(options={"task_id": messages_task(messages)})
    total = 0.0
    ended = False
    try:
        assistant = [m for m in messages if m["role"] == "assistant"][: episode["stepped_turns"]]
        for message in assistant:
            _, reward, terminated, truncated, _ = env.step(message["content"])
            total += float(reward)
            if terminated or truncated:
                ended = True
                break
        if not ended:  # the loop ended it: a last Truncate step, as in the loop
            total += float(env.step(Truncate(episode["end_reason"]))[1])
    finally:
        env.close()
    return total


def messages_task(messages) -> str:
    text = messages[1]["content"]
    for marker, task_id in (("hello.txt", "hello"), ("List the workspace", "listing"), ("Count the files", "long")):
        if marker in text:
            return task_id
    return "random"


@pytest.fixture(scope="module")
def episodes(tiny_model, tiny_tokenizer):
    SandboxSpy.started = []
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts=SCRIPTS, seed=3)
    played = asyncio.run(_play(server, ["hello", "hello", "listing", "long", "random", "random"],
                               wrappers=[SandboxSpy]))
    return server, played, list(SandboxSpy.started)


def test_an_agent_loop_of_verls_kind(episodes):
    _, played, _ = episodes
    assert all(isinstance(loop, AgentLoopBase) for loop, _ in played)


def test_decoded_tokens_equal_the_chat_template_of_the_final_messages(episodes, tiny_tokenizer):
    _, played, _ = episodes
    for loop, output in played:
        messages = loop.last_episode["messages"]
        decoded = tiny_tokenizer.decode(output.prompt_ids + output.response_ids, skip_special_tokens=False)
        rendered = _render(tiny_tokenizer, messages)
        im_end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
        if output.response_ids[-1] == im_end:
            # the response stops on the model's <|im_end|>; the template writes "\n" after every turn
            assert decoded + "\n" == rendered
        else:
            # a length-truncated last turn: the template closes it, the tokens do not
            assert rendered == decoded + "<|im_end|>\n"
        assert tiny_tokenizer.decode(output.prompt_ids, skip_special_tokens=False) == \
            tiny_tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)


def test_response_mask_is_one_exactly_on_model_tokens(episodes):
    server, played, _ = episodes
    for loop, output in played:
        generated = [c["token_ids"] for c in server_calls(server, loop.last_episode["request_id"])]
        runs, current, previous = [], [], 0
        for token, bit in zip(output.response_ids, output.response_mask, strict=False):
            if bit:
                current.append(token)
            elif previous:
                runs.append(current)
                current = []
            previous = bit
        if current:
            runs.append(current)
        assert runs == generated  # every generated token, in order, and nothing else
        assert len(output.response_logprobs) == len(output.response_mask)
        assert all(lp == 0.0 for lp, bit in zip(output.response_logprobs, output.response_mask, strict=False) if not bit)


def server_calls(server, request_id):
    return [c for c in server.calls if c["request_id"] == request_id]


def test_reward_equals_the_envs(episodes):
    _, played, _ = episodes
    for loop, output in played:
        assert output.reward_score == pytest.approx(_replay_reward(loop.last_episode))
        assert output.reward_score == pytest.approx(sum(output.extra_fields["turn_scores"]))
        grade = output.extra_fields["grade"]
        if grade is not None:
            assert output.reward_score == pytest.approx(grade["score"])
    by_task = {}
    for loop, output in played:
        by_task.setdefault(messages_task(loop.last_episode["messages"]), []).append(output)
    # the scripted episodes ran real commands: "hello" passes, "listing" submits without the file
    for output in by_task["hello"]:
        if output.extra_fields["end_reason"] == "submitted":
            assert output.reward_score == 1.0 and output.extra_fields["grade"]["passed"]
    assert all(o.extra_fields["end_reason"] == "submitted" and o.reward_score == 0.0 for o in by_task["listing"])
    assert any(o.extra_fields["end_reason"] == "submitted" and o.reward_score == 1.0 for o in by_task["hello"])


def test_lengths_respect_the_budgets(episodes):
    server, played, _ = episodes
    for loop, output in played:
        assert len(output.response_ids) == len(output.response_mask) <= RESPONSE_LENGTH
        calls = server_calls(server, loop.last_episode["request_id"])
        assert all(c["max_tokens"] <= MAX_TOKENS_PER_TURN and c["n_tokens"] <= c["max_tokens"] for c in calls)
        assert output.num_turns == len(loop.last_episode["messages"]) - 1


def test_a_truncated_turn_ends_the_episode_cleanly(episodes):
    server, played, sandboxes = episodes
    reasons = [o.extra_fields["end_reason"] for _, o in played]
    assert "turn_truncated" in reasons, reasons
    for loop, output in played:
        if output.extra_fields["end_reason"] == "turn_truncated":
            last_turn = server_calls(server, loop.last_episode["request_id"])[-1]
            assert last_turn["n_tokens"] == MAX_TOKENS_PER_TURN
            assert output.response_mask[-1] == 1  # the response ends on the model's own (cut) turn
            # the cut turn is not sent to the env, but the episode is graded on the cut turn's last token
            assert loop.last_episode["stepped_turns"] == output.extra_fields["assistant_turns"] - 1
            assert len(output.extra_fields["turn_scores"]) == output.extra_fields["assistant_turns"]
            assert output.extra_fields["turn_end_positions"][-1] == len(output.response_mask) - 1
            assert output.extra_fields["grade"] is not None
    assert len(sandboxes) == len(played) and _all_closed(sandboxes)  # every sandbox was closed


def test_per_turn_rewards_sit_on_each_turns_last_token(episodes):
    _, played, _ = episodes
    for _, output in played:
        row = output.as_dict()["rm_scores"]  # what veRL's v1 trainer stores as the token-level reward
        positions = output.extra_fields["turn_end_positions"]
        assert row.sum().item() == pytest.approx(output.reward_score)
        assert row.tolist() == per_turn_token_rewards(len(output.response_ids), positions,
                                                      output.extra_fields["turn_scores"]).tolist()
        for position in positions:
            assert output.response_mask[position] == 1
            assert position + 1 == len(output.response_mask) or output.response_mask[position + 1] == 0


def test_a_cut_episode_gets_the_wrappers_outcome_mapping(tiny_model, tiny_tokenizer):
    # "Count the files": the first turn is cut by max_tokens_per_turn, so no action ever reaches the
    # env; the episode still ends through a step, and ProcessReward maps its grade (passed) to the
    # table's outcome (2.0 here), not the env's raw score (1.0).
    wrapper = functools.partial(ProcessReward, table="seed000", weights={"all_tests_pass": 2.0})
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts=SCRIPTS)
    ((loop, output),) = asyncio.run(_play(server, ["long"], wrappers=[wrapper]))
    assert output.extra_fields["end_reason"] == "turn_truncated"
    assert output.extra_fields["grade"]["passed"] is True
    assert output.reward_score == pytest.approx(2.0)
    assert output.extra_fields["reward_events"] == {"all_tests_pass": 1}
    assert output.extra_fields["turn_end_positions"] == [len(output.response_mask) - 1]


def test_an_episode_the_loop_stops_between_turns_ends_through_a_step(tiny_model, tiny_tokenizer):
    # max_turns=1 on "List the workspace": `ls -la` is a real step (valid_command, command_success);
    # then the loop stops and the env truncates on an empty step: no extra assistant message, and the
    # failed grade gets the table's outcome — the same total as a replay with the wrapper.
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts=SCRIPTS)
    ((loop, output),) = asyncio.run(_play(server, ["listing"], wrappers=[ProcessReward], max_turns=1))
    assert output.extra_fields["end_reason"] == "max_turns"
    assert output.extra_fields["reward_events"]["valid_command"] == 1
    assert sum(output.extra_fields["reward_events"].get(e, 0) for e in OUTCOME_EVENTS) == 1
    env = ProcessReward(gym.make(ENV_ID))
    try:
        env.reset(options={"task_id": "listing"})
        expected = float(env.step(LS)[1])
        _, reward, terminated, truncated, info = env.step(Truncate("max_turns"))
        expected += float(reward)
        assert (terminated, truncated, info["end_reason"]) == (False, True, "max_turns")
        assert [m["role"] for m in info["messages"]].count("assistant") == 1
    finally:
        env.close()
    assert output.reward_score == pytest.approx(expected)


def test_a_truncate_step_needs_a_running_episode_and_a_reason():
    env = gym.make(ENV_ID)
    with pytest.raises(gym.error.ResetNeeded, match="reset"):  # gym.make's order check, before the env's own
        env.step(Truncate("max_turns"))
    env.reset(options={"task_id": "random"})
    try:
        with pytest.raises(ValueError, match="reason"):
            Truncate("")
    finally:
        env.close()


def test_the_servers_weight_version_tags_reach_extra_fields(tiny_model, tiny_tokenizer):
    # veRL's server client tags every generation with the weight version; the v1 trainer needs the
    # episode's first min_global_steps and last max_global_steps (as veRL's tool agent loop keeps them)
    class VersionedServer(TinyTokenServer):
        async def generate(self, request_id, **kwargs):
            output = await super().generate(request_id, **kwargs)
            version = len(self.calls)  # the weights move on between turns (partial rollout)
            output.extra_fields = {"global_steps": version, "min_global_steps": version, "max_global_steps": version}
            return output

    server = VersionedServer(tiny_model, tiny_tokenizer, scripts=SCRIPTS)
    ((loop, output),) = asyncio.run(_play(server, ["listing"]))  # scripted: `ls -la`, then submit
    turns = output.extra_fields["assistant_turns"]
    assert turns == 2
    assert output.extra_fields["min_global_steps"] == 1 and output.extra_fields["global_steps"] == 1
    assert output.extra_fields["max_global_steps"] == turns


def test_response_budget_stops_before_an_observation_that_leaves_no_room(tiny_model, tiny_tokenizer):
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts={"Create hello.txt": [COMMAND, COMMAND, COMMAND]})
    ((loop, output),) = asyncio.run(_play(server, ["hello"], response_length=120))
    assert output.extra_fields["end_reason"] == "response_budget"
    assert len(output.response_ids) <= 120 and output.response_mask[-1] == 1


def test_the_sandbox_is_closed_when_the_server_fails(tiny_model, tiny_tokenizer):
    class Failing(TinyTokenServer):
        async def generate(self, request_id, **kwargs):
            if self.turns[request_id] == 1:
                raise RuntimeError("server went away")
            return await super().generate(request_id, **kwargs)

    SandboxSpy.started = []
    server = Failing(tiny_model, tiny_tokenizer, scripts={"Create hello.txt": [COMMAND, COMMAND]})
    with pytest.raises(RuntimeError, match="server went away"):
        asyncio.run(_play(server, ["hello"], wrappers=[SandboxSpy]))
    assert len(SandboxSpy.started) == 1 and _all_closed(SandboxSpy.started)


def test_concurrent_episodes_are_bounded(tiny_model, tiny_tokenizer):
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts={"Print the date": [SUBMIT]}, delay=0.05)
    asyncio.run(_play(server, ["random"] * 5, max_concurrent_episodes=2))
    assert server.max_active <= 2 and len(server.calls) == 5


def test_a_sample_without_env_id_is_a_clear_error(tiny_model, tiny_tokenizer):
    loop = _loop(TinyTokenServer(tiny_model, tiny_tokenizer))
    with pytest.raises(ValueError, match="extra_info.env_id"):
        asyncio.run(loop.run({}, raw_prompt=[], extra_info={"task_id": "hello"}))


def test_bad_constructor_arguments_are_rejected(tiny_model, tiny_tokenizer):
    server = TinyTokenServer(tiny_model, tiny_tokenizer)
    with pytest.raises(ValueError, match="reward_placement"):
        _loop(server, reward_placement="everywhere")
    with pytest.raises(ValueError, match="log_sample_rate"):
        _loop(server, log_sample_rate=2)
    with pytest.raises(ValueError, match="infra_retries"):
        _loop(server, infra_retries=-1)


def test_sampled_trajectories_are_logged(tiny_model, tiny_tokenizer, tmp_path):
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts={"Print the date": [SUBMIT]})
    asyncio.run(_play(server, ["random", "random"], trajectory_dir=str(tmp_path), log_sample_rate=1.0))
    # through termgym's recorder: one episode record per sampled episode, the turn's tokens in "extra"
    from termgym.wrappers.recording import RECORD_FORMAT, read_episodes

    files = sorted(tmp_path.glob("rollouts/*.jsonl"))
    assert len(files) == 1
    records = read_episodes(files[0])
    assert len(records) == 2
    record = records[0]
    assert record["format"] == RECORD_FORMAT and record["task_id"] == "random"
    assert record["end_reason"] == "submitted" and record["messages"][-2]["role"] == "assistant"
    assert record["steps"][-1]["extra"]["token_ids"] and record["metadata"] == {"trainer": "verl"}


def test_a_clawback_is_charged_to_the_turn_that_earned_the_shaping(tiny_model, tiny_tokenizer):
    # "List the workspace, then create done.txt": `ls -la` earns shaping (valid_command, command_success),
    # then a submission without done.txt fails, and the "progress" table claws the shaping back on that
    # last step. The loop places the clawback on the `ls` turn instead: turn 1 nets 0, the return is unchanged.
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts=SCRIPTS)
    ((loop, output),) = asyncio.run(_play(server, ["listing"], wrappers=[ProcessReward]))
    fields = output.extra_fields
    env_rewards, placed = fields["env_step_rewards"], fields["turn_scores"]
    assert fields["reward_events"].get("clawback") == 1 and env_rewards[0] > 0 and env_rewards[-1] < 0
    assert placed[0] == pytest.approx(0.0, abs=1e-9)
    assert placed[1] == pytest.approx(env_rewards[1] + env_rewards[0])
    assert sum(placed) == pytest.approx(sum(env_rewards)) == pytest.approx(output.reward_score)
    rm_scores = output.as_dict()["rm_scores"]
    assert rm_scores[fields["turn_end_positions"][0]].item() == pytest.approx(0.0, abs=1e-6)
    # one anchor (a hash of the observation the turn started from) per turn; the first is the task prompt
    assert len(fields["turn_anchors"]) == len(placed) == 2 and len(set(fields["turn_anchors"])) == 2
    # charge_clawback=false keeps the env's own placement
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts=SCRIPTS)
    ((_, kept),) = asyncio.run(_play(server, ["listing"], wrappers=[ProcessReward], charge_clawback=False))
    assert kept.extra_fields["turn_scores"] == pytest.approx(kept.extra_fields["env_step_rewards"])


class LoseTheFirstSandbox(gym.Wrapper):
    """The first episode's sandbox dies under it at its first step (closed from outside, as a crash or a
    lost node would end it); every later episode runs undisturbed."""

    lost = 0

    def step(self, action):
        if LoseTheFirstSandbox.lost == 0:
            LoseTheFirstSandbox.lost += 1
            self.unwrapped.sandbox.close()
        return super().step(action)


def test_an_episode_whose_sandbox_died_is_played_again_from_scratch(tiny_model, tiny_tokenizer):
    LoseTheFirstSandbox.lost, SandboxSpy.started = 0, []
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts={"Create hello.txt": [COMMAND, SUBMIT]})
    ((_, output),) = asyncio.run(_play(server, ["hello"], wrappers=[SandboxSpy, LoseTheFirstSandbox]))
    (lost,) = output.extra_fields["infra_failures"]
    assert lost["where"] == "env.step", lost
    # the sample is the second try, whole: its own prompt, two turns, graded on its own sandbox
    assert output.extra_fields["grade"]["passed"] and output.reward_score == 1.0
    assert output.extra_fields["assistant_turns"] == 2 and output.extra_fields["sandbox_node"] is None
    assert len(SandboxSpy.started) == 2 and _all_closed(SandboxSpy.started)


def test_without_retries_the_lost_episode_fails_its_sample(tiny_model, tiny_tokenizer):
    """The sabotage: infra_retries=0 makes the same lost sandbox fail the sample (and so the step)."""
    from termgym.agents.loop import EnvFailure

    LoseTheFirstSandbox.lost, SandboxSpy.started = 0, []
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts={"Create hello.txt": [COMMAND, SUBMIT]})
    with pytest.raises(EnvFailure, match="env.step failed"):
        asyncio.run(_play(server, ["hello"], wrappers=[SandboxSpy, LoseTheFirstSandbox], infra_retries=0))
    assert len(SandboxSpy.started) == 1 and _all_closed(SandboxSpy.started)
