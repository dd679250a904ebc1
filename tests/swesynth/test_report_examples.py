"""Every bug stated, every statement run (termgym.factory.swesynth.examples, the report writer's
runs, the audit's every-example column, the report rewrite).

Static measures on crafted reports (names an example leaves undefined, private names, expectations
stated only as "a normal result", openings); then, in real bubblewrap sandboxes, every example of a
report on the toy ledgerly tasks runs on the clean and the buggy tree, and a second example that
does not show its difference fails the audit (the sabotage); the writer, given two bugs and a
runner, gives the second bug a runnable example of its own; a real multi-bug record of the bundled
suite is worded again from its own report with every example self-contained and shown by its runs."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from termgym.factory.swesynth.audit import (
    CONCRETE,
    EVERY_EXAMPLE,
    NO_PRIVATE,
    SELF_CONTAINED,
    audit_task,
    bug_units,
    buggy_files,
    example_checks,
    example_runner,
    run_examples,
    unit_files,
)
from termgym.factory.swesynth.examples import (
    Example,
    claim,
    examples,
    opening,
    private_names,
    report_measures,
    shows_claim,
    undefined_names,
)
from termgym.factory.swesynth.failures import Failure, _inline
from termgym.factory.swesynth.report import _opening, complete_from_runs, render, write_report
from termgym.tasks.swesynth import SweSynthSuite

TASK = "ledgerly-03e7642999"  # Account.normal_side returns "Credit" for credit-normal accounts
TWO = ("ledgerly-03e7642999", "ledgerly-36040a1eae")  # accounts.py and money.py: two real bugs
GOOD = '''`Account.normal_side` returns the wrong side for liability accounts.

```python
from ledgerly.accounts import Account
Account('2000', 'x').normal_side
```

I get `'Credit'`. I expected `'credit'`.

Another example:

```python
from ledgerly.accounts import Account
Account('3000', 'y').normal_side
```

It gives `'Credit'`, where I expected `'credit'`.
'''


# -- static: the measures on crafted reports ------------------------------------------------------------


def test_every_code_block_and_inline_call_is_an_example_with_its_own_text():
    found = examples(GOOD)
    assert [e.code for e in found] == ["from ledgerly.accounts import Account\nAccount('2000', 'x').normal_side\n",
                                       "from ledgerly.accounts import Account\nAccount('3000', 'y').normal_side\n"]
    assert found[1].text.startswith("Another example:")  # a lead-in ending in a colon is the block's
    assert "I get `'Credit'`" in found[0].text and "Another example" not in found[0].text
    inline = examples("`f()` is off. When I call `f(2)`, I get `3`. I expected `4`.\n\n"
                      "There is a second problem, too. `g()`: with `g(x)`, it raises `KeyError`.\n")
    assert [(e.code, e.inline) for e in inline] == [("f(2)\n", True), ("g(x)\n", True)]
    session = examples("Look:\n\n```python\n>>> from m import f\n>>> f(1)\n2\n```\n\nThe expected result is `3`.\n")
    assert session[0].code == "from m import f\nf(1)\n" and session[0].output == ["2"]
    assert (claim(session[0]).observed_value, claim(session[0]).expected_value) == ("2", "3")


def test_the_undefined_name_counter_counts_each_example_on_its_own():
    # a second block relying on the first block's import leaves its name undefined
    leaning = GOOD.replace("Another example:\n\n```python\nfrom ledgerly.accounts import Account\n",
                           "Another example:\n\n```python\n")
    inline = ("`parse()` is off.\n\n```python\nfrom m import parse\nparse('1')\n```\n\nI get `2`. I expected `1`.\n\n"
              "There is a second problem, too. `Box.pop()`: with `(b.pop(1), b.pop(1))`, it raises `KeyError`, "
              "where I expected `(1, 2)`.\n")
    crafted = {"good": GOOD, "leaning": leaning, "inline": inline,
               "syntax": "`f()` fails.\n\n```python\nf(\n```\n\nI get `1`. I expected `2`.\n"}
    assert [sorted(undefined_names(e)) for e in examples(leaning)] == [[], ["Account"]]
    assert [sorted(undefined_names(e)) for e in examples(inline)] == [[], ["b"]]
    measures = report_measures(crafted)
    assert measures["undefined"] == 3
    assert measures["undefined_names"] == {"leaning": ["Account"], "inline": ["b"], "syntax": ["<syntax>"]}
    # the older count (names no example of the report defines) forgives the leaning block
    assert measures["undefined_in_report"] == 2 and "leaning" not in measures["undefined_in_report_names"]
    assert example_checks(leaning)[SELF_CONTAINED] == "undefined in an example: Account"
    assert example_checks(GOOD)[SELF_CONTAINED] == ""


def test_private_names_vague_expectations_and_openings_are_counted():
    private = Example("from typeguard._transformer import TypeguardTransformer\nx = Box()\nx._items\n", "")
    assert private_names(private) == {"_transformer", "_items"}
    assert private_names(private, packages=["typeguard"]) == {"_transformer", "_items"}
    assert private_names(Example("from _ast import AST\nAST()\n", ""), packages=["typeguard"]) == set()
    vague = "`f()` fails with `KeyError` for me.\n\n```python\nfrom m import f\nf(1)\n```\n\n" \
            "I expected a normal result, not `KeyError`.\n"
    assert claim(examples(vague)[0]).vague
    assert not claim(examples(vague.replace("a normal result, not `KeyError`", "`2`"))[0]).vague
    assert not claim(examples(vague.replace("a normal result", "a `dict` back"))[0]).vague
    assert example_checks(vague)[CONCRETE] == "1 of 1 examples expect only a normal result"
    said = "I know `_transformer` is an internal module, but it is the smallest piece of code where I can show it."
    with_reason = vague.replace("from m import f", "from m._impl import f") + "\n" + said + "\n"
    assert example_checks(with_reason)[NO_PRIVATE] == ""
    assert example_checks(vague.replace("from m import f", "from m._impl import f"))[NO_PRIVATE] == "private: _impl"
    assert opening(vague) == "`\u2026` fails with `\u2026` for me."
    measures = report_measures({"a": vague, "b": GOOD, "c": with_reason})
    assert (measures["vague"], measures["private"], measures["private_explained"], measures["openings"]) == \
        (2, 1, ["c"], 2)


def test_the_claim_is_compared_with_both_runs():
    example = examples(GOOD)[0]
    clean, buggy = {"raised": None, "value": "'credit'"}, {"raised": None, "value": "'Credit'"}
    assert shows_claim(example, clean, buggy) == ""
    assert shows_claim(example, clean, clean) == "the example behaves the same on the clean and the buggy tree"
    assert shows_claim(example, {"raised": None, "value": "'debit'"}, buggy) == \
        "the text expects \"'credit'\"; the clean tree gives \"'debit'\""
    assert shows_claim(example, clean, {"raised": "KeyError", "message": "'x'"}) == \
        "the buggy tree raises KeyError; the text does not say so"
    refusal = examples("`f()` accepts input it should refuse.\n\n```python\nfrom m import f\nf('x')\n```\n\n"
                       "It returns normally without raising an error. It should raise a `ValueError` instead.\n")[0]
    assert shows_claim(refusal, {"raised": "ValueError", "message": "no"}, {"raised": None, "value": "1"}) == ""
    assert shows_claim(refusal, {"raised": None, "value": "2"}, {"raised": None, "value": "1"}).startswith(
        "the text expects ValueError")


def test_openings_vary_per_task_and_are_drawn_deterministically():
    f = Failure(test="t", call="f(1)", behaviour="f()", relation="==", observed="2", expected="1")
    texts = [render(f, structure="paragraph", opening=k, closing=k, style=k) for k in range(400)]
    assert len({opening(t) for t in texts}) > 100
    assert len({t.strip().rsplit("\n\n", 1)[-1] for t in texts}) > 13
    assert render(f, structure="list", opening=7, closing=3, style=5) == \
        render(f, structure="list", opening=7, closing=3, style=5)
    error = replace(f, error=("KeyError", "'a'"), relation="returns", expected=None)
    assert "`KeyError`" in _opening("error", error, 3) and "`f()`" in _opening("error", error, 3)


def test_a_variable_read_twice_is_not_written_out_twice():
    setup = [ast.parse("s = IndexedSet(range(9))").body[0]]
    expr = ast.parse("(s.pop(4), s.pop(4))", mode="eval").body
    kept, left = _inline(expr, setup, [])
    assert ast.unparse(kept) == "(s.pop(4), s.pop(4))" and len(left) == 1  # one set, popped twice
    once = ast.parse("s.pop(4)", mode="eval").body
    assert ast.unparse(_inline(once, setup, [])[0]) == "IndexedSet(range(9)).pop(4)"


def test_runs_state_the_outcome_and_a_run_without_difference_is_refused():
    f = Failure(test="t", call="f(1)", behaviour="f()", relation="returns", error=("KeyError", ""))
    assert complete_from_runs(f, {"raised": None, "value": "[1, 2]", "type": "list"},
                              {"raised": "KeyError", "message": "'a'"})
    assert (f.error, f.expected, f.relation) == (("KeyError", "'a'"), "[1, 2]", "==")
    g = Failure(test="t", call="g(1)", behaviour="g()", relation="==", observed="1", expected="2")
    assert not complete_from_runs(g, {"raised": None, "value": "1"}, {"raised": None, "value": "1"})
    assert (g.observed, g.expected) == ("1", "2")
    long = Failure(test="t", call="h()", behaviour="h()", relation="returns", error=("TypeError", ""))
    assert complete_from_runs(long, {"raised": None, "value": "{" + "'k': 1, " * 40 + "}", "type": "dict"},
                              {"raised": "TypeError", "message": "bad"})
    assert long.expected is None and long.expected_type == "dict"
    lines = Failure(test="t", call="p('x')", behaviour="p()", relation="returns", error=("ParseError", ""))
    assert complete_from_runs(lines, {"raised": None, "value": "1", "type": "int"},
                              {"raised": "ParseError", "message": "Parsing failed with 2 errors.\nFirst at line 1."})
    assert lines.error == ("ParseError", "Parsing failed with 2 errors.")  # a traceback's last line shows the first
    address = Failure(test="t", call="d()", behaviour="d()", relation="returns", error=("KeyError", ""))
    assert complete_from_runs(address, {"raised": None, "value": "1", "type": "int"},
                              {"raised": "KeyError", "message": "<function Cache.pop at 0x7f4b0a646480>"})
    assert address.error == ("KeyError", "")  # an address differs from run to run: not quoted


def test_a_message_the_example_prints_is_quoted_even_when_it_names_the_patch():
    """The buggy tree's exception message names what the bug patch touches (``lowr``): a reader
    sees it by running the example, so a report whose example ran quotes it; a report written
    without runs may not (the no-leak rule), and then names the exception alone."""
    from termgym.factory.swesynth.report import ExampleRuns, compose_report

    patch = ("--- a/src/impl.py\n+++ b/src/impl.py\n@@ -1,1 +1,1 @@\n"
             "-        return self.kind.lower()\n+        return self.kind.lowr()\n")
    message = "'str' object has no attribute 'lowr'"

    def failure():
        return Failure(test="tests/test_accounts.py::test_side", call="Account('2000', 'x').normal_side",
                       behaviour="Account.normal_side", relation="==", expected="'credit'",
                       error=("AttributeError", message), imports=["from ledgerly.accounts import Account"])

    def run(code):
        return {"raised": None, "value": "'credit'", "type": "str"}, {"raised": "AttributeError", "message": message}

    ran = compose_report([failure()], patch=patch, target_tests=["tests/test_accounts.py::test_side"],
                         seed="t", runs=ExampleRuns(run))
    assert f"\u201c{message}\u201d" in ran and "AttributeError" in ran
    unrun = compose_report([failure()], patch=patch, target_tests=["tests/test_accounts.py::test_side"], seed="t")
    assert "AttributeError" in unrun and "lowr" not in unrun  # the sabotage: no run, no quote


# -- in the sandbox ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy():
    return SweSynthSuite("toy", behaviour="any")


@pytest.fixture(scope="module")
def worker(toy):
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker

    task = toy.load(TASK)
    box = ScreenWorker(Path(task.record.repo_dir), task.record.test_command, task.source_dirs, ProjectEnv())
    yield box
    box.close()


def test_every_example_runs_and_a_second_one_that_shows_nothing_fails_the_audit(toy, worker):
    task = toy.load(TASK)
    good = type(task)(replace(task.record, problem_statement=GOOD))
    assert audit_task(good, worker)[EVERY_EXAMPLE] == ""
    # the sabotage: the second example is a debit account, which the bug does not touch
    quiet = GOOD.replace("Account('3000', 'y')", "Account('1000', 'y')")
    sabotaged = type(task)(replace(task.record, problem_statement=quiet))
    results = audit_task(sabotaged, worker)
    assert results[EVERY_EXAMPLE] == "example 2 of 2: the example behaves the same on the clean and the buggy tree"
    assert results["repro shows the difference"] == ""  # the first-block check alone misses it
    # a second block quoting a value the buggy tree does not give fails too
    wrong = GOOD.replace("It gives `'Credit'`", "It gives `'CREDIT'`")
    why = audit_task(type(task)(replace(task.record, problem_statement=wrong)), worker)[EVERY_EXAMPLE]
    assert why == "example 2 of 2: the text says the buggy result is \"'CREDIT'\"; it is \"'Credit'\""


def test_the_writer_gives_the_second_bug_a_runnable_example_of_its_own(toy, worker):
    """Two real toy bugs; their tests run with each bug alone in the sandbox (the groups), and the
    writer, running every example, states both bugs, each in a block that defines its names."""
    first, second = (toy.load(t).record for t in TWO)
    record = replace(first, task_id="ledgerly-two", bug_patch=first.bug_patch + second.bug_patch,
                     mutations=[*first.mutations, *second.mutations],
                     target_tests=[*first.target_tests, *second.target_tests])
    task = type(toy.load(TWO[0]))(record)
    repo = Path(record.repo_dir)
    tests = list(record.target_tests)
    files = buggy_files(record)
    together = worker.run(files, tests, timeout=120)
    groups = [sorted(worker.run(unit, tests, timeout=120).failed_among(tests)) for unit in unit_files(record, repo)]
    assert len(bug_units(record)) == 2 and all(groups)
    from termgym.tasks.swesynth.behaviour import task_sys_path

    run = example_runner(worker, files, task_sys_path(task))
    report = write_report(tests, together.messages, record.bug_patch, repo=repo, seed="ledgerly-two", groups=groups,
                          source_dirs=task.source_dirs, run=run)
    found = examples(report)
    assert len(found) >= 2 and all(not undefined_names(e) for e in found), report
    assert any("parse_amount" in e.code and "import" in e.code for e in found[1:]), report
    assert "a normal result" not in report  # the clean run says what should come back
    assert run_examples(report, run) == ""


def test_a_report_written_from_the_tests_states_every_bug_or_is_refused(toy, worker, monkeypatch):
    """``rewrite_task`` (what ``reports --run-tests`` and ``--new-openings`` write with) takes a
    two-bug report only when it shows a symptom of each bug, as the audit's "names every symptom"
    reads it (session 35 reopened boltons-734c9d70a9 with one bug of two stated; the run audit
    caught it afterwards). The sabotage: a writer that states the first bug only is refused."""
    from termgym.factory.swesynth import report_rewrite

    first, second = (toy.load(t).record for t in TWO)
    record = replace(first, task_id="ledgerly-two", bug_patch=first.bug_patch + second.bug_patch,
                     mutations=[*first.mutations, *second.mutations],
                     target_tests=[*first.target_tests, *second.target_tests])
    task = type(toy.load(TWO[0]))(record)
    report, why = report_rewrite.rewrite_task(task, worker)
    assert why == "" and report is not None
    assert len(examples(report)) >= 2, report

    real = report_rewrite.write_report

    def first_bug_only(failed, messages, patch, **kwargs):
        kwargs["groups"] = None
        return real([t for t in failed if t in first.target_tests], messages, patch, **kwargs)

    monkeypatch.setattr(report_rewrite, "write_report", first_bug_only)
    report, why = report_rewrite.rewrite_task(task, worker)
    assert report is None
    assert why == "the new report fails a check: report names every symptom: bug 2 of 2 has no symptom in the report"


def test_a_real_multi_bug_record_is_worded_again_with_every_example_runnable():
    """A served two-bug task of the bundled suite, worded again from its own report in its
    project's sandbox: every example defines its names and shows its difference when run."""
    from termgym.factory.swesynth.report_rewrite import rewrite_from_report
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker
    from termgym.tasks.swesynth import default_suite
    from termgym.tasks.swesynth.behaviour import task_sys_path

    suite = default_suite(repos=["funcy"])
    multi = [t for t in suite.task_ids("all") if len(bug_units(suite.record(t))) > 1]
    assert multi, "the bundled suite serves two-bug funcy tasks"
    task = suite.load(multi[0])
    if not Path(task.record.repo_dir).is_dir():
        pytest.skip("the funcy tree is not provisioned on this machine")
    box = ScreenWorker(Path(task.record.repo_dir), task.record.test_command, task.source_dirs,
                       ProjectEnv.for_project(task.record.project))
    try:
        report, why = rewrite_from_report(task, box)
        assert why == "" and report is not None
        found = examples(report)
        assert len(found) >= 2 and all(not undefined_names(e) for e in found), report
        assert run_examples(report, example_runner(box, buggy_files(task.record), task_sys_path(task))) == ""
    finally:
        box.close()


