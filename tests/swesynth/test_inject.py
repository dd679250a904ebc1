"""Bug injectors: every procedural type finds candidates, edits only its span, and plans are seeded."""

from __future__ import annotations

import ast
import difflib

import pytest

from termgym.factory.swesynth.inject import (
    BUG_TYPE_DESCRIPTIONS,
    FINDERS,
    HARD_TYPES,
    PROCEDURAL_TYPES,
    InjectionError,
    apply_mutations,
    check_bug_types,
    check_mutation,
    find_mutations,
    plan_attempts,
)
from termgym.factory.swesynth.patches import file_diff

SAMPLE = '''\
import copy


def summarise(values, sep=", ", limit=3):
    """Docstrings are never mutated."""
    if not values:
        return ""
    if limit < 0:
        raise ValueError("limit must not be negative")
    items = list(values)
    shown = items[:limit]  # a comment that must survive
    rest = len(items) - 1
    count = 0
    for v in shown:
        if v is None:
            continue
        count += 1
    text = sep.join(str(v) for v in shown)
    label = f"{count}/{rest}"
    state = copy.copy(items)
    state.append(count)
    total = int(count) * 2 + rest
    ratio = total / max(rest, 1)
    if count > 2 and ratio != 0:
        text = "{}: {}".format(label, text)
    for i in range(len(shown)):
        total = total + i
    try:
        return text + str(total % 7)
    except TypeError:
        raise
'''


def test_at_least_twelve_procedural_types_from_the_reference_taxonomy():
    assert len(PROCEDURAL_TYPES) >= 12
    assert set(PROCEDURAL_TYPES) <= set(BUG_TYPE_DESCRIPTIONS)
    for t in ("off-by-one", "logic-inversion", "wrong-variable", "missing-check", "type-error", "wrong-operator",
              "missing-return", "exception-swallow", "wrong-constant", "string-format", "order-dependency",
              "early-exit", "wrong-default"):
        assert t in FINDERS


#: The single-edit types of the reference taxonomy; the harder operators have their own tests
#: (tests/swesynth_bugs/) on code with callers across modules.
CLASSIC_TYPES = tuple(t for t in PROCEDURAL_TYPES if t not in HARD_TYPES)


@pytest.mark.parametrize("bug_type", CLASSIC_TYPES)
def test_each_type_edits_only_its_own_lines(bug_type):
    mutations = [m for m in find_mutations("pkg/mod.py", SAMPLE, [bug_type]) if check_mutation(SAMPLE, m)]
    assert mutations, f"no {bug_type} candidate in the sample"
    original_lines = SAMPLE.splitlines()
    for m in mutations:
        assert m.bug_type == bug_type and m.path == "pkg/mod.py" and m.function == "summarise"
        new = apply_mutations(SAMPLE, [m])
        assert ast.dump(ast.parse(new)) != ast.dump(ast.parse(SAMPLE))
        # Format preservation: every line outside the mutated span is byte-identical.
        first = SAMPLE.count("\n", 0, m.start)
        last = SAMPLE.count("\n", 0, m.end)
        changed = [op for op in difflib.SequenceMatcher(None, original_lines, new.splitlines()).get_opcodes()
                   if op[0] != "equal"]
        for _tag, i1, i2, _j1, _j2 in changed:
            assert first <= i1 and i2 <= last + 2, (bug_type, m.description, i1, i2, first, last)
        assert '"""Docstrings are never mutated."""' in new
        assert "# a comment that must survive" in new


def test_specific_rewrites_are_what_the_type_promises():
    by_type = {}
    for m in find_mutations("m.py", SAMPLE):
        by_type.setdefault(m.bug_type, []).append(apply_mutations(SAMPLE, [m]))
    assert any("if limit <= 0:" in t or "if count >= 2" in t for t in by_type["off-by-one"])
    assert any("if limit < 0:\n        raise" not in t and "limit must not" not in t for t in by_type["missing-check"])
    assert any("if v is not None:" in t for t in by_type["logic-inversion"])
    assert any("count -= 1" in t for t in by_type["wrong-operator"])
    assert any("        text + str(total % 7)" in t for t in by_type["missing-return"])
    assert any("            break\n" in t for t in by_type["early-exit"])
    assert any('sep=",", limit' in t or "limit=6" in t for t in by_type["wrong-default"])
    assert any("state = items" in t for t in by_type["state-corruption"])
    assert any('"{}: {}".format(text, label)' in t for t in by_type["string-format"])
    assert any("total = count * 2 + rest" in t for t in by_type["type-error"])


