"""Does a task need the internet at run time? Read from its files, before anything runs.

Most Terminal-Bench 2 verifiers download ``uv`` (``curl ... astral.sh/uv/.../install.sh | sh``) and
then let ``uvx`` fetch pytest; others ``pip install`` their test dependencies. Offline, such a
verifier cannot grade, and the run would report 0 where Harbor reports the agent's score. This
module finds those lines so ``termgym harbor list`` can say so per task before a run, and a run
with the network off can refuse the task with the reason instead of scoring it.

Three phases are read: the verifier (``tests/*.sh``, Terminal-Bench's ``run-tests.sh``), the image
build (``RUN`` lines of the Dockerfile, only when the image is built rather than pulled) and the
reference solution (informative: only the oracle runs it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from termgym.tasks.harbor.dockerfile import read_instructions

#: (pattern, what it does): the first that matches a line names why it needs the network.
PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"astral\.sh/uv|install\.sh.*\buv\b", re.I), "downloads uv"),
    (re.compile(r"\buvx\b|\buv\s+(run|tool|add|sync|pip\s+install|venv\s+.*--seed|python\s+install)\b"),
     "uv fetches packages"),
    (re.compile(r"\bpip3?\s+install\b(?!.*--no-index)|\bpython3?\s+-m\s+pip\s+install\b(?!.*--no-index)"),
     "pip installs packages"),
    (re.compile(r"\b(apt-get|apt)\s+(-\S+\s+)*install\b|\bapk\s+add\b|\byum\s+install\b|\bdnf\s+install\b"),
     "installs system packages"),
    (re.compile(r"\bnpm\s+(install|ci|i)\b|\bnpx\b|\byarn\s+add\b|\bpnpm\s+(add|install)\b"),
     "installs npm packages"),
    (re.compile(r"\bgit\s+clone\b"), "clones a git repository"),
    (re.compile(r"\b(curl|wget)\b[^|;&]*\bhttps?://(?!(localhost|127\.|0\.0\.0\.0))"), "downloads a file"),
    (re.compile(r"\bcargo\s+(install|fetch)\b|\bgo\s+(get|install|mod\s+download)\b"), "fetches packages"),
]


@dataclass(frozen=True)
class NetworkNeed:
    """One line that needs the network: the phase (``verifier``, ``build``, ``solution``), where, why."""

    phase: str
    file: str
    line: int
    why: str
    text: str

    def __str__(self) -> str:
        return f"its {self.phase} {self.why} ({self.file}:{self.line}: {self.text[:80]})"

    def to_dict(self) -> dict[str, object]:
        return {"phase": self.phase, "file": self.file, "line": self.line, "why": self.why, "text": self.text[:200]}


def scan_text(text: str, phase: str, file: str) -> list[NetworkNeed]:
    """The lines of a shell script (or RUN lines) that need the network; comments are skipped."""
    needs = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        for pattern, why in PATTERNS:
            if pattern.search(line):
                needs.append(NetworkNeed(phase, file, number, why, line))
                break
    return needs


def network_needs(root: Path, *, tests_dirs: list[Path], built_dockerfile: Path | None = None,
                  solution_dir: Path | None = None,
                  phases: tuple[str, ...] = ("verifier", "build")) -> list[NetworkNeed]:
    """Why the task in ``root`` needs the internet in ``phases`` (see the module docstring); empty when
    it does not. ``tests_dirs`` are its verifier folders (the task's and each step's),
    ``built_dockerfile`` the Dockerfile its image is built from (``None`` when the image is pulled or
    the local backend runs the base image as it is), ``solution_dir`` its reference solution."""
    needs: list[NetworkNeed] = []
    if "verifier" in phases:
        scripts: list[Path] = []
        for tests_dir in tests_dirs:
            if tests_dir.is_dir():
                scripts += sorted(p for p in tests_dir.rglob("*.sh") if p.is_file())
        if (root / "run-tests.sh").is_file():
            scripts.append(root / "run-tests.sh")
        for script in dict.fromkeys(scripts):
            needs += scan_text(script.read_text(encoding="utf-8", errors="replace"), "verifier", _rel(script, root))
    if "build" in phases and built_dockerfile is not None:
        for ins in read_instructions(built_dockerfile.read_text(encoding="utf-8", errors="replace")):
            if ins.keyword == "RUN":
                for need in scan_text(ins.args, "build", _rel(built_dockerfile, root)):
                    needs.append(NetworkNeed("build", need.file, ins.line, need.why, need.text))
    if "solution" in phases and solution_dir is not None:
        for script in sorted(p for p in solution_dir.rglob("*.sh") if p.is_file()):
            needs += scan_text(script.read_text(encoding="utf-8", errors="replace"), "solution", _rel(script, root))
    return needs


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


__all__ = ["PATTERNS", "NetworkNeed", "network_needs", "scan_text"]
