"""Parity with Harbor 0.26: the same task and the same verifier output get the same verdict.

Each crafted edge-case task runs in a real termgym sandbox; the files its verifier left are then
judged again by Harbor's own parsers and error policy (``parity/harbor_judge.py``, in Harbor's own
venv made by ``scripts/setup-harbor.sh``), and both verdicts must agree. Terminus-2 replies are
parsed by both parsers. Set ``TERMGYM_PARITY_TABLE=path.json`` to write the rows docs/harbor.md
shows.
"""

from __future__ import annotations

import json
import os
import time

import gymnasium as gym
import pytest

import termgym  # noqa: F401
from termgym.protocols.terminus import TerminusParseError, parse_reply
from termgym.tasks.harbor import SAMPLES_DIR, load_task
from termgym.tasks.harbor.trial import run_trial
from tests.harbor.parity import HarborJudge, harbor_python

ROWS: list[dict] = []


@pytest.fixture(scope="module")
def harbor_py():
    python = harbor_python()
    yield python
    if os.environ.get("TERMGYM_PARITY_TABLE") and ROWS:
        with open(os.environ["TERMGYM_PARITY_TABLE"], "w") as fh:
            json.dump(ROWS, fh, indent=1)


@pytest.fixture(scope="module")
def harbor_judge(harbor_py):
    """Harbor's own judge, one process for the module (Harbor imports once, not once per case)."""
    judge = HarborJudge(harbor_py)
    yield judge
    judge.close()


def _writes(*lines: str) -> str:
    return "#!/bin/bash\n" + "\n".join(lines) + "\n"


V = "/logs/verifier"
#: name -> (task.toml extra, tests/test.sh): one per reward rule of Harbor 0.26.
REWARD_CASES = {
    "txt-one": ("", _writes(f"echo 1 > {V}/reward.txt")),
    "txt-zero": ("", _writes(f"echo 0 > {V}/reward.txt")),
    "txt-partial": ("", _writes(f"printf ' 0.25\\n' > {V}/reward.txt")),
    "txt-above-one": ("", _writes(f"echo 1.5 > {V}/reward.txt")),
    "txt-negative": ("", _writes(f"echo -1 > {V}/reward.txt")),
    "txt-empty": ("", _writes(f": > {V}/reward.txt")),
    "txt-word": ("", _writes(f"echo passed > {V}/reward.txt")),
    "txt-nan": ("", _writes(f"echo nan > {V}/reward.txt")),
    "no-reward-file": ("", _writes("echo tests ran")),
    "json-reward-and-metric": ("", _writes(f"echo '{{\"reward\": 0.5, \"checks\": 3}}' > {V}/reward.json")),
    "json-metrics-no-reward-key": ("", _writes(f"echo '{{\"accuracy\": 0.75, \"speed\": 1}}' > {V}/reward.json")),
    "json-non-numeric": ("", _writes(f"echo '{{\"reward\": 1, \"note\": \"ok\"}}' > {V}/reward.json")),
    "json-empty-object": ("", _writes(f"echo '{{}}' > {V}/reward.json")),
    "json-bool": ("", _writes(f"echo '{{\"reward\": true}}' > {V}/reward.json")),
    "json-invalid": ("", _writes(f"echo '{{\"reward\": ' > {V}/reward.json")),
    "json-wins-over-txt": ("", _writes(f"echo 1 > {V}/reward.txt", f"echo '{{\"score\": 0}}' > {V}/reward.json")),
    "reward-then-verifier-timeout": ("[verifier]\ntimeout_sec = 2\n", _writes(f"echo 1 > {V}/reward.txt", "sleep 30")),
    "shebang-python": ("", "#!/usr/bin/env python3\nopen('/logs/verifier/reward.txt', 'w').write('1')\n"),
    "verifier-env": ("[verifier.env]\nWEIGHT = \"0.5\"\n", _writes(f'echo "$WEIGHT" > {V}/reward.txt')),
}


