"""Harbor run semantics on the local backend: reward files, timeouts, what the agent can see."""

from __future__ import annotations

import json
import time

import gymnasium as gym
import pytest

import termgym  # noqa: F401 - registers the ids
from termgym.tasks.harbor import load_task
from termgym.tasks.harbor.trial import run_trial
from termgym.tasks.harbor.verifier import RewardError, combine_rewards, parse_pytest_summary

SUBMIT = "THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


def bash(command: str) -> str:
    return f"THOUGHT: run it\n```bash\n{command}\n```"


# -- reward rules (pure) -------------------------------------------------------------------------


def test_reward_json_wins_and_keeps_every_metric():
    assert combine_rewards('{"reward": 0.25, "x": 1}', "1").score == 0.25
    only_json = combine_rewards('{"accuracy": 0.5}', "0.75")  # reward.txt is not read beside reward.json
    assert only_json.score == 0.5 and only_json.rewards == {"accuracy": 0.5}
    several = combine_rewards('{"a": 1, "b": 0}', None)  # no averaging: each metric kept, the first reported
    assert several.score == 1.0 and several.rewards == {"a": 1.0, "b": 0.0}
    assert combine_rewards(None, " 1.0\n").score == 1.0
    assert combine_rewards(None, "1.5").score == 1.5 and combine_rewards(None, "-1").score == -1.0  # no clamping


@pytest.mark.parametrize("bad", ['[1, 2]', "{", "", "{}", '{"note": "x"}', '{"reward": 1, "note": "text"}',
                                 '{"reward": null}', '{"reward": NaN}'])
def test_bad_reward_json(bad):
    with pytest.raises(RewardError):
        combine_rewards(bad, "1")


def test_bad_reward_txt_and_missing():
    with pytest.raises(RewardError, match="one number"):
        combine_rewards(None, "passed")
    with pytest.raises(RewardError, match="empty"):
        combine_rewards(None, "")
    with pytest.raises(RewardError, match="neither"):
        combine_rewards(None, None)


def test_tb1_skipped_counts_as_passed_and_names_the_skip():
    output = ("=== short test summary info ===\nPASSED t.py::a\nSKIPPED [1] t.py:7: no gpu\n"
              "FAILED t.py::b - boom\n=== 1 failed ===\n")
    assert parse_pytest_summary(output) == {"a": "PASSED", "[1] t.py:7: no gpu": "SKIPPED", "b": "FAILED"}


def test_pytest_summary_only_counts_the_summary():
    output = "PASSED fake line printed by a test\n=== short test summary info ===\nPASSED t.py::a\nFAILED t.py::b - boom\n"
    assert parse_pytest_summary(output) == {"a": "PASSED", "b": "FAILED"}
    assert parse_pytest_summary("1 passed") is None


# -- the verifier in a real sandbox --------------------------------------------------------------


def test_missing_reward_file_is_no_valid_reward(make_task, local_backend):
    task = load_task(make_task("t", test_sh="#!/bin/bash\necho 'forgot the reward'\n"))
    result = run_trial(task, "oracle", backend=local_backend)
    assert result.score == 0.0 and "neither /logs/verifier/reward.txt nor" in result.grade["error"]
    assert result.grade["reward_valid"] is False
    assert "forgot the reward" in result.grade["output"]


def test_reward_json_metrics_verifier_env_workdir_and_shebang(make_task, local_backend):
    toml = 'schema_version = "1.1"\n[verifier.env]\nWEIGHT = "0.5"\n'
    # A Python test script: Harbor executes it, so its shebang decides the interpreter.
    test_sh = """\
        #!/usr/bin/env python3
        import json, os
        print("cwd=" + os.getcwd())
        json.dump({"reward": float(os.environ["WEIGHT"]), "checks": 3}, open("/logs/verifier/reward.json", "w"))
        """
    task = load_task(make_task("t", toml=toml, test_sh=test_sh))
    result = run_trial(task, "nop", backend=local_backend)
    grade = result.grade
    assert result.score == 0.5 and grade["passed"] is False and grade["reward_source"] == "reward.json"
    assert grade["rewards"] == {"reward": 0.5, "checks": 3.0} and grade["reward_valid"] is True
    assert "cwd=/app" in grade["output"]


def test_reward_written_before_a_verifier_timeout_does_not_count(make_task, local_backend):
    toml = 'schema_version = "1.1"\n[verifier]\ntimeout_sec = 2\n'
    test_sh = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nsleep 30\n"
    result = run_trial(load_task(make_task("t", toml=toml, test_sh=test_sh)), "nop", backend=local_backend)
    assert result.score == 0.0 and result.grade["reward_valid"] is False and "timed out" in result.grade["error"]


