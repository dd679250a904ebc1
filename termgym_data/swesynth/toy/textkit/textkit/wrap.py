"""Wrapping, justifying, indenting and truncating plain text."""

from __future__ import annotations

from typing import Callable, Optional

DEFAULT_WIDTH = 70
ELLIPSIS = "..."


def wrap(text: str, width: int = DEFAULT_WIDTH, break_long_words: bool = True) -> list[str]:
    """Break ``text`` into lines of at most ``width`` characters at spaces.

    Whitespace runs (newlines included) count as one space. A word longer than
    ``width`` is split across lines when ``break_long_words``; otherwise it gets a
    line of its own that is longer than ``width``.
    """
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    lines: list[str] = []
    current = ""
    for word in text.split():
        while break_long_words and len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current = f"{current} {word}"
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def fill(text: str, width: int = DEFAULT_WIDTH, paragraphs: bool = True) -> str:
    """Wrap into one string; blank lines separate paragraphs when ``paragraphs``."""
    if not paragraphs:
        return "\n".join(wrap(text, width))
    blocks = [b for b in _split_paragraphs(text) if b.strip()]
    return "\n\n".join("\n".join(wrap(block, width)) for block in blocks)


def _split_paragraphs(text: str) -> list[str]:
    """Split on lines that are empty or only whitespace."""
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def justify_line(line: str, width: int) -> str:
    """Pad the gaps of ``line`` so it is exactly ``width`` wide; leftmost gaps get the extra space."""
    words = line.split()
    if len(words) < 2:
        return line.ljust(width)
    gaps = len(words) - 1
    spaces = width - sum(len(w) for w in words)
    if spaces < gaps:
        raise ValueError(f"line is wider than {width}: {line!r}")
    base, extra = divmod(spaces, gaps)
    out = []
    for i, word in enumerate(words[:-1]):
        out.append(word)
        out.append(" " * (base + (1 if i < extra else 0)))
    out.append(words[-1])
    return "".join(out)


def justify(text: str, width: int = DEFAULT_WIDTH) -> str:
    """Wrap and fully justify; the last line stays ragged, as in print."""
    lines = wrap(text, width)
    if not lines:
        return ""
    body = [justify_line(line, width) for line in lines[:-1]]
    return "\n".join(body + [lines[-1]])


def indent(text: str, prefix: str, predicate: Optional[Callable[[str], bool]] = None,
           first_prefix: Optional[str] = None) -> str:
    """Prefix lines of ``text``; by default only lines that are not blank.

    ``first_prefix`` replaces ``prefix`` on the first line (a hanging indent or a
    list bullet).
    """
    test = predicate if predicate is not None else (lambda line: bool(line.strip()))
    out = []
    for number, line in enumerate(text.splitlines(keepends=True)):
        lead = first_prefix if number == 0 and first_prefix is not None else prefix
        out.append(lead + line if test(line) else line)
    return "".join(out)


def dedent(text: str) -> str:
    """Remove the longest common leading whitespace of non-blank lines."""
    lines = text.splitlines()
    margins = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    if not margins:
        return "\n".join(line.strip() for line in lines)
    cut = min(margins)
    return "\n".join(line[cut:] if line.strip() else "" for line in lines)


def truncate(text: str, length: int, ellipsis: str = ELLIPSIS, whole_words: bool = True) -> str:
    """Shorten ``text`` to at most ``length`` characters, ending with ``ellipsis``.

    With ``whole_words`` the cut moves back to the last space so no word is
    chopped, unless that would leave nothing.
    """
    if length < len(ellipsis):
        raise ValueError(f"length {length} cannot hold the ellipsis {ellipsis!r}")
    if len(text) <= length:
        return text
    room = length - len(ellipsis)
    cut = text[:room]
    if whole_words and room < len(text) and text[room] != " ":
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    return cut.rstrip() + ellipsis


def center(text: str, width: int, fill_char: str = " ") -> str:
    """Center ``text`` in ``width``; an odd leftover goes to the right side."""
    if len(fill_char) != 1:
        raise ValueError("fill_char must be one character")
    if len(text) >= width:
        return text
    total = width - len(text)
    left = total // 2
    return fill_char * left + text + fill_char * (total - left)


def columns(items: list[str], width: int = DEFAULT_WIDTH, gap: int = 2) -> str:
    """Lay ``items`` out column-major in as many columns as fit, like ``ls``."""
    if not items:
        return ""
    cell = max(len(item) for item in items) + gap
    count = max(1, (width + gap) // cell)
    rows = -(-len(items) // count)
    lines = []
    for r in range(rows):
        row = [items[c * rows + r] for c in range(count) if c * rows + r < len(items)]
        lines.append("".join(item.ljust(cell) for item in row).rstrip())
    return "\n".join(lines)
