"""A workspace the agent made unreadable is a recorded event under ``ProcessReward``, never an exception.

Root in a sandbox has no ``CAP_DAC_OVERRIDE``, so ``mkdir d && chmod 000 d`` makes the wrapper's
``find`` fail on ``d``. That used to raise out of ``step`` (an infrastructure failure to the eval
harness). Played through ``gym.make`` on a real bundled task in a real bubblewrap sandbox.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.wrappers.rewards import SNAPSHOT_UNREADABLE, ProcessReward, WorkspaceSnapshot

TASK = "isodate-01194bbebc"
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def cmd(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


@pytest.fixture
def env(tmp_path):
    env = ProcessReward(gym.make("termgym/SweSynth-v0", path="v1", suite_options={"cache_dir": tmp_path}))
    yield env
    env.close()


def events(info) -> dict[str, dict]:
    return {e["event"]: e for e in info["reward_events"]}


def test_an_unreadable_directory_is_an_event_not_an_exception(env):
    env.reset(options={"task_id": TASK})
    fixed = re.search(r"^\+\+\+ b/(\S+)", env.unwrapped.task.metadata["fix_patch"], re.M).group(1)
    package = fixed.rsplit("/", 1)[0]

    _, reward, terminated, truncated, info = env.step(cmd("mkdir d && chmod 000 d && echo made"))
    assert not (terminated or truncated)
    unreadable = events(info)[SNAPSHOT_UNREADABLE]
    assert unreadable["paths"] == ["d"] and unreadable["reward"] == 0.0
    assert any("cannot read d" in w for w in info["reward_warnings"])

    # Hiding the tracked source files behind an unreadable directory is not a modification of them.
    _, _, _, _, info = env.step(cmd(f"chmod 000 {package} && echo hidden"))
    assert events(info)[SNAPSHOT_UNREADABLE]["paths"] == ["d", package]
    assert "code_modified" not in events(info)

    # The snapshot is still on: once readable again, a real edit pays.
    _, _, _, _, info = env.step(cmd(f"chmod 755 {package} && echo '# edit' >> {fixed}"))
    assert SNAPSHOT_UNREADABLE in events(info) and events(info)["code_modified"]["files"] == [fixed]

    _, reward, terminated, _, info = env.step(cmd(f"echo {SUBMIT}"))
    assert terminated and info["grade"]["score"] == 0.0 and "infra_error" not in info["grade"], info["grade"]
    assert "process_reward" in info


def test_the_snapshot_reports_unreadable_directories_itself(env):
    env.reset(options={"task_id": TASK})
    sandbox = env.unwrapped.sandbox
    snapshot = WorkspaceSnapshot(sandbox, sandbox.workdir)
    snapshot.start()
    tracked = len(snapshot.files)
    sandbox.exec("mkdir -p a/b && chmod 000 a/b && mkdir e && chmod 000 e")
    assert snapshot.changed() == [] and snapshot.unreadable == ["a/b", "e"] and len(snapshot.files) == tracked
    sandbox.exec("chmod 755 a/b e")
    assert snapshot.changed() == [] and snapshot.unreadable == []
