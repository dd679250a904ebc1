"""Docker-only behaviour: container settings, the warm pool, ``termgym gc``, images, remote hosts,
service ports and many concurrent episodes without leaks."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from termgym import CommandTask, ListSuite
from termgym.sandbox import BackendUnavailable, Limits, SandboxError, SandboxSpec, ServicePort
from termgym.sandbox.docker import (
    LABEL,
    LABEL_PID,
    LABEL_SESSION,
    SESSION_ID,
    DockerSandbox,
    collect_garbage,
    find_leftovers,
    get_client,
    wait_for_removals,
)

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker")]


def session_containers(session: str = SESSION_ID) -> list[dict]:
    return get_client().api.containers(all=True, filters={"label": f"{LABEL_SESSION}={session}"})


def test_container_is_labelled_limited_and_offline():
    spec = SandboxSpec(workdir="/app", limits=Limits(memory_mb=300, pids=77, cpus=0.5))
    with DockerSandbox(spec) as sb:
        info = get_client().api.inspect_container(sb.container_id)
        labels = info["Config"]["Labels"]
        assert labels[LABEL] == "1" and labels[LABEL_SESSION] == SESSION_ID
        assert labels[LABEL_PID] == str(os.getpid())
        host = info["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["Memory"] == 300 * 1024 * 1024 and host["MemorySwap"] == 300 * 1024 * 1024
        assert host["PidsLimit"] == 77 and host["NanoCpus"] == 500_000_000
        assert host["Init"] is True
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["LogConfig"]["Type"] == "none"  # no log file per container (its main process is sleep)
        assert info["Config"]["Hostname"] == "sandbox"
        assert sb.exec("ulimit -t; ulimit -n").output == "600\n4096\n"
        container_id = sb.container_id
    # close() killed it; the engine notices the exit and removes the container in the background
    deadline = time.monotonic() + 10
    while any(c["State"] == "running" for c in get_client().api.containers(all=True, filters={"id": container_id})):
        assert time.monotonic() < deadline, "the container still runs after close()"
        time.sleep(0.05)
    assert wait_for_removals(60)
    assert not [c for c in session_containers() if c["Id"] == container_id]


def test_missing_image_names_it_and_how_to_provide_it():
    with pytest.raises(BackendUnavailable, match=r"termgym/no-such-image:1.*termgym images build-base"):
        DockerSandbox(SandboxSpec(image="termgym/no-such-image:1")).start()


def test_unreachable_engine_is_a_clear_error():
    with pytest.raises(BackendUnavailable, match=r"tcp://127.0.0.1:1.*DOCKER_HOST"):
        DockerSandbox(docker_host="tcp://127.0.0.1:1").start()


class _UnixToTcp:
    """Serves the local engine's unix socket on a TCP port: a stand-in for a remote DOCKER_HOST."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect("/var/run/docker.sock")
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self.server.close()


def test_docker_host_over_tcp_is_honoured(monkeypatch):
    proxy = _UnixToTcp()
    try:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{proxy.port}")
        with DockerSandbox(SandboxSpec(files={"f.txt": "remote"})) as sb:
            assert sb.host_tree is None  # not a local engine: files go through the archive API
            assert sb.exec("cat f.txt; cd /tmp").output == "remote"
            assert sb.exec("pwd").output == "/tmp\n"
            assert sb.exec("sleep 20", timeout=1).timed_out
            assert sb.read_file("f.txt") == b"remote"
        assert proxy.connections > 0
    finally:
        proxy.close()


