"""Recording episodes as JSON Lines: one line per episode, safe under many concurrent writers.

.. code-block:: python

    env = RecordEpisodes(ProcessReward(gym.make("termgym/SweSynth-v0")),
                         "logs/cot_prompt_v1/episodes.jsonl", experiment="cot_prompt_v1",
                         config={"lr": 5e-6, "prompt": "cot"}, sample_rate=0.1)

Put the recorder outermost so it sees the rewards and ``reward_events`` of the wrappers inside.
An episode is written when it ends (or, marked ``"end_reason": "abandoned"``, when ``reset`` or
``close`` cuts it short), as one JSON object on one line (:data:`RECORD_FORMAT`; fields in
docs/data.md). Whether an episode is recorded is drawn at ``reset`` with probability
``sample_rate``; an episode that is not drawn costs nothing.

The record is termgym's one trajectory type: evaluation results point at it
(``EpisodeResult.record``), the veRL agent loop logs its sampled episodes through it, and offline
samples convert to and from it (:func:`termgym.data.convert.recording_to_sample` and ``sample_to_recording``).

Token ids and log-probabilities ride on the action message under ``"extra"`` (``token_ids``,
``prompt_token_ids``, ``logprobs``, ``usage``, ``meta``); the env returns them as ``info["extra"]``
and this wrapper stores them in that step's ``"extra"``. ``env.get_wrapper_attr("record_extra")
(token_ids=..., logprobs=...)`` before ``step`` adds fields the same way.

Concurrency: every line is written with ``O_APPEND`` under an exclusive ``flock`` on the file, in
one ``os.write`` (looped only if the kernel writes less), so threads and processes appending to
one file never interleave or tear lines (on local filesystems; NFS ignores ``flock`` semantics).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import hashlib
import json
import math
import os
import random
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from termgym.atomic import write_text_atomically
from termgym.encodable import JSON_ERRORS
from termgym.jsonl import json_lines

#: The ``format`` field of every episode record this module writes.
RECORD_FORMAT = "termgym.episode/1"


def config_hash(config: Mapping[str, Any] | None) -> str:
    """A short, stable hash of a configuration (canonical JSON, SHA-256, 12 hex digits).

    Key order does not matter; values that are not JSON (paths, enums) are hashed by ``str``.
    """
    canonical = json.dumps(config or {}, sort_keys=True, separators=(",", ":"), default=_json_default)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def episode_log_path(log_dir: str | Path, experiment: str, training_step: int | None = None) -> Path:
    """Seed 004's layout: ``log_dir/experiment/episodes.jsonl`` or ``.../step_000012.jsonl``."""
    name = "episodes.jsonl" if training_step is None else f"step_{int(training_step):06d}.jsonl"
    return Path(log_dir) / experiment / name


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> int:
    """Append ``record`` as one line to ``path``, atomically with respect to other writers; returns bytes written."""
    try:
        text = json.dumps(record, ensure_ascii=False, default=_json_default, allow_nan=False)
    except ValueError:  # NaN/inf (a -inf logprob): strict JSON has no spelling for them, store null
        text = json.dumps(_finite(record), ensure_ascii=False, default=_json_default, allow_nan=False)
    data = (text + "\n").encode("utf-8", JSON_ERRORS)  # a lone surrogate left: its JSON escape
    if data.count(b"\n") != 1:  # json.dumps escapes newlines; guard against a future change
        raise ValueError("a record must serialise to exactly one line")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)  # closing releases the lock
    return len(data)


def read_jsonl(path: str | Path, *, skip_invalid: bool = False) -> Iterator[dict[str, Any]]:
    """The objects of a JSON Lines file, in order; blank lines are skipped.

    A line that is not a JSON object raises ``ValueError`` naming the file and line, unless
    ``skip_invalid`` (e.g. the last line of a file whose writer was killed mid-write).
    """
    for number, obj, problem in json_lines(path):
        if problem is None and not isinstance(obj, dict):
            problem = f"expected a JSON object, got {type(obj).__name__}"
        if problem is not None:
            if skip_invalid:
                continue
            raise ValueError(f"{path}:{number}: {problem}")
        yield obj


def read_episodes(path: str | Path, *, skip_invalid: bool = False) -> list[dict[str, Any]]:
    """The episode records of a recording file (lines whose ``format`` is not an episode raise)."""
    out = []
    for number, record in enumerate(read_jsonl(path, skip_invalid=skip_invalid), 1):
        if record.get("format") != RECORD_FORMAT:
            if skip_invalid:
                continue
            raise ValueError(f"{path}: record {number} is not a termgym episode (format {record.get('format')!r}, "
                             f"expected {RECORD_FORMAT!r})")
        out.append(record)
    return out


