"""Each reward event fires when it should and not when it should not (real sandbox, real commands)."""

from __future__ import annotations

import asyncio

import pytest

from termgym import CommandTask, Grade, ListSuite
from termgym.env import TerminalEnv, Truncate, areset, astep
from termgym.wrappers.rewards import RECONCILE, ProcessReward, TestFinder
from tests.docker_engine import require_docker


def events(info) -> dict[str, float]:
    return {e["event"]: e["reward"] for e in info["reward_events"]}


def run(env: ProcessReward, *messages: str) -> list[dict]:
    """Step through ``messages`` and return each step's events."""
    out = []
    for message in messages:
        _, reward, _, _, info = env.step(message)
        assert reward == pytest.approx(sum(e["reward"] for e in info["reward_events"]))
        out.append(events(info))
    return out


@pytest.fixture
def wrapped(calc_env):
    def make(task=None, **kwargs):
        env = ProcessReward(calc_env(task, max_steps=kwargs.pop("max_steps", 20), **kwargs))
        env.reset(seed=0)
        return env
    return make


def test_valid_command_and_success(wrapped, cmd):
    env = wrapped()
    ok, failing, repeated, text = run(env, cmd("ls"), cmd("false"), cmd("ls"), "I will now run ls.")
    assert ok == {"valid_command": 0.01, "command_success": 0.02}
    assert failing == {"valid_command": 0.01}  # ran, exit 1: no success
    assert repeated == {}  # the same command again earns nothing
    assert text == {"invalid_format": -0.05}


def test_repeated_commands_pay_when_the_table_says_so(calc_env, cmd):
    env = ProcessReward(calc_env(), {"repeat_commands_pay": True})
    env.reset(seed=0)
    assert run(env, cmd("ls"), cmd("ls")) == [{"valid_command": 0.01, "command_success": 0.02}] * 2


def test_invalid_format_fires_for_each_malformed_message(wrapped, cmd):
    env = wrapped()
    two_blocks = cmd("ls") + "\n" + cmd("pwd")
    assert run(env, "no block", two_blocks, "```bash\n\n```") == [{"invalid_format": -0.05}] * 3
    assert "invalid_format" not in run(env, cmd("pwd"))[0]


def test_timeout_fires_only_when_the_command_is_killed(wrapped, cmd):
    env = wrapped(command_timeout=0.5)
    slow, fast = run(env, cmd("sleep 5"), cmd("sleep 0.1"))
    assert slow == {"valid_command": 0.01, "timeout": -0.02}
    assert fast == {"valid_command": 0.01, "command_success": 0.02}


def test_code_modified_fires_on_content_changes_only(wrapped, cmd):
    env = wrapped()
    steps = run(
        env,
        cmd("cat src/calc.py"),                              # read: no
        cmd("touch src/calc.py"),                            # mtime only: no
        cmd("cp src/calc.py /tmp/c && cp /tmp/c src/calc.py"),  # same bytes rewritten: no
        cmd("echo 'x = 1' > src/new_module.py"),             # a new, untracked file: no
        cmd("echo '# edited' >> tests/test_calc.py"),         # the tests: never
        cmd("sed -i 's/a - b/a + b/' src/calc.py"),          # a real edit: yes
        cmd("true"),                                         # nothing changed since: no
        cmd("rm README.md && echo 'print(1)' >> src/new_module.py"),  # README is not source; new file untracked
        cmd("mv src/calc.py src/calc2.py"),                  # a tracked file vanished: yes
    )
    fired = [i for i, s in enumerate(steps) if "code_modified" in s]
    assert fired == [5, 8], steps
    assert steps[5]["code_modified"] == 0.03


def test_code_modified_names_the_files(wrapped, cmd):
    env = wrapped()
    _, _, _, _, info = env.step(cmd("sed -i 's/a - b/a + b/' src/calc.py"))
    [event] = [e for e in info["reward_events"] if e["event"] == "code_modified"]
    assert event["files"] == ["src/calc.py"]


def test_code_modified_is_capped(wrapped, cmd):
    env = wrapped(max_steps=30)
    steps = run(env, *[cmd(f"echo '# {i}' >> src/calc.py") for i in range(8)])
    paid = [s["code_modified"] for s in steps]
    assert paid == [0.03] * 5 + [0.0] * 3


def test_agent_cannot_fool_the_snapshot_with_shell_functions(wrapped, cmd):
    """A persistent-shell function named find/md5sum must not hide or fake modifications."""
    env = wrapped()
    run(env, cmd("find() { echo; }; md5sum() { echo; }; cd tests"))
    assert "code_modified" in run(env, cmd("sed -i 's/a - b/a + b/' ../src/calc.py"))[0]


