"""The harder bug operators on real code: coordinated edits, cross-module helpers, value-flow bugs."""

from __future__ import annotations

import ast
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from termgym.factory.swesynth.bugs.callgraph import RepoIndex
from termgym.factory.swesynth.bugs.coordinated import (
    CROSS_MODULE_BASE_TYPES,
    REPO_FINDERS,
    find_cross_module_helper,
)
from termgym.factory.swesynth.bugs.flow import FLOW_FINDERS
from termgym.factory.swesynth.bugs.source import check_unit, units
from termgym.factory.swesynth.inject import (
    BUG_TYPE_DESCRIPTIONS,
    FINDERS,
    HARD_TYPES,
    PROCEDURAL_TYPES,
    NoCandidatesError,
    find_bugs,
    mutate_files,
    plan_attempts,
    scan_repository,
)
from termgym.factory.swesynth.patches import make_patch
from termgym.tasks.swesynth.tree import list_source_files
from tests.swesynth_bugs.shop import SOURCES, TESTS

TOY = Path(__file__).resolve().parents[2] / "termgym_data" / "swesynth" / "toy"
COORDINATED = [t for t in REPO_FINDERS if t.startswith("coordinated-")]


def by_type(mutations) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for unit in units(mutations):
        out.setdefault(unit[0].bug_type, []).append(unit)
    return out


def toy_files(project: str) -> dict[str, str]:
    root = TOY / project
    return {rel: (root / rel).read_text() for rel in list_source_files(root, [project], ["tests"])}


