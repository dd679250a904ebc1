"""A real three-node Ray cluster on this machine: a head without sandbox slots and two sandbox nodes.

Each node is its own ``ray start --block`` (own temp dir; one shared HOME of our own, so another
Ray user's auth token in ~/.ray does not reach us), 1 CPU and a 100 MB object store; the sandbox
nodes offer ``{"termgym_sandbox": 2}``. The head checks node health every 300 ms so a killed raylet
is declared dead in about a second (Ray's default takes ~15 s). Everything is stopped at teardown:
each ``ray start --block`` gets SIGTERM, then its whole session SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="needs Ray: pip install 'termgym[eval]'")
if shutil.which("bwrap") is None:
    pytest.skip("the remote tests run sandboxes: they need bubblewrap (apt-get install bubblewrap)",
                allow_module_level=True)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:  # remote_tasks: imported here and, through PYTHONPATH, on every node
    sys.path.insert(0, str(HERE))
SANDBOX_SLOTS = 2
FAST_HEALTH_CHECKS = {"health_check_period_ms": 300, "health_check_timeout_ms": 300,
                      "health_check_failure_threshold": 3}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Node:
    """One ``ray start --block`` process and what identifies its node."""

    name: str
    proc: subprocess.Popen
    log: Path
    temp_dir: Path
    node_id: str = ""

    def raylet_pid(self) -> int:
        """The pid of this node's raylet (a child of its ``ray start``)."""
        import psutil

        for proc in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if Path(proc.exe()).name == "raylet" or proc.name() == "raylet":
                    return proc.pid
            except psutil.Error:
                continue
        raise RuntimeError(f"{self.name}: no raylet among the processes of pid {self.proc.pid}")


@dataclass
class Cluster:
    """The running cluster: its address, the env the driver needs, and its nodes."""

    address: str
    env: dict[str, str]
    head: Node
    workers: list[Node] = field(default_factory=list)

    def worker_ids(self) -> set[str]:
        return {n.node_id for n in self.workers}


def _ray_env(root: Path) -> dict[str, str]:
    home = root / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def _start(name: str, args: list[str], root: Path, env: dict[str, str]) -> Node:
    temp_dir = root / name
    temp_dir.mkdir()
    log = root / f"{name}.log"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            ["ray", "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
             "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={temp_dir}", *args],
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return Node(name, proc, log, temp_dir)


def _wait_started(node: Node, deadline: float) -> None:
    while "will now block forever" not in node.log.read_text():
        if node.proc.poll() is not None:
            raise RuntimeError(f"{node.name}: ray start exited with {node.proc.returncode}:\n"
                               f"{node.log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{node.name}: Ray did not start in time:\n{node.log.read_text()[-3000:]}")
        time.sleep(0.3)


def stop_node(node: Node) -> None:
    if node.proc.poll() is None:
        node.proc.send_signal(signal.SIGTERM)  # `ray start --block` stops its own processes on SIGTERM
        try:
            node.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(node.proc.pid, signal.SIGKILL)  # whatever of its session is left
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def sandbox_cluster():
    """A head (no ``termgym_sandbox``) and two sandbox nodes (2 slots each), stopped at teardown."""
    root = Path(tempfile.mkdtemp(prefix="tgrc", dir="/tmp"))  # short: Ray's socket paths have a length limit
    env = _ray_env(root)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes: list[Node] = []
    try:
        # All three at once: a sandbox node's `ray start` waits for the head's GCS to come up.
        nodes.append(_start("head", ["--head", f"--port={port}", "--include-dashboard=false",
                                     f"--system-config={json.dumps(FAST_HEALTH_CHECKS)}"], root, env))
        for index in (1, 2):
            nodes.append(_start(f"w{index}", [f"--address={address}",
                                              f"--resources={json.dumps({'termgym_sandbox': SANDBOX_SLOTS})}"],
                                root, env))
        deadline = time.monotonic() + 180
        for node in nodes:
            _wait_started(node, deadline)
        yield Cluster(address, env, nodes[0], nodes[1:])
    finally:
        for node in nodes:  # stop them side by side, not one after the other
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in nodes:
            stop_node(node)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def driver(sandbox_cluster):
    """This process connected to the cluster as a driver (it runs no sandbox itself), nodes identified."""
    import ray
    import remote_tasks

    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address=sandbox_cluster.address, configure_logging=False, log_to_driver=False)
    try:
        _identify(sandbox_cluster, ray.nodes())
        remote_tasks.register()
        yield sandbox_cluster
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def _identify(cluster: Cluster, nodes: list[dict]) -> None:
    """Fill in each node's id (the raylet's socket lies in that node's own temp dir)."""
    alive = [n for n in nodes if n["Alive"]]
    assert len(alive) == 3, alive
    for node in (cluster.head, *cluster.workers):
        (node.node_id,) = [n["NodeID"] for n in alive if n["RayletSocketName"].startswith(str(node.temp_dir) + os.sep)]
    slots = {n["NodeID"]: n["Resources"].get("termgym_sandbox", 0) for n in alive}
    assert slots[cluster.head.node_id] == 0 and all(slots[w.node_id] == SANDBOX_SLOTS for w in cluster.workers)
