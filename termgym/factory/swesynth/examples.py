"""A report's examples: every piece of code it asks a reader to run, and what its text claims of each.

A bug report shows a bug through examples: fenced ``python`` blocks (a script, or an interpreter
session whose ``>>>`` lines are the code and whose other lines are what it printed) and, in older
reports, a call written inline after a lead such as "When I call `...`" or "`f()`: `...` gives".
:func:`examples` finds them all, in order, each with the text that speaks about it (from the
example to the next one; the first also gets the opening, which names the exception).

:func:`claim` reads that text: what the reader is told comes back on the buggy code (a value, or an
exception and perhaps its message) and what should come back (a value, an exception, a relation
such as "a value below `3`", or only "a normal result"). :func:`shows_claim` compares two runs of
the example (the clean tree and the buggy tree, :data:`~termgym.factory.swesynth.quality._RUNNER`'s
outcomes) with that claim: the runs differ, the buggy run gives what the text says it gives, and the
clean run gives what the text says should come back.

The static measures a suite card reports come from here too: names an example uses that it neither
defines, imports nor gets from the built-ins (:func:`undefined_names`), private names of the project
(:func:`private_names`), expectations stated only as "a normal result" (:func:`vague_expectations`),
and the report's opening sentence with its code left out (:func:`opening`), to count the distinct ones.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from termgym.tasks.swesynth import pyparse

_FENCE = re.compile(r"^```[\w-]*[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
#: How the report writer (and a user) introduces a call written inline: "When I call `f(1)`",
#: "- Input: `f(1)`", "The same happens with `f(2)`", "`f()`: `f(3)` gives".
_INLINE_LEAD = re.compile(r"(?:\b(?:call|calling|run|running|with|Input:|example:|try|trying|evaluate)\s+"
                          r"|`:\s+)$", re.I)
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Invalid\w*)$|^StopIteration$")
_MESSAGE = re.compile(r"\u201c([^\u201d]*)\u201d")
#: Phrases that give an expectation without a value or an exception: "a normal result".
_VAGUE = re.compile(r"\ba normal result\b|\bexpected a result\b|\bwhere I expected a result\b", re.I)


@dataclass
class Example:
    """One example of a report: the code as a reader would run it and the text about it."""

    code: str                       # runnable: a session's prompts removed, its output left out
    text: str                       # the report's words about this example (see the module docstring)
    inline: bool = False            # a call in the prose, not a fenced block
    output: list[str] = field(default_factory=list)  # a session's printed lines (after its last ``>>>``)


@dataclass
class Claim:
    """What the text says of an example: on the buggy code (``observed``) and what should happen."""

    observed_value: str | None = None       # the repr the reader is told comes back
    observed_error: str | None = None       # the exception the reader is told is raised
    observed_message: str | None = None     # its message, when the text quotes one
    expected_value: str | None = None       # the value that should come back
    expected_error: str | None = None       # the exception that should be raised instead
    expected_message: str | None = None     # its message, when the text quotes one
    expected_type: str | None = None        # the type of what should come back ("a `dict` back")
    relation: bool = False                  # a relation only ("a value below `3`", "anything but `x`")
    vague: bool = False                     # "a normal result": no value, no exception


# -- finding the examples --------------------------------------------------------------------------


def _session(block: str) -> tuple[str, list[str]] | None:
    """(code, printed lines) of an interpreter session; ``None`` when the block is not one."""
    lines = block.splitlines()
    if not any(line.startswith(">>>") for line in lines):
        return None
    code, output = [], []
    for line in lines:
        if line.startswith((">>> ", "... ", ">>>", "...")):
            code.append(line[4:] if line.startswith((">>> ", "... ")) else line[3:])
            output = []  # what a statement printed is what follows it, up to the next prompt
        elif line.strip():
            output.append(line)
    return "\n".join(code), output


def _is_call(span: str, before: str = "") -> bool:
    """Whether a span written inline is an example: an expression that calls something, not an API's
    bare name (``Munch.get()``); or, in the earlier writer's sentence on another bug ("`Munch.lol`:
    with `b.lol`, ..."), one that reads an attribute of a value."""
    try:
        tree = pyparse.parse(span)
    except (SyntaxError, ValueError):
        return False
    if re.fullmatch(r"[\w.]+\(\)", span):
        return False
    if any(isinstance(n, ast.Call) for n in ast.walk(tree)):
        return True
    return (bool(re.search(r"`:\s+(?:with\s+)?$", before)) and len(tree.body) == 1
            and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Attribute))