def _termgym_verdict(grade: dict) -> dict:
    valid = grade.get("reward_valid", False)
    return {"rewards": grade.get("rewards") if valid else None, "valid": valid}


#: Cases needing Docker: the local backend cannot switch users.
DOCKER_REWARD_CASES = {
    "verifier-user": ("[verifier]\nuser = \"nobody\"\n",
                      _writes(f'[ "$(id -un)" = nobody ] && echo 1 > {V}/reward.txt || echo 0 > {V}/reward.txt')),
    "agent-user-oracle": ("[agent]\nuser = \"nobody\"\n",
                          _writes(f'[ "$(stat -c %U /tmp/by-agent)" = nobody ] && echo 1 > {V}/reward.txt || echo 0 > {V}/reward.txt')),
}


@pytest.mark.parametrize("name", sorted(REWARD_CASES))
def test_reward_rules_match_harbor(name, make_task, local_backend, harbor_judge):
    _reward_case(name, REWARD_CASES[name], make_task, local_backend, harbor_judge)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(DOCKER_REWARD_CASES))
def test_user_cases_match_harbor(name, make_task, harbor_judge):
    result = _reward_case(name, DOCKER_REWARD_CASES[name], make_task, "docker", harbor_judge)
    assert result.score == 1.0  # Harbor runs the verifier / the oracle as that user


def _reward_case(name, case, make_task, backend, harbor_judge):
    toml_extra, test_sh = case
    solve = "#!/bin/bash\ntouch /tmp/by-agent\n"
    task = load_task(make_task(name, toml='schema_version = "1.1"\n' + toml_extra, test_sh=test_sh, solve_sh=solve))
    result = run_trial(task, "oracle" if "oracle" in name else "nop", backend=backend)
    assert result.error is None, result.error
    grade = result.grade
    ours = _termgym_verdict(grade)
    theirs = harbor_judge([{"kind": "reward", "files": grade.get("reward_files", {}),
                                       "verifier_timed_out": grade.get("timed_out", False)}])[0]
    ROWS.append({"case": name, "harbor": theirs, "termgym": {**ours, "score": result.score}})
    assert ours["valid"] == theirs["valid"], (grade, theirs)
    assert ours["rewards"] == theirs["rewards"], (grade, theirs)
    if theirs["valid"]:
        rewards = theirs["rewards"]
        assert result.score == rewards.get("reward", next(iter(rewards.values())))
    else:
        assert result.score == 0.0 and grade["error"]
    return result


LOCAL_SAMPLES = sorted(tid for tid in os.listdir(SAMPLES_DIR) if load_task(SAMPLES_DIR / tid).local_ok)
DOCKER_SAMPLES = sorted(tid for tid in os.listdir(SAMPLES_DIR) if tid not in LOCAL_SAMPLES)


def _sample_parity(task_id: str, backend: str, harbor_judge) -> None:
    task = load_task(SAMPLES_DIR / task_id)
    for agent, want in (("oracle", 1.0), ("nop", 0.0)):
        result = run_trial(task, agent, backend=backend)
        assert result.error is None, result.error
        grade = result.grade
        if task.config.layout == "terminal-bench":  # no reward file: TB1's pytest verdict
            ROWS.append({"case": f"sample {task_id} ({agent})", "harbor": {"tb1": want},
                         "termgym": {"score": result.score}})
            assert result.score == want
            continue
        theirs = harbor_judge([{"kind": "reward", "files": grade.get("reward_files", {}),
                                           "verifier_timed_out": grade.get("timed_out", False)}])[0]
        ROWS.append({"case": f"sample {task_id} ({agent})", "harbor": theirs,
                     "termgym": {**_termgym_verdict(grade), "score": result.score}})
        assert theirs["valid"] and _termgym_verdict(grade) == {"rewards": theirs["rewards"], "valid": True}
        assert result.score == want


@pytest.mark.parametrize("task_id", LOCAL_SAMPLES)
def test_local_samples_match_harbor(task_id, local_backend, harbor_judge):
    _sample_parity(task_id, local_backend, harbor_judge)


