"""Fast grades (issue 25, item 4): which required tests a grade runs, and that the choice is sound.

Unit checks of the patch-to-function mapping, then real grades of a bundled ``parse`` task in
bubblewrap sandboxes with the project's stored coverage map (``termgym_data/swesynth/suite/selection``):
a patch that fixes the bug but breaks a function other tests cover must still score 0, which a
selection of only the tests the bug broke would miss (kept below as the sabotage it guards against).
"""

from __future__ import annotations

import textwrap

import pytest

from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth.selection import (
    CoverageMap,
    SelectionError,
    apply_hunks,
    decode_ranges,
    encode_ranges,
    function_spans,
    parse_patch,
)
from termgym.tasks.swesynth.suite import SUITE_V1_DIR, SweSynthSuite
from termgym.tasks.swesynth.task import SweSynthTask, prepare_workspace

MODULE = textwrap.dedent('''\
    """A module."""
    LIMIT = 3


    def double(x):
        """Twice x."""
        return 2 * x


    class Box:
        size = LIMIT

        def grow(self, n):
            def step(v):
                return v + 1
            return step(n)
''')


def _diff(path: str, old: str, new: str) -> str:
    import difflib

    body = "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}", n=1))
    return f"diff --git a/{path} b/{path}\n{body}"


def _map() -> CoverageMap:
    return CoverageMap(project="m", tree_hash="x", tests=["t0", "t1", "t2", "t3"], always=[3], functions={
        "m.py": {"double": (False, [0]), "Box.grow": (False, [1]), "Box.grow.<locals>.step": (False, [2])}})


def test_ranges_round_trip_and_bad_ranges_are_named():
    assert encode_ranges([7, 0, 1, 2, 3, 9, 10]) == "0-3,7,9-10"
    assert decode_ranges("0-3,7,9-10") == [0, 1, 2, 3, 7, 9, 10]
    with pytest.raises(SelectionError, match="'4-2' is out of range"):
        decode_ranges("4-2", 10, "sel.json")
    with pytest.raises(SelectionError, match="sel.json: 'x' is not an index"):
        decode_ranges("1,x", 10, "sel.json")
    with pytest.raises(SelectionError, match="'12' is out of range"):
        decode_ranges("12", 10)


def test_function_spans_cover_bodies_not_def_lines():
    spans = {name: (first, last) for name, first, last in function_spans(MODULE)}
    assert spans["double"] == (6, 7)  # the docstring onwards; the def line runs at import
    assert spans["Box.grow"] == (14, 16)
    assert spans["Box.grow.<locals>.step"] == (15, 15)


def test_patch_lines_land_in_their_innermost_function():
    cmap = _map()
    body_edit = MODULE.replace("return v + 1", "return v + 2")
    assert cmap.tests_for_patch(_diff("m.py", MODULE, body_edit), {"m.py": MODULE}.get) == ({2}, "ok")
    # a line inserted as the first statement of a body belongs to that function (placed on the new text)
    inserted = MODULE.replace('    """Twice x."""\n', '    """Twice x."""\n    x = abs(x)\n')
    assert inserted != MODULE
    assert cmap.tests_for_patch(_diff("m.py", MODULE, inserted), {"m.py": MODULE}.get) == ({0}, "ok")
    new, removed, added = apply_hunks(MODULE, parse_patch(_diff("m.py", MODULE, inserted))[0]["m.py"])
    assert new == inserted and not removed and added == {7}


@pytest.mark.parametrize("edit, why", [
    (lambda t: t.replace("LIMIT = 3", "LIMIT = 4"), "outside every known function body"),
    (lambda t: t.replace("    size = LIMIT", "    size = 9"), "outside every known function body"),
    (lambda t: t.replace("def double(x):", "def double(x, y=1):"), "outside every known function body"),
    (lambda t: t + "\n\ndef extra():\n    return 1\n", "outside every known function body"),
])
def test_changes_the_map_cannot_vouch_for_fall_back_to_the_full_set(edit, why):
    picked, reason = _map().tests_for_patch(_diff("m.py", MODULE, edit(MODULE)), {"m.py": MODULE}.get)
    assert picked is None and why in reason


def test_new_files_and_unknown_files_fall_back_to_the_full_set():
    new_file = "diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/new.py\n" \
               "@@ -0,0 +1 @@\n+x = 1\n"
    assert _map().tests_for_patch(new_file, {"m.py": MODULE}.get)[0] is None
    other = _diff("other.py", "def f():\n    return 1\n", "def f():\n    return 2\n")
    picked, reason = _map().tests_for_patch(other, {"other.py": "def f():\n    return 1\n"}.get)
    assert picked is None and "not a file of the coverage map" in reason


def test_a_bad_grade_tests_value_is_refused_with_its_name():
    with pytest.raises(ValueError, match="grade_tests must be one of selected, full, not 'some'"):
        SweSynthSuite(SUITE_V1_DIR, grade_tests="some", repos=["parse"])


# -- real grades ------------------------------------------------------------------------------------

TASK = "parse-b664295638"


