"""A multi-node Ray cluster on one machine: a head and sandbox nodes, each its own ``ray start``.

For trying the remote setup of docs/cluster.md without a second machine, and for the tests and
benchmarks that need real nodes (a killed raylet is a lost node):

.. code-block:: python

    with local_cluster(workers=2, worker_resources={"termgym_sandbox": 2}) as cluster:
        ray.init(**cluster.init_options())
        env = gym.make("termgym/SweSynth-v0", ray=True)   # its sandbox runs on w1 or w2

Each node is ``ray start --block`` with its own temp dir, on 127.0.0.1, with one HOME of the
cluster's own (so another Ray user's auth token in ``~/.ray`` does not reach it) and Ray's token
authentication off (loopback only). :data:`FAST_HEALTH_CHECKS` on the head makes a killed raylet
count as a dead node within about a second (Ray's default takes ~15 s) while a node that is only
slow keeps its place. A node whose ``ray start``
exits while starting (a raylet that missed Ray's 30 s registration window under load) is started
again, up to :data:`START_ATTEMPTS` times. On leaving the block every
``ray start --block`` gets SIGTERM (it stops its node), then its whole session SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Head-node system config: a health check every 300 ms, a node declared dead after three failed in a
#: row. A killed raylet's port refuses the check at once, so it is dead within about a second; a live
#: raylet gets 10 s to answer. With a 300 ms timeout a raylet stalled for a second (a loaded 2-core CI
#: machine) was declared dead and exited on hearing it, and when that was the head, the driver attached
#: to it exited too: status 1, nothing printed (session 36's CI lost a test lane so;
#: tests/remote/test_local_cluster_health.py stalls a node both ways).
FAST_HEALTH_CHECKS = {"health_check_period_ms": 300, "health_check_timeout_ms": 10_000,
                      "health_check_failure_threshold": 3}

#: How many times a node's ``ray start`` is tried before the cluster gives up on it.
START_ATTEMPTS = 3


@dataclass
class Node:
    """One ``ray start --block`` process, its log and temp dir, and (once known) its Ray node id."""

    name: str
    proc: subprocess.Popen
    log: Path
    temp_dir: Path
    node_id: str = ""

    def raylet_pid(self) -> int:
        """The pid of this node's raylet (a descendant of its ``ray start``)."""
        for pid, name in _descendants(self.proc.pid):
            if name == "raylet":
                return pid
        raise RuntimeError(f"{self.name}: no raylet among the processes of pid {self.proc.pid}")

    def kill_raylet_once(self, process_name: str, *, within: float = 120.0, settle: float = 0.5) -> float | None:
        """Lose this node mid-work: wait until a process called ``process_name`` runs under its raylet (a
        sandbox's command), ``settle`` seconds more, then SIGKILL the raylet. Returns when it was killed
        (``time.monotonic()``), or ``None`` if no such process showed up within ``within`` seconds."""
        raylet = self.raylet_pid()
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if any(name == process_name for _, name in _descendants(raylet)):
                break
            time.sleep(0.2)
        else:
            return None
        time.sleep(settle)
        os.kill(raylet, signal.SIGKILL)
        return time.monotonic()

    def terminate(self) -> None:
        """SIGTERM to ``ray start --block`` (it stops its node's processes), unless it has been reaped."""
        _terminate(self.proc)

    def stop(self) -> None:
        """Stop the node: SIGTERM to ``ray start --block``, then SIGKILL its whole session, then reap
        it (:func:`stop_session`)."""
        stop_session(self.proc)