@pytest.mark.parametrize("command, how", [
    ("ls tests", "listed"),
    ("cat tests/test_calc.py", "read"),
    ("grep -rn 'def test' .", "listed"),
    ("python3 -m pytest -q -p no:cacheprovider tests", "ran"),
    ("cd tests && python3 -m pytest -q -p no:cacheprovider", "ran"),
])
def test_tests_discovered_fires(wrapped, command, how, cmd):
    env = wrapped()
    _, _, _, _, info = env.step(cmd(command))
    [event] = [e for e in info["reward_events"] if e["event"] == "tests_discovered"]
    assert event["how"] == how and event["reward"] == 0.02


@pytest.mark.parametrize("command", [
    "ls", "cat src/calc.py", "cat README.md", "echo tests", "cat tests/test_nothing.py", "ls /tmp",
])
def test_tests_discovered_does_not_fire(wrapped, command, cmd):
    env = wrapped()
    _, _, _, _, info = env.step(cmd(command))
    assert "tests_discovered" not in events(info)


def test_tests_discovered_pays_once(wrapped, cmd):
    env = wrapped()
    first, second = run(env, cmd("ls tests"), cmd("cat tests/test_calc.py"))
    assert first["tests_discovered"] == 0.02 and "tests_discovered" not in second


def test_tests_discovered_without_metadata_uses_test_file_names(wrapped, cmd, calc_task):
    env = wrapped(calc_task(metadata={}))
    assert "tests_discovered" not in run(env, cmd("ls"))[0]
    assert run(env, cmd("ls tests"))[0]["tests_discovered"] == 0.02


def test_test_paths_metadata_restricts_what_counts():
    """With test_paths given, a test-looking file outside them is not 'the task's tests'."""
    files = ["src/a.py", "tests/test_a.py", "scratch/test_mine.py", "tests/__init__.py", "src/__init__.py"]
    finder = TestFinder(["tests/test_a.py", "tests/__init__.py"], files, "make check")
    assert finder.check("ls scratch", "test_mine.py\n", 0) is None
    assert finder.check("ls src", "__init__.py\na.py\n", 0) is None  # an ambiguous basename is not enough
    assert finder.check("ls tests", "__init__.py\ntest_a.py\n", 0)["how"] == "listed"
    assert finder.check("make   check", "", 2)["how"] == "ran"
    assert finder.check("pytest", "bash: pytest: command not found", 127) is None
    assert finder.check("cat pytest.ini", "", 0) is None


def test_outcome_all_tests_pass(wrapped, cmd, submit):
    env = wrapped()
    run(env, cmd("sed -i 's/a - b/a + b/' src/calc.py"))
    _, reward, terminated, _, info = env.step(submit)
    # CommandTask grades have no target tests: the score is the progress, and it keeps all shaping
    assert terminated and events(info) == {"target_tests": 1.0} and reward == 1.0
    assert info["env_reward"] == 1.0
    assert info["process_reward"]["return"] == pytest.approx(0.03 + 0.03 + 1.0)


def test_seed000_outcome_all_tests_pass(calc_env, cmd, submit):
    env = ProcessReward(calc_env(), table="seed000")
    env.reset(seed=0)
    run(env, cmd("sed -i 's/a - b/a + b/' src/calc.py"))
    _, reward, terminated, _, info = env.step(submit)
    assert terminated and events(info) == {"all_tests_pass": 1.0} and reward == 1.0
    assert info["process_reward"]["return"] == pytest.approx(0.03 + 0.03 + 1.0)


def test_outcome_without_a_fix_earns_nothing(wrapped, submit):
    env = wrapped()
    _, reward, _, _, info = env.step(submit)
    assert info["reward_events"] == [{"event": "target_tests", "reward": 0.0, "share": 0.0, "how": "score",
                                      "count": 1, "capped": False}]
    assert reward == 0.0


def test_seed000_outcome_without_a_fix_is_partial_with_zero_rate(calc_env, submit):
    env = ProcessReward(calc_env(), table="seed000")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(submit)
    assert info["reward_events"] == [{"event": "partial_pass", "reward": 0.0, "count": 1, "capped": False,
                                      "pass_rate": 0.0}]
    assert reward == 0.0