# -- the records, the served set and the card ------------------------------------------------------------


def one_project_suite(tmp_path: Path, project: str = "isoweek") -> Path:
    """A compact suite holding one bundled project's records, baseline and behaviour checks."""
    import json
    import shutil

    from termgym.tasks.swesynth import SUITE_DIR

    index = json.loads((SUITE_DIR / "suite.json").read_text())
    lines = (SUITE_DIR / "records" / f"{project}.jsonl").read_text().splitlines()
    ids = {json.loads(x)["task_id"] for x in lines if x.strip()}
    out = tmp_path / "suite"
    for folder, name in (("records", f"{project}.jsonl"), ("baselines", f"{project}.json"),
                         ("behaviour", f"{project}.jsonl")):
        (out / folder).mkdir(parents=True)
        shutil.copy(SUITE_DIR / folder / name, out / folder / name)
    (out / "suite.json").write_text(json.dumps({
        "name": "one", "storage": "compact", "repos": {project: index["repos"][project]},
        "splits": {k: [t for t in v if t in ids] for k, v in index["splits"].items()}}))
    return out


def test_a_new_report_that_fails_a_check_is_not_taken(toy):
    """A report whose example defines its own subclass and names it as the broken API (isoweek's
    ``MyWeek()``, a reopened report of session 32) or leaves a name undefined fails the audit's
    checks that read a report; the rewrite does not take it (``_passing``), and a report kept as it
    stands is checked the same way (``static_problem``), so ``reports --write`` marks it not served."""
    from termgym.factory.swesynth.audit import static_problem
    from termgym.factory.swesynth.report_rewrite import _passing

    task = toy.load(TASK)
    assert static_problem(task, GOOD) == "" and _passing(task, GOOD, "") == (GOOD, "")
    subclass = GOOD.replace("`Account.normal_side` returns", "`MyAccount()` returns").replace(
        "from ledgerly.accounts import Account\nAccount('2000', 'x').normal_side",
        "from ledgerly.accounts import Account\nclass MyAccount(Account):\n    pass\n\n"
        "MyAccount('2000', 'x').normal_side")
    assert static_problem(task, subclass) == "repro calls the project: the repro calls only the standard library or built-ins"
    undefined = GOOD.replace("from ledgerly.accounts import Account\nAccount('3000'", "Account('3000'")
    problem = static_problem(task, undefined)
    assert problem == "every example defines its names: undefined in an example: Account"
    assert _passing(task, undefined, "") == (None, f"the new report fails a check: {problem}")
    assert _passing(task, None, "no draft") == (None, "no draft")
    # stated only as "a normal result" is counted by the card against its own limit, not refused here
    vague = GOOD.replace("I get `'Credit'`. I expected `'credit'`.", "It gives `'Credit'` instead of a normal result.")
    assert static_problem(task, vague) == ""


