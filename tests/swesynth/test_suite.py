"""The SWE-SYNTH environment end to end: generation, the workspace, refusals and grading in the
local sandbox (oracle 1.0, empty patch 0, test edits not rewarded), records in the public shape."""

from __future__ import annotations

import json
import time

import pytest

from termgym.env import TerminalEnv, oracle_actions
from termgym.factory.swesynth.breaker import LLMBreaker
from termgym.factory.swesynth.generate import generate
from termgym.factory.swesynth.llm import ChatClient
from termgym.tasks.swesynth import REFUSAL, SweSynthSuite, default_suite
from termgym.tasks.swesynth.records import RecordError, read_records_file
from termgym.tasks.swesynth.task import NORMALISED_MTIME, prepare_workspace

HOST_PYTEST = "python -m pytest -q"
SANDBOX_PYTEST = "python3 -m pytest -q"


def _bash(command: str) -> str:
    return f"THOUGHT: next step\n```bash\n{command}\n```"


SUBMIT = _bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


@pytest.fixture(scope="module")
def mini_suite(tmp_path_factory, mini_baseline):
    repo, _ = mini_baseline
    out = tmp_path_factory.mktemp("suite") / "mini-suite"
    result = generate(repo, HOST_PYTEST, n=3, seed=5, out=out, name="minilib", workers=2,
                      sandbox_test_command=SANDBOX_PYTEST)
    assert result.stats.kept == 3
    return out, result


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_generation_writes_inspectable_task_folders(mini_suite):
    out, result = mini_suite
    index = json.loads((out / "suite.json").read_text())
    ids = [t for ids in index["splits"].values() for t in ids]
    assert sorted(ids) == sorted(r.task_id for r in result.records)
    record = result.records[0]
    folder = out / record.task_id
    data = json.loads((folder / "task.json").read_text())
    assert data["task_id"] == record.task_id and data["repo"] == "minilib"
    assert data["bug"]["patch"] == (folder / "bug.patch").read_text()
    assert data["fix_patch"] == (folder / "fix.patch").read_text()
    assert data["bug"]["bug_types"] and data["bug"]["problem_statement"]
    assert set(data["bug"]["target_tests"]) <= set(data["original"]["all_tests"])
    assert len(data["original"]["all_tests"]) == 12
    assert (out / "repos" / "minilib" / "minilib" / "stock.py").is_file()
    assert index["generation"]["minilib"]["kept"] == 3


def test_same_seed_same_tasks_whatever_the_worker_count(mini_suite, mini_baseline, tmp_path):
    _, result = mini_suite
    again = generate(mini_baseline[0], HOST_PYTEST, n=3, seed=5, out=tmp_path / "again", name="minilib",
                     workers=1, sandbox_test_command=SANDBOX_PYTEST)
    assert [r.task_id for r in again.records] == [r.task_id for r in result.records]
    assert [r.problem_statement for r in again.records] == [r.problem_statement for r in result.records]


def test_workspace_is_the_buggy_repo_with_history_wiped(mini_suite, cache_dir):
    out, result = mini_suite
    suite = SweSynthSuite(out)
    env = TerminalEnv(suite)
    try:
        task_id = result.records[0].task_id
        obs, info = env.reset(options={"task_id": task_id})
        assert "<pr_description>" in obs and result.records[0].problem_statement.strip()[:40] in obs
        o = env.step(_bash("git log --format='%s|%an' && git status --porcelain && echo CLEAN"))[0]
        assert "Initial state|termgym" in o and "CLEAN" in o and o.count("|termgym") == 1
        o = env.step(_bash("stat -c %Y minilib/stock.py tests/test_stock.py; ls -a"))[0]
        assert o.count(str(NORMALISED_MTIME)) == 2
        assert "task.json" not in o and "fix.patch" not in o and "bug.patch" not in o
        o = env.step(_bash("git diff HEAD --stat | wc -l; grep -c . minilib/stock.py"))[0]
        assert o.split("<output>")[1].split()[0] == "0"  # the bug is committed: nothing to diff against
        for forbidden in ("md5sum minilib/stock.py", "sha256sum minilib/*.py", "cd /app && cksum x",
                          "find . -newer pytest.ini", "find /app -mmin -5 -name '*.py'", "ls | sha1sum"):
            assert REFUSAL in env.step(_bash(forbidden))[0], forbidden
        assert REFUSAL not in env.step(_bash("python3 -c 'print(sum([1, 2]))'; find . -name '*.py'"))[0]
    finally:
        env.close()


def test_oracle_scores_one_and_empty_patch_zero(mini_suite, cache_dir):
    out, result = mini_suite
    env = TerminalEnv(SweSynthSuite(out))
    try:
        for record in result.records:
            env.reset(options={"task_id": record.task_id})
            for action in oracle_actions(env):
                *_, info = env.step(action)
            grade = info["grade"]
            assert grade["score"] == 1.0 and grade["all_passed"], grade
            assert grade["all_result"] == "12/12" and grade["pass_rate"] == 1.0
            assert grade["target_result"] == f"{len(record.target_tests)}/{len(record.target_tests)}"
            assert grade["patch_files"] == ["minilib/stock.py"]

            env.reset(options={"task_id": record.task_id})
            _, reward, terminated, _, info = env.step(SUBMIT)
            grade = info["grade"]
            assert terminated and reward == 0.0 and grade["score"] == 0.0 and not grade["all_passed"]
            n_bad = len(record.target_tests)
            assert grade["all_result"] == f"{12 - n_bad}/12" and grade["target_result"] == f"0/{n_bad}"
            assert grade["pass_rate"] == pytest.approx((12 - n_bad) / 12)
    finally:
        env.close()