def test_services_on_an_engine_elsewhere_are_a_clear_error(monkeypatch):
    # On a remote engine the container's pid is not a process of this machine; simulate that by
    # reporting a pid that is not the container's (the real check reads /proc/<pid>/cgroup).
    import termgym.sandbox.docker.sandbox as docker_backend

    real = docker_backend.container_host_pid
    seen = []
    monkeypatch.setattr(docker_backend, "container_host_pid",
                        lambda client, cid: seen.append(real(client, cid)) or None)
    spec = SandboxSpec(services=[ServicePort("svc.test", 80, "127.0.0.1", 9)])
    with pytest.raises(SandboxError, match="LIVEWEB.*local backend"):
        DockerSandbox(spec).start()
    assert seen and seen[0] is not None  # the engine here is local: the real check found the pid


def test_service_port_reaches_a_host_server_without_network():
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            body = f"hello from the host {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = SandboxSpec(services=[ServicePort("world.test", 80, "127.0.0.1", server.server_address[1])])
        with DockerSandbox(spec) as sb:
            result = sb.exec("curl -s --max-time 10 http://world.test/page", timeout=30)
            assert result.output == "hello from the host /page"
            # nothing else is reachable
            other = sb.exec("curl -s --max-time 3 http://1.1.1.1/ || echo unreachable", timeout=30)
            assert other.output.endswith("unreachable\n")
    finally:
        server.shutdown()


# -- pool -----------------------------------------------------------------------------------------