@pytest.fixture(scope="module")
def parse_suite(tmp_path_factory):
    suite = SweSynthSuite(SUITE_V1_DIR, repos=["parse"], cache_dir=tmp_path_factory.mktemp("selcache"))
    if suite.selection_file("parse") is None:
        pytest.fail("the bundled suite has no coverage map for parse (python -m termgym.factory.swesynth.selection_build)")
    return suite


def _breaking_patch(task: SweSynthTask) -> tuple[str, str]:
    """The task's fix plus ``raise RuntimeError`` at the top of a function that no test of the task's
    stored selection executes, but other required tests do; returns ``(patch, function)``."""
    from termgym.tasks.swesynth.selection import load_map

    cmap = load_map(task.selection_file)
    stored = set(decode_ranges(cmap.tasks[task.record.task_id], len(cmap.tests)))
    buggy = prepare_workspace(task.record, task.cache_dir)
    for path, functions in sorted(cmap.functions.items()):
        spans = {name: first for name, first, _ in function_spans((buggy / path).read_text())}
        for name, (at_import, tests) in sorted(functions.items()):
            if at_import or not tests or stored & set(tests) or name not in spans or "<locals>" in name:
                continue
            lines = (buggy / path).read_text().splitlines(keepends=True)
            first = lines[spans[name] - 1]
            indent = first[:len(first) - len(first.lstrip())]
            broken = "".join(lines[:spans[name] - 1]) + f"{indent}raise RuntimeError('broken')\n" + \
                "".join(lines[spans[name] - 1:])
            return task.record.fix_patch + _diff(path, "".join(lines), broken), name
    pytest.fail("no function of parse is covered only by tests outside the task's selection")


def _grade(task: SweSynthTask, patch: str) -> dict:
    with FreshSandboxes("local") as new_sandbox:
        return task.grade_patch(patch, new_sandbox)


def test_selected_grades_match_full_grades_for_the_oracle_and_doing_nothing(parse_suite):
    task = parse_suite.load(TASK)
    oracle, nop = _grade(task, task.record.fix_patch), _grade(task, "")
    assert oracle["all_passed"] and oracle["graded_tests"]["mode"] == "selected", oracle
    assert oracle["graded_tests"]["ran"] < len(task.record.all_tests), oracle
    assert not nop["all_passed"] and nop["target_result"].startswith("0/"), nop


def test_a_fix_that_breaks_another_covered_function_scores_zero(parse_suite):
    """The agent's patch is mapped to the functions it changes: their tests run too."""
    task = parse_suite.load(TASK)
    patch, function = _breaking_patch(task)
    details = _grade(task, patch)
    assert not details["all_passed"], (function, details)
    assert details["graded_tests"]["mode"] == "selected", details


def test_sabotage_selecting_only_the_broken_tests_would_pass_that_patch(parse_suite, monkeypatch):
    """Why the test above can fail: graded with only the tests the bug broke (no coverage tests), the
    same fix-and-break patch scores 1."""
    task = parse_suite.load(TASK)
    patch, function = _breaking_patch(task)
    monkeypatch.setattr(SweSynthTask, "tests_to_run",
                        lambda self, patch: (list(self.record.target_tests), "sabotage: target tests only"))
    details = _grade(task, patch)
    assert details["all_passed"], (function, details)


def test_tests_that_start_a_process_are_always_selected(tmp_path):
    """Coverage cannot follow code into a child process: the screening plugin names the tests that
    start one, and the map runs them whatever a patch changes."""
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker
    from termgym.tasks.swesynth.selection import build_map

    tree = tmp_path / "repo"
    (tree / "calc").mkdir(parents=True)
    (tree / "tests").mkdir()
    source = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    (tree / "calc" / "__init__.py").write_text(source)
    (tree / "tests" / "test_calc.py").write_text(textwrap.dedent("""\
        import subprocess
        import sys

        from calc import add


        def test_add():
            assert add(1, 2) == 3


        def test_sub_in_a_child():
            out = subprocess.run([sys.executable, "-c", "import calc; print(calc.sub(3, 1))"],
                                 capture_output=True, text=True, check=True)
            assert out.stdout.strip() == "2"
    """))
    worker = ScreenWorker(tree, "python3 -m pytest -q tests", ["calc"], ProjectEnv())
    try:
        run = worker.run({}, None, trace=True, timeout=300)
    finally:
        worker.close()
    assert run.passed == {"tests/test_calc.py::test_add", "tests/test_calc.py::test_sub_in_a_child"}, run.log_tail
    assert run.spawners == ["tests/test_calc.py::test_sub_in_a_child"]
    tests = sorted(run.passed)
    cmap = build_map("calc", "h", tests, {"calc/__init__.py": source}, run.lines, run.import_lines, run.spawners,
                     run.passed)
    assert cmap.always == [tests.index("tests/test_calc.py::test_sub_in_a_child")]
    # ``sub`` runs only in the child: no traced test executes it, so only the always-run test guards it
    assert cmap.functions["calc/__init__.py"]["sub"] == (False, [])
