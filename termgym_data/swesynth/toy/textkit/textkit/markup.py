"""A small Markdown-like markup language rendered to HTML.

Blocks: ``#`` headings (1-6, with generated ids), paragraphs, ``-``/``*`` and
``1.`` lists, ``>`` quotes, fenced code with an optional language, ``---``
rules. Inline: ``**strong**``, ``*em*``, `` `code` ``, ``[text](url)``,
``![alt](src)`` and a hard break from two trailing spaces.
"""

from __future__ import annotations

import re
from typing import Optional

from .escape import attributes, escape
from .slug import unique_slug

MAX_HEADING_LEVEL = 6
SAFE_SCHEMES = ("http://", "https://", "mailto:", "/", "#", "./", "../")

_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_RULE_RE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_BULLET_RE = re.compile(r"^\s*[-*+]\s+(.*)$")
_ORDERED_RE = re.compile(r"^\s*(\d{1,9})[.)]\s+(.*)$")
_FENCE_RE = re.compile(r"^```\s*([\w+-]*)\s*$")
_CODE_SPAN_RE = re.compile(r"`([^`]+)`")
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK_RE = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_STRONG_RE = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EM_RE = re.compile(r"\*(?=\S)(.+?)(?<=\S)\*")


def safe_url(url: str) -> str:
    """``url`` if its scheme is allowed (or it is relative), else ``#``."""
    lowered = url.strip().lower()
    if lowered.startswith(SAFE_SCHEMES):
        return url.strip()
    if ":" not in lowered.split("/", 1)[0]:
        return url.strip()
    return "#"


def render_inline(text: str) -> str:
    """Escape ``text`` and apply inline markup.

    Code spans are cut out first so nothing inside them is interpreted.
    """
    stash: list[str] = []

    def keep(html: str) -> str:
        """Store finished HTML and leave a placeholder that later passes cannot touch."""
        stash.append(html)
        return f"\x00{len(stash) - 1}\x00"

    text = _CODE_SPAN_RE.sub(lambda m: keep(f"<code>{escape(m.group(1))}</code>"), text)
    text = _IMAGE_RE.sub(
        lambda m: keep(f"<img{attributes({'alt': m.group(1), 'src': safe_url(m.group(2))})}>"), text
    )
    text = _LINK_RE.sub(
        lambda m: keep(f"<a href=\"{escape(safe_url(m.group(2)))}\">") + m.group(1) + keep("</a>"), text
    )
    hard_break = text.endswith("  ")
    text = str(escape(text.rstrip(" ") if hard_break else text, quote=False))
    text = _STRONG_RE.sub(r"<strong>\1</strong>", text)
    text = _EM_RE.sub(r"<em>\1</em>", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: stash[int(m.group(1))], text)
    return text + "<br>" if hard_break else text


class Renderer:
    """Renders a document; keeps the heading ids used so far unique."""

    def __init__(self, heading_ids: bool = True) -> None:
        """With ``heading_ids`` every heading gets an ``id`` made from its text."""
        self.heading_ids = heading_ids
        self.used_ids: set[str] = set()
        self.headings: list[tuple[int, str, Optional[str]]] = []

    def render(self, source: str) -> str:
        """HTML for ``source``, one block per line."""
        return "\n".join(self._blocks(source.splitlines()))

    def _blocks(self, lines: list[str]) -> list[str]:
        """HTML for each block found in ``lines``."""
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            fence = _FENCE_RE.match(line)
            if fence:
                i = self._code_block(lines, i, fence.group(1), out)
            elif _HEADING_RE.match(line):
                out.append(self._heading(line))
                i += 1
            elif _RULE_RE.match(line):
                out.append("<hr>")
                i += 1
            elif line.lstrip().startswith(">"):
                i = self._quote(lines, i, out)
            elif _BULLET_RE.match(line) or _ORDERED_RE.match(line):
                i = self._list(lines, i, out)
            else:
                i = self._paragraph(lines, i, out)
        return out

    def _heading(self, line: str) -> str:
        """``<hN id="...">`` for a heading line."""
        match = _HEADING_RE.match(line)
        assert match is not None
        level = min(len(match.group(1)), MAX_HEADING_LEVEL)
        text = match.group(2)
        ident = None
        if self.heading_ids:
            ident = unique_slug(text, self.used_ids)
            self.used_ids.add(ident)
        self.headings.append((level, text, ident))
        return f"<h{level}{attributes({'id': ident})}>{render_inline(text)}</h{level}>"

    def _code_block(self, lines: list[str], start: int, language: str, out: list[str]) -> int:
        """A fenced block runs to the closing fence or the end of the document."""
        body = []
        i = start + 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        cls = attributes({"class": f"language-{language}" if language else None})
        out.append(f"<pre><code{cls}>{escape(chr(10).join(body), quote=False)}</code></pre>")
        return i + 1

    def _quote(self, lines: list[str], start: int, out: list[str]) -> int:
        """Consecutive ``>`` lines, rendered recursively as their own document."""
        inner = []
        i = start
        while i < len(lines) and lines[i].lstrip().startswith(">"):
            stripped = lines[i].lstrip()[1:]
            inner.append(stripped[1:] if stripped.startswith(" ") else stripped)
            i += 1
        out.append("<blockquote>\n" + "\n".join(self._blocks(inner)) + "\n</blockquote>")
        return i

    def _list(self, lines: list[str], start: int, out: list[str]) -> int:
        """A run of items of one list kind; an ordered list keeps its first number."""
        ordered = _ORDERED_RE.match(lines[start]) is not None
        pattern = _ORDERED_RE if ordered else _BULLET_RE
        items: list[str] = []
        first_number = 1
        i = start
        while i < len(lines):
            match = pattern.match(lines[i])
            if match:
                if ordered and not items:
                    first_number = int(match.group(1))
                items.append(match.group(match.lastindex or 1))
            elif lines[i].startswith("  ") and lines[i].strip() and items:
                items[-1] += " " + lines[i].strip()
            else:
                break
            i += 1
        tag = "ol" if ordered else "ul"
        start_attr = attributes({"start": first_number if ordered and first_number != 1 else None})
        body = "\n".join(f"<li>{render_inline(item)}</li>" for item in items)
        out.append(f"<{tag}{start_attr}>\n{body}\n</{tag}>")
        return i

    def _paragraph(self, lines: list[str], start: int, out: list[str]) -> int:
        """Lines up to a blank line or the start of another block."""
        parts = []
        i = start
        while i < len(lines) and lines[i].strip():
            line = lines[i]
            if i > start and (_HEADING_RE.match(line) or _FENCE_RE.match(line) or _RULE_RE.match(line)
                              or line.lstrip().startswith(">") or _BULLET_RE.match(line)):
                break
            parts.append(render_inline(line.strip() + ("  " if line.endswith("  ") else "")))
            i += 1
        out.append("<p>" + "\n".join(parts) + "</p>")
        return i

    def table_of_contents(self, max_level: int = 3) -> str:
        """A nested-looking ``<ul>`` of links to headings rendered so far, up to ``max_level``."""
        rows = []
        for level, text, ident in self.headings:
            if level > max_level or ident is None:
                continue
            indent = "  " * (level - 1)
            rows.append(f'{indent}<li><a href="#{ident}">{render_inline(text)}</a></li>')
        if not rows:
            return ""
        return "<ul>\n" + "\n".join(rows) + "\n</ul>"


def to_html(source: str, heading_ids: bool = True) -> str:
    """Render ``source`` to HTML with a fresh :class:`Renderer`."""
    return Renderer(heading_ids).render(source)
