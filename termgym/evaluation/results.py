"""Evaluation results: one JSON file per episode in a run directory, and summaries over them.

A run directory looks like this::

    runs/X/
      config.json              what was evaluated (env id and kwargs, agent, model, selection)
      episodes/<task>__a<k>.json  one finished episode each, its summary (status, score, steps,
                                  tokens, times, grade, error) and ``record``, the reference to its
                                  transcript (written atomically: a killed run never leaves half a file)
      episodes.jsonl           every episode's record (termgym.wrappers.recording's format, the one
                               trajectory type), appended by all concurrent episodes of the run
      summary.json             the summary of every episode in the directory (rewritten at the end)
      report.html              ``termgym view`` output

Episode statuses: ``completed`` (the env ended the episode and graded it), ``agent_error`` (the
agent failed: an exception from its ``act``, an endpoint that rejected the request, the episode
timeout; it scores 0) and ``infra_error`` (the sandbox, the env or the endpoint failed after every
retry). Solve rate, mean score and pass@k count ``completed`` and ``agent_error`` episodes and leave
``infra_error`` out: an outage says nothing about the agent. A rerun retries ``infra_error`` episodes.
Episodes whose verifier left no valid reward (a Harbor task's ``reward_valid: false``) are counted
apart (``no_valid_reward``) and left out of the means too, as Harbor 0.26 does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import statistics
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termgym.encodable import JSON_ERRORS
from termgym.jsonl import json_lines

#: The recording file of a run directory (every episode's record).
RECORDING_NAME = "episodes.jsonl"
STATUSES = ("completed", "agent_error", "infra_error")
SCORED = ("completed", "agent_error")


@dataclass
class EpisodeResult:
    """The outcome of one episode (one attempt at one task): a summary plus a reference to its record.

    ``error`` is ``{"kind", "type", "message"}`` for failed episodes; ``infra_failures`` lists the
    infrastructure failures that were retried before the final outcome (each with the ``record``
    of its own abandoned try, if it got that far).

    The transcript (messages, each step's action, command result, rewards, token data) is not
    here: it is the episode's record (:mod:`termgym.wrappers.recording`, termgym's one trajectory
    type). ``record`` is ``{"path", "episode_id", "try"}``: the recording file (relative to the run
    directory for ``termgym eval`` runs), the record's id and which infrastructure try it was;
    ``None`` when the episode failed before it started (the env could not be made or reset).
    :meth:`RunDir.transcript` and :meth:`load_record` read it.
    """

    task_id: str
    attempt: int
    status: str
    score: float = 0.0
    passed: bool = False
    end_reason: str | None = None
    steps: int = 0
    format_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time: float = 0.0
    agent_time: float = 0.0
    env_time: float = 0.0
    total_reward: float = 0.0
    grade: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    infra_failures: list[dict[str, Any]] = field(default_factory=list)
    seed: int | None = None
    started_at: str | None = None
    worker: str | None = None
    record: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"episode status must be one of {STATUSES}, not {self.status!r}")

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.attempt)

    @property
    def reward_valid(self) -> bool:
        """False when the verifier left no valid reward (Harbor's "no valid reward": missing, empty
        or unparsable, or written before a verifier timeout); such an episode has no score to average."""
        return (self.grade or {}).get("reward_valid", True) is not False

    @property
    def scored(self) -> bool:
        """Whether the episode counts towards solve rate, mean score and pass@k: infra failures and
        episodes without a valid reward do not (as Harbor leaves the latter out of its mean)."""
        return self.status in SCORED and self.reward_valid

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_record(self, run_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The episode's full record from the recording it points at (a relative ``record["path"]``
        is read from ``run_dir``). Raises ``ValueError`` naming the file when it cannot."""
        if not self.record:
            raise ValueError(f"episode {self.task_id!r} (attempt {self.attempt}) has no record: it failed "
                             "before its episode started" + (f" ({self.error.get('type')})" if self.error else ""))
        path = Path(str(self.record.get("path") or ""))
        if run_dir is not None and not path.is_absolute():
            path = Path(run_dir) / path
        return read_record(path, str(self.record.get("episode_id")), self.task_id)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeResult:
        known = cls.__dataclass_fields__
        result = cls(**{k: v for k, v in data.items() if k in known})
        if data.get("messages") or data.get("turns"):
            # A result written before results kept only a reference to their record: its inline
            # transcript is still shown (RunDir.transcript), never written back.
            result.legacy_transcript = {"messages": list(data.get("messages") or []),
                                        "turns": list(data.get("turns") or [])}
        return result


