"""The optional LLM breaker: a model rewrites one function to contain a bug of a given type.

It covers the complex bug types the procedural injectors cannot make (semantic-error,
wrong-context, silent-failure, resource-leak, timing-error...) and any other type on request.
Its proposals are ordinary :class:`~termgym.factory.swesynth.inject.Mutation` objects spanning the
chosen function, so they go through the same validation as procedural ones, and the diff stays
inside that function.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence

from termgym.factory.swesynth.inject import BUG_TYPE_DESCRIPTIONS, ModuleIndex, Mutation
from termgym.factory.swesynth.llm import ChatClient, LLMError, extract_code_block
from termgym.tasks.swesynth import pyparse

_SYSTEM = (
    "You inject realistic bugs into Python code for a debugging exercise. You are given one function "
    "and a bug type. Return the whole function, rewritten so that it contains exactly one subtle bug of "
    "that type, in a single ```python code block. Keep its name, signature, indentation, comments and "
    "formatting; change as few lines as possible; add no comments that hint at the bug."
)


class LLMBreaker:
    """Proposes LLM-made mutations for up to ``max_candidates`` functions drawn from a seed."""

    def __init__(self, client: ChatClient, *, max_candidates: int = 20, min_lines: int = 3) -> None:
        self.client = client
        self.max_candidates = max_candidates
        self.min_lines = min_lines
        self.errors: list[str] = []

    def propose(self, files: dict[str, str], bug_types: Sequence[str], *, seed: int = 0) -> list[Mutation]:
        """Ask the model for mutations; functions whose answer is unusable are skipped (see ``errors``)."""
        for t in bug_types:
            if t not in BUG_TYPE_DESCRIPTIONS:
                raise ValueError(f"unknown bug type {t!r}; known: {', '.join(sorted(BUG_TYPE_DESCRIPTIONS))}")
        functions = []
        for path in sorted(files):
            try:
                index = ModuleIndex(path, files[path])
            except SyntaxError:
                continue
            for func, qual in index.functions:
                if func.end_lineno - func.lineno + 1 >= self.min_lines:
                    functions.append((index, func, qual))
        rng = random.Random(f"breaker:{seed}")
        rng.shuffle(functions)
        out = []
        for i, (index, func, qual) in enumerate(functions[: self.max_candidates]):
            bug_type = bug_types[i % len(bug_types)]
            mutation = self.break_function(index, func, qual, bug_type)
            if mutation is not None:
                out.append(mutation)
        return out

    def break_function(self, index: ModuleIndex, func: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str,
                       bug_type: str) -> Mutation | None:
        """One model call: the function with a bug of ``bug_type``, as a mutation (or ``None``)."""
        first_line = min([func.lineno, *(d.lineno for d in func.decorator_list)])
        start, end = index.src.line_span(first_line, func.end_lineno)
        original = index.src.text[start:end]
        prompt = (f"Bug type: {bug_type} ({BUG_TYPE_DESCRIPTIONS[bug_type]}).\n"
                  f"Function:\n```python\n{original}```")
        try:
            answer = self.client.complete([{"role": "system", "content": _SYSTEM},
                                           {"role": "user", "content": prompt}])
        except LLMError as exc:
            self.errors.append(f"{index.path}:{qualname}: {exc}")
            return None
        code = extract_code_block(answer)
        if code is None:
            self.errors.append(f"{index.path}:{qualname}: the answer has no code block")
            return None
        if not code.endswith("\n"):
            code += "\n"
        if code == original:
            self.errors.append(f"{index.path}:{qualname}: the model returned the function unchanged")
            return None
        new_text = index.src.text[:start] + code + index.src.text[end:]
        try:
            new_tree = pyparse.parse(new_text)
        except SyntaxError as exc:
            self.errors.append(f"{index.path}:{qualname}: the rewritten function does not parse ({exc.msg})")
            return None
        names = {n.name for n in ast.walk(new_tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if func.name not in names:
            self.errors.append(f"{index.path}:{qualname}: the rewrite renamed the function")
            return None
        return Mutation(bug_type=bug_type, path=index.path, start=start, end=end, replacement=code,
                        line=first_line, function=qualname, description=f"LLM breaker: {bug_type}")
