"""The task-quality checks (termgym.factory.swesynth.quality, .audit) on the toy suite's real trees,
with the repro runs and the per-bug runs in real bubblewrap sandboxes; every check is also shown
rejecting a bad report or a bad task (its sabotage)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from termgym.factory.swesynth.audit import apply_hunks, audit_task, split_patch, unit_files
from termgym.factory.swesynth.quality import (
    exports,
    import_lines,
    named_api,
    project_packages,
    read_test_module,
    repro_code,
    run_repro,
    shows_difference,
    static_checks,
)
from termgym.tasks.swesynth import SweSynthSuite

TASK = "ledgerly-03e7642999"  # Account.normal_side returns "Credit" for credit-normal accounts
GOOD = '''`Account.normal_side` returns the wrong side for liability accounts.

```python
from ledgerly.accounts import Account
Account('2000', 'x').normal_side
```

I get `'Credit'`. I expected `'credit'`.
'''


@pytest.fixture(scope="module")
def toy():
    return SweSynthSuite("toy", behaviour="any")


@pytest.fixture(scope="module")
def task(toy):
    return toy.load(TASK)


def checks(task, statement, **kwargs):
    record = task.record
    return static_checks(statement, record.target_tests, Path(record.repo_dir), task.source_dirs, **kwargs)


def test_a_report_with_a_runnable_repro_passes_every_static_check(task):
    assert checks(task, GOOD) == {"repro has its imports": "", "repro uses no test-only names": "",
                                  "repro calls the project": "", "named API is public": "",
                                  "expected matches the tests": ""}


def test_reading_the_report(task):
    assert repro_code(GOOD) == "from ledgerly.accounts import Account\nAccount('2000', 'x').normal_side\n"
    assert named_api(GOOD) == "Account.normal_side"
    assert named_api("I hit an unexpected `AttributeError` from `Replace()`.\n") == "Replace"
    session = "Look:\n\n```python\n>>> from ledgerly import Money\n>>> Money('1')\nMoney('2')\n```\n"
    assert repro_code(session) == "from ledgerly import Money\nMoney('1')\n"
    assert repro_code("When I call `parse_amount('1.5')`, I get `2`.\n") == "parse_amount('1.5')\n"


def test_sabotage_a_repro_without_its_imports_fails(task):
    bad = GOOD.replace("from ledgerly.accounts import Account\n", "")
    assert checks(task, bad)["repro has its imports"] == "not imported: Account"


def test_sabotage_a_repro_needing_a_test_only_name_fails(task, toy):
    # a name the test module defines (a test-suite helper): no user has it
    record = task.record
    module = read_test_module(record.target_tests[0], Path(record.repo_dir))
    module.own.add("make_account")
    assert import_lines("make_account('2000')", module, {"ledgerly"}) is None
    bad = GOOD.replace("Account('2000', 'x').normal_side", "test_normal_side('2000', 'credit')")
    assert checks(task, bad)["repro uses no test-only names"] == "test-only: test_normal_side"


def test_sabotage_a_repro_calling_only_the_standard_library_fails(task):
    bad = GOOD.replace("from ledgerly.accounts import Account\nAccount('2000', 'x').normal_side",
                       "import datetime\ndatetime.date(2000, 1, 1)")
    assert checks(task, bad)["repro calls the project"].startswith("the repro calls only the standard library")


@pytest.mark.parametrize("opening, why", [
    ("`date()` returns the wrong side.", "`date` is not the project's (unknown)"),
    ("`Account._side()` returns the wrong side.", "`Account._side` is private"),
])
def test_sabotage_naming_an_api_that_is_not_the_projects_public_one_fails(task, opening, why):
    bad = opening + GOOD.split("\n", 1)[1]
    assert checks(task, bad)["named API is public"] == why


def test_sabotage_a_report_expecting_a_result_where_the_tests_expect_an_exception_fails(toy):
    # parse_amount's garbage tests expect ValueError for every parameter (the bug swallows it)
    task = toy.load("ledgerly-36040a1eae")
    normal = "`parse_amount()` fails with `UnboundLocalError` for me.\n\n```python\nfrom ledgerly.money import " \
             "parse_amount\nparse_amount('abc')\n```\n\nI expected a normal result, not `UnboundLocalError`.\n"
    assert checks(task, normal)["expected matches the tests"].startswith("every broken test expects an exception")
    refusing = normal.replace("I expected a normal result, not `UnboundLocalError`.",
                              "It should raise a `ValueError` instead.")
    assert checks(task, refusing)["expected matches the tests"] == ""


def test_sabotage_an_expected_value_copied_from_the_test_fails(task):
    leftover = GOOD.replace("I expected `'credit'`.", "It should give `side`.")
    assert checks(task, leftover)["expected matches the tests"] == \
        "the expected value `side` is a name from the test, not a value"
    assert checks(task, GOOD.replace("`'credit'`", "`Money('1.00', 'EUR')`"))["expected matches the tests"] == ""


def test_the_repro_runs_in_the_sandbox_and_shows_the_difference(task):
    record = replace(task.record, problem_statement=GOOD)
    clean, buggy = run_repro(record, repro_code(GOOD))
    assert clean == {"raised": None, "value": "'credit'", "type": "str"}
    assert buggy == {"raised": None, "value": "'Credit'", "type": "str"}
    assert shows_difference(GOOD, clean, buggy) == ""


def test_sabotage_a_repro_that_misses_the_bug_or_cannot_run_is_rejected(task):
    missing = GOOD.replace("Account('2000', 'x')", "Account('1000', 'x')")  # a debit account: not broken
    record = replace(task.record, problem_statement=missing)
    clean, buggy = run_repro(record, repro_code(missing))
    assert shows_difference(missing, clean, buggy) == "the repro behaves the same on the clean and the buggy tree"
    no_import = GOOD.replace("from ledgerly.accounts import Account\n", "")
    clean, buggy = run_repro(replace(task.record, problem_statement=no_import), repro_code(no_import))
    assert shows_difference(no_import, clean, buggy) == "the repro raises NameError on the clean tree too"
    # the right difference, but the report quotes another value than the buggy tree gives
    quoting = GOOD.replace("I get `'Credit'`", "I get `'CREDIT'`")
    clean, buggy = run_repro(replace(task.record, problem_statement=quoting), repro_code(quoting))
    assert shows_difference(quoting, clean, buggy) == "the report does not show the buggy result \"'Credit'\""


TWO = ("ledgerly-03e7642999", "ledgerly-36040a1eae")  # accounts.py and money.py: two real bugs


def two_bug_task(toy, extra_patch: str = "", extra_mutation: dict | None = None):
    """One task carrying two real toy bugs (their patches, mutations and target tests combined),
    plus an optional third edit."""
    first, second = (toy.load(t).record for t in TWO)
    statement = GOOD + "\nAlso `parse_amount('abc')` raises `UnboundLocalError`; it should raise a `ValueError`.\n"
    record = replace(first, task_id="ledgerly-two", bug_patch=first.bug_patch + second.bug_patch + extra_patch,
                     mutations=[*first.mutations, *second.mutations, *([extra_mutation] if extra_mutation else [])],
                     target_tests=[*first.target_tests, *second.target_tests], problem_statement=statement)
    return type(toy.load(TWO[0]))(record)


def test_patch_splitting_gives_each_bug_alone(toy):
    task = two_bug_task(toy)
    record, repo = task.record, Path(task.record.repo_dir)
    files = unit_files(record, repo)
    assert [sorted(f) for f in files] == [["ledgerly/accounts.py"], ["ledgerly/money.py"]]
    for unit, single in zip(files, TWO, strict=True):
        path = next(iter(unit))
        assert unit[path] == apply_hunks((repo / path).read_text(), split_patch(toy.load(single).record.bug_patch))
        assert unit[path] != (repo / path).read_text()


def test_the_audit_runs_each_bug_alone_and_catches_a_bug_no_test_sees(toy):
    """The real two-bug task passes; the sabotage adds a third edit no target test sees (a changed
    docstring), which the audit must report as breaking no test and having no symptom."""
    from termgym.factory.swesynth.patches import make_patch
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker

    task = two_bug_task(toy)
    repo = Path(task.record.repo_dir)
    worker = ScreenWorker(repo, task.record.test_command, task.source_dirs, ProjectEnv())
    try:
        results = audit_task(task, worker)
        assert results["each bug breaks a test"] == "" and results["report names every symptom"] == ""
        path = "ledgerly/pricing.py"
        text = (repo / path).read_text()
        line = text.splitlines().index(next(x for x in text.splitlines()[1:] if x.strip().startswith('"""')))
        lines = text.splitlines(keepends=True)
        changed = "".join(lines[:line] + [lines[line].replace('"""', '"""Note: ', 1)] + lines[line + 1:])
        sabotaged = two_bug_task(toy, make_patch({path: text}, {path: changed}),
                                 {"bug_type": "wrong-constant", "path": path, "line": line + 1, "function": None,
                                  "description": "a docstring changed"})
        results = audit_task(sabotaged, worker)
        assert results["each bug breaks a test"] == "bug 3 of 3 breaks no target test alone"
        assert results["report names every symptom"] == "bug 3 of 3 has no symptom in the report"
    finally:
        worker.close()


