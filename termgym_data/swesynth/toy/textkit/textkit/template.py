"""A small template engine.

Syntax::

    {{ expression }}                      output, optionally escaped
    {% if cond %}...{% elif cond %}...{% else %}...{% endif %}
    {% for x in items %}...{% else %}...{% endfor %}   (``loop.index`` etc. inside)
    {% for key, value in pairs %}...{% endfor %}
    {% set name = expression %}
    {# comment #}

A ``-`` just inside a delimiter (``{%-`` or ``-%}``) strips the whitespace on
that side of the tag.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from .escape import Markup, escape
from .expr import ExpressionError, evaluate, parse

_TAG_RE = re.compile(r"({{-?.*?-?}}|{%-?.*?-?%}|{#.*?#})", re.DOTALL)
_FOR_RE = re.compile(r"^for\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+in\s+(.+)$", re.DOTALL)
_SET_RE = re.compile(r"^set\s+([A-Za-z_]\w*)\s*=\s*(.+)$", re.DOTALL)


class TemplateSyntaxError(ValueError):
    """A malformed template, with the 1-based line of the offending tag."""

    def __init__(self, message: str, line: int) -> None:
        """Prefix the message with the line number."""
        super().__init__(f"line {line}: {message}")
        self.line = line


class TemplateRenderError(ValueError):
    """An expression failed while rendering; names the line and the expression."""


def _split(source: str) -> list[tuple[str, str, int]]:
    """Cut the source into (kind, content, line) pieces, applying ``-`` trimming.

    ``kind`` is ``text``, ``var``, ``block`` or ``comment``.
    """
    pieces: list[tuple[str, str, int]] = []
    line = 1
    strip_next = False
    for part in _TAG_RE.split(source):
        if not part:
            continue
        start_line = line
        line += part.count("\n")
        if part.startswith("{#"):
            pieces.append(("comment", part[2:-2], start_line))
            continue
        if part.startswith("{{") or part.startswith("{%"):
            inner = part[2:-2]
            if inner.startswith("-"):
                inner = inner[1:]
                if pieces and pieces[-1][0] == "text":
                    kind, text, text_line = pieces[-1]
                    pieces[-1] = (kind, text.rstrip(), text_line)
            strip_next = inner.endswith("-")
            if strip_next:
                inner = inner[:-1]
            pieces.append(("var" if part.startswith("{{") else "block", inner.strip(), start_line))
            continue
        if strip_next:
            part = part.lstrip()
            strip_next = False
        pieces.append(("text", part, start_line))
    return pieces


class _Builder:
    """Turns the flat piece list into a node tree."""

    def __init__(self, pieces: list[tuple[str, str, int]]) -> None:
        """Start before the first piece."""
        self.pieces = pieces
        self.index = 0

    def parse_expression(self, source: str, line: int) -> tuple:
        """Parse an expression, re-raising syntax errors with the template line."""
        if not source:
            raise TemplateSyntaxError("empty expression", line)
        try:
            return parse(source)
        except (ExpressionError, ValueError) as error:
            raise TemplateSyntaxError(f"{error} in {source!r}", line) from None

    def build(self, stop: tuple[str, ...] = ()) -> tuple[list, Optional[str], int]:
        """Nodes until a block tag whose first word is in ``stop``.

        Returns the nodes, the stopping tag's content (None at end of input) and its line.
        """
        nodes: list = []
        while self.index < len(self.pieces):
            kind, content, line = self.pieces[self.index]
            self.index += 1
            if kind == "text":
                nodes.append(("text", content))
            elif kind == "var":
                nodes.append(("output", self.parse_expression(content, line), content, line))
            elif kind == "block":
                word = content.split(None, 1)[0] if content else ""
                if word in stop:
                    return nodes, content, line
                nodes.append(self.build_block(word, content, line))
        return nodes, None, 0

    def build_block(self, word: str, content: str, line: int) -> tuple:
        """One ``if``, ``for`` or ``set`` block."""
        if word == "if":
            return self.build_if(content, line)
        if word == "for":
            return self.build_for(content, line)
        if word == "set":
            match = _SET_RE.match(content)
            if match is None:
                raise TemplateSyntaxError(f"malformed set tag {content!r}", line)
            return ("set", match.group(1), self.parse_expression(match.group(2), line), line)
        if word in ("elif", "else", "endif", "endfor"):
            raise TemplateSyntaxError(f"unexpected tag {word!r} without a matching opening tag", line)
        raise TemplateSyntaxError(f"unknown tag {word!r}", line)

    def build_if(self, content: str, line: int) -> tuple:
        """``if`` with any number of ``elif`` branches and an optional ``else``."""
        branches = []
        condition = self.parse_expression(content[2:].strip(), line)
        otherwise: list = []
        while True:
            body, tag, tag_line = self.build(("elif", "else", "endif"))
            branches.append((condition, body))
            if tag is None:
                raise TemplateSyntaxError("if block is never closed with endif", line)
            if tag.startswith("elif"):
                condition = self.parse_expression(tag[4:].strip(), tag_line)
                continue
            if tag == "else":
                otherwise, tag, _ = self.build(("endif",))
                if tag is None:
                    raise TemplateSyntaxError("if block is never closed with endif", line)
            return ("if", branches, otherwise)

    def build_for(self, content: str, line: int) -> tuple:
        """``for names in expression`` with an optional ``else`` for empty iterables."""
        match = _FOR_RE.match(content)
        if match is None:
            raise TemplateSyntaxError(f"malformed for tag {content!r}", line)
        names = [name.strip() for name in match.group(1).split(",")]
        iterable = self.parse_expression(match.group(2).strip(), line)
        body, tag, _ = self.build(("else", "endfor"))
        otherwise: list = []
        if tag == "else":
            otherwise, tag, _ = self.build(("endfor",))
        if tag is None:
            raise TemplateSyntaxError("for block is never closed with endfor", line)
        return ("for", names, iterable, body, otherwise, line)


class LoopInfo:
    """The ``loop`` variable inside a for block."""

    def __init__(self, index0: int, length: int) -> None:
        """Position ``index0`` (0-based) in a sequence of ``length`` items."""
        self.index0 = index0
        self.length = length

    @property
    def index(self) -> int:
        """1-based position."""
        return self.index0 + 1

    @property
    def revindex(self) -> int:
        """Items left including this one."""
        return self.length - self.index0

    @property
    def first(self) -> bool:
        """True on the first iteration."""
        return self.index0 == 0

    @property
    def last(self) -> bool:
        """True on the last iteration."""
        return self.index0 == self.length - 1

    def cycle(self, *values: Any) -> Any:
        """Pick values in turn, e.g. ``loop.cycle('odd', 'even')``."""
        if not values:
            raise ExpressionError("cycle needs at least one value")
        return values[self.index0 % len(values)]


class Template:
    """A compiled template; call :meth:`render` with variables."""

    def __init__(self, source: str, autoescape: bool = False,
                 filters: Optional[dict[str, Callable]] = None) -> None:
        """Compile ``source``; syntax errors raise ``TemplateSyntaxError`` at once."""
        self.source = source
        self.autoescape = autoescape
        self.filters = dict(filters or {})
        builder = _Builder(_split(source))
        self.nodes, _, _ = builder.build()

    def render(self, context: Optional[dict[str, Any]] = None, **variables: Any) -> str:
        """Render with ``context`` and keyword ``variables`` (keywords win)."""
        scope = dict(context or {})
        scope.update(variables)
        out: list[str] = []
        self._render_nodes(self.nodes, scope, out)
        return "".join(out)

    def _eval(self, node: tuple, scope: dict[str, Any], source: str, line: int) -> Any:
        """Evaluate an expression, naming the line when it fails."""
        try:
            return evaluate(node, scope, self.filters)
        except ExpressionError as error:
            raise TemplateRenderError(f"line {line}: {error} in {{{{ {source} }}}}") from None

    def _render_nodes(self, nodes: list, scope: dict[str, Any], out: list[str]) -> None:
        """Append the rendering of ``nodes`` to ``out``."""
        for node in nodes:
            kind = node[0]
            if kind == "text":
                out.append(node[1])
            elif kind == "output":
                value = self._eval(node[1], scope, node[2], node[3])
                if value is None:
                    continue
                out.append(escape(value) if self.autoescape else str(value))
            elif kind == "set":
                scope[node[1]] = self._eval(node[2], scope, node[1], node[3])
            elif kind == "if":
                for condition, body in node[1]:
                    if evaluate(condition, scope, self.filters):
                        self._render_nodes(body, scope, out)
                        break
                else:
                    self._render_nodes(node[2], scope, out)
            elif kind == "for":
                self._render_for(node, scope, out)

    def _render_for(self, node: tuple, scope: dict[str, Any], out: list[str]) -> None:
        """Render a for block; loop variables do not leak out of it."""
        _, names, iterable_node, body, otherwise, line = node
        items = list(self._eval(iterable_node, scope, "for", line) or [])
        if not items:
            self._render_nodes(otherwise, scope, out)
            return
        for index0, item in enumerate(items):
            inner = dict(scope)
            if len(names) == 1:
                inner[names[0]] = item
            else:
                values = list(item)
                if len(values) != len(names):
                    raise TemplateRenderError(
                        f"line {line}: cannot unpack {len(values)} values into {len(names)} names"
                    )
                inner.update(zip(names, values))
            inner["loop"] = LoopInfo(index0, len(items))
            self._render_nodes(body, inner, out)


def render(source: str, context: Optional[dict[str, Any]] = None, autoescape: bool = False,
           **variables: Any) -> str:
    """Compile and render in one call."""
    return Template(source, autoescape=autoescape).render(context, **variables)


def safe(text: str) -> Markup:
    """Mark ``text`` as HTML that autoescape must leave alone."""
    return Markup(text)
