"""What running the env in a Ray actor adds to one ``step``, side by side with the same step run locally.

    python -m benchmarks.ray_step [--quick] [--out DIR]

Both envs serve one :class:`~termgym.tasks.base.CommandTask` on the local (bubblewrap) backend and
step the same message (``echo hi`` in a persistent shell): ``TerminalEnv.step`` in this process,
and ``RayEnv.step`` (``gym.make(..., ray=...)``) whose actor runs on a one-node Ray cluster this
script starts on this host, so the actor's replies cross loopback. A bare round trip to a no-op
actor method is the anchor: what Ray itself costs. Calls are interleaved in rounds
(:func:`benchmarks.common.interleaved`), so a busy minute on a shared machine hits every row.

Ray starts its workers, and so the actor and its sandbox, at niceness 15 (``RAY_worker_niceness``).
On a sandbox node that only runs sandboxes that changes nothing; on a machine shared with other
work it puts every wake-up of the actor behind that work. The full run measures both: the cluster
as Ray starts it, and again with ``RAY_worker_niceness=0``; ``--quick`` only the first.

It prints a table and writes ``ray_step.json`` into ``--out`` (default ``$OUT`` or the current
directory): per row the median, p10 and p90 in ms and n, and per cluster the goal: RayEnv's median
minus the local median (the added cost of a remote step) at most 2 ms, and their ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from benchmarks.common import MS_COLUMNS, Samples, fmt_ms, interleaved, ms_cells, write_run_json

COMMAND = "echo hi"
MESSAGE = f"THOUGHT: measure a step.\n\n```bash\n{COMMAND}\n```"
GOAL_MS = 2.0
ENV_ID = "termgym-bench/RayStep-v0"
LOCAL, REMOTE, ANCHOR = "termgym local env.step", "termgym RayEnv.step (actor over loopback)", \
    "raw Ray actor call (no-op)"


def command_suite() -> object:
    """The one-task suite both envs serve (an import path, so the actor builds its own)."""
    from termgym import CommandTask, ListSuite

    return ListSuite([CommandTask("bench-ray-step", "Run commands.", grade_command="true")])


def _check(observation: str, where: str) -> None:
    if "hi" not in observation:
        raise RuntimeError(f"{where}: `{COMMAND}` returned {observation!r} instead of 'hi'")


def measure(n: int, temp_dir: str, niceness: int | None = None) -> dict[str, Samples]:
    """Start a one-node Ray cluster in ``temp_dir`` (its workers at ``niceness``; ``None``: Ray's
    default), time the three rows ``n`` times each, stop it."""
    import gymnasium as gym
    import ray

    import termgym

    if ENV_ID not in gym.registry:
        termgym.register_suite(ENV_ID, "benchmarks.ray_step:command_suite", max_steps=10**9)
    saved = os.environ.pop("RAY_worker_niceness", None)
    if niceness is not None:  # the raylet reads it when it starts, and starts the workers with it
        os.environ["RAY_worker_niceness"] = str(niceness)
    try:
        ray.init(num_cpus=1, resources={"termgym_sandbox": 1}, object_store_memory=100 * 2**20,
                 include_dashboard=False, configure_logging=False, log_to_driver=False, _temp_dir=temp_dir,
                 runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}})
    finally:
        os.environ.pop("RAY_worker_niceness", None)
        if saved is not None:
            os.environ["RAY_worker_niceness"] = saved
    local = remote = None
    try:
        local = gym.make(ENV_ID)
        remote = gym.make(ENV_ID, ray={"resources": {"termgym_sandbox": 1}})
        local.reset(seed=0)
        remote.reset(seed=0)

        @ray.remote(num_cpus=0)
        class Echo:
            def ping(self) -> None:
                return None

        echo = Echo.remote()
        ray.get(echo.ping.remote())
        methods = {
            LOCAL: lambda: _check(local.step(MESSAGE)[0], "local"),
            REMOTE: lambda: _check(remote.step(MESSAGE)[0], "RayEnv"),
            ANCHOR: lambda: ray.get(echo.ping.remote()),
        }
        return interleaved(methods, n)
    finally:
        for env in (local, remote):
            if env is not None:
                env.close()
        ray.shutdown()


def report(results: dict[str, Samples], label: str) -> dict[str, object]:
    """One cluster's JSON report and printed table: every row, and the added cost against its goal."""
    added_ms = (results[REMOTE].median - results[LOCAL].median) * 1000
    ratio = results[REMOTE].median / results[LOCAL].median
    print(f"\n{label}\n\n| method | {' | '.join(MS_COLUMNS)} |")
    print("|---" * (len(MS_COLUMNS) + 1) + "|")
    for name in (LOCAL, REMOTE, ANCHOR):
        print(f"| {name} | {' | '.join(ms_cells(results[name]))} |")
    print(f"\nadded by the actor: {added_ms:.3f} ms per step (goal <= {GOAL_MS:g} ms); "
          f"RayEnv / local: {ratio:.2f}x; a bare Ray call: {fmt_ms(results[ANCHOR].median)} ms")
    return {
        "label": label,
        "rows": {name: s.summary_ms() for name, s in results.items()},
        "added_ms": round(added_ms, 4),
        "ratio": round(ratio, 4),
        "goal": {"added_ms_at_most": GOAL_MS, "met": added_ms <= GOAL_MS},
    }


#: The clusters measured: (key, worker niceness or None for Ray's default, label).
CLUSTERS = [("ray_default_niceness", None, "workers at Ray's default niceness (15)"),
            ("niceness_0", 0, "workers at niceness 0 (RAY_worker_niceness=0)")]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.ray_step``: measure, print the tables, write ``ray_step.json``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray_step", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="100 steps per row, Ray's default niceness only, instead of 1000 and both (CI)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="where ray_step.json goes")
    args = parser.parse_args(argv)
    # Our own Ray state: no auth token or usage stats from another Ray user of this machine.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    load_before = [round(x, 2) for x in os.getloadavg()]
    clusters = {}
    for key, niceness, label in CLUSTERS[:1] if args.quick else CLUSTERS:
        with tempfile.TemporaryDirectory(prefix="tgrs", dir="/tmp") as temp_dir:  # short: socket paths
            clusters[key] = report(measure(100 if args.quick else 1000, temp_dir, niceness), label)
    write_run_json(args.out, "ray_step.json", {"quick": args.quick, "clusters": clusters}, load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
