"""User-style bug reports written from failing behaviour.

:func:`write_report` turns a broken test into what a user would file: the public function or method
that misbehaves, a concrete call (the test's call with its parameters filled in, or a few lines to
reproduce it), what came back and what was expected, read from pytest's own output
(:mod:`~termgym.factory.swesynth.failures`). The wording varies: the structure (a paragraph, titled
sections, an interpreter session, a short list), the opening and the closing are chosen from the task's
seed (an opening is a plain complaint or what the user was doing and what went wrong; an
interpreter session ends an exception's run with its last traceback line). Every bug of a multi-bug
task gets a runnable example of its own: its imports, the statements its test builds the input with
and the call. Every draft goes through :func:`~termgym.factory.swesynth.report_check.check_report`; a draft that
fails is replaced by another wording or another failing test, and when none passes
:class:`ReportError` says why (the generator then drops the task).

Given a runner (``run``: each example on the clean and the buggy tree, :data:`ExampleRunner`), each
example is stated as it runs (:func:`complete_from_runs`: the buggy outcome with its message, the
clean value, exception or type as what should happen) and a draft passes only when every example
shows what its text claims (:func:`check_examples`). :func:`compose_report` is the wording step
alone, which :mod:`~termgym.factory.swesynth.report_rewrite` uses to word a stored report again.

:func:`write_report_llm` asks a model through an OpenAI-compatible endpoint instead; its answer must
pass the same checker.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.failures import (
    Failure,
    chained_behaviour,
    is_literal_repr,
    only_what_the_call_reads,
    read_failure,
    test_names,
    without_expected,
)
from termgym.factory.swesynth.report_check import (
    RULES,
    LeakError,
    ReportError,
    banned_identifiers,
    check_no_leak,
    check_report,
    find_leaks,
)
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.repro import first_call

__all__ = ["RULES", "ExampleRunner", "ExampleRuns", "LeakError", "ReportError", "banned_identifiers", "check_examples",
           "check_no_leak", "check_report", "complete_from_runs", "compose_report", "find_leaks", "write_report",
           "write_report_llm"]

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
#: A feature request (a release-history task whose tests exercise something the older release did
#: not have): it asks for the behaviour and never calls the current one a bug.
_OPEN_REQUEST = [
    "Feature request: it would be great if `{b}` supported this.",
    "Could `{b}` support the following?",
    "I'd like to use `{b}` like this, but it is not supported yet.",
    "It would help me a lot if `{b}` handled this case.",
    "Would you consider extending `{b}` to cover this?",
]
_REQUEST_CLOSINGS = ["", "Thanks for considering it!", "Would you accept this?", "Happy to try it out.",
                     "Let me know if you need more details."]
_STRUCTURES = ("paragraph", "sections", "session", "list")
#: What the user was doing when it happened: an opening is one of these and a clause below, or one
#: of the sentences above alone. Generic on purpose: the writer knows the call, not the user's work.
_CONTEXTS = [
    "While writing a small script", "While porting some older code", "In one of our batch jobs",
    "During a refactor of our own code", "While trying the library out", "On a fresh install",
    "In a notebook this morning", "While cleaning up a helper module", "While upgrading a service",
    "While reviewing a colleague's change", "In a command-line tool I maintain", "While building a prototype",
    "While wiring this into a web backend", "During some exploratory work", "While moving a job to a new machine",
    "While replacing a hand-written helper with this library",
]
_CLAUSE_WRONG = [
    "I noticed that `{b}` gives a wrong result", "`{b}` gave me a result I cannot explain",
    "I got an unexpected value back from `{b}`", "`{b}` returned something other than what I expected",
    "I ran into what looks like a bug in `{b}`", "I found a case where `{b}` is off",
    "I tripped over a wrong result from `{b}`", "I noticed `{b}` does not do what I expect",
]
_CLAUSE_ERROR = [
    "`{b}` raised `{e}` on me", "I hit an unexpected `{e}` in `{b}`", "`{b}` blew up with `{e}`",
    "I got `{e}` from `{b}` on input that looks fine to me", "`{b}` crashed with `{e}`",
    "a call to `{b}` ended in `{e}`", "I keep getting `{e}` out of `{b}`",
]
_CLAUSE_NO_RAISE = [
    "I noticed `{b}` accepts input it should refuse", "`{b}` let some invalid input through",
    "`{b}` did not complain about input I expected it to reject", "I found that `{b}` takes bad input without an error",
]
_MORE_CLOSINGS = ["Thanks!", "Any pointers appreciated.", "Thanks in advance.", "I can share more of my setup if that helps.",
                  "Is this a known issue?", "I'd appreciate a look when you have time.", "Cheers.",
                  "Thanks for the great library!", "I'm happy to try a patch if you point me in the right direction.",
                  "I worked around it for now, but it would be nice to have this fixed.",
                  "Let me know if there is anything else I can check."]


def _opening(kind: str, f: Failure, opening: int) -> str:
    """The first sentence: a fixed complaint, or what the user was doing and what went wrong."""
    fixed = {"wrong": _OPEN_WRONG, "error": _OPEN_ERROR, "no-raise": _OPEN_NO_RAISE}[kind]
    clauses = {"wrong": _CLAUSE_WRONG, "error": _CLAUSE_ERROR, "no-raise": _CLAUSE_NO_RAISE}[kind]
    fields = {"b": f.behaviour, "e": f.error[0] if f.error else ""}
    if opening % 2 == 0:  # half plain complaints, half with what the user was doing
        return fixed[(opening // 2) % len(fixed)].format(**fields)
    pick = (opening // 2) % (len(clauses) * len(_CONTEXTS))
    clause = clauses[pick % len(clauses)].format(**fields)
    return f"{_CONTEXTS[pick // len(clauses)]}, {clause}."


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
                  if msg and not re.search(r"[`\u201c\u201d]", msg) else "")
        return [f"it raises `{kind}`{detail}", f"I get {_article(kind)} `{kind}`{detail}"][style % 2]
    if f.relation == "raises":
        return ["it returns normally without raising an error", "it goes through without complaint"][style % 2]
    return [f"I get `{f.observed}`", f"it returns `{f.observed}`", f"the result comes back as `{f.observed}`"][style % 3]


def _expected_np(f: Failure) -> str:
    """What should have happened, as a noun phrase (`` `'credit'` ``, ``a value below `3` ``)."""
    if f.relation == "raises":
        msg = f.expected_message
        detail = f" with the message \u201c{msg}\u201d" if msg and not re.search(r"[`\u201c\u201d]", msg) else ""
        return f"{_article(f.expected_error or '')} `{f.expected_error}`{detail}"
    if f.error is not None and f.expected is None:
        if f.expected_type:  # the clean result is too long to quote: its type, at least
            return f"{_article(f.expected_type)} `{f.expected_type}` back, not `{f.error[0]}`"
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


def _expected(f: Failure, style: int, request: bool = False) -> str:
    """What should have happened, as a sentence (``request``: what the feature should do)."""
    np = _expected_np(f)
    if request:
        if f.relation == "raises":
            return [f"It should refuse that input with {np}.", f"I would expect it to reject the input with {np}."][style % 2]
        return [f"Ideally it should give {np}.", f"I would expect {np} here.",
                f"Once supported, it should return {np}."][style % 3]
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
        elif f.error is not None and f.error[1] and not re.search(r"[`\u201c\u201d]", f.error[1]):
            body += f"\n{f.error[0]}: {f.error[1]}"  # the last line of the traceback the interpreter prints
        return f"```python\n{body}\n```"
    # a blank line after a block (a helper function), as it would be written in a file
    return "```python\n" + "\n".join(line + "\n" if "\n" in line else line for line in _lines(f)) + "\n```"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


#: Leads of one more example of the same bug, and of another bug's example (a lead ends with a colon:
#: it belongs to the code block after it).
_SAME_LEADS = ["The same happens here:", "Another example:", "It is not only that input:", "A second input shows it too:",
               "Here is one more case:"]
_FURTHER_LEADS = ["There is a second problem, too, in `{b}`:", "Separately, `{b}` misbehaves as well:",
                  "While narrowing this down I noticed that `{b}` is off too:",
                  "Something else also looks wrong, in `{b}`:", "I also ran into a separate problem with `{b}`:",
                  "A second issue shows up in `{b}`:"]
_LATER_LEADS = ["And one more, in `{b}`:", "There is a third problem as well, in `{b}`:",
                "Finally, `{b}` also misbehaves:"]


def _said(g: Failure, style: int) -> str:
    """What an example after the first gives and what it should, in a sentence."""
    if _kind(g) == "wrong":
        return [f"I get `{g.observed}` instead of {_expected_np(g)}.",
                f"It gives `{g.observed}`, where I expected {_expected_np(g)}.",
                f"This returns `{g.observed}`; it should give {_expected_np(g)}."][style % 3]
    return f"{_capital(_observed(g, style))}, where I expected {_expected_np(g)}."


def _another(g: Failure, style: int, lead: str) -> list[str]:
    """One more example, as its own runnable block (imports and setup included), and its outcome."""
    note = _private_note(g)
    return [f"{lead}\n\n{_repro(g)}", _said(g, style)] + ([note] if note else [])


def _private_note(f: Failure) -> str:
    """Why an example calls a private name of the project (it is what the failing call goes
    through; the user says so), or ``""`` when it calls only public names."""
    from termgym.factory.swesynth.examples import Example, private_names

    names = sorted(private_names(Example("\n".join(_lines(f)) + "\n", "")))
    if not names:
        return ""
    kind = "module" if any(re.search(rf"\bimport\b.*\b{re.escape(names[0])}\b|\.{re.escape(names[0])}\b import", line)
                           for line in f.imports) else "helper"
    return (f"I know `{names[0]}` is an internal {kind}, but it is the smallest piece of code where I can show "
            "the problem.")


def render(f: Failure, *, structure: str, opening: int, closing: int, style: int,
           second: Failure | None = None, more: Sequence[Failure] = (), request: bool = False) -> str:
    """One wording of a report about ``f`` (and one more example ``second``; ``more``: the symptoms
    of the task's other bugs, one sentence each). ``request`` words it as a feature request: what
    the user would like the call to do, and what it does today, never that it is broken."""
    kind = _kind(f)
    first = (_OPEN_REQUEST[opening % len(_OPEN_REQUEST)].format(b=f.behaviour) if request
             else _opening(kind, f, opening))
    # a repro that needs imports is shown as code, imports included, so it runs as written
    inline = not f.setup and not f.imports and len(f.call or "") <= 80
    parts = [first]

    def observed() -> str:  # a request says what happens today before what it wants
        return f"Right now {_observed(f, style)}" if request else _capital(_observed(f, style))

    if structure == "paragraph":
        if inline:
            if request:
                lead = ["I'd like to call", "I'd like to write", "What I have in mind is", "Say I call"][style % 4]
                parts.append(f"{lead} `{f.call}`, but right now {_observed(f, style)}. {_expected(f, style, True)}")
            else:
                lead = ["When I call", "Calling", "If I run", "With"][style % 4]
                parts.append(f"{lead} `{f.call}`, {_observed(f, style)}. {_expected(f, style)}")
        else:
            parts.append(("What I'd like to do:" if request else "Here is a short example:") + "\n\n" + _repro(f))
            parts.append(f"{observed()}. {_expected(f, style, request)}")
    elif structure == "sections":
        titles = (("**What I'd like to do**", "**What happens now**", "**What I would expect**") if request
                  else ("**Steps to reproduce**", "**Actual behaviour**", "**Expected behaviour**"))
        parts += [f"{titles[0]}\n\n" + _repro(f), f"{titles[1]}\n\n{_capital(_observed(f, style))}.",
                  f"{titles[2]}\n\n{_expected(f, style, request)}"]
    elif structure == "session":
        parts.append((["What I tried:", "A minimal example:", "Here is what I tried in the interpreter:"] if request
                      else ["To reproduce:", "A minimal example:", "Here is what I see in the interpreter:"])[style % 3]
                     + "\n\n" + _repro(f, session=True))
        if kind == "wrong":
            parts.append(_expected(f, style, request))
        else:
            parts.append(f"{observed()}. {_expected(f, style, request)}")
    else:  # list
        result = f"`{f.observed}`" if kind == "wrong" else _observed(f, style)
        head = (["Details:", "What I have in mind:", "The case:"] if request
                else ["Details:", "What I see:", "Reproduction:"])[style % 3]
        actual = "Today I get" if request else "Actual"
        if inline:
            parts.append(f"{head}\n\n- Input: `{f.call}`\n- {actual}: {result}\n- Expected: {_expected_np(f)}")
        else:
            parts.append(f"{head}\n\n{_repro(f)}\n\n- {actual}: {result}\n- Expected: {_expected_np(f)}")
    note = _private_note(f)
    if note:
        parts.append(note)
    if second is not None:
        parts += _another(second, style, _SAME_LEADS[style % len(_SAME_LEADS)])
    for i, g in enumerate(more):  # each further bug: a runnable example of its own
        leads = _FURTHER_LEADS if i == 0 else _LATER_LEADS
        parts += _another(g, style + i, leads[(style + i) % len(leads)].format(b=g.behaviour))
    closings = _REQUEST_CLOSINGS if request else _CLOSINGS + _MORE_CLOSINGS
    if closings[closing % len(closings)]:
        parts.append(closings[closing % len(closings)])
    return "\n\n".join(p.strip() for p in parts) + "\n"


# -- choosing what to report ------------------------------------------------------------------------------


def _rng(patch: str, seed: int | str | None) -> random.Random:
    digest = hashlib.sha256(f"{seed}\0{patch}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def usable_failures(target_tests: Sequence[str], messages: dict[str, str], repo: str | Path | None,
                    limit: int = 40, source_dirs: Sequence[str] = (), runs: bool = False) -> list[Failure]:
    """The failing tests that give a report its facts (call, behaviour, outcome), best first:
    one-liners before repros with setup; one per distinct call and outcome. A test whose call needs
    something a user would not have (a fixture, ``self``, a loop variable) is left out.

    ``runs``: the writer runs every example on the clean and the buggy tree (:class:`ExampleRuns`),
    so a test whose failure text does not give the outcome and the expected one (pytest cut the
    values short, the expected value is a variable the test built, a helper's bare ``assert``) still
    gives an example, its outcomes left to the runs (:func:`~termgym.factory.swesynth.failures.without_expected`);
    such examples come after those whose test states the facts."""
    seen, found, by_runs = set(), [], set()
    for test in list(target_tests)[:limit]:
        f = read_failure(test, messages.get(test, ""), repo)
        # an expected "value" that is a variable of the test (``expected``) tells a reader nothing
        leftover = bool(f.expected and re.fullmatch(r"[a-z_]\w*", f.expected) and f.expected not in ("inf", "nan"))
        stated = f.usable and not leftover
        by_run = not stated and runs and bool(f.call and f.behaviour) and f.relation != "raises"
        if by_run:
            f = without_expected(f)
        elif stated and f.expected is not None and is_literal_repr(f.expected):
            f = only_what_the_call_reads(f)  # the value is quoted: the variable the test built it in is not needed
        # read once the example's setup is trimmed: a test's ``self`` only its expected value used is gone
        uses_self = any(re.search(r"\bself\b", line) for line in [*f.setup, f.call or ""]
                        if not line.startswith(("class ", "def ")))  # a helper class may use self
        key = (f.call, f.observed, f.error)
        if (stated or by_run) and f.self_contained and not uses_self and key not in seen:
            if repo is not None and not _add_imports(f, Path(repo), source_dirs):
                continue  # the repro needs a name that exists only in the test suite
            seen.add(key)
            found.append(f)
            if by_run:
                by_runs.add(id(f))
    # public calls first (a private one only when no test shows the bug through the public API),
    # then those whose failure says what happened, then what should come back, then the shortest
    return sorted(found, key=lambda f: (bool(_private_note(f)), id(f) in by_runs,
                                        f.error is not None and f.expected is None, len(f.setup), len(f.call or "")))


def traced_examples(target_tests: Sequence[str], run: Any, repo: Path, source_dirs: Sequence[str] = (),
                    limit: int = 3) -> list[Failure]:
    """Examples from the calls the first ``limit`` failing tests make into the project as they run
    on the buggy tree (``run.calls(tests)``, :meth:`~termgym.factory.swesynth.audit.SandboxExamples.calls`),
    for tests whose source shows no concrete call (their cases come from data files;
    :mod:`~termgym.factory.swesynth.traced`); each with the imports a user needs, its outcome left to
    its runs. One per call, public calls first; none when that run fails in the sandbox (the report
    then fails for the reason the tests' source gave)."""
    from termgym.factory.swesynth.traced import traced_failures
    from termgym.sandbox.base import SandboxError

    tests = list(target_tests)[:limit]
    try:
        recorded = run.calls(tests)
    except SandboxError:
        return []
    found: dict[str, Failure] = {}
    for test in tests:
        for f in traced_failures(test, recorded.get(test, []), repo):
            if f.call and f.call not in found and _add_imports(f, repo, source_dirs):
                found[f.call] = f
    return sorted(found.values(), key=lambda f: (bool(_private_note(f)), len(f.call or "")))


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


#: Runs an example's code on the clean and on the buggy tree: ``(clean outcome, buggy outcome)``, each
#: ``{"raised": type name or None, "value": repr or None, "message": ...}`` or ``None`` when it printed
#: nothing (:data:`~termgym.factory.swesynth.quality._RUNNER`'s outcomes).
ExampleRunner = Callable[[str], "tuple[dict[str, Any] | None, dict[str, Any] | None]"]


def _quotable(value: str | None) -> bool:
    """A repr a report can quote as a value: short, complete, parseable, no address."""
    if not value or len(value) > 100 or "\n" in value or " at 0x" in value or "..." in value or "\u2026" in value:
        return False  # a repr over lines (a pretty-printed mapping) is no value for backticks either
    try:
        pyparse.parse(value, mode="eval")
    except (SyntaxError, ValueError):
        return False
    return True


def _message(text: str | None) -> str:
    """An exception message a report can quote (``""``: none, or one it cannot): a message of several
    lines is quoted by its first (what a traceback's last line shows of it)."""
    text = (text or "").strip().split("\n", 1)[0].strip()
    if not text or len(text) > 120 or re.search(r"[`\u201c\u201d]| at 0x[0-9a-fA-F]|\.\.\.|\u2026", text):
        return ""
    return text


def complete_from_runs(f: Failure, clean: dict[str, Any] | None, buggy: dict[str, Any] | None) -> bool:
    """Set ``f``'s outcome to what its example does when run: on the buggy tree what comes back (a
    value, or the exception and its message), on the clean tree what should (a value, or the
    exception a valid refusal raises). ``False`` when the runs show no difference, or a value the
    report would have to quote cannot be quoted; ``f`` is then left as it was."""
    if not clean or not buggy or clean == buggy or (clean.get("raised") and clean.get("raised") == buggy.get("raised")):
        return False
    if buggy.get("unstable") and not buggy.get("raised"):
        return False  # what the buggy code gives changes from run to run: nothing to quote
    if clean.get("unstable"):  # the clean value changes from run to run (a clock): its type at most
        clean = {"raised": clean.get("raised"), "value": None, "type": clean.get("type")}
        if not clean["raised"] and not buggy.get("raised"):
            return False
    if not buggy.get("raised") and not clean.get("raised") and not _quotable(buggy.get("value")):
        return False
    if not clean.get("raised") and not _quotable(clean.get("value")) and not buggy.get("raised"):
        return False
    if buggy.get("raised"):
        f.error, f.observed = (buggy["raised"], _message(buggy.get("message"))), None
    else:
        f.error, f.observed = None, buggy.get("value")
    if clean.get("raised"):
        f.relation, f.expected, f.expected_error = "raises", None, clean["raised"]
        f.expected_message = _message(clean.get("message")) or None
    elif _quotable(clean.get("value")):
        f.relation, f.expected, f.expected_error = "==", clean["value"], None
    else:  # the buggy tree raises; the clean tree's result is no value a report can quote: its type
        f.relation, f.expected, f.expected_error = "returns", None, None
        kind = clean.get("type")
        f.expected_type = kind if kind and re.fullmatch(r"[A-Za-z_]\w*", kind) and kind != "NoneType" else None
    return True


def _calls_project(f: Failure, packages: set[str]) -> bool:
    """Whether ``f``'s example imports from the project (a standard-library call alone is no symptom)."""
    if not packages:
        return True
    return any((m := re.match(r"(?:from|import) ([\w]+)", line)) and m.group(1) in packages for line in f.imports)


def check_examples(draft: str, run: ExampleRunner) -> list[str]:
    """Run every example of ``draft`` and say which does not show what its text claims (empty: all do)."""
    from termgym.factory.swesynth.examples import examples, shows_claim

    found = examples(draft)
    if not found:
        return ["example: the report shows no example"]
    return [f"example: {i + 1} of {len(found)}: {why}" for i, e in enumerate(found)
            if (why := shows_claim(e, *run(e.code)))]


def changed_names(patch: str, repo: str | Path | None) -> set[str]:
    """The names of the functions and methods ``patch`` changes, read from the clean tree ``repo``
    (none without it, or where the tree does not hold what the patch changes)."""
    from termgym.factory.swesynth.behaviour_record import patch_functions

    if repo is None:
        return set()
    try:
        return {qual.rsplit(".", 1)[-1] for _, qual in patch_functions(patch, repo)}
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return set()


def write_report(target_tests: Sequence[str], messages: dict[str, str], patch: str, *,
                 repo: str | Path | None = None, seed: int | str | None = None, tries: int = 24,
                 groups: Sequence[Sequence[str]] | None = None, source_dirs: Sequence[str] = (),
                 request: bool = False, run: ExampleRunner | None = None, avoid: Collection[str] = ()) -> str:
    """A user-style bug report for a bug whose patch is ``patch``, passing :func:`check_report`
    (``request``: a feature request instead, for a task whose tests exercise a new feature).

    ``target_tests`` are the broken tests' ids, ``messages`` their failure texts (from the junit
    report), ``repo`` the repository root (to read the tests' source) and ``seed`` picks the wording
    (with the patch). Drafts are tried over failing tests and wordings, at most ``tries`` of them;
    :class:`ReportError` (a ``ValueError``) when none passes. ``groups`` (a multi-bug task: the
    tests each bug breaks on its own) makes the report show every bug: the primary example comes
    from the first bug, then each other bug gets a runnable example of its own (its imports and
    the statements its test builds its input with, its outcome and the expected one).

    ``run`` (:data:`ExampleRunner`) runs an example on the clean and the buggy tree: each example
    is then stated as it runs (the buggy outcome with the exception's message, and the clean
    outcome as the expected value or exception, where the test alone says only "a normal
    result"), an example whose runs show no difference is not used, and a draft passes only when
    every one of its examples shows what its text claims (:func:`check_examples`).

    A ``run`` that can also record the calls the failing tests make into the project as they run
    (its ``calls``, :meth:`~termgym.factory.swesynth.audit.SandboxExamples.calls`) gives examples
    where what the tests' source shows gives no report (:func:`traced_examples`: a suite that reads
    its cases from data files, or whose statically read examples all fail the checks).

    ``avoid``: first repro calls (:func:`~termgym.tasks.swesynth.repro.first_call`) the report must
    not open with (calls other tasks of the project already open with): the primary example is then
    taken from a failing test whose example opens another way.
    """
    if not target_tests:
        raise ValueError("write_report needs at least one failing test")
    failures = usable_failures(target_tests, messages, repo, source_dirs=source_dirs, runs=run is not None)
    runs = ExampleRuns(run)
    traceable = getattr(run, "calls", None) is not None and repo is not None
    try:
        if not failures:
            raise ReportError("no failing test shows a concrete call, its outcome and the expected one")
        return _report_from(failures, target_tests, patch, repo=repo, seed=seed, tries=tries, groups=groups,
                            source_dirs=source_dirs, request=request, runs=runs, avoid=avoid)
    except ReportError:
        # what the tests' source shows gives no report: the calls they make as they run may
        traced = traced_examples(target_tests, run, Path(repo), source_dirs) if traceable else []
        if not traced:
            raise
    return _report_from(traced, target_tests, patch, repo=repo, seed=seed, tries=tries, groups=groups,
                        source_dirs=source_dirs, request=request, runs=runs, avoid=avoid)


def _report_from(failures: list[Failure], target_tests: Sequence[str], patch: str, *, repo: str | Path | None,
                 seed: int | str | None, tries: int, groups: Sequence[Sequence[str]] | None,
                 source_dirs: Sequence[str], request: bool, runs: ExampleRuns, avoid: Collection[str]) -> str:
    """:func:`write_report` from the examples ``failures`` gives (read from the tests' source, or
    from the calls they make as they run)."""
    methods = changed_names(patch, repo)
    failures = [replace(f, behaviour=chained) if (chained := chained_behaviour(f.call, f.behaviour, methods)) else f
                for f in failures]
    from termgym.factory.swesynth.quality import project_packages

    packages = project_packages(Path(repo), source_dirs) if repo is not None else set()
    more: list[Failure] = []
    if groups is not None and len(groups) > 1:
        by_test = {f.test: f for f in failures}
        firsts = [next((by_test[t] for t in group if t in by_test), None) for group in groups]
        if any(f is None for f in firsts):
            raise ReportError("a bug of the combination breaks no test whose call a report can show")
        failures = [f for f in failures if f.test in set(groups[0])]
        # another bug's symptom: a call of its own that calls the project (the same call and outcome
        # as the main example, said again, tells the reader nothing new)
        shown = {f.call for f in failures}
        for i, group in enumerate(groups[1:], 2):
            candidates = sorted({id(by_test[t]): by_test[t] for t in group if t in by_test}.values(),
                                key=lambda g: (g.call in shown, not _calls_project(g, packages)))[:6]
            pick = next((g for g in candidates if runs.ready(g)), None)
            if pick is None:
                raise ReportError(f"no example of bug {i} of {len(groups)} shows its difference when run")
            more.append(pick)
    return compose_report(failures, more, patch=patch, target_tests=target_tests, repo=repo, seed=seed, tries=tries,
                          request=request, runs=runs, avoid=avoid)


def _terse(f: Failure) -> Failure:
    """``f`` without exception messages (what a draft leaves out when a message may leak)."""
    return replace(f, error=(f.error[0], "") if f.error else None, expected_message=None)


class ExampleRuns:
    """The runs of a report's examples (``run``: :data:`ExampleRunner`, or ``None``: no runs), each
    code run once, and which failures are stated as their runs show (:func:`complete_from_runs`)."""

    def __init__(self, run: ExampleRunner | None) -> None:
        self.run = run
        self._runs: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
        self._judged: dict[int, bool] = {}

    def __call__(self, code: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        key = code.strip()
        if key not in self._runs:
            self._runs[key] = self.run(key + "\n") if self.run is not None else (None, None)
        return self._runs[key]

    def prefill(self, failures: Sequence[Failure]) -> None:
        """Run the examples of ``failures`` at once, where the runner can (its ``many``)."""
        many = getattr(self.run, "many", None)
        if many is not None:
            many(["\n".join(_lines(f)) for f in failures])

    def ready(self, f: Failure) -> bool:
        """Whether ``f`` can be an example: stated as its runs show, and they differ (always
        ``True`` without a runner: the failure's own facts are stated)."""
        if self.run is None:
            return True
        if id(f) not in self._judged:
            self._judged[id(f)] = complete_from_runs(f, *self("\n".join(_lines(f))))
        return self._judged[id(f)]


def _message_names(failures: Sequence[Failure | None]) -> set[str]:
    """The identifiers of the exception messages ``failures`` quote (their buggy outcomes)."""
    return {name for f in failures if f is not None and f.error is not None
            for name in re.findall(r"[A-Za-z_]\w*", f.error[1] or "")}


def _first_repro_call(f: Failure) -> str | None:
    """The first call of the repro ``f``'s example makes (as :func:`~termgym.tasks.swesynth.repro.first_call` reads it)."""
    return first_call("```python\n" + "\n".join(_lines(f)) + "\n```")


def compose_report(failures: Sequence[Failure], more: Sequence[Failure] = (), *, patch: str,
                   target_tests: Sequence[str], repo: str | Path | None = None, seed: int | str | None = None,
                   tries: int = 24, request: bool = False, runs: ExampleRuns | None = None,
                   avoid: Collection[str] = ()) -> str:
    """Word a report from its examples: ``failures`` of the first bug, best first (the primary
    example, and perhaps one more of the same bug), and one example of each further bug (``more``).
    The wording is drawn from ``seed`` and ``patch``; a draft must pass :func:`check_report` and,
    with ``runs``, show what it claims in every example (:func:`check_examples`). ``avoid``: first
    repro calls a draft must not open with (a primary example that opens with one is not used).
    :class:`ReportError` when none of ``tries`` drafts does."""
    runs = runs or ExampleRuns(None)
    rng = _rng(patch, seed)
    avoid = frozenset(avoid)
    pool = list(failures)[:8]
    if avoid:  # every failing test may give the opening, not only the best eight
        pool = [f for f in failures if _first_repro_call(f) not in avoid][:8]
    primaries: list[Failure] = []
    for f in pool:
        if runs.ready(f):
            primaries.append(f)
        if len(primaries) == 4:
            break
    if not primaries:
        if avoid and not pool:
            raise ReportError(f"every failing test's example opens with a call other tasks already open with "
                              f"({len(avoid)} such calls)")
        raise ReportError("no failing test's call shows the difference when run on the clean and the buggy code")
    last: list[str] = []
    for n in range(tries):
        f = primaries[(n // 3) % len(primaries)]  # three wordings, then the next failing test
        if n >= tries // 2:
            f = _terse(f)  # later drafts leave the messages out (one may name what the fix changes)
        others = [g for g in failures if g is not f and len(g.setup) <= 2 and g.call != f.call
                  and len(g.call or "") <= 80]
        second = None
        if others and rng.random() < 0.5:
            second = next((g for g in others[:3] if runs.ready(g) and _kind(g) == _kind(f) and g.call != f.call), None)
        said = {_symptom_key(f)}
        extra = []
        for g in more:  # a symptom the report already gives is not said twice
            if _symptom_key(g) not in said:
                said.add(_symptom_key(g))
                extra.append(_terse(g) if n >= tries // 2 else g)
        if second is not None and n >= tries // 2:
            second = _terse(second)
        draft = render(f, structure=rng.choice(_STRUCTURES), opening=rng.randrange(10**6),
                       closing=rng.randrange(10**6), style=rng.randrange(60), second=None if more else second,
                       more=extra, request=request)
        # A message the buggy tree prints when the report's own example runs is no leak: the reader
        # sees it by running the example (check_examples holds the quote to what the run printed).
        shown = _message_names([f, second, *extra]) if runs.run is not None else set()
        problems = check_report(draft, target_tests=target_tests, patch=patch, repo=repo, visible=shown)
        if not problems and avoid and first_call(draft) in avoid:
            problems = [f"its repro opens with {first_call(draft)!r}, which other tasks already open with"]
        if not problems and runs.run is not None:
            problems = check_examples(draft, runs)
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
