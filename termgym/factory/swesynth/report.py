"""User-style bug reports written from failing behaviour.

:func:`write_report` turns a broken test into what a user would file: the public function or method
that misbehaves, a concrete call (the test's call with its parameters filled in, or a few lines to
reproduce it), what came back and what was expected, read from pytest's own output
(:mod:`~termgym.factory.swesynth.failures`). The wording varies: the structure (a paragraph, titled
sections, an interpreter session, a short list), the opening and the closing are chosen from the task's
seed. Every draft goes through :func:`~termgym.factory.swesynth.report_check.check_report`; a draft that
fails is replaced by another wording or another failing test, and when none passes
:class:`ReportError` says why (the generator then drops the task).

:func:`write_report_llm` asks a model through an OpenAI-compatible endpoint instead; its answer must
pass the same checker.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from pathlib import Path

from termgym.factory.swesynth.failures import Failure, read_failure, test_names
from termgym.factory.swesynth.report_check import (
    RULES,
    LeakError,
    ReportError,
    banned_identifiers,
    check_no_leak,
    check_report,
    find_leaks,
)

__all__ = ["RULES", "LeakError", "ReportError", "banned_identifiers", "check_no_leak", "check_report", "find_leaks",
           "write_report", "write_report_llm"]

# -- the wording ----------------------------------------------------------------------------------------

_OPEN_WRONG = [
    "`{b}` returns the wrong result for some inputs.",
    "I think `{b}` is broken.",
    "Hi! I ran into a problem with `{b}`.",
    "Something looks off in `{b}`.",
    "`{b}` does not behave the way its documentation describes.",
    "I'm getting an unexpected result from `{b}`.",
]
_OPEN_ERROR = [
    "`{b}` crashes with `{e}` on input that looks valid to me.",
    "I hit an unexpected `{e}` from `{b}`.",
    "Hi, `{b}` raises `{e}` where I expected a result.",
    "`{b}` fails with `{e}` for me.",
]
_OPEN_NO_RAISE = [
    "`{b}` accepts input it should refuse.",
    "`{b}` silently accepts bad input.",
    "I expected `{b}` to reject some input, but it goes through.",
]
_CLOSINGS = ["", "Thanks for taking a look!", "Let me know if you need more details.", "Could you take a look?",
             "Happy to test a fix."]
_STRUCTURES = ("paragraph", "sections", "session", "list")


def _kind(f: Failure) -> str:
    if f.error is not None:
        return "error"
    return "no-raise" if f.relation == "raises" else "wrong"


def _observed(f: Failure, style: int) -> str:
    """What happened, as a clause (``I get `'Credit'```)."""
    if f.error is not None:
        kind, msg = f.error
        # one style in four leaves the message out (it may name internals the checker refuses)
        detail = (f" with the message \u201c{msg}\u201d"
                  if msg and style % 4 != 3 and not re.search(r"[`\u201c\u201d]", msg) else "")
        return [f"it raises `{kind}`{detail}", f"I get {_article(kind)} `{kind}`{detail}"][style % 2]
    if f.relation == "raises":
        return ["it returns normally without raising an error", "it goes through without complaint"][style % 2]
    return [f"I get `{f.observed}`", f"it returns `{f.observed}`", f"the result comes back as `{f.observed}`"][style % 3]


def _expected_np(f: Failure) -> str:
    """What should have happened, as a noun phrase (`` `'credit'` ``, ``a value below `3` ``)."""
    if f.relation == "raises":
        return f"{_article(f.expected_error or '')} `{f.expected_error}`"
    if f.error is not None and f.expected is None:
        return f"a normal result, not `{f.error[0]}`"
    exp = f.expected
    if f.relation in ("truthy", "falsy"):
        want = f.relation == "truthy"
        if f.observed in ("True", "False"):
            return f"`{want}`"
        return "a true value" + f" rather than `{f.observed}`" if want else f"an empty or false result, not `{f.observed}`"
    return {
        "==": f"`{exp}`", "is": f"`{exp}`", "!=": f"anything but `{exp}`", "is not": f"anything but `{exp}`",
        "<": f"a value below `{exp}`", "<=": f"a value of at most `{exp}`", ">": f"a value above `{exp}`",
        ">=": f"a value of at least `{exp}`", "in": f"a result that contains `{exp}`",
        "not in": f"a result without `{exp}`", "returns": f"`{exp}`",
    }.get(f.relation or "==", f"`{exp}`")


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _expected(f: Failure, style: int) -> str:
    """What should have happened, as a sentence."""
    np = _expected_np(f)
    if np.startswith("a normal result"):
        return f"I expected {np}."
    if f.relation == "raises":
        return [f"It should raise {np} instead.", f"I expected it to refuse the input with {np}."][style % 2]
    return [f"I expected {np}.", f"It should give {np}.", f"The expected result is {np}."][style % 3]


def _lines(f: Failure) -> list[str]:
    return [*f.imports, *f.setup, f.call or ""]


def _session_lines(f: Failure) -> list[str]:
    """The repro as typed at the interpreter: ``>>>`` for each statement, ``...`` for the lines of a
    block and an empty ``...`` closing it."""
    out = []
    for stmt in _lines(f):
        first, *rest = stmt.splitlines()
        out.append(f">>> {first}")
        if rest:
            # no blank line inside the block: the interpreter would end it there
            out += [f"... {line}" for line in rest if line.strip()] + ["..."]
    return out


def _repro(f: Failure, session: bool = False) -> str:
    if session:
        body = "\n".join(_session_lines(f))
        if _kind(f) == "wrong":
            body += f"\n{f.observed}"
        return f"```python\n{body}\n```"
    # a blank line after a block (a helper function), as it would be written in a file
    return "```python\n" + "\n".join(line + "\n" if "\n" in line else line for line in _lines(f)) + "\n```"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _second(g: Failure, style: int) -> str:
    """One more example in a sentence (only for one-line calls)."""
    if _kind(g) == "wrong":
        return [f"The same happens with `{g.call}`: I get `{g.observed}` instead of {_expected_np(g)}.",
                f"Another example: `{g.call}` gives `{g.observed}`, where I expected {_expected_np(g)}."][style % 2]
    return f"The same happens with `{g.call}`: {_observed(g, style)}, where I expected {_expected_np(g)}."


def _also(g: Failure, style: int) -> str:
    """Another bug's symptom, in one sentence (its call shown in full)."""
    if _kind(g) == "wrong":
        return f"`{g.behaviour}`: `{g.call}` gives `{g.observed}`, where I expected {_expected_np(g)}."
    return f"`{g.behaviour}`: with `{g.call}`, {_observed(g, style)}, where I expected {_expected_np(g)}."


