"""Bugs a person would write: the retired kinds are no longer produced (termgym.factory.swesynth.plausible).

Each retired kind has a source snippet where the operators used to make it, checked to give no such
candidate now, and a failure message the validation filter must catch; the last test runs
generation in real sandboxes on a project whose only arithmetic is on strings and shows every
``str - str`` candidate dropped with its reason counted.
"""

from __future__ import annotations

import pytest

from termgym.factory.swesynth.inject import find_mutations
from termgym.factory.swesynth.plausible import (
    RETIRED,
    implausible_failure,
    is_fixed_order_call,
    is_string_like,
)
from termgym.tasks.swesynth import pyparse


def candidates(source: str, bug_type: str) -> list[str]:
    """The mutated text of each candidate of ``bug_type`` in ``source``."""
    return [source[: m.start] + m.replacement + source[m.end:] for m in find_mutations("pkg/mod.py", source, [bug_type])]


def test_builtin_argument_order_is_no_longer_swapped():
    source = "def add(self, other, kind):\n    if isinstance(other, kind):\n        return combine(other, kind)\n"
    made = candidates(source, "order-dependency")
    assert not any("isinstance(kind, other)" in m for m in made)
    assert any("combine(kind, other)" in m for m in made)  # a project function's arguments still swap


def test_arithmetic_on_evident_strings_is_no_longer_swapped():
    source = ("def label(name, count):\n    text = name + ': '\n    line = str(count) + text\n"
              "    return line + total(count + 1)\n")
    made = candidates(source, "wrong-operator")
    assert not any("name - ': '" in m or "str(count) - text" in m for m in made)
    assert any("count - 1" in m for m in made)  # arithmetic on numbers still swaps


def test_a_nested_scope_name_is_no_longer_used_outside_it():
    source = ("def scale(values, factor):\n    doubled = [v * 2 for v in values]\n    key = lambda item: item\n"
              "    total = sum(doubled)\n    return total * factor\n")
    made = candidates(source, "wrong-variable")
    assert made, "wrong-variable still finds the function's own names"
    for text in made:
        tail = text.split("total = ", 1)[1]
        assert " v" not in tail.replace("values", "") and "item" not in tail, text


def test_a_code_literal_is_no_longer_case_flipped():
    source = "def load(path):\n    with open(path, 'rb+') as f:\n        return f.read()\n"
    made = candidates(source, "wrong-constant")
    assert not any("'Rb+'" in m for m in made)
    from termgym.factory.swesynth.bugs.source import _mutate_string

    assert all(_mutate_string("rb+", salt) != "Rb+" for salt in range(6))
    assert "Credit" in {_mutate_string("credit", salt) for salt in range(6)}  # a word's case still flips


@pytest.mark.parametrize("kind, message, bug_types", [
    ("builtin argument order", "E   TypeError: isinstance() arg 2 must be a type, a tuple of types, or a union",
     ["order-dependency"]),
    ("type-invalid operation", "E   TypeError: unsupported operand type(s) for -: 'str' and 'str'", ["wrong-operator"]),
    ("undefined name", "E   NameError: name 'v' is not defined", ["wrong-variable"]),
    ("undefined name", "E   UnboundLocalError: cannot access local variable 'x'", ["order-dependency"]),
    ("nonsense literal", "E   ValueError: invalid mode: 'Rb+'", ["wrong-constant"]),
])
def test_the_validation_filter_names_each_retired_kind(kind, message, bug_types):
    assert kind in RETIRED
    assert implausible_failure({"t::a": message}, ["t::a"], bug_types) == kind


def test_the_filter_keeps_plausible_failures():
    # None + 1 after a dropped return is a person's bug; so is a wrong value
    missing_return = "E   TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'"
    assert implausible_failure({"t::a": missing_return}, ["t::a"], ["missing-return"]) is None
    assert implausible_failure({"t::a": "E   assert 3 == 4"}, ["t::a"], ["off-by-one"]) is None
    # a str - str failure from a bug that writes no operator is not the operator's doing
    assert implausible_failure({"t::a": "TypeError: unsupported operand type(s) for -: 'str' and 'str'"},
                               ["t::a"], ["missing-check"]) is None


def test_the_source_predicates():
    call = pyparse.parse("getattr(obj, name)", mode="eval").body
    assert is_fixed_order_call(call)
    assert not is_fixed_order_call(pyparse.parse("convert(obj, name)", mode="eval").body)
    assert is_string_like(pyparse.parse("'-'.join(parts)", mode="eval").body)
    assert not is_string_like(pyparse.parse("count", mode="eval").body)


STRINGS_SOURCE = '''\
"""Joining names (only strings are ever added here)."""


def join(first, second):
    """first and second with nothing between."""
    return first + second


def spaced(first, second):
    """first and second with a space."""
    gap = " "
    joined = join(first, gap)
    return join(joined, second)
'''

STRINGS_TESTS = '''\
from strs.core import join, spaced


def test_join():
    assert join("ab", "cd") == "abcd"


def test_spaced():
    assert spaced("ab", "cd") == "ab cd"
'''


def test_generation_drops_a_str_minus_str_bug_and_counts_why(tmp_path):
    from termgym.factory.swesynth.generate import generate

    repo = tmp_path / "strs-repo"
    (repo / "strs").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "strs" / "__init__.py").write_text("")
    (repo / "strs" / "core.py").write_text(STRINGS_SOURCE)
    (repo / "tests" / "test_core.py").write_text(STRINGS_TESTS)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\ntestpaths = tests\n")
    result = generate(repo, "python3 -m pytest -q tests", n=1, seed=0, out=tmp_path / "out",
                      bug_types=["wrong-operator"], sandbox_check=False)
    assert result.records == []
    assert result.stats.rejected.get("implausible bug, type-invalid operation", 0) >= 1, result.stats.rejected