def test_project_packages_of_a_toy_tree(task):
    assert project_packages(Path(task.record.repo_dir), task.source_dirs) == {"ledgerly"}


def test_imports_follow_the_test_module(tmp_path):
    """``import pkg`` in the test and ``pkg.f(...)`` written ``f(...)`` in the repro: ``from pkg import f``;
    a package and its function of one name (``parse.parse``): ``from parse import parse``; an alias
    stays an alias; a name the test module defines is test-only."""
    (tmp_path / "parse").mkdir()
    (tmp_path / "parse" / "__init__.py").write_text("def parse(fmt, text):\n    return text\n\n\ndef search(f, t):\n"
                                                    "    return t\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_p.py").write_text("import datetime as dt\n\nimport parse\n\nHELPER = 3\n\n\n"
                                                 "def test_it():\n    assert parse.parse('{}', 'x')\n")
    module = read_test_module("tests/test_p.py::test_it", tmp_path)
    packages = project_packages(tmp_path)
    assert packages == {"parse"}
    assert import_lines("parse('{}', 'x')", module, packages) == ["from parse import parse"]
    assert import_lines("search('{}', dt.date(2000, 1, 1))", module, packages) == \
        ["from parse import search", "import datetime as dt"]
    assert import_lines("search('{}', HELPER)", module, packages) is None