def examples(statement: str) -> list[Example]:
    """Every example of ``statement``, in order (see the module docstring)."""
    found: list[tuple[int, int, Example]] = []
    for m in _FENCE.finditer(statement):
        body = m.group(1)
        session = _session(body)
        code, output = session if session is not None else (body, [])
        if code.strip():
            found.append((m.start(), m.end(), Example(code.strip() + "\n", "", output=output)))
    fenced = [(s, e) for s, e, _ in found]
    for m in _SPAN.finditer(statement):
        if any(s <= m.start() < e for s, e in fenced):
            continue
        before = statement[max(0, m.start() - 40):m.start()]
        if _INLINE_LEAD.search(before) and _is_call(m.group(1), before):
            found.append((m.start(), m.end(), Example(m.group(1) + "\n", "", inline=True)))
    if not found:  # a report that writes its call some other way: the first call in backticks
        from termgym.tasks.swesynth.repro import repro_code

        code = repro_code(statement)
        if code is not None:
            start = statement.find(code.strip())
            found.append((max(start, 0), max(start, 0) + len(code), Example(code, "", inline=True)))
    found.sort(key=lambda t: t[0])
    # where each example's text begins: the first at the report's start (the opening names the
    # exception); a call written inline at the start of its paragraph; a block at the lead-in
    # paragraph before it ("Another example:", ending with a colon), else at the block itself
    begins = []
    for i, (start, _end, example) in enumerate(found):
        if i == 0:
            begins.append(0)
            continue
        floor = found[i - 1][1]
        paragraph = statement.rfind("\n\n", 0, start) + 2
        if example.inline:
            begins.append(max(paragraph, floor) if paragraph >= 2 else start)
            continue
        before = statement[:start].rstrip()
        lead = before.rfind("\n\n") + 2
        begins.append(lead if before.endswith(":") and lead >= max(floor, 2) else start)
    out = []
    for i, (_start, _end, example) in enumerate(found):
        stop = begins[i + 1] if i + 1 < len(found) else len(statement)
        example.text = statement[begins[i]:stop]
        out.append(example)
    return out


# -- what the text claims ---------------------------------------------------------------------------

_OBSERVED_LEADS = (r"\bI get", r"\bI got", r"\bit returns", r"\breturns", r"\bcomes back as", r"\bgives",
                   r"\bgive me", r"- Actual:", r"- Today I get:", r"\bI see", r"\bit prints",
                   r"\bevaluates to", r"\bproduces")
_EXPECTED_LEADS = (r"\bI expected", r"\bexpected", r"\bshould (?:give|return|be)", r"\bexpected result is",
                   r"- Expected:", r"\binstead of", r"\brather than", r"\bought to (?:give|return|be)",
                   r"\bwanted", r"\bcorrect (?:answer|result|value) (?:is|would be)", r"\bshould come back as",
                   r"\bexpect")
_RELATION = re.compile(r"\b(?:a value (?:below|above|of at most|of at least)|anything but|a result that contains|"
                       r"a result without|a true value|an empty or false result)\s*`", re.I)


def _after(text: str, leads: Iterable[str], limit: int = 50) -> list[tuple[int, str]]:
    """(position, span) of each backticked span within ``limit`` characters after a lead phrase."""
    out = []
    for lead in leads:
        for m in re.finditer(lead + r"([^`\n.;]{0," + str(limit) + r"})`([^`\n]+)`", text, re.I):
            gap = m.group(1)
            if re.search(r"\b(?:not|than|instead)\b", gap) and "instead of" not in lead and "rather" not in lead:
                continue  # "I expected a normal result, not `KeyError`": `KeyError` is no expectation
            out.append((m.start(2), m.group(2)))
    return sorted(set(out))