@dataclass
class LocalCluster:
    """The running cluster: its GCS address, the environment a driver needs, and its nodes."""

    address: str
    env: dict[str, str]
    root: Path
    head: Node
    workers: list[Node] = field(default_factory=list)

    def worker_ids(self) -> set[str]:
        return {n.node_id for n in self.workers}

    @contextlib.contextmanager
    def driver_env(self) -> Iterator[None]:
        """This process's environment set as a driver of this cluster needs it (Ray's auth off), restored after."""
        saved = {key: os.environ.get(key) for key in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
        os.environ.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def init_options(self) -> dict[str, str]:
        """What ``ray.init`` takes to connect this process as a driver through the head's raylet:
        ``{"address": ..., "_temp_dir": <the head's temp dir>}``. Every node here runs on 127.0.0.1,
        and Ray connects a driver to a raylet it finds among this machine's processes (the head
        first, but only among those its process scan found): a driver connected to a sandbox node's
        raylet dies with it, exit 1 and nothing printed, when that node is lost. The head's temp dir
        names the head's raylet alone."""
        return {"address": self.address, "_temp_dir": str(self.head.temp_dir)}

    def identify(self) -> None:
        """Fill in each node's id from the cluster's view (a raylet's socket lies in its node's temp dir)."""
        import ray

        alive = [n for n in ray.nodes() if n["Alive"]]
        for node in (self.head, *self.workers):
            ids = [n["NodeID"] for n in alive if n["RayletSocketName"].startswith(str(node.temp_dir) + os.sep)]
            if len(ids) != 1:
                raise RuntimeError(f"{node.name}: {len(ids)} live Ray nodes use its temp dir {node.temp_dir}")
            node.node_id = ids[0]


def _descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process below ``root``, read from ``/proc`` (Linux)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        names[int(entry)] = name
        children.setdefault(int(rest[1]), []).append(int(entry))
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append((pid, names[pid]))
        todo.extend(children.get(pid, ()))
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(name: str, args: Sequence[str], root: Path, env: Mapping[str, str], attempt: int = 1) -> Node:
    temp_dir = root / (name if attempt == 1 else f"{name}.{attempt}")
    temp_dir.mkdir()
    log = root / f"{temp_dir.name}.log"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            ["ray", "start", "--block", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
             f"--temp-dir={temp_dir}", *args],
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=dict(env))
    return Node(name, proc, log, temp_dir)


