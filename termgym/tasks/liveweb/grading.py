"""Grading LIVEWEB submissions: parse the JSON object, score each answer against the data.

The agent submits one JSON object ``{"answer1": ..., "answer2": ...}``. Each answer is scored
against the answer computed from the sites' data at submission time (or, within a short grace
window, at a tick just before it, so an answer fetched a minute ago is not punished for a tick
that happened while the agent typed):

* numbers — right when within the tolerance the site's display precision allows
  (:func:`display_tolerance`; ``12.3``, ``"12.3"``, ``"$1.2B"``, ``"4.5%"`` are all numbers);
  whole numbers must match;
* names — the whole answer must equal one alias (name, symbol, id, ``SN12``…) after normalising
  case, punctuation and spacing: no substrings, so ``"not X"`` or ``"X or Y"`` name nothing; an
  :class:`LLMValidator` may judge free-text names that do not match;
* sets — exactly the right names, in any order; ordered lists — exactly the right names in order
  (no partial credit: it would pay for listing every candidate).

Nothing the agent submits can make grading raise: a malformed submission scores 0 with a message
that says what was wrong and what was expected.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import unicodedata
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from termgym.tasks.liveweb.answers import compute, sources
from termgym.tasks.liveweb.questions import Question
from termgym.tasks.liveweb.sites import collection_spec

SUCCESS_THRESHOLD = 0.8
EXAMPLE = '{"answer1": 12.5, "answer2": "Name", "answer3": ["A", "B"]}'


# -- the submission --------------------------------------------------------------------------------


def parse_submission(text: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """``(answers, None)`` for a JSON object (fences and text around it tolerated), else ``(None, why)``."""
    if text is None:
        return None, "no answer was submitted before the episode ended"
    s = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", s, re.DOTALL)
    if fence:
        s = fence.group(1).strip()
    if not s:
        return None, f"the submission is empty; submit one JSON object such as {EXAMPLE}"
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as exc:
        obj = None
        start = s.find("{")
        if start >= 0:
            try:
                obj, _ = json.JSONDecoder().raw_decode(s[start:])
            except json.JSONDecodeError:
                obj = None
        if obj is None:
            return None, (f"the submission is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          f"submit one JSON object such as {EXAMPLE}")
    if not isinstance(obj, dict):
        return None, f"the submission is JSON but a {type(obj).__name__}, not an object; submit e.g. {EXAMPLE}"
    return {str(k).strip().lower(): v for k, v in obj.items()}, None


_SUFFIX = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9,
           "t": 1e12, "tn": 1e12, "trillion": 1e12}
_NUMBER = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([a-z]*)$")


def parse_number(value: Any) -> float | None:
    """A number from a JSON value: numbers, or strings like ``"1,234.5"``, ``"$1.2B"``, ``"-3.4%"``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    s = value.strip().lower().replace(",", "").replace("\u2212", "-").replace(" ", "")
    for token in ("usd", "gbp", "tao", "us$", "$", "£", "€", "τ", "%", "shares", "points", "coins"):
        s = s.replace(token, "")
    m = _NUMBER.match(s)
    if not m or (m.group(2) and m.group(2) not in _SUFFIX):
        return None
    return float(m.group(1)) * _SUFFIX.get(m.group(2), 1.0)


def _words(text: Any) -> str:
    """Lower-case words separated and surrounded by single spaces, for whole-word search."""
    return _words_of(str(text))


def norm(text: Any) -> str:
    """Lower-case letters and digits only: ``"“Zen-tora” (ZNT)"`` -> ``"zentoraznt"``."""
    return _norm_of(str(text))


# Cached: grading builds a name index over a whole collection per answer, and names repeat.
@functools.lru_cache(maxsize=1 << 16)
def _words_of(text: str) -> str:
    text = unicodedata.normalize("NFKD", text).casefold()
    return " " + " ".join(re.findall(r"[^\W_]+", text)) + " "