@pytest.mark.docker
@pytest.mark.parametrize("task_id", DOCKER_SAMPLES)
def test_docker_samples_match_harbor(task_id, harbor_judge):
    _sample_parity(task_id, "docker", harbor_judge)


REPLIES = {
    "plain": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}]}',
    "prose-around": 'Sure: {"analysis": "a", "plan": "p", "commands": []} done',
    "unclosed": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 1}]',
    "bad-duration": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "x\\n", "duration": "long"}]}',
    "no-duration": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "x\\n"}]}',
    "long-duration": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "make\\n", "duration": 500}]}',
    "complete-without-commands": '{"analysis": "a", "plan": "p", "task_complete": true}',
    "complete-with-commands": '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "echo x\\n", "duration": 0.1}], "task_complete": true}',
    "complete-broken-commands": '{"analysis": "a", "plan": "p", "commands": [5], "task_complete": true}',
    "complete-as-string-yes": '{"analysis": "a", "plan": "p", "commands": [], "task_complete": "yes"}',
    "complete-as-string-maybe": '{"analysis": "a", "plan": "p", "commands": [], "task_complete": "maybe"}',
    "analysis-not-string": '{"analysis": 3, "plan": "p", "commands": []}',
    "commands-not-list": '{"analysis": "a", "plan": "p", "commands": "ls"}',
    "keystrokes-missing": '{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]}',
    "no-json": "I will now list the files.",
    "missing-plan": '{"analysis": "a", "commands": []}',
}


def test_terminus_reply_parsing_matches_harbor(harbor_judge):
    names = sorted(REPLIES)
    theirs = harbor_judge([{"kind": "reply", "text": REPLIES[n]} for n in names])
    for name, harbor in zip(names, theirs):
        try:
            reply = parse_reply(REPLIES[name])
            ours = {"error": False, "task_complete": reply["task_complete"],
                    "commands": [[k, d] for k, d in reply["commands"]]}
        except TerminusParseError:
            ours = {"error": True, "task_complete": None, "commands": None}
        ROWS.append({"case": f"reply {name}", "harbor": harbor, "termgym": ours})
        assert ours == harbor, name


# The verifier waits past the end of the agent's `sleep`: a shell that ran on after the deadline
# would have written done.txt by then, and the task would score 1 where Harbor scores 0.
LATE_CHECK_TEST_SH = """\
    #!/bin/bash
    sleep 3
    if grep -qx ok /app/done.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
    """


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_time_limit_is_a_deadline_inside_a_command(make_task, backend, request):
    """A reply still running at the agent timeout is cut there with its shell (the rest of its line
    never runs) and the verifier runs: Harbor scores 0. The default, persistent, shell."""
    if backend == "local":
        request.getfixturevalue("local_backend")
    task_dir = make_task("slow", toml='schema_version = "1.1"\n[agent]\ntimeout_sec = 3\n',
                         test_sh=LATE_CHECK_TEST_SH)
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=backend)
    try:
        env.reset(options={"task_id": "slow"})
        assert env.unwrapped.sandbox.mode == "persistent"
        started = time.monotonic()
        _, reward, terminated, truncated, info = env.step("```bash\nsleep 4; echo ok > /app/done.txt\n```")
        took = time.monotonic() - started
    finally:
        env.close()
    assert truncated and not terminated and info["end_reason"] == "time_limit"
    assert reward == 0.0 and info["grade"]["reward_valid"] is True, info["grade"]
    assert took < 20  # ended at the 3 s deadline (+ the verifier's 3 s), not after a longer command
    ROWS.append({"case": f"agent timeout inside a command (sleep, timeout 3; {backend}, persistent shell)",
                 "harbor": {"score": 0}, "termgym": {"score": reward}})


