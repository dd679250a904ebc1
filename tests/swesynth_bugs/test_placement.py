"""The placement operators move or drop whole statements, the way people misplace code (issue 42.2).

Each operator runs on a small module whose functions have one site of its kind; the mutated module
must parse, run, and behave differently from the clean one on a call a test would make, and the
fix (the reverse patch) must span more than one token. Code no one would write is not produced:
``x = x``, an emptied block, a guard moved past a statement that does not read what it checks.
"""

from __future__ import annotations

import ast
import subprocess
import textwrap

import pytest

from termgym.factory.swesynth.bugs.placement import PLACEMENT_DESCRIPTIONS, PLACEMENT_FINDERS
from termgym.factory.swesynth.bugs.signals import count_changed_tokens
from termgym.factory.swesynth.bugs.source import ModuleIndex, check_mutation
from termgym.factory.swesynth.inject import (
    BUG_TYPE_DESCRIPTIONS,
    FINDERS,
    HARD_TYPES,
    apply_mutations,
    find_mutations,
)
from termgym.factory.swesynth.patches import make_patch

MODULE = textwrap.dedent('''\
    """Inventory helpers."""


    def first_word(text):
        if not text:
            raise ValueError("empty text")
        words = text.split()
        return words[0]


    def totals(rows):
        result = {}
        for name, amount in rows:
            result[name] = result.get(name, 0) + amount
        return result


    def running_sum(values):
        total = 0
        for value in values:
            doubled = value * 2
            total += doubled
        return total


    def tag(item, tags=None):
        if tags is None:
            tags = []
        tags.append(item)
        return tags


    def label(name):
        name = name.strip()
        return "<" + name + ">"


    def quantity(text):
        try:
            value = int(text)
        except ValueError:
            return 0
        return max(value, 0)
''')

#: bug type -> (a call, its clean answer); the mutated module must answer differently (or raise)
PROBES = {
    "late-check": ("first_word(None)", "ValueError"),
    "reset-in-loop": ("totals([('a', 1), ('b', 2)])", {"a": 1, "b": 2}),
    "update-after-loop": ("running_sum([1, 2, 3])", 12),
    "shared-default": ("(tag(1), tag(2))", ([1], [2])),
    "skipped-step": ("label(' x ')", "<x>"),
    "missing-handler": ("quantity('lots')", 0),
}


def _answer(text: str, call: str):
    namespace: dict = {}
    exec(compile(text, "inventory.py", "exec"), namespace)  # noqa: S102 - the module under test
    try:
        return eval(call, namespace)  # noqa: S307
    except Exception as exc:  # noqa: BLE001 - the answer is the exception's type
        return type(exc).__name__


def test_the_operators_are_registered_described_and_counted_as_hard():
    assert set(PLACEMENT_FINDERS) <= set(FINDERS) and set(PLACEMENT_FINDERS) <= set(HARD_TYPES)
    for bug_type in PLACEMENT_FINDERS:
        assert BUG_TYPE_DESCRIPTIONS[bug_type] == PLACEMENT_DESCRIPTIONS[bug_type]


@pytest.mark.parametrize("bug_type", sorted(PROBES))
def test_each_operator_makes_a_multi_line_bug_that_changes_behaviour(bug_type, tmp_path):
    call, clean = PROBES[bug_type]
    assert _answer(MODULE, call) == clean
    mutations = [m for m in find_mutations("inventory.py", MODULE, [bug_type]) if check_mutation(MODULE, m)]
    assert mutations, f"no {bug_type} candidate"
    changed = []
    for m in mutations:
        buggy = apply_mutations(MODULE, [m])
        ast.parse(buggy)
        if _answer(buggy, call) != clean:
            changed.append(m)
        fix = make_patch({"inventory.py": buggy}, {"inventory.py": MODULE})
        if bug_type == "update-after-loop":  # a dedent: the statement's tokens stay, the block it runs in changes
            removed = [line[1:] for line in fix.splitlines() if line.startswith("-") and not line.startswith("---")]
            added = [line[1:] for line in fix.splitlines() if line.startswith("+") and not line.startswith("+++")]
            assert [line.strip() for line in removed] == [line.strip() for line in added] and removed != added, fix
        else:
            assert count_changed_tokens(fix) >= 3, (bug_type, fix)  # whole statements, not one token
        (tmp_path / "inventory.py").write_text(buggy)
        subprocess.run(["git", "apply", "-"], input=fix, text=True, cwd=tmp_path, check=True)
        assert (tmp_path / "inventory.py").read_text() == MODULE
    assert changed, f"no {bug_type} mutation changes {call}"
    assert all(m.function for m in changed) and all(m.bug_type == bug_type for m in changed)


def test_specific_rewrites_read_like_the_mistake():
    def mutated(bug_type, function):
        (m,) = [m for m in find_mutations("inventory.py", MODULE, [bug_type]) if m.function == function]
        return apply_mutations(MODULE, [m])

    assert "    words = text.split()\n    if not text:\n" in mutated("late-check", "first_word")
    assert "    for name, amount in rows:\n        result = {}\n" in mutated("reset-in-loop", "totals")
    assert "        doubled = value * 2\n    total += doubled\n    return total" in mutated("update-after-loop", "running_sum")
    text = mutated("shared-default", "tag")
    assert "def tag(item, tags=[]):\n    tags.append(item)" in text and "is None" not in text
    assert "name = name.strip()" not in mutated("skipped-step", "label")
    assert "def quantity(text):\n    value = int(text)\n    return max(value, 0)" in mutated("missing-handler", "quantity")


def test_what_no_one_would_write_is_not_produced():
    never = textwrap.dedent('''\
        def only(text):
            text = text.strip()

        def unrelated(a, b):
            if a is None:
                raise ValueError("a")
            b = b + 1
            return a + b

        def constant_default(n=None):
            if n is None:
                n = 0
            return n

        def reraised(text):
            try:
                return int(text)
            except ValueError as exc:
                raise TypeError(text) from exc

        def bare(text):
            try:
                return int(text)
            except:
                return 0

        def cleaned(path):
            try:
                text = open(path).read()
            except OSError:
                text = ""
            else:
                text = text.strip()
            return text

        def docs(x):
            try:
                y = """a
        b""" + x
            except TypeError:
                y = None
            return y
    ''')
    index = ModuleIndex("m.py", never)
    found = {bug_type: finder(index) for bug_type, finder in PLACEMENT_FINDERS.items()}
    assert found["skipped-step"] == []  # the block would be empty
    assert found["late-check"] == []  # "b = b + 1" does not read what the guard checks
    assert found["shared-default"] == []  # an int default is not shared state
    # an error only re-raised as another, a bare except, a try with an else, a multi-line string
    assert found["missing-handler"] == []
    # the value operator no longer turns "name = name.strip()" into "name = name"
    assert not [m for m in find_mutations("inventory.py", MODULE, ["dropped-normalization"])
                if "name = name\n" in apply_mutations(MODULE, [m])]