def test_shaping_without_progress_is_clawed_back_on_the_last_step(wrapped, cmd, submit):
    env = wrapped()
    paid = sum(float(env.step(cmd(c))[1]) for c in ("ls", "ls tests", "echo '# x' >> src/calc.py"))
    assert paid == pytest.approx(0.03 + 0.05 + 0.06)
    _, reward, _, _, info = env.step(submit)
    assert events(info) == {"target_tests": 0.0, "clawback": pytest.approx(-paid)}
    assert reward == pytest.approx(-paid)
    assert info["process_reward"]["return"] == pytest.approx(0.0)
    assert info["process_reward"]["shaping"] == pytest.approx(0.0)


def test_penalties_are_not_clawed_back(wrapped, cmd, submit):
    env = wrapped()
    run(env, "no block here", cmd("ls"))
    _, _, _, _, info = env.step(submit)
    assert info["process_reward"]["return"] == pytest.approx(-0.05)


def test_write_revert_cycles_pay_code_modified_once(wrapped, cmd):
    env = wrapped()
    write, revert = cmd("sed -i 's/a - b/a + b/' src/calc.py"), cmd("sed -i 's/a + b/a - b/' src/calc.py")
    steps = run(env, write, revert, write + " ", revert + " ", write + "  ")
    assert [s.get("code_modified", 0.0) for s in steps] == [0.03, 0.0, 0.0, 0.0, 0.0]


class TargetGradedTask(CommandTask):
    """Graded like SWE-SYNTH: target (fail-to-pass) tests among all required tests."""

    def __init__(self, *args, details, **kwargs):
        super().__init__(*args, **kwargs)
        self.details = details

    def grade(self, ctx):
        passed = self.details["all_result"].split("/")[0] == self.details["all_result"].split("/")[1]
        return Grade(score=float(passed), passed=passed, details={**self.details, "all_passed": passed})


@pytest.mark.parametrize("target, everything, outcome, regressions", [
    ("3/3", "10/10", 1.0, 0.0),     # solved
    ("0/3", "7/10", 0.0, 0.0),      # the buggy state: nothing gained, nothing broken
    ("2/3", "9/10", 2 / 3, 0.0),    # two of three target tests fixed, no regression
    ("3/3", "9/10", 1 - 1 / 7, 1 / 7),  # fixed, but one of the 7 other tests broke
    ("0/3", "0/10", 0.0, 1.0),      # everything broken: the regressions cannot push below 0
    ("1/3", "1/10", 0.0, 1.0),      # one fixed, all others broken: floored at 0
])
def test_progress_outcome_from_target_and_regressions(calc_env, cmd, submit, target, everything, outcome,
                                                       regressions):
    task = TargetGradedTask("t", "anything", grade_command="true", details={"target_result": target,
                                                                             "all_result": everything})
    env = ProcessReward(calc_env(task))
    env.reset(seed=0)
    _, reward, _, _, info = env.step(submit)
    got = {e["event"]: e for e in info["reward_events"]}
    assert got["target_tests"]["target_result"] == target
    assert got["regressions"]["share"] == pytest.approx(regressions)
    assert got["target_tests"]["reward"] + got["regressions"]["reward"] == pytest.approx(outcome)
    # A failed grade keeps at most failed_cap (0.3) of the solved-task reward: the rest is reconciled.
    solved = target.split("/")[0] == target.split("/")[1] and everything.split("/")[0] == everything.split("/")[1]
    assert reward == pytest.approx(outcome if solved else min(outcome, 0.3))
    assert (RECONCILE in got) == (not solved and outcome > 0.3)
    # Without the reconciliation the failed grade's progress would all be paid.
    env = ProcessReward(calc_env(task), {"failed_cap": None}, allow_farmable=True)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(submit)
    assert reward == pytest.approx(outcome) and RECONCILE not in {e["event"] for e in info["reward_events"]}


class HalfGradedTask(CommandTask):
    """Graded like SWE-SYNTH: a pass rate from the test counts."""

    def grade(self, ctx):
        return Grade(score=0.0, passed=False, details={"all_passed": False, "all_result": "3/6", "pass_rate": 0.5})


def test_seed000_outcome_partial_pass_uses_the_grade_pass_rate(calc_env, cmd):
    task = HalfGradedTask("half", "anything", grade_command="true")
    env = ProcessReward(calc_env(task, max_steps=2), table="seed000")
    env.reset(seed=0)
    env.step(cmd("ls"))
    _, reward, _, truncated, info = env.step(cmd("pwd"))  # max_steps reached: truncated, graded
    assert truncated
    [outcome] = [e for e in info["reward_events"] if e["event"] == "partial_pass"]
    assert outcome["pass_rate"] == 0.5 and outcome["reward"] == 0.25
    # pwd's shaping is still paid on the last step; with ls's it takes the failed episode past 0.3
    [reconcile] = [e for e in info["reward_events"] if e["event"] == RECONCILE]
    assert reconcile["kept"] == pytest.approx(0.25 + 0.06) and reconcile["limit"] == 0.3
    assert reward == pytest.approx(0.25 + 0.03 - 0.01)
    assert info["process_reward"]["return"] == pytest.approx(0.3)


