"""Test running, junit ids, the keep rules, bug reports and the no-leak rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from termgym.factory.swesynth.inject import Mutation, apply_mutations
from termgym.factory.swesynth.llm import ChatClient, LLMError
from termgym.factory.swesynth.patches import file_diff, make_patch, patch_files
from termgym.factory.swesynth.report import (
    LeakError,
    banned_identifiers,
    check_no_leak,
    check_report,
    find_leaks,
    write_report,
    write_report_llm,
)
from termgym.factory.swesynth.validate import RunResult, baseline, judge, max_failures, parse_junit, run_tests
from termgym.tasks.swesynth.tree import is_source_path, is_test_path, list_source_files

PYTEST = "python -m pytest -q"


def _mutate(repo: Path, old: str, new: str) -> tuple[str, str, str]:
    path = repo / "minilib" / "stock.py"
    text = path.read_text()
    start = text.index(old)
    mutated = apply_mutations(text, [Mutation("x", "minilib/stock.py", start, start + len(old), new, 1, None, "")])
    path.write_text(mutated)
    return text, mutated, file_diff("minilib/stock.py", text, mutated)


def test_paths_are_classified_as_tests_or_sources(mini_repo):
    assert is_test_path("tests/test_stock.py") and is_test_path("pkg/tests/helpers.py")
    assert is_test_path("conftest.py") and is_test_path("pkg/thing_test.py")
    assert is_test_path("checks/a.py", test_dirs=["checks"])
    assert is_source_path("minilib/stock.py") and not is_source_path("setup.py")
    assert not is_source_path("docs/conf.py") and not is_source_path("minilib/data.json")
    assert is_source_path("src/x.py", source_dirs=["src"]) and not is_source_path("lib/x.py", source_dirs=["src"])
    # a vendored copy is another project's code: no bug goes there (bleach's _vendor/html5lib)
    assert not is_source_path("bleach/_vendor/html5lib/_tokenizer.py", source_dirs=["bleach"])
    assert is_source_path("bleach/sanitizer.py", source_dirs=["bleach"])
    assert list_source_files(mini_repo) == ["minilib/__init__.py", "minilib/stock.py"]


def test_baseline_gives_per_test_ids(mini_baseline):
    _, required = mini_baseline
    assert len(required) == 12
    assert "tests/test_stock.py::test_parse_plain" in required
    assert "tests/test_stock.py::test_total" in required


def test_a_repository_without_passing_tests_is_an_error(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    assert False\n")
    with pytest.raises(RuntimeError, match="passed no test"):
        baseline(tmp_path, PYTEST)


def test_keep_rules(repo_copy):
    mini_repo, required = repo_copy
    _mutate(mini_repo, "level < threshold", "level <= threshold")
    run = run_tests(mini_repo, PYTEST)
    verdict = judge(required, run, run, touched=["minilib/stock.py"])
    assert verdict.kept and verdict.target_tests == ["tests/test_stock.py::test_low_items_threshold_is_exclusive"]
    assert "AssertionError" in run.messages[verdict.target_tests[0]]
    # Touching a test file, breaking nothing, breaking too much, or flaking: all refused.
    assert "test files" in judge(required, run, run, touched=["tests/test_stock.py"]).reason
    clean = RunResult({t: "passed" for t in required})
    assert judge(required, clean, clean).reason == "no required test fails"
    many = RunResult({t: "failed" for t in required})
    assert "more than the limit of 10" in judge(required, many, many).reason
    assert "not deterministic" in judge(required, run, clean).reason
    assert max_failures(12) == 10 and max_failures(300) == 60


def test_missing_tests_count_as_failed():
    xml = ('<testsuites><testsuite><testcase classname="tests.test_a" name="test_one" file="tests/test_a.py"/>'
           '<testcase classname="tests.test_a.TestK" name="test_two[1-2]" file="tests/test_a.py">'
           '<failure message="assert 1 == 2">tb</failure></testcase>'
           '<testcase classname="tests.test_a" name="test_skip" file="tests/test_a.py"><skipped/></testcase>'
           '<testcase classname="" name=""><error message="collection failure"/></testcase>'
           '</testsuite></testsuites>')
    outcomes, messages = parse_junit(xml)
    assert outcomes == {"tests/test_a.py::test_one": "passed", "tests/test_a.py::TestK::test_two[1-2]": "failed",
                        "tests/test_a.py::test_skip": "skipped"}
    assert messages["tests/test_a.py::TestK::test_two[1-2]"].startswith("assert 1 == 2")
    run = RunResult(outcomes)
    assert run.failed_among(["tests/test_a.py::test_one", "tests/test_gone.py::test_x"]) == \
        ["tests/test_gone.py::test_x"]
    with pytest.raises(ValueError, match="not valid XML"):
        parse_junit("<testsuites")


def test_report_tells_what_happened_without_naming_code(repo_copy):
    mini_repo, required = repo_copy
    _, _, patch = _mutate(mini_repo, "result += level", "result -= level")
    run = run_tests(mini_repo, PYTEST)
    verdict = judge(required, run, run, touched=["minilib/stock.py"])
    report = write_report(verdict.target_tests, run.messages, patch, repo=mini_repo)
    assert "`total()`" in report  # the behaviour, named as the user calls it
    assert "total({'a': 1, 'b': 2, 'c': 3})" in report  # the call the failing check made
    assert "-6" in report and "`6`" in report  # the observed and the expected value
    # the repro imports what it calls, as a user would (the package's module is named only there)
    assert re.search(r"^(>>> )?from minilib\.stock import total$", report, re.M)
    prose = "\n".join(line for line in report.splitlines() if not re.match(r"(>>> )?(from|import) ", line))
    for word in ("result", "level", "stock", "minilib", ".py", "test_total"):
        assert not re.search(rf"\b{re.escape(word)}\b", prose.lower())
    assert check_report(report, target_tests=verdict.target_tests, patch=patch, repo=mini_repo) == []


def test_report_for_a_missing_error(repo_copy):
    mini_repo, required = repo_copy
    _, _, patch = _mutate(mini_repo, 'raise StockError("quantity cannot be negative")', "pass")
    run = run_tests(mini_repo, PYTEST)
    verdict = judge(required, run, run, touched=["minilib/stock.py"])
    report = write_report(verdict.target_tests, run.messages, patch, repo=mini_repo)
    assert "parse_quantity('-2')" in report and "`StockError`" in report  # the test shows the error class
    assert re.search(r"without (raising|complaint)|goes through|accepts", report)
    assert check_report(report, target_tests=verdict.target_tests, patch=patch, repo=mini_repo) == []
    assert "StockError" in banned_identifiers(patch)  # without the tests at hand it would be a leak


def test_no_leak_rule_catches_each_kind_of_leak():
    old = "def restock(levels, item, amount):\n    current = levels.get(item, 0)\n    return current + amount\n"
    new = old.replace("current + amount", "current - amount")
    patch = make_patch({"minilib/stock.py": old}, {"minilib/stock.py": new})
    assert patch_files(patch) == ["minilib/stock.py"]
    banned = banned_identifiers(patch)
    assert {"restock", "current", "amount", "minilib", "stock"} <= banned
    assert "return" not in banned and "levels" in banned  # from the function context
    assert find_leaks("Adding five units leaves the level lower than before.", patch) == []
    assert find_leaks("The restock call subtracts.", patch)
    assert find_leaks("The Current value is wrong", patch)  # case-insensitive
    assert find_leaks("see stock.py", patch)
    assert find_leaks("it fails at line 3", patch)
    assert find_leaks("diff --git a/x b/x\n", patch)
    assert find_leaks("it does return current - amount", patch)
    snake = make_patch({"m/a.py": "x = max_length\n"}, {"m/a.py": "x = max_length + 1\n"})
    assert find_leaks("the max length is off", snake) and find_leaks("MAX-LENGTH", snake)
    with pytest.raises(LeakError, match="restock"):
        check_no_leak("restock is broken", patch)


def test_llm_writer_retries_leaks_then_falls_back(repo_copy, scripted_model):
    mini_repo, required = repo_copy
    _, _, patch = _mutate(mini_repo, "result += level", "result -= level")
    run = run_tests(mini_repo, PYTEST)
    targets = judge(required, run, run).target_tests
    good = ("Summing shelves with `total()` gives a negative number.\n\nCalling `total({'a': 1, 'b': 2})` "
            "returns `-3`, but it should return `3`.")
    answers = iter(["The total() function in stock.py is broken.", good])
    server = scripted_model(lambda messages: next(answers))
    client = ChatClient(server.base_url, "scripted")
    report = write_report_llm(client, targets, run.messages, patch, repo=mini_repo)
    assert report == good + "\n"
    assert len(server.requests) == 2
    retry = server.requests[1]["messages"][-1]["content"]
    assert "names a Python file" in retry and "no-observed" in retry  # told what the checker refused
    facts = server.requests[0]["messages"][-1]["content"]
    assert "total({'a': 1, 'b': 2, 'c': 3})" in facts and "-6" in facts  # what the user saw
    assert "result" in facts.split("must not use:")[1]  # the forbidden words are spelled out
    always_leaks = scripted_model(lambda messages: "Look at total() in stock.py")
    report = write_report_llm(ChatClient(always_leaks.base_url, "m"), targets, run.messages, patch, repo=mini_repo)
    assert "total({'a': 1, 'b': 2, 'c': 3})" in report  # the procedural report instead
    assert check_report(report, target_tests=targets, patch=patch, repo=mini_repo) == []


def test_llm_client_errors_are_clear(scripted_model):
    with pytest.raises(ValueError, match="base_url"):
        ChatClient("localhost:1", "m")
    server = scripted_model(lambda m: "x")
    with pytest.raises(LLMError, match="HTTP 404"):
        ChatClient(server.base_url.replace("/v1", "/nope"), "m").complete([{"role": "user", "content": "hi"}])
    with pytest.raises(LLMError, match="cannot reach"):
        ChatClient("http://127.0.0.1:9", "m", timeout=2).complete([{"role": "user", "content": "hi"}])