def test_environment_workdir_overrides_the_image(make_task, local_backend):
    toml = 'schema_version = "1.1"\n[environment]\nworkdir = "/srv/work"\n'
    test_sh = '#!/bin/bash\n[ "$(pwd)" = /srv/work ] && [ -f /srv/work/done.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'
    solve = "#!/bin/bash\ntouch done.txt\n"  # relative: it must land in the workdir
    task = load_task(make_task("t", toml=toml, test_sh=test_sh, solve_sh=solve))
    assert task.workdir == "/srv/work"
    assert run_trial(task, "oracle", backend=local_backend).score == 1.0


def test_tests_arrive_only_after_the_agent_phase_and_planted_rewards_are_removed(make_task, local_backend):
    task_dir = make_task("t", test_sh="#!/bin/bash\n[ -f /tests/secret.txt ] && echo 0.5 > /logs/verifier/reward.txt\n",
                         files={"tests/secret.txt": "hidden"})
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=local_backend)
    env.reset(options={"task_id": "t"})
    obs, *_ = env.step(bash("ls /tests 2>&1; ls -d /logs/verifier && echo 1 > /logs/verifier/reward.txt"))
    assert "No such file" in obs and "/logs/verifier" in obs
    _, reward, terminated, _, info = env.step(SUBMIT)
    assert terminated and reward == 0.5  # the verifier's reward, not the agent's planted 1
    env.close()


def test_agent_timeout_is_followed_by_grading(make_task, local_backend):
    task_dir = make_task("t")
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=local_backend, time_limit=0.5)
    env.reset(options={"task_id": "t"})
    _, reward, terminated, truncated, info = env.step(bash("echo ok > /app/done.txt; sleep 1"))
    assert truncated and not terminated and info["end_reason"] == "time_limit"
    assert reward == 1.0 and info["grade"]["reason"] == "time_limit"  # graded on the work done
    env.close()


def test_oracle_over_the_agent_timeout_still_gets_graded(make_task, local_backend):
    task = load_task(make_task("t", solve_sh="#!/bin/bash\necho ok > /app/done.txt\nsleep 30\n"))
    result = run_trial(task, "oracle", backend=local_backend, agent_timeout=1.0)
    assert result.agent_timed_out and result.grade["reason"] == "time_limit"
    assert result.score == 1.0


def test_hanging_verifier_times_out_and_the_episode_ends(make_task, local_backend):
    toml = 'version = "1.0"\n[verifier]\ntimeout_sec = 1.5\n'
    task_dir = make_task("t", toml=toml, test_sh="#!/bin/bash\necho starting\nsleep 600\necho 1 > /logs/verifier/reward.txt\n")
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=local_backend)
    env.reset(options={"task_id": "t"})
    started = time.monotonic()
    _, reward, terminated, _, info = env.step(SUBMIT)
    assert time.monotonic() - started < 30
    assert terminated and reward == 0.0
    assert info["grade"]["timed_out"] is True and "timed out after 1.5 s" in info["grade"]["error"]
    env.close()


def test_terminal_bench_task_is_graded_by_its_pytest_summary(tasks_root, write_file, local_backend):
    task_dir = tasks_root / "tb"
    write_file(task_dir / "task.yaml", "instruction: Write /app/n.txt with 3.\n")
    write_file(task_dir / "Dockerfile", "FROM termgym/base:bookworm\nWORKDIR /app\n")
    write_file(task_dir / "tests" / "test_outputs.py", """\
        from pathlib import Path
        def test_exists():
            assert Path("/app/n.txt").exists()
        def test_value():
            assert Path("/app/n.txt").read_text().strip() == "3"
        """)
    write_file(task_dir / "solution.yaml", "- command: echo 3 > /app/n.txt\n")
    task = load_task(task_dir)
    good = run_trial(task, "oracle", backend=local_backend)
    assert good.score == 1.0 and good.grade["tests_passed"] == 2, good
    bad = run_trial(task, "nop", backend=local_backend)
    assert bad.score == 0.0 and bad.grade["tests_total"] == 2


def test_grade_details_are_json_serialisable(make_task, local_backend):
    result = run_trial(load_task(make_task("t")), "oracle", backend=local_backend)
    json.dumps(result.to_dict())
    assert result.score == 1.0 and result.error is None


