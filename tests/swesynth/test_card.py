"""The suite card and the audit's command line (termgym.factory.swesynth.card, ``termgym swesynth
card`` / ``audit``): numbers read from the bundled records, a card written into a document twice
stays one card, and bad input is named."""

from __future__ import annotations

import json

import pytest

from termgym.cli import main
from termgym.factory.swesynth.card import (
    END,
    START,
    _mix_lines,
    bug_mix,
    fix_size,
    measure,
    render,
    sample_fixes,
    sample_reports,
    symptom,
    write_into,
)
from termgym.tasks.swesynth import SUITE_DIR, SweSynthSuite

PATCH = """diff --git a/p/a.py b/p/a.py
--- a/p/a.py
+++ b/p/a.py
@@ -1,3 +1,3 @@
 x = 1
-y = 2
+y = 3
 z = 4
@@ -10,3 +10,4 @@
 a = 1
-b = 2
+b = 3
+c = 5
diff --git a/p/b.py b/p/b.py
--- a/p/b.py
+++ b/p/b.py
@@ -1,2 +1,2 @@
-q = 1
+q = 2
"""


@pytest.fixture(scope="module")
def bundled_card():
    """The default suite's card, measured once for the tests that only read it (seconds each)."""
    return measure(SUITE_DIR)


def test_fix_size_counts_lines_sites_and_files():
    assert fix_size(PATCH) == {"lines": 1 + 2 + 1, "sites": 3, "files": 2}


def test_symptom_reads_the_report():
    assert symptom("`f()` crashes with `ValueError` on input that looks valid to me.\n\nMore.") == "raises"
    assert symptom("`f()` silently accepts bad input.\n\nWith `f(1)`, it goes through.") == "accepts bad input"
    assert symptom("I think `f()` is broken.\n\nWhen I call `f(1)`, I get `2`. I expected `3`.") == "wrong value"


def test_the_card_reports_the_near_duplicate_share_of_the_bundled_suite(bundled_card):
    card = bundled_card
    dup = card["near_duplicates"]
    assert dup["tasks"] == card["tasks"] and 0 < dup["either"] <= dup["tasks"]
    assert max(dup["function_bug_type"], dup["first_call"]) <= dup["either"] <= \
        dup["function_bug_type"] + dup["first_call"]
    assert "**Near-duplicates**" in render(card)


def test_the_card_of_the_bundled_suite_adds_up(bundled_card):
    card = bundled_card
    total = card["tasks"]
    assert total == sum(c["tasks"] for c in card["per_project"].values()) == sum(card["splits"].values())
    assert sum(card["symptoms"].values()) == total == sum(card["difficulty"].values())
    assert all(len(v) == total for v in card["sizes"].values())
    assert set(card["projects"]) == set(card["per_project"])
    assert all(p["license"] != "?" for p in card["projects"].values())
    text = render(card)
    assert text.startswith(START) and text.rstrip().endswith(END) and f"**{total} tasks**" in text


def test_writing_the_card_twice_keeps_one_card(tmp_path, bundled_card):
    doc = tmp_path / "doc.md"
    doc.write_text("# Title\n\nText.\n")
    card = bundled_card
    write_into(doc, render(card))
    write_into(doc, render(card))
    text = doc.read_text()
    assert text.count(START) == 1 and text.count(END) == 1 and text.startswith("# Title\n\nText.\n")


def test_the_card_command_writes_the_section_and_takes_an_audit(tmp_path, capsys):
    audit = tmp_path / "audit.json"
    assert main(["swesynth", "audit", "--suite", "projects", "--sample", "3", "--seed", "1", "--static",
                 "--json", str(audit)]) == 0
    out = capsys.readouterr().out
    assert "| **all** | 3 |" in out
    result = json.loads(audit.read_text())
    assert result["tasks"] == 3 and result["run"] is False
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n")
    assert main(["swesynth", "card", "--audit", str(audit), "--write", str(doc)]) == 0
    assert "**Report checks passed** (`termgym swesynth audit`, a sample of 3 tasks drawn with seed 1, " \
           "static checks only)" in doc.read_text()


