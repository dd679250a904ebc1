"""A tokenizer for the small expression language used by templates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "none", "is"})

# Longest operators first so ``<=`` is not read as ``<`` then ``=``.
OPERATORS = ("**", "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%",
             "(", ")", "[", "]", ",", ".", "|", ":")

ESCAPE_SEQUENCES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


class TokenizeError(ValueError):
    """Bad input, with the 1-based line and column where it was found."""

    def __init__(self, message: str, line: int, column: int) -> None:
        """Build the message ``"message at line L, column C"``."""
        super().__init__(f"{message} at line {line}, column {column}")
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Token:
    """One token: its kind (NAME, NUMBER, STRING, KEYWORD, OP, EOF), value and position."""

    kind: str
    value: Union[str, int, float, None]
    line: int
    column: int


class _Scanner:
    """Cursor over the source that tracks line and column."""

    def __init__(self, source: str) -> None:
        """Start at the first character."""
        self.source = source
        self.pos = 0
        self.line = 1
        self.column = 1

    def peek(self, offset: int = 0) -> str:
        """The character ``offset`` ahead, or ``""`` past the end."""
        index = self.pos + offset
        return self.source[index] if index < len(self.source) else ""

    def advance(self, count: int = 1) -> str:
        """Consume ``count`` characters and return them."""
        text = self.source[self.pos:self.pos + count]
        for char in text:
            if char == "\n":
                self.line += 1
                self.column = 1
            else:
                self.column += 1
        self.pos += len(text)
        return text

    def error(self, message: str) -> TokenizeError:
        """An error at the current position."""
        return TokenizeError(message, self.line, self.column)


def _read_number(scanner: _Scanner) -> Union[int, float]:
    """Read ``12``, ``3.5``, ``.5``, ``1e3`` or ``2.5E-2``."""
    start = scanner.pos
    is_float = False
    while scanner.peek().isdigit():
        scanner.advance()
    if scanner.peek() == "." and scanner.peek(1).isdigit():
        is_float = True
        scanner.advance()
        while scanner.peek().isdigit():
            scanner.advance()
    if scanner.peek() in ("e", "E"):
        sign = 1 if scanner.peek(1) in ("+", "-") else 0
        if scanner.peek(1 + sign).isdigit():
            is_float = True
            scanner.advance(1 + sign)
            while scanner.peek().isdigit():
                scanner.advance()
    text = scanner.source[start:scanner.pos]
    if scanner.peek().isalpha() or scanner.peek() == "_":
        raise scanner.error(f"invalid number {text + scanner.peek()!r}")
    return float(text) if is_float else int(text)


def _read_string(scanner: _Scanner) -> str:
    """Read a quoted string with backslash escapes, including ``\\uXXXX``."""
    quote = scanner.advance()
    chars: list[str] = []
    while True:
        char = scanner.peek()
        if char == "" or char == "\n":
            raise scanner.error("unterminated string")
        scanner.advance()
        if char == quote:
            return "".join(chars)
        if char != "\\":
            chars.append(char)
            continue
        code = scanner.peek()
        if code == "u":
            digits = scanner.source[scanner.pos + 1:scanner.pos + 5]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise scanner.error("bad \\u escape")
            chars.append(chr(int(digits, 16)))
            scanner.advance(5)
        elif code in ESCAPE_SEQUENCES:
            chars.append(ESCAPE_SEQUENCES[code])
            scanner.advance()
        else:
            raise scanner.error(f"unknown escape \\{code}")


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens, ending with one ``EOF`` token.

    ``#`` starts a comment running to the end of the line. Names are letters,
    digits and underscores not starting with a digit; reserved words come back
    as ``KEYWORD`` tokens.
    """
    scanner = _Scanner(source)
    tokens: list[Token] = []
    while True:
        char = scanner.peek()
        if char == "":
            break
        if char.isspace():
            scanner.advance()
            continue
        if char == "#":
            while scanner.peek() not in ("", "\n"):
                scanner.advance()
            continue
        line, column = scanner.line, scanner.column
        if char.isdigit() or (char == "." and scanner.peek(1).isdigit()):
            tokens.append(Token("NUMBER", _read_number(scanner), line, column))
        elif char in ("'", '"'):
            tokens.append(Token("STRING", _read_string(scanner), line, column))
        elif char.isalpha() or char == "_":
            start = scanner.pos
            while scanner.peek().isalnum() or scanner.peek() == "_":
                scanner.advance()
            word = source[start:scanner.pos]
            kind = "KEYWORD" if word in KEYWORDS else "NAME"
            tokens.append(Token(kind, word, line, column))
        else:
            for op in OPERATORS:
                if source.startswith(op, scanner.pos):
                    scanner.advance(len(op))
                    tokens.append(Token("OP", op, line, column))
                    break
            else:
                raise scanner.error(f"unexpected character {char!r}")
    tokens.append(Token("EOF", None, scanner.line, scanner.column))
    return tokens