def claim(example: Example) -> Claim:
    """What ``example``'s text says comes back on the buggy code and what should (:class:`Claim`)."""
    text = _FENCE.sub(" ", example.text)
    out = Claim()
    spans = _SPAN.findall(text)
    errors = [s for s in spans if _EXCEPTION.match(s)]
    # an exception the text asks for ("should raise a `ValueError`", "- Expected: a `ValueError`")
    asked_at = len(text)
    for asked in re.finditer(r"(?:\bshould (?:raise|refuse|reject|fail)|expected it to (?:raise|refuse|reject|fail)|"
                             r"\brefuse|\breject|- Expected:|\bexpected)([^`\n]{0,40})`([A-Za-z_][\w.]*)`", text):
        if _EXCEPTION.match(asked.group(2)) and not re.search(r"\b(?:not|normal|than|instead)\b", asked.group(1)):
            out.expected_error = asked.group(2).rsplit(".", 1)[-1]
            asked_at = asked.start()
            m = re.match(r"\s*(?:with the message|\()?\s*" + _MESSAGE.pattern, text[asked.end():])
            out.expected_message = m.group(1) if m else None
            break
    observed = [e for e in errors if e.rsplit(".", 1)[-1] != out.expected_error]
    if observed:
        out.observed_error = observed[0].rsplit(".", 1)[-1]
        # its message: the first quoted after the exception is named, not the expected one's
        where = [m.start() for m in re.finditer(r"`" + re.escape(observed[0]) + r"`", text)]
        for m in _MESSAGE.finditer(text):
            if (not where or m.start() > where[0]) and not (asked_at < m.start() and out.expected_message
                                                              and m.group(1) == out.expected_message):
                out.observed_message = m.group(1)
                break
    if out.observed_error is None:
        values = [v for _, v in _after(text, _OBSERVED_LEADS) if not _EXCEPTION.match(v)]
        if example.output:  # what the session printed is what came back
            out.observed_value = example.output[-1].strip()
        elif values:
            out.observed_value = values[0]
    if _VAGUE.search(text):
        out.vague = True
    if _RELATION.search(text):
        out.relation = True
    typed = re.search(r"\ban? `([A-Za-z_]\w*)` back\b", text)
    if typed and out.expected_error is None:
        out.expected_type = typed.group(1)
    if out.expected_error is None and not out.relation and out.expected_type is None:
        expected = [v for pos, v in _after(text, _EXPECTED_LEADS) if v != out.observed_value
                    and not (_EXCEPTION.match(v) and v.rsplit(".", 1)[-1] == out.observed_error)]
        if expected:
            out.expected_value = expected[0]
    if out.expected_value is not None or out.expected_error is not None or out.relation or out.expected_type:
        out.vague = False
    elif not out.vague and out.observed_error is not None:
        out.vague = True  # "it raises `KeyError`" and nothing about what should happen instead
    return out


# -- comparing runs with the claim ------------------------------------------------------------------


def _same_value(stated: str, actual: str | None) -> bool:
    """Whether the repr ``actual`` is the value ``stated`` (equal literals, or equal text)."""
    if actual is None:
        return False
    if stated.strip() == actual.strip():
        return True
    try:
        return ast.literal_eval(stated) == ast.literal_eval(actual)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return re.sub(r"\s+", "", stated) == re.sub(r"\s+", "", actual)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def shows_claim(example: Example, clean: dict[str, Any] | None, buggy: dict[str, Any] | None) -> str:
    """Why the clean and the buggy run of ``example`` do not show what its text claims (``""``: they do).

    The runs must differ; the buggy run must raise the exception the text names (with the quoted
    message, when it quotes one) or give the value it quotes; the clean run must give the value the
    text expects, raise the exception it asks for, or (when the text asks for no exception, or
    only for "a normal result") return without raising."""
    if clean is None or buggy is None:
        return "the example printed nothing (it could not run)"
    said = claim(example)
    if clean.get("raised") and clean.get("raised") == buggy.get("raised"):
        return f"the example raises {clean['raised']} on the clean tree too"
    if clean == buggy:
        return "the example behaves the same on the clean and the buggy tree"
    if buggy.get("raised"):
        if said.observed_error != buggy["raised"]:
            named = f"says {said.observed_error}" if said.observed_error else "does not say so"
            return f"the buggy tree raises {buggy['raised']}; the text {named}"
        message = (buggy.get("message") or "").strip()
        if said.observed_message is not None and said.observed_message.strip() not in message:
            return f"the buggy tree's message is {message[:80]!r}, not the quoted {said.observed_message[:80]!r}"
    else:
        value = buggy.get("value")
        if said.observed_error is not None and not said.expected_error:
            return f"the text says {said.observed_error}; the buggy tree returns {str(value)[:60]!r}"
        if value is None and said.observed_value is None and said.expected_error:
            pass  # "it goes through without complaint": a statement, no value to quote
        elif said.observed_value is not None:
            if not _same_value(said.observed_value, value):
                return f"the text says the buggy result is {said.observed_value[:60]!r}; it is {str(value)[:60]!r}"
        elif not (value and value[:60] in example.text) and not said.expected_error:
            return f"the text does not show the buggy result {str(value)[:60]!r}"
    if said.expected_error:
        if clean.get("raised") != said.expected_error:
            got = clean.get("raised") or f"a result, {str(clean.get('value'))[:60]!r}"
            return f"the text expects {said.expected_error}; the clean tree gives {got}"
        message = (clean.get("message") or "").strip()
        if said.expected_message is not None and said.expected_message.strip() not in message:
            return f"the clean tree's message is {message[:80]!r}, not the expected {said.expected_message[:80]!r}"
        return ""
    if clean.get("raised"):
        return f"the clean tree raises {clean['raised']}, which the text does not expect"
    if said.expected_type and clean.get("type") and said.expected_type != clean["type"]:
        return f"the text expects {_article(said.expected_type)} {said.expected_type}; the clean tree gives a {clean['type']}"
    if said.expected_value is not None and not _same_value(said.expected_value, clean.get("value")):
        return (f"the text expects {said.expected_value[:60]!r}; the clean tree gives "
                f"{str(clean.get('value'))[:60]!r}")
    return ""


