"""The Docker backend's fast paths against a real engine: the workdir and ``/tmp`` bound from host
directories (and what the agent can do with them), ready containers from the pool, and removal
failures that never reach an episode.

The attacks here are the ones a bound host directory invites: symlinks (at the last component and
in the middle, to host files and directories that exist only outside the container), a FIFO and a
device node where the grader reads, an image whose own workdir must not be hidden.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from termgym import CommandTask, ListSuite
from termgym.env import TerminalEnv
from termgym.sandbox import SandboxSpec
from termgym.sandbox.docker import (
    LABEL_SESSION,
    SESSION_ID,
    DockerSandbox,
    WarmPool,
    failed_removals,
    get_client,
    wait_for_removals,
)

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker")]


@pytest.fixture
def host_secret(tmp_path):
    """A host directory and file that exist only outside any container (named by absolute path)."""
    secret_dir = tmp_path / f"secret-{uuid.uuid4().hex[:8]}"
    secret_dir.mkdir()
    (secret_dir / "key.txt").write_text("HOST SECRET")
    return secret_dir


def test_containers_compete_for_the_cpu_like_processes_not_as_one():
    """Under Docker's own ``docker`` cgroup every container together weighs one process; termgym's
    parent cgroup weighs one process per container under it (a local cgroupfs engine, as root)."""
    from termgym.sandbox.docker.container import CGROUP_PARENT

    info = get_client().info()
    if info.get("CgroupDriver") != "cgroupfs" or os.geteuid() != 0:
        pytest.skip("the parent cgroup is set up only for a local cgroupfs engine, as root")
    v2 = str(info.get("CgroupVersion", "1")) == "2"
    group = f"/sys/fs/cgroup/{CGROUP_PARENT}" if v2 else f"/sys/fs/cgroup/cpu/{CGROUP_PARENT}"

    def weight_and_count() -> tuple[int, int]:
        count = sum(1 for entry in os.scandir(group) if entry.is_dir())
        return int(open(f"{group}/{'cpu.weight' if v2 else 'cpu.shares'}").read()), count

    with DockerSandbox(SandboxSpec(), pool_size=0) as first, DockerSandbox(SandboxSpec(), pool_size=0) as second:
        for sb in (first, second):
            assert get_client().api.inspect_container(sb.container_id)["HostConfig"]["CgroupParent"] == f"/{CGROUP_PARENT}"
            assert f"/{CGROUP_PARENT}/{sb.container_id}" in sb.exec("cat /proc/self/cgroup").output
        weight, count = weight_and_count()
        assert count >= 2 and weight == min(count * (100 if v2 else 1024), 10000 if v2 else 262144)
    assert wait_for_removals(60)
    weight, count = weight_and_count()
    assert weight == max(1, count) * (100 if v2 else 1024)


def test_workdir_and_tmp_are_bound_host_directories_holding_the_copied_tree(tmp_path):
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("X = 1\n")
    (src / "link").symlink_to("pkg/m.py")
    spec = SandboxSpec(workdir="/app", copy_dirs={str(src): "/app"}, files={"/tmp/t.txt": "t", "f.txt": "f"})
    with DockerSandbox(spec, pool_size=0) as sb:
        assert sb.host_tree is not None and set(sb.host_tree.mounts) == {"/app", "/tmp"}
        host_app = sb.host_tree.mounts["/app"]
        assert (host_app / "pkg" / "m.py").read_text() == "X = 1\n"
        assert os.readlink(host_app / "link") == "pkg/m.py"
        assert sb.exec("cat link f.txt /tmp/t.txt; stat -c %a /tmp; pwd").output == "X = 1\nft1777\n/app\n"
        # a copy, not the source: the agent's edit stays in the sandbox
        sb.exec("echo 2 > pkg/m.py")
        assert (src / "pkg" / "m.py").read_text() == "X = 1\n"
        sb.write_file("/tmp/g/h.txt", "written on the host", mode=0o600)
        assert sb.exec("cat /tmp/g/h.txt; stat -c %a /tmp/g/h.txt").output == "written on the host600\n"
        assert sb.read_file("pkg/m.py") == b"2\n"
        tree = sb.host_tree.path
    assert wait_for_removals(60)
    assert not tree.exists(), "the host directory outlived its container"


def test_symlinks_the_agent_plants_never_lead_the_host_outside_the_tree(host_secret):
    with DockerSandbox(SandboxSpec(workdir="/app"), pool_size=0) as sb:
        assert sb.host_tree is not None
        sb.exec(f"ln -s {host_secret}/key.txt /tmp/file-link; ln -s {host_secret} /app/dir-link; "
                f"ln -s {host_secret} /tmp/dir-link; mkdir -p /tmp/real")
        # reading through a link resolves it in the container, where the host path does not exist
        for path in ("/tmp/file-link", "dir-link/key.txt", "/tmp/dir-link/key.txt"):
            with pytest.raises(FileNotFoundError):
                sb.read_file(path)
        # writing through a directory link writes in the container (which has no such directory)
        for path in ("dir-link/planted.txt", "/tmp/dir-link/planted.txt"):
            with pytest.raises(OSError):
                sb.write_file(path, "planted")
        # writing where a link is replaces the link itself
        sb.write_file("/tmp/file-link", "replaced")
        assert sb.exec("test -L /tmp/file-link || cat /tmp/file-link").output == "replaced"
    assert sorted(p.name for p in host_secret.iterdir()) == ["key.txt"]
    assert (host_secret / "key.txt").read_text() == "HOST SECRET"


def test_special_files_are_never_opened_on_the_host():
    with DockerSandbox(SandboxSpec(), pool_size=0) as sb:
        assert sb.exec("mkfifo /tmp/fifo && mknod /tmp/null c 1 3 && echo ok").output == "ok\n"
        results: dict[str, object] = {}

        def read_them() -> None:
            # opened on the host, the FIFO would block until a writer comes (never)
            results["fifo"] = sb.read_file("/tmp/fifo")
            results["null"] = sb.read_file("/tmp/null")

        reader = threading.Thread(target=read_them, daemon=True)
        reader.start()
        reader.join(60)
        assert not reader.is_alive(), "read_file opened the FIFO on the host"
        assert results == {"fifo": b"", "null": b""}
        # writing replaces the special file with a regular one
        sb.write_file("/tmp/fifo", "plain")
        assert sb.exec("test -f /tmp/fifo && cat /tmp/fifo").output == "plain"


def test_an_image_whose_workdir_has_content_is_not_hidden_by_a_bind():
    client = get_client()
    maker = client.containers.run("termgym/base:bookworm", ["sh", "-c", "mkdir -p /app && echo kept > /app/keep.txt"],
                                  detach=True, network_mode="none", labels={"termgym.test": "1"})
    maker.wait(timeout=60)
    tag = f"termgym-test/workdir-content:{uuid.uuid4().hex[:8]}"
    repository, _, version = tag.partition(":")
    maker.commit(repository=repository, tag=version)
    maker.remove(force=True)
    try:
        with DockerSandbox(SandboxSpec(image=tag, workdir="/app", files={"new.txt": "n"}), pool_size=0) as sb:
            assert sb.host_tree is not None and set(sb.host_tree.mounts) == {"/tmp"}
            assert sb.exec("cat keep.txt new.txt").output == "kept\nn"
    finally:
        wait_for_removals(60)
        client.images.remove(tag, force=True)


def test_a_pooled_container_resets_with_the_tree_copied_on_the_host(tmp_path):
    src = tmp_path / "repo"
    src.mkdir()
    (src / "a.py").write_text("A = 1\n")
    spec = SandboxSpec(workdir="/app", copy_dirs={str(src): "/app"}, env={"E": "1"})
    with WarmPool(size=1) as pool:
        pool.warm(spec)
        with DockerSandbox(spec, pool=pool) as sb:
            assert sb.from_pool and sb.host_tree is not None
            assert sb.exec("cat a.py; echo $E; pwd").output == "A = 1\n1\n/app\n"
            # the shell, supervisor and kill all work on a pooled container
            result = sb.exec("sleep 30", timeout=0.5)
            assert result.timed_out and sb.exec("echo alive").output == "alive\n"
    assert wait_for_removals(60)


def _container_dir(container_id: str) -> str:
    return os.path.dirname(get_client().api.inspect_container(container_id)["HostnamePath"])


def test_a_removal_the_engine_fails_never_fails_the_episode_and_gc_removes_it(monkeypatch):
    """A container whose removal fails (a real 500 from the engine: an immutable file in its
    directory makes ``unlinkat`` fail) ends its episode normally; ``termgym gc`` removes it later."""
    import termgym.sandbox.docker.removal as removal

    monkeypatch.setattr(removal, "RETRY_DELAYS", (0.1, 0.1))
    suite = ListSuite([CommandTask("t", "Write 1 to out.txt.", grade_command="grep -qx 1 out.txt",
                                   oracle=["echo 1 > out.txt"])], name="stuck")
    env = TerminalEnv(suite, backend="docker", sandbox_options={"pool_size": 0})
    stuck = None
    try:
        env.reset(options={"task_id": "t"})
        container_id = env.sandbox.container_id
        stuck = os.path.join(_container_dir(container_id), "termgym-test-immutable")
        open(stuck, "w").close()
        subprocess.run(["chattr", "+i", stuck], check=True)
        env.step("THOUGHT: write\n```bash\necho 1 > out.txt\n```")
        _, reward, terminated, _, info = env.step(
            "THOUGHT: submit\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
        assert terminated and reward == 1.0
        env.close()
        assert wait_for_removals(60)
        assert any(cid == container_id and "unable to remove filesystem" in err for cid, err in failed_removals)
        state = get_client().api.inspect_container(container_id)["State"]
        assert state["Dead"] and not state["Running"]
        subprocess.run(["chattr", "-i", stuck], check=True)
        stuck = None
        result = subprocess.run([sys.executable, "-m", "termgym.cli", "gc"], capture_output=True, text=True,
                                timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert result.returncode == 0, result.stderr
        assert container_id[:12] in result.stdout and "dead" in result.stdout
        assert not get_client().api.containers(all=True, filters={"id": container_id})
    finally:
        if stuck is not None:
            subprocess.run(["chattr", "-i", stuck])
        env.close()


def test_a_removal_that_fails_once_is_retried_in_the_background():
    suite = ListSuite([CommandTask("t", "Do nothing.", grade_command="true", oracle=["true"])], name="once")
    env = TerminalEnv(suite, backend="docker", sandbox_options={"pool_size": 0})
    env.reset(options={"task_id": "t"})
    container_id = env.sandbox.container_id
    stuck = os.path.join(_container_dir(container_id), "termgym-test-immutable")
    open(stuck, "w").close()
    subprocess.run(["chattr", "+i", stuck], check=True)
    client = get_client()

    def release_after_first_failure() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = client.api.containers(all=True, filters={"id": container_id})
            if found and client.api.inspect_container(container_id)["State"].get("Dead"):
                break
            time.sleep(0.05)
        subprocess.run(["chattr", "-i", stuck])

    releaser = threading.Thread(target=release_after_first_failure, daemon=True)
    releaser.start()
    env.close()  # returns at once; the failed removal is retried meanwhile
    releaser.join(90)
    assert wait_for_removals(90)
    assert not client.api.containers(all=True, filters={"id": container_id}), "the retry did not remove it"
    assert not [c for c in client.api.containers(all=True, filters={"label": f"{LABEL_SESSION}={SESSION_ID}"})
                if c["Id"] == container_id]


_PAST_1024 = r"""
import fcntl, os, socket
from termgym.sandbox import SandboxSpec
from termgym.sandbox.docker import DockerSandbox
from termgym.sandbox.docker.channel import wait_readable

filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
sandbox = DockerSandbox(SandboxSpec(), pool_size=0)
try:
    sandbox.start()
    assert sandbox._init is not None and sandbox._init.fd >= 1024, sandbox._init
    assert sandbox.exec("echo hi", timeout=60).output.strip() == "hi"
finally:
    sandbox.close()  # the init's pidfd is polled here: select() raised ValueError past 1024
assert sandbox._init is None
low, right = socket.socketpair()
left = socket.socket(fileno=fcntl.fcntl(low.fileno(), fcntl.F_DUPFD, 1500))
assert left.fileno() >= 1024
assert not wait_readable(left.fileno(), 0)
right.send(b"x")
assert wait_readable(left.fileno(), 1.0)
print("ok")
"""


def test_descriptors_numbered_past_1024_neither_fail_a_close_nor_lose_the_waiting_shell():
    """Hundreds of concurrent sandboxes hold thousands of descriptors: the init's pidfd and the exec
    sockets are then numbered past ``select``'s 1024, and closing must still kill the container.
    Run in a fresh process, where no other test's background thread frees a low number first."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", _PAST_1024], cwd=repo, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": repo})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