@functools.lru_cache(maxsize=1 << 16)
def _norm_of(text: str) -> str:
    text = unicodedata.normalize("NFKD", text).casefold()
    return "".join(c for c in text if c.isalnum())


# -- names ------------------------------------------------------------------------------------------


_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|except|excluding|without|isn't|is not|wasn't)\b|n't\b",
                       re.IGNORECASE)


class NameIndex:
    """Resolves a free-form answer to the (normalised) name of one of the candidate records.

    Names, not keys, are what is compared: two records that happen to share a name are the same
    answer as far as the agent can tell.
    """

    def __init__(self, candidates: list[tuple[str, dict]]) -> None:
        self.exact: dict[str, set[str]] = {}
        self.phrases: dict[str, set[str]] = {}  # aliases as whole words, to spot several names in a text
        for src, record in candidates:
            spec = collection_spec(src)
            name = norm(record[spec.name_field])
            forms = [record[f] for f in spec.alias_fields if f in record] + [spec.describe(record)]
            for form in forms:
                n = norm(form)
                if n:
                    self.exact.setdefault(n, set()).add(name)
                    self.phrases.setdefault(_words(form), set()).add(name)

    def resolve(self, given: Any) -> str | None:
        """The one record ``given`` names exactly (after :func:`norm`), else ``None``.

        Exact on purpose: an answer that merely *contains* a name (``"not Vypyr"``, ``"Vypyr or
        Zentora"``, ``"VYP, ZNT, KAI"``) names nothing, so hedging or negating cannot score.
        """
        if not isinstance(given, (str, int)) or isinstance(given, bool):
            return None
        hit = self.exact.get(norm(given))
        if hit and len(hit) == 1:
            return next(iter(hit))
        return None

    def hedge(self, given: str) -> str | None:
        """Why a free-text answer is a hedge rather than a name (negates, or names several), or ``None``."""
        if _NEGATION.search(given):
            return "negates"
        text = _words(given)
        named = {name for phrase, names in self.phrases.items() if phrase.strip() and phrase in text for name in names}
        return "names several candidates" if len(named) > 1 else None


def _candidates(q: Question, data: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    if q.spec["kind"] in ("pick_refs", "pick_change"):
        out = []
        refs = q.spec.get("refs") or [item["now"] for item in q.spec["items"]]
        for ref in refs:
            spec = collection_spec(ref["src"])
            out += [(ref["src"], r) for r in data[ref["src"]] if str(r[spec.key_field]) == str(ref["key"])]
        return out
    return [(src, r) for src in sources(q.spec) for r in data[src]]


# -- the optional LLM judge -------------------------------------------------------------------------


class LLMValidator:
    """Asks a model behind an OpenAI-compatible ``/chat/completions`` endpoint whether a free-text
    answer names the same thing as the reference. Used only for name answers that do not match
    exactly; a failed call counts as "no" (and is reported in the grade's messages).
    """

    PROMPT = ("Question: {question}\nReference answer: {expected}\nCandidate answer: {given}\n\n"
              "Does the candidate answer refer to exactly the same item as the reference answer? Minor "
              "differences in spelling, case or punctuation are fine; a different item is not. "
              "Reply with one word: YES or NO.")

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout

    @classmethod
    def from_env(cls) -> LLMValidator | None:
        """From ``LIVEWEB_VALIDATOR_BASE_URL`` / ``_MODEL`` / ``_API_KEY``; ``None`` when unset."""
        url, model = os.environ.get("LIVEWEB_VALIDATOR_BASE_URL"), os.environ.get("LIVEWEB_VALIDATOR_MODEL")
        if not (url and model):
            return None
        return cls(url, model, os.environ.get("LIVEWEB_VALIDATOR_API_KEY") or os.environ.get("OPENAI_API_KEY"))

    def judge(self, question: str, expected: str, given: str) -> bool:
        body = json.dumps({"model": self.model, "temperature": 0, "max_tokens": 8, "messages": [
            {"role": "system", "content": "You check answers to factual questions. Reply YES or NO."},
            {"role": "user", "content": self.PROMPT.format(question=question, expected=expected, given=given)},
        ]}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=headers)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=self.timeout) as resp:
            reply = json.loads(resp.read())
        content = reply["choices"][0]["message"]["content"] or ""
        content = re.sub(r"<think>.*?</think>", "", content, flags=re.DOTALL).strip().upper()
        return content.startswith("YES")