def test_separate_verifier_gets_a_fresh_environment_and_the_artifacts(make_task, local_backend):
    toml = 'schema_version = "1.1"\nartifacts = ["/app/result"]\n[verifier]\nenvironment_mode = "separate"\n'
    solve = "#!/bin/bash\necho ok > /app/done.txt\nmkdir -p /app/result && echo 42 > /app/result/answer\necho hi > /logs/artifacts/note\n"
    # The agent's /app/done.txt must not be there; the published artifacts must.
    test_sh = """\
        #!/bin/bash
        if [ ! -e /app/done.txt ] && [ "$(cat /app/result/answer)" = 42 ] && [ "$(cat /logs/artifacts/note)" = hi ]; then
          echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
        """
    task = load_task(make_task("t", toml=toml, test_sh=test_sh, solve_sh=solve))
    assert task.config.verifier_separate and task.config.artifacts == ["/app/result"]
    result = run_trial(task, "oracle", backend=local_backend)
    assert result.score == 1.0 and result.grade["verifier_environment"] == "separate", result.grade


def test_unsupported_features_are_refused_by_name(make_task):
    from termgym.tasks.harbor import TaskFormatError

    cases = {
        "step-separate": ('schema_version = "1.1"\n[[steps]]\nname = "one"\n[steps.verifier]\nenvironment_mode = "separate"\n',
                          "separate verifier environment per step"),
        "os": ('schema_version = "1.1"\n[environment]\nos = "windows"\n', "os = 'windows'"),
        "gpus": ('schema_version = "1.1"\n[environment]\ngpus = 1\n', "gpus"),
        "collect": ('schema_version = "1.1"\n[[verifier.collect]]\ncommand = "true"\n', "verifier.collect"),
    }
    for name, (toml, feature) in cases.items():
        with pytest.raises(TaskFormatError, match="does not run") as info:
            load_task(make_task(name, toml=toml))
        assert feature in str(info.value)
    compose = make_task("compose", files={"environment/docker-compose.yaml": "services: {}\n"})
    with pytest.raises(TaskFormatError, match="Docker Compose"):
        load_task(compose)


def test_list_survives_an_absent_prebuilt_image(make_task, tasks_root, capsys):
    from termgym.cli import main

    make_task("prebuilt", toml='schema_version = "1.1"\n[environment]\ndocker_image = "termgym-absent/image:1"\n',
              dockerfile=None)
    assert main(["harbor", "list", str(tasks_root)]) == 0
    assert "prebuilt" in capsys.readouterr().out


@pytest.mark.docker
def test_prebuilt_image_absent_and_copy_from_registry_are_named(make_task):
    from termgym.sandbox.base import BackendUnavailable

    absent = load_task(make_task("prebuilt", dockerfile=None,
                                 toml='schema_version = "1.1"\n[environment]\ndocker_image = "termgym-absent/image:1"\n'))
    # Not on the host, so it is pulled; the pull fails (no such image in any reachable registry) and is named.
    with pytest.raises(BackendUnavailable, match=r"'prebuilt': cannot pull its prebuilt image termgym-absent/image:1 "
                                                 r"\(\[environment\] docker_image in .*task.toml\).*docker pull"):
        absent.sandbox_spec()
    copy_from = load_task(make_task("copyfrom", dockerfile=(
        "FROM termgym/base:bookworm\nCOPY --from=ghcr.io/astral-sh/uv:0.5 /uv /bin/uv\nWORKDIR /app\n")))
    for _ in range(2):  # the second try (nop after oracle) reports the failure without rebuilding
        result = run_trial(copy_from, "nop", backend="docker")
        assert "COPY --from=ghcr.io/astral-sh/uv:0.5" in result.error and "local backend" not in result.error
    assert "not rebuilt" in result.error


def _multi_step_task(make_task, write_file, strategy: str, min_reward: str = ""):
    toml = (f'schema_version = "1.1"\nmulti_step_reward_strategy = "{strategy}"\n'
            f'[[steps]]\nname = "one"\n{min_reward}\n[[steps]]\nname = "two"\n')
    task_dir = make_task("multi", toml=toml, solve_sh=None)
    (task_dir / "instruction.md").unlink()
    for name, text in (("one", "first"), ("two", "second")):
        write_file(task_dir / "steps" / name / "instruction.md", f"Write {text}.txt")
        write_file(task_dir / "steps" / name / "solution" / "solve.sh", f"#!/bin/bash\ntouch {text}.txt\n", executable=True)
    # step one's own test: 1 if first.txt exists; step two uses the shared tests/test.sh
    write_file(task_dir / "steps" / "one" / "tests" / "test.sh",
               "#!/bin/bash\n[ -f /app/first.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
               executable=True)
    write_file(task_dir / "tests" / "test.sh",
               "#!/bin/bash\n[ -f /app/second.txt ] && echo '{\"reward\": 1, \"extra\": 0.5}' > /logs/verifier/reward.json "
               "|| echo '{\"reward\": 0}' > /logs/verifier/reward.json\n", executable=True)
    write_file(task_dir / "steps" / "two" / "workdir" / "setup.sh", "#!/bin/bash\necho staged > staged.txt\n")
    return load_task(task_dir)


