"""The generation engine: coverage screening in the sandbox runtime, per-task validation, compact
storage, held-out splits, the difficulty filter and the named-module share (real sandboxes, the
real grader, a small real repository written into tmp)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import replace

import pytest

from termgym.factory.swesynth import bundle
from termgym.factory.swesynth.adapters import fallback_signals, names_module, stem_of_test_file
from termgym.factory.swesynth.generate import (
    function_key,
    generate,
    oracle_restores_clean_tree,
    validate_in_sandbox,
)
from termgym.factory.swesynth.screen import ProjectEnv, StatementMap, changed_lines, project_baseline
from termgym.tasks.swesynth.records import RecordError
from termgym.tasks.swesynth.selection import select_command
from termgym.tasks.swesynth.suite import SweSynthSuite
from tests.swesynth.episodes import oracle_and_nop

PYTEST = "python3 -m pytest -q tests"

HELPERS = '''\
"""Shared helpers: the rounding every module uses."""

TAX = 0.2


def round_cents(value):
    """Round to two decimals, halves up."""
    return int(value * 100 + 0.5) / 100


def unused(value):
    """Called by no test."""
    return value * 3
'''
PRICES = '''\
"""Prices with tax, built on the helpers."""

from shop.helpers import TAX, round_cents


def with_tax(net):
    """The gross price of a net price."""
    if net < 0:
        raise ValueError("negative price")
    return round_cents(net * (1 + TAX))


def total(nets):
    """The gross total of several net prices."""
    out = 0
    for net in nets:
        out += with_tax(net)
    return round_cents(out)
'''
TESTS = '''\
import pytest

from shop.prices import total, with_tax


def test_with_tax():
    assert with_tax(10) == 12.0


def test_with_tax_rounds():
    assert with_tax(0.05) == 0.06


def test_negative_is_refused():
    with pytest.raises(ValueError):
        with_tax(-1)


def test_total():
    assert total([10, 20]) == 36.0


def test_total_empty():
    assert total([]) == 0
'''


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """A small project whose only test file is *not* named after the helper module."""
    root = tmp_path_factory.mktemp("shop") / "shop-repo"
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "helpers.py").write_text(HELPERS)
    (root / "shop" / "prices.py").write_text(PRICES)
    (root / "tests" / "test_checkout.py").write_text(TESTS)
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TERMGYM_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="module")
def baseline(shop, cache):
    return project_baseline(shop, PYTEST, ["shop"], ProjectEnv())


@pytest.fixture(scope="module")
def compact_suite(shop, cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("compact") / "suite"
    result = generate(shop, PYTEST, n=4, seed=3, out=out, name="shop", workers=2, storage="compact",
                      source_dirs=["shop"], test_dirs=["tests"], max_attempts=60)
    assert result.stats.kept >= 2, result.stats.to_dict()
    return out, result


# -- screening --------------------------------------------------------------------------------


def test_select_command_swaps_test_paths_for_node_ids(shop):
    ids = ["tests/test_checkout.py::test_total"]
    assert select_command(PYTEST, shop, ids) == "python3 -m pytest -q tests/test_checkout.py::test_total"
    # an option's value that happens to be a path stays; other options stay
    cmd = "python3 -m pytest -q -p no:cacheprovider --rootdir tests tests -k 'not slow'"
    assert select_command(cmd, shop, ids) == ("python3 -m pytest -q -p no:cacheprovider --rootdir tests -k "
                                              "'not slow' tests/test_checkout.py::test_total")
    assert select_command(PYTEST, shop, None) == PYTEST
    with pytest.raises(ValueError, match="does not run pytest"):
        select_command("make test", shop, ids)


def test_changed_lines_and_import_time_statements():
    assert changed_lines("a\nb\nc\n", "a\nB\nc\n") == {2}
    assert changed_lines("a\nb\n", "a\nx\nb\n") == {1, 2}  # an insertion: both neighbours
    stmts = StatementMap(PRICES)
    assert stmts.runs_at_import(3)  # the import
    assert stmts.runs_at_import(6)  # the def line
    assert not stmts.runs_at_import(9)  # inside the body
    assert list(stmts.query_lines(8)) == [8]  # an `if` header: its own line


def test_baseline_records_who_executes_which_line_in_the_sandbox(baseline):
    assert len(baseline.tests) == 5 and baseline.runtime.get("pytest")
    helpers = baseline.coverage["shop/helpers.py"]
    tested = {baseline.tests[i].split("::")[1] for i in helpers[8]}  # round_cents' body
    assert tested == {"test_with_tax", "test_with_tax_rounds", "test_total", "test_total_empty"}
    assert 13 not in helpers  # unused() never runs
    assert 3 in baseline.import_lines["shop/helpers.py"]  # TAX = 0.2 runs at import


def test_tests_for_change_picks_the_executing_tests(baseline, shop):
    text = (shop / "shop" / "helpers.py").read_text()
    body = text.replace("int(value * 100 + 0.5)", "int(value * 100)")
    picked = baseline.tests_for_change("shop/helpers.py", text, body)
    assert sorted(t.split("::")[1] for t in picked) == ["test_total", "test_total_empty", "test_with_tax",
                                                        "test_with_tax_rounds"]
    assert baseline.tests_for_change("shop/helpers.py", text, text.replace("TAX = 0.2", "TAX = 0.25")) is None
    assert baseline.tests_for_change("shop/helpers.py", text, text.replace("value * 3", "value * 4")) == []


def test_baseline_records_each_tests_duration_and_the_budgets_follow_them(baseline):
    assert len(baseline.durations) == len(baseline.tests) and all(d > 0 for d in baseline.durations)
    assert baseline.fixture_seconds >= 0
    budgets = baseline.test_budgets(baseline.tests[:2], factor=10, margin=2)
    for test, budget in budgets.items():
        clean = baseline.durations[baseline.tests.index(test)]
        assert budget == pytest.approx(2 + baseline.fixture_seconds + 10 * clean, abs=1e-3)
    assert list(budgets) == baseline.tests[:2]
    assert baseline.test_budgets(["tests/test_checkout.py::not_a_test"]) == {}


def test_a_looping_candidate_ends_at_its_tests_budget_not_the_run_timeout(shop, baseline):
    """The speedup of generation: a bug that makes a test loop ends the run within seconds of the
    test's budget, and the run reads as timed out (as a run killed by its timeout does). Sabotage:
    without budgets the same run waits for the whole timeout."""
    from termgym.factory.swesynth.screen import ScreenWorker

    text = (shop / "shop" / "helpers.py").read_text()
    looping = {"shop/helpers.py": text.replace("return int(value * 100 + 0.5) / 100",
                                               "while True:\n        value += 0")}
    tests = [t for t in baseline.tests if t.endswith("test_with_tax")]
    worker = ScreenWorker(shop, PYTEST, ["shop"], ProjectEnv())
    try:
        run = worker.run(looping, tests, timeout=25, budgets={tests[0]: 1.0})
        assert run.timed_out and run.overran == tests[0] and run.duration < 10, run
        clean = worker.run({}, tests, timeout=25, budgets={tests[0]: 1.0})  # files restored
        assert not clean.timed_out and clean.passed == set(tests)
        assert set(clean.durations[tests[0]]) == {"setup", "call", "teardown"}
        slow = worker.run(looping, tests, timeout=6)  # the sabotage: no budget, the timeout decides
        assert slow.timed_out and not slow.overran and slow.duration >= 5.5
    finally:
        worker.close()


def test_a_test_stuck_in_c_code_is_ended_by_faulthandler_past_its_budget(shop, baseline):
    """A regular expression backtracking holds the interpreter lock, starving the watchdog thread;
    faulthandler's timer thread ends the run a second after the budget. Sabotage: with no budget
    the run waits for the whole timeout."""
    from termgym.factory.swesynth.screen import ScreenWorker

    text = (shop / "shop" / "helpers.py").read_text()
    stuck = {"shop/helpers.py": text.replace(
        "return int(value * 100 + 0.5) / 100",
        "import re\n    re.match(r'(a+)+$', 'a' * 40 + 'b')\n    return int(value * 100 + 0.5) / 100")}
    tests = [t for t in baseline.tests if t.endswith("test_with_tax")]
    worker = ScreenWorker(shop, PYTEST, ["shop"], ProjectEnv())
    try:
        run = worker.run(stuck, tests, timeout=30, budgets={tests[0]: 1.0})
        assert run.timed_out and run.overran == tests[0] and run.duration < 12, run
        slow = worker.run(stuck, tests, timeout=6)
        assert slow.timed_out and not slow.overran and slow.duration >= 5.5
    finally:
        worker.close()


def test_a_run_stops_once_more_tests_fail_than_the_limit(shop, baseline):
    """Past the limit a candidate is rejected whatever the other tests do, so its run stops there
    (as --maxfail does); the tests not run count as failed. Sabotage: without the limit all run."""
    from termgym.factory.swesynth.screen import ScreenWorker

    text = (shop / "shop" / "helpers.py").read_text()
    broken = {"shop/helpers.py": text.replace("return int(value * 100 + 0.5) / 100", "return 0")}
    worker = ScreenWorker(shop, PYTEST, ["shop"], ProjectEnv())
    try:
        stopped = worker.run(broken, baseline.tests, timeout=120, stop_after_failures=1)
        assert stopped.stopped_early and stopped.exit_code == 1
        assert list(stopped.outcomes.values()).count("failed") == 2 and len(stopped.outcomes) < len(baseline.tests)
        assert len(stopped.failed_among(baseline.tests)) > 2  # the tests not run count as failed
        full = worker.run(broken, baseline.tests, timeout=120)
        assert not full.stopped_early and len(full.outcomes) == len(baseline.tests)
    finally:
        worker.close()


def test_failure_texts_keep_pytest_s_own_traceback_whatever_the_project_asks(shop, baseline, tmp_path, monkeypatch):
    """A project whose pytest configuration asks for ``--tb native`` (mako) or ``--tb=short``
    (cbor2, typeguard) still gives the report writer pytest's own failure text: the failing line
    marked ``>`` in the test's source. Sabotage: without the screen plugin's override the text is
    a native traceback and no line is marked."""
    from termgym.factory.swesynth import screen
    from termgym.factory.swesynth.screen import ScreenWorker

    tree = tmp_path / "native"
    shutil.copytree(shop, tree)
    (tree / "pytest.ini").write_text("[pytest]\naddopts = --tb native\n")
    text = (tree / "shop" / "helpers.py").read_text()
    broken = {"shop/helpers.py": text.replace("return int(value * 100 + 0.5) / 100", "return 0")}
    tests = [t for t in baseline.tests if t.endswith("test_with_tax")]
    worker = ScreenWorker(tree, PYTEST, ["shop"], ProjectEnv())
    try:
        run = worker.run(broken, tests, timeout=60)
        message = run.messages[tests[0]]
        assert "\n>" in message and "Traceback (most recent call last)" not in message, message
    finally:
        worker.close()
    sabotaged = tmp_path / "screen_plugin.py"
    sabotaged.write_text(screen.PLUGIN_SOURCE.read_text().replace('config.option.tbstyle = "auto"', "pass"))
    monkeypatch.setattr(screen, "PLUGIN_SOURCE", sabotaged)
    worker = ScreenWorker(tree, PYTEST, ["shop"], ProjectEnv())
    try:
        native = worker.run(broken, tests, timeout=60).messages[tests[0]]
    finally:
        worker.close()
    assert "Traceback (most recent call last)" in native and "\n>" not in native


def test_baseline_is_cached_per_tree_hash(shop, baseline, tmp_path):
    again = project_baseline(shop, PYTEST, ["shop"], ProjectEnv())
    assert again.key == baseline.key and again.tests == baseline.tests
    copy = tmp_path / "copy"
    shutil.copytree(shop, copy)
    (copy / "tests" / "test_checkout.py").write_text(TESTS + "\n\ndef test_more():\n    assert total([1]) == 1.2\n")
    changed = project_baseline(copy, PYTEST, ["shop"], ProjectEnv())
    assert changed.key != baseline.key and len(changed.tests) == 6


def test_no_passing_test_in_the_sandbox_is_a_clear_error(tmp_path, cache):
    root = tmp_path / "broken"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    (root / "tests" / "test_f.py").write_text("import not_installed_anywhere\n\ndef test_f():\n    assert True\n")
    with pytest.raises(RuntimeError, match="passed no test in the local sandbox"):
        generate(root, PYTEST, n=1, out=tmp_path / "out", source_dirs=["pkg"], test_dirs=["tests"])


# -- generation, validation, storage ----------------------------------------------------------------


def test_generation_screens_and_validates_each_task(compact_suite):
    out, result = compact_suite
    stats = result.stats
    assert stats.runs and stats.tests_run < stats.runs * stats.required_tests  # only the executing tests ran
    for record in result.records:
        v = record.validation
        assert v["backend"] == "local" and v["oracle"] == "5/5" and v["nop"].split("/")[0] != "5", v
        assert "failing tests" in v["nop_check"] and v["runtime_version"]
        assert record.difficulty in ("easy", "medium", "hard")
        assert {"traceback_shows_line", "test_file_names_module", "tokens_changed", "files_touched", "edits",
                "cross_module"} <= set(record.signals)


def test_generation_records_the_behaviour_check_beside_the_records(compact_suite):
    out, result = compact_suite
    checked = [r for r in result.records if r.behaviour]
    assert checked, [r.validation.get("behaviour") for r in result.records]
    for record in result.records:
        assert record.validation["behaviour"].startswith(("none: ", f"{len(record.behaviour.get('inputs', []))} inputs"))
    sidecar = out / "behaviour" / "shop.jsonl"
    assert sorted(json.loads(line)["task_id"] for line in sidecar.read_text().splitlines()) == \
        sorted(r.task_id for r in checked)
    suite = SweSynthSuite(out)
    for record in checked:
        loaded = suite.record(record.task_id).behaviour
        assert loaded["answers"] == record.behaviour["answers"] and loaded["discriminating"] >= 1


def test_generate_says_how_many_tasks_are_served_and_served_only_keeps_just_those(compact_suite, shop, tmp_path,
                                                                                  monkeypatch):
    """The generation summary names how many new tasks ``gym.make`` serves by default and why the others
    are not; ``served_only`` rejects a task whose check does not decide a grade alone instead of keeping it."""
    import termgym.factory.swesynth.generate as generation
    from termgym.commands.swesynth import served_line
    from termgym.tasks.swesynth.behaviour import servable

    _, result = compact_suite
    served = sum(servable(r.behaviour) for r in result.records)
    line = served_line(result.records)
    assert line.startswith(f"served by gym.make by default: {served} of {len(result.records)} ")
    assert ("served only with behaviour='any'" in line) == (served < len(result.records))
    unchecked = [replace(result.records[0], behaviour={})]
    unchecked[0].validation = {**unchecked[0].validation, "behaviour": "none: no call had replayable arguments (x)"}
    assert served_line(unchecked) == ("served by gym.make by default: 0 of 1 (a behaviour check tells the bug apart "
                                      "on inputs no test makes); served only with behaviour='any', graded by their "
                                      "tests alone: no call had replayable arguments x1 (--served-only keeps only "
                                      "served tasks)")
    # every shop task has a check that decides; with none deciding, served_only keeps nothing ...
    monkeypatch.setattr(generation, "servable", lambda check: False)
    options = dict(n=1, seed=3, name="shop", workers=1, storage="compact", source_dirs=["shop"], test_dirs=["tests"],
                   max_attempts=8)
    turned_away = generate(shop, PYTEST, out=tmp_path / "served", served_only=True, **options)
    assert not turned_away.records
    assert turned_away.stats.rejected.get("no behaviour check tells the bug apart", 0) >= 1, turned_away.stats.rejected
    # ... and the sabotage, the flag off: the same candidates are kept
    assert generate(shop, PYTEST, out=tmp_path / "all", served_only=False, **options).records


def test_compact_storage_round_trip_and_filters(compact_suite):
    out, result = compact_suite
    index = json.loads((out / "suite.json").read_text())
    assert index["storage"] == "compact" and index["repos"]["shop"]["records"] == "records/shop.jsonl"
    lines = (out / "records" / "shop.jsonl").read_text().splitlines()
    assert len(lines) == result.stats.kept and all('"all_tests":"baseline"' in x for x in lines)
    suite = SweSynthSuite(out)
    ids = suite.task_ids("all")
    assert sorted(ids) == sorted(r.task_id for r in result.records)
    record = suite.record(ids[0])
    assert record.all_tests == json.loads((out / "baselines" / "shop.json").read_text())["tests"]
    assert set(record.target_tests) <= set(record.all_tests)
    assert suite.projects() == {"shop": len(ids)}
    tier = record.difficulty
    assert ids[0] in SweSynthSuite(out, difficulty=tier).task_ids("all")
    others = [t for t in ("easy", "medium", "hard") if t != tier]
    assert ids[0] not in SweSynthSuite(out, difficulty=others).task_ids("all")
    with pytest.raises(ValueError, match="difficulty must be one of easy, medium, hard"):
        SweSynthSuite(out, difficulty="brutal")


def test_compact_storage_errors_name_the_file(compact_suite, tmp_path):
    out, _ = compact_suite
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    (broken / "records" / "shop.jsonl").write_text("{not json\n")
    with pytest.raises(RecordError, match=r"shop\.jsonl:1: not valid JSON"):
        SweSynthSuite(broken)
    shutil.rmtree(broken)
    shutil.copytree(out, broken)
    (broken / "baselines" / "shop.json").unlink()
    with pytest.raises(RecordError, match="names the baseline .* which does not exist"):
        SweSynthSuite(broken)


def test_validation_rejects_a_wrong_oracle_and_a_bug_nothing_fails(compact_suite, shop, baseline):
    out, result = compact_suite
    record = SweSynthSuite(out).record(result.records[0].task_id)
    files = {p: (shop / p).read_text() for p in ("shop/helpers.py", "shop/prices.py")}
    assert oracle_restores_clean_tree(record, files) is None
    broken_fix = record.fix_patch.replace("\n+", "\n+# not the original\n+", 1)
    assert "does not apply" in oracle_restores_clean_tree(replace(record, fix_patch=broken_fix), files) or \
        "byte for byte" in oracle_restores_clean_tree(replace(record, fix_patch=broken_fix), files)
    # a "bug" in a function no test calls: the do-nothing agent passes, so the task is rejected
    text = files["shop/helpers.py"]
    from termgym.factory.swesynth.patches import make_patch

    harmless = {"shop/helpers.py": text.replace("value * 3", "value * 4")}
    fake = replace(record, task_id="shop-harmless", bug_patch=make_patch({"shop/helpers.py": text}, harmless),
                   fix_patch=make_patch(harmless, {"shop/helpers.py": text}), repo_dir=shop)
    reason = validate_in_sandbox(fake, files, baseline)
    assert reason and "does not fail" in reason, reason


def test_env_runs_a_compact_task_oracle_one_nop_zero(compact_suite, tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    out, result = compact_suite
    oracle, nop, grade = oracle_and_nop(SweSynthSuite(out), result.records[0].task_id)
    assert oracle == 1.0 and nop == 0.0 and grade["passed"] is False


def test_generation_writes_the_coverage_map_and_its_grades_run_the_selection(compact_suite, tmp_path, monkeypatch):
    """generate writes the project's fast-grade map from its baseline's traced run (no second trace),
    the same map a fresh traced run writes; a grade of a generated task then runs its selection."""
    from termgym.factory.swesynth.selection_build import backfill
    from termgym.tasks.swesynth.selection import load_map

    out, result = compact_suite
    assert result.stats.coverage_map == str(out / "selection" / "shop.json"), result.stats.coverage_map
    cmap = load_map(out / "selection" / "shop.json")
    assert set(cmap.tasks) == {r.task_id for r in result.records} and cmap.tests == result.records[0].all_tests
    again = tmp_path / "again"
    shutil.copytree(out, again)
    (again / "selection" / "shop.json").unlink()
    backfill(again, ["shop"], log=lambda _line: None)  # traced anew
    fresh = load_map(again / "selection" / "shop.json")
    assert (fresh.functions, fresh.always, fresh.tasks) == (cmap.functions, cmap.always, cmap.tasks)
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    suite = SweSynthSuite(out)
    tid = result.records[0].task_id
    assert suite.selection_file("shop") == out / "selection" / "shop.json"
    oracle, nop, grade = oracle_and_nop(suite, tid)
    assert (oracle, nop) == (1.0, 0.0) and grade["graded_tests"]["mode"] == "selected", grade["graded_tests"]


# -- signals, splits, the named-module share ------------------------------------------------------------


def test_signals_from_the_patch_and_tracebacks():
    assert stem_of_test_file("tests/test_money.py::test_x[1]") == "money"
    assert stem_of_test_file("pkg/tests/money_test.py::T::t") == "money"
    assert names_module(["tests/test_money.py::t"], ["ledger/money.py"])
    assert not names_module(["tests/test_checkout.py::t"], ["shop/helpers.py"])
    patch = ("diff --git a/shop/helpers.py b/shop/helpers.py\n--- a/shop/helpers.py\n+++ b/shop/helpers.py\n"
             "@@ -8 +8 @@\n-    return int(value * 100 + 0.5) / 100\n+    return int(value * 100) / 100\n")
    signals = fallback_signals(bug_patch=patch, target_tests=["tests/test_checkout.py::test_with_tax"],
                               messages={"tests/test_checkout.py::test_with_tax": "E  assert 11.99 == 12.0"})
    assert signals["files_touched"] == 1 and signals["edits"] == 1 and signals["tokens_changed"] == 2
    assert not signals["traceback_shows_line"] and not signals["test_file_names_module"] and signals["cross_module"]


def test_held_out_projects_are_fixed_and_never_in_train():
    names = [f"p{i}" for i in range(12)]
    held = bundle.held_out_projects(names)
    assert len(held) == 3 and held == bundle.held_out_projects(list(reversed(names)))
    assert bundle.held_out_projects(["only"]) == []


def test_a_growing_suite_keeps_its_held_out_projects(tmp_path):
    """Adding projects to a suite never moves one between ``train`` and ``test``: a project with
    tasks stays where its tasks are, one run without tasks as recorded, a new one goes by its hash."""
    names = [f"p{i}" for i in range(12)]
    assert bundle.stable_held_out(tmp_path / "new", names) == bundle.held_out_projects(names)
    out = tmp_path / "suite"
    (out / "records").mkdir(parents=True)
    rows = {"a": ["a-1", "a-2"], "b": ["b-1"], "c": []}
    for name, ids in rows.items():
        (out / "records" / f"{name}.jsonl").write_text("".join(json.dumps({"task_id": t}) + "\n" for t in ids))
    index = {"repos": {n: {} for n in rows}, "generation": {n: {} for n in [*rows, "d"]},
             "splits": {"test": ["a-1", "a-2"], "train": ["b-1"]}, "held_out_projects": ["b", "c"]}
    (out / "suite.json").write_text(json.dumps(index))
    new = [f"n{i}" for i in range(400)]
    held = set(bundle.stable_held_out(out, ["a", "b", "c", "d", *new]))
    assert {"a", "c"} <= held and not {"b", "d"} & held  # b's tasks are in train whatever the list says
    by_hash = {n for n in new if n in held}
    assert 0.15 < len(by_hash) / len(new) < 0.35  # a quarter, give or take
    assert by_hash == {n for n in new if n in bundle.stable_held_out(out, [*new[:200], *new[200:], "x", "y"])}


def test_named_share_is_enforced_across_the_suite(compact_suite, tmp_path):
    out, _ = compact_suite
    copy = tmp_path / "named"
    shutil.copytree(out, copy)
    path = copy / "records" / "shop.jsonl"
    records = [json.loads(x) for x in path.read_text().splitlines()]
    for r in records:
        r["signals"]["test_file_names_module"] = True
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    # a second project with one task nothing names keeps one named task beside it
    shutil.copy(copy / "baselines" / "shop.json", copy / "baselines" / "other.json")
    other = dict(records[0], task_id="other-1", repo="other", signals={"test_file_names_module": False})
    (copy / "records" / "other.jsonl").write_text(json.dumps(other) + "\n")
    index = json.loads((copy / "suite.json").read_text())
    index["repos"]["other"] = dict(index["repos"]["shop"], records="records/other.jsonl",
                                   baseline="baselines/other.json")
    index["splits"]["test"] = ["other-1"]
    index["generation"]["other"] = {"kept": 1, "attempted": 1}
    (copy / "suite.json").write_text(json.dumps(index))
    dropped = bundle.enforce_named_share(copy, 0.5)
    assert dropped == {"shop": len(records) - 1}
    assert bundle.named_share(copy) == {"tasks": 2, "named": 1, "share": 0.5}
    assert len(SweSynthSuite(copy, behaviour="any").task_ids("all")) == 2
    table = bundle.summary_markdown(copy)
    assert "| shop" in table and "named after the buggy module: 1/2" in table


def test_the_named_trim_evens_out_projects_instead_of_emptying_one(compact_suite, tmp_path):
    """Project a: 6 named tasks; project b: 4 named and 2 not. Half of the suite may be named, so
    8 named tasks go; taking from the project with the most named tasks leaves both projects one."""
    out, _ = compact_suite
    copy = tmp_path / "even"
    shutil.copytree(out, copy)
    template = json.loads((copy / "records" / "shop.jsonl").read_text().splitlines()[0])
    index = json.loads((copy / "suite.json").read_text())
    shop_entry = index["repos"].pop("shop")
    (copy / "records" / "shop.jsonl").unlink()
    index["splits"] = {"train": []}
    index["generation"] = {}
    for name, named, plain in (("a", 6, 0), ("b", 4, 2)):
        rows = [dict(template, task_id=f"{name}-{i}", repo=name,
                     signals=dict(template["signals"], test_file_names_module=i < named))
                for i in range(named + plain)]
        (copy / "records" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        shutil.copy(copy / "baselines" / "shop.json", copy / "baselines" / f"{name}.json")
        index["repos"][name] = dict(shop_entry, records=f"records/{name}.jsonl", baseline=f"baselines/{name}.json")
        index["splits"]["train"] += [r["task_id"] for r in rows]
        index["generation"][name] = {"kept": len(rows), "attempted": len(rows)}
    (copy / "suite.json").write_text(json.dumps(index))
    assert bundle.enforce_named_share(copy, 0.5) == {"a": 5, "b": 3}
    assert bundle.named_share(copy) == {"tasks": 4, "named": 2, "share": 0.5}
    assert SweSynthSuite(copy).projects() == {"a": 1, "b": 3}


def test_resume_continues_a_run_to_the_tasks_a_single_run_makes(shop, cache, compact_suite, tmp_path):
    """Two tasks, then resumed to four with the same seed: the same four tasks as one run of four
    (the judged candidates are skipped, the first run's records kept as written), and a summary
    that adds both runs up."""
    fresh_out, fresh = compact_suite
    out = tmp_path / "resumed"
    options = dict(seed=3, out=out, name="shop", workers=2, storage="compact", source_dirs=["shop"],
                   test_dirs=["tests"], max_attempts=60)
    first = generate(shop, PYTEST, n=2, **options)
    first_lines = (out / "records" / "shop.jsonl").read_text().splitlines()
    second = generate(shop, PYTEST, n=4, resume=True, **options)
    lines = (out / "records" / "shop.jsonl").read_text().splitlines()
    assert lines[:2] == first_lines  # the first run's records, byte for byte
    assert [json.loads(x)["task_id"] for x in lines] == [r.task_id for r in fresh.records]
    assert [r.task_id for r in second.records] == [r.task_id for r in fresh.records[2:]]
    generation = json.loads((out / "suite.json").read_text())["generation"]["shop"]
    assert generation["kept"] == 4 and generation["attempted"] == fresh.stats.attempted
    assert generation["attempted"] > first.stats.attempted
    assert sorted(SweSynthSuite(out).task_ids("all")) == sorted(r.task_id for r in fresh.records)
    with pytest.raises(ValueError, match="made with seed 3"):
        generate(shop, PYTEST, n=5, resume=True, **{**options, "seed": 4})
    with pytest.raises(ValueError, match="storage='compact'"):
        generate(shop, PYTEST, n=5, resume=True, **{**options, "storage": "folders"})


def test_the_function_cap_keeps_at_most_n_tasks_per_function_and_survives_a_resume(shop, cache, compact_suite,
                                                                                   tmp_path):
    """``max_per_function=1``: no two kept tasks break the same function with fixes of one size (one
    token, or larger), candidates on a taken function are skipped before they run, and a resumed
    run counts the first run's functions."""
    from termgym.factory.swesynth.known import cap_keys

    _, fresh = compact_suite
    uncapped = Counter(k for r in fresh.records for k in set(map(function_key, r.mutations)))
    assert max(uncapped.values()) > 1, uncapped  # the uncapped run repeats a function: the cap has work
    out = tmp_path / "capped"
    options = dict(seed=3, out=out, name="shop", workers=2, storage="compact", source_dirs=["shop"],
                   test_dirs=["tests"], max_attempts=60, max_per_function=1)
    first = generate(shop, PYTEST, n=1, **options)
    second = generate(shop, PYTEST, n=7, resume=True, **options)  # more than the 3 functions' 6 slots allow
    lines = [json.loads(x) for x in (out / "records" / "shop.jsonl").read_text().splitlines()]
    per_function = Counter(k for line in lines for k in cap_keys(line))
    assert len({k[:2] for k in per_function}) == 3 and max(per_function.values()) == 1, per_function
    assert len(lines) < 7
    # the sizes kept apart, a function holds a one-token fix and a larger one; over both sizes
    # (release history's cap), one task a function
    assert max(Counter(k[:2] for k in per_function).values()) == 2, per_function
    whole = tmp_path / "whole"
    generate(shop, PYTEST, n=7, **{**options, "out": whole, "sizes_apart": False})
    kept_whole = [json.loads(x) for x in (whole / "records" / "shop.jsonl").read_text().splitlines()]
    assert max(Counter(k[:2] for line in kept_whole for k in cap_keys(line)).values()) == 1
    assert len(lines) == first.stats.kept + len(second.records)
    reasons = json.loads((out / "suite.json").read_text())["generation"]["shop"]["rejected"]
    assert any(r.startswith("the function quota is full") for r in reasons), reasons
    with pytest.raises(ValueError, match="max_per_function"):
        generate(shop, PYTEST, n=1, **{**options, "max_per_function": 0})


def test_a_batch_that_extends_a_suite_skips_its_bugs_and_counts_its_functions(shop, cache, compact_suite, tmp_path):
    """``extends``: a batch made for a suite skips, before running a test, every candidate whose bug
    the suite holds (the same seed proposes those first: without ``extends`` it makes them again),
    so all of its tasks merge as new ones; with a per-function cap of 1 it breaks no function the
    suite breaks already; a suite that does not read is a clear error."""
    from termgym.factory.swesynth.known import cap_keys
    from termgym.factory.swesynth.merge import merge_suites

    suite_dir, fresh = compact_suite
    known = {r.task_id for r in fresh.records}
    lines = [json.loads(x) for x in (suite_dir / "records" / "shop.jsonl").read_text().splitlines()]
    known_functions = {k for line in lines for k in cap_keys(line)}
    options = dict(seed=3, name="shop", workers=2, storage="compact", source_dirs=["shop"], test_dirs=["tests"],
                   max_attempts=60)
    batch = generate(shop, PYTEST, n=2, out=tmp_path / "batch", extends=suite_dir, max_per_function=100, **options)
    assert batch.records and not known & {r.task_id for r in batch.records}
    assert batch.stats.rejected["the suite it extends has this bug already"] == len(known), batch.stats.rejected
    into = tmp_path / "into"
    shutil.copytree(suite_dir, into)
    merged = merge_suites(tmp_path / "batch", into)
    assert merged.added == {"shop": len(batch.records)} and not merged.same_bug, merged.to_dict()

    capped = generate(shop, PYTEST, n=2, out=tmp_path / "capped", extends=suite_dir, max_per_function=1, **options)
    capped_lines = [json.loads(x) for x in (tmp_path / "capped" / "records" / "shop.jsonl").read_text().splitlines()]
    assert not known_functions & {k for line in capped_lines for k in cap_keys(line)}
    assert any(r.startswith("the function quota is full") for r in capped.stats.rejected), capped.stats.rejected
    with pytest.raises(ValueError, match="--extends: .*no suite.json"):
        generate(shop, PYTEST, n=1, out=tmp_path / "none", extends=tmp_path / "nowhere", **options)


def test_a_candidate_whose_judging_crashes_is_rejected_and_the_run_goes_on(shop, cache, tmp_path, monkeypatch):
    """One candidate raising (``ast.unparse`` refusing an f-string, a patch the recording sandbox
    cannot apply: both ended whole project runs) is that candidate's rejection, named by the error;
    a run where every candidate crashes still fails, after a few in a row."""
    import termgym.factory.swesynth.generate as gen

    real, calls = gen.mutate_files, []

    def first_crashes(files, mutations):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("Unable to avoid backslash in f-string expression part\nmore")
        return real(files, mutations)

    monkeypatch.setattr(gen, "mutate_files", first_crashes)
    options = dict(seed=3, name="shop", workers=2, storage="compact", source_dirs=["shop"], test_dirs=["tests"],
                   max_attempts=60)
    result = generate(shop, PYTEST, n=2, out=tmp_path / "one", **options)
    assert result.stats.kept == 2, result.stats.to_dict()
    generation = json.loads((tmp_path / "one" / "suite.json").read_text())["generation"]["shop"]
    assert generation["rejected"]["internal error, ValueError"] == 1
    assert generation["errors"] == ["internal error, ValueError: Unable to avoid backslash in f-string expression part"]

    def always(files, mutations):
        raise RuntimeError("cannot apply a patch")

    monkeypatch.setattr(gen, "mutate_files", always)
    monkeypatch.setattr(gen, "MAX_ERRORS_IN_A_ROW", 3)
    with pytest.raises(RuntimeError, match="cannot apply a patch"):
        generate(shop, PYTEST, n=2, out=tmp_path / "all", **options)


def test_a_project_that_finishes_a_run_leaves_the_failed_list(tmp_path):
    """A project whose run crashed once and finished later is no failure any more: the card and
    the summary list only those still standing (before, the v2 card named five projects that had
    since given 23 to 168 tasks)."""
    (tmp_path / "suite.json").write_text(json.dumps({"repos": {}, "failed": {
        "parse": {"error": "SystemError: ...", "seconds": 1.0}, "mistletoe": {"error": "x", "seconds": 2.0}}}))
    bundle.clear_failure(tmp_path, "parse")
    assert json.loads((tmp_path / "suite.json").read_text())["failed"] == {"mistletoe": {"error": "x", "seconds": 2.0}}
    bundle.clear_failure(tmp_path, "mistletoe")
    bundle.clear_failure(tmp_path, "never-failed")
    assert json.loads((tmp_path / "suite.json").read_text()) == {"repos": {}}


# The shop's two modules as one file: the helpers (without the unused one) and the prices that use them.
SINGLE = HELPERS.split("\n\ndef unused", 1)[0] + PRICES.split("from shop.helpers import TAX, round_cents\n", 1)[1]


def test_a_single_module_project_gives_tasks_graded_like_a_packages(cache, tmp_path, monkeypatch):
    """``source_dirs=["pricing.py"]``: bugs go into the one module, the screening traces it (a
    file root, not a folder), and a task scores oracle 1 and do-nothing 0 through the env."""
    from termgym.tasks.swesynth.tree import is_source_path, list_source_files

    root = tmp_path / "pricing-repo"
    (root / "tests").mkdir(parents=True)
    (root / "pricing.py").write_text(SINGLE)
    (root / "setup.py").write_text("")
    (root / "tests" / "test_checkout.py").write_text(TESTS.replace("shop.prices", "pricing"))
    assert list_source_files(root, ["pricing.py"], ["tests"]) == ["pricing.py"]
    assert not is_source_path("pricing.py.bak", ["pricing.py"]) and not is_source_path("other.py", ["pricing.py"])
    out = tmp_path / "suite"
    result = generate(root, PYTEST, n=2, seed=3, out=out, name="pricing", workers=2, storage="compact",
                      source_dirs=["pricing.py"], test_dirs=["tests"], max_attempts=40)
    assert result.stats.kept == 2, result.stats.to_dict()
    assert result.stats.rejected.get("no required test executes the changed lines", 0) < result.stats.attempted
    for record in result.records:
        assert {m["path"] for m in record.mutations} == {"pricing.py"}
        assert record.validation["behaviour"] and "repro" in record.validation
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    oracle, nop, grade = oracle_and_nop(SweSynthSuite(out, behaviour="required"), result.records[0].task_id)
    assert oracle == 1.0 and nop == 0.0 and grade["passed"] is False


def test_dropping_tasks_keeps_the_suite_consistent(compact_suite, tmp_path):
    """``bundle.drop_tasks`` (what ``audit --drop-failing`` calls): the record, split entry and
    behaviour line go, the project's summary counts the task as rejected for the reason given."""
    out, result = compact_suite
    copy = tmp_path / "dropped"
    shutil.copytree(out, copy)
    victim = result.records[0].task_id
    before = json.loads((copy / "suite.json").read_text())["generation"]["shop"]
    assert bundle.drop_tasks(copy, {victim: "audit: report names every symptom"}) == {"shop": 1}
    index = json.loads((copy / "suite.json").read_text())
    gen = index["generation"]["shop"]
    assert gen["kept"] == before["kept"] - 1 and gen["rejected"]["audit: report names every symptom"] == 1
    assert all(victim not in ids for ids in index["splits"].values())
    assert victim not in (copy / "records" / "shop.jsonl").read_text()
    assert victim not in (copy / "behaviour" / "shop.jsonl").read_text()
    suite = SweSynthSuite(copy)
    assert victim not in suite.task_ids("all") and len(suite.task_ids("all")) == len(result.records) - 1
    assert bundle.drop_tasks(copy, {"no-such-task": "x"}) == {}
