"""Offline samples in seed 000's format: one finished conversation with its grade.

.. code-block:: json

    {"task_id": 1034, "score": 0.0,
     "extra": {"all_passed": false, "all_result": "234/236", "bug_types": ["logic-inversion"],
               "conversation": [{"role": "system", "content": "..."}, ...],
               "problem_statement": "...", "fix_patch": "diff --git a/..."}}

Files hold a JSON list of samples (``.json``) or one sample per line (``.jsonl``); both read and
write. Fields this module does not know are kept and written back unchanged. A sample converts to
and from an episode record, termgym's one trajectory type (:meth:`OfflineSample.from_record`,
:meth:`OfflineSample.to_record`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.encodable import JSON_ERRORS

#: The ``extra`` fields of seed 000's format, in its order.
EXTRA_FIELDS = ("all_passed", "all_result", "bug_types", "conversation", "problem_statement", "fix_patch")
ROLES = ("system", "user", "assistant", "tool")


class SampleError(ValueError):
    """A sample (or a file of them) does not follow the offline sample format; the message says where."""


@dataclass
class OfflineSample:
    """One offline sample (see the module docstring).

    ``conversation`` is an OpenAI-form chat (system first). ``all_result`` is ``"passed/total"``
    or ``None`` when the suite has no test counts. ``other`` keeps unknown top-level keys and
    ``extra_other`` unknown ``extra`` keys, so a read-write round trip loses nothing.
    """

    task_id: int | str
    score: float
    conversation: list[dict[str, Any]]
    all_passed: bool = False
    all_result: str | None = None
    bug_types: list[str] = field(default_factory=list)
    problem_statement: str = ""
    fix_patch: str = ""
    extra_other: dict[str, Any] = field(default_factory=dict)
    other: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any, where: str = "sample") -> OfflineSample:
        """Validate and load one sample; errors name ``where`` and the offending field."""
        if not isinstance(data, Mapping):
            raise SampleError(f"{where}: expected an object, got {type(data).__name__}")
        if "task_id" not in data:
            raise SampleError(f"{where}: missing field 'task_id'")
        task_id = data["task_id"]
        if isinstance(task_id, bool) or not isinstance(task_id, (int, str)) or task_id == "":
            raise SampleError(f"{where}: task_id must be an integer or a non-empty string, got {task_id!r}")
        where = f"{where} (task_id {task_id!r})"
        for key in ("score", "extra"):
            if key not in data:
                raise SampleError(f"{where}: missing field {key!r}")
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise SampleError(f"{where}: score must be a finite number, got {score!r}")
        extra = data["extra"]
        if not isinstance(extra, Mapping):
            raise SampleError(f"{where}: extra must be an object, got {type(extra).__name__}")
        if "conversation" not in extra:
            raise SampleError(f"{where}: missing field 'extra.conversation'")
        conversation = validate_conversation(extra["conversation"], f"{where}: extra.conversation")
        all_passed = extra.get("all_passed", float(score) >= 1.0)
        if not isinstance(all_passed, bool):
            raise SampleError(f"{where}: extra.all_passed must be true or false, got {all_passed!r}")
        all_result = extra.get("all_result")
        if all_result is not None and not isinstance(all_result, str):
            raise SampleError(f"{where}: extra.all_result must be a string like '234/236' or null, got {all_result!r}")
        bug_types = extra.get("bug_types") or []
        if not isinstance(bug_types, list) or not all(isinstance(b, str) for b in bug_types):
            raise SampleError(f"{where}: extra.bug_types must be a list of strings, got {bug_types!r}")
        texts = {}
        for key in ("problem_statement", "fix_patch"):
            value = extra.get(key) or ""
            if not isinstance(value, str):
                raise SampleError(f"{where}: extra.{key} must be a string, got {type(value).__name__}")
            texts[key] = value
        return cls(
            task_id=task_id,
            score=float(score),
            conversation=conversation,
            all_passed=all_passed,
            all_result=all_result,
            bug_types=list(bug_types),
            problem_statement=texts["problem_statement"],
            fix_patch=texts["fix_patch"],
            extra_other={k: v for k, v in extra.items() if k not in EXTRA_FIELDS},
            other={k: v for k, v in data.items() if k not in ("task_id", "score", "extra")},
        )

    def to_dict(self) -> dict[str, Any]:
        """The sample in seed 000's layout (field order included)."""
        extra = {
            "all_passed": self.all_passed,
            "all_result": self.all_result,
            "bug_types": list(self.bug_types),
            "conversation": [dict(m) for m in self.conversation],
            "problem_statement": self.problem_statement,
            "fix_patch": self.fix_patch,
            **self.extra_other,
        }
        return {"task_id": self.task_id, "score": self.score, "extra": extra, **self.other}

    def assistant_messages(self) -> list[dict[str, Any]]:
        """The assistant turns of the conversation, in order (what a replay sends)."""
        return [m for m in self.conversation if m.get("role") == "assistant"]


def validate_conversation(conversation: Any, where: str) -> list[dict[str, Any]]:
    """Check an OpenAI-form chat: a list of ``{"role", "content"}`` objects; returns a copy."""
    if not isinstance(conversation, list):
        raise SampleError(f"{where} must be a list of messages, got {type(conversation).__name__}")
    out = []
    for i, message in enumerate(conversation):
        if not isinstance(message, Mapping):
            raise SampleError(f"{where}[{i}] must be an object, got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise SampleError(f"{where}[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise SampleError(f"{where}[{i}].content must be a string, got {type(content).__name__}")
        if content is None and not message.get("tool_calls"):
            raise SampleError(f"{where}[{i}] has no content (and no tool_calls)")
        out.append(dict(message))
    return out


def read_samples(path: str | Path) -> list[OfflineSample]:
    """Read samples from a JSON list (``[...]``) or JSON Lines file (detected from the content)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SampleError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return [OfflineSample.from_dict(item, f"{path}: sample {i}") for i, item in enumerate(items)]
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SampleError(f"{path}:{number}: not valid JSON ({exc.msg}); expected a JSON list of samples "
                              f"or one sample per line") from None
        samples.append(OfflineSample.from_dict(item, f"{path}:{number}"))
    return samples


def write_samples(samples: Iterable[OfflineSample | Mapping[str, Any]], path: str | Path) -> int:
    """Write samples as a JSON list (``.json``) or JSON Lines (``.jsonl``); returns how many."""
    path = Path(path)
    items = [s.to_dict() if isinstance(s, OfflineSample) else OfflineSample.from_dict(s, f"sample {i}").to_dict()
             for i, s in enumerate(samples)]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(items, ensure_ascii=False, indent=2) + "\n", encoding="utf-8", errors=JSON_ERRORS)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8",
                        errors=JSON_ERRORS)
    else:
        raise SampleError(f"{path}: write samples to a .json (list) or .jsonl (one per line) file")
    return len(items)


__all__ = ["EXTRA_FIELDS", "OfflineSample", "SampleError", "read_samples", "validate_conversation", "write_samples"]
