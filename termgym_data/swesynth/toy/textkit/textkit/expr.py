"""Parsing and evaluating template expressions.

Grammar, lowest precedence first: ``or``, ``and``, ``not``, comparisons
(``== != < <= > >= in, not in, is, is not``), ``+ -``, ``* / // %``, unary
``-``, ``**`` (right-associative), then postfix attribute access, indexing,
calls and ``| filter(args)``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from .escape import Markup, escape
from .tokens import Token, tokenize

Node = tuple

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not")
ADDITIVE = ("+", "-")
MULTIPLICATIVE = ("*", "/", "//", "%")
CONSTANTS = {"true": True, "false": False, "none": None}


class ExpressionError(ValueError):
    """A syntax error or an evaluation failure in an expression."""


class _Parser:
    """Recursive-descent parser producing nested tuples."""

    def __init__(self, tokens: list[Token]) -> None:
        """Parse ``tokens`` from the start."""
        self.tokens = tokens
        self.index = 0

    @property
    def current(self) -> Token:
        """The token under the cursor."""
        return self.tokens[self.index]

    def accept(self, kind: str, value: object = None) -> Optional[Token]:
        """Consume and return the current token if it matches, else None."""
        token = self.current
        if token.kind == kind and (value is None or token.value == value):
            self.index += 1
            return token
        return None

    def expect(self, kind: str, value: object = None) -> Token:
        """Consume a matching token or raise naming what was expected."""
        token = self.accept(kind, value)
        if token is None:
            wanted = value if value is not None else kind
            got = self.current.value if self.current.kind != "EOF" else "end of input"
            raise ExpressionError(f"expected {wanted!r} but found {got!r} at column {self.current.column}")
        return token

    def parse(self) -> Node:
        """A whole expression that must use every token."""
        node = self.parse_or()
        if self.current.kind != "EOF":
            raise ExpressionError(f"unexpected {self.current.value!r} at column {self.current.column}")
        return node

    def parse_or(self) -> Node:
        """``a or b or c``."""
        node = self.parse_and()
        while self.accept("KEYWORD", "or"):
            node = ("or", node, self.parse_and())
        return node

    def parse_and(self) -> Node:
        """``a and b``."""
        node = self.parse_not()
        while self.accept("KEYWORD", "and"):
            node = ("and", node, self.parse_not())
        return node

    def parse_not(self) -> Node:
        """``not a``."""
        if self.accept("KEYWORD", "not"):
            return ("not", self.parse_not())
        return self.parse_comparison()

    def _comparison_operator(self) -> Optional[str]:
        """Consume a comparison operator if one is next."""
        token = self.current
        if token.kind == "OP" and token.value in COMPARISONS:
            self.index += 1
            return str(token.value)
        if self.accept("KEYWORD", "in"):
            return "in"
        if self.accept("KEYWORD", "is"):
            return "is not" if self.accept("KEYWORD", "not") else "is"
        if token.kind == "KEYWORD" and token.value == "not" and self.tokens[self.index + 1].value == "in":
            self.index += 2
            return "not in"
        return None

    def parse_comparison(self) -> Node:
        """Chained comparisons such as ``0 < x <= 10``."""
        left = self.parse_additive()
        parts = []
        while True:
            op = self._comparison_operator()
            if op is None:
                break
            parts.append((op, self.parse_additive()))
        return ("compare", left, parts) if parts else left

    def parse_additive(self) -> Node:
        """``a + b - c``."""
        node = self.parse_term()
        while self.current.kind == "OP" and self.current.value in ADDITIVE:
            op = self.expect("OP").value
            node = ("binary", op, node, self.parse_term())
        return node

    def parse_term(self) -> Node:
        """``a * b / c // d % e``."""
        node = self.parse_unary()
        while self.current.kind == "OP" and self.current.value in MULTIPLICATIVE:
            op = self.expect("OP").value
            node = ("binary", op, node, self.parse_unary())
        return node

    def parse_unary(self) -> Node:
        """``-a`` and ``+a``."""
        if self.accept("OP", "-"):
            return ("negate", self.parse_unary())
        if self.accept("OP", "+"):
            return self.parse_unary()
        return self.parse_power()

    def parse_power(self) -> Node:
        """``a ** b``, binding right to left and tighter than unary minus on its left."""
        base = self.parse_postfix()
        if self.accept("OP", "**"):
            return ("binary", "**", base, self.parse_unary())
        return base

    def _arguments(self, closing: str) -> list[Node]:
        """Comma-separated expressions up to ``closing``."""
        args: list[Node] = []
        if self.accept("OP", closing):
            return args
        while True:
            args.append(self.parse_or())
            if self.accept("OP", closing):
                return args
            self.expect("OP", ",")

    def parse_postfix(self) -> Node:
        """Attribute access, indexing, calls and filters after a primary."""
        node = self.parse_primary()
        while True:
            if self.accept("OP", "."):
                node = ("attr", node, self.expect("NAME").value)
            elif self.accept("OP", "["):
                node = ("index", node, self.parse_or())
                self.expect("OP", "]")
            elif self.accept("OP", "("):
                node = ("call", node, self._arguments(")"))
            elif self.accept("OP", "|"):
                name = self.expect("NAME").value
                args = self._arguments(")") if self.accept("OP", "(") else []
                node = ("filter", name, node, args)
            else:
                return node

    def parse_primary(self) -> Node:
        """Literals, names, parenthesised expressions and list literals."""
        token = self.current
        if token.kind in ("NUMBER", "STRING"):
            self.index += 1
            return ("const", token.value)
        if token.kind == "KEYWORD" and token.value in CONSTANTS:
            self.index += 1
            return ("const", CONSTANTS[str(token.value)])
        if token.kind == "NAME":
            self.index += 1
            return ("name", token.value)
        if self.accept("OP", "("):
            node = self.parse_or()
            self.expect("OP", ")")
            return node
        if self.accept("OP", "["):
            return ("list", self._arguments("]"))
        found = "end of input" if token.kind == "EOF" else repr(token.value)
        raise ExpressionError(f"unexpected {found} at column {token.column}")