def test_terminus_deadline_and_confirming_reply_runs_its_commands(make_task, local_backend):
    task_dir = make_task("t", toml='schema_version = "1.1"\n[agent]\ntimeout_sec = 60\n')
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=local_backend, protocol="terminus",
                   time_limit=60)
    try:
        env.reset(options={"task_id": "t"})
        done = {"analysis": "a", "plan": "p", "commands": [], "task_complete": True}
        obs, *_ = env.step(json.dumps(done))
        assert "Are you sure" in obs
        # The confirming reply carries the work: Terminus-2 runs it before ending, so it scores 1.
        done["commands"] = [{"keystrokes": "echo ok > /app/done.txt\n", "duration": 1}]
        _, reward, terminated, _, info = env.step(json.dumps(done))
    finally:
        env.close()
    assert terminated and reward == 1.0, info["grade"]
    ROWS.append({"case": "terminus: commands in the confirming reply", "harbor": {"score": 1},
                 "termgym": {"score": reward}})


TB_TESTS = """\
import pytest

def test_passes():
    assert True

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

@pytest.mark.xfail
def test_expected_failure():
    assert False
"""
#: name -> (test_outputs.py, run-tests.sh or None for the default, max_test_timeout_sec)
TB_CASES = {
    "pass-skip-xfail": (TB_TESTS, None, 60),
    "one-failure": (TB_TESTS + "\ndef test_fails():\n    assert 1 == 2\n", None, 60),
    "xpass": ("import pytest\n\n@pytest.mark.xfail\ndef test_x():\n    assert True\n", None, 60),
    "no-summary": (TB_TESTS, "#!/bin/bash\npython3 -m pytest $TEST_DIR/test_outputs.py -q\n", 60),
    "test-timeout": (TB_TESTS, "#!/bin/bash\nsleep 30\n", 2),
    "empty-summary": (TB_TESTS, "#!/bin/bash\necho '=== short test summary info ==='\n", 60),
}


@pytest.mark.parametrize("name", sorted(TB_CASES))
def test_terminal_bench_1_grading_matches_its_parser(name, tasks_root, write_file, local_backend, harbor_judge):
    tests, run_tests, timeout = TB_CASES[name]
    task_dir = tasks_root / name
    write_file(task_dir / "task.yaml", f"instruction: Do nothing.\nmax_test_timeout_sec: {timeout}\n")
    write_file(task_dir / "Dockerfile", "FROM termgym/base:bookworm\nWORKDIR /app\n")
    write_file(task_dir / "tests" / "test_outputs.py", tests)
    if run_tests:
        write_file(task_dir / "run-tests.sh", run_tests)
    result = run_trial(load_task(task_dir), "nop", backend=local_backend)
    assert result.error is None, result.error
    grade = result.grade
    theirs = harbor_judge([{"kind": "tb1", "output": grade["output"], "timed_out": grade["timed_out"]}])[0]
    ROWS.append({"case": f"TB1 {name}", "harbor": {"tb1_resolved": theirs["resolved"]},
                 "termgym": {"score": result.score}})
    assert grade["passed"] == theirs["resolved"] and result.score == float(theirs["resolved"])
    if theirs["tests"] is not None:
        ours = {k: "passed" if v in ("PASSED", "XFAIL", "SKIPPED") else "failed" for k, v in grade["tests"].items()}
        assert ours == theirs["tests"]


def test_terminus_prompts_are_harbors_own_when_harbor_is_installed(harbor_py):
    """termgym with the [harbor] extra (run in Harbor's venv) sends Harbor's bytes, as one user message."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([harbor_py, str(Path(__file__).parent / "parity" / "prompt_check.py")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["prompt_source"].startswith("harbor 0.26") and out["system"] == ""
    assert out["termgym_prompt"] == out["harbor_prompt"] and "Create /app/done.txt" in out["termgym_prompt"]
    assert out["termgym_confirm"] == out["harbor_confirm"]
    ROWS.append({"case": "terminus prompt + confirmation bytes (harbor installed)", "harbor": {"score": 1},
                 "termgym": {"score": float(out["termgym_prompt"] == out["harbor_prompt"])}})