def test_a_truncation_requested_from_outside_settles_like_a_last_step(wrapped, cmd):
    env = wrapped()
    paid = sum(float(env.step(cmd(c))[1]) for c in ("ls", "pwd"))
    _, reward, terminated, truncated, info = env.step(Truncate("context_limit"))
    assert truncated and not terminated
    assert info["end_reason"] == "context_limit" and info["env_reward"] == 0.0
    assert reward == pytest.approx(-paid) and info["process_reward"]["return"] == pytest.approx(0.0)
    assert asyncio.run(_truncate_after_fix(wrapped, cmd)) == pytest.approx(1.0)


async def _truncate_after_fix(wrapped, cmd):
    env = wrapped()
    await astep(env, cmd("sed -i 's/a - b/a + b/' src/calc.py"))
    *_, info = await astep(env, Truncate("context_limit"))
    return info["process_reward"]["outcome"]


class NoRmTask(CommandTask):
    def check_command(self, command):
        return "rm is not allowed here" if command.startswith("rm ") else None


def test_refused_and_submission_steps_earn_no_shaping(calc_env, cmd, submit):
    task = NoRmTask("norm", "anything", grade_command="true", files={"a.py": "x = 1\n"})
    env = ProcessReward(calc_env(task))
    env.reset(seed=0)
    assert run(env, cmd("rm a.py")) == [{}]
    _, _, _, _, info = env.step(submit)
    assert [e["event"] for e in info["reward_events"]] == ["target_tests"]


def test_toolcall_protocol(calc_env):
    import json

    env = ProcessReward(calc_env(protocol="toolcall"))
    env.reset(seed=0)
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "ls tests"})}}]}
    _, _, _, _, info = env.step(call)
    assert events(info) == {"valid_command": 0.01, "command_success": 0.02, "tests_discovered": 0.02}
    _, _, _, _, info = env.step({"role": "assistant", "content": "plain text"})
    assert events(info) == {"invalid_format": -0.05}


def test_works_through_gym_make_and_async(cmd, calc_task):
    import gymnasium as gym

    from termgym import register_suite

    register_suite("termgym-test/CalcRewards-v0", ListSuite([calc_task()], name="calc"), max_steps=5)
    env = ProcessReward(gym.make("termgym-test/CalcRewards-v0"))

    async def play():
        await areset(env, seed=0)
        return await astep(env, cmd("ls tests"))

    try:
        _, reward, _, _, info = asyncio.run(play())
    finally:
        env.close()
    assert reward == pytest.approx(0.05) and "tests_discovered" in events(info)


def test_snapshot_failure_is_reported_and_disables_code_detection(calc_env, cmd):
    """A workspace the snapshot cannot read yields a warning, not a crash."""
    env = ProcessReward(calc_env(), snapshot_timeout=0.000001)
    _, info = env.reset(seed=0)
    assert "workspace snapshot" in info["reward_warnings"][0]
    _, _, _, _, info = env.step(cmd("sed -i 's/a - b/a + b/' src/calc.py"))
    assert "code_modified" not in events(info)


def test_env_without_wrapper_is_untouched(cmd, calc_task):
    env = TerminalEnv(ListSuite([calc_task()]), max_steps=3)
    try:
        env.reset(seed=0)
        _, reward, _, _, info = env.step(cmd("ls"))
        assert reward == 0.0 and "reward_events" not in info
    finally:
        env.close()


@pytest.mark.docker
def test_detection_is_the_same_on_the_docker_backend(calc_env, cmd):
    """The snapshots are plain commands in the sandbox: the Docker backend sees the same events."""
    require_docker()
    env = ProcessReward(calc_env(backend="docker", max_steps=10))
    env.reset(seed=0)
    steps = run(env, cmd("ls tests"), cmd("touch src/calc.py"), cmd("sed -i 's/a - b/a + b/' src/calc.py"))
    assert steps == [{"valid_command": 0.01, "command_success": 0.02, "tests_discovered": 0.02},
                     {"valid_command": 0.01, "command_success": 0.02},
                     {"valid_command": 0.01, "command_success": 0.02, "code_modified": 0.03}]
