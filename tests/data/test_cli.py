"""``termgym data sft`` and ``termgym data convert`` end to end."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from termgym.cli import main
from termgym.data.samples import read_samples
from termgym.data.sft import read_parquet_rows
from termgym.env import oracle_actions
from termgym.wrappers.recording import RecordEpisodes, read_episodes


@pytest.fixture(scope="module")
def recording(env_id, tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "episodes.jsonl"
    env = RecordEpisodes(gym.make(env_id), path)
    for task_id in ("calc-0", "calc-1"):
        env.reset(seed=0, options={"task_id": task_id})
        for action in oracle_actions(env.unwrapped):
            env.step(action)
    env.reset(seed=0, options={"task_id": "calc-2"})
    env.step("THOUGHT: quit\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
    env.close()
    return path


def test_convert_and_sft_round_trip(recording, tmp_path, capsys):
    samples = tmp_path / "samples.json"
    assert main(["data", "convert", str(recording), "--out", str(samples)]) == 0
    assert [s.task_id for s in read_samples(samples)] == ["calc-0", "calc-1", "calc-2"]
    back = tmp_path / "back.jsonl"
    assert main(["data", "convert", str(samples), "--to", "recordings", "--out", str(back)]) == 0
    assert [r["messages"] for r in read_episodes(back)] == [r["messages"] for r in read_episodes(recording)]

    out = tmp_path / "sft.parquet"
    capsys.readouterr()
    assert main(["data", "sft", str(samples), "--out", str(out), "--min-score", "1"]) == 0
    printed = capsys.readouterr().out
    assert "kept 2 of 3" in printed and "score_below_min 1" in printed
    rows = read_parquet_rows(out)
    assert [r["task_id"] for r in rows] == ["calc-0", "calc-1"]
    assert rows[0]["messages"][-1]["role"] == "assistant"
    # recordings work as input directly, and mixed with samples
    assert main(["data", "sft", str(recording), str(samples), "--out", str(out)]) == 0
    assert len(read_parquet_rows(out)) == 6


def test_sft_validation_split(tmp_path):
    conversation = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "answer"}]
    samples = [{"task_id": f"t{i % 40}", "score": 1.0, "extra": {"conversation": conversation}} for i in range(80)]
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(s) + "\n" for s in samples))
    train, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    assert main(["data", "sft", str(source), "--out", str(train), "--val-out", str(val), "--val-fraction", "0.25"]) == 0
    train_ids = [r["task_id"] for r in read_parquet_rows(train)]
    val_ids = [r["task_id"] for r in read_parquet_rows(val)]
    assert len(train_ids) + len(val_ids) == 80 and val_ids
    assert set(train_ids).isdisjoint(val_ids)  # both samples of a task land on one side


def test_cli_errors_are_clear(recording, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"task_id": 1, "score": 1.0, "extra": {"conversation": "hi"}}]))
    assert main(["data", "sft", str(bad), "--out", str(tmp_path / "o.parquet")]) == 2
    assert "bad.json: sample 0 (task_id 1): extra.conversation must be a list" in capsys.readouterr().err
    assert main(["data", "sft", str(recording), "--out", str(tmp_path / "o.parquet"), "--min-score", "2"]) == 2
    assert "no conversation left of 3" in capsys.readouterr().err
    assert main(["data", "sft", str(recording), "--out", str(tmp_path / "o.parquet"), "--val-fraction", "0.1"]) == 2
    assert "--val-fraction needs --val-out" in capsys.readouterr().err
    assert main(["data", "convert", str(recording), "--to", "recordings", "--out", str(tmp_path / "x.json")]) == 2
    assert "give --out a .jsonl file" in capsys.readouterr().err
    assert main(["data", "convert", str(tmp_path / "missing.json"), "--out", str(tmp_path / "x.json")]) == 2
    assert "no such file" in capsys.readouterr().err
