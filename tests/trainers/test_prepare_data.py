"""Data prep: env + task ranges -> veRL RL parquet (read back by veRL and played), samples -> SFT parquet."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

import gymnasium as gym  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import termgym  # noqa: E402
from termgym import CommandTask, ListSuite  # noqa: E402
from trainers.verl import prepare_data  # noqa: E402

ENV_ID = "termgym-test/VerlData-v0"
SUBMIT = "THOUGHT: done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


@pytest.fixture(scope="module", autouse=True)
def registered_env():
    tasks = [CommandTask(f"t{i}", f"Task number {i}: make file{i}.", grade_command=f"test -f file{i}") for i in range(6)]
    termgym.register_suite(ENV_ID, ListSuite(tasks, name="data"), max_steps=3)
    yield
    del gym.registry[ENV_ID]


def test_ranges_use_termgym_evals_selection():
    ids = [f"t{i}" for i in range(6)]
    assert prepare_data.parse_range("0-2,5", ids) == ["t0", "t1", "t2", "t5"]  # positions: ids are not numbers
    assert prepare_data.parse_range("all", ids) == ids
    assert prepare_data.parse_range("t4,t1", ids) == ["t4", "t1"]
    assert prepare_data.parse_range("101-102", ["100", "101", "102"]) == ["101", "102"]  # numeric ids by value
    with pytest.raises(ValueError, match="--val '4-9'.*outside"):
        prepare_data.parse_range("4-9", ids, what="--val")
    with pytest.raises(ValueError, match="'t9' is not in"):
        prepare_data.parse_range("t9", ids)


def test_train_and_val_must_not_overlap(tmp_path):
    with pytest.raises(ValueError, match="share 1 tasks"):
        prepare_data.write_rl(ENV_ID, tmp_path, train="0-3", val="3-5")


def test_unknown_env_is_named(tmp_path):
    assert prepare_data.main(["rl", "--env", "termgym/Nope-v0", "--train", "all", "--out", str(tmp_path)]) == 2


def test_rl_parquet_is_read_by_verl_and_played(tmp_path, tiny_model, tiny_tokenizer):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from trainers.verl.agent_loop import TermgymAgentLoop
    from trainers.verl.tiny_model import TinyTokenServer

    assert prepare_data.main(["rl", "--env", ENV_ID, "--train", "0-3", "--val", "4-5", "--out", str(tmp_path),
                              "--env-kwargs", json.dumps({"max_steps": 2})]) == 0
    data_config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": False,
                                    "return_raw_chat": True, "apply_chat_template_kwargs": {}})
    train = RLHFDataset(str(tmp_path / "train.parquet"), tiny_tokenizer, data_config)
    val = RLHFDataset(str(tmp_path / "val.parquet"), tiny_tokenizer, data_config)
    assert len(train) == 4 and len(val) == 2
    row = val[1]
    assert row["agent_name"] == "termgym_agent" and row["extra_info"]["task_id"] == "t5"
    assert row["index"] == 5  # indices run on across train and val
    # termgym's one RL-row contract (termgym.data.rl): the real opening chat, the task id as ground truth
    assert row["reward_model"]["ground_truth"] == "t5" and row["extra_info"]["split"] == "default"
    assert row["raw_prompt"][-1]["role"] == "user" and "Task number 5" in row["raw_prompt"][-1]["content"]

    # the row, as veRL hands it to the agent loop, plays the named task
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": 256}},
                               "data": data_config})
    server = TinyTokenServer(tiny_model, tiny_tokenizer, scripts={"Task number 5": [SUBMIT]})
    kwargs = {k: v for k, v in row.items() if k != "dummy_tensor"}

    async def play():  # veRL builds agent loops inside its event loop
        loop = TermgymAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server,
                                tokenizer=tiny_tokenizer, processor=None, dataset_cls=RLHFDataset,
                                data_config=DictConfigWrap(config.data), hf_model_type="qwen3", max_tokens_per_turn=64)
        return await loop.run({"temperature": 0.7}, **kwargs)

    output = asyncio.run(play())
    assert output.extra_fields["task_id"] == "t5" and output.extra_fields["end_reason"] == "submitted"
    assert output.reward_score == 0.0  # submitted without creating file5


def _samples(path):
    samples = [
        {"task_id": 1, "score": 1.0, "extra": {"conversation": [
            {"role": "system", "content": "sys"}, {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "THOUGHT: x\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>"},
            {"role": "assistant", "content": SUBMIT}, {"role": "user", "content": "Submitted."}]}},
        {"task_id": 2, "score": 0.0, "extra": {"conversation": [
            {"role": "user", "content": "fix it"}, {"role": "assistant", "content": "no"}]}},
    ]
    path.write_text(json.dumps(samples))
    return path


def test_sft_parquet_is_read_by_verls_sft_dataset(tmp_path, tiny_tokenizer):
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    result = prepare_data.write_sft(_samples(tmp_path / "samples.json"), tmp_path / "sft", min_score=0.5)
    assert (result["kept"], result["total"]) == (1, 2)
    config = OmegaConf.create({"messages_key": "messages", "max_length": 1024, "truncation": "error",
                               "pad_mode": "no_padding", "ignore_input_ids_mismatch": False})
    dataset = MultiTurnSFTDataset(str(result["train"]), tiny_tokenizer, config)
    item = dataset[0]
    loss_mask = item["loss_mask"]
    # the loss covers the two assistant turns and nothing else; the trailing observation was dropped
    assert 0 < int(loss_mask.sum()) < len(loss_mask)
    text = tiny_tokenizer.decode(item["input_ids"][loss_mask.bool()], skip_special_tokens=False)
    assert "```bash\nls\n```" in text and "fix it" not in text and "Submitted." not in text


def test_sft_keeps_solved_samples_by_default(tmp_path):
    path = _samples(tmp_path / "samples.json")
    assert prepare_data.DEFAULT_MIN_SCORE == 1.0
    assert prepare_data.write_sft(path, tmp_path / "default")["kept"] == 1
    assert prepare_data.write_sft(path, tmp_path / "all", min_score=0.0)["kept"] == 2


def test_bad_samples_are_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"task_id": 7, "extra": {"conversation": [{"role": "robot", "content": "x"}]}}]))
    with pytest.raises(ValueError, match=r"sample 0 \(task 7\).*role 'robot'"):
        prepare_data.write_sft(path, tmp_path / "out")
    path.write_text('{"task_id": 1}\n{not json}\n')
    with pytest.raises(ValueError, match="bad.json:2"):
        prepare_data.load_samples(path)
