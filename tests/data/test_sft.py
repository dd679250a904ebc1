"""SFT parquet: recording -> offline sample -> parquet -> read back as veRL reads it, assistant-only loss."""

from __future__ import annotations

import gymnasium as gym
import pytest

from termgym.data.convert import load_items
from termgym.data.samples import OfflineSample
from termgym.data.sft import build_sft_rows, read_parquet_rows, split_by_task, write_parquet
from termgym.env import oracle_actions
from termgym.wrappers.recording import RecordEpisodes

# A Qwen2.5-style ChatML template with a default system prompt (so veRL's per-turn rendering has a
# system block to strip from every later turn); written here, nothing downloaded.
QWEN_STYLE_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@pytest.fixture(scope="module")
def recording(env_id, tmp_path_factory):
    """Real episodes: calc-0 solved (with a malformed turn first), calc-1 failed."""
    path = tmp_path_factory.mktemp("sft") / "episodes.jsonl"
    env = RecordEpisodes(gym.make(env_id), path, experiment="sft")
    env.reset(seed=0, options={"task_id": "calc-0"})
    for action in ["I think I should fix it.", *oracle_actions(env.unwrapped)]:
        env.step(action)
    env.reset(seed=0, options={"task_id": "calc-1"})
    for action in ["THOUGHT: look\n\n```bash\nls\n```",
                   "THOUGHT: give up\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"]:
        env.step(action)
    env.close()
    return path


def test_filters_and_policies(recording):
    samples = load_items([recording])
    assert [s.score for s in samples] == [1.0, 0.0]
    rows, stats = build_sft_rows(samples)
    assert stats.kept == 2 and [r["task_id"] for r in rows] == ["calc-0", "calc-1"]
    rows, stats = build_sft_rows(samples, min_score=1.0)
    assert [r["task_id"] for r in rows] == ["calc-0"] and stats.dropped == {"score_below_min": 1}
    rows, stats = build_sft_rows(samples, only_passed=True)
    assert [r["task_id"] for r in rows] == ["calc-0"] and stats.dropped == {"not_passed": 1}
    rows, stats = build_sft_rows(samples, max_score=0.5)
    assert [r["task_id"] for r in rows] == ["calc-1"]
    rows, stats = build_sft_rows(samples, format_errors="drop")
    assert [r["task_id"] for r in rows] == ["calc-1"] and stats.dropped == {"format_error": 1}
    rows, stats = build_sft_rows(samples, format_errors="truncate")
    # calc-0's first assistant turn is malformed: nothing is left before it
    assert [r["task_id"] for r in rows] == ["calc-1"] and stats.dropped == {"no_assistant_turn": 1}
    rows, _ = build_sft_rows(samples, max_chars=10)
    assert rows == []
    with pytest.raises(ValueError, match="format_errors must be one of"):
        build_sft_rows(samples, format_errors="fix")


def test_rows_end_on_an_assistant_turn_and_keep_only_chat_keys(recording):
    rows, _ = build_sft_rows(load_items([recording]))
    for row in rows:
        assert row["messages"][-1]["role"] == "assistant"
        assert row["messages"][0]["role"] == "system"
        assert all(set(m) <= {"role", "content"} for m in row["messages"])


def test_truncate_keeps_the_turns_before_a_format_error():
    conversation = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
                    {"role": "assistant", "content": "THOUGHT: a\n```bash\nls\n```"}, {"role": "user", "content": "o"},
                    {"role": "assistant", "content": "oops, no block"}, {"role": "user", "content": "format error"},
                    {"role": "assistant", "content": "THOUGHT: b\n```bash\npwd\n```"}]
    sample = OfflineSample(task_id=1, score=1.0, conversation=conversation)
    rows, stats = build_sft_rows([sample], format_errors="truncate")
    assert rows[0]["messages"] == conversation[:3] and stats.truncated == 1


def test_split_by_task_is_stable_and_grouped():
    rows = [{"task_id": f"t{i % 50}", "n": i} for i in range(200)]
    train, val = split_by_task(rows, 0.2)
    assert {r["task_id"] for r in train}.isdisjoint({r["task_id"] for r in val})
    assert 2 <= len({r["task_id"] for r in val}) <= 20
    assert split_by_task(rows, 0.2) == (train, val)
    assert split_by_task(rows, 0.0) == (rows, [])
    with pytest.raises(ValueError, match="val_fraction"):
        split_by_task(rows, 1.0)


def test_parquet_reads_back_as_verl_reads_it(recording, tmp_path):
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows, _ = build_sft_rows(load_items([recording]))
    path = write_parquet(rows, tmp_path / "sft.parquet")
    back = read_parquet_rows(path)
    assert back == rows


@pytest.mark.verl
@pytest.mark.parametrize("template", ["tiny", "qwen_style"])
def test_verl_multiturn_sft_dataset_masks_assistant_turns_only(recording, tmp_path, tiny_tokenizer, template):
    """veRL 0.9.1's own MultiTurnSFTDataset on our parquet: loss exactly on the assistant turns."""
    pytest.importorskip("verl")
    import copy

    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    tokenizer = copy.deepcopy(tiny_tokenizer)
    if template == "qwen_style":
        tokenizer.chat_template = QWEN_STYLE_TEMPLATE
    rows, _ = build_sft_rows(load_items([recording]))
    path = write_parquet(rows, tmp_path / "sft.parquet")
    dataset = MultiTurnSFTDataset(str(path), tokenizer, {"max_length": 8192, "pad_mode": "no_padding",
                                                         "truncation": "error"})
    assert len(dataset) == len(rows)
    im_end = "<|im_end|>\n"
    for index, row in enumerate(rows):
        item = dataset[index]  # veRL's sanity check: per-turn tokens == whole-conversation tokens
        ids, mask = item["input_ids"].tolist(), item["loss_mask"].tolist()
        spans, current = [], []
        for token, on in zip(ids, mask):
            if on:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        if current:
            spans.append(current)
        assistant = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        decoded = [tokenizer.decode(span, skip_special_tokens=False) for span in spans]
        assert decoded == [content + im_end for content in assistant]
        unmasked = tokenizer.decode([t for t, on in zip(ids, mask) if not on], skip_special_tokens=False)
        for message in row["messages"]:
            if message["role"] != "assistant":
                assert message["content"] in unmasked  # prompts and observations: in the input, no loss
        whole = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        assert tokenizer.decode(ids, skip_special_tokens=False) == whole


def test_hf_assistant_mask_agrees(recording, tiny_tokenizer):
    """Without veRL: transformers' own assistant mask (a generation-tagged template) on the parquet rows."""
    import copy

    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = (
        "{% for message in messages %}"
        "{% if message['role'] == 'assistant' %}"
        "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' + '\n' }}{% endgeneration %}"
        "{% else %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endif %}"
        "{% endfor %}"
    )
    rows, _ = build_sft_rows(load_items([recording]))
    for row in rows:
        out = tokenizer.apply_chat_template(row["messages"], tokenize=True, return_dict=True,
                                            return_assistant_tokens_mask=True)
        ids, mask = out["input_ids"], out["assistant_masks"]
        masked = tokenizer.decode([t for t, on in zip(ids, mask) if on], skip_special_tokens=False)
        assert masked == "".join(m["content"] + "<|im_end|>\n" for m in row["messages"] if m["role"] == "assistant")