def test_warm_pool_serves_starts_and_cleans_up():
    from termgym.sandbox.docker.pool import WarmPool, close_shared_pools

    close_shared_pools()  # earlier tests' default pool must not be counted as this pool's
    assert wait_for_removals(60)
    spec = SandboxSpec(workdir="/job", limits=Limits(memory_mb=512))
    pool = WarmPool(size=2)
    try:
        pool.warm(spec)
        assert pool.ready_count(spec) == 2
        started = time.monotonic()
        # files, env and setup differ from the warmed spec: still a hit (the waiting shell was opened
        # without K, so a new one is opened with it)
        with DockerSandbox(SandboxSpec(workdir="/job", files={"a": "b"}, env={"K": "v"}, setup_commands=["touch s"],
                                       limits=Limits(memory_mb=512)), pool=pool) as sb:
            warm_start = time.monotonic() - started
            assert sb.from_pool
            assert sb.exec("pwd; cat a; echo $K; ls s").output == "/job\nbv\ns\n"
        assert pool.hits == 1
        # a different key is a miss that starts filling for next time
        with DockerSandbox(SandboxSpec(limits=Limits(memory_mb=256)), pool=pool) as other:
            assert not other.from_pool
        deadline = time.monotonic() + 60
        while pool.ready_count(SandboxSpec(limits=Limits(memory_mb=256))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.ready_count(SandboxSpec(limits=Limits(memory_mb=256))) == 2
        assert warm_start < 5
    finally:
        pool.close()
    assert wait_for_removals(60)
    remaining = [c for c in session_containers() if c["Labels"].get("termgym.pool") == "1"]
    assert remaining == []


def test_pool_size_option_uses_a_shared_pool_that_fills_at_the_second_request():
    from termgym.sandbox.docker.pool import close_shared_pools, shared_pool

    spec = SandboxSpec(limits=Limits(memory_mb=300))
    try:
        with DockerSandbox(spec, pool_size=1) as first:
            assert not first.from_pool
        pool = shared_pool(1)
        time.sleep(0.5)
        assert pool.ready_count(spec) == 0  # asked for once: nothing made ahead
        with DockerSandbox(spec, pool_size=1) as second:
            assert not second.from_pool
        deadline = time.monotonic() + 60
        while pool.ready_count(spec) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        with DockerSandbox(spec, pool_size=1) as third:
            assert third.from_pool
            assert third.exec("echo pooled").output == "pooled\n"
    finally:
        close_shared_pools()
    assert wait_for_removals(60)
    assert [c for c in session_containers() if c["Labels"].get("termgym.pool") == "1"] == []


def test_bad_pool_arguments_are_rejected():
    from termgym.sandbox.docker.pool import WarmPool

    with pytest.raises(ValueError, match="pool_size"):
        DockerSandbox(pool_size=-1)
    with pytest.raises(ValueError, match="size"):
        WarmPool(size=-2)
    with pytest.raises(ValueError, match="fill_after"):
        WarmPool(size=2, fill_after=0)


# -- gc and leaks -----------------------------------------------------------------------------------


CRASHING_RUN = textwrap.dedent(
    """
    import sys, time
    from termgym.sandbox import SandboxSpec
    from termgym.sandbox.docker import DockerSandbox, SESSION_ID
    boxes = [DockerSandbox(SandboxSpec()) for _ in range(3)]
    for box in boxes:
        box.start()
    boxes[0].exec("sleep 1000 &")
    print(SESSION_ID, *(box.container_id for box in boxes), flush=True)
    time.sleep(600)
    """
)


def _settled_count(session: str) -> int:
    """How many containers ``session`` left, once the engine has finished what the killed run asked
    of it: a pool fill sent just before SIGKILL can still create a container a moment later (the
    same count three reads in a row, half a second apart, within 20 s)."""
    counts: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        counts.append(len(session_containers(session)))
        if len(counts) >= 3 and counts[-1] == counts[-2] == counts[-3]:
            break
        time.sleep(0.5)
    return counts[-1]


def test_gc_removes_what_a_sigkilled_run_left_behind():
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_RUN], stdout=subprocess.PIPE, text=True)
    try:
        session, *boxes = proc.stdout.readline().split()
        assert session and len(boxes) == 3, "the child run did not start its sandboxes"

        def alive_boxes() -> list[str]:
            return [c["Id"] for c in session_containers(session) if c["Id"] in boxes]

        assert len(alive_boxes()) == 3  # (beside them, the default pool's, filling after the second)
        # while the run is alive gc leaves its containers alone
        assert not [x for x in find_leftovers() if x.name.startswith(f"termgym-{session}")]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(alive_boxes()) == 3  # SIGKILL skips every cleanup
    left = _settled_count(session)
    result = subprocess.run([sys.executable, "-m", "termgym.cli", "gc"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(f"termgym-{session}") == left >= 3
    assert "is gone" in result.stdout
    assert session_containers(session) == []


def test_gc_never_touches_containers_without_the_label():
    client = get_client()
    container = client.containers.run("termgym/base:bookworm", ["sleep", "60"], detach=True,
                                      labels={"termgym.pid": "999999999"}, network_mode="none")
    try:
        removed = collect_garbage(everything=True, dry_run=True)
        assert container.id[:12] not in {x.id for x in removed}
    finally:
        container.remove(force=True)


def test_32_concurrent_episodes_leave_no_container():
    from termgym.env import TerminalEnv, aclose, areset, astep

    tasks = [
        CommandTask(f"count-{i}", f"Write {i} to n.txt.", grade_command=f"grep -qx {i} n.txt",
                    oracle=[f"echo {i} > n.txt"])
        for i in range(32)
    ]
    suite = ListSuite(tasks, name="count")
    before = {c["Id"] for c in session_containers()}

    async def episode(i: int) -> float:
        env = TerminalEnv(suite, backend="docker", max_steps=4)
        try:
            await areset(env, options={"task_id": f"count-{i}"})
            await astep(env, f"THOUGHT: write it\n```bash\necho {i} > n.txt\n```")
            _, reward, terminated, _, info = await astep(env,
                "THOUGHT: submit\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
            assert terminated
            return float(reward)
        finally:
            await aclose(env)

    async def main() -> list[float]:
        return await asyncio.gather(*(episode(i) for i in range(32)))

    started = time.monotonic()
    rewards = asyncio.run(main())
    elapsed = time.monotonic() - started
    assert rewards == [1.0] * 32
    assert wait_for_removals(120)
    after = {c["Id"] for c in session_containers() if c["Labels"].get("termgym.pool") != "1"}
    assert after <= before, "containers leaked"
    print(f"32 concurrent docker episodes: {elapsed:.1f}s")
