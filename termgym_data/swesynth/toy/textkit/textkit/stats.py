"""Counting and comparing text: words, sentences, syllables, readability, edit distance."""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Optional

STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its of on or she "
    "that the their they this to was were will with you your".split()
)
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "e.g", "i.e", "etc", "vs", "st"})

_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*")
_VOWEL_GROUPS = re.compile(r"[aeiouy]+")


def words(text: str) -> list[str]:
    """Words in ``text`` (letters/digits, with inner apostrophes), in order."""
    return _WORD_RE.findall(text)


def word_count(text: str) -> int:
    """Number of words."""
    return len(words(text))


def sentences(text: str) -> list[str]:
    """Split into sentences at ``.``, ``!`` or ``?`` followed by space and a capital or end.

    A period after a known abbreviation (``Dr.``) or a single initial (``J.``)
    does not end a sentence.
    """
    result = []
    start = 0
    for match in re.finditer(r"[.!?]+(?=\s+[A-Z\"'(]|\s*$)", text):
        before = text[start:match.start()].split()
        last_word = before[-1].lower().rstrip(".") if before else ""
        if match.group().startswith(".") and (last_word in ABBREVIATIONS or
                                              (len(last_word) == 1 and last_word.isalpha())):
            continue
        piece = text[start:match.end()].strip()
        if piece:
            result.append(piece)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        result.append(tail)
    return result


def syllables(word: str) -> int:
    """Estimate syllables by counting vowel groups, with common English corrections.

    A silent final ``e`` is not counted (but ``-le`` after a consonant is); every
    word has at least one syllable.
    """
    w = word.lower()
    w = re.sub(r"[^a-z]", "", w)
    if not w:
        return 0
    if len(w) <= 3:
        return 1
    count = len(_VOWEL_GROUPS.findall(w))
    if w.endswith("e") and not w.endswith(("le", "ee", "ye")):
        count -= 1
    if w.endswith(("ed", "es")) and len(w) > 4 and w[-3] not in "dt":
        count -= 1
    return max(1, count)


def flesch_reading_ease(text: str) -> Optional[float]:
    """Flesch reading ease score rounded to one decimal, or None for empty text.

    206.835 - 1.015 * words/sentences - 84.6 * syllables/words; higher is easier.
    """
    ws = words(text)
    if not ws:
        return None
    sentence_count = max(1, len(sentences(text)))
    syllable_count = sum(syllables(w) for w in ws)
    score = 206.835 - 1.015 * (len(ws) / sentence_count) - 84.6 * (syllable_count / len(ws))
    return round(score, 1)


def top_words(text: str, n: int = 5, stopwords: Iterable[str] = STOPWORDS,
              min_length: int = 1) -> list[tuple[str, int]]:
    """The ``n`` most frequent words (lower-cased), most frequent first, ties alphabetical."""
    skip = set(stopwords)
    counts = Counter(w.lower() for w in words(text) if w.lower() not in skip and len(w) >= min_length)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]


def levenshtein(a: str, b: str) -> int:
    """Edit distance: insertions, deletions and substitutions, each costing 1."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            cost = 0 if char_a == char_b else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def similarity(a: str, b: str) -> float:
    """1.0 for identical strings down to 0.0, from the edit distance; rounded to 3 places."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return round(1 - levenshtein(a, b) / longest, 3)


def closest(word: str, candidates: Iterable[str], max_distance: int = 2) -> Optional[str]:
    """The candidate nearest to ``word`` within ``max_distance`` edits ("did you mean"), ties by order."""
    best: Optional[str] = None
    best_distance = max_distance + 1
    for candidate in candidates:
        distance = levenshtein(word.lower(), candidate.lower())
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best


def summary(text: str) -> dict[str, object]:
    """Characters, words, sentences, average word length and reading ease in one dict."""
    ws = words(text)
    average = round(sum(len(w) for w in ws) / len(ws), 2) if ws else 0.0
    return {
        "characters": len(text),
        "words": len(ws),
        "sentences": len(sentences(text)),
        "average_word_length": average,
        "reading_ease": flesch_reading_ease(text),
    }
