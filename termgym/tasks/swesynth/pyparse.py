"""Thread-safe ``ast.parse`` for generation's worker threads.

CPython 3.11 and 3.12 keep the AST converter's recursion counter in interpreter-wide state
(gh-106905). When two threads parse at once and one of them drops the GIL mid-conversion (a
garbage collection that runs Python code is enough), the other's counter leaks in and
``ast.parse`` raises ``SystemError: AST constructor recursion depth mismatch``. Generation parses
from several threads, so every parse in this package goes through one lock, and
:func:`serialise_every_parse` routes the standard library's own parses there too
(``ast.literal_eval``, and ``traceback``'s caret placement when a thread formats an exception):
on 3.11.7 a resumed build lost three projects' runs to the race before it did.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()  # re-entrant: a collection inside a parse may run code that parses
_ORIGINAL_PARSE = ast.parse


def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)``, serialised across threads."""
    with _LOCK:
        return _ORIGINAL_PARSE(source, mode=mode)


def _locked_parse(source, filename="<unknown>", mode="exec", *, type_comments=False, feature_version=None):
    with _LOCK:
        return _ORIGINAL_PARSE(source, filename, mode, type_comments=type_comments,
                               feature_version=feature_version)


def serialise_every_parse() -> None:
    """Make ``ast.parse`` itself take the lock, for the whole process (idempotent): callers outside
    this package, the standard library's included, then cannot race generation's threads."""
    ast.parse = _locked_parse