# -- tolerances --------------------------------------------------------------------------------------

#: Computed answers may be rounded to this many significant digits (the instruction says so).
ANSWER_SIG_DIGITS = 4


def display_tolerance(spec: dict, data: dict[str, list[dict]], meta: dict[str, dict], expected: float) -> float:
    """How far a right answer to ``spec`` may be from ``expected``, from how the sites show values.

    Detail pages and the API show every value exactly as the grader has it, rounded the way the
    site rounds it (:class:`~termgym.tasks.liveweb.sites.base.FieldSpec` ``decimals`` /
    ``sig_digits``). So a lookup must match to the last displayed digit (half a unit of it:
    :meth:`FieldSpec.half_unit`; whole numbers exactly), and a value computed from displayed
    inputs may differ only by rounding the result to :data:`ANSWER_SIG_DIGITS` significant digits
    (what the instruction asks for). Counts, names and differences of whole numbers: exact.
    """
    kind = spec["kind"]
    if kind == "value":
        return collection_spec(spec["src"]).fields[spec["field"]].half_unit(expected)
    if kind == "hop":
        return collection_spec(spec["src"]).fields[spec["then"]].half_unit(expected)
    if kind in ("count", "pick", "nth", "top", "members", "pick_refs", "count_refs", "pick_change"):
        return 0.0
    if kind == "delta" and collection_spec(spec["src"]).fields[spec["field"]].exact:
        return 0.0
    if kind == "expr":
        fields = [collection_spec(r["src"]).fields[r["field"]] for r in spec["refs"]]
        if spec["op"] in ("max", "min"):  # one of the values, as shown
            return fields[0].half_unit(expected)
        if spec["op"] in ("sub", "sum", "range") and all(f.exact for f in fields):
            return 0.0
    if not expected:
        return 0.0
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(expected))) - ANSWER_SIG_DIGITS + 1)


def tolerance(q: Question, data: dict[str, list[dict]], meta: dict[str, dict], expected: float) -> float:
    """The tolerance of a number answer: from display precision, or the question's declared one (live)."""
    if q.answer_type == "integer":
        return 0.0
    if q.tolerance == "declared":
        return q.tol_abs + q.tol_rel * abs(expected)
    return display_tolerance(q.spec, data, meta, expected)


# -- scoring ---------------------------------------------------------------------------------------


@dataclass
class Scored:
    score: float
    message: str
    expected: Any


def _as_list(value: Any) -> list | None:
    if isinstance(value, list):
        return value
    if isinstance(value, str):  # titles hold commas: only ';' and newlines separate names in a string
        parts = [p.strip() for p in re.split(r"[;\n]", value) if p.strip()]
        return parts if value.strip() else []
    return None