def test_a_report_written_again_comes_with_its_repro_run_on_both_trees(toy):
    """The record keeps its report's repro outcome on both trees (``validation["repro"]``, which
    the v2 data test checks against the report): a report written again brings the outcome of its
    own repro, run in the task's sandbox (session 32 wrote 186 reports and left 5 records with the
    old report's outcome until this)."""
    from termgym.factory.swesynth.quality import shows_difference
    from termgym.factory.swesynth.report_rewrite import rewrite_reports
    from termgym.tasks.swesynth.repro import repro_code

    result = rewrite_reports(toy, [TASK], run_tests=True)
    assert list(result["written"]) == [TASK], result["failed"]
    statement, repro = result["written"][TASK], result["repro"][TASK]
    assert repro_code(statement) and set(repro) == {"clean", "buggy"}
    assert shows_difference(statement, repro["clean"], repro["buggy"]) == ""
    assert shows_difference(statement, repro["clean"], repro["clean"])  # the clean outcome twice shows none


def test_rewritten_reports_change_only_the_report_and_a_failing_one_is_not_served(tmp_path):
    import json

    from termgym.factory.swesynth.report_rewrite import replace_statements
    from termgym.tasks.swesynth.suite import REPORT_FAILS

    suite_dir = one_project_suite(tmp_path)
    before = SweSynthSuite(suite_dir, behaviour="required")
    served = sorted(before.task_ids("all"))
    assert len(served) >= 2
    failing = before.unserved.get(REPORT_FAILS, 0)  # reports the run audit marked already
    path = suite_dir / "records" / "isoweek.jsonl"
    old = {json.loads(x)["task_id"]: json.loads(x) for x in path.read_text().splitlines()}
    assert replace_statements(suite_dir, {served[0]: "A new report.\n"}, {served[1]: "example 1 of 1: ..."}) == 2
    new = {json.loads(x)["task_id"]: json.loads(x) for x in path.read_text().splitlines()}
    assert new[served[0]]["bug"]["problem_statement"] == "A new report.\n"
    assert {**new[served[0]], "bug": {**new[served[0]]["bug"], "problem_statement": None}} == \
        {**old[served[0]], "bug": {**old[served[0]]["bug"], "problem_statement": None}}
    assert all(new[t] == old[t] for t in old if t not in served[:2])
    after = SweSynthSuite(suite_dir, behaviour="required")
    assert served[1] not in after.task_ids("all") and after.unserved.get(REPORT_FAILS) == failing + 1
    assert after.report_problem(served[1]) == "example 1 of 1: ..." and not after.report_problem(served[0])
    # written again, the task is served again
    assert replace_statements(suite_dir, {served[1]: "Another report.\n"}) == 1
    assert served[1] in SweSynthSuite(suite_dir, behaviour="required").task_ids("all")