class RecordEpisodes(gym.Wrapper):
    """Write each (sampled) episode of the wrapped env as one JSON line (see the module docstring).

    Args:
        env: the env to record; wrap it last (outermost).
        path: the JSON Lines file to append to (created with its parent directories).
        experiment: the experiment's name, stored in every record.
        config: the run's configuration; its :func:`config_hash` goes in every record, and the
            config itself is written once next to the log as ``config_<hash>.json``.
        sample_rate: the probability that an episode is recorded (0..1).
        seed: seeds the sampling draws (``None``: from the OS).
        metadata: extra JSON fields stored in every record (run id, model name...).
        max_output_chars: each step's raw command output is kept up to this many characters
            (middle elided); the observation the agent saw is in ``messages`` in full.
    """

    def __init__(
        self,
        env: gym.Env,
        path: str | Path,
        *,
        experiment: str = "default",
        config: Mapping[str, Any] | None = None,
        sample_rate: float = 1.0,
        seed: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        max_output_chars: int = 20_000,
    ) -> None:
        super().__init__(env)
        if not (isinstance(sample_rate, (int, float)) and 0.0 <= sample_rate <= 1.0):
            raise ValueError(f"sample_rate must be within 0..1, got {sample_rate!r}")
        if not experiment or "/" in experiment:
            raise ValueError(f"experiment must be a non-empty name without '/', got {experiment!r}")
        self.path = Path(path)
        self.experiment = experiment
        self.config = dict(config or {})
        self.config_hash = config_hash(self.config)
        self.sample_rate = float(sample_rate)
        self.metadata = dict(metadata or {})
        self.max_output_chars = max_output_chars
        self.training_step: int | None = None
        self.episodes_written = 0
        #: The ``episode_id`` of the current or last recorded episode (``None`` until one is drawn),
        #: how a caller refers to the record it just played (``EpisodeResult.record``).
        self.last_episode_id: str | None = None
        self._rng = random.Random(seed)
        self._record: dict[str, Any] | None = None
        self._pending_extra: dict[str, Any] = {}
        self._t0 = 0.0
        if config is not None:
            self._write_config()

    # -- gymnasium API --------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env; an unfinished recorded episode is written first as ``abandoned``."""
        self._flush("abandoned")
        obs, info = self.env.reset(seed=seed, options=options)
        self._pending_extra = {}
        self.last_episode_id = None
        if self.sample_rate >= 1.0 or self._rng.random() < self.sample_rate:
            self._record = self._new_record(seed, options, info)
            self.last_episode_id = self._record["episode_id"]
            self._t0 = time.monotonic()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env, remembering the step for the record (written when the episode ends)."""
        started = time.monotonic()
        obs, reward, terminated, truncated, info = self.env.step(action)
        extra = {**self._pending_extra, **(info.get("extra") or {})}
        self._pending_extra = {}
        if self._record is not None:
            message = _message_of(action)
            self._record["steps"].append(self._step_entry(message, extra, reward, terminated, truncated, info,
                                                          time.monotonic() - started))
            if terminated or truncated:
                self._record["grade"] = info.get("grade")
                self._record["process_reward"] = info.get("process_reward")
                self._flush(info.get("end_reason") or ("submitted" if terminated else "truncated"),
                            messages=info.get("messages"))
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Write an unfinished recorded episode (``abandoned``), then close the env."""
        self._flush("abandoned")
        super().close()

    # -- extras ----------------------------------------------------------------------------------

    def record_extra(self, **fields: Any) -> None:
        """Attach fields (``token_ids``, ``logprobs``…) to the next step's record."""
        self._pending_extra.update(fields)

    def set_training_step(self, step: int | None) -> None:
        """Tag the records of episodes reset from now on with a trainer step."""
        self.training_step = step

    @property
    def recording(self) -> bool:
        """Whether the current episode was drawn for recording."""
        return self._record is not None

    # -- internals ---------------------------------------------------------------------------------

    def _attr(self, name: str) -> Any:
        """An attribute of the env below (the task, its history...) via ``get_wrapper_attr``; ``None`` if absent."""
        try:
            return self.env.get_wrapper_attr(name)
        except AttributeError:
            return None

    def _new_record(self, seed: int | None, options: dict[str, Any] | None, info: dict[str, Any]) -> dict[str, Any]:
        task = self._attr("task")
        spec = self.env.spec
        protocol = self._attr("protocol")
        suite = self._attr("suite")
        return {
            "format": RECORD_FORMAT,
            "episode_id": uuid.uuid4().hex,
            "experiment": self.experiment,
            "config_hash": self.config_hash,
            "training_step": self.training_step,
            "env_id": spec.id if spec is not None else None,
            "suite": getattr(suite, "name", None),
            "split": self._attr("split"),
            "protocol": getattr(protocol, "name", None),
            "backend": self._attr("backend"),
            "runtime": info.get("runtime"),
            # the Ray node whose actor ran the sandbox (termgym.remote), None for a local env
            "sandbox_node": (self._attr("remote_node") or {}).get("node_id"),
            "max_steps": self._attr("max_steps"),
            "task_id": info.get("task_id", getattr(task, "task_id", None)),
            "seed": seed,
            "options": options,
            "task": {"instruction": getattr(task, "instruction", None),
                     "metadata": dict(getattr(task, "metadata", None) or {})},
            "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "tools": info.get("tools"),
            "steps": [],
            "metadata": dict(self.metadata),
        }

    def _step_entry(self, message: Any, extra: dict[str, Any], reward: SupportsFloat, terminated: bool,
                    truncated: bool, info: dict[str, Any], duration: float) -> dict[str, Any]:
        exec_info = info.get("exec")
        if exec_info is not None:
            exec_info = dict(exec_info)
            output = str(exec_info.get("output", ""))
            if len(output) > self.max_output_chars:
                half = self.max_output_chars // 2
                exec_info["output"] = (output[:half] + f"\n[... {len(output) - 2 * half} characters elided ...]\n"
                                       + output[-half:])
            last = self._attr("last_exec")
            exec_info["duration_s"] = round(last.duration, 6) if last is not None else None
        entry = {
            "index": len(self._record["steps"]) if self._record else 0,
            "message": message,
            "action": info.get("action"),
            "exec": exec_info,
            "refused": bool(info.get("refused", False)),
            "reward": float(reward),
            "reward_events": info.get("reward_events"),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "duration_s": round(duration, 6),
            "elapsed_s": round(float(self._attr("elapsed") or 0.0), 6),
        }
        if extra:
            entry["extra"] = extra
        return entry

    def _flush(self, end_reason: str, messages: list[dict[str, Any]] | None = None) -> None:
        record, self._record = self._record, None
        if record is None:
            return
        if messages is None:
            messages = list(self._attr("messages") or [])
        record["messages"] = messages
        record["end_reason"] = end_reason
        record.setdefault("grade", None)
        record.setdefault("process_reward", None)
        record["num_steps"] = len(record["steps"])
        record["return"] = round(sum(s["reward"] for s in record["steps"]), 10)
        record["duration_s"] = round(time.monotonic() - self._t0, 6)
        record["ended_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
        append_jsonl(self.path, record)
        self.episodes_written += 1

    def _write_config(self) -> None:
        target = self.path.parent / f"config_{self.config_hash}.json"
        if target.exists():
            return
        # concurrent writers race harmlessly: same content, atomic rename
        write_text_atomically(target, json.dumps({"experiment": self.experiment, "config_hash": self.config_hash,
                                                  "config": self.config}, indent=2, sort_keys=True,
                                                 default=_json_default))

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._flush("abandoned")


def _message_of(action: Any) -> Any:
    """What the record stores as a step's message: the action without its token data.

    A :class:`~termgym.env.Truncate` is stored as its (cut) message; the step's ``action.kind``
    (``"cut"``) says the episode was ended from outside.
    """
    message = getattr(action, "message", action) if not isinstance(action, (str, dict)) else action
    if isinstance(message, dict) and "extra" in message:
        return {k: v for k, v in message.items() if k != "extra"}
    return message


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (recursively)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):
        return _finite(value.tolist())
    return value


def _json_default(value: Any) -> Any:
    """JSON for what ``json`` cannot encode: numpy scalars/arrays, paths, sets, dataclasses, bytes."""
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays and scalars, torch tensors
        return value.tolist()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


__all__ = [
    "RECORD_FORMAT",
    "RecordEpisodes",
    "append_jsonl",
    "config_hash",
    "episode_log_path",
    "read_episodes",
    "read_jsonl",
]