def score_answer(q: Question, given: Any, data: dict[str, list[dict]], meta: dict[str, dict],
                 validator: LLMValidator | None = None) -> Scored:
    """Score one answer against the data (``data``/``meta`` as :func:`answers.compute` takes)."""
    expected = compute(q.spec, data, meta)
    if q.answer_type in ("number", "integer"):
        value = parse_number(given)
        if value is None:
            return Scored(0.0, f"{q.qid} must be a number, got {given!r}", expected)
        # Whole numbers match exactly; other numbers get a float-rounding epsilon on top.
        tol = tolerance(q, data, meta, expected) + (0.0 if q.answer_type == "integer" else 1e-12 * max(1.0, abs(expected)))
        if abs(value - expected) <= tol:
            return Scored(1.0, f"{q.qid}: correct", expected)
        return Scored(0.0, f"{q.qid}: {value:g} is not within {tol:.4g} of the answer", expected)
    candidates = _candidates(q, data)
    index = NameIndex(candidates)
    if q.answer_type == "name":
        if not isinstance(given, (str, int)) or isinstance(given, bool):
            return Scored(0.0, f"{q.qid} must be a name (a string), got {given!r}", expected)
        if index.resolve(given) == norm(expected):
            return Scored(1.0, f"{q.qid}: correct", expected)
        hedge = index.hedge(given) if isinstance(given, str) else None
        if hedge is not None:  # never put a hedged answer to the judge: a model may wave it through
            return Scored(0.0, f"{q.qid}: {given!r} {hedge}; answer with one name", expected)
        if validator is not None and isinstance(given, str):
            try:
                if validator.judge(q.text, expected, given):
                    return Scored(1.0, f"{q.qid}: correct (judged by the validator)", expected)
            except Exception as exc:  # the judge is optional: its failure is not the agent's fault, nor a crash
                return Scored(0.0, f"{q.qid}: not an exact match and the validator failed ({exc})", expected)
        return Scored(0.0, f"{q.qid}: {given!r} is not the right {q.template} answer", expected)
    items = _as_list(given)
    if items is None:
        return Scored(0.0, f"{q.qid} must be a list of names such as [\"A\", \"B\"], got {given!r}", expected)
    want_keys = [norm(n) for n in expected]
    got_keys = [index.resolve(x) for x in items]
    unknown = [x for x, k in zip(items, got_keys, strict=True) if k is None]
    note = f" (not recognised: {', '.join(map(repr, unknown[:3]))})" if unknown else ""
    # All or nothing: with partial credit, listing every candidate would earn a share for free.
    if q.answer_type == "names_set":
        right = not unknown and len(got_keys) == len(set(got_keys)) and set(got_keys) == set(want_keys)
    else:
        right = not unknown and got_keys == want_keys
    return Scored(1.0 if right else 0.0, f"{q.qid}: {'correct' if right else 'wrong'}{note}", expected)


def grade_answers(questions: list[Question], submission: str | None,
                  data_at: Callable[[float, str], list[dict]], times: list[float],
                  validator: LLMValidator | None = None) -> dict[str, Any]:
    """Score every question; ``times`` are the moments to try, submission time first.

    Returns ``{"score", "success", "questions": [...], "feedback"}``; never raises on bad input.
    """
    answers, problem = parse_submission(submission)
    results = []
    for q in questions:
        meta = {s: {"key_field": collection_spec(s).key_field, "name_field": collection_spec(s).name_field}
                for s in sources(q.spec)}
        given = None if answers is None else answers.get(q.qid)
        if answers is None:
            best = Scored(0.0, f"{q.qid}: {problem}", None)
        elif q.qid not in answers:
            best = Scored(0.0, f"{q.qid} is missing from the submitted object (keys: "
                               f"{', '.join(sorted(answers)) or 'none'})", None)
        else:
            best = None
            for t in times:
                try:
                    data = {s: data_at(t, s) for s in meta}
                    scored = score_answer(q, given, data, meta, validator)
                except (LookupError, ArithmeticError) as exc:  # the subject vanished from the site
                    scored = Scored(0.0, f"{q.qid}: the answer cannot be computed at this time ({exc})", None)
                if best is None or scored.score > best.score:
                    best = scored
                if best.score == 1.0:
                    break
        assert best is not None
        results.append({"id": q.qid, "template": q.template, "question": q.text, "given": given,
                        "expected": best.expected, "score": best.score, "message": best.message})
    score = sum(r["score"] for r in results) / max(1, len(results))
    feedback = problem or "; ".join(r["message"] for r in results)
    return {"score": score, "success": score >= SUCCESS_THRESHOLD, "questions": results, "feedback": feedback}
