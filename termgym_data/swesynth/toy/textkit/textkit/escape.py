"""HTML escaping, unescaping and tag stripping."""

from __future__ import annotations

import re

ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"}

NAMED_ENTITIES = {
    "amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'", "nbsp": "\u00a0",
    "copy": "\u00a9", "reg": "\u00ae", "mdash": "\u2014", "ndash": "\u2013",
    "hellip": "\u2026", "euro": "\u20ac", "laquo": "\u00ab", "raquo": "\u00bb",
}

_ENTITY_RE = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[a-zA-Z]+);")
_TAG_RE = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*>")
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
BLOCK_TAGS = frozenset({"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "blockquote"})
MAX_CODE_POINT = 0x10FFFF


class Markup(str):
    """A string already safe to insert into HTML; escaping leaves it unchanged."""

    def __html__(self) -> str:
        """The protocol other template libraries use to recognise safe strings."""
        return str(self)


def escape(text: object, quote: bool = True) -> Markup:
    """Escape ``&``, ``<`` and ``>`` (and quotes when ``quote``) for HTML.

    ``Markup`` values are returned untouched; ``None`` becomes the empty string.
    """
    if isinstance(text, Markup):
        return text
    if text is None:
        return Markup("")
    value = str(text)
    out = []
    for char in value:
        if char in ESCAPES and (quote or char not in "\"'"):
            out.append(ESCAPES[char])
        else:
            out.append(char)
    return Markup("".join(out))


def _decode_entity(match: re.Match) -> str:
    """Replacement for one entity; unknown or invalid ones are kept as written."""
    body = match.group(1)
    if body.startswith("#"):
        try:
            code = int(body[2:], 16) if body[1] in "xX" else int(body[1:])
        except ValueError:
            return match.group(0)
        if code <= 0 or code > MAX_CODE_POINT:
            return "\ufffd"
        return chr(code)
    return NAMED_ENTITIES.get(body.lower(), match.group(0))


def unescape(text: str) -> str:
    """Turn named (``&amp;``) and numeric (``&#38;``, ``&#x26;``) entities back into characters."""
    return _ENTITY_RE.sub(_decode_entity, text)


def strip_tags(html: str, keep_breaks: bool = False) -> str:
    """Remove tags and comments and unescape entities, leaving the text.

    With ``keep_breaks`` block-level tags become newlines so paragraphs stay apart.
    Runs of spaces collapse to one; leading and trailing space is removed.
    """
    without_comments = _COMMENT_RE.sub("", html)

    def replace(match: re.Match) -> str:
        """A newline for block tags when asked, else nothing."""
        if keep_breaks and match.group(2).lower() in BLOCK_TAGS:
            return "\n"
        return ""

    text = unescape(_TAG_RE.sub(replace, without_comments))
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.split("\n")]
    if keep_breaks:
        collapsed: list[str] = []
        for line in lines:
            if line or (collapsed and collapsed[-1]):
                collapsed.append(line)
        return "\n".join(collapsed).strip()
    return " ".join(line for line in lines if line)


def attributes(attrs: dict[str, object]) -> str:
    """Render HTML attributes sorted by name: ``True`` gives a bare name, ``None``/``False`` skip it."""
    parts = []
    for name in sorted(attrs):
        value = attrs[name]
        if value is None or value is False:
            continue
        if value is True:
            parts.append(f" {name}")
        else:
            parts.append(f' {name}="{escape(value)}"')
    return "".join(parts)
