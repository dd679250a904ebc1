"""termgym.integrations.tinker: tinker-cookbook's own rollout code driving real termgym episodes
(bubblewrap sandboxes) through a real cookbook renderer and a locally built Qwen-style tokenizer,
with a scripted token sampler in place of the Tinker service."""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("tinker_cookbook", reason="install the [tinker] extra (see docs/integrations.md)")

import scripted_model  # noqa: E402
import tinker  # noqa: E402
from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs  # noqa: E402
from tinker_cookbook.renderers import get_renderer  # noqa: E402
from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages  # noqa: E402
from tinker_cookbook.rl.rollouts import do_group_rollout  # noqa: E402
from token_server import logprob_of  # noqa: E402

from termgym.integrations.episodes import EnvRecipe  # noqa: E402
from termgym.integrations.tinker import (  # noqa: E402
    TermgymDatasetBuilder,
    TermgymEnvGroupBuilder,
    TermgymRLDataset,
    TermgymTokenEnv,
)

RENDERER = "qwen3"


class ScriptedSampler(TokenCompleter):
    """A policy stand-in: answers each prompt with its task's scripted turn, tokenized, with logprobs.

    It reads the task id and the turn number from the prompt tokens it is given, as a model would.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.prompts: list[list[int]] = []

    async def __call__(self, model_input: tinker.ModelInput, stop, *, max_tokens=None) -> TokensWithLogprobs:
        ids = model_input.to_ints()
        self.prompts.append(ids)
        text = self.tokenizer.decode(ids)
        task = re.search(r"\[task:([\w-]+)\]", text).group(1)
        turn = text.count("<|im_start|>assistant") - 1
        turns = scripted_model.SCRIPTS[task]["turns"]
        content = scripted_model._message_text(turns[min(turn, len(turns) - 1)], tools=False)["content"]
        tokens = self.tokenizer.encode(content, add_special_tokens=False) + [self.end]
        assert self.end in stop
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[logprob_of(i) for i in range(len(tokens))])


@pytest.fixture(scope="module")
def tokenizer_dir(tiny_tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokenizer")
    tiny_tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def env_config():
    return EnvRecipe(scripted_model.ENV_ID, process_rewards={})


def _group(env_config, tokenizer_dir, task, size=2, **kw):
    return TermgymEnvGroupBuilder(env_config, task, size, tokenizer_dir, RENDERER, **kw)


@pytest.fixture(scope="module")
def rollouts(env_config, tokenizer_dir, tiny_tokenizer):
    sampler = ScriptedSampler(tiny_tokenizer)

    async def run():
        return await asyncio.gather(*(do_group_rollout(_group(env_config, tokenizer_dir, task), sampler)
                                      for task in ("explore", "wrong-answer", "bad-format")))

    return dict(zip(("explore", "wrong-answer", "bad-format"), asyncio.run(run()))), sampler


def test_cookbook_rollout_plays_termgym_episodes(rollouts):
    groups, _ = rollouts
    explore = groups["explore"]
    assert len(explore.trajectories_G) == 2 and explore.rollout_errors == []
    for trajectory in explore.trajectories_G:
        assert [t.episode_done for t in trajectory.transitions] == [False, False, True]
        assert trajectory.stop_reason == "completed"
        last = trajectory.transitions[-1].metrics
        assert last["passed"] == 1.0 and last["end/submitted"] == 1.0 and last["stop/completed"] == 1.0
        # per-step process rewards add up to the episode's process return
        assert sum(t.reward for t in trajectory.transitions) == pytest.approx(last["process/return"])
        assert trajectory.transitions[0].reward > 0  # valid_command + command_success, paid on the step
    [right, _] = explore.get_total_rewards()
    [wrong, _] = groups["wrong-answer"].get_total_rewards()
    assert wrong < right
    assert groups["wrong-answer"].trajectories_G[0].transitions[-1].metrics["passed"] == 0.0
    bad = groups["bad-format"].trajectories_G[0].transitions
    assert [t.metrics["format_error"] for t in bad] == [1, 1, 0, 0]
    assert bad[-1].metrics["process/count/invalid_format"] == 2.0


def test_observations_extend_and_actions_keep_tokens_and_logprobs(rollouts, tiny_tokenizer):
    groups, sampler = rollouts
    trajectory = groups["explore"].trajectories_G[0]
    transitions = trajectory.transitions
    for before, after in zip(transitions, transitions[1:]):
        # the next prompt starts with the previous prompt and the sampled tokens, unchanged
        prefix = before.ob.to_ints() + before.ac.tokens
        assert after.ob.to_ints()[: len(prefix)] == prefix
        assert "<returncode>0</returncode>" in tiny_tokenizer.decode(after.ob.to_ints()[len(prefix):])
    for transition in transitions:
        assert transition.ac.logprobs == pytest.approx([logprob_of(i) for i in range(len(transition.ac.tokens))])
        assert transition.ob.to_ints() in sampler.prompts
    first = tiny_tokenizer.decode(transitions[0].ob.to_ints())
    assert first.startswith("<|im_start|>system\n") and first.endswith("<|im_start|>assistant\n")


def test_training_data_masks_exactly_the_sampled_tokens(rollouts):
    groups, _ = rollouts
    group_list = [groups["explore"], groups["wrong-answer"]]
    advantages = compute_advantages(group_list)
    assert [a.tolist() for a in advantages] == [[0.0, 0.0], [0.0, 0.0]]  # equal rewards within each group
    trajectory = groups["explore"].trajectories_G[0]
    data, meta = assemble_training_data(group_list, [a + 1.0 for a in advantages], include_provenance=False)
    assert len(data) == 4 and meta[0] == {"group_idx": 0, "traj_idx": 0}  # one datum per trajectory
    datum = data[0]
    mask = datum.loss_fn_inputs["mask"].to_torch().tolist()
    targets = datum.loss_fn_inputs["target_tokens"].to_torch().tolist()
    logprobs = datum.loss_fn_inputs["logprobs"].to_torch().tolist()
    advantage = datum.loss_fn_inputs["advantages"].to_torch().tolist()
    sampled = [tok for t in trajectory.transitions for tok in t.ac.tokens]
    assert [tok for tok, m in zip(targets, mask) if m] == sampled
    assert [lp for lp, m in zip(logprobs, mask) if m] == pytest.approx(
        [lp for t in trajectory.transitions for lp in t.ac.logprobs])
    assert all(a == 1.0 for a, m in zip(advantage, mask) if m) and all(a == 0.0 for a, m in zip(advantage, mask) if not m)
    # inputs + last target = the whole conversation: last prompt plus its action
    last = trajectory.transitions[-1]
    assert datum.model_input.to_ints() + targets[-1:] == last.ob.to_ints() + last.ac.tokens


def test_token_budget_ends_and_grades_the_episode(env_config, tokenizer_dir, tiny_tokenizer):
    async def run():
        builder = _group(env_config, tokenizer_dir, "explore", size=1, max_trajectory_tokens=200)
        return await do_group_rollout(builder, ScriptedSampler(tiny_tokenizer))

    [trajectory] = asyncio.run(run()).trajectories_G
    assert trajectory.stop_reason == "context_overflow"
    last = trajectory.transitions[-1]
    assert last.episode_done and last.metrics["end/context_limit"] == 1.0 and last.metrics["passed"] == 0.0
    assert len(trajectory.transitions) < 3


def test_dataset_builder_batches_the_suite(tokenizer_dir):
    builder = TermgymDatasetBuilder(env_id=scripted_model.ENV_ID, model_name_for_tokenizer=tokenizer_dir,
                                    renderer_name=RENDERER, batch_size=4, group_size=3, process_rewards={})
    train, test = asyncio.run(builder())
    assert test is None
    everything = sorted(b.task_id for i in range(len(train)) for b in train.get_batch(i))
    assert everything == sorted(scripted_model.SCRIPTS)
    assert len(train) == 4 and len(train.get_batch(3)) == len(scripted_model.SCRIPTS) - 12
    first = train.get_batch(0)[0]
    assert first.group_size == 3 and first.env.process_rewards == {} and first.renderer_name == RENDERER
    envs = asyncio.run(first.make_envs())
    assert len(envs) == 3 and all(isinstance(e, TermgymTokenEnv) and e.task_id == first.task_id for e in envs)
    with pytest.raises(IndexError, match="batch 4 out of range"):
        train.get_batch(4)
    chosen, _ = asyncio.run(TermgymDatasetBuilder(
        env_id=scripted_model.ENV_ID, model_name_for_tokenizer=tokenizer_dir, renderer_name=RENDERER,
        batch_size=2, group_size=2, task_ids=["right-1", "explore"])())
    assert sorted(b.task_id for b in chosen.get_batch(0)) == ["explore", "right-1"]


def test_bad_input_is_refused_with_the_reason(env_config, tokenizer_dir, tiny_tokenizer):
    with pytest.raises(ValueError, match="group_size must be at least 1"):
        _group(env_config, tokenizer_dir, "explore", size=0)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        TermgymRLDataset([_group(env_config, tokenizer_dir, "explore")], 0)
    with pytest.raises(ValueError, match="at least one task"):
        TermgymRLDataset([], 2)
    renderer = get_renderer(RENDERER, tiny_tokenizer)
    with pytest.raises(ValueError, match="max_trajectory_tokens must be at least 1"):
        TermgymTokenEnv(env_config, "explore", renderer, max_trajectory_tokens=0)
    env = TermgymTokenEnv(env_config, "explore", renderer)
    with pytest.raises(RuntimeError, match="before initial_observation"):
        asyncio.run(env.step([1, 2]))
    with pytest.raises(KeyError, match="has no split 'nope'"):
        asyncio.run(TermgymDatasetBuilder(env_id=scripted_model.ENV_ID, model_name_for_tokenizer=tokenizer_dir,
                                          renderer_name=RENDERER, batch_size=2, group_size=2, split="nope")())


def test_function_calling_protocol_goes_through_the_renderers_tool_format(tokenizer_dir, tiny_tokenizer):
    import json

    end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")

    class ToolSampler(TokenCompleter):
        """Writes Qwen3's <tool_call> blocks: a bash call, then submit."""

        calls = [("bash", {"command": f"echo {scripted_model.WORD} > answer.txt"}), ("submit", {"answer": ""})]
        prompts: list[str] = []

        async def __call__(self, model_input, stop, *, max_tokens=None):
            self.prompts.append(tiny_tokenizer.decode(model_input.to_ints()))
            name, arguments = self.calls.pop(0)
            text = f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
            tokens = tiny_tokenizer.encode(text, add_special_tokens=False) + [end]
            return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.1] * len(tokens))

    config = EnvRecipe(scripted_model.ENV_ID, env_kwargs={"protocol": "toolcall"})
    sampler = ToolSampler()
    result = asyncio.run(do_group_rollout(_group(config, tokenizer_dir, "right-2", size=1), sampler))
    [trajectory] = result.trajectories_G
    assert result.get_total_rewards() == [1.0] and trajectory.transitions[-1].metrics["passed"] == 1.0
    assert [t.metrics["format_error"] for t in trajectory.transitions] == [0, 0]
    # the tool schemas are in the system turn, the command's result comes back as a tool response
    assert '"name": "bash"' in sampler.prompts[0] and "<tools>" in sampler.prompts[0]
    assert "<tool_response>" in sampler.prompts[1]