def test_editing_tests_is_not_rewarded(mini_suite, cache_dir):
    out, result = mini_suite
    env = TerminalEnv(SweSynthSuite(out))
    try:
        record = result.records[0]
        env.reset(options={"task_id": record.task_id})
        # Make the broken tests pass by gutting them, plus a conftest that skips everything.
        env.step(_bash("sed -i 's/^    assert /    assert True or /' tests/test_stock.py && "
                       "printf 'import pytest\\n' > conftest.py && python3 -m pytest -q 2>&1 | tail -1"))
        *_, info = env.step(SUBMIT)
        grade = info["grade"]
        assert grade["score"] == 0.0 and not grade["all_passed"]
        assert set(grade["ignored_files"]) == {"tests/test_stock.py", "conftest.py"}
        assert grade["patch_files"] == []

        # The fix plus a test edit: the fix counts, the test edit is dropped.
        env.reset(options={"task_id": record.task_id})
        for action in oracle_actions(env)[:-1]:
            env.step(action)
        env.step(_bash("echo 'def test_extra():\n    assert False' >> tests/test_stock.py"))
        *_, info = env.step(SUBMIT)
        assert info["grade"]["score"] == 1.0 and info["grade"]["ignored_files"] == ["tests/test_stock.py"]

        # The host reads the agent's files: a workspace whose git history the agent destroyed is graded
        # all the same (the git fallback's 0 is in tests/adversarial/test_agent_changes.py).
        env.reset(options={"task_id": record.task_id})
        for action in oracle_actions(env)[:-1]:
            env.step(action)
        env.step(_bash("rm -rf .git"))
        *_, info = env.step(SUBMIT)
        assert info["grade"]["score"] == 1.0, info["grade"]
    finally:
        env.close()


def test_reset_reuses_the_prepared_workspace(mini_suite, cache_dir):
    out, result = mini_suite
    suite = SweSynthSuite(out)
    task = suite.load(result.records[1].task_id)
    first = prepare_workspace(task.record)
    start = time.perf_counter()
    for _ in range(20):
        spec = task.sandbox_spec()
    per_spec = (time.perf_counter() - start) / 20
    assert spec.copy_dirs == {str(first): "/app"} and spec.workdir == "/app"
    assert per_spec < 0.05, f"building the sandbox spec took {per_spec * 1000:.1f} ms"
    assert not (first / "minilib" / "__pycache__").exists()


def test_records_in_the_public_shape_with_docker_images(tmp_path, mini_suite):
    out, result = mini_suite
    public = result.records[0].to_json()
    public.update({"image": "registry.example/swe-pro:task-7", "workdir": "/app"})
    public["instance_id"] = public.pop("task_id")
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(public) + "\n")
    [record] = read_records_file(path)
    assert record.image == "registry.example/swe-pro:task-7" and record.repo_dir is None
    suite = SweSynthSuite(path)
    task = suite.load(record.task_id)
    spec = task.sandbox_spec()
    assert spec.image == "registry.example/swe-pro:task-7" and spec.workdir == "/app" and not spec.copy_dirs
    assert spec.files["/tmp/.termgym-bug.patch"] == record.bug_patch
    assert any("Initial state" in c for c in spec.setup_commands)
    assert any("touch -h -d @1704067200" in c for c in spec.setup_commands)
    broken = dict(public)
    broken.pop("image")
    path.write_text(json.dumps(broken) + "\n")
    with pytest.raises(RecordError, match="needs 'repo_dir'"):
        read_records_file(path)
    broken = json.loads(json.dumps(public))
    del broken["bug"]["problem_statement"]
    path.write_text(json.dumps(broken))
    with pytest.raises(RecordError, match="problem_statement"):
        read_records_file(path.rename(tmp_path / "one.json"))


def test_llm_breaker_makes_validated_tasks_of_complex_types(mini_baseline, scripted_model, breaker_script, tmp_path):
    server = scripted_model(breaker_script)
    breaker = LLMBreaker(ChatClient(server.base_url, "scripted-breaker"), max_candidates=6)
    result = generate(mini_baseline[0], HOST_PYTEST, n=1, seed=1, out=tmp_path / "llm", name="minilib",
                      bug_types=["semantic-error"], breaker=breaker, max_attempts=6,
                      sandbox_test_command=SANDBOX_PYTEST)
    assert result.stats.kept == 1
    record = result.records[0]
    assert record.bug_types == ["semantic-error"] and "LLM breaker" in record.mutations[0]["description"]
    changed = [line for line in record.bug_patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert len(changed) == 2  # the model returned the whole function; the diff keeps only the changed line
    assert server.requests and "semantic-error" in server.requests[0]["messages"][-1]["content"]


def test_suite_errors_name_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SweSynthSuite(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="no suite.json"):
        SweSynthSuite(tmp_path / "empty")
    suite = default_suite("toy")
    with pytest.raises(KeyError, match="no task 'missing-1'"):
        suite.load("missing-1")
    with pytest.raises(KeyError, match="no split 'dev'"):
        suite.task_ids("dev")
