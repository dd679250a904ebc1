"""The grader reads the agent's changes from the host (termgym.tasks.swesynth.changes).

On both backends, once the agent submits: every process in its sandbox is killed (``halt``), the
host reads its workdir without following or opening what the agent planted, and no process is
started in the agent's sandbox. The changed source files go into the fresh grading sandbox, where
the task's own git makes them the patch. Where the host cannot reach the files, git runs in the
agent's sandbox as before (the fallback is tested here too).
"""

from __future__ import annotations

import pytest

from termgym.env import TerminalEnv, oracle_actions
from termgym.tasks.swesynth import changes as changes_module
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.changes import AgentChanges
from tests.docker_engine import require_docker

TASK = "ledgerly-03e7642999"  # Account.normal_side says "Credit", not "credit"
SUBMIT = "THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


def _bash(command: str) -> str:
    return f"THOUGHT: next step\n```bash\n{command}\n```"


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request) -> str:
    if request.param == "docker":
        require_docker()
    return request.param


def play(cache, backend: str, commands: list[str], *, oracle: bool = False, watch: list | None = None) -> dict:
    """One episode: optionally the oracle fix, then ``commands``, then submit; the grade.

    ``watch`` collects every command run in the agent's own sandbox while the submit is graded.
    """
    env = TerminalEnv(default_suite("toy", cache_dir=cache), backend=backend)
    try:
        env.reset(options={"task_id": TASK})
        if oracle:
            for action in oracle_actions(env)[:-1]:
                env.step(action)
        for command in commands:
            env.step(_bash(command))
        if watch is None:
            *_, info = env.step(SUBMIT)
            return info["grade"]
        agent_sandbox = env.sandbox
        original = agent_sandbox.exec

        def exec_watched(command, *args, **kwargs):
            watch.append(command)
            return original(command, *args, **kwargs)

        agent_sandbox.exec = exec_watched  # what the grader runs in the agent's own sandbox
        *_, info = env.step(SUBMIT)
        return info["grade"]
    finally:
        env.close()


def test_the_oracle_is_graded_without_a_process_in_the_agents_sandbox(cache, backend):
    seen: list[str] = []
    grade = play(cache, backend, [], oracle=True, watch=seen)
    assert grade["score"] == 1.0 and grade["patch_files"] == ["ledgerly/accounts.py"], grade
    # the submit command is the episode's last action, run before grading starts
    assert [c for c in seen if "COMPLETE_TASK_AND_SUBMIT" not in c] == [], seen


def test_new_deleted_and_executable_files_become_the_patch(cache, backend):
    grade = play(cache, backend, [
        "printf 'def helper():\\n    return 1\\n' > ledgerly/helpers.py",
        "rm ledgerly/invoice.py",
        "chmod +x ledgerly/money.py",
        "echo '# notes' > NOTES.md",
        "sed -i 's/assert/assert True or/' tests/test_accounts.py",
    ], oracle=True)
    assert grade["patch_files"] == ["ledgerly/accounts.py", "ledgerly/helpers.py", "ledgerly/invoice.py",
                                    "ledgerly/money.py"], grade
    patch = grade["fix_patch"]
    assert "new file mode 100644" in patch and "deleted file mode" in patch and "new mode 100755" in patch, patch
    assert grade["ignored_files"] == ["NOTES.md", "tests/test_accounts.py"], grade
    assert "tests/test_accounts.py" not in patch
    assert grade["score"] == 0.0  # the deleted module breaks the tests: the deletion was graded


def test_a_destroyed_git_history_does_not_matter_to_the_grade(cache, backend):
    """The agent's repository is not consulted: its files are."""
    grade = play(cache, backend, ["rm -rf .git"], oracle=True)
    assert grade["score"] == 1.0 and grade["patch_files"] == ["ledgerly/accounts.py"], grade


def test_a_fifo_or_a_link_at_a_source_path_is_refused_not_opened(cache, backend, tmp_path):
    host_file = tmp_path / "fix.py"
    host_file.write_text("# a host file\n")
    grade = play(cache, backend, [
        "rm ledgerly/money.py && mkfifo ledgerly/money.py",
        f"ln -s {host_file} ledgerly/extra.py",
    ], oracle=True)
    assert grade["score"] == 0.0, grade
    refused = " ".join(grade.get("refused_files", []))
    assert "ledgerly/money.py: becomes a FIFO" in refused and "ledgerly/extra.py: becomes a symbolic link" in refused
    assert "a host file" not in (grade.get("fix_patch") or "")


def test_a_source_tree_past_the_limit_is_a_clear_zero(cache, monkeypatch):
    monkeypatch.setattr(changes_module, "MAX_SOURCE_BYTES", 4096)
    grade = play(cache, "local", ["head -c 20000 /dev/zero | tr '\\0' '#' > ledgerly/big.py"], oracle=True)
    assert grade["score"] == 0.0 and "more than 4096 bytes" in grade["error"], grade


def test_where_the_host_cannot_read_the_files_git_runs_in_the_agents_sandbox(cache, backend, monkeypatch):
    from termgym.sandbox.docker.sandbox import DockerSandbox
    from termgym.sandbox.local import BubblewrapSandbox

    for cls in (BubblewrapSandbox, DockerSandbox):
        monkeypatch.setattr(cls, "open_host_dir", lambda self, path: None)
    seen: list[str] = []
    grade = play(cache, backend, [], oracle=True, watch=seen)
    assert grade["score"] == 1.0 and grade["patch_files"] == ["ledgerly/accounts.py"], grade
    assert any("git" in c and "--binary" in c for c in seen), seen  # the fallback did run
    grade = play(cache, backend, ["rm -rf .git"], oracle=True)
    assert grade["score"] == 0.0 and "git" in grade["error"], grade


def test_sabotage_grading_without_the_read_changes_fails_the_oracle(cache, monkeypatch):
    """The oracle's 1 depends on the changes the host read: drop them and it is a 0."""
    real = changes_module.read_agent_changes
    monkeypatch.setattr("termgym.tasks.swesynth.task.read_agent_changes",
                        lambda *a, **k: AgentChanges() if real(*a, **k) is not None else None)
    grade = play(cache, "local", [], oracle=True)
    assert grade["score"] == 0.0 and grade["patch_files"] == [], grade
