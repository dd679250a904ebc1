"""Converting identifiers and titles between naming conventions."""

from __future__ import annotations

import re
from typing import Iterable

# Words kept lower case inside a title (but not at its start or end).
SMALL_WORDS = frozenset("a an and as at but by en for if in of on or the to v via vs".split())

_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


def split_words(text: str) -> list[str]:
    """Split any identifier or phrase into words.

    Handles separators (space, ``_``, ``-``, ``.``), camel humps and acronyms:
    ``"parseHTTPResponse2"`` -> ``["parse", "HTTP", "Response2"]``.
    """
    words: list[str] = []
    for chunk in re.split(r"[\s_\-./]+", text):
        if chunk:
            words.extend(_WORD_RE.findall(chunk))
    return words


def snake_case(text: str) -> str:
    """``"Hello World"`` -> ``"hello_world"``."""
    return "_".join(word.lower() for word in split_words(text))


def kebab_case(text: str) -> str:
    """``"Hello World"`` -> ``"hello-world"``."""
    return "-".join(word.lower() for word in split_words(text))


def constant_case(text: str) -> str:
    """``"max retries"`` -> ``"MAX_RETRIES"``."""
    return "_".join(word.upper() for word in split_words(text))


def pascal_case(text: str, acronyms: Iterable[str] = ()) -> str:
    """``"http server"`` -> ``"HttpServer"``; words listed in ``acronyms`` stay upper case."""
    keep = {a.upper() for a in acronyms}
    parts = []
    for word in split_words(text):
        upper = word.upper()
        parts.append(upper if upper in keep else word[:1].upper() + word[1:].lower())
    return "".join(parts)


def camel_case(text: str, acronyms: Iterable[str] = ()) -> str:
    """``"http server"`` -> ``"httpServer"``; the first word is always lower case."""
    words = split_words(text)
    if not words:
        return ""
    rest = pascal_case(" ".join(words[1:]), acronyms)
    return words[0].lower() + rest


def title_case(text: str, small_words: Iterable[str] = SMALL_WORDS) -> str:
    """Title-case a phrase, keeping small words lower case except first and last.

    Words already containing an upper-case letter after the first (``iPhone``,
    ``NASA``) are left as written. Hyphenated words are capitalised per part.
    """
    small = {w.lower() for w in small_words}
    words = text.split()
    result = []
    for index, word in enumerate(words):
        is_edge = index == 0 or index == len(words) - 1
        if any(c.isupper() for c in word[1:]):
            result.append(word)
        elif word.lower() in small and not is_edge:
            result.append(word.lower())
        else:
            result.append("-".join(part[:1].upper() + part[1:].lower() for part in word.split("-")))
    return " ".join(result)


def swap_case_style(name: str) -> str:
    """Convert snake_case to camelCase and anything else to snake_case."""
    if "_" in name and name == name.lower():
        return camel_case(name)
    return snake_case(name)


def humanize(name: str) -> str:
    """``"user_id"`` -> ``"User id"``: a label for a form field or column."""
    words = [w.lower() for w in split_words(name)]
    if words and words[-1] == "id" and len(words) > 1:
        words = words[:-1] + ["ID"]
    sentence = " ".join(words)
    return sentence[:1].upper() + sentence[1:]
