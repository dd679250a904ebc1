"""The rules a bug report must pass, checked mechanically (:func:`check_report`).

A report reads like a user filed it: it names the behaviour (a public function or method), gives a
concrete call, what came back and what was expected; it shows no test ids, pytest parameter ids, test
file paths, counts of failing tests or traceback text; its backticks, quotes and brackets balance and
no value is cut short; and it never leaks the fix (:func:`find_leaks`: no identifier from the changed
code a user could not see in the tests, no file name, line number or diff fragment). Every problem is
reported as ``"<rule>: <what is wrong>"`` so a writer can retry and a generator can log the reason.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from termgym.factory.swesynth.failures import CHAIN_TAIL, split_test_id, test_names
from termgym.factory.swesynth.patches import changed_lines, hunk_contexts, patch_files

_ALLOWED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls", "args", "kwargs", "test", "tests"}

#: The rule names, in the order they are checked.
RULES = ("wrapper-tag", "length", "test-id", "param-id", "test-path", "boilerplate", "traceback", "garbled",
         "no-behaviour", "no-input", "no-observed", "no-expected", "leak")


class LeakError(ValueError):
    """A bug report names something it must not (the message lists what)."""


class ReportError(ValueError):
    """No bug report passing :func:`check_report` could be written (the message says why)."""


# -- the no-leak rule ----------------------------------------------------------------------------


def _split_camel(word: str) -> list[str]:
    return [p.lower() for p in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", word)]


def _code_names(lines: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for line in lines:
        code = re.sub(r"#.*$", "", line)
        code = re.sub(r"""(?:[rbuf]{0,2})('''|\"\"\"|'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")""", " ", code)
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    return names


def _path_names(patch: str) -> set[str]:
    names = set()
    for path in patch_files(patch):
        for part in Path(path).parts:
            names.add(part)
            names.add(Path(part).stem)
    return names


def _keep(names: set[str]) -> set[str]:
    return {n for n in names if len(n.strip("_")) >= 3 and n not in _ALLOWED and not n.isdigit()}


#: A behaviour named as a method chained to a call, in backticks: ```parse(...).find()```.
_CHAINED_NAME = re.compile(rf"`[A-Za-z_][\w.]*{CHAIN_TAIL}\(\)`")


def banned_identifiers(patch: str, visible: Iterable[str] = ()) -> set[str]:
    """Identifiers a report must not mention: names in the patch's changed code, private names of its
    function contexts and its file paths. ``visible`` names (written in the failing tests, so a user
    sees them) are allowed unless they name a changed file. Keywords, builtins and names shorter than
    3 characters are exempt."""
    seen = set(visible)
    contexts = _code_names(hunk_contexts(patch))
    names = (_code_names(changed_lines(patch)) - seen) | {n for n in contexts - seen if n.startswith("_")}
    if not seen:  # without the tests at hand, the function holding the bug is not named either
        names |= contexts
    return _keep(names | (_path_names(patch) - seen))


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


#: An exception's message as the writer quotes it (``with the message “...”``).
_QUOTED_MESSAGE = re.compile("message \u201c[^\u201c\u201d\n]*\u201d")


def find_leaks(report: str, patch: str, visible: Iterable[str] = ()) -> list[str]:
    """Everything in ``report`` that breaks the no-leak rule for ``patch`` (empty: clean).
    ``visible``: identifiers the failing tests use, which a user may name."""
    seen = set(visible)
    # a name the tests show is said as a whole: ``parse_price`` does not leak a banned ``price``
    shown = re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: " " if m.group(0) in seen else m.group(0), report)
    tokens = [t.lower() for t in re.findall(r"[A-Za-z0-9]+", shown)]
    leaks = []
    paths = _path_names(patch)
    for name in sorted(banned_identifiers(patch, visible)):
        if name in paths:  # a module or folder name: as written (the class ``Cart`` may live in ``cart.py``)
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", report):
                leaks.append(f"names {name!r} from the patch's file paths")
        elif any(_contains(tokens, form) for form in _forms(name)):
            leaks.append(f"names {name!r} from the patch")
    if re.search(r"\b[\w/.-]+\.py\b", report):
        leaks.append("names a Python file")
    # a parser's quoted message ("line 1 column 3") numbers lines of its input, not of the source
    if re.search(r"\blines?\s+\d+\b", _QUOTED_MESSAGE.sub("", report), re.I):
        leaks.append("gives a line number")
    if re.search(r"^(diff --git|@@ |\+\+\+ |--- a/)", report, re.M):
        leaks.append("contains diff syntax")
    for line in changed_lines(patch):
        fragment = line.strip()
        if len(fragment) >= 12 and fragment in report:
            leaks.append(f"quotes a changed line: {fragment[:40]!r}")
    return leaks


def check_no_leak(report: str, patch: str, visible: Iterable[str] = ()) -> None:
    """Raise :class:`LeakError` if ``report`` names files, functions, variables or line numbers of
    ``patch``, or quotes the diff; return ``None`` when it is clean."""
    leaks = find_leaks(report, patch, visible)
    if leaks:
        raise LeakError("the bug report leaks the fix: " + "; ".join(leaks))


# -- the other rules ------------------------------------------------------------------------------

_FENCE = re.compile(r"^```[\w-]*\s*\n(.*?)^```\s*$", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_EXC_NAME = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning)\b|\bStopIteration\b")
_NO_RAISE = re.compile(r"\b(?:did not|didn't|does not|doesn't|never) (?:raise|complain|fail|reject)|"
                       r"\bno (?:error|exception)\b|\bwithout (?:raising|an error|any error|complaint|complaining)|"
                       r"\b(?:accepts|accepted) (?:it|the|this|that)\b", re.I)
_OBSERVE = re.compile(r"\b(?:get|gets|got|getting|returns?|returned|returning|gives?|gave|giving|comes? back|came "
                      r"back|produces?|produced|prints?|printed|yields?|yielded|evaluates? to|shows?|showed|"
                      r"ends? up|ended up|results? in|resulted in|actual(?:ly)?|instead)\b"
                      r"[^`\n]{0,40}`", re.I)
_EXPECT = re.compile(r"\b(?:expect\w*|should|ought|supposed|instead of|rather than|correct|right answer|"
                     r"documented|documentation says)\b[^`\n]{0,60}`|`[^`\n]+`[^`\n.]{0,40}\b(?:expected|should)\b",
                     re.I)
_BOILERPLATE = re.compile(r"test suite|\bfailing tests?\b|\btests? (?:fail|failed|failing|pass|passed)\b|\(s\)|"
                          r"\bpytest\b|\bjunit\b|\bunit tests?\b|\btest ?cases?\b|\bparametri[sz]|"
                          r"\b\d+\s+(?:of (?:the|them|my) )?(?:failing |broken )?(?:tests?|checks?)\b", re.I)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*File \".*\", line \d+|^E\s{2,}\S|^>\s{3,}\S|"
                        r"^\s*\+\s+where\b|\bAssertionError: assert\b|^\s*[\w/.-]+:\d+: \w+", re.M)
_AUTO_PARAM = re.compile(r"(?<![\w'\"])[A-Za-z_]\w*?\d+(?:-[\w.]+)+(?![\w'\"])")


def _code_parts(text: str) -> tuple[list[str], list[str], str]:
    """(inline code spans, fenced block bodies, the text with the blocks removed)."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    rest = _FENCE.sub("", text)
    return _SPAN.findall(rest), blocks, rest


def _unbalanced(code: str) -> str | None:
    """What is unbalanced in a piece of Python-like code: a quote or a bracket (``None``: fine)."""
    stack: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "'\"":
            quote = code[i:i + 3] if code[i:i + 3] in ("'''", '"""') else c
            j = i + len(quote)
            while j < n and code[j:j + len(quote)] != quote:
                j += 2 if code[j] == "\\" else 1
            if j >= n:
                return f"an unterminated {quote} string in `{code[:50]}`"
            i = j + len(quote)
            continue
        if c == "#":  # a comment runs to the end of the line
            j = code.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "([{":
            stack.append(c)
        elif c in ")]}":
            if not stack or stack.pop() != pairs[c]:
                return f"an unbalanced {c!r} in `{code[:50]}`"
        i += 1
    return f"an unclosed {stack[-1]!r} in `{code[:50]}`" if stack else None


def _is_error_text(span: str) -> bool:
    return bool(re.match(r"^\s*\w*(?:Error|Exception|Warning)\b", span))


def _test_facts(target_tests: Sequence[str]) -> tuple[set[str], set[str], set[str]]:
    ids, funcs, params = set(), set(), set()
    for test in target_tests:
        path, classes, name, param = split_test_id(test)
        ids.add(test.split("[")[0])
        if name.startswith("test") and len(name) > 4:
            funcs.add(name)
        funcs.update(c for c in classes if c.startswith("Test"))
        if param:
            params.add(param)
    return ids, funcs, params


def check_report(text: str, *, target_tests: Sequence[str] = (), patch: str | None = None,
                 repo: str | Path | None = None, visible: Iterable[str] = ()) -> list[str]:
    """The problems of bug report ``text`` (empty list: it passes), each ``"<rule>: <detail>"``.

    ``target_tests`` are the failing tests' ids (none of them, their function names or parameter
    ids may appear); ``patch`` the bug's diff (nothing of it may leak); ``repo`` the repository root,
    used to read which identifiers the failing tests use (a user sees those, so naming them is not a
    leak), ``visible`` more such identifiers. The rules are listed in :data:`RULES`.
    """
    problems: list[str] = []
    stripped = text.strip()
    if re.search(r"</?\s*pr_description\b|</?\s*(?:issue|bug_report|problem_statement|report)\s*>", text, re.I):
        problems.append("wrapper-tag: the report carries its own wrapper tag (the instruction adds exactly one)")
    if len(stripped) < 60:
        problems.append(f"length: {len(stripped)} characters is too short to be a report")
    elif len(stripped) > 3000:
        problems.append(f"length: {len(stripped)} characters is longer than a user's report (3000 at most)")
    ids, funcs, params = _test_facts(target_tests)
    if "::" in text or any(i in text for i in ids):
        problems.append("test-id: shows a pytest test id")
    for func in sorted(funcs):
        if re.search(rf"\b{re.escape(func)}\b", text):
            problems.append(f"test-id: names the test {func!r}")
    for param in sorted(params):
        if (("-" in param or re.fullmatch(r"[A-Za-z_]\w*\d+", param)) and len(param) >= 3
                and re.search(rf"(?<![\w'\"]){re.escape(param)}(?![\w'\"])", text)):
            problems.append(f"param-id: shows the pytest parameter id {param!r}")
    m = _AUTO_PARAM.search(text)
    if m and not any(f"param-id: shows the pytest parameter id {m.group(0)!r}" == p for p in problems):
        problems.append(f"param-id: shows what looks like a pytest parameter id {m.group(0)!r}")
    if re.search(r"\b[\w./-]*\btests?/[\w./-]+|\b(?:test_\w+|\w+_test|conftest)\.py\b", text):
        problems.append("test-path: names a test file or folder")
    # values in code, and an exception's quoted message (program output), may say anything
    m = _BOILERPLATE.search(_QUOTED_MESSAGE.sub("", _SPAN.sub("", _FENCE.sub("", text))))
    if m:
        problems.append(f"boilerplate: talks about the test run ({m.group(0)!r}) instead of the behaviour")
    m = _TRACEBACK.search(text)
    if m:
        problems.append(f"traceback: contains raw traceback or assertion text ({m.group(0).strip()[:40]!r})")
    problems += [f"garbled: {g}" for g in _garbled(text)]
    spans, blocks, prose = _code_parts(text)
    code = spans + blocks
    if not any(re.search(r"\b[A-Za-z_]\w*\s*\(|\b[A-Za-z_]\w*\.[A-Za-z_]\w*", c) for c in code):
        problems.append("no-behaviour: names no function or method (put the call in backticks)")
    if not any(re.search(r"\b[A-Za-z_][\w.]*\s*\(", c) for c in code):
        problems.append("no-input: shows no concrete call with its input")
    doctest_output = any(re.search(r"^>>> .*\n(?!>>>|\.\.\.)\S", b, re.M) for b in blocks)
    if not (_EXC_NAME.search(text) or _NO_RAISE.search(text) or _OBSERVE.search(prose) or doctest_output):
        problems.append("no-observed: says nothing concrete about what came back")
    if not _EXPECT.search(prose):
        problems.append("no-expected: does not say what the result should have been")
    if patch:
        seen = set(visible)
        for test in target_tests:
            seen |= test_names(test, Path(repo) if repo is not None else None)
        problems += [f"leak: {leak}" for leak in find_leaks(text, patch, seen)]
    return problems


def _garbled(text: str) -> list[str]:
    found = []
    if text.count("```") % 2:
        found.append("an unclosed ``` code block")
    spans, blocks, rest = _code_parts(text)
    if rest.count("`") % 2:
        found.append("unbalanced backticks")
    if text.count("\u201c") != text.count("\u201d"):
        found.append("unbalanced curly quotes")
    for span in spans:
        if _is_error_text(span):
            continue
        problem = _unbalanced(span)
        if problem:
            found.append(problem)
            break
    for block in blocks:  # checked whole: a string or bracket may span lines
        lines = [re.sub(r"^(?:>>>|\.\.\.) ?", "", line) for line in block.splitlines()]
        problem = _unbalanced("\n".join(line for line in lines if not _is_error_text(line)))
        if problem:
            found.append(problem)
    # ``parse(...).find()`` names a method chained to a call (:func:`~.failures.chained_behaviour`): no value
    uncut = _CHAINED_NAME.sub("", text)
    if re.search(r"\.\.\.['\"\])}]|\u2026|\.\.\.`", uncut) or any("..." in s for s in spans
                                                               if not _CHAINED_NAME.fullmatch(f"`{s}`")):
        found.append("a value cut short ('...')")
    if re.search(r" at 0x[0-9a-fA-F]{4,}", text):  # `<object at 0x…>`, `<function f at 0x…>`: another each run
        found.append("a memory address instead of a value")
    if text.strip() and not re.search(r"[.!?)`\"'\u201d:]$|```$", text.strip()):
        found.append("the text stops mid-sentence")
    if re.search(r"\{[a-z_]+\}", _SPAN.sub("", _FENCE.sub("", text))):
        found.append("an unfilled {placeholder}")
    return found
