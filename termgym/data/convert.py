"""Converting episode recordings (:mod:`termgym.wrappers.recording`) to offline samples and back.

A recording → sample keeps the conversation, the grade's ``score``/``all_passed``/``all_result``,
the task's ``bug_types``/``problem_statement``/``fix_patch`` (from ``task.metadata``, the
problem statement falling back to the task instruction, the fix patch to the grade's
``fix_patch``, which SWE-SYNTH fills with the agent's own diff), and puts where it came from under
``extra["termgym"]`` (episode id, env id, protocol, experiment, config hash, end reason, return,
the whole grade). A sample → recording rebuilds a record whose steps are the conversation's
assistant turns (parsed by the protocol that wrote them), with no exec results or timings, since
samples do not carry them; converting that record back gives the original sample.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from termgym.data.samples import OfflineSample, SampleError, read_samples
from termgym.wrappers.recording import RECORD_FORMAT, read_jsonl

#: Key under ``extra`` where a converted sample keeps its provenance.
PROVENANCE_KEY = "termgym"


def recording_to_sample(record: Mapping[str, Any], *, where: str = "record") -> OfflineSample:
    """An offline sample from one episode record. Raises for episodes that were never graded."""
    if record.get("format") != RECORD_FORMAT:
        raise SampleError(f"{where}: not a termgym episode record (format {record.get('format')!r})")
    grade = record.get("grade")
    if not isinstance(grade, Mapping):
        raise SampleError(f"{where} (task {record.get('task_id')!r}): the episode has no grade "
                          f"(end_reason {record.get('end_reason')!r}); only finished episodes become samples")
    restored = record.get("sample") or {}
    task = record.get("task") or {}
    metadata = task.get("metadata") or {}
    bug_types = metadata.get("bug_types")
    if bug_types is None:
        bug_types = [metadata["bug_type"]] if isinstance(metadata.get("bug_type"), str) else []
    extra_other = dict(restored.get("extra_other") or {})
    if record.get("source") != "offline_sample":  # a rebuilt sample keeps exactly the extras it had
        extra_other.setdefault(PROVENANCE_KEY, {
            "episode_id": record.get("episode_id"),
            "env_id": record.get("env_id"),
            "suite": record.get("suite"),
            "protocol": record.get("protocol"),
            "experiment": record.get("experiment"),
            "config_hash": record.get("config_hash"),
            "end_reason": record.get("end_reason"),
            "return": record.get("return"),
            "num_steps": record.get("num_steps"),
            "grade": dict(grade),
        })
    data = {
        "task_id": record.get("task_id"),
        "score": grade.get("score", 0.0),
        "extra": {
            "all_passed": bool(grade.get("all_passed", grade.get("passed", False))),
            "all_result": grade.get("all_result"),
            "bug_types": list(bug_types),
            "conversation": list(record.get("messages") or []),
            "problem_statement": metadata.get("problem_statement") or task.get("instruction") or "",
            "fix_patch": metadata.get("fix_patch") or grade.get("fix_patch") or "",
            **extra_other,
        },
        **(restored.get("other") or {}),
    }
    return OfflineSample.from_dict(data, where)


def sample_to_recording(sample: OfflineSample, *, protocol: str | None = None) -> dict[str, Any]:
    """An episode record (``source: "offline_sample"``) from an offline sample.

    ``protocol`` parses the assistant turns into actions; default: the one in the sample's
    provenance, else ``minisweagent`` (seed 000's format).
    """
    from termgym.protocols import make_protocol

    provenance = sample.extra_other.get(PROVENANCE_KEY) or {}
    protocol_name = protocol or provenance.get("protocol") or "minisweagent"
    parser = make_protocol(protocol_name)
    grade = dict(provenance.get("grade") or {})
    grade.setdefault("score", sample.score)
    grade.setdefault("passed", sample.all_passed)
    grade.setdefault("all_passed", sample.all_passed)
    if sample.all_result is not None:
        grade.setdefault("all_result", sample.all_result)
    steps = []
    assistant = sample.assistant_messages()
    for i, message in enumerate(assistant):
        sent: Any = message.get("content") if set(message) <= {"role", "content"} else dict(message)
        action = parser.parse(sent)
        last = i == len(assistant) - 1
        steps.append({
            "index": i, "message": sent,
            "action": {"kind": action.kind, "command": action.command, "error": action.error},
            "exec": None, "refused": False, "reward": sample.score if last else 0.0, "reward_events": None,
            "terminated": last and provenance.get("end_reason", "submitted") == "submitted",
            "truncated": last and provenance.get("end_reason", "submitted") != "submitted",
            "duration_s": None, "elapsed_s": None,
        })
    return {
        "format": RECORD_FORMAT,
        "source": "offline_sample",
        "episode_id": provenance.get("episode_id") or uuid.uuid4().hex,
        "experiment": provenance.get("experiment"),
        "config_hash": provenance.get("config_hash"),
        "training_step": None,
        "env_id": provenance.get("env_id"),
        "suite": provenance.get("suite"),
        "split": None,
        "protocol": protocol_name,
        "backend": None,
        "max_steps": None,
        "task_id": sample.task_id,
        "seed": None,
        "options": {"task_id": str(sample.task_id)},
        "task": {"instruction": sample.problem_statement,
                 "metadata": {"bug_types": list(sample.bug_types), "problem_statement": sample.problem_statement,
                              "fix_patch": sample.fix_patch}},
        "steps": steps,
        "messages": [dict(m) for m in sample.conversation],
        "grade": grade,
        "process_reward": None,
        "end_reason": provenance.get("end_reason"),
        "num_steps": len(steps),
        "return": sample.score,
        "metadata": {},
        # What recording_to_sample needs to give back the sample exactly.
        "sample": {"extra_other": dict(sample.extra_other), "other": dict(sample.other)},
    }


def load_items(paths: Iterable[str | Path], *, include_ungraded: bool = False) -> list[OfflineSample]:
    """Samples from files of samples (``.json``/``.jsonl``) or of episode records, mixed freely.

    A ``.jsonl`` file whose first object has ``"format": "termgym.episode/1"`` is read as
    recordings (ungraded episodes are skipped unless ``include_ungraded``, which raises for them).
    """
    out: list[OfflineSample] = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise SampleError(f"{path}: no such file")
        if is_recording_file(path):
            for number, record in enumerate(read_jsonl(path), 1):
                if record.get("grade") is None and not include_ungraded:
                    continue
                out.append(recording_to_sample(record, where=f"{path}:{number}"))
        else:
            out.extend(read_samples(path))
    return out


def is_recording_file(path: str | Path) -> bool:
    """Whether a file holds episode records (its first JSON line has the record format)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                if not line.lstrip().startswith("{"):
                    return False
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(first, dict) and first.get("format") == RECORD_FORMAT
    return False


__all__ = ["PROVENANCE_KEY", "is_recording_file", "load_items", "recording_to_sample", "sample_to_recording"]
