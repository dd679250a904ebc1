"""The quality checks inside generation, on the mini project with real sandboxes: kept tasks pass
them (their repro ran on the clean and the buggy tree), and a sabotaged report writer gets every
candidate rejected with the failed check named in the rejection counts."""

from __future__ import annotations

from pathlib import Path

from termgym.factory.swesynth import generate as generate_module
from termgym.factory.swesynth.audit import bug_units
from termgym.factory.swesynth.examples import examples, undefined_names
from termgym.factory.swesynth.generate import generate
from termgym.factory.swesynth.quality import CHECKS, static_checks

PYTEST = "python3 -m pytest -q tests"


def test_kept_tasks_pass_every_check_and_ran_their_repro(mini_repo, tmp_path):
    result = generate(mini_repo, PYTEST, n=2, seed=1, out=tmp_path / "out", workers=1)
    assert result.records, result.stats.rejected
    for record in result.records:
        found = static_checks(record.problem_statement, record.target_tests, mini_repo, ["minilib"])
        assert all(why == "" for why in found.values()), (record.problem_statement, found)
        assert "```python\nfrom minilib" in record.problem_statement or ">>> from minilib" in record.problem_statement
        repro = record.validation["repro"]
        assert repro["clean"] != repro["buggy"]


def test_two_bug_tasks_name_each_bugs_symptom(mini_repo, tmp_path):
    result = generate(mini_repo, PYTEST, n=2, seed=5, out=tmp_path / "out", max_bugs=2, workers=1,
                      sandbox_check=False, max_attempts=120)
    multi = [r for r in result.records if len(r.mutations) >= 2]
    for record in multi:  # each bug: an example of its own that defines or imports every name it uses
        found = examples(record.problem_statement)
        assert len(found) >= len(bug_units(record)), record.problem_statement
        assert all(not undefined_names(e) for e in found), record.problem_statement
    rejected = result.stats.rejected
    assert result.records or rejected, "generation judged nothing"
    # the per-bug run is counted whenever a combination had a bug no required test sees
    assert all(key.startswith(("quality check failed", "implausible bug")) or "quality" not in key for key in rejected)


def test_sabotage_a_writer_that_drops_the_imports_gets_every_candidate_rejected(mini_repo, tmp_path, monkeypatch):
    real = generate_module.write_report

    def without_imports(*args, **kwargs):
        text = real(*args, **kwargs)
        return "\n".join(line for line in text.splitlines() if not line.lstrip(">. ").startswith(("from ", "import ")))

    monkeypatch.setattr(generate_module, "write_report", without_imports)
    result = generate(mini_repo, PYTEST, n=1, seed=1, out=tmp_path / "out", workers=1, sandbox_check=False,
                      max_attempts=30)
    assert result.records == []
    assert result.stats.rejected.get("quality check failed, repro has its imports", 0) >= 1, result.stats.rejected
    assert "repro has its imports" in CHECKS


def test_the_check_names_are_the_rejection_keys():
    from termgym.factory.swesynth.generate import Stats

    stats = Stats(wanted=1)
    for check in CHECKS:
        stats.reject(f"quality check failed, {check}")
    assert set(stats.rejected) == {f"quality check failed, {c}" for c in CHECKS}
    assert Path(generate_module.__file__).name == "generate.py"


def test_a_repro_that_shows_nothing_is_rejected_before_the_validation_runs(mini_repo, tmp_path, monkeypatch):
    """The repro (two short runs) goes before the validation (graded runs, behaviour recording): a
    candidate it rejects never costs a validation, and the kept ones still carry its outcome."""
    validated: list[str] = []
    real_validate = generate_module.validate_in_sandbox

    def counting(record, *args, **kwargs):
        validated.append(record.task_id)
        return real_validate(record, *args, **kwargs)

    monkeypatch.setattr(generate_module, "validate_in_sandbox", counting)
    monkeypatch.setattr(generate_module, "repro_check", lambda record, **kw: "the repro printed nothing")
    result = generate(mini_repo, PYTEST, n=1, seed=1, out=tmp_path / "out", workers=1, max_attempts=12)
    assert result.records == [] and validated == []
    assert result.stats.rejected.get("quality check failed, repro shows the difference", 0) >= 1, \
        result.stats.rejected


def test_a_bug_masked_by_another_is_not_taken_for_its_own_symptom(tmp_path):
    """A multi-bug candidate keeps, for each bug, only the tests that fail at the same call with
    every bug present as with that bug alone: where another bug makes the test fail earlier (at
    another call), the report could not show this bug's symptom as a user of the buggy tree sees it."""
    from termgym.factory.swesynth.generate import _same_call

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "from minilib import f, g\n\n\ndef test_two():\n    assert f(1) == 2\n    assert g(2) == 3\n")
    at = {n: f"def test_two():\n>       assert ...\nE       AssertionError\n\ntests/test_x.py:{n}: AssertionError"
          for n in (5, 6)}
    test = "tests/test_x.py::test_two"
    assert _same_call(test, {test: at[6]}, {test: at[6]}, tmp_path)      # g's bug shows at g(2) either way
    assert not _same_call(test, {test: at[5]}, {test: at[6]}, tmp_path)  # f's bug masks it: f(1) fails first
    assert not _same_call(test, {}, {}, tmp_path)                        # no failure text: no call to show
