"""Unified diffs in the form ``git apply`` accepts, written and read without calling git.

Bug patches and their reverse (the oracle fix) are made here from file texts. Hunk headers carry
the enclosing ``def``/``class`` line the way git's Python diff driver does, so the patch says which
function changed (and :func:`termgym.factory.swesynth.report.check_no_leak` bans that name).
"""

from __future__ import annotations

import difflib
import re

_FUNC_LINE = re.compile(r"^\s*(async\s+def|def|class)\s+\w+")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _context_line(old_lines: list[str], before: int) -> str:
    """The nearest ``def``/``class`` line above 0-based line ``before`` (git's funcname)."""
    for i in range(min(before, len(old_lines)) - 1, -1, -1):
        if _FUNC_LINE.match(old_lines[i]):
            return old_lines[i].rstrip("\n").strip()[:80]
    return ""


def file_diff(path: str, old: str, new: str, context: int = 3) -> str:
    """A git-style diff of one file (empty string when the texts are equal)."""
    if old == new:
        return ""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    out = [f"diff --git a/{path} b/{path}\n", f"--- a/{path}\n", f"+++ b/{path}\n"]
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        old_start = i1 + 1 if i2 > i1 else i1
        new_start = j1 + 1 if j2 > j1 else j1
        header = f"@@ -{old_start},{i2 - i1} +{new_start},{j2 - j1} @@"
        # Name the function holding the first changed line (git names the line above the hunk);
        # the leak check bans this name, so it must be the function the bug is in.
        first_change = next(a1 for tag, a1, a2, b1, b2 in group if tag != "equal")
        func = _context_line(old_lines, first_change + 1)
        out.append(f"{header} {func}\n" if func else f"{header}\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(_prefixed(" ", old_lines[a1:a2]))
                continue
            if tag in ("replace", "delete"):
                out.extend(_prefixed("-", old_lines[a1:a2]))
            if tag in ("replace", "insert"):
                out.extend(_prefixed("+", new_lines[b1:b2]))
    return "".join(out)


def _prefixed(prefix: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(prefix + line)
        else:
            out.append(prefix + line + "\n\\ No newline at end of file\n")
    return out


def make_patch(old_files: dict[str, str], new_files: dict[str, str]) -> str:
    """A patch turning ``old_files`` into ``new_files`` (paths present in ``new_files``)."""
    return "".join(file_diff(path, old_files[path], new_files[path]) for path in sorted(new_files))


def patch_files(patch: str) -> list[str]:
    """Repository-relative paths a patch touches (from its ``diff --git`` / ``+++`` lines)."""
    out: list[str] = []
    for line in patch.splitlines():
        path = None
        if line.startswith("diff --git "):
            m = re.match(r"diff --git a/(.+?) b/(.+)$", line)
            path = m.group(2) if m else None
        elif line.startswith("+++ b/") or line.startswith("--- a/"):
            path = line[6:]
        if path and path not in out:
            out.append(path)
    return out


def changed_lines(patch: str) -> list[str]:
    """The removed and added lines of a patch, without their ``-``/``+`` markers."""
    out = []
    for line in patch.splitlines():
        if (line.startswith("+") and not line.startswith("+++")) or (line.startswith("-") and not line.startswith("---")):
            out.append(line[1:])
    return out


def hunk_contexts(patch: str) -> list[str]:
    """The function-context text after each hunk header."""
    out = []
    for line in patch.splitlines():
        m = _HUNK.match(line)
        if m:
            out.append(line[m.end():].strip())
    return out
