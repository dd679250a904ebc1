"""Bugs a person would write: what the operators no longer produce, and the failures that give one away.

Some edits an operator can make are never made by a person: the arguments of a built-in in the
wrong order (``isinstance(Duration, other)``), an operation the operands' types do not support
(``str - str``), a name that is not bound where it is read (a comprehension's variable used after
it, raising ``NameError``), a literal no library accepts (the file mode ``'Rb+'``). A policy trained
on them learns to spot machine edits, not to debug. Two layers keep them out:

* **at the source** the operators skip what is recognisable from the code alone: built-ins and
  fixed-order methods in :func:`is_fixed_order_call` (call-argument swaps), operands that are
  evidently strings or sequences in :func:`is_string_like` (arithmetic operator swaps), names bound
  in a nested scope (``wrong-variable``, :func:`~termgym.factory.swesynth.bugs.source._function_names`)
  and case changes of short code-like strings (``wrong-constant``);
* **at validation** :func:`implausible_failure` reads the failing tests' messages: a candidate whose
  failure is one of :data:`RETIRED` is dropped, and the rejection is counted under
  ``implausible bug: <kind>`` (types are only known when the code runs).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable, Mapping

#: Names of built-ins: their argument order is fixed and known to everyone.
BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))
#: Methods of built-in types whose argument order nobody mixes up (key before default, index before item).
FIXED_ORDER_METHODS = frozenset({"get", "setdefault", "pop", "insert", "fromkeys"})
#: Calls whose result is a string (so ``+`` and ``%`` on it are concatenation and formatting).
_STRING_CALLS = frozenset({"str", "repr", "format", "join", "strip", "lstrip", "rstrip", "lower", "upper", "title",
                           "replace", "decode", "encode", "capitalize", "casefold", "zfill", "ljust", "rjust",
                           "center", "__str__", "__repr__"})

#: The retired kinds: what a failure shows when a bug of that kind got through, and which bug types
#: can produce it (``None``: any; a missing ``return`` that makes ``None + 1`` is a person's bug, an
#: operator that writes ``str - str`` is not).
RETIRED: dict[str, tuple[re.Pattern[str], frozenset[str] | None]] = {
    "builtin argument order": (re.compile(
        r"TypeError: (isinstance\(\) arg 2|issubclass\(\) arg [12]|attribute name must be string"
        r"|(getattr|hasattr|setattr|delattr)\(\): attribute name must be string)"), None),
    "type-invalid operation": (re.compile(
        r"TypeError: (unsupported operand type\(s\) for [-*/%]+: '(str|bytes|list|tuple|dict|set)' and"
        r"|unsupported operand type\(s\) for [-*/%]+: '\w+' and '(str|bytes|list|tuple|dict|set)'"
        r"|can only concatenate|can't multiply sequence|bad operand type for unary"
        r"|not all arguments converted during string formatting)"),
        frozenset({"wrong-operator", "coordinated-offset"})),
    "undefined name": (re.compile(r"\b(NameError|UnboundLocalError)\b"), None),
    "nonsense literal": (re.compile(
        r"ValueError: (invalid mode|must have exactly one of create/read/write/append mode"
        r"|Invalid format specifier|Unknown format code|unsupported format character)"
        r"|LookupError: unknown encoding"),
        frozenset({"wrong-constant", "wrong-default", "coordinated-constant", "coordinated-default"})),
}


def is_fixed_order_call(call: ast.Call) -> bool:
    """A call whose argument order no person gets wrong: a built-in or a fixed-order method."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in BUILTIN_NAMES
    return isinstance(func, ast.Attribute) and func.attr in FIXED_ORDER_METHODS


def is_string_like(node: ast.AST) -> bool:
    """Whether an operand is evidently a string, bytes or sequence (its ``+`` is not arithmetic)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    if isinstance(node, (ast.JoinedStr, ast.List, ast.Tuple, ast.ListComp, ast.Dict, ast.Set, ast.SetComp)):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in _STRING_CALLS or name in {"list", "tuple", "sorted"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return is_string_like(node.left) or is_string_like(node.right)
    return False


def implausible_failure(messages: Mapping[str, str], failing: Iterable[str], bug_types: Iterable[str]) -> str | None:
    """The retired kind a candidate's failures show (``None``: none does).

    ``messages`` are the junit failure texts by test id, ``failing`` the candidate's failing tests,
    ``bug_types`` its operators' types.
    """
    types = set(bug_types)
    texts = [messages.get(t, "") for t in failing]
    for kind, (pattern, producers) in RETIRED.items():
        if producers is not None and not types & producers:
            continue
        if any(pattern.search(text) for text in texts):
            return kind
    return None


__all__ = ["BUILTIN_NAMES", "FIXED_ORDER_METHODS", "RETIRED", "implausible_failure", "is_fixed_order_call",
           "is_string_like"]
