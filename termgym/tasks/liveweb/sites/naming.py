"""Invented names for the simulated world: slugs, pronounceable words and ticker symbols."""

from __future__ import annotations

import random
from urllib.parse import quote

from termgym.tasks.liveweb.noise import HashRandom


def slug(text: str) -> str:
    return quote("-".join("".join(c.lower() if c.isalnum() else " " for c in text).split()))


_ONSETS = ["b", "br", "c", "cr", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "pr", "qu", "r",
           "s", "st", "t", "tr", "v", "vel", "x", "z", "zan", "th", "ph", "sol", "nor", "kai", "lum", "or"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "io", "ea", "y"]
_CODAS = ["", "n", "r", "x", "l", "s", "th", "m", "nd", "rk", "ra", "on", "is", "ex", "ium", "ora"]


def coined_word(rng: random.Random | HashRandom, syllables: int | None = None) -> str:
    """An invented, pronounceable word (capitalised), e.g. ``Velorax``."""
    n = syllables or rng.choice((2, 2, 3))
    word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n - 1)) + rng.choice(_ONSETS)
    word += rng.choice(_VOWELS) + rng.choice(_CODAS)
    return word.capitalize()


def unique_words(rng: random.Random, n: int, make=coined_word) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        w = make(rng)
        if w.lower() not in seen and 4 <= len(w) <= 12:
            seen.add(w.lower())
            out.append(w)
    return out


def symbol_for(name: str, taken: set[str], rng: random.Random, length: int = 3) -> str:
    """A ticker-like symbol for ``name`` not in ``taken`` (then added to it)."""
    letters = [c for c in name.upper() if c.isalpha()]
    first = "".join(letters[:length])
    if len(first) == length and first not in taken:
        taken.add(first)
        return first
    for _ in range(50):  # the first letter plus others from the name, in order
        picks = [letters[0]] + sorted(rng.sample(letters[1:], min(length - 1, len(letters) - 1)))
        cand = "".join(picks)
        if len(cand) == length and cand not in taken:
            taken.add(cand)
            return cand
    while True:
        cand = letters[0] + "".join(rng.choice("ABCDEFGHJKLMNPRSTVWXZ") for _ in range(length - 1))
        if cand not in taken:
            taken.add(cand)
            return cand