def test_a_module_imported_under_another_name_is_imported_so_again(tmp_path):
    """``from rfc3986 import parseresult as pr`` in the test and ``pr.ParseResult...`` in the
    repro: the repro imports ``parseresult as pr``; before session 43 it wrote ``from rfc3986 import
    pr``, which fails on both trees, so the example showed no difference and the candidate had no
    report (wsproto's ``frame_protocol as fp`` too). Sabotage: without the alias the line is the
    broken one again."""
    (tmp_path / "src" / "rfc").mkdir(parents=True)
    (tmp_path / "src" / "rfc" / "__init__.py").write_text("")
    (tmp_path / "src" / "rfc" / "parseresult.py").write_text("def parse(text):\n    return text\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_p.py").write_text("from rfc import parseresult as pr\n\n\n"
                                                 "def test_it():\n    assert pr.parse('x')\n")
    module = read_test_module("tests/test_p.py::test_it", tmp_path)
    packages = project_packages(tmp_path, ["src"])
    assert import_lines("pr.parse('x')", module, packages) == ["from rfc import parseresult as pr"]
    module.aliases.clear()
    assert import_lines("pr.parse('x')", module, packages) == ["from rfc import pr"]


def test_names_a_package_star_imports_from_its_modules_are_its_exports(tmp_path):
    """more-itertools' ``__init__`` is ``from .more import *``: ``mi.chunked`` is written
    ``from more_itertools import chunked``; a private name of the module is not exported."""
    (tmp_path / "mit").mkdir()
    (tmp_path / "mit" / "__init__.py").write_text("from .more import *  # noqa\n")
    (tmp_path / "mit" / "more.py").write_text("def chunked(xs, n):\n    return xs\n\n\ndef _hidden():\n    pass\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("import mit as mi\n\n\ndef test_it():\n    assert mi.chunked([], 1)\n")
    assert "chunked" in exports(tmp_path, "mit") and "_hidden" not in exports(tmp_path, "mit")
    module = read_test_module("tests/test_m.py::test_it", tmp_path)
    assert import_lines("chunked([1], 1)", module, project_packages(tmp_path)) == ["from mit import chunked"]


def test_the_audit_of_several_projects_at_once_equals_one_at_a_time(toy):
    """``workers=2`` audits the two toy projects in two sandboxes at once: the table and the failures
    are those of ``workers=1`` (the sabotage: a worker that loses one project's row fails here)."""
    from termgym.factory.swesynth.audit import audit

    one = audit(toy, sample=6, seed=3, workers=1)
    two = audit(toy, sample=6, seed=3, workers=2)
    assert len(one["projects"]) == 2, "the sample must span both toy projects"
    for result in (one, two):
        result.pop("seconds")
    assert two == one
    assert one["total"]["repro shows the difference"][1] == 6
    with pytest.raises(ValueError, match="workers must be at least 1, got 0"):
        audit(toy, sample=1, workers=0)


def test_the_audit_command_names_a_bad_worker_count(capsys):
    from termgym.cli import main

    assert main(["swesynth", "audit", "--suite", "toy", "--workers", "0"]) == 2
    assert "--workers must be at least 1, got 0" in capsys.readouterr().err


def test_a_unittest_test_that_also_checks_values_does_not_only_expect_an_exception(tmp_path):
    """simplejson's test_bytes_key checks values with assertEqual and errors with assertRaises: a
    report expecting a value is right for it (the audit flagged simplejson-ded2a18c9c before)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(
        "import unittest\nfrom m import f\n\nclass T(unittest.TestCase):\n"
        "    def test_both(self):\n        self.assertEqual(f(1), 2)\n        self.assertRaises(TypeError, f, None)\n\n"
        "    def test_raises(self):\n        self.assertRaises(TypeError, f, None)\n"
        "        with self.assertRaises(ValueError):\n            f(-1)\n")
    assert not read_test_module("tests/test_m.py::T::test_both", tmp_path).expects_raise
    assert read_test_module("tests/test_m.py::T::test_raises", tmp_path).expects_raise