def render(f: Failure, *, structure: str, opening: int, closing: int, style: int,
           second: Failure | None = None, more: Sequence[Failure] = ()) -> str:
    """One wording of a report about ``f`` (and one more example ``second``; ``more``: the symptoms
    of the task's other bugs, one sentence each)."""
    kind = _kind(f)
    opens = {"wrong": _OPEN_WRONG, "error": _OPEN_ERROR, "no-raise": _OPEN_NO_RAISE}[kind]
    first = opens[opening % len(opens)].format(b=f.behaviour, e=f.error[0] if f.error else "")
    # a repro that needs imports is shown as code, imports included, so it runs as written
    inline = not f.setup and not f.imports and len(f.call or "") <= 80
    parts = [first]
    if structure == "paragraph":
        if inline:
            lead = ["When I call", "Calling", "If I run", "With"][style % 4]
            parts.append(f"{lead} `{f.call}`, {_observed(f, style)}. {_expected(f, style)}")
        else:
            parts.append("Here is a short example:\n\n" + _repro(f))
            parts.append(f"{_capital(_observed(f, style))}. {_expected(f, style)}")
    elif structure == "sections":
        parts += ["**Steps to reproduce**\n\n" + _repro(f), f"**Actual behaviour**\n\n{_capital(_observed(f, style))}.",
                  f"**Expected behaviour**\n\n{_expected(f, style)}"]
    elif structure == "session":
        parts.append(["To reproduce:", "A minimal example:", "Here is what I see in the interpreter:"][style % 3]
                     + "\n\n" + _repro(f, session=True))
        if kind == "wrong":
            parts.append(_expected(f, style))
        else:
            parts.append(f"{_capital(_observed(f, style))}. {_expected(f, style)}")
    else:  # list
        result = f"`{f.observed}`" if kind == "wrong" else _observed(f, style)
        head = ["Details:", "What I see:", "Reproduction:"][style % 3]
        if inline:
            parts.append(f"{head}\n\n- Input: `{f.call}`\n- Actual: {result}\n- Expected: {_expected_np(f)}")
        else:
            parts.append(f"{head}\n\n{_repro(f)}\n\n- Actual: {result}\n- Expected: {_expected_np(f)}")
    if second is not None:
        parts.append(_second(second, style))
    for g in more:
        lead = ["There is a second problem, too.", "Something else also looks wrong."][style % 2]
        parts.append(f"{lead} {_capital(_also(g, style))}")
    if _CLOSINGS[closing % len(_CLOSINGS)]:
        parts.append(_CLOSINGS[closing % len(_CLOSINGS)])
    return "\n\n".join(p.strip() for p in parts) + "\n"