def test_multi_step_task_runs_each_step_and_averages_per_key(make_task, write_file, local_backend):
    task = _multi_step_task(make_task, write_file, "mean")
    assert [s.name for s in task.steps] == ["one", "two"] and task.instruction == "Write first.txt"
    oracle = run_trial(task, "oracle", backend=local_backend)
    assert oracle.error is None and oracle.score == 1.0
    # per-key mean over the two steps; "extra" is missing from step one and counts 0 there
    assert oracle.grade["rewards"] == {"reward": 1.0, "extra": 0.25}
    nop = run_trial(task, "nop", backend=local_backend)
    assert nop.score == 0.0 and nop.grade["reward_valid"] is True and len(nop.grade["steps"]) == 2
    with pytest.raises(ValueError, match="multi-step tasks run with"):
        gym.make("termgym/Harbor-v0", tasks_dir=task.task_dir.parent, backend=local_backend).reset(
            options={"task_id": "multi"})


def test_multi_step_min_reward_stops_early_and_final_strategy(make_task, write_file, local_backend):
    task = _multi_step_task(make_task, write_file, "final", min_reward="min_reward = 1.0")
    nop = run_trial(task, "nop", backend=local_backend)
    assert len(nop.grade["steps"]) == 1 and nop.score == 0.0  # step one scored 0 < 1: step two never ran
    oracle = run_trial(task, "oracle", backend=local_backend)
    assert oracle.score == 1.0 and oracle.grade["rewards"] == {"reward": 1.0, "extra": 0.5}  # the last step's


@pytest.mark.docker
def test_stand_in_base_image_is_flagged_as_not_comparable(make_task):
    from termgym.sandbox.images import DEFAULT_BASE_IMAGE, docker_client

    client = docker_client()
    stand_in = "termgym-test-standin/ubuntu:24.04"
    client.images.get(DEFAULT_BASE_IMAGE).tag(stand_in)
    try:
        task = load_task(make_task("standin", dockerfile=f"FROM {stand_in}\nRUN true\nWORKDIR /app\n"))
        result = run_trial(task, "oracle", backend="docker")
        assert result.score == 1.0 and "not comparable" in result.grade["scores_not_comparable"]
    finally:
        client.images.remove(stand_in, noprune=True)


def test_memory_and_memory_mb_must_agree(make_task):
    from termgym.tasks.harbor import TaskFormatError

    ok = load_task(make_task("same", toml='version = "1.0"\n[environment]\nmemory = "2G"\nmemory_mb = 2048\n'))
    assert ok.config.memory_mb == 2048
    assert load_task(make_task("none", toml='schema_version = "1.1"\n')).config.memory_mb is None  # no default limit
    with pytest.raises(TaskFormatError, match="conflicts with memory_mb"):
        load_task(make_task("clash", toml='version = "1.0"\n[environment]\nmemory = "1G"\nmemory_mb = 2048\n'))


def test_an_episode_without_a_valid_reward_is_left_out_of_the_mean(make_task, local_backend, tmp_path):
    # Harbor 0.26: a verifier that leaves no valid reward marks the trial "no valid reward", and its
    # mean is taken over the trials that have one. Three tasks: solved, failed, no reward at all.
    make_task("a-solved")
    make_task("b-failed", solve_sh="#!/bin/bash\necho no > /app/done.txt\n")
    task_dir = make_task("c-no-reward", test_sh="#!/bin/bash\necho 'the verifier forgot the reward'\n")
    from termgym.evaluation import evaluate

    outcome = evaluate("termgym/Harbor-v0", agent="oracle", output_dir=tmp_path / "run", concurrency=1,
                       progress=False, env_kwargs={"tasks_dir": str(task_dir.parent), "backend": local_backend})
    by_task = {r.task_id: r for r in outcome.results}
    assert by_task["c-no-reward"].grade["reward_valid"] is False and not by_task["c-no-reward"].scored
    summary = outcome.summary
    assert summary["no_valid_reward"] == 1 and summary["scored"] == 2
    assert summary["mean_score"] == 0.5 and summary["solve_rate"] == 0.5  # over the two with a reward