def git_apply(root: Path, patch: str, *extra: str) -> None:
    proc = subprocess.run(["git", "apply", *extra, "-"], input=patch, text=True, cwd=root, capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_new_types_are_registered_and_described():
    assert set(HARD_TYPES) <= set(PROCEDURAL_TYPES) <= set(BUG_TYPE_DESCRIPTIONS)
    assert len(COORDINATED) >= 5 and "cross-module-helper" in HARD_TYPES and set(FLOW_FINDERS) <= set(HARD_TYPES)


@pytest.mark.parametrize("bug_type", COORDINATED)
def test_coordinated_bugs_have_two_or_three_edits_that_round_trip(bug_type, tmp_path):
    found = by_type(find_bugs(dict(SOURCES), [bug_type], test_texts=TESTS))
    assert found.get(bug_type), f"no {bug_type} candidate in the shop project"
    for unit in found[bug_type]:
        assert 2 <= len(unit) <= 3
        assert len({m.group for m in unit}) == 1 and unit[0].group
        assert check_unit(dict(SOURCES), unit)
        mutated = mutate_files(dict(SOURCES), unit)
        originals = {p: SOURCES[p] for p in mutated}
        bug_patch = make_patch(originals, mutated)
        fix_patch = make_patch(mutated, originals)
        for rel, text in SOURCES.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        git_apply(tmp_path, bug_patch)
        assert {p: (tmp_path / p).read_text() for p in mutated} == mutated
        git_apply(tmp_path, fix_patch)
        assert {p: (tmp_path / p).read_text() for p in SOURCES} == SOURCES


def test_param_swap_updates_the_signature_and_some_callers_not_all():
    found = by_type(find_bugs(dict(SOURCES), ["coordinated-param-swap"]))["coordinated-param-swap"]
    (unit,) = [u for u in found if u[0].function == "discount"]
    mutated = mutate_files(dict(SOURCES), unit)
    assert "def discount(off, price):" in mutated["shop/util.py"]
    assert "discount(coupon, amount)" in mutated["shop/cart.py"]
    assert "shop/report.py" not in mutated  # the untouched caller is where the bug shows


def test_attribute_rename_sets_and_reads_the_new_name_once():
    (unit,) = by_type(find_bugs(dict(SOURCES), ["coordinated-attribute-rename"]))["coordinated-attribute-rename"]
    text = mutate_files(dict(SOURCES), unit)["shop/basket.py"]
    assert "self._items = []" in text and "self._items.append" in text and "in self.items)" in text


def test_key_rename_and_default_shift_read_like_half_finished_refactors():
    key = by_type(find_bugs(dict(SOURCES), ["coordinated-key-rename"]))["coordinated-key-rename"]
    edits = {m.path: m.replacement for unit in key for m in unit if "total" in m.replacement}
    assert edits == {"shop/util.py": '"totals"', "shop/report.py": '"totals"'}
    default = by_type(find_bugs(dict(SOURCES), ["coordinated-default"]))["coordinated-default"]
    (unit,) = [u for u in default if "currency" in u[0].description]
    mutated = mutate_files(dict(SOURCES), unit)
    assert 'currency="EUR")' in mutated["shop/cart.py"]  # one caller pins the old default


def test_cross_module_helper_mutates_only_functions_other_modules_call():
    repo = RepoIndex(dict(SOURCES), TESTS)
    hidden = find_cross_module_helper(repo, FINDERS, min_hidden=0)
    functions = {m.function for m in hidden}
    # Called from cart/report and never named in a test; parse_price, count_words and cheapest are.
    assert functions <= {"split_pair", "discount", "summary"} and len(functions) >= 2
    assert all(m.path == "shop/util.py" and m.description.split(":")[0] in CROSS_MODULE_BASE_TYPES for m in hidden)
    # Too few hidden candidates: helpers the tests name join in, after the hidden ones.
    found = find_bugs(dict(SOURCES), ["cross-module-helper"], test_texts=TESTS)
    assert found[: len(hidden)] == hidden and "parse_price" in {m.function for m in found[len(hidden):]}
    assert {m.function for m in found} <= {"split_pair", "discount", "summary", "parse_price", "count_words"}


def test_cross_module_helper_prefers_modules_no_test_file_is_named_after():
    files = {**SOURCES,
             "shop/rounding.py": "def to_cents(value, places=2):\n    return round(value * 100) / 100 if places else value\n",
             "shop/till.py": "from .rounding import to_cents\n\n\ndef change(paid, price):\n"
                             "    return to_cents(paid - price)\n"}
    found = find_cross_module_helper(RepoIndex(files, TESTS), FINDERS, min_hidden=0)
    assert found and {m.function for m in found} == {"to_cents"}


@pytest.mark.parametrize("bug_type", list(FLOW_FINDERS))
def test_value_flow_operators_find_sites_in_real_code(bug_type):
    files = {**toy_files("ledgerly"), **toy_files("textkit")}
    found = [m for m in find_bugs(files, [bug_type]) if check_unit(files, (m,))]
    assert len(found) >= 3
    for m in found:
        new = files[m.path][: m.start] + m.replacement + files[m.path][m.end:]
        assert ast.dump(ast.parse(new)) != ast.dump(ast.parse(files[m.path]))
        assert new.count("\n") == files[m.path].count("\n")  # one-line edits, no dead code added


def test_value_flow_bug_patches_round_trip_on_a_toy_project(tmp_path):
    files = toy_files("textkit")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = by_type(find_bugs(files, list(FLOW_FINDERS)))
    for bug_type in FLOW_FINDERS:
        for unit in found[bug_type][:3]:
            mutated = mutate_files(files, unit)
            originals = {p: files[p] for p in mutated}
            git_apply(tmp_path, make_patch(originals, mutated))
            assert {p: (tmp_path / p).read_text() for p in mutated} == mutated
            git_apply(tmp_path, make_patch(mutated, originals))  # the reverse is the fix
            assert {p: (tmp_path / p).read_text() for p in mutated} == originals


def test_flow_edits_look_like_slips():
    sample = (
        "def f(names, rows):\n"
        "    clean = sorted(n.strip().lower() for n in names)\n"
        "    rows.sort(key=len, reverse=True)\n"
        "    best = max(len(r) for r in rows)\n"
        "    keep = [r for r in rows if r]\n"
        "    return dict(first=clean[0], last=clean[-1]), {'best': best, 'keep': keep}\n"
    )
    found = find_bugs({"m.py": sample}, list(FLOW_FINDERS))
    lines = {m.bug_type: set() for m in found}
    for m in found:
        lines[m.bug_type].add((sample[: m.start] + m.replacement + sample[m.end:]).splitlines()[m.line - 1].strip())
    assert "clean = sorted(n.strip() for n in names)" in lines["dropped-normalization"]
    assert "rows.sort(key=len)" in lines["dropped-normalization"]
    assert "rows.sort(reverse=True)" in lines["dropped-normalization"]
    assert "best = min(len(r) for r in rows)" in lines["wrong-aggregate"]
    assert "keep = [r for r in rows]" in lines["dropped-filter"]
    assert "return dict(first=clean[-1], last=clean[0]), {'best': best, 'keep': keep}" in lines["swapped-values"]
    assert "return dict(first=clean[0], last=clean[-1]), {'best': keep, 'keep': best}" in lines["swapped-values"]


def test_toy_projects_offer_every_kind_of_harder_bug():
    counts: Counter = Counter()
    for project in ("ledgerly", "planwise", "textkit"):
        files = toy_files(project)
        counts.update(u[0].bug_type for u in units(find_bugs(files, HARD_TYPES, strict=False)))
    for t in (*FLOW_FINDERS, "cross-module-helper", "coordinated-param-swap", "coordinated-default",
              "coordinated-constant", "coordinated-attribute-rename"):
        assert counts[t] >= 1, (t, counts)


def test_candidates_and_plans_are_deterministic_and_keep_groups_whole():
    files = {**toy_files("textkit"), **dict(SOURCES)}
    one = find_bugs(files, HARD_TYPES)
    assert one == find_bugs(files, HARD_TYPES)
    plan = [a.mutations for a in plan_attempts(one, 5, files=files, bug_types=list(HARD_TYPES), limit=60)]
    assert plan == [a.mutations for a in plan_attempts(one, 5, files=files, bug_types=list(HARD_TYPES), limit=60)]
    groups = {m.group: len(u) for u in units(one) for m in u if m.group}
    seen = Counter(m.group for ms in plan for m in ms if m.group)
    assert seen and all(seen[g] == groups[g] for g in seen)  # a coordinated bug is never split
    assert {ms[0].bug_type for ms in plan} >= set(COORDINATED) & {m.bug_type for m in one}


def test_scan_repository_reads_tests_to_steer_cross_module_bugs(shop):
    files, found = scan_repository(shop, sorted(SOURCES), ["cross-module-helper"])
    assert set(files) == set(SOURCES)
    assert found == find_bugs(dict(SOURCES), ["cross-module-helper"], test_texts=TESTS)


def test_unparsable_module_and_no_sites_are_clear_errors():
    with pytest.raises(SyntaxError, match=r"cannot scan pkg/broken.py for bugs: .*line 1"):
        find_bugs({"pkg/broken.py": "def f(:\n", **SOURCES}, ["wrong-aggregate"])
    with pytest.raises(NoCandidatesError, match=r"no candidate site for bug types coordinated-return-swap in 1 file"):
        find_bugs({"m.py": "def f(x):\n    return x\n"}, ["coordinated-return-swap"])
    with pytest.raises(ValueError, match="unknown bug type 'coordinated-everything'"):
        find_bugs(dict(SOURCES), ["coordinated-everything"])
    # The generator's scan is lenient: a stray Python-2 file is skipped, not fatal.
    assert find_bugs({"old.py": "print 'x'\n", **SOURCES}, ["wrong-aggregate"], strict=False)


def test_default_shift_never_pins_a_positional_only_parameter():
    src = ("def f(a, b=2, /, c=3):\n    return a + b + c\n\n\n"
           "def g(x):\n    return f(x) + f(x, 1)\n\n\n"
           "def h(y):\n    return f(y)\n")
    found = find_bugs({"m.py": src}, ["coordinated-default"])
    assert {m.replacement for m in found} == {"30", ", c=3"}
    assert check_unit({"m.py": src}, tuple(found))