def test_tasks_left_out_for_a_used_up_opening_get_reports_that_open_another_way_and_are_served(tmp_path):
    """``termgym swesynth reports --new-openings`` on a bundled project, with one task per opening
    call (so that there is always something left out): each new report is written from the task's
    failing tests in the project's sandbox, opens with a call no served task opens with, runs as it
    says, and makes its task served without pushing any other task out."""
    import json

    from termgym.factory.swesynth.quality import shows_difference
    from termgym.factory.swesynth.report import check_report
    from termgym.factory.swesynth.report_rewrite import reopen_duplicates, replace_statements
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker
    from termgym.tasks.swesynth.behaviour import task_sys_path
    from termgym.tasks.swesynth.distinct import ONE_TOKEN, SAME_CALL, select
    from termgym.tasks.swesynth.repro import first_call

    suite_dir = one_project_suite(tmp_path, "webcolors")
    suite = SweSynthSuite(suite_dir, behaviour="required", distinct=False)
    if not Path(suite.record(suite.task_ids("all")[0]).repo_dir).is_dir():
        pytest.skip("the webcolors tree is not provisioned on this machine")

    def chosen():
        s = SweSynthSuite(suite_dir, behaviour="required", distinct=False)
        splits = {split: list(s.task_ids(split)) for split in s.splits()}
        keys = {tid: s.task_keys(tid) for ids in splits.values() for tid in ids}
        # the one-line share off: which one-line fixes it leaves out shifts as tasks come in
        return select(splits, keys, max_per_key=1, max_one_line_share=1), keys

    before, keys = chosen()
    served_before = {tid for ids in before.splits.values() for tid in ids}
    left_out = [tid for tid, why in before.dropped.items() if why == SAME_CALL]
    assert len(left_out) >= 3
    larger = [tid for tid in left_out if keys[tid].rank != ONE_TOKEN]  # --larger-fixes: no one-token fix tried
    assert reopen_duplicates(suite_dir, max_per_key=1, larger_fixes=True, time_budget=0)["candidates"] == len(larger)
    assert len(larger) < len(left_out)
    result = reopen_duplicates(suite_dir, max_per_key=1)
    assert result["candidates"] == len(left_out) and not result["skipped"]
    written = result["written"]
    assert len(written) >= 2, result["failed"]
    used = {keys[tid].call for tid in served_before}
    for tid, report in written.items():
        assert first_call(report) not in used, (tid, report)  # a new opening, and each only once
        used.add(first_call(report))
        record = suite.record(tid)
        assert check_report(report, target_tests=record.target_tests, patch=record.bug_patch,
                            repo=record.repo_dir) == [], (tid, report)
    task = suite.load(next(iter(written)))  # the audit runs every example again, on both trees
    box = ScreenWorker(Path(task.record.repo_dir), task.record.test_command, task.source_dirs,
                       ProjectEnv.for_project(task.record.project))
    try:
        for tid, report in written.items():
            record = suite.record(tid)
            assert run_examples(report, example_runner(box, buggy_files(record), task_sys_path(task))) == "", tid
    finally:
        box.close()
    assert set(result["repro"]) == set(written)
    assert replace_statements(suite_dir, written, repros=result["repro"]) == len(written)
    lines = [json.loads(x) for x in (suite_dir / "records" / "webcolors.jsonl").read_text().splitlines()]
    for data in (x for x in lines if x["task_id"] in written):  # the recorded repro shows the new report's difference
        repro = data["validation"]["repro"]
        assert shows_difference(data["bug"]["problem_statement"], repro["clean"], repro["buggy"]) == ""
    after, _ = chosen()
    served_after = {tid for ids in after.splits.values() for tid in ids}
    assert served_after == served_before | set(written)


