"""Distinct tasks (termgym.tasks.swesynth.distinct): what makes two tasks near-duplicates, the rule the
default suite serves by (at most three per first repro call and per (function, bug type), no
``test_id`` near-duplicate of a ``train`` task, no project above 5 %, no bug type above 20 %, fewer
than half of the fixes one line), and that rule on the real
default suite, with the rule switched off as the sabotage that the same checks catch."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from termgym.tasks.swesynth import SUITE_DIR, SweSynthSuite, default_suite, distinct
from termgym.tasks.swesynth.distinct import (
    HISTORY,
    MAX_ONE_LINE_SHARE,
    MAX_PER_KEY,
    MAX_PROJECT_SHARE,
    MAX_TYPE_SHARE,
    MULTI_TOKEN,
    ONE_LINE_SHARE,
    ONE_TOKEN,
    PROJECT_SHARE,
    SAME_CALL,
    SAME_FUNCTION,
    TYPE_SHARE,
    TaskKeys,
    changed_lines,
    fix_rank,
    held_out_duplicates,
    near_duplicates,
    select,
    task_keys,
)
from termgym.tasks.swesynth.repro import first_call


def _task(function, bug_type, repro, path="p/a.py"):
    statement = f"I think `{function}()` is broken.\n\n```python\nfrom p.a import {function}\n{repro}\n```\n"
    return {"bug": {"problem_statement": statement,
                    "mutations": [{"path": path, "function": function, "bug_type": bug_type}]}}


def test_first_call_skips_imports_and_ignores_spacing():
    assert first_call("```python\nimport p\nfrom p import f\nf( 1,'x' )\nf(2)\n```") == "f(1, 'x')"
    assert first_call(">>> nothing to run") is None
    assert first_call("```python\n>>> from p import f\n>>> f(1)\n2\n```") == "f(1)"


def test_near_duplicates_count_shared_function_bug_types_and_first_calls():
    tasks = [("p", _task("f", "off_by_one", "f(1)")),
             ("p", _task("f", "off_by_one", "f( 2 )")),          # same function and bug type as the first
             ("p", _task("g", "swap_operands", "f(1)")),         # same first call as the first
             ("p", _task("h", "swap_operands", "h(3)")),         # alone
             ("q", _task("h", "swap_operands", "h(3)"))]         # same as the fourth, but another project
    dup = near_duplicates(tasks)
    assert dup == {"tasks": 5, "function_bug_type": 2, "first_call": 2, "either": 3, "largest_first_call_group": 2,
                   "same_repro": 0, "largest_same_repro_group": 1}  # the imports differ: not the same repro
    same = near_duplicates([("p", _task("f", "a", "f(1)")), ("p", _task("f", "b", "f( 1 )")),
                            ("p", _task("f", "c", "f(2)")), ("q", _task("f", "a", "f(1)"))])
    assert (same["same_repro"], same["largest_same_repro_group"]) == (2, 2)  # spacing ignored, per project
    # the sabotage: one bug type changed, the pair is no longer shared
    tasks[1] = ("p", _task("f", "wrong_constant", "f( 2 )"))
    assert near_duplicates(tasks)["function_bug_type"] == 0


def _keys(project, call, *functions):
    return TaskKeys(project, call, frozenset(("p.py", f, "off-by-one") for f in functions))


def violations(splits, keys, share=MAX_PROJECT_SHARE):
    """Every way ``splits`` breaks the distinct rule: a key held by more than three tasks, a test_id
    task that is a near-duplicate of a train task, a project above the share (where it applies)."""
    ids = [t for split in splits.values() for t in split]
    held = Counter(k for t in ids for k in keys[t].all())
    out = [f"{k} is held by {n} tasks" for k, n in held.items() if n > MAX_PER_KEY]
    if held_out_duplicates(splits, keys):
        out.append(f"{held_out_duplicates(splits, keys)} test_id tasks are near-duplicates of train tasks")
    per_project = Counter(keys[t].project for t in ids)
    if len(per_project) * share >= 1:
        out += [f"{p} holds {n} of {len(ids)}" for p, n in per_project.items() if n > max(10, share * len(ids))]
    per_type = Counter(b for t in ids for b in {f[2] for f in keys[t].functions})
    if len(per_type) * MAX_TYPE_SHARE >= 1:
        out += [f"bug type {b} makes {n} of {len(ids)}" for b, n in per_type.items() if n > MAX_TYPE_SHARE * len(ids)]
    return out


def test_at_most_three_tasks_per_first_call_and_per_function_bug_type():
    keys = {f"c{i}": _keys("p", "load('test.toml')", f"f{i}") for i in range(6)}  # one first call
    keys.update({f"f{i}": _keys("p", f"g({i})", "g") for i in range(5)})          # one (function, bug type)
    keys.update({f"q{i}": _keys("q", "load('test.toml')", f"f{i}") for i in range(2)})  # another project
    splits = {"train": sorted(keys)}
    chosen = select(splits, keys)
    kept = chosen.splits["train"]
    assert sum(t.startswith("c") for t in kept) == 3 and sum(t.startswith("f") for t in kept) == 3
    assert {"q0", "q1"} <= set(kept)  # keys of two projects never meet
    assert Counter(chosen.dropped.values()) == {SAME_CALL: 3, SAME_FUNCTION: 2}
    assert not violations(chosen.splits, keys)
    # the same choice whatever order the tasks come in (hash order, not generation order)
    shuffled = {"train": random.Random(3).sample(sorted(keys), len(keys))}
    assert set(select(shuffled, keys).splits["train"]) == set(kept)
    # the sabotage: the cap off, the check catches both groups
    loose = select(splits, keys, max_per_key=100)
    assert len(loose.splits["train"]) == len(keys) and len(violations(loose.splits, keys)) == 2


def test_a_test_id_near_duplicate_of_a_train_task_moves_to_train_and_so_on():
    keys = {"t": _keys("p", "f(1)", "f"),
            "a": _keys("p", "f(1)", "g"),      # shares the train task's first call
            "b": _keys("p", "h(2)", "g"),      # shares only a's function: a near-duplicate once a moves
            "c": _keys("p", "k(3)", "k")}      # held out, nothing shared
    chosen = select({"train": ["t"], "test_id": ["a", "b", "c"]}, keys)
    assert chosen.moved == ["a", "b"] and chosen.splits == {"train": ["t", "a", "b"], "test_id": ["c"]}
    assert held_out_duplicates(chosen.splits, keys) == 0
    assert held_out_duplicates({"train": ["t"], "test_id": ["a", "b", "c"]}, keys) == 1  # a, before


def test_no_project_above_five_percent_where_the_cap_can_hold():
    keys = {f"{p}-{i}": _keys(p, f"f({i})", f"f{i}") for p in (f"p{j:02}" for j in range(24)) for i in range(12)}
    keys.update({f"big-{i}": _keys("big", f"f({i})", f"f{i}") for i in range(200)})
    chosen = select({"train": sorted(keys)}, keys)
    per_project = Counter(keys[t].project for t in chosen.splits["train"])
    total = sum(per_project.values())
    assert per_project["big"] == int(MAX_PROJECT_SHARE * total) and per_project["p00"] == 12
    assert per_project["big"] <= MAX_PROJECT_SHARE * total and set(chosen.dropped.values()) == {PROJECT_SHARE}
    # fewer than 1 / share projects: no cap could hold, none is applied
    few = {t: k for t, k in keys.items() if k.project in ("big", "p00", "p01")}
    assert len(select({"train": sorted(few)}, few).splits["train"]) == len(few)


def test_fix_rank_orders_history_then_larger_fixes_then_one_token():
    assert fix_rank({"source": "history", "kind": "fix"}, {"tokens_changed": 1}) == HISTORY
    assert fix_rank({"source": "procedural"}, {"tokens_changed": 1}) == ONE_TOKEN
    assert fix_rank(None, {"tokens_changed": 0}) == ONE_TOKEN
    assert fix_rank({}, {"tokens_changed": 4}) == MULTI_TOKEN
    assert fix_rank(None, None) == MULTI_TOKEN  # a size not recorded is not taken for one token
    assert HISTORY < MULTI_TOKEN < ONE_TOKEN


def _ranked(keys, rank_of):
    return {t: dataclasses.replace(k, rank=rank_of(t)) for t, k in keys.items()}


def test_near_duplicates_served_realest_fix_first():
    # 30 groups of five tasks sharing a first call: three of each are served
    groups = {f"g{g}-{i}": _keys("p", f"load({g})", f"f{g}_{i}") for g in range(30) for i in range(5)}
    keys = _ranked(groups, lambda t: [HISTORY, ONE_TOKEN, MULTI_TOKEN, ONE_TOKEN, MULTI_TOKEN][int(t[-1])])
    chosen = select({"train": sorted(keys)}, keys)
    kept = chosen.splits["train"]
    assert Counter(keys[t].rank for t in kept) == {HISTORY: 30, MULTI_TOKEN: 60}
    assert not violations(chosen.splits, keys)
    # the sabotage: every task ranked alike, hash order alone serves one-token fixes in their stead
    same = _ranked(keys, lambda t: MULTI_TOKEN)
    loose = select({"train": sorted(same)}, same).splits["train"]
    assert Counter(keys[t].rank for t in loose)[ONE_TOKEN] > 10
    assert len(loose) == len(kept)  # the choice costs no task


def test_within_a_rank_the_rarer_bug_types_are_served_first(monkeypatch):
    def typed(call, function, bug_type):
        return TaskKeys("p", call, frozenset({("p.py", function, bug_type)}))

    keys = {}
    for g in range(20):  # a first call per group: three of five served, two of them off-by-one at most
        for i in range(5):
            keys[f"g{g}-{i}"] = typed(f"load({g})", f"f{g}_{i}", "off-by-one" if i < 2 else "wrong-variable")
    keys.update({f"w{i}": typed(f"w({i})", f"w{i}", "wrong-variable") for i in range(40)})  # the commonest type

    def served_types():
        kept = select({"train": sorted(keys)}, keys).splits["train"]
        return Counter(next(iter(keys[t].functions))[2] for t in kept if t.startswith("g"))

    assert served_types() == {"off-by-one": 40, "wrong-variable": 20}
    monkeypatch.setattr(distinct, "_types", lambda k: set())  # the sabotage: types ignored, hash order alone
    assert served_types()["off-by-one"] < 40


def test_the_project_cap_leaves_out_the_smallest_fixes_first():
    keys = {f"{p}-{i}": _keys(p, f"f({i})", f"f{i}") for p in (f"p{j:02}" for j in range(24)) for i in range(12)}
    keys.update({f"big-{i}": _keys("big", f"f({i})", f"f{i}") for i in range(60)})
    keys = _ranked(keys, lambda t: (HISTORY, MULTI_TOKEN, ONE_TOKEN)[int(t.split("-")[1]) % 3])

    def ranks(chosen):
        kept = [keys[t].rank for t in chosen.splits["train"] if t.startswith("big")]
        left = [keys[t].rank for t, why in chosen.dropped.items() if why == PROJECT_SHARE]
        return kept, left

    kept, left = ranks(select({"train": sorted(keys)}, keys))
    assert left and max(kept) <= min(left)
    same = _ranked(keys, lambda t: MULTI_TOKEN)  # the sabotage: ranks alike, the cap cuts by hash alone
    loose, left = ranks(select({"train": sorted(same)}, same))
    assert len(loose) == len(kept) and max(loose) > min(left)


def test_no_bug_type_above_twenty_percent_its_smallest_fixes_from_the_largest_projects_left_out():
    def typed(project, i, bug_type, rank):
        return TaskKeys(project, f"f({i})", frozenset({("p.py", f"f{i}", bug_type)}), rank)

    kinds = ["off-by-one", "missing-return", "logic-inversion", "wrong-constant", "late-check"]
    keys = {}
    for j in range(24):  # 24 projects of 12 tasks: 4 wrong-variable (one of them a larger fix), 8 others
        for i in range(12):
            kind = "wrong-variable" if i < 4 else kinds[i % 5]
            keys[f"p{j:02}-{i}"] = typed(f"p{j:02}", i, kind, MULTI_TOKEN if i in (0, 5) else ONE_TOKEN)
    keys.update({f"big-{i}": typed("big", i, "wrong-variable" if i < 8 else kinds[i % 5], ONE_TOKEN)
                 for i in range(14)})
    chosen = select({"train": sorted(keys)}, keys)
    kept = chosen.splits["train"]
    share = Counter(next(iter(keys[t].functions))[2] for t in kept)["wrong-variable"] / len(kept)
    assert share <= MAX_TYPE_SHARE and not violations(chosen.splits, keys)
    left = [t for t, why in chosen.dropped.items() if why == TYPE_SHARE]
    assert left and all(keys[t].rank == ONE_TOKEN for t in left)  # the larger wrong-variable fixes stay
    assert sum(t.startswith("big") for t in left) >= 4  # the largest project gives first
    # the sabotage: the cap off, wrong-variable keeps a third of the served tasks and the check says so
    loose = select({"train": sorted(keys)}, keys, max_type_share=1)
    assert len(loose.splits["train"]) == len(keys)
    assert any(v.startswith("bug type wrong-variable") for v in violations(loose.splits, keys))
    # one bug type alone: no cap could hold, none is applied
    one = {t: dataclasses.replace(k, functions=frozenset({("p.py", t, "off-by-one")})) for t, k in keys.items()}
    assert TYPE_SHARE not in select({"train": sorted(one)}, one).dropped.values()


def test_changed_lines_count_each_hunks_larger_side():
    one = "--- a/p.py\n+++ b/p.py\n@@ -1,3 +1,3 @@\n x = 1\n-y = x + 1\n+y = x - 1\n z = y\n"
    guard = "--- a/p.py\n+++ b/p.py\n@@ -1,2 +1,4 @@\n def f(x):\n+    if x is None:\n+        return 0\n     return x\n"
    assert (changed_lines(one), changed_lines(guard), changed_lines(one + guard), changed_lines("")) == (1, 2, 3, 0)


def _sized(project, i, lines, rank):
    return TaskKeys(project, f"f({i})", frozenset({("p.py", f"f{i}", "off-by-one")}), rank, lines)


def test_fewer_than_half_of_the_fixes_are_one_line_the_mix_of_one_line_fixes_kept():
    """Of 24 projects of 12 tasks (3 of two or more lines, 1 a one-line release-history fix, 4
    one-line fixes of several tokens, 4 of one token), the one-line ones go until they are fewer
    than half: procedural before history, from the largest projects, one-token and larger edits
    alike (hash order). A key filled by a one-line and a larger fix serves the larger one first."""
    keys = {}
    for j in range(24):
        for i in range(12):
            lines, rank = ((3, MULTI_TOKEN) if i < 3 else (1, HISTORY) if i == 3
                           else (1, MULTI_TOKEN) if i < 8 else (1, ONE_TOKEN))
            keys[f"p{j:02}-{i}"] = _sized(f"p{j:02}", i, lines, rank)
    chosen = select({"train": sorted(keys)}, keys)
    kept = chosen.splits["train"]
    one_line = [t for t in kept if keys[t].one_line]
    assert 0 < len(one_line) < MAX_ONE_LINE_SHARE * len(kept)
    assert len(kept) - len(one_line) == 72  # every larger fix stays
    left = [t for t, why in chosen.dropped.items() if why == ONE_LINE_SHARE]
    assert left and not [t for t in left if keys[t].rank == HISTORY]  # history one-liners stay
    ranks = Counter(keys[t].rank for t in one_line if keys[t].rank != HISTORY)
    assert ranks[ONE_TOKEN] and ranks[MULTI_TOKEN]  # not the one-token fixes alone
    # the sabotage: the share off, one-line fixes are three quarters of what is served
    loose = select({"train": sorted(keys)}, keys, max_one_line_share=1)
    assert sum(keys[t].one_line for t in loose.splits["train"]) == 216 and not loose.dropped
    # a pool with fewer than ten larger fixes keeps its mix
    small = {t: k for t, k in keys.items() if k.one_line or (t.endswith("-0") and t < "p09")}  # nine larger
    assert ONE_LINE_SHARE not in select({"train": sorted(small)}, small).dropped.values()
    # one key, six holders (three of them one-line): the three served are the larger fixes, whatever
    # their ids' hashes
    same = {f"s{i}": TaskKeys("s", "load(1)", frozenset({("p.py", f"g{i}", "off-by-one")}), MULTI_TOKEN,
                              2 if i % 2 else 1) for i in range(6)}
    served_same = select({"train": sorted(same)}, same, max_one_line_share=1).splits["train"]
    assert all(not same[t].one_line for t in served_same)


def test_bad_caps_are_named():
    with pytest.raises(ValueError, match="max_per_key must be at least 1, not 0"):
        select({"train": []}, {}, max_per_key=0)
    with pytest.raises(ValueError, match=r"max_project_share must be in \(0, 1\], not 1.5"):
        select({"train": []}, {}, max_project_share=1.5)
    with pytest.raises(ValueError, match=r"max_type_share must be in \(0, 1\], not 0"):
        select({"train": []}, {}, max_type_share=0)
    with pytest.raises(ValueError, match=r"max_one_line_share must be in \(0, 1\], not -0.5"):
        select({"train": []}, {}, max_one_line_share=-0.5)


def test_task_keys_read_the_record():
    bug = _task("f", "off-by-one", "f( 1 )")["bug"]
    assert task_keys("p", bug) == TaskKeys("p", "f(1)", frozenset({("p/a.py", "f", "off-by-one")}))
    assert task_keys("p", {"problem_statement": "no code here"}).call is None
    assert task_keys("p", bug, origin={"source": "history"}, signals={"tokens_changed": 1}).rank == HISTORY
    assert task_keys("p", bug, signals={"tokens_changed": 1}).rank == ONE_TOKEN
    assert task_keys("p", bug).lines is None and not task_keys("p", bug).one_line  # no patch: not counted
    fix = "--- a/p/a.py\n+++ b/p/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert task_keys("p", bug, fix_patch=fix).lines == 1 and task_keys("p", bug, fix_patch=fix).one_line


@pytest.fixture(scope="module")
def served():
    return SweSynthSuite("projects")


def _of(suite):
    splits = {split: list(suite.task_ids(split)) for split in suite.splits()}
    return splits, {t: suite.task_keys(t) for ids in splits.values() for t in ids}


def test_the_default_suite_serves_distinct_tasks(served):
    assert served.distinct and default_suite().distinct
    splits, keys = _of(served)
    assert not violations(splits, keys)
    assert held_out_duplicates(splits, keys) == 0 and len(splits["test_id"]) > 0
    for why in (SAME_CALL, SAME_FUNCTION):  # each rule left tasks out, counted
        assert served.unserved[why] > 0, why
    pool = SweSynthSuite("projects", distinct=False)
    assert set(served.task_ids("all")) < set(pool.task_ids("all"))
    assert set(served.moved_to_train) <= set(pool.task_ids("test_id"))
    assert set(served.moved_to_train) & set(served.task_ids("all")) <= set(served.task_ids("train"))
    assert set(served.task_ids("test")) <= set(pool.task_ids("test"))  # held out by project, as before
    # the sabotage: the rule off, the same checks fail on the same suite
    loose = violations(*_of(pool))
    assert any("held by" in v for v in loose) and any("test_id" in v for v in loose)
    # the project share: v2's largest project stays under 5 % once the other rules have cut it
    # (glom at 2.8 % after session 41, the one-line share cutting the largest projects' one-line
    # fixes first), so the rule is shown binding just below the largest share the other rules leave:
    # there it leaves tasks out, counted, and holds; switched off, that project passes it
    pool_splits, pool_keys = _of(pool)
    uncapped = select(pool_splits, pool_keys, max_project_share=1.0)
    served_ids = [t for ids in uncapped.splits.values() for t in ids]
    largest = max(Counter(pool_keys[t].project for t in served_ids).values()) / len(served_ids)
    share = round(0.9 * largest, 4)
    tight = select(pool_splits, pool_keys, max_project_share=share)
    assert PROJECT_SHARE in tight.dropped.values()
    assert not any("holds" in v for v in violations(tight.splits, pool_keys, share=share))
    assert any("holds" in v for v in violations(uncapped.splits, pool_keys, share=share))


def _outranked(chosen, keys):
    """Tasks left out for a shared key whose three served holders are not all taken before them by
    rank (a holder with a smaller or less real fix), in projects the project cap did not cut (it
    removes served holders after the fact). A holder the bug-type cap removed after the fact held
    its keys when they filled, so it counts (v2's validators: three one-token wrong-variable fixes of
    `_validate_optionals` held the key, then the type cap cut them)."""
    served = [t for ids in chosen.splits.values() for t in ids]
    served += [t for t, why in chosen.dropped.items() if why in (TYPE_SHARE, ONE_LINE_SHARE)]
    holders: dict = {}
    for t in served:
        for k in keys[t].all():
            holders.setdefault(k, []).append(keys[t].rank)
    capped = {keys[t].project for t, why in chosen.dropped.items() if why == PROJECT_SHARE}
    out = []
    for t, why in chosen.dropped.items():
        if why not in (SAME_CALL, SAME_FUNCTION) or keys[t].project in capped:
            continue
        own = keys[t].all()
        full = [k for k in (own[:1] if why == SAME_CALL else own[1 if keys[t].call is not None else 0:])
                if len(holders.get(k, ())) >= MAX_PER_KEY]
        if not any(max(holders[k]) <= keys[t].rank for k in full):
            out.append(t)
    return out


def test_the_default_suite_serves_the_realest_near_duplicates(served):
    pool = SweSynthSuite("projects", distinct=False)
    splits, keys = _of(pool)
    chosen = select(splits, keys)
    assert set(served.task_ids("all")) == {t for ids in chosen.splits.values() for t in ids}
    assert not _outranked(chosen, keys)
    one_token = Counter(keys[t].rank == ONE_TOKEN for ids in chosen.splits.values() for t in ids)
    # the sabotage: ranks off (hash order alone), history and larger fixes left out for one-token ones
    flat = {t: dataclasses.replace(k, rank=MULTI_TOKEN) for t, k in keys.items()}
    loose = select(splits, flat)
    assert _outranked(loose, keys)
    loose_one = Counter(keys[t].rank == ONE_TOKEN for ids in loose.splits.values() for t in ids)
    assert one_token[True] < loose_one[True]
    # ranking costs a few served tasks, not many (v2 after session 33: 3,585 against 3,642, 1.6 %)
    assert abs(sum(one_token.values()) - sum(loose_one.values())) <= 0.02 * sum(loose_one.values())


def _share_of_commonest_type(chosen, keys):
    served = [t for ids in chosen.splits.values() for t in ids]
    counts = Counter(b for t in served for b in {f[2] for f in keys[t].functions})
    return counts.most_common(1)[0][1] / len(served)


def _type_shares(chosen, keys):
    served = [t for ids in chosen.splits.values() for t in ids]
    counts = Counter(b for t in served for b in {f[2] for f in keys[t].functions})
    return {b: n / len(served) for b, n in counts.items()}


def test_the_default_suite_serves_fewer_of_its_commonest_bug_type(monkeypatch):
    pool = SweSynthSuite("projects", distinct=False)
    splits, keys = _of(pool)
    share = _share_of_commonest_type(select(splits, keys), keys)
    assert share <= MAX_TYPE_SHARE
    # a tighter cap binds on the real suite and holds; off, the commonest type takes more
    tight = select(splits, keys, max_type_share=0.12)
    assert _share_of_commonest_type(tight, keys) <= 0.12 and TYPE_SHARE in tight.dropped.values()
    assert _share_of_commonest_type(select(splits, keys, max_type_share=1), keys) > 0.12
    default = _type_shares(select(splits, keys), keys)
    monkeypatch.setattr(distinct, "_types", lambda k: set())  # the sabotage: types ignored
    # the rarer-types-first order is gone, and a cap holds nothing (since session 36's projects the
    # commonest type stays under 20 % even so, and under 15 % since the one-line share of session
    # 41, so the tighter cap shows it); since session 43 the commonest type is release history's
    # `regression`, served first whatever its type, so what grows is a procedural type
    sabotaged = _type_shares(select(splits, keys), keys)
    grown = max(sabotaged, key=lambda t: sabotaged[t] - default.get(t, 0.0))
    assert sabotaged[grown] - default.get(grown, 0.0) > 0.005, (grown, sabotaged[grown], default.get(grown))
    assert _share_of_commonest_type(select(splits, keys, max_type_share=0.12), keys) > 0.12


def test_the_default_suite_serves_a_median_fix_of_two_or_more_lines(served):
    """Issue 42: the served default's median fix spans two or more changed lines, one-token fixes
    stay in it (not cut to none) and history tasks are none of what the share left out."""
    import statistics

    splits, keys = _of(served)
    ids = [t for ids in splits.values() for t in ids]
    assert statistics.median(keys[t].lines for t in ids) >= 2
    assert 0.1 < sum(keys[t].rank == ONE_TOKEN for t in ids) / len(ids) <= 0.4
    assert served.unserved[ONE_LINE_SHARE] > 0
    pool = SweSynthSuite("projects", distinct=False)
    pool_splits, pool_keys = _of(pool)
    chosen = select(pool_splits, pool_keys)
    assert not [t for t, why in chosen.dropped.items() if why == ONE_LINE_SHARE and pool_keys[t].rank == HISTORY]
    # the sabotage: the share off, the median served fix is one line again
    loose = select(pool_splits, pool_keys, max_one_line_share=1)
    assert statistics.median(pool_keys[t].lines for ids in loose.splits.values() for t in ids) < 2


def test_suites_of_your_own_and_behaviour_any_keep_every_task(served):
    toy = SweSynthSuite("toy")
    assert not toy.distinct and toy.unserved.get(SAME_CALL) is None
    every = SweSynthSuite(SUITE_DIR, behaviour="any")
    assert not every.distinct and len(every.task_ids("all")) > len(served.task_ids("all"))
    assert SweSynthSuite("toy", distinct=True).distinct  # asked for


def test_fix_size_serves_only_larger_fixes_or_only_release_history():
    """``fix_size="larger"`` (through ``gym.make``) serves no one-token fix, ``"history"`` only
    release-history reverts; the distinct rules then hold within what is left. The default serves
    one-token fixes too (the filter is not a no-op); an unknown size is refused by name."""
    import gymnasium as gym

    import termgym  # noqa: F401  (registers the envs)

    env = gym.make("termgym/SweSynth-v0", fix_size="larger")
    try:
        larger = env.unwrapped.suite
        ids = [tid for split in larger.splits() for tid in larger.task_ids(split)]
        assert ids and not [tid for tid in ids if larger.fix_rank(tid) == ONE_TOKEN]
        assert any(larger.fix_rank(tid) == HISTORY for tid in ids)
        keys = {tid: larger.task_keys(tid) for tid in ids}
        assert max(Counter((k.project, k.call) for k in keys.values() if k.call).values()) <= MAX_PER_KEY
    finally:
        env.close()
    history = SweSynthSuite("v2", fix_size="history")
    kept = [tid for split in history.splits() for tid in history.task_ids(split)]
    assert kept and {history.fix_rank(tid) for tid in kept} == {HISTORY}
    default = default_suite()
    assert any(default.fix_rank(tid) == ONE_TOKEN for split in default.splits() for tid in default.task_ids(split))
    with pytest.raises(ValueError, match="fix_size must be one of any, larger, history, not 'tiny'"):
        SweSynthSuite("v2", fix_size="tiny")
