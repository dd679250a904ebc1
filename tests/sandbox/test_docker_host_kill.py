"""Docker sandboxes on an engine on this machine kill from the host, through the container's cgroups.

Nothing in the container takes part in a kill (:mod:`termgym.sandbox.docker.hostkill`): the agent,
root in its container, can neither kill nor trace what does it, and no supervisor exec is started.
Where the host cannot (an engine elsewhere; here: the host killer turned off) the supervisor still
does it. A sabotaged killer that spares everything shows the checks can fail.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from termgym.sandbox import Limits, SandboxSpec
from termgym.sandbox.docker import DockerSandbox, hostkill
from termgym.sandbox.docker import ready as ready_module

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker")]


def container_processes(sb: DockerSandbox) -> list[str]:
    """The command lines of every process in the sandbox's container, read on the host."""
    killer = sb._killer or hostkill.host_killer(sb._init)
    lines = []
    for pid in killer.cgroups.procs.read_text().split():
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except OSError:
            continue
    return lines


def matching(sb: DockerSandbox, text: str) -> list[str]:
    return [line for line in container_processes(sb) if text in line]


def wait_for(sb: DockerSandbox, text: str, count: int = 1) -> None:
    deadline = time.monotonic() + 10
    while len(matching(sb, text)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(matching(sb, text)) >= count, container_processes(sb)


@pytest.fixture
def sandbox():
    sb = DockerSandbox(SandboxSpec(limits=Limits(pids=64)), pool_size=0)
    sb.start()
    yield sb
    sb.close()


def test_the_host_kills_and_no_supervisor_runs_in_the_container(sandbox):
    assert sandbox._killer is not None and sandbox._supervisor is None and sandbox._supervisor_start is None
    assert matching(sandbox, "termgym-supervisor") == []
    tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 1000}"
    result = sandbox.exec(f"(sleep {tag} &) ; sleep {tag}", timeout=1)
    assert result.timed_out and not result.restarted, result
    assert matching(sandbox, f"sleep {tag}") == []
    assert sandbox.exec("echo alive").output == "alive\n"


def test_a_respawning_agent_is_stopped_in_one_frozen_pass(sandbox):
    """A background loop that keeps forking (and renaming itself away from pkill) cannot outrun a
    kill: the container is frozen while the host reads and signals its processes."""
    tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 1000}"
    sandbox.exec(f"export KEEP=1; (while :; do sleep {tag} & sleep 0.01; done) >/dev/null 2>&1 &")
    wait_for(sandbox, f"sleep {tag}", 3)
    sandbox.stop_commands()
    assert matching(sandbox, f"sleep {tag}") == []
    # init, the main process and the shell are all that is left; the shell kept its state
    assert len(container_processes(sandbox)) == 3, container_processes(sandbox)
    assert sandbox.exec('echo "<$KEEP>"').output == "<1>\n"


def test_killing_what_would_have_been_the_supervisor_changes_nothing(sandbox):
    tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 1000}"
    sandbox.exec("pkill -9 -f termgym-supervisor; pkill -9 -f dockerd; true")
    result = sandbox.exec(f"sleep {tag}", timeout=1)
    assert result.timed_out and matching(sandbox, f"sleep {tag}") == []


def test_a_fork_bomb_at_the_pids_limit_is_cleared_from_the_host(sandbox):
    sandbox.exec("bomb() { bomb | bomb & }; bomb", timeout=3)
    time.sleep(1)  # the bomb fills the pids limit in the background
    sandbox.stop_commands()
    assert len(container_processes(sandbox)) == 3, container_processes(sandbox)
    after = sandbox.exec("echo recovered", timeout=30)
    assert after.output.endswith("recovered\n"), after  # (the bomb's last fork errors may come first)


def test_without_the_host_killer_the_supervisor_kills(monkeypatch):
    monkeypatch.setattr(ready_module, "host_killer", lambda init: None)
    with DockerSandbox(SandboxSpec(), pool_size=0) as sb:
        sb.start()
        assert sb._killer is None
        tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 1000}"
        sb.exec(f"(sleep {tag} &) ; true")
        wait_for(sb, f"sleep {tag}")
        sb.stop_commands()
        assert matching(sb, "termgym-supervisor"), "the supervisor should run where the host cannot kill"
        assert matching(sb, f"sleep {tag}") == []


def test_sabotage_a_killer_that_spares_everything_leaves_the_commands_running(sandbox, monkeypatch):
    monkeypatch.setattr(hostkill.HostKiller, "kill", lambda self, spare=frozenset(): True)
    tag = f"{400 + uuid.uuid4().int % 500}.{uuid.uuid4().int % 1000}"
    sandbox.exec(f"(sleep {tag} &) ; true")
    wait_for(sandbox, f"sleep {tag}")
    sandbox.stop_commands()
    assert matching(sandbox, f"sleep {tag}"), "a killer that kills nothing must leave the sleep running"


def test_the_cgroups_of_a_process_outside_any_container_are_not_a_containers():
    """The host killer is for containers only: a pid that does not exist gives none."""
    assert hostkill.container_cgroups(2**22 + 17) is None
    assert hostkill.host_killer(None) is None



def fake_tree(root: Path, dirs: dict[str, list[str]]) -> Path:
    """A fake cgroup tree under ``root``: ``dirs`` maps a directory to the control files it holds."""
    for rel, files in dirs.items():
        (root / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            (root / rel / name).write_text("")
    return root


def test_cgroup_v1_and_v2_layouts_are_both_found(tmp_path, monkeypatch):
    """The parser on fake trees and a fake ``/proc/<pid>/cgroup``: v1 (pids lists, freezer freezes)
    and the unified v2 layout (one directory does both)."""
    proc_file = tmp_path / "cgroup"
    real_read = Path.read_text

    def read_text(self, *args, **kwargs):
        return real_read(proc_file if str(self) == "/proc/4242/cgroup" else self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    proc_file.write_text("12:pids:/docker/abc\n7:freezer:/docker/abc\n0::/\n")
    v1 = fake_tree(tmp_path / "v1", {"pids/docker/abc": ["cgroup.procs"],
                                     "freezer/docker/abc": ["cgroup.procs", "freezer.state"]})
    assert hostkill.container_cgroups(4242, root=v1) == hostkill.ContainerCgroups(
        v1 / "pids/docker/abc/cgroup.procs", v1 / "freezer/docker/abc")
    proc_file.write_text("0::/system.slice/docker-abc.scope\n")
    v2 = fake_tree(tmp_path / "v2", {".": ["cgroup.controllers"],
                                     "system.slice/docker-abc.scope": ["cgroup.procs", "cgroup.freeze"]})
    group = v2 / "system.slice/docker-abc.scope"
    assert hostkill.container_cgroups(4242, root=v2) == hostkill.ContainerCgroups(group / "cgroup.procs", group)
    (group / "cgroup.freeze").unlink()  # a v2 group without the freezer: no killer (the supervisor kills)
    assert hostkill.container_cgroups(4242, root=v2) is None
