"""Episodes per second with the sandboxes on one Ray sandbox node and on two, side by side in one run.

    python -m benchmarks.ray_scaling [--quick] [--slots 1] [--out DIR]

One cluster on this host (:func:`termgym.remote.local_cluster.local_cluster`): a head without sandbox
slots and two sandbox nodes, each with ``--slots`` slots of ``termgym_sandbox``. The first node also
offers the same number of ``bench_node_a``, so the same cluster serves both settings:

* **one node** — every env asks for ``{"bench_node_a": 1}``: all episodes on node A, ``slots`` at once;
* **two nodes** — every env asks for ``{"termgym_sandbox": 1}``: Ray spreads them over A and B,
  ``2 x slots`` at once.

An episode (``gym.make(..., ray=...)``, one actor per env kept across its episodes, so actor start-up
is paid once per setting, not per episode; the one-node actors hold ``bench_node_a``, not a
``termgym_sandbox`` slot, so both settings' actors stay up side by side and only one setting plays at a time) is a reset, one step whose command burns CPU in the
sandbox (a shell loop of :data:`BURN_ITERATIONS`) and a submission, graded by ``true``. The settings
alternate in rounds (one, two, one, two...) so a busy minute on a shared machine hits both; the
reported figure is episodes per second per setting over all its rounds and their ratio (two / one).

What the ratio says: with the nodes on one machine they share its cores, so two nodes scale only as
far as the host has idle cores for the second node's sandboxes (a 2-core host, one slot a node:
at most 2x, less the raylets' and actors' own CPU). Across real machines each node brings its own
cores: there the ratio is what the head and the driver's side add, not the sandboxes.
Writes ``ray_scaling.json`` into ``--out`` (default ``$OUT`` or the current directory).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

from benchmarks.common import write_run_json

ENV_ID = "termgym-bench/RayScaling-v0"
BURN_ITERATIONS = 300_000  # about 1 s of one core in the sandbox
BURN = f"i=0; while [ $i -lt {BURN_ITERATIONS} ]; do i=$((i+1)); done; echo burned $i"
WORK = f"THOUGHT: do the work.\n\n```bash\n{BURN}\n```"
SUBMIT = "THOUGHT: done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"one node": {"bench_node_a": 1}, "two nodes": {"termgym_sandbox": 1}}


def burn_suite() -> object:
    """The benchmark's tasks (an import path, so every sandbox node builds its own)."""
    from termgym import CommandTask, ListSuite

    return ListSuite([CommandTask(f"burn-{i}", "Do the work, then submit.", grade_command="true") for i in range(4)])


def register() -> None:
    import gymnasium as gym

    import termgym

    if ENV_ID not in gym.registry:
        termgym.register_suite(ENV_ID, "benchmarks.ray_scaling:burn_suite", max_steps=3)


def play(env, episodes: int, done: list[float]) -> None:
    """Play ``episodes`` episodes on ``env``; append each one's end time."""
    for k in range(episodes):
        env.reset(options={"task_id": f"burn-{k % 4}"})
        observation = env.step(WORK)[0]
        if f"burned {BURN_ITERATIONS}" not in observation:
            raise RuntimeError(f"the work step returned {observation[:300]!r}")
        *_, terminated, truncated, info = env.step(SUBMIT)
        if not (terminated and info["grade"]["passed"]):
            raise RuntimeError(f"the episode did not end graded: {info.get('end_reason')}, {info.get('grade')}")
        done.append(time.monotonic())


def round_rate(envs: list, per_env: int) -> tuple[int, float]:
    """All ``envs`` play ``per_env`` episodes each at once: (episodes, seconds)."""
    done: list[float] = []
    errors: list[BaseException] = []

    def run(env) -> None:
        try:
            play(env, per_env, done)
        except BaseException as exc:  # reported below, with the round
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(env,)) for env in envs]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(envs)} envs failed: {errors[0]!r}") from errors[0]
    return len(done), time.monotonic() - started


def measure(*, slots: int, rounds: int, per_env: int) -> dict[str, dict]:
    """Start the cluster, warm every env (its actor started, one episode played), alternate the settings."""
    import gymnasium as gym
    import ray

    from termgym.remote.local_cluster import local_cluster

    register()
    workers = [{"termgym_sandbox": slots, "bench_node_a": slots}, {"termgym_sandbox": slots}]
    with local_cluster(workers=2, worker_resources=workers, pythonpath=[ROOT]) as cluster, cluster.driver_env():
        ray.init(**cluster.init_options(), configure_logging=False, log_to_driver=False)
        try:
            cluster.identify()
            envs = {name: [gym.make(ENV_ID, ray={"resources": resources}) for _ in range(slots * (1 + (name == "two nodes")))]
                    for name, resources in SETTINGS.items()}
            placed = {}
            for name, group in envs.items():
                round_rate(group, 1)  # warm-up: actors started, first episode played
                placed[name] = sorted(env.unwrapped.remote_node["node_id"] for env in group)
            names = {cluster.workers[0].node_id: "A", cluster.workers[1].node_id: "B"}
            totals = {name: {"episodes": 0, "seconds": 0.0, "round_rates": []} for name in SETTINGS}
            for _ in range(rounds):
                for name, group in envs.items():
                    n, seconds = round_rate(group, per_env)
                    totals[name]["episodes"] += n
                    totals[name]["seconds"] += seconds
                    totals[name]["round_rates"].append(round(n / seconds, 3))
            for group in envs.values():
                for env in group:
                    env.close()
        finally:
            ray.shutdown()
    for name, total in totals.items():
        total["episodes_per_s"] = round(total["episodes"] / total["seconds"], 3)
        total["seconds"] = round(total["seconds"], 2)
        total["envs"] = len(envs[name])
        total["sandbox_nodes"] = [names[node] for node in placed[name]]
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray_scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 episodes an env (default 5 of 4)")
    parser.add_argument("--slots", type=int, default=1, help="sandbox slots per node (default 1)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="where ray_scaling.json goes")
    args = parser.parse_args(argv)
    if args.slots < 1:
        parser.error("--slots must be at least 1")
    rounds, per_env = (2, 2) if args.quick else (5, 4)
    load_before = [round(x, 2) for x in os.getloadavg()]
    totals = measure(slots=args.slots, rounds=rounds, per_env=per_env)
    ratio = totals["two nodes"]["episodes_per_s"] / totals["one node"]["episodes_per_s"]
    print("\n| setting | sandbox nodes used | envs | episodes | seconds | episodes/s | per round |\n|---|---|---|---|---|---|---|")
    for name, t in totals.items():
        print(f"| {name} | {' '.join(sorted(set(t['sandbox_nodes'])))} | {t['envs']} | {t['episodes']} | {t['seconds']} | "
              f"{t['episodes_per_s']} | {' '.join(map(str, t['round_rates']))} |")
    print(f"\ntwo nodes / one node: {ratio:.2f}x episodes per second ({os.cpu_count()} cores on this host)")
    write_run_json(args.out, "ray_scaling.json", {"quick": args.quick, "slots_per_node": args.slots,
                   "burn_iterations": BURN_ITERATIONS, "settings": totals,
                   "ratio_two_over_one": round(ratio, 3)}, load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