#: How a result read from an old run directory carries its inline transcript (``None``: it has none).
EpisodeResult.legacy_transcript = None  # type: ignore[attr-defined]


def read_record(path: str | os.PathLike[str], episode_id: str, task_id: str | None = None) -> dict[str, Any]:
    """The record ``episode_id`` from the recording file ``path``; ``ValueError`` naming the file if
    the file is missing or unreadable, or holds no such record (saying which lines are corrupt)."""
    return _find(_records_of(Path(path)), Path(path), episode_id, task_id)


@dataclass
class _Recording:
    """The records of one recording file by id, and the lines that were not records."""

    records: dict[str, dict[str, Any]]
    bad_lines: list[str]


def _records_of(path: Path) -> _Recording:
    from termgym.wrappers.recording import RECORD_FORMAT

    if not path.is_file():
        raise ValueError(f"the recording {path} does not exist (was the run directory moved without its "
                         "episodes.jsonl, or the file deleted?)")
    records: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    try:
        # A bad line (a record torn by a killed writer) costs that line, not the whole file: the
        # other episodes' records stay readable, and a missing one is reported with the bad lines.
        for number, record, problem in json_lines(path):
            if problem is None and (not isinstance(record, dict) or record.get("format") != RECORD_FORMAT):
                problem = f"not a {RECORD_FORMAT} record"
            if problem is not None:
                bad.append(f"line {number}: {problem}")
                continue
            records[str(record.get("episode_id"))] = record
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"the recording {path} cannot be read: {exc}") from exc
    return _Recording(records, bad)


def _find(recording: _Recording, path: Path, episode_id: str, task_id: str | None) -> dict[str, Any]:
    record = recording.records.get(episode_id)
    if record is not None:
        return record
    who = f"episode {task_id!r}'s record" if task_id else "the record"
    corrupt = (f"; the file is corrupt ({len(recording.bad_lines)} bad line(s): "
               + "; ".join(recording.bad_lines[:3]) + ")") if recording.bad_lines else ""
    raise ValueError(f"{who} {episode_id!r} is not in {path}{corrupt}")