# -- choosing what to report ------------------------------------------------------------------------------


def _rng(patch: str, seed: int | str | None) -> random.Random:
    digest = hashlib.sha256(f"{seed}\0{patch}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def usable_failures(target_tests: Sequence[str], messages: dict[str, str], repo: str | Path | None,
                    limit: int = 40, source_dirs: Sequence[str] = ()) -> list[Failure]:
    """The failing tests that give a report its facts (call, behaviour, outcome), best first:
    one-liners before repros with setup; one per distinct call and outcome. A test whose call needs
    something a user would not have (a fixture, ``self``, a loop variable) is left out."""
    seen, found = set(), []
    for test in list(target_tests)[:limit]:
        f = read_failure(test, messages.get(test, ""), repo)
        key = (f.call, f.observed, f.error)
        uses_self = any(re.search(r"\bself\b", line) for line in [*f.setup, f.call or ""]
                        if not line.startswith(("class ", "def ")))  # a helper class may use self
        # an expected "value" that is a variable of the test (``expected``) tells a reader nothing
        leftover = bool(f.expected and re.fullmatch(r"[a-z_]\w*", f.expected) and f.expected not in ("inf", "nan"))
        if f.usable and f.self_contained and not uses_self and not leftover and key not in seen:
            if repo is not None and not _add_imports(f, Path(repo), source_dirs):
                continue  # the repro needs a name that exists only in the test suite
            seen.add(key)
            found.append(f)
    return sorted(found, key=lambda f: (len(f.setup), len(f.call or "")))


def _symptom_key(f: Failure) -> tuple:
    """What a reader learns from one example: the call and what it gave."""
    return (f.call, f.observed, f.error)


def _add_imports(f: Failure, repo: Path, source_dirs: Sequence[str]) -> bool:
    """Give ``f`` the import lines its repro needs, as its test module imports the names; ``False``
    when a name cannot be imported by a user (a test-suite helper, fixture or constant)."""
    from termgym.factory.swesynth.quality import import_lines, project_packages, read_test_module

    code = "\n".join([*f.setup, f.call or ""])
    try:
        lines = import_lines(code, read_test_module(f.home or f.test, repo), project_packages(repo, source_dirs))
    except SyntaxError:
        return False
    if lines is None:
        return False
    f.imports = lines
    return True