def parse(source: str) -> Node:
    """Parse an expression string into a tree of tuples."""
    return _Parser(tokenize(source)).parse()


def _truncate(value: object, length: int = 20, end: str = "...") -> str:
    """Filter: shorten a string to ``length`` characters including ``end``."""
    text = str(value)
    if len(text) <= length:
        return text
    return text[: max(0, length - len(end))] + end


def _default(value: object, fallback: object = "", boolean: bool = False) -> object:
    """Filter: ``fallback`` when the value is None (or falsy, with ``boolean``)."""
    if value is None or (boolean and not value):
        return fallback
    return value


FILTERS: dict[str, Callable[..., Any]] = {
    "upper": lambda v: str(v).upper(),
    "lower": lambda v: str(v).lower(),
    "title": lambda v: str(v).title(),
    "capitalize": lambda v: str(v)[:1].upper() + str(v)[1:].lower(),
    "trim": lambda v: str(v).strip(),
    "length": len,
    "first": lambda v: v[0] if len(v) > 0 else None,
    "last": lambda v: v[-1] if len(v) > 0 else None,
    "join": lambda v, sep="": sep.join(str(x) for x in v),
    "reverse": lambda v: v[::-1] if isinstance(v, str) else list(reversed(v)),
    "sort": lambda v, reverse=False: sorted(v, reverse=reverse),
    "default": _default,
    "round": lambda v, digits=0: round(v, digits) if digits else int(round(v)),
    "abs": abs,
    "int": lambda v: int(float(v)),
    "truncate": _truncate,
    "escape": escape,
    "safe": lambda v: Markup(str(v)),
    "replace": lambda v, old, new: str(v).replace(old, new),
    "sum": lambda v: sum(v),
    "ceil": math.ceil,
}


