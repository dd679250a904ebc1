"""The code a bug report asks its reader to run, and two ways of writing it that ignore spacing.

:func:`repro_code` finds the repro in a report (its first ``python`` block, an interpreter session
without prompts and output, else the first backticked call); :func:`first_call` is the repro's first
statement that is not an import and :func:`repro_key` the whole repro, both written by
``ast.unparse`` so that two reports differing only in spacing or quotes read the same. The audit,
the suite card and the near-duplicate rule of the served suite (:mod:`.distinct`) all read reports
through these.
"""

from __future__ import annotations

import ast
import re

from termgym.tasks.swesynth import pyparse


def _session_code(block: str) -> str | None:
    lines = block.splitlines()
    if not any(line.startswith(">>>") for line in lines):
        return None
    code = [line[4:] if line.startswith((">>> ", "... ")) else line[3:]
            for line in lines if line.startswith((">>>", "..."))]
    return "\n".join(code)


def repro_code(statement: str) -> str | None:
    """The code a reader would run: the first ``python`` block (an interpreter session without its
    prompts and output), else the first backticked span that is a call. ``None``: there is none."""
    for block in re.findall(r"```(?:python|py)?\n(.*?)```", statement, re.S):
        code = _session_code(block) or block
        if code.strip():
            return code.strip() + "\n"
    for span in re.findall(r"`([^`\n]+)`", statement):
        try:
            tree = pyparse.parse(span)
        except SyntaxError:
            continue
        if any(isinstance(n, ast.Call) for n in ast.walk(tree)) and not re.fullmatch(r"[\w.]+\(\)", span):
            return span + "\n"
    return None


def parse_repro(statement: str) -> tuple[str | None, list | None]:
    """The report's repro code and its parsed statements (``None`` when it has no repro, or for the
    statements when the code does not parse)."""
    code = repro_code(statement)
    if code is None:
        return None, None
    try:
        return code, pyparse.parse(code).body
    except SyntaxError:
        return code, None


def first_call_of(code: str | None, body: list | None) -> str | None:
    """:func:`first_call` of a repro :func:`parse_repro` already read."""
    if code is None:
        return None
    if body is None:
        lines = [x.strip() for x in code.splitlines() if x.strip() and not x.lstrip().startswith(("import ", "from "))]
        return lines[0] if lines else None
    for node in body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            return ast.unparse(node)
    return None


def repro_key_of(code: str | None, body: list | None) -> str | None:
    """:func:`repro_key` of a repro :func:`parse_repro` already read."""
    if code is None:
        return None
    if body is None:
        return "\n".join(line.strip() for line in code.splitlines() if line.strip())
    return ast.unparse(ast.Module(body=body, type_ignores=[]))


def first_call(statement: str) -> str | None:
    """The repro's first statement that is not an import, written the same way whatever the
    spacing (``ast.unparse``), or ``None`` when the report has no repro."""
    return first_call_of(*parse_repro(statement))


def repro_key(statement: str) -> str | None:
    """The report's whole repro written one way whatever the spacing and quoting (``ast.unparse``),
    or ``None`` when the report has no repro."""
    return repro_key_of(*parse_repro(statement))


__all__ = ["first_call", "first_call_of", "parse_repro", "repro_code", "repro_key", "repro_key_of"]