def write_report(target_tests: Sequence[str], messages: dict[str, str], patch: str, *,
                 repo: str | Path | None = None, seed: int | str | None = None, tries: int = 24,
                 groups: Sequence[Sequence[str]] | None = None, source_dirs: Sequence[str] = ()) -> str:
    """A user-style bug report for a bug whose patch is ``patch``, passing :func:`check_report`.

    ``target_tests`` are the broken tests' ids, ``messages`` their failure texts (from the junit
    report), ``repo`` the repository root (to read the tests' source) and ``seed`` picks the wording
    (with the patch). Drafts are tried over failing tests and wordings, at most ``tries`` of them;
    :class:`ReportError` (a ``ValueError``) when none passes. ``groups`` (a multi-bug task: the
    tests each bug breaks on its own) makes the report name one symptom of every bug; the primary
    example comes from the first bug, one sentence each from the others.
    """
    if not target_tests:
        raise ValueError("write_report needs at least one failing test")
    failures = usable_failures(target_tests, messages, repo, source_dirs=source_dirs)
    if not failures:
        raise ReportError("no failing test shows a concrete call, its outcome and the expected one")
    more: list[Failure] = []
    if groups is not None and len(groups) > 1:
        by_test = {f.test: f for f in failures}
        firsts = [next((by_test[t] for t in group if t in by_test), None) for group in groups]
        if any(f is None for f in firsts):
            raise ReportError("a bug of the combination breaks no test whose call a report can show")
        failures = [f for f in failures if f.test in set(groups[0])]
        # another bug's symptom: a call of its own where it has one (the same call and outcome as the
        # main example, said again, tells the reader nothing new)
        shown = {f.call for f in failures}
        more = [next((by_test[t] for t in group if t in by_test and by_test[t].call not in shown), first)
                for group, first in zip(groups[1:], firsts[1:])]
    rng = _rng(patch, seed)
    primaries = failures[:4]
    last: list[str] = []
    for n in range(tries):
        f = primaries[(n // 3) % len(primaries)]  # three wordings, then the next failing test
        others = [g for g in failures if g is not f and not g.setup and g.call != f.call and _kind(g) == _kind(f)
                  and len(g.call or "") <= 80]
        second = others[0] if others and rng.random() < 0.5 else None
        said = {_symptom_key(f)}
        extra = []
        for g in more:  # a symptom the report already gives is not said twice
            if _symptom_key(g) not in said:
                said.add(_symptom_key(g))
                extra.append(g)
        draft = render(f, structure=rng.choice(_STRUCTURES), opening=rng.randrange(60), closing=rng.randrange(60),
                       style=rng.randrange(60), second=None if more else second, more=extra)
        problems = check_report(draft, target_tests=target_tests, patch=patch, repo=repo)
        if not problems:
            return draft
        last = problems
    raise ReportError("no report passed the checker: " + "; ".join(last))


# -- the optional LLM writer -----------------------------------------------------------------------------

_LLM_SYSTEM = (
    "You write bug reports the way a user of a Python library would file them. You only know what the "
    "user saw, given below. Name the function or method in backticks, show the call with its input in "
    "a ```python block that starts with the given imports, say what came back and what you expected "
    "(values in backticks). "
    "Write it in your own words, a few sentences. Never mention tests, test files, test names, pytest, "
    "file names, line numbers or tracebacks, and never guess at the cause or the fix."
)


def _facts(f: Failure) -> str:
    what = (f"raises {f.error[0]}" + (f": {f.error[1]}" if f.error[1] else "") if f.error
            else "returns normally, no error" if f.relation == "raises" else f"returns {f.observed}")
    setup = "; ".join(f.setup)
    imports = "; ".join(f.imports)
    return (f"- function or method: {f.behaviour}\n  call: {f.call}" + (f"\n  imports: {imports}" if imports else "")
            + (f"\n  after: {setup}" if setup else "")
            + f"\n  observed: {what}\n  expected: {_expected_np(f).replace('`', '')}")


def write_report_llm(client, target_tests: Sequence[str], messages: dict[str, str], patch: str, *,
                     repo: str | Path | None = None, seed: int | str | None = None, attempts: int = 2,
                     groups: Sequence[Sequence[str]] | None = None, source_dirs: Sequence[str] = ()) -> str:
    """Ask an OpenAI-compatible model (``client``: :class:`~termgym.factory.swesynth.llm.ChatClient`)
    for the report; an answer failing :func:`check_report` is retried with the problems spelled out,
    and after ``attempts`` failing answers the procedural report is returned instead."""
    if groups is not None and len(groups) > 1:  # the writer that names every bug's symptom
        return write_report(target_tests, messages, patch, repo=repo, seed=seed, groups=groups,
                            source_dirs=source_dirs)
    failures = usable_failures(target_tests, messages, repo, source_dirs=source_dirs)
    if not failures:
        raise ReportError("no failing test shows a concrete call, its outcome and the expected one")
    shown = failures[:2]
    visible = set().union(*(f.names for f in shown))
    seen = visible.union(*(test_names(t, Path(repo) if repo is not None else None) for t in target_tests))
    banned = sorted(banned_identifiers(patch, seen))
    user = "What the user saw:\n" + "\n".join(_facts(f) for f in shown)
    if banned:
        user += f"\nWords you must not use: {', '.join(banned)}."
    chat = [{"role": "system", "content": _LLM_SYSTEM}, {"role": "user", "content": user}]
    for _ in range(attempts):
        answer = client.complete(chat).strip()
        problems = check_report(answer, target_tests=target_tests, patch=patch, repo=repo)
        if answer and not problems:
            return answer + "\n"
        chat += [{"role": "assistant", "content": answer},
                 {"role": "user", "content": "Rewrite it. Problems: " + "; ".join(problems) + "."}]
    return write_report(target_tests, messages, patch, repo=repo, seed=seed, groups=groups, source_dirs=source_dirs)
