"""Examples from the calls a failing test makes (termgym.factory.swesynth.traced), for a suite that
reads its cases from a data file.

A small project whose tests are made in a loop from ``cases.json`` (as mistune's fixtures are):
the failing test's source shows ``casebook.title_case(text)`` and nothing says what ``text`` was,
so the static reading gives no example. In a real bubblewrap sandbox the screening plugin records
the test's calls into the project with the caller's literal locals; the writer fills the call in
and states it as it runs on the clean and the buggy tree. Sabotage: without the recorded calls
there is no report."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from termgym.factory.swesynth.audit import example_runner, run_examples
from termgym.factory.swesynth.examples import examples, undefined_names
from termgym.factory.swesynth.report import ReportError, usable_failures, write_report
from termgym.factory.swesynth.traced import assignments, calls_on_line, filled_call, traced_failures
from termgym.sandbox.base import SandboxError

SOURCE = '''\
def title_case(text):
    """Each word of ``text`` with its first letter upper-case."""
    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))


def shout(text):
    return text.upper() + "!"
'''

BUGGY = SOURCE.replace("word[:1].upper() + word[1:]", "word[:1].upper() + word[2:]")

TESTS = '''\
import json
import pathlib
import unittest

import casebook

CASES = json.loads((pathlib.Path(__file__).parent / "cases.json").read_text())


class TestCases(unittest.TestCase):
    def check(self, text, want):
        marker = object()
        self.assertIsNot(casebook.shout("x"), marker)
        result = casebook.title_case(text)
        self.assertEqual(result, want)


def _attach(case):
    def method(self):
        self.check(case["text"], case["want"])
    setattr(TestCases, "test_" + case["name"], method)


for _case in CASES:
    _attach(_case)
'''

CASES = [{"name": "short", "text": "a b", "want": "A B"},
         {"name": "words", "text": "hello big world", "want": "Hello Big World"}]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("casebook")
    (root / "casebook").mkdir()
    (root / "casebook" / "__init__.py").write_text(SOURCE)
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_cases.py").write_text(TESTS)
    (root / "tests" / "cases.json").write_text(json.dumps(CASES))
    return root


@pytest.fixture(scope="module")
def worker(project):
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker

    box = ScreenWorker(project, "python3 -m pytest -q -p no:cacheprovider tests", ["casebook"], ProjectEnv())
    yield box
    box.close()


PATCH = ("--- a/casebook/__init__.py\n+++ b/casebook/__init__.py\n@@ -1,3 +1,3 @@\n def title_case(text):\n"
         '     """Each word of ``text`` with its first letter upper-case."""\n'
         '-    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))\n'
         '+    return " ".join(word[:1].upper() + word[2:] for word in text.split(" "))\n')
TEST = "tests/test_cases.py::TestCases::test_words"


def test_the_call_on_the_recorded_line_is_written_with_the_callers_literals():
    tree = ast.parse("def check(self, text, want):\n    self.assertEqual(norm(casebook.title_case(text)), want)\n")
    calls = calls_on_line(tree, 2, "title_case")
    assert ast.unparse(calls[0]) == "casebook.title_case(text)"
    local = {"self": None, "text": "'a b'", "want": "'A B'"}
    assert filled_call(calls[0], local, {"casebook"}) == "casebook.title_case('a b')"
    # the assertion hangs off self, norm is no import, a local without a literal is no value
    assert [filled_call(c, local, {"casebook"}) for c in calls[1:]] == [None, None]
    assert filled_call(calls[0], {"text": None}, {"casebook"}) is None
    lam = ast.parse("f = casebook.apply(lambda text: text, 1)\n")
    assert filled_call(calls_on_line(lam, 1)[0], {"text": "'x'"}, {"casebook"}) is None


def test_a_local_made_by_one_earlier_assignment_is_written_as_what_made_it():
    source = ("def test_case(given, expression):\n"
              "    parsed = jq.compile(expression)\n"
              "    for item in given:\n"
              "        pass\n"
              "    actual = parsed.search(given)\n"
              "    assert actual == item\n")
    tree = ast.parse(source)
    made = assignments(tree, 5)
    assert set(made) == {"parsed"}  # actual is made on the line itself, item by a loop
    local = {"given": "[1]", "expression": "'a.b'", "parsed": None, "item": "1"}
    call = calls_on_line(tree, 5, "search")[0]
    assert filled_call(call, local, {"jq"}, made) == "jq.compile('a.b').search([1])"
    # the sabotage: without what made it, a local that holds no literal leaves no call a reader can type
    assert filled_call(call, local, {"jq"}) is None
    twice = ast.parse(source.replace("    for item in given:\n", "    parsed = jq.compile('x')\n    for item in given:\n"))
    assert "parsed" not in assignments(twice, 6)
    # an object used in between (its state may change there) is not rebuilt from its assignment
    used = ast.parse(source.replace("        pass\n", "        parsed.add(item)\n"))
    assert "parsed" not in assignments(used, 5)


def test_a_data_driven_test_gets_a_concrete_example_from_its_recorded_calls(project, worker):
    files = {"casebook/__init__.py": BUGGY}
    run = worker.run(files, [TEST], timeout=120)
    assert run.failed_among([TEST]) == [TEST]
    # the static reading finds no call: the test method is made in a loop
    assert usable_failures([TEST], run.messages, project, source_dirs=["casebook"], runs=True) == []
    recorded = worker.run(files, [TEST], calls=True, timeout=120).calls[TEST]
    lines = {(site["file"], site["callee"]) for site in recorded}
    assert lines == {("tests/test_cases.py", "shout"), ("tests/test_cases.py", "title_case")}
    found = traced_failures(TEST, recorded, project)
    assert [f.call for f in found] == ["casebook.title_case('hello big world')", "casebook.shout('x')"]

    examples_run = example_runner(worker, files, ["/app"])
    report = write_report([TEST], run.messages, PATCH, repo=project, seed=3, source_dirs=["casebook"],
                           run=examples_run)
    shown = examples(report)
    assert shown and "title_case('hello big world')" in shown[0].code and "import casebook" in shown[0].code, report
    assert not undefined_names(shown[0])
    assert "'Hello Big World'" in report and "'Hllo Bg Wrld'" in report, report
    assert run_examples(report, examples_run) == ""

    # the sabotage: a runner that records no calls leaves the writer with nothing to show
    class Blind:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, code):
            return self.inner(code)

        def calls(self, tests):
            return {}

    with pytest.raises(ReportError, match="no failing test shows a concrete call"):
        write_report([TEST], run.messages, PATCH, repo=project, seed=3, source_dirs=["casebook"],
                     run=Blind(examples_run))

    # a recording run that fails in the sandbox leaves the reason the tests' source gave
    class Broken(Blind):
        def calls(self, tests):
            raise SandboxError("the sandbox died")

    with pytest.raises(ReportError, match="no failing test shows a concrete call"):
        write_report([TEST], run.messages, PATCH, repo=project, seed=3, source_dirs=["casebook"],
                     run=Broken(examples_run))


def test_a_call_that_shows_no_difference_is_not_an_example(project, worker):
    # shout('x') behaves alike on both trees: the runs drop it, the title_case call stays
    files = {"casebook/__init__.py": BUGGY}
    recorded = worker.run(files, [TEST], calls=True, timeout=120).calls[TEST]
    shout = [f for f in traced_failures(TEST, recorded, Path(project)) if "shout" in (f.call or "")]
    from termgym.factory.swesynth.report import ExampleRuns, _add_imports

    assert shout and _add_imports(shout[0], Path(project), ["casebook"])
    assert not ExampleRuns(example_runner(worker, files, ["/app"])).ready(shout[0])
