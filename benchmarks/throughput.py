"""Benchmark 4: completed oracle episodes per second and memory per episode under concurrency.

Episodes run in one asyncio event loop through ``termgym.areset`` / ``astep`` (the path veRL
agent loops use): reset, the task's oracle actions, submit, grade. At each concurrency level that
many episodes start at once (level 1 runs two, one after the other; quick mode runs one); the level's throughput is
episodes whose grade passed divided by the wall time of the level. Levels rise (1, 8, 32, 64,
128, 256) until something breaks: an exception, a failed grade, or the level's time budget; the report says
what broke and does not go higher for that backend. A level's budget is 180 s, or 1.5× the time its
episodes need at the rate the backend sustained one level down when that is longer (at most
:data:`MAX_BUDGET`): on 2 cores 256 SWE-SYNTH episodes need minutes whatever the backend, and the
level asks whether they all complete without an error, not whether they fit a fixed clock.

Two workloads: **SWE-SYNTH** (a real oracle fix, graded by the repository's test suite in a fresh
sandbox: dominated by pytest's CPU time) and **light** (a custom ``CommandTask``: one command and a
``grep`` grader, so the numbers show termgym's own overhead). Docker runs beside local at every level
(its sandboxes from the process-wide warm pool, as by default); goals (issue 28): the top level on
both backends without an error, and Docker's SWE-SYNTH throughput at 64 concurrent ≥ 70 % of local's.
At one level (8 concurrent; 4 in quick mode) the Docker engine API calls this process makes are
counted per episode by endpoint: each container and each ``docker exec`` costs the engine CPU that
the episodes then do not get.

Scaling (full runs): the same oracle episodes with the benchmark pinned to 1, 2, ... all cores
(``sched_setaffinity``, inherited by every sandbox process) and driven by one Python process or by
one per core (each its own event loop). Efficiency = episodes/s ÷ (cores × the 1-core, 1-process
rate). One driving process costs a few milliseconds of its own CPU per episode (starting
bubblewrap, building roots, parsing results, all under one GIL), which caps it near 150-180 light
episodes/s however many cores there are: several drivers (veRL's agent-loop workers, the Ray
evaluation runner) lift that cap.

Memory is sampled every 0.1 s during a level: for local sandboxes the resident memory (RSS) of
every process under this one (bubblewrap, the sandbox shells and what they run); for Docker the
anonymous memory of this run's containers (cgroup ``total_rss``) plus their containerd shims.
Memory per episode = (peak − the level's starting value) / concurrency; RSS counts shared pages
once per process, so the local figure is an upper bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import time
from pathlib import Path

from benchmarks.common import Context, Goal, Section, Table
from benchmarks.plots import lines

NAME = "throughput"
TITLE = "Throughput and memory under concurrency"
#: The longest a level may run, in seconds, however slow the level below it was.
MAX_BUDGET = 300.0


def level_budget(base: float, episodes: int, previous_rate: float | None) -> float:
    """A level's time budget: ``base``, or 1.5× what ``episodes`` need at ``previous_rate`` (episodes/s
    one level down) when that is longer, capped at :data:`MAX_BUDGET`."""
    if not previous_rate or previous_rate <= 0:
        return base
    return min(MAX_BUDGET, max(base, 1.5 * episodes / previous_rate))


class MemorySampler:
    """Samples the memory of this run's sandboxes in a background thread; ``peak`` is the maximum seen."""

    def __init__(self, backend: str, interval: float = 0.1) -> None:
        self.backend = backend
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ids: set[str] = set()
        self._shims: list = []  # psutil.Process of this run's containerd shims (refreshed with _ids)
        self._last_list = 0.0
        self._client = None

    def sample(self) -> int:
        """Bytes in use now (see the module docstring for what counts)."""
        import psutil

        if self.backend == "local":
            total = 0
            for child in psutil.Process(os.getpid()).children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            return total
        return self._docker_sample()

    def _docker_sample(self) -> int:
        import psutil

        from termgym.sandbox.docker import LABEL_SESSION, SESSION_ID
        from termgym.sandbox.docker.container import CGROUP_PARENT
        from termgym.sandbox.images import docker_client

        now = time.monotonic()
        if now - self._last_list > 0.5:  # an API call per sample would load the engine we measure
            with _suppress():
                if self._client is None:  # its own client: EngineCalls counts the shared one's calls only
                    self._client = docker_client()
                found = self._client.api.containers(all=True, quiet=True,
                                                    filters={"label": f"{LABEL_SESSION}={SESSION_ID}"})
                self._ids = {c["Id"] for c in found}
            # The containers' shims, found with the list: reading every process's command line at
            # every sample cost the run a tenth of a core, which local sandboxes did not pay.
            self._shims = []
            for proc in psutil.process_iter(["name"]):
                if (proc.info.get("name") or "").startswith("containerd-shim"):
                    with _suppress():
                        cmd = proc.cmdline()
                        if "-id" in cmd and cmd[cmd.index("-id") + 1] in self._ids:
                            self._shims.append(proc)
            self._last_list = now
        total = 0
        for cid in self._ids:
            stat = Path(f"/sys/fs/cgroup/memory/{CGROUP_PARENT}/{cid}/memory.stat")
            if not stat.exists():
                stat = Path(f"/sys/fs/cgroup/memory/docker/{cid}/memory.stat")  # Docker's own parent
            with _suppress():
                for line in stat.read_text().splitlines():
                    if line.startswith("total_rss "):
                        total += int(line.split()[1])
                        break
        for proc in self._shims:
            with _suppress():
                total += proc.memory_info().rss
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with _suppress():
                self.peak = max(self.peak, self.sample())

    def __enter__(self) -> MemorySampler:
        self.peak = 0
        self._thread = threading.Thread(target=self._loop, name="termgym-bench-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self._stop.clear()


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        return kind is not None and issubclass(kind, Exception)


async def one_episode(make_env, task_id: str) -> None:
    """Play the oracle of ``task_id`` to its grade; raise if anything fails or the grade does not pass."""
    from termgym.env import aclose, areset, astep, oracle_actions, terminal_env
    from termgym.sandbox import run_blocking

    env = make_env()
    try:
        await areset(env, options={"task_id": task_id})
        actions = await run_blocking(oracle_actions, terminal_env(env))
        info: dict = {}
        for action in actions:
            _, _, terminated, truncated, info = await astep(env, action)
            if terminated or truncated:
                break
        grade = info.get("grade")
        if not grade:
            raise RuntimeError(f"task {task_id}: the oracle episode ended without a grade")
        if not grade.get("passed"):
            raise RuntimeError(f"task {task_id}: oracle graded as failing ({grade.get('all_result', '')} "
                               f"{grade.get('error') or ''})".strip())
    finally:
        await aclose(env)


async def run_level(make_env, task_ids: list[str], concurrency: int, budget: float, quick: bool = False) -> dict:
    """Run one level; returns passed count, wall seconds and the errors (strings)."""
    count = concurrency if concurrency > 1 or quick else 2
    semaphore = asyncio.Semaphore(concurrency)

    async def guarded(i: int) -> None:
        async with semaphore:
            await one_episode(make_env, task_ids[i % len(task_ids)])

    started = time.monotonic()
    tasks = [asyncio.ensure_future(guarded(i)) for i in range(count)]
    done, pending = await asyncio.wait(tasks, timeout=budget)
    errors: list[str] = []
    for task in pending:
        task.cancel()
    if pending:
        errors.append(f"{len(pending)} of {count} episodes still running after the level's budget of {budget:.0f} s")
        await asyncio.wait(pending, timeout=60)
    for task in done:
        exc = task.exception()
        if exc is not None:
            errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
    wall = time.monotonic() - started
    passed = sum(1 for t in done if t.exception() is None)
    return {"episodes": count, "passed": passed, "wall_s": wall, "errors": errors}


def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, __doc__.split("\n\n", 1)[1].strip())
    from termgym import CommandTask, ListSuite
    from termgym.env import TerminalEnv

    levels = {"light": [1, 4], "swesynth": [2]} if ctx.quick else {"light": [1, 8, 32, 64, 128, 256],
                                                                     "swesynth": [1, 8, 32, 64, 128, 256]}
    budget = 120.0 if ctx.quick else 180.0
    backends = ["local"]
    docker_ok, why = ctx.docker()
    if docker_ok:
        backends.append("docker")
    else:
        section.notes.append(f"Docker rows skipped: {why}")
    swesynth = ctx.swesynth_suite()
    light = ListSuite([CommandTask(f"light-{i}", f"Write {i} to out.txt.", grade_command=f"grep -qx {i} out.txt",
                                   oracle=[f"echo {i} > out.txt"]) for i in range(8)], name="light")
    workloads = {"light": (light, list(light.task_ids())), "swesynth": (swesynth, ctx.swesynth_task_ids(4))}
    cores = len(os.sched_getaffinity(0))
    table = Table("Completed oracle episodes per second (passed episodes / wall time of the level)",
                  ["workload", "backend", "cores", "concurrency", "episodes", "passed", "wall s", "episodes/s",
                   "peak MB", "MB per episode", "errors"])
    data: dict = {}
    broke: list[str] = []
    # Engine API calls per episode, counted at one level (after the pool's first fill, before load)
    calls_level = 4 if ctx.quick else 8
    engine_calls: dict[str, tuple[dict[str, float], int]] = {}
    for workload, (suite, task_ids) in workloads.items():
        for backend in backends:
            def make_env(suite=suite, backend=backend):
                return TerminalEnv(suite, backend=backend, max_steps=10)

            previous_rate = None
            for level in levels[workload]:
                level_s = level_budget(budget, level, previous_rate)
                ctx.log(f"  {workload} / {backend}: {level} concurrent (budget {level_s:.0f} s)")
                sampler = MemorySampler(backend)
                baseline = sampler.sample()
                counting = backend == "docker" and level == calls_level
                with sampler, (EngineCalls() if counting else contextlib.nullcontext()) as calls:
                    result = asyncio.run(run_level(make_env, task_ids, level, level_s, ctx.quick))
                if counting:
                    engine_calls[workload] = ({k: v / result["episodes"] for k, v in calls.counts.items()},
                                              result["episodes"])
                peak = max(sampler.peak, baseline)
                per_episode = (peak - baseline) / level / 2**20
                rate = result["passed"] / result["wall_s"] if result["wall_s"] > 0 else 0.0
                previous_rate = rate
                errors = result["errors"]
                table.add(workload, backend, cores, level, result["episodes"], result["passed"], f"{result['wall_s']:.1f}",
                          f"{rate:.2f}", f"{peak / 2**20:.0f}", f"{per_episode:.1f}", len(errors))
                data.setdefault(workload, {}).setdefault(backend, {})[level] = {
                    **result, "episodes_per_s": round(rate, 3), "peak_bytes": peak, "baseline_bytes": baseline,
                    "mb_per_episode": round(per_episode, 2)}
                if errors:
                    broke.append(f"{workload} / {backend} broke at {level} concurrent episodes: "
                                 f"{len(errors)} error(s), first: {errors[0]}")
                    break
    section.tables.append(table)
    top = max(max(v) for v in levels.values())
    section.notes += broke or [f"Nothing broke up to {top} concurrent episodes on any backend and workload."]
    section.data = data
    if "docker" in backends:
        section.tables.append(_docker_vs_local(data, levels))
    if engine_calls:
        endpoints = sorted({k for counts, _ in engine_calls.values() for k in counts},
                           key=lambda k: (-max(c.get(k, 0) for c, _ in engine_calls.values()), k))
        calls_table = Table(f"Docker engine API calls per episode (calls made while the {calls_level}-episode level "
                            f"ran, over its episodes: the warm pool's fill ahead for later episodes included, "
                            f"removals still under way at its end not; container and exec ids folded into {{id}})",
                            ["endpoint", *engine_calls])
        for endpoint in endpoints:
            calls_table.add(f"`{endpoint}`", *(f"{counts.get(endpoint, 0):.2f}" for counts, _ in engine_calls.values()))
        section.tables.append(calls_table)
    if not ctx.quick:
        scaling_table, scaling_data = scaling(swesynth_dir=None, cache_dir=str(ctx.scratch / "swesynth-cache"),
                                              log=ctx.log)
        section.tables.append(scaling_table)
        section.data = {**data, "scaling": scaling_data}
    for workload in workloads:
        top = levels[workload][-1]
        for backend in backends:
            got = data.get(workload, {}).get(backend, {}).get(top)
            ok = bool(got) and not got["errors"] and got["passed"] == got["episodes"]
            section.goals.append(Goal(f"{top} concurrent {backend} {workload} episodes on {cores} cores without errors",
                                      float(got["passed"]) if got else float("nan"),
                                      f"{top} of {top} pass, 0 errors", ok, unit="passed"))
    if "docker" in backends:
        level = 64 if 64 in levels["swesynth"] else levels["swesynth"][-1]
        local = data.get("swesynth", {}).get("local", {}).get(level)
        docker = data.get("swesynth", {}).get("docker", {}).get(level)
        share = (docker["episodes_per_s"] / local["episodes_per_s"] if local and docker and local["episodes_per_s"]
                 else float("nan"))
        section.goals.append(Goal(f"SWE-SYNTH throughput docker / local at {level} concurrent", share * 100,
                                  "≥ 70 %", share >= 0.7 if share == share else None, unit="%"))
    if engine_calls:
        section.data = {**section.data, "engine_calls_per_episode": {w: c for w, (c, _) in engine_calls.items()}}
    path = ctx.out_dir / "throughput.png"
    series = {}
    memory = {}
    for workload, by_backend in data.items():
        for backend, by_level in by_backend.items():
            xs = sorted(by_level)
            series[f"{workload} / {backend}"] = (xs, [by_level[x]["episodes_per_s"] for x in xs])
            memory[f"{workload} / {backend}"] = (xs, [by_level[x]["mb_per_episode"] for x in xs])
    lines(path, "Oracle episodes under concurrency", "concurrent episodes", series, "episodes per second",
          memory, "MB per episode (peak)")
    section.plots.append(path.name)
    return section