def _ended(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` has exited, without reaping it (its pid and group id stay reserved until then)."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM to ``proc`` unless it has been reaped (its pid may be another process's then)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)  # not Popen.send_signal: that reaps an exited one


def stop_session(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """Stop ``proc``, a session leader this process started (``start_new_session=True``), and
    everything left in its session: SIGTERM to it, up to ``grace`` seconds for it to exit, SIGKILL
    to its process group, then reap it.

    The group is killed before the leader is reaped: until then the exited leader holds the group
    id. Once reaped, the id is a free number that the next ``setsid`` process on the machine may
    take as its own group, and ``killpg`` would kill that stranger. So the wait never reaps (no
    ``Popen.wait``/``poll``/``send_signal`` before the kill), and a leader reaped already gets
    no signal at all."""
    if proc.returncode is not None:  # reaped: its pid and group id may be another process's now
        return
    _terminate(proc)
    deadline = time.monotonic() + grace
    while not _ended(proc) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _started(node: Node, deadline: float) -> bool:
    """Wait until ``node`` blocks forever (True) or its ``ray start`` exits (False); past ``deadline``, an error."""
    while "will now block forever" not in node.log.read_text():
        if _ended(node.proc):
            return False
        if time.monotonic() > deadline:
            raise RuntimeError(f"{node.name}: Ray did not start in time:\n{node.log.read_text()[-3000:]}")
        time.sleep(0.3)
    return True


def _exited(node: Node) -> RuntimeError:
    return RuntimeError(f"{node.name}: ray start exited with {node.proc.returncode}:\n{node.log.read_text()[-3000:]}")


def _node_args(cpus: float, gpus: int, resources: Mapping[str, float] | None, object_store_bytes: int) -> list[str]:
    args = [f"--num-cpus={cpus:g}", f"--object-store-memory={object_store_bytes}"]
    if gpus:
        args.append(f"--num-gpus={gpus}")
    if resources:
        args.append(f"--resources={json.dumps(dict(resources))}")
    return args


@contextlib.contextmanager
def local_cluster(*, workers: int = 2, worker_resources: Mapping[str, float] | Sequence[Mapping[str, float]] | None = None,
                  head_cpus: float = 1, head_gpus: int = 0, worker_cpus: float = 1,
                  object_store_bytes: int = 100_000_000, pythonpath: Sequence[str | Path] = (),
                  health_checks: Mapping[str, int] | None = FAST_HEALTH_CHECKS, env: Mapping[str, str] | None = None,
                  start_timeout: float = 180.0) -> Iterator[LocalCluster]:
    """Start a head and ``workers`` nodes on this machine; stop them all when the block ends.

    ``worker_resources``: the custom resources of every worker (one mapping), or of each (a list of
    ``workers`` mappings); default ``{"termgym_sandbox": 2}``. ``head_cpus`` / ``head_gpus`` /
    ``worker_cpus``: logical CPUs and GPUs each node declares (a GPU here is only a resource name: a
    CPU veRL run needs one on the head). ``pythonpath``: folders every node's workers import from
    (a custom suite, a test's tasks). ``env``: more environment for every node (e.g.
    ``RAY_worker_niceness``). Node ids are filled in once a driver has connected
    (:meth:`LocalCluster.identify`).
    """
    if worker_resources is None:
        worker_resources = {"termgym_sandbox": 2}
    per_worker = list(worker_resources) if not isinstance(worker_resources, Mapping) else [worker_resources] * workers
    if len(per_worker) != workers:
        raise ValueError(f"worker_resources lists {len(per_worker)} mappings for {workers} workers")
    root = Path(tempfile.mkdtemp(prefix="tgrc", dir="/tmp"))  # short: Ray's socket paths have a length limit
    home = root / "home"
    home.mkdir()
    paths = [str(p) for p in pythonpath] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    node_env = {**os.environ, "HOME": str(home), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
                "PYTHONPATH": os.pathsep.join(paths), **(env or {})}
    nodes: list[Node] = []
    try:
        # The head first, up to its GCS, then the workers side by side. `ray start` gives a node's
        # raylet 30 s to register with the GCS (a constant of Ray's); on a loaded 2-core machine that
        # can run out, so a node whose `ray start` exits is started again in a fresh temp dir.
        deadline = time.monotonic() + start_timeout
        for attempt in range(1, START_ATTEMPTS + 1):
            port = _free_port()
            head_args = ["--head", f"--port={port}", "--include-dashboard=false",
                         *_node_args(head_cpus, head_gpus, None, object_store_bytes)]
            if health_checks:
                head_args.append(f"--system-config={json.dumps(dict(health_checks))}")
            nodes[:1] = [_start("head", head_args, root, node_env, attempt)]
            if _started(nodes[0], deadline):
                break
            nodes[0].stop()
            if attempt == START_ATTEMPTS:
                raise _exited(nodes[0])
        address = f"127.0.0.1:{port}"
        worker_args = [[f"--address={address}", *_node_args(worker_cpus, 0, resources, object_store_bytes)]
                       for resources in per_worker]
        nodes.extend(_start(f"w{index}", args, root, node_env) for index, args in enumerate(worker_args, start=1))
        for index, args in enumerate(worker_args, start=1):
            attempt = 1
            while not _started(nodes[index], deadline):
                nodes[index].stop()
                if attempt == START_ATTEMPTS:
                    raise _exited(nodes[index])
                attempt += 1
                nodes[index] = _start(nodes[index].name, args, root, node_env, attempt)
        yield LocalCluster(address, node_env, root, nodes[0], nodes[1:])
    finally:
        for node in nodes:  # stop them side by side, not one after the other
            node.terminate()
        for node in nodes:
            node.stop()
        shutil.rmtree(root, ignore_errors=True)