def test_patch_of_a_mutation_touches_only_the_changed_line():
    m = next(m for m in find_mutations("pkg/mod.py", SAMPLE, ["wrong-operator"]) if "count" in
             SAMPLE[m.start - 10:m.end + 5])
    patch = file_diff("pkg/mod.py", SAMPLE, apply_mutations(SAMPLE, [m]))
    minus = [line for line in patch.splitlines() if line.startswith("-") and not line.startswith("---")]
    plus = [line for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(minus) == 1 and len(plus) == 1
    assert "def summarise" in patch.splitlines()[3]  # the hunk names the function it is in


def test_overlapping_mutations_are_refused():
    ms = [m for m in find_mutations("m.py", SAMPLE, ["wrong-constant", "wrong-default"])]
    a = ms[0]
    with pytest.raises(InjectionError, match="overlap"):
        apply_mutations(SAMPLE, [a, a])


def test_unknown_bug_type_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown bug type 'off-by-two'"):
        check_bug_types(["off-by-two"])
    with pytest.raises(ValueError, match="LLM breaker"):
        check_bug_types(["resource-leak"])


def test_plans_are_deterministic_and_cycle_through_types():
    candidates = find_mutations("m.py", SAMPLE)
    files = {"m.py": SAMPLE}
    one = [tuple(a.mutations) for a in plan_attempts(candidates, 7, files=files, limit=30)]
    two = [tuple(a.mutations) for a in plan_attempts(candidates, 7, files=files, limit=30)]
    other = [tuple(a.mutations) for a in plan_attempts(candidates, 8, files=files, limit=30)]
    assert one == two and one != other
    types_with_candidates = {m.bug_type for m in candidates}
    assert set(CLASSIC_TYPES) <= types_with_candidates
    first_round = [ms[0].bug_type for ms in one[: len(types_with_candidates)]]
    assert len(set(first_round)) == len(types_with_candidates)  # every type gets a turn before repeats
    assert len({ms for ms in one}) == len(one)  # no candidate is tried twice


def test_multi_bug_attempts_combine_distinct_types():
    candidates = find_mutations("a.py", SAMPLE) + find_mutations("b.py", SAMPLE)
    files = {"a.py": SAMPLE, "b.py": SAMPLE}
    attempts = list(plan_attempts(candidates, 3, files=files, max_bugs=3, limit=40))
    sizes = {len(a.mutations) for a in attempts}
    assert sizes - {1} and max(sizes) <= 3
    for a in attempts:
        assert len(a.bug_types) == len(a.mutations)
        by_file = {}
        for m in a.mutations:
            by_file.setdefault(m.path, []).append(m)
        for path, ms in by_file.items():
            apply_mutations(files[path], ms)  # never overlapping
    with pytest.raises(ValueError, match="max_bugs"):
        list(plan_attempts(candidates, 3, max_bugs=4))


SPECIAL_CASES = '''\
def tags(value, sep=None):
    if sep is None:
        sep = ","
    if isinstance(value, str):
        value = value.split(sep)
    if len(value) > 3:
        value = value[:3]
    if not value:
        return []
    elif len(value) == 1:
        return [value[0].strip()]
    elif value[0] == "*":
        # every tag
        return ["*"]
    else:
        return [v.strip() for v in value]
'''


def test_missing_edge_case_drops_a_guard_an_elif_branch_or_a_special_cases_normalisation():
    """Three shapes of one mistake, each a fix of two or more lines: the guard that returns early,
    the ``elif`` branch of a special case (its case falls through to the next branch), and the guard
    that makes a special value ordinary (``if sep is None: sep = ","``). A guard that reassigns a
    name its condition does not read (``if len(value) > 3: value = value[:3]`` does read it) is no
    normalisation of the special case; an ``else`` is never dropped."""
    found = [m for m in find_mutations("m.py", SPECIAL_CASES, ["missing-edge-case"])
             if check_mutation(SPECIAL_CASES, m)]
    removed = sorted(SPECIAL_CASES[m.start:m.end] for m in found)
    assert removed == sorted([
        '    if sep is None:\n        sep = ","\n',
        "    if isinstance(value, str):\n        value = value.split(sep)\n",
        "    if len(value) > 3:\n        value = value[:3]\n",
        "    elif len(value) == 1:\n        return [value[0].strip()]\n",
        '    elif value[0] == "*":\n        # every tag\n        return ["*"]\n',
    ])
    for m in found:
        new = apply_mutations(SPECIAL_CASES, [m])
        ast.parse(new)
        fix = file_diff("m.py", new, SPECIAL_CASES)
        assert sum(line.startswith("+") and not line.startswith("+++") for line in fix.splitlines()) >= 2
    assert all("else:" in apply_mutations(SPECIAL_CASES, [m]) for m in found if "elif" in m.description)