def test_the_card_states_the_example_measures_and_the_sampled_run():
    from termgym.factory.swesynth.card import _example_lines

    measures = report_measures({"a": GOOD, "b": GOOD.replace("from ledgerly.accounts import Account\nAccount('3000'",
                                                             "Account('3000'")})
    audit = {"run": True, "sample": 100, "seed": 41, "served": True,
             "total": {EVERY_EXAMPLE: [97, 100]}}
    text = "\n".join(_example_lines(measures, audit))
    assert "**Names undefined in any example** (used, but neither defined, imported nor built in): **1** reports" in text
    assert "**Private names** of the project in an example: 0." in text
    assert "stated only as \u201ca normal result\u201d**: 0 (0.0 %)" in text
    assert "**Distinct opening sentences**: 1" in text
    assert "a sample of 100 served tasks drawn with seed 41): 97 (97 %)" in text
    assert "Every example ran" not in "\n".join(_example_lines(measures, None))


def test_the_reports_command_names_bad_input(tmp_path, capsys):
    from termgym.cli import main

    assert main(["swesynth", "reports", "--suite", str(tmp_path / "nowhere")]) == 2
    assert "is not a compact suite directory or a suite name" in capsys.readouterr().err
    assert main(["swesynth", "reports", "--suite", str(one_project_suite(tmp_path)), "--task", "isoweek-nope"]) == 2
    assert "no such task in the served set (add --all): isoweek-nope" in capsys.readouterr().err
    suite = str(tmp_path / "suite")
    assert main(["swesynth", "reports", "--suite", suite, "--project", "isoweek"]) == 2
    assert "--project goes with --new-openings" in capsys.readouterr().err
    assert main(["swesynth", "reports", "--suite", suite, "--larger-fixes"]) == 2
    assert "--larger-fixes goes with --new-openings" in capsys.readouterr().err
    assert main(["swesynth", "reports", "--suite", suite, "--new-openings", "--task", "isoweek-nope"]) == 2
    assert "--task does not go with --new-openings" in capsys.readouterr().err
