"""Grades that know when they could not run, and tasks validated in the sandbox they will run in.

A small real repository (a package with a bug, a pytest suite) is graded in real bubblewrap
sandboxes under test commands and dependencies that do or do not exist there:

* a runner that cannot start, or a suite that does not collect on the unmodified repository, is an
  infrastructure error with its reason (never a silent 0), and the evaluation harness counts it so;
* a patch that breaks the package's imports is the agent's legitimate 0;
* ``generate`` rejects tasks whose oracle does not score 1 in the sandbox (a test dependency the
  host has and the sandbox lacks) and records where the kept ones were validated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from termgym.evaluation import evaluate
from termgym.factory.swesynth.generate import generate
from termgym.factory.swesynth.patches import make_patch
from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth import SweSynthSuite
from termgym.tasks.swesynth.grading import default_source_dirs, read_events, refused_paths
from termgym.tasks.swesynth.records import TaskRecord
from termgym.tasks.swesynth.task import symlinks_in, unlisted_paths

CLEAN = "def add(a, b):\n    return a + b\n\n\ndef scale(x, k=2):\n    return x * k\n"
BUGGY = CLEAN.replace("a + b", "a - b")
TESTS = ("from calc import add, scale\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_scale():\n    assert scale(4) == 8\n")


def write_repo(root: Path, tests: str = TESTS) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "calc" / "__init__.py").write_text(CLEAN)
    (root / "tests" / "test_calc.py").write_text(tests)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    return root


def record_for(repo: Path, test_command: str = "python3 -m pytest -q tests") -> TaskRecord:
    files = {"calc/__init__.py": CLEAN}
    return TaskRecord(
        task_id="calc-infra", repo="calc", test_command=test_command,
        bug_patch=make_patch(files, {"calc/__init__.py": BUGGY}), bug_types=["wrong-operator"],
        problem_statement="add(2, 3) gives -1", target_tests=["tests/test_calc.py::test_add"],
        all_tests=["tests/test_calc.py::test_add", "tests/test_calc.py::test_scale"],
        fix_patch=make_patch({"calc/__init__.py": BUGGY}, files), repo_dir=repo, test_timeout=120)


def grade(record: TaskRecord, patch: str, cache: Path) -> dict:
    task = SweSynthSuite([record], cache_dir=cache).load(record.task_id)
    with FreshSandboxes("local") as new_sandbox:
        return task.grade_patch(patch, new_sandbox)


def test_the_honest_oracle_scores_and_the_record_defaults_its_source_dirs(tmp_path):
    record = record_for(write_repo(tmp_path / "repo"))
    assert default_source_dirs(record.repo_dir) == ["calc"]
    details = grade(record, record.fix_patch, tmp_path / "cache")
    assert details["all_passed"] and details["runtime"]["pytest"], details
    assert not grade(record, "", tmp_path / "cache")["all_passed"]


def test_a_runner_that_cannot_start_is_an_infra_error(tmp_path):
    record = record_for(write_repo(tmp_path / "repo"), test_command="python3 -m no_such_runner -q tests")
    details = grade(record, record.fix_patch, tmp_path / "cache")
    assert "could not start" in details["infra_error"] and "no_such_runner" in details["infra_error"], details
    assert not details["all_passed"]


def test_a_missing_interpreter_is_an_infra_error(tmp_path):
    record = record_for(write_repo(tmp_path / "repo"), test_command="python9.9 -m pytest -q tests")
    details = grade(record, record.fix_patch, tmp_path / "cache")
    assert "could not start" in details["infra_error"] and "python9.9" in details["infra_error"], details


def test_a_test_dependency_missing_in_the_sandbox_is_an_infra_error(tmp_path):
    repo = write_repo(tmp_path / "repo", tests="import termgym_dependency_nobody_has\n" + TESTS)
    record = record_for(repo)
    details = grade(record, record.fix_patch, tmp_path / "cache")
    assert "unmodified repository" in details["infra_error"], details
    assert "termgym_dependency_nobody_has" in details["infra_error"], details


def test_a_patch_that_breaks_imports_is_the_agents_zero(tmp_path):
    record = record_for(write_repo(tmp_path / "repo"))
    broken = make_patch({"calc/__init__.py": BUGGY}, {"calc/__init__.py": BUGGY + "def broken(:\n"})
    details = grade(record, broken, tmp_path / "cache")
    assert not details.get("infra_error") and not details["all_passed"], details
    assert details["all_result"] == "0/2"


def test_the_evaluation_harness_counts_a_grade_that_could_not_run_as_infra_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    repo = write_repo(tmp_path / "repo")
    record = record_for(repo, test_command="python3 -m no_such_runner -q tests")
    records = tmp_path / "records.json"
    records.write_text(json.dumps([record.to_json(repo_dir=str(repo))]))
    outcome = evaluate("termgym/SweSynth-v0", agent="nop", output_dir=tmp_path / "run",
                       env_kwargs={"path": str(records)}, concurrency=1, progress=False)
    assert outcome.summary["infra_errors"] == 1, outcome.summary
    episode = outcome.results[0]
    assert episode.status == "infra_error" and episode.error["where"] == "grade", episode.error
    assert "could not start" in episode.error["message"]


def test_generation_rejects_tasks_whose_tests_cannot_run_in_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    # gymnasium is installed for the host's interpreter (termgym needs it), not in the sandbox's.
    # Generation runs every test in the sandbox, so the project's baseline there says so at once,
    # instead of making tasks nobody can pass.
    repo = write_repo(tmp_path / "repo", tests="import gymnasium\n" + TESTS)
    with pytest.raises(RuntimeError, match="passed no test in the local sandbox") as info:
        generate(repo, "python -m pytest -q tests", n=1, seed=0, out=tmp_path / "out", name="calc",
                 sandbox_test_command="python3 -m pytest -q tests", max_attempts=3)
    assert "No module named 'gymnasium'" in str(info.value)
    assert not (tmp_path / "out" / "suite.json").exists()


def test_generation_records_where_a_task_was_validated(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    repo = write_repo(tmp_path / "repo")
    result = generate(repo, "python -m pytest -q tests", n=1, seed=0, out=tmp_path / "out", name="calc",
                      sandbox_test_command="python3 -m pytest -q tests", max_attempts=10)
    assert result.stats.kept == 1
    validation = json.loads((tmp_path / "out" / result.records[0].task_id / "task.json").read_text())["validation"]
    assert validation["backend"] == "local" and validation["oracle"] == "2/2", validation
    assert validation["runtime"]["python"] and validation["runtime_version"]
    from termgym.sandbox.runtime import current_version
    assert validation["runtime_version"] == current_version()  # validated on the pinned runtime


# -- the pieces, on their own -------------------------------------------------------------------------


def test_the_event_stream_refuses_forged_reordered_and_trailing_lines():
    import hashlib
    import hmac

    key = b"k" * 32

    def stream(events, forge_at=None):
        out, mac = [], b""
        for i, (kind, payload) in enumerate(events, 1):
            body = json.dumps([i, kind, payload]).encode()
            mac = hmac.new(key, mac + body, hashlib.sha256).hexdigest().encode()
            out.append(body + b"\t" + (b"0" * 64 if i == forge_at else mac))
        return b"\n".join(out) + b"\n"

    good = [("start", {}), ("phase", {"id": "t", "when": "call", "outcome": "failed"}), ("finish", {"exitstatus": 1})]
    assert read_events(stream(good), key)[1] == []
    assert read_events(stream(good, forge_at=2), key)[1]
    lines = stream(good).split(b"\n")
    assert read_events(b"\n".join([lines[0], lines[2]]), key)[1]  # a line cut out of the middle
    assert read_events(stream(good + [("phase", {"id": "t", "when": "call", "outcome": "passed"})]), key)[1]


@pytest.mark.parametrize("path", ["pytest.py", "ledgerly/pytest.py", "ledgerly/_pytest/__init__.py",
                                  "ledgerly/sitecustomize.py", "usercustomize.py", "ledgerly/py/__init__.py",
                                  "pluggy/__init__.py", "os.py", "json/__init__.py", "src/xml/__init__.py",
                                  "ledgerly/conftest.py"])
def test_tool_chain_and_stdlib_shadows_are_refused(path):
    assert refused_paths([path], ["ledgerly"] if not path.startswith("src/") else ["src/xml"]), path


def test_ordinary_package_modules_are_not_refused():
    assert refused_paths(["ledgerly/accounts.py", "ledgerly/sub/money.py"], ["ledgerly"]) == []
    assert refused_paths(["src/ledgerly/accounts.py"], ["src/ledgerly"]) == []


def test_patch_text_must_match_the_graded_files():
    patch = ("diff --git a/ledgerly/a.py b/ledgerly/a.py\n--- a/ledgerly/a.py\n+++ b/ledgerly/a.py\n@@ -1 +1 @@\n-x\n+y\n"
             "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n")
    assert unlisted_paths(patch, ["ledgerly/a.py"]) == ["tests/test_a.py: in the patch but not a graded file"]
    assert unlisted_paths(patch.split("diff --git a/tests")[0], ["ledgerly/a.py"]) == []
    assert symlinks_in("diff --git a/ledgerly/a.py b/ledgerly/a.py\nnew file mode 120000\n")


def test_doctests_in_source_files_never_become_required_tests(tmp_path, monkeypatch):
    """A doctest collected from a source file lives in what the agent edits: it must not decide a grade."""
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    repo = write_repo(tmp_path / "repo")
    (repo / "calc" / "__init__.py").write_text('def add(a, b):\n    """\n    >>> add(2, 3)\n    5\n    """\n'
                                               "    return a + b\n\n\ndef scale(x, k=2):\n    return x * k\n")
    result = generate(repo, "python -m pytest -q --doctest-modules", n=1, seed=0, out=tmp_path / "out", name="calc",
                      sandbox_test_command="python3 -m pytest -q --doctest-modules", max_attempts=10)
    assert result.stats.kept == 1
    assert result.records[0].all_tests == ["tests/test_calc.py::test_add", "tests/test_calc.py::test_scale"]


def test_doctor_names_the_interpreter_and_pytest_grades_will_use():
    from termgym.commands.doctor import check_runtime

    ok, detail = check_runtime()  # probed inside a real sandbox on the pinned runtime
    assert ok and "Python 3." in detail and "pytest " in detail, detail
