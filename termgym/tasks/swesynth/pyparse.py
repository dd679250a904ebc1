"""Thread-safe ``ast.parse`` for generation's worker threads.

CPython before 3.11.8 / 3.12.1 keeps the AST converter's recursion counter in interpreter-wide
state (gh-106905). When two threads parse at once and one of them drops the GIL mid-conversion
(a garbage collection that runs Python code is enough), the other's counter leaks in and
``ast.parse`` raises ``SystemError: AST constructor recursion depth mismatch``. Generation parses
from several threads, so every parse in this package goes through one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)``, serialised across threads."""
    with _LOCK:
        return ast.parse(source, mode=mode)
