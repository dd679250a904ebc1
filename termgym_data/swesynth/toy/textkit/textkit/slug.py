"""URL slugs from arbitrary titles."""

from __future__ import annotations

import re
import unicodedata
from typing import Container, Optional

# Letters that do not decompose into ASCII under NFKD.
SPECIAL_FOLDS = {"ß": "ss", "æ": "ae", "ø": "o", "œ": "oe", "ł": "l", "đ": "d", "þ": "th", "&": " and "}
DEFAULT_SEPARATOR = "-"


def fold_to_ascii(text: str) -> str:
    """Replace accented letters by their ASCII base (``é`` -> ``e``) and drop what cannot be folded."""
    folded = []
    for char in text:
        lower = char.lower()
        if lower in SPECIAL_FOLDS:
            replacement = SPECIAL_FOLDS[lower]
            folded.append(replacement.upper() if char != lower and char.isalpha() else replacement)
            continue
        decomposed = unicodedata.normalize("NFKD", char)
        folded.append("".join(c for c in decomposed if ord(c) < 128))
    return "".join(folded)


def slugify(text: str, separator: str = DEFAULT_SEPARATOR, max_length: Optional[int] = None,
            lowercase: bool = True, stopwords: Container[str] = ()) -> str:
    """Turn ``text`` into a slug such as ``hello-world``.

    Words are runs of ASCII letters and digits after accent folding; apostrophes
    inside words are dropped (``don't`` -> ``dont``). ``stopwords`` (compared in
    lower case) are left out. ``max_length`` cuts at a word boundary when one
    exists and never leaves a trailing separator.
    """
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}")
    ascii_text = fold_to_ascii(text)
    ascii_text = re.sub(r"(\w)['\u2019](\w)", r"\1\2", ascii_text)
    words = re.findall(r"[A-Za-z0-9]+", ascii_text)
    words = [w for w in words if w.lower() not in stopwords]
    if lowercase:
        words = [w.lower() for w in words]
    slug = separator.join(words)
    if max_length is not None and len(slug) > max_length:
        cut = slug[:max_length]
        boundary = cut.rfind(separator)
        if boundary > 0 and slug[max_length:max_length + len(separator)] != separator:
            cut = cut[:boundary]
        slug = cut.rstrip(separator)
    return slug


def unique_slug(text: str, existing: Container[str], separator: str = DEFAULT_SEPARATOR,
                max_length: Optional[int] = None) -> str:
    """A slug for ``text`` not in ``existing``: ``title``, ``title-2``, ``title-3``...

    An empty slug becomes ``"item"`` so every title gets some usable name.
    """
    base = slugify(text, separator, max_length) or "item"
    if base not in existing:
        return base
    number = 2
    while True:
        suffix = f"{separator}{number}"
        stem = base
        if max_length is not None and len(stem) + len(suffix) > max_length:
            stem = stem[: max_length - len(suffix)].rstrip(separator)
        candidate = stem + suffix
        if candidate not in existing:
            return candidate
        number += 1
