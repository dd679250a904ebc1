"""Odd names in the agent's workspace: never an infrastructure error, never a host path.

Whatever the agent leaves in its workdir is its own doing, so it is graded (a 0 with the reason, or
the score the fix earns), and the episode is recorded: a file name that is not UTF-8, one with a
newline, a name of 250 bytes, a source file replaced by a directory and a package replaced by a
file, a case-only rename. Before, one ``printf`` of a non-UTF-8 name made the episode writer raise
(``UnicodeEncodeError``: ``env.step`` failed, the run counted an infrastructure error and retried
it the same way), and a source file turned into a directory failed the grade with
``FileExistsError`` naming this host's sandbox path. Each repair has a sabotage below that brings
the failure back.
"""

from __future__ import annotations

import json

import pytest

from termgym.env import TerminalEnv, oracle_actions
from termgym.tasks.swesynth import default_suite
from termgym.wrappers.recording import RecordEpisodes, read_jsonl
from tests.docker_engine import require_docker

TASK = "ledgerly-03e7642999"  # Account.normal_side says "Credit", not "credit"
SUBMIT = "THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"

#: name -> (shell commands after the oracle's fix, the score they earn, a phrase the grade's error holds)
ATTACKS: dict[str, tuple[list[str], float, str | None]] = {
    "non_utf8_file_name": (["touch \"notes-$(printf '\\376').txt\""], 1.0, None),
    "non_utf8_source_name": (["printf 'X = 1\\n' > \"ledgerly/m$(printf '\\376').py\""], 0.0,
                             "not valid UTF-8"),
    "newline_in_file_name": (["touch \"$(printf 'a\\nb.txt')\""], 1.0, None),
    "newline_in_source_name": (["printf 'X = 1\\n' > \"ledgerly/$(printf 'a\\nb').py\""], 0.0,
                               "control character"),
    "long_source_name": (["printf 'X = 1\\n' > ledgerly/" + "x" * 250 + ".py"], 1.0, None),
    "source_file_becomes_directory": (["rm ledgerly/reports.py && mkdir ledgerly/reports.py "
                                       "&& printf 'X = 1\\n' > ledgerly/reports.py/a.py"], 0.0, None),
    "package_becomes_file": (["rm -rf ledgerly && printf 'nothing here\\n' > ledgerly"], 0.0, None),
    "case_only_rename": (["mv ledgerly/money.py ledgerly/Money.py"], 0.0, None),
}


def play(cache, tmp_path, commands: list[str], backend: str = "local") -> tuple[dict, list[dict]]:
    """The oracle's fix, then ``commands``, then submit, recorded; the grade and the records read back."""
    log = tmp_path / "episodes.jsonl"
    env = RecordEpisodes(TerminalEnv(default_suite("toy", cache_dir=cache), backend=backend), log,
                         experiment="odd-names")
    try:
        env.reset(options={"task_id": TASK})
        for action in oracle_actions(env.unwrapped)[:-1]:
            env.step(action)
        for command in commands:
            env.step(f"THOUGHT: next\n```bash\n{command}\n```")
        *_, info = env.step(SUBMIT)
    finally:
        env.close()
    return info["grade"], list(read_jsonl(log))


def assert_graded_as_the_agents(grade: dict, records: list[dict], score: float, phrase: str | None) -> None:
    text = json.dumps(grade, ensure_ascii=False)
    text.encode("utf-8")  # the grade always encodes
    error = grade.get("error") or ""
    assert not error.startswith(("grading failed", "infrastructure")), grade
    assert "termgym-local-" not in text and "/dev/shm" not in text and "termgym-docker-" not in text, \
        f"a host path in the grade: {text[:2000]}"
    assert grade["score"] == score, grade
    if phrase is not None:
        assert phrase in error, grade
    assert len(records) == 1 and records[0]["grade"]["score"] == score, records


@pytest.mark.parametrize("name", list(ATTACKS))
def test_odd_names_are_graded_not_infrastructure_errors(cache, tmp_path, name):
    commands, score, phrase = ATTACKS[name]
    grade, records = play(cache, tmp_path, commands)
    assert_graded_as_the_agents(grade, records, score, phrase)


@pytest.mark.docker
@pytest.mark.parametrize("name", ["non_utf8_file_name", "source_file_becomes_directory"])
def test_odd_names_on_docker(cache, tmp_path, name):
    require_docker()
    commands, score, phrase = ATTACKS[name]
    grade, records = play(cache, tmp_path, commands, backend="docker")
    assert_graded_as_the_agents(grade, records, score, phrase)


def test_a_non_utf8_name_is_reported_by_its_bytes(cache, tmp_path):
    grade, records = play(cache, tmp_path, ATTACKS["non_utf8_file_name"][0])
    assert "notes-\\xfe.txt" in grade["ignored_files"], grade
    assert records[0]["grade"]["ignored_files"] == grade["ignored_files"]


# -- sabotages: each repair undone brings its failure back ---------------------------------------


def test_sabotage_unencodable_grade_and_strict_writer_make_step_raise(cache, tmp_path, monkeypatch):
    import termgym.tasks.base as base
    import termgym.wrappers.recording as recording

    monkeypatch.setattr(base, "encodable", lambda value: value)
    monkeypatch.setattr(recording, "JSON_ERRORS", "strict")
    with pytest.raises(UnicodeEncodeError):
        play(cache, tmp_path, ATTACKS["non_utf8_file_name"][0])


def test_sabotage_strict_writer_alone_is_caught_by_the_grade(cache, tmp_path, monkeypatch):
    """The grade is made encodable on its own: a strict writer still records the episode."""
    import termgym.wrappers.recording as recording

    monkeypatch.setattr(recording, "JSON_ERRORS", "strict")
    grade, records = play(cache, tmp_path, ATTACKS["non_utf8_file_name"][0])
    assert_graded_as_the_agents(grade, records, 1.0, None)


def test_sabotage_writes_before_deletions_fail_the_grade_with_a_host_path(cache, tmp_path, monkeypatch):
    import termgym.env as env_module
    from termgym.tasks.swesynth.task import SweSynthTask

    monkeypatch.setattr(SweSynthTask, "clear_for_changes", lambda self, sandbox, paths: None)
    grade, _ = play(cache, tmp_path, ATTACKS["source_file_becomes_directory"][0])
    assert grade["error"].startswith("grading failed"), grade
    assert "termgym-local-" not in grade["error"], grade  # named as the agent sees it
    monkeypatch.setattr(env_module, "in_sandbox_terms", lambda text, hosts: text)
    grade, _ = play(cache, tmp_path, ATTACKS["source_file_becomes_directory"][0])
    assert "termgym-local-" in grade["error"], grade


def test_sabotage_odd_source_names_accepted_lose_the_reason(cache, tmp_path, monkeypatch):
    from termgym.tasks.swesynth import changes

    monkeypatch.setattr(changes, "odd_name", lambda path: None)
    grade, _ = play(cache, tmp_path, ATTACKS["non_utf8_source_name"][0])
    assert "not valid UTF-8" not in (grade.get("error") or ""), grade