def _compare(op: str, left: Any, right: Any) -> bool:
    """Apply one comparison operator."""
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    if op == "in":
        return left in right
    if op == "not in":
        return left not in right
    if op == "is":
        return left is right
    return left is not right


def _binary(op: str, left: Any, right: Any) -> Any:
    """Apply one arithmetic operator, turning division by zero into an ExpressionError."""
    try:
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if op == "/":
            return left / right
        if op == "//":
            return left // right
        if op == "%":
            return left % right
        return left ** right
    except ZeroDivisionError:
        raise ExpressionError(f"division by zero in {op!r}") from None
    except TypeError as error:
        raise ExpressionError(f"cannot apply {op!r}: {error}") from None


def lookup(value: Any, key: Any) -> Any:
    """``value.key``: a mapping key first, then a public attribute."""
    if isinstance(key, str) and key.startswith("_"):
        raise ExpressionError(f"access to private attribute {key!r} is not allowed")
    if isinstance(value, dict):
        if key in value:
            return value[key]
        raise ExpressionError(f"no key {key!r}")
    try:
        return getattr(value, key)
    except AttributeError:
        raise ExpressionError(f"{type(value).__name__} has no attribute {key!r}") from None


def evaluate(node: Node, context: dict[str, Any], filters: Optional[dict[str, Callable]] = None) -> Any:
    """Evaluate a parsed expression against ``context``.

    Unknown names raise ``ExpressionError``; ``and``/``or`` short-circuit and
    return one of their operands, as in Python.
    """
    table = FILTERS if filters is None else {**FILTERS, **filters}
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "name":
        if node[1] not in context:
            raise ExpressionError(f"undefined name {node[1]!r}")
        return context[node[1]]
    if kind == "list":
        return [evaluate(item, context, filters) for item in node[1]]
    if kind == "or":
        left = evaluate(node[1], context, filters)
        return left if left else evaluate(node[2], context, filters)
    if kind == "and":
        left = evaluate(node[1], context, filters)
        return evaluate(node[2], context, filters) if left else left
    if kind == "not":
        return not evaluate(node[1], context, filters)
    if kind == "negate":
        return -evaluate(node[1], context, filters)
    if kind == "compare":
        left = evaluate(node[1], context, filters)
        for op, right_node in node[2]:
            right = evaluate(right_node, context, filters)
            try:
                if not _compare(op, left, right):
                    return False
            except TypeError as error:
                raise ExpressionError(f"cannot compare with {op!r}: {error}") from None
            left = right
        return True
    if kind == "binary":
        return _binary(node[1], evaluate(node[2], context, filters), evaluate(node[3], context, filters))
    if kind == "attr":
        return lookup(evaluate(node[1], context, filters), node[2])
    if kind == "index":
        container = evaluate(node[1], context, filters)
        key = evaluate(node[2], context, filters)
        try:
            return container[key]
        except (IndexError, KeyError, TypeError):
            raise ExpressionError(f"cannot index with {key!r}") from None
    if kind == "call":
        function = evaluate(node[1], context, filters)
        if not callable(function):
            raise ExpressionError(f"{type(function).__name__} is not callable")
        return function(*[evaluate(arg, context, filters) for arg in node[2]])
    if kind == "filter":
        name = node[1]
        if name not in table:
            raise ExpressionError(f"unknown filter {name!r}")
        value = evaluate(node[2], context, filters)
        args = [evaluate(arg, context, filters) for arg in node[3]]
        return table[name](value, *args)
    raise ExpressionError(f"unknown node {kind!r}")


def evaluate_source(source: str, context: Optional[dict[str, Any]] = None, **names: Any) -> Any:
    """Parse and evaluate ``source`` in one step."""
    scope = dict(context or {})
    scope.update(names)
    return evaluate(parse(source), scope)
