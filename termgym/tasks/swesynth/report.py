"""User-style bug reports written from failing behaviour, and the no-leak rule.

:func:`write_report` turns the broken tests into what a user would file: per case, *what I tried*
(the literal inputs of the failing call), *what happened* (the value or error observed) and *what I
expected*. It reads only test-side facts (failure messages and the test source), and every sentence
is checked against the bug's patch: a sentence that would name a file, function, variable or class
the patch touches is dropped, so the report never points at the code.

:func:`check_no_leak` enforces the rule on any report (the LLM writer's too): no identifier of the
patch, no file name, no line number, no diff fragment.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import keyword
import re
from collections.abc import Sequence
from pathlib import Path

from termgym.tasks.swesynth.patches import changed_lines, hunk_contexts, patch_files

_ALLOWED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls", "args", "kwargs", "test", "tests"}


class LeakError(ValueError):
    """A bug report names something it must not (the message lists what)."""


# -- the no-leak rule ----------------------------------------------------------------------------


def _split_camel(word: str) -> list[str]:
    return [p.lower() for p in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", word)]


def banned_identifiers(patch: str) -> set[str]:
    """Identifiers a report must not mention: names in the patch's changed code, its function
    contexts and its file paths (Python keywords, builtins and names shorter than 3 are exempt)."""
    names: set[str] = set()
    for line in changed_lines(patch) + hunk_contexts(patch):
        code = re.sub(r"#.*$", "", line)
        code = re.sub(r"""(?:[rbuf]{0,2})('''|\"\"\"|'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")""", " ", code)
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    for path in patch_files(patch):
        for part in Path(path).parts:
            names.add(part)
            names.add(Path(part).stem)
    return {n for n in names if len(n.strip("_")) >= 3 and n not in _ALLOWED and not n.isdigit()}


def _forms(identifier: str) -> list[list[str]]:
    snake = [p.lower() for p in identifier.split("_") if p]
    forms = [snake]
    camel = [q for p in identifier.split("_") if p for q in _split_camel(p)]
    if camel != snake:
        forms.append(camel)
    return [f for f in forms if f and not (len(f) == 1 and len(f[0]) < 3)]


def _contains(tokens: list[str], seq: list[str]) -> bool:
    n = len(seq)
    return any(tokens[i:i + n] == seq for i in range(len(tokens) - n + 1))


def find_leaks(report: str, patch: str) -> list[str]:
    """Everything in ``report`` that breaks the no-leak rule for ``patch`` (empty: clean)."""
    tokens = [t.lower() for t in re.findall(r"[A-Za-z0-9]+", report)]
    leaks = []
    for name in sorted(banned_identifiers(patch)):
        if any(_contains(tokens, form) for form in _forms(name)):
            leaks.append(f"names {name!r} from the patch")
    if re.search(r"\b[\w/.-]+\.py\b", report):
        leaks.append("names a Python file")
    if re.search(r"\blines?\s+\d+\b", report, re.I):
        leaks.append("gives a line number")
    if re.search(r"^(diff --git|@@ |\+\+\+ |--- a/)", report, re.M):
        leaks.append("contains diff syntax")
    for line in changed_lines(patch):
        fragment = line.strip()
        if len(fragment) >= 12 and fragment in report:
            leaks.append(f"quotes a changed line: {fragment[:40]!r}")
    return leaks


def check_no_leak(report: str, patch: str) -> None:
    """Raise :class:`LeakError` if ``report`` names files, functions, variables or line numbers of
    ``patch``, or quotes the diff; return ``None`` when it is clean."""
    leaks = find_leaks(report, patch)
    if leaks:
        raise LeakError("the bug report leaks the fix: " + "; ".join(leaks))


# -- facts about one failing test ------------------------------------------------------------------


def _literal(node: ast.AST) -> str | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    text = repr(value)
    return text if len(text) <= 80 else None


def _failure_location(message: str, test_file: str) -> int | None:
    """The line of the test file where the failure surfaced (from the traceback text)."""
    name = Path(test_file).name
    lines = [int(m.group(1)) for m in re.finditer(rf"(?:^|[\s/]){re.escape(name)}:(\d+):", message, re.M)]
    return lines[-1] if lines else None


def _statement_at(tree: ast.AST, line: int) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno - node.lineno) <= (best.end_lineno - best.lineno):
                best = node
    return best


class Case:
    """What the report says about one failing test."""

    def __init__(self, test: str, message: str, repo: Path | None) -> None:
        self.test = test
        self.message = message or ""
        parts = test.split("::")
        self.file = parts[0] if parts and parts[0].endswith(".py") else None
        self.name = re.sub(r"\[.*\]$", "", parts[-1])
        self.params = re.search(r"\[(.*)\]$", parts[-1])
        self.inputs: list[str] = []
        self.actual: str | None = None
        self.expected: str | None = None
        self.error: tuple[str, str] | None = None  # (exception type, message)
        self.no_raise: str | None = None
        self.statement: ast.stmt | None = None
        if repo is not None and self.file:
            self._read_test_source(repo / self.file)
        self._read_message()

    def _read_test_source(self, path: Path) -> None:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            return
        line = _failure_location(self.message, self.file or "")
        if line is None:
            return
        stmt = _statement_at(tree, line)
        if stmt is None:
            return
        self.statement = stmt
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    lit = _literal(arg)
                    if lit is not None and lit not in self.inputs:
                        self.inputs.append(lit)
        self.inputs = self.inputs[:4]

    def _read_message(self) -> None:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        # pytest < 9.2 writes "DID NOT RAISE <class 'pkg.Error'>", 9.2 and later "DID NOT RAISE Error"
        m = re.match(r"^Failed: DID NOT RAISE (?:<class ')?(?:[\w.]*\.)?(\w+)'?>?", first)
        if m:
            self.no_raise = m.group(1)
            return
        m = re.match(r"^(?:AssertionError: )?assert (.+?) (==|!=) (.+)$", first)
        if m:
            left, right = m.group(1), m.group(3)
            if self._expected_on_left():
                left, right = right, left
            self.actual, self.expected = _clean_repr(left), _clean_repr(right)
            return
        m = re.match(r"^(?:AssertionError: )?assert (?:not )?(True|False|None|\d+|'[^']*')$", first)
        if m:
            self.actual = m.group(1)
            return
        m = re.match(r"^(?:[\w.]*\.)?(\w+(?:Error|Exception|Warning)|StopIteration|KeyError): ?(.*)$", first)
        if m and m.group(1) != "AssertionError":
            self.error = (m.group(1), m.group(2).strip()[:160])

    def _expected_on_left(self) -> bool:
        stmt = self.statement
        if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1:
            left_call = any(isinstance(n, ast.Call) for n in ast.walk(stmt.test.left))
            right_call = any(isinstance(n, ast.Call) for n in ast.walk(stmt.test.comparators[0]))
            return right_call and not left_call
        return False

    def topic(self) -> str:
        words = [w for w in re.sub(r"^test_?", "", self.name).split("_") if w]
        return " ".join(words)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _clean_repr(text: str) -> str | None:
    text = text.strip()
    if not text or len(text) > 120 or "<" in text and "object at 0x" in text:
        return None
    return text


# -- the procedural writer ----------------------------------------------------------------------------

_OPENINGS = [
    "Since I picked up the current version, a few things that used to work behave differently.",
    "I think something regressed: some calls no longer give the answers they gave before.",
    "I ran into wrong results while using the library and narrowed them down to the cases below.",
    "Some of the documented behaviour seems broken right now. Here is what I see.",
    "A couple of operations I rely on started misbehaving. Details below.",
]
_CLOSINGS = [
    "Running the project's own test suite shows {n} failing test(s) that pass on the previous release.",
    "The project's test suite agrees: {n} test(s) fail with the current code.",
    "I also ran the bundled tests: {n} of them fail now.",
]


def _pick(options: Sequence[str], salt: str) -> list[str]:
    start = int(hashlib.sha256(salt.encode()).hexdigest(), 16) % len(options)
    return list(options[start:]) + list(options[:start])


def _scrub_topic(topic: str, patch: str) -> str:
    """The topic words that survive the no-leak rule (whole words dropped, order kept)."""
    words = topic.split()
    kept = [w for w in words if not find_leaks(w, patch)]
    text = " ".join(kept)
    return text if text and not find_leaks(text, patch) else ""


def _case_lines(case: Case, patch: str) -> tuple[list[str], list[str], list[str]]:
    tried, happened, expected = [], [], []
    topic = _scrub_topic(case.topic(), patch)
    intro = f"I exercised the “{topic}” behaviour" if topic else "I exercised one of the documented behaviours"
    if case.inputs:
        tried.append(f"{intro} with the input {', '.join(f'`{v}`' for v in case.inputs)}.")
    elif case.params:
        tried.append(f"{intro} with the parameters `{case.params.group(1)[:80]}`.")
    else:
        tried.append(f"{intro}.")
    if case.no_raise:
        happened.append("The call went through without any complaint.")
        expected.append(f"It should have refused the input with {_article(case.no_raise)} {case.no_raise}.")
    elif case.actual is not None and case.expected is not None:
        happened.append(f"I got `{case.actual}`.")
        expected.append(f"`{case.expected}`.")
    elif case.actual is not None:
        happened.append(f"The check came out as `{case.actual}`.")
        expected.append("The opposite outcome, as documented and as in the previous release.")
    elif case.error:
        kind, msg = case.error
        happened.append(f"It raised {kind}: “{msg}”." if msg else f"It raised {kind}.")
        happened.append(f"It crashed with {_article(kind)} {kind}.")
        expected.append("No error: a normal result, as in the previous release.")
    else:
        happened.append("The result did not match what the documentation describes.")
        expected.append("The documented result, as in the previous release.")
    return ([s for s in tried if not find_leaks(s, patch)] or ["I exercised one of the documented behaviours."],
            [s for s in happened if not find_leaks(s, patch)][:1] or ["The outcome was wrong."],
            [s for s in expected if not find_leaks(s, patch)] or ["The behaviour of the previous release."])


def write_report(target_tests: Sequence[str], messages: dict[str, str], patch: str, *,
                 repo: str | Path | None = None, max_cases: int = 3) -> str:
    """A user-style bug report for a bug whose patch is ``patch``.

    ``target_tests`` are the broken tests' ids, ``messages`` their failure texts (from the junit
    report) and ``repo`` the repository root, used to read the failing tests' inputs. The result
    always passes :func:`check_no_leak` (sentences that would leak are dropped or replaced).
    """
    if not target_tests:
        raise ValueError("write_report needs at least one failing test")
    root = Path(repo) if repo is not None else None
    salt = hashlib.sha256(patch.encode()).hexdigest()
    cases = [Case(t, messages.get(t, ""), root) for t in list(target_tests)[:max_cases]]
    opening = next((s for s in _pick(_OPENINGS, salt) if not find_leaks(s, patch)), "")
    parts = [opening, ""] if opening else []
    for i, case in enumerate(cases, 1):
        tried, happened, expected = _case_lines(case, patch)
        title = f"**Case {i}**" if len(cases) > 1 else "**Details**"
        parts += [title, f"- What I tried: {' '.join(tried)}", f"- What happened: {' '.join(happened)}",
                  f"- What I expected: {' '.join(expected)}", ""]
    closing = _pick(_CLOSINGS, salt)[0].format(n=len(target_tests))
    if not find_leaks(closing, patch):
        parts.append(closing)
    report = "\n".join(parts).strip() + "\n"
    check_no_leak(report, patch)
    return report


# -- the optional LLM writer -----------------------------------------------------------------------------

_LLM_SYSTEM = (
    "You write bug reports the way a user of a Python library would file them. You only know what the "
    "user saw: the failing checks below. Write three short sections titled 'What I tried', 'What "
    "happened' and 'What I expected'. Never name source files, functions, classes, variables or line "
    "numbers, and never include code diffs or tracebacks."
)


def write_report_llm(client, target_tests: Sequence[str], messages: dict[str, str], patch: str, *,
                     repo: str | Path | None = None, attempts: int = 2) -> str:
    """Ask an OpenAI-compatible model (``client``: :class:`~termgym.tasks.swesynth.llm.ChatClient`)
    for the report; a leaking answer is retried with the forbidden words spelled out, and after
    ``attempts`` leaking answers the procedural report is returned instead."""
    root = Path(repo) if repo is not None else None
    facts = []
    for t in list(target_tests)[:5]:
        case = Case(t, messages.get(t, ""), root)
        facts.append(f"- inputs: {', '.join(case.inputs) or 'n/a'}; observed: "
                     f"{case.actual or (case.error and ' '.join(case.error)) or case.no_raise and 'no error' or 'wrong result'}"
                     f"; expected: {case.expected or case.no_raise or 'the documented behaviour'}")
    banned = sorted(banned_identifiers(patch))
    user = (f"{len(target_tests)} checks fail. Observations:\n" + "\n".join(facts)
            + f"\nWords you must not use: {', '.join(banned)}.")
    messages_ = [{"role": "system", "content": _LLM_SYSTEM}, {"role": "user", "content": user}]
    for _ in range(attempts):
        answer = client.complete(messages_).strip()
        leaks = find_leaks(answer, patch)
        if answer and not leaks:
            return answer + "\n"
        messages_ += [{"role": "assistant", "content": answer},
                      {"role": "user", "content": "Rewrite it: it " + "; ".join(leaks) + "."}]
    return write_report(target_tests, messages, patch, repo=repo)
