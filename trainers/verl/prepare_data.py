"""Data prep for the veRL recipe.

``rl``  — one veRL RL parquet row per (task, epoch), built by termgym's one RL-row builder
(:func:`termgym.data.rl.build_rl_rows`, whose docstring is the row contract: the real opening
chat as ``prompt``, the task id as ``ground_truth``, env id / task id / ``gym.make`` arguments in
``extra_info``); ``TermgymAgentLoop`` makes the env from ``extra_info`` at rollout time::

    python -m trainers.verl.prepare_data rl --env termgym/SweSynth-v0 --train 0-899 --val 900-999 --out data/swesynth

Task selections use ``termgym eval``'s ``--task-ids`` syntax (exact ids; numbers and ranges
``a-b`` match numeric ids by value, else 0-based positions), or ``all``.

``sft`` — offline samples (seed 000's format: a JSON list or JSONL of
``{"task_id", "score", "extra": {"conversation": [...]}}``) → a parquet with a ``messages``
column for veRL's SFT trainer::

    python -m trainers.verl.prepare_data sft --samples samples.json --out data/sft --min-score 0.5

(termgym's own data module will take this over; the formats stay the same.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from termgym.data.rl import DEFAULT_AGENT_NAME as AGENT_NAME
from termgym.data.rl import build_rl_rows, suite_task_ids


def parse_range(spec: str, task_ids: Sequence[str], *, what: str = "range") -> list[str]:
    """Task ids selected by ``spec``: ``all``, or ``termgym eval``'s ``--task-ids`` syntax.

    Exact ids, or numbers/ranges ``A-B`` that match numeric ids by value and are 0-based positions
    otherwise (:func:`termgym.evaluation.selection.select_task_ids`), so training and evaluation
    name tasks the same way.
    """
    from termgym.evaluation.selection import select_task_ids

    if spec.strip() == "all":
        return list(task_ids)
    try:
        selected = select_task_ids(task_ids, spec, where="the suite")
    except ValueError as exc:
        raise ValueError(f"{what} {spec!r}: {exc}") from None
    if not selected:
        raise ValueError(f"{what} {spec!r} selects no tasks")
    return selected


def write_rl(env_id: str, out: str | Path, *, train: str, val: str | None, env_kwargs: dict[str, Any] | None = None,
             split: str | None = None, epochs: int = 1) -> dict[str, Path]:
    """Write ``train.parquet`` (and ``val.parquet``) under ``out``; returns their paths."""
    ids = suite_task_ids(env_id, env_kwargs, split)
    train_ids = parse_range(train, ids, what="--train")
    val_ids = parse_range(val, ids, what="--val") if val else []
    overlap = sorted(set(train_ids) & set(val_ids))
    if overlap:
        raise ValueError(f"--train and --val share {len(overlap)} tasks (e.g. {overlap[:3]}); held-out tasks must "
                         "not be trained on")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"train": out / "train.parquet"}
    _write_parquet(build_rl_rows(env_id, split=split, env_kwargs=env_kwargs, task_ids=train_ids, epochs=epochs,
                                 agent_name=AGENT_NAME), paths["train"])
    if val_ids:
        paths["val"] = out / "val.parquet"
        _write_parquet(build_rl_rows(env_id, split=split, env_kwargs=env_kwargs, task_ids=val_ids,
                                     start_index=len(train_ids) * epochs, agent_name=AGENT_NAME), paths["val"])
    return paths


def load_samples(path: str | Path) -> list[dict[str, Any]]:
    """Offline samples from a JSON list, a JSON object with ``samples``, or JSONL."""
    path = Path(path)
    text = path.read_text()
    stripped = text.lstrip()
    if stripped.startswith("["):
        samples = json.loads(text)
    elif stripped.startswith("{") and "\n{" not in stripped.rstrip():
        data = json.loads(text)
        samples = data.get("samples", [data]) if isinstance(data, dict) else data
    else:
        samples = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    samples.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    if not isinstance(samples, list):
        raise ValueError(f"{path}: expected a list of samples")
    return samples


def sample_messages(sample: dict[str, Any], where: str) -> list[dict[str, str]]:
    """The conversation of one offline sample, checked: roles known, an assistant turn present."""
    conversation = (sample.get("extra") or {}).get("conversation", sample.get("conversation"))
    if not isinstance(conversation, list) or not conversation:
        raise ValueError(f"{where}: no extra.conversation list")
    messages = []
    for i, message in enumerate(conversation):
        role, content = message.get("role"), message.get("content")
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"{where}: conversation[{i}] has role {role!r}; expected system, user or assistant")
        if not isinstance(content, str):
            raise ValueError(f"{where}: conversation[{i}] content is not text")
        messages.append({"role": role, "content": content})
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError(f"{where}: the conversation has no assistant message to learn from")
    while messages[-1]["role"] != "assistant":  # trailing observations carry no loss
        messages.pop()
    return messages


#: SFT keeps only samples scoring at least this by default: solved episodes. Seed 000 warm-starts on
#: every pre-generated sample (its example sample scores 0.0); imitating failed trajectories teaches
#: the model to fail, so termgym filters unless told otherwise (``--min-score 0`` keeps everything).
DEFAULT_MIN_SCORE = 1.0


def write_sft(samples_path: str | Path, out: str | Path, *, min_score: float | None = DEFAULT_MIN_SCORE,
              val_fraction: float = 0.0) -> dict[str, Any]:
    """Write ``sft_train.parquet`` (and ``sft_val.parquet``) from samples scoring >= ``min_score``
    (``None``: all); returns paths and counts. Every sample is validated, kept or not."""
    samples = load_samples(samples_path)
    rows = []
    for number, sample in enumerate(samples):
        where = f"{samples_path} sample {number} (task {sample.get('task_id')!r})"
        messages = sample_messages(sample, where)
        score = float(sample.get("score", 0.0))
        if min_score is not None and score < min_score:
            continue
        rows.append({"messages": messages, "task_id": str(sample.get("task_id")), "score": score})
    if not rows:
        raise ValueError(f"{samples_path}: no samples left (of {len(samples)}) with score >= {min_score}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_val = int(len(rows) * val_fraction)
    result: dict[str, Any] = {"train": out / "sft_train.parquet", "kept": len(rows), "total": len(samples)}
    _write_parquet(rows[n_val:], result["train"])
    if n_val:
        result["val"] = out / "sft_val.parquet"
        _write_parquet(rows[:n_val], result["val"])
    return result


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path, index=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.verl.prepare_data", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rl = sub.add_parser("rl", help="env id + task ranges -> veRL RL parquet")
    rl.add_argument("--env", required=True, help="a registered termgym env id, e.g. termgym/SweSynth-v0")
    rl.add_argument("--train", required=True, help="training tasks: 'all', ids, or numbers/ranges like 0-899 (as termgym eval --task-ids)")
    rl.add_argument("--val", default=None, help="held-out tasks for validation (same syntax)")
    rl.add_argument("--env-kwargs", default="{}", help="JSON object of gym.make arguments (backend, protocol, ...)")
    rl.add_argument("--split", default=None, help="the suite split whose task list the ranges index")
    rl.add_argument("--epochs", type=int, default=1, help="copies of the training tasks (veRL also has total_epochs)")
    rl.add_argument("--out", required=True)
    sft = sub.add_parser("sft", help="offline samples -> SFT parquet (messages column)")
    sft.add_argument("--samples", required=True)
    sft.add_argument("--out", required=True)
    sft.add_argument("--min-score", type=float, default=DEFAULT_MIN_SCORE,
                     help=f"keep samples scoring at least this (default {DEFAULT_MIN_SCORE}: solved only; 0 keeps all)")
    sft.add_argument("--val-fraction", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        if args.command == "rl":
            try:
                env_kwargs = json.loads(args.env_kwargs)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--env-kwargs is not JSON: {exc.msg}") from None
            if not isinstance(env_kwargs, dict):
                raise ValueError("--env-kwargs must be a JSON object")
            paths = write_rl(args.env, args.out, train=args.train, val=args.val, env_kwargs=env_kwargs,
                             split=args.split, epochs=args.epochs)
            for name, path in paths.items():
                print(f"{name}: {path}")
        else:
            result = write_sft(args.samples, args.out, min_score=args.min_score, val_fraction=args.val_fraction)
            print(f"kept {result['kept']} of {result['total']} samples")
            print(f"train: {result['train']}")
            if "val" in result:
                print(f"val: {result['val']}")
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