def transcript_turns(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A record's steps as the report's turns: ``step`` (1-based), ``action``, ``exec``, ``reward``,
    ``reward_events``, and the agent's ``usage``/``meta``/token data from the step's ``extra``."""
    turns = []
    for position, step in enumerate(record.get("steps") or []):
        turn = {"step": int(step.get("index", position)) + 1}
        for key in ("action", "exec", "refused", "reward", "reward_events"):
            if step.get(key) is not None:
                turn[key] = step[key]
        turn.update(step.get("extra") or {})
        turns.append(turn)
    return turns


def episode_filename(task_id: str, attempt: int) -> str:
    """A file name for an episode that is safe on any filesystem and unique per (task, attempt)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id)[:80]
    if safe != task_id:  # two ids that sanitise alike must not share a file
        safe += "-" + hashlib.sha1(task_id.encode()).hexdigest()[:8]
    return f"{safe}__a{attempt}.json"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that readers (and a run killed mid-write) only ever see a whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=JSON_ERRORS) as handle:
            json.dump(data, handle, indent=1, ensure_ascii=False, default=_json_default)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class RunDir:
    """A run directory on disk (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.episodes_dir = self.path / "episodes"
        self.config_path = self.path / "config.json"
        self.summary_path = self.path / "summary.json"
        #: Where every episode of the run is recorded (one file, appended by concurrent episodes).
        self.record_path = self.path / RECORDING_NAME
        self._recordings: dict[Path, _Recording] = {}

    def exists(self) -> bool:
        return self.config_path.exists()

    def read_config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            raise FileNotFoundError(f"{self.path} is not a termgym run directory: it has no config.json")
        return json.loads(self.config_path.read_text())

    def write_config(self, config: dict[str, Any]) -> None:
        write_json_atomic(self.config_path, config)

    def episode_path(self, task_id: str, attempt: int) -> Path:
        return self.episodes_dir / episode_filename(task_id, attempt)

    def write_episode(self, result: EpisodeResult) -> None:
        write_json_atomic(self.episode_path(result.task_id, result.attempt), result.to_dict())

    def episodes(self) -> list[EpisodeResult]:
        """Every episode on disk, sorted by task id and attempt. Unreadable files are an error naming them."""
        out = []
        if not self.episodes_dir.exists():
            return out
        for file in sorted(self.episodes_dir.glob("*.json")):
            try:
                out.append(EpisodeResult.from_dict(json.loads(file.read_text())))
            except (json.JSONDecodeError, TypeError, ValueError) as exc:
                raise ValueError(f"cannot read episode file {file}: {exc}") from exc
        out.sort(key=lambda r: (r.task_id, r.attempt))
        return out

    def transcript(self, result: EpisodeResult) -> dict[str, Any] | None:
        """The transcript of ``result``, read from its record: ``{"messages", "turns", "record"}``
        (turns as :func:`transcript_turns`); ``None`` when the episode has no record (it failed
        before it started). An old result with an inline transcript gives that one. A missing,
        corrupt or incomplete recording raises ``ValueError`` naming the run, the episode and the file.
        """
        if result.legacy_transcript is not None:  # type: ignore[attr-defined]
            return {**result.legacy_transcript, "record": None}  # type: ignore[attr-defined]
        if not result.record:
            return None
        path = Path(str(result.record.get("path") or ""))
        path = path if path.is_absolute() else self.path / path
        episode_id = str(result.record.get("episode_id"))
        try:
            if path not in self._recordings:
                self._recordings[path] = _records_of(path)
            record = _find(self._recordings[path], path, episode_id, result.task_id)
        except ValueError as exc:
            raise ValueError(f"run {self.path}: cannot read the transcript of episode {result.task_id!r} "
                             f"(attempt {result.attempt}): {exc}. To play the episode again, delete "
                             f"{self.episode_path(result.task_id, result.attempt)} and rerun `termgym eval` "
                             "with the same output directory") from None
        return {"messages": list(record.get("messages") or []), "turns": transcript_turns(record), "record": record}

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.summary_path, summary)


# -- statistics ----------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator: the chance that at least one of ``k`` of ``n`` attempts passed,
    given that ``c`` did (1 - C(n-c, k) / C(n, k))."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def reported_ks(max_attempts: int) -> list[int]:
    """Which k to report pass@k for: 1, the run's attempts, and the usual milestones in between."""
    ks = {1, max_attempts} | {k for k in (2, 5, 10, 20, 50, 100) if k < max_attempts}
    return sorted(k for k in ks if k >= 1)


def per_task_table(results: Iterable[EpisodeResult]) -> list[dict[str, Any]]:
    """One row per task: attempts scored, passed, mean score, infra errors."""
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for result in results:
        by_task[result.task_id].append(result)
    rows = []
    for task_id in sorted(by_task, key=_natural_key):
        episodes = by_task[task_id]
        scored = [r for r in episodes if r.scored]
        rows.append({
            "task_id": task_id,
            "attempts": len(scored),
            "passed": sum(r.passed for r in scored),
            "mean_score": statistics.fmean(r.score for r in scored) if scored else None,
            "infra_errors": sum(r.status == "infra_error" for r in episodes),
        })
    return rows