class EngineCalls:
    """Counts the Docker engine API calls this process makes while active, by method and endpoint
    (container and exec ids folded), through a response hook on the shared SDK client's session."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._session = None

    def _hook(self, response, *args, **kwargs) -> None:
        import re

        path = response.request.path_url.split("?", 1)[0]
        path = re.sub(r"^/v[0-9.]+", "", path)
        path = re.sub(r"/[0-9a-f]{64}(?=/|$)", "/{id}", path)
        with self._lock:
            key = f"{response.request.method} {path}"
            self.counts[key] = self.counts.get(key, 0) + 1

    def __enter__(self) -> EngineCalls:
        from termgym.sandbox.docker import get_client

        self._session = get_client().api
        self._session.hooks["response"].append(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self._session.hooks["response"].remove(self._hook)


def _docker_vs_local(data: dict, levels: dict[str, list[int]]) -> Table:
    """Episodes/s of both backends side by side per workload and level, with docker / local."""
    table = Table("Docker beside local (episodes/s at each level; — where a backend stopped earlier)",
                  ["workload", "concurrency", "local", "docker", "docker / local"])
    for workload, by_level in levels.items():
        for level in by_level:
            local = data.get(workload, {}).get("local", {}).get(level)
            docker = data.get(workload, {}).get("docker", {}).get(level)
            if not local and not docker:
                continue
            ratio = (f"{docker['episodes_per_s'] / local['episodes_per_s']:.0%}"
                     if local and docker and local["episodes_per_s"] else "—")
            table.add(workload, level, f"{local['episodes_per_s']:.2f}" if local else "—",
                      f"{docker['episodes_per_s']:.2f}" if docker else "—", ratio)
    return table


# -- scaling over cores and driving processes ----------------------------------------------------


def _light_suite():
    from termgym import CommandTask, ListSuite

    return ListSuite([CommandTask(f"light-{i}", f"Write {i} to out.txt.", grade_command=f"grep -qx {i} out.txt",
                                  oracle=[f"echo {i} > out.txt"]) for i in range(8)], name="light")


def _driver(workload: str, cpus: list[int], concurrency: int, episodes: int, start_at: float,
            cache_dir: str, task_ids: list[str]) -> dict:
    """One driving process: pinned to ``cpus``, warmed up, then ``episodes`` oracle episodes at ``start_at``."""
    os.sched_setaffinity(0, cpus)
    from termgym.env import TerminalEnv

    if workload == "light":
        suite = _light_suite()
    else:
        from termgym.tasks.swesynth import TOY_DIR, SweSynthSuite

        suite = SweSynthSuite(TOY_DIR, cache_dir=cache_dir, behaviour="any")

    def make_env():
        return TerminalEnv(suite, max_steps=10)

    asyncio.run(run_level(make_env, task_ids, 1, 300.0, quick=True))  # imports, caches, first sandbox
    time.sleep(max(0.0, start_at - time.time()))
    started = time.time()

    async def level() -> dict:
        semaphore = asyncio.Semaphore(concurrency)
        errors: list[str] = []

        async def guarded(i: int) -> None:
            async with semaphore:
                try:
                    await one_episode(make_env, task_ids[i % len(task_ids)])
                except Exception as exc:  # counted, not raised: the level reports its errors
                    errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

        await asyncio.gather(*(guarded(i) for i in range(episodes)))
        return {"passed": episodes - len(errors), "errors": errors}

    result = asyncio.run(level())
    return {**result, "started": started, "ended": time.time()}


def scaling_point(workload: str, cores: int, drivers: int, concurrency: int, episodes: int, *,
                  cache_dir: str, task_ids: list[str]) -> dict:
    """Episodes/s with the run pinned to the first ``cores`` CPUs and split over ``drivers`` processes."""
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 8.0 + 2.0 * drivers  # after every driver has started and warmed up
    with ctx.Pool(drivers) as pool:
        jobs = [pool.apply_async(_driver, (workload, cpus, max(1, concurrency // drivers), episodes // drivers,
                                           start_at, cache_dir, task_ids)) for _ in range(drivers)]
        results = [job.get(timeout=900) for job in jobs]
    wall = max(r["ended"] for r in results) - min(r["started"] for r in results)
    passed = sum(r["passed"] for r in results)
    errors = [e for r in results for e in r["errors"]]
    late = min(r["started"] for r in results) > start_at + 1.0  # a driver missed the common start
    return {"workload": workload, "cores": cores, "drivers": drivers, "concurrency": concurrency,
            "episodes": episodes, "passed": passed, "wall_s": round(wall, 3),
            "episodes_per_s": round(passed / wall, 3) if wall > 0 else 0.0, "errors": errors, "late_start": late}


def scaling(*, swesynth_dir=None, cache_dir: str, log=print, light_episodes: int = 256,
            swesynth_episodes: int = 32) -> tuple[Table, list[dict]]:
    """The scaling table: 1, 2, ... all cores (doubling), one driver vs one per core."""
    from termgym.tasks.swesynth import TOY_DIR, SweSynthSuite

    total = len(os.sched_getaffinity(0))
    core_counts = sorted({1, *[c for c in (2, 4, 8, 16, 32, 64) if c < total], total})
    ids = list(SweSynthSuite(TOY_DIR, cache_dir=cache_dir, behaviour="any").task_ids("all"))
    work = {"light": ([f"light-{i}" for i in range(8)], light_episodes),
            "swesynth": ([ids[int(i * len(ids) / 4)] for i in range(4)], swesynth_episodes)}
    table = Table("Scaling over cores (taskset) and driving processes",
                  ["workload", "cores", "drivers", "concurrency", "episodes", "passed", "episodes/s",
                   "efficiency vs 1 core", "errors"])
    rows: list[dict] = []
    for workload, (task_ids, episodes) in work.items():
        base = None
        for cores in core_counts:
            for drivers in sorted({1, cores}):
                concurrency = min(episodes, 16 * cores)
                log(f"  scaling {workload}: {cores} core(s), {drivers} driver(s), {concurrency} concurrent")
                row = scaling_point(workload, cores, drivers, concurrency, episodes, cache_dir=cache_dir,
                                    task_ids=task_ids)
                if cores == 1:
                    base = row["episodes_per_s"]
                row["efficiency"] = round(row["episodes_per_s"] / (cores * base), 3) if base else None
                rows.append(row)
                table.add(workload, cores, drivers, concurrency, episodes, row["passed"], f"{row['episodes_per_s']:.2f}",
                          f"{row['efficiency']:.0%}" if row["efficiency"] is not None else "-", len(row["errors"]))
    return table, rows


if __name__ == "__main__":  # python -m benchmarks.throughput: the scaling table alone
    import json
    import sys
    import tempfile

    cache = tempfile.mkdtemp(prefix="termgym-scaling-")
    light_n, swe_n = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (256, 32)))
    result_table, result_rows = scaling(cache_dir=cache, light_episodes=light_n, swesynth_episodes=swe_n,
                                        log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(result_rows, indent=1))