def test_bad_input_is_named(tmp_path, capsys):
    assert main(["swesynth", "card", "--suite", str(tmp_path / "nowhere")]) == 2
    assert "holds no suite.json" in capsys.readouterr().err
    assert main(["swesynth", "card", "--suite", "toy"]) == 2
    assert "is not a compact suite" in capsys.readouterr().err
    assert main(["swesynth", "card", "--audit", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the audit" in capsys.readouterr().err
    assert main(["swesynth", "audit", "--suite", str(tmp_path / "nowhere")]) == 2
    assert "neither a suite directory nor a suite name" in capsys.readouterr().err
    assert main(["swesynth", "audit", "--sample", "0"]) == 2
    assert "--sample must be at least 1" in capsys.readouterr().err


def test_the_card_counts_generation_and_quotes_reports_drawn_by_a_fixed_seed(tmp_path, bundled_card):
    card = bundled_card
    index = json.loads((SUITE_DIR / "suite.json").read_text())
    gen = card["generation"]
    assert gen["projects"] == len(index["generation"]) and gen["kept"] >= card["tasks"] > 0
    assert gen["tasks_per_project_minute"] == round(60 * gen["kept"] / gen["seconds"], 2)
    first, again = sample_reports(card, 5, 26), sample_reports(card, 5, 26)
    assert first == again and len({tid for tid, _ in first}) == 5
    assert [tid for tid, _ in sample_reports(card, 5, 27)] != [tid for tid, _ in first]
    served = card["served"]
    assert served["tasks"] + sum(served["not_served"].values()) == card["tasks"]
    default = SweSynthSuite("projects")
    assert served["tasks"] == len(default.task_ids("all"))  # what the default policy serves
    # bugs in two or more functions: served only where each function's bug alone is told apart
    multi = served["multi_function"]
    assert multi["served"] == sum(len(default.behaviour_check_of(t)["targets"]) >= 2 for t in default.task_ids("all"))
    assert 0 < multi["served"] < multi["tasks"] and 0 < multi["covered"] < multi["functions"], multi
    text = render(card, quotes=5, quote_seed=26)
    assert f"for {multi['covered']} of their {multi['functions']} changed functions" in text
    assert "**Generation**:" in text and "**5 reports drawn at random** (seed 26" in text
    for tid, statement in first:  # quoted whole, each line behind '> '
        assert f"`{tid}`:" in text and "> " + statement.strip().splitlines()[0] in text
    assert "reports drawn at random" not in render(card)
    doc = tmp_path / "new" / "card.md"
    doc.parent.mkdir()
    assert main(["swesynth", "card", "--quotes", "2", "--write", str(doc)]) == 0  # a new document
    assert doc.read_text().startswith(START) and "**2 reports drawn at random**" in doc.read_text()
    assert main(["swesynth", "card", "--quotes", "-1"]) == 2


def test_the_largest_function_count_counts_tasks_not_bugs(bundled_card):
    """Two bugs in one function are one task there: the per-function figure the cap is checked
    against counts each task once per function and fix size (one token, or larger); the figure
    over both sizes adds the two."""
    from termgym.factory.swesynth.known import line_fix_size

    per_task, any_size = {}, {}
    rows = [json.loads(row) for line in (SUITE_DIR / "records").glob("*.jsonl") for row in line.read_text().splitlines()]
    # a single-bug task split out of a multi-bug one takes its place at the function it breaks
    replaced = {(source, m.get("path"), m.get("function")) for data in rows
                for source in (data.get("origin") or {}).get("split_from", ()) for m in data["bug"]["mutations"]}
    for data in rows:
        for key in {(data["repo"], m.get("path"), m.get("function")) for m in data["bug"]["mutations"]}:
            if (data["task_id"], *key[1:]) not in replaced:
                sized = (*key, line_fix_size(data))
                per_task[sized] = per_task.get(sized, 0) + 1
                any_size[key] = any_size.get(key, 0) + 1
    assert bundled_card["max_tasks_per_function"] == max(per_task.values())
    assert bundled_card["max_tasks_per_function_any_size"] == max(any_size.values())


def test_every_served_bug_has_its_own_telling_input_and_the_old_rule_would_not(monkeypatch, bundled_card):
    """The card's 'every bug checked' line: 100 % on the served default; with the per-bug rule off
    (a check served when any held-out input tells the whole bug apart) the same count falls short."""
    from termgym.factory.swesynth.card import _served
    from termgym.tasks.swesynth import behaviour

    served = bundled_card["served"]
    assert served["bugs"] > served["tasks"] and served["bugs_told_apart"] == served["bugs"]
    monkeypatch.setattr(behaviour, "servable", lambda check: bool(behaviour.heldout_telling(check))
                        and (behaviour.heldout_outcomes(check) or 0) >= 2)
    loose = _served(SUITE_DIR)
    assert loose["bugs_told_apart"] < loose["bugs"], loose["bugs"]


def test_the_mix_of_served_bugs_counts_sources_fix_sizes_and_types():
    records = [
        {"fix_patch": PATCH, "signals": {"tokens_changed": 4}, "bug": {"bug_types": ["late-check"]}},
        {"fix_patch": PATCH, "signals": {"tokens_changed": 1}, "bug": {"bug_types": ["wrong-variable"] * 2}},
        {"fix_patch": PATCH, "signals": {"tokens_changed": 9}, "bug": {"bug_types": ["regression"]},
         "origin": {"source": "history", "kind": "fix"}},
        {"fix_patch": PATCH, "signals": {"tokens_changed": 2}, "bug": {"bug_types": ["regression"]},
         "origin": {"source": "history", "kind": "fix", "part": True}},
    ]
    mix = bug_mix(records)
    assert mix["tasks"] == 4 and mix["sources"] == {"procedural": 2, "history": 2} and mix["kinds"] == {"fix": 2}
    assert mix["parts"] == 1 and "1 of the history tasks put back one hunk" in "\n".join(_mix_lines(mix))
    mix = bug_mix(records[:3])
    assert mix["tokens"] == [4, 1, 9] and mix["bug_types"]["wrong-variable"] == 1  # once per task
    text = "\n".join(_mix_lines(mix))
    assert "**fixes of at most one token: 1 (33 %)**" in text and "changed tokens median 4, p90 9" in text


def test_the_card_shows_history_and_procedural_fixes_of_served_tasks_drawn_by_a_seed(bundled_card):
    card = bundled_card
    served = set(card["served"]["task_ids"])
    # the mix is the served tasks', not the suite's (measured over all tasks it would count 5,000 more)
    assert card["served_mix"]["tasks"] == len(served) == len(card["fixes"])
    assert sum(card["served_mix"]["sources"].values()) == len(served)
    drawn = sample_fixes(card, 3, 26)
    assert drawn == sample_fixes(card, 3, 26) and drawn != sample_fixes(card, 3, 27)
    assert len(drawn["procedural"]) == 3 and 1 <= len(drawn["history"]) <= 3
    assert all(card["fixes"][t]["source"] == source for source, ids in drawn.items() for t in ids)
    assert set(drawn["history"] + drawn["procedural"]) <= served
    text = render(card, fixes=3, fix_seed=26)
    assert "**3 history tasks and 3 procedural tasks drawn at random** (seed 26" in text
    assert "**What the served bugs are like**" in text
    for tid in drawn["history"] + drawn["procedural"]:
        fix = card["fixes"][tid]["fix_patch"].splitlines()
        assert f"`{tid}` (" in text and "\n".join(fix[:4]) in text  # the fix itself, in a diff block
    assert "history tasks and" not in render(card)
    assert main(["swesynth", "card", "--fixes", "-1"]) == 2