def summarize(results: Sequence[EpisodeResult], config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of a run: counts, solve rate, mean score, pass@k, steps, tokens, times, per task."""
    config = config or {}
    scored = [r for r in results if r.scored]
    rows = per_task_table(results)
    max_attempts = max((row["attempts"] for row in rows), default=0)
    pass_k: dict[str, float] = {}
    for k in reported_ks(max_attempts) if max_attempts else []:
        values = [pass_at_k(row["attempts"], row["passed"], k) for row in rows if row["attempts"] >= k]
        if values:
            pass_k[str(k)] = statistics.fmean(values)
    steps = [r.steps for r in scored]
    statuses = Counter(r.status for r in results)
    return {
        "env_id": config.get("env_id"),
        "agent": config.get("agent"),
        "model": (config.get("agent_options") or {}).get("model") or config.get("model"),
        "episodes": len(results),
        "tasks": len(rows),
        "attempts_per_task": max_attempts,
        "completed": statuses.get("completed", 0),
        "agent_errors": statuses.get("agent_error", 0),
        "infra_errors": statuses.get("infra_error", 0),
        "no_valid_reward": sum(r.status in SCORED and not r.reward_valid for r in results),
        "scored": len(scored),
        "solved": sum(r.passed for r in scored),
        "solve_rate": statistics.fmean(float(r.passed) for r in scored) if scored else None,
        "mean_score": statistics.fmean(r.score for r in scored) if scored else None,
        "pass_at_k": pass_k,
        "steps_mean": statistics.fmean(steps) if steps else None,
        "steps_median": statistics.median(steps) if steps else None,
        "format_errors": sum(r.format_errors for r in results),
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "tokens_mean": statistics.fmean(r.tokens for r in scored) if scored else None,
        "episode_seconds_total": sum(r.wall_time for r in results),
        "episode_seconds_mean": statistics.fmean(r.wall_time for r in scored) if scored else None,
        "end_reasons": dict(Counter(r.end_reason or r.status for r in results)),
        "error_types": dict(Counter((r.error or {}).get("type", "?") for r in results if r.error)),
        "per_task": rows,
    }


def format_summary(summary: dict[str, Any], run_seconds: float | None = None) -> str:
    """The summary as a small plain-text table for the terminal."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def num(x: float | None, fmt: str = ".2f") -> str:
        return "-" if x is None else format(x, fmt)

    lines = [
        f"env        {summary.get('env_id')}",
        f"agent      {summary.get('agent')}" + (f"  model {summary['model']}" if summary.get("model") else ""),
        f"episodes   {summary['episodes']}  ({summary['tasks']} task(s) x up to {summary['attempts_per_task']} "
        f"attempt(s)): {summary['completed']} completed, {summary['agent_errors']} agent errors, "
        f"{summary['infra_errors']} infra errors",
        f"solve rate {pct(summary['solve_rate'])}  ({summary['solved']}/{summary['scored']})",
        f"mean score {num(summary['mean_score'], '.3f')}",
    ]
    if summary["pass_at_k"]:
        lines.append("pass@k     " + "  ".join(f"pass@{k} {pct(v)}" for k, v in summary["pass_at_k"].items()))
    lines += [
        f"steps      mean {num(summary['steps_mean'], '.1f')}  median {num(summary['steps_median'], '.1f')}"
        f"  format errors {summary['format_errors']}",
        f"tokens     prompt {_si(summary['prompt_tokens'])}  completion {_si(summary['completion_tokens'])}"
        f"  mean/episode {_si(summary['tokens_mean'])}",
        f"time       episodes {_duration(summary['episode_seconds_total'])} in total, "
        f"mean {_duration(summary['episode_seconds_mean'])}"
        + (f"; run wall clock {_duration(run_seconds)}" if run_seconds is not None else ""),
    ]
    if summary["end_reasons"]:
        lines.append("ended by   " + ", ".join(f"{k} {v}" for k, v in sorted(summary["end_reasons"].items())))
    return "\n".join(lines)


def _si(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _natural_key(text: str) -> list[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)