# -- the static measures ----------------------------------------------------------------------------


def undefined_names(example: Example) -> set[str]:
    """Names ``example`` reads that it neither defines, imports nor gets from the built-ins
    (``{"<syntax>"}`` when it does not parse)."""
    from termgym.factory.swesynth.quality import free_names

    try:
        return free_names(example.code)
    except (SyntaxError, ValueError):
        return {"<syntax>"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"


def private_names(example: Example, packages: Iterable[str] = ()) -> set[str]:
    """Private names of the project ``example`` uses: a ``_name`` it imports, an import from a
    ``_module``, or a ``._name`` attribute of a value (``packages``: the project's top-level
    names; without them every such name counts)."""
    try:
        tree = pyparse.parse(example.code)
    except (SyntaxError, ValueError):
        return set()
    packages = set(packages)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (not packages
                                                                 or node.module.split(".")[0] in packages):
            found |= {part for part in node.module.split(".") if _private(part)}
            found |= {a.name for a in node.names if _private(a.name)}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not packages or alias.name.split(".")[0] in packages:
                    found |= {part for part in alias.name.split(".") if _private(part)}
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            found.add(node.attr)
    return found


def vague_expectations(statement: str) -> int:
    """How many examples of ``statement`` say what should happen only as "a normal result" (or not
    at all, after naming an exception)."""
    return sum(claim(e).vague for e in examples(statement))


def opening(statement: str) -> str:
    """The report's first sentence, its code spans written ``…`` (two reports about different
    functions that open alike open with the same sentence)."""
    first = statement.strip().split("\n", 1)[0]
    m = re.match(r"(.+?[.!?:])(?:\s|$)", _SPAN.sub("`\u2026`", first))
    return (m.group(1) if m else _SPAN.sub("`\u2026`", first)).strip()


def closing(statement: str) -> str:
    """The report's last paragraph when it is a closing remark (no code, one short line), else ``""``."""
    last = statement.strip().rsplit("\n\n", 1)[-1].strip()
    return last if "`" not in last and "\n" not in last and len(last) <= 120 else ""


def report_measures(statements: dict[str, str], packages: dict[str, Sequence[str]] | None = None,
                    reasons: dict[str, str] | None = None) -> dict[str, Any]:
    """The static measures over ``statements`` (task id -> report): examples per report, reports
    with an undefined name in any example (and which names), with a private name (and whether the
    report says why it calls one: ``reasons``, task id -> reason, or a sentence in the report),
    with an expectation stated only as "a normal result", with an exception named without its
    message, and the distinct opening sentences and closings. ``undefined`` counts a name any one
    example leaves undefined (each example must stand alone); ``undefined_in_report`` one that no
    example of the report defines. ``packages`` (task id -> the
    project's top-level names) restricts private names to the project's."""
    packages = packages or {}
    undefined: dict[str, list[str]] = {}
    anywhere: dict[str, list[str]] = {}
    private: dict[str, list[str]] = {}
    vague, no_message, counts = [], [], Counter()
    openings, closings = Counter(), Counter()
    for tid, statement in statements.items():
        found = examples(statement)
        counts[len(found)] += 1
        names = sorted(set().union(*(undefined_names(e) for e in found)) if found else set())
        if names:
            undefined[tid] = names
            # the older count: names no example of the whole report defines or imports
            whole = undefined_names(Example("\n".join(e.code for e in found), ""))
            if whole:
                anywhere[tid] = sorted(whole)
        priv = sorted(set().union(*(private_names(e, packages.get(tid, ())) for e in found)) if found else set())
        if priv:
            private[tid] = priv
        claims = [claim(e) for e in found]
        if any(c.vague for c in claims):
            vague.append(tid)
        if any(c.observed_error and c.observed_message is None for c in claims):
            no_message.append(tid)
        openings[opening(statement)] += 1
        closings[closing(statement)] += 1
    explained = {tid for tid in private if (reasons or {}).get(tid) or re.search(
        r"\b(?:internal|private) (?:helper|function|method|module|class|name)\b", statements[tid], re.I)}
    return {"reports": len(statements), "examples": dict(sorted(counts.items())),
            "undefined": len(undefined), "undefined_names": undefined,
            "undefined_in_report": len(anywhere), "undefined_in_report_names": anywhere,
            "private": len(private), "private_names": private, "private_explained": sorted(explained),
            "vague": len(vague), "vague_tasks": vague, "error_without_message": len(no_message),
            "openings": len(openings), "top_openings": openings.most_common(5),
            "closings": len(closings), "top_closings": closings.most_common(5)}


__all__ = ["Claim", "Example", "claim", "closing", "examples", "opening", "private_names", "report_measures",
           "shows_claim", "undefined_names", "vague_expectations"]
