"""The local backend's scaling over cores, one driving process per core, for a many-core host.

    python -m benchmarks.device_scaling --out DIR [--cores 1,2,4,8,16] [--seconds 20] [--concurrency 16]

For each core count ``c`` the run is pinned to the first ``c`` CPUs (``sched_setaffinity``,
inherited by every sandbox process) and split over ``c`` driving processes, each its own asyncio
event loop running ``--concurrency`` light oracle episodes at a time (reset, one command, submit,
a ``grep`` grade: termgym's own overhead, as the throughput benchmark's *light* workload) for
``--seconds`` after a common start. It writes ``device_scaling.json`` into ``--out`` (default
``$OUT``): the machine, the load, and per core count the episodes that passed, errors, episodes/s
and the efficiency against one core (episodes/s ÷ (cores × the 1-core rate)).

Beside each point, the same core count spawns bare bubblewrap sandboxes (``bwrap --unshare-all``
over the host's ``/usr`` running ``true``; ``--raw-threads`` at a time per driver) for
``--raw-seconds``: the kernel's own rate of making a namespaced sandbox on those cores, which
bounds what any bubblewrap-based environment can reach. Where the episode curve flattens with the
raw curve, the limit is the host kernel, not termgym.

Made for a host without network or Docker (a GPU machine lent for a few minutes): it needs
bubblewrap (``dpkg -i bubblewrap_*.deb``) and termgym's Python dependencies, nothing else. When
termgym's pinned task runtime is not built there, the sandboxes run on the host's ``/usr``
(``TERMGYM_RUNTIME=host``; the light task needs only bash and grep) and the JSON says so. With the
defaults five core counts take about 4 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path


def _light_suite():
    from termgym import CommandTask, ListSuite

    return ListSuite([CommandTask(f"light-{i}", f"Write {i} to out.txt.", grade_command=f"grep -qx {i} out.txt",
                                  oracle=[f"echo {i} > out.txt"]) for i in range(8)], name="light")


def _driver(cpus: list[int], concurrency: int, start_at: float, seconds: float) -> dict:
    """One driving process: pinned, warmed up, then episodes without pause from ``start_at`` for ``seconds``."""
    os.sched_setaffinity(0, cpus)
    from benchmarks.throughput import one_episode
    from termgym.env import TerminalEnv

    suite = _light_suite()
    ids = list(suite.task_ids())

    def make_env():
        return TerminalEnv(suite, backend="local", max_steps=10)

    asyncio.run(one_episode(make_env, ids[0]))  # imports, caches, a first sandbox
    time.sleep(max(0.0, start_at - time.time()))
    # A driver whose warm-up ran past the common start (a loaded host) still measures its full
    # ``seconds`` from when it is ready; the point then says ``late_start``.
    begin = max(start_at, time.time())

    async def run() -> dict:
        stop = begin + seconds
        passed, errors, ends = 0, [], []

        async def worker(w: int) -> None:
            nonlocal passed
            i = w
            while time.time() < stop:
                try:
                    await one_episode(make_env, ids[i % len(ids)])
                    passed += 1
                except Exception as exc:  # counted, not raised: the point reports its errors
                    errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                ends.append(time.time())
                i += concurrency

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        return {"passed": passed, "errors": errors, "last_end": max(ends, default=time.time())}

    result = asyncio.run(run())
    return {**result, "started": begin}


#: A bare sandbox: every namespace unshared, the host's /usr read-only, /proc, /dev and a tmpfs /tmp.
RAW_BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"]


def _raw_driver(cpus: list[int], threads: int, start_at: float, seconds: float) -> dict:
    """One driving process spawning bare bubblewrap sandboxes, ``threads`` at a time, for ``seconds``."""
    os.sched_setaffinity(0, cpus)
    import threading

    counts, failures = [0] * threads, [0] * threads
    time.sleep(max(0.0, start_at - time.time()))
    stop = start_at + seconds

    def loop(t: int) -> None:
        while time.time() < stop:
            done = subprocess.run(RAW_BWRAP, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, check=False)
            if done.returncode == 0:
                counts[t] += 1
            else:
                failures[t] += 1

    workers = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {"spawned": sum(counts), "failed": sum(failures), "ended": time.time()}


def raw_point(cores: int, threads: int, seconds: float) -> dict:
    """Bare bubblewrap sandboxes per second on the first ``cores`` CPUs, one driver per core."""
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 2.0 + 0.2 * cores
    with ctx.Pool(cores) as pool:
        jobs = [pool.apply_async(_raw_driver, (cpus, threads, start_at, seconds)) for _ in range(cores)]
        results = [job.get(timeout=seconds + 120) for job in jobs]
    wall = max(r["ended"] for r in results) - start_at
    spawned = sum(r["spawned"] for r in results)
    return {"spawned": spawned, "failed": sum(r["failed"] for r in results),
            "sandboxes_per_s": round(spawned / wall, 1) if wall > 0 else 0.0}


def point(cores: int, concurrency: int, seconds: float, lead: float | None = None) -> dict:
    """Episodes/s with the run on the first ``cores`` CPUs, one driver per core.

    The drivers start together ``lead`` seconds from now (by default once each has started and
    warmed up); one that is not ready by then measures from when it is, and the row says ``late_start``.
    """
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + (6.0 + 0.5 * cores if lead is None else lead)
    with ctx.Pool(cores) as pool:
        jobs = [pool.apply_async(_driver, (cpus, concurrency, start_at, seconds)) for _ in range(cores)]
        results = [job.get(timeout=seconds + 300) for job in jobs]
    wall = max(r["last_end"] for r in results) - min(r["started"] for r in results)
    passed = sum(r["passed"] for r in results)
    errors = [e for r in results for e in r["errors"]]
    return {"cores": cores, "drivers": cores, "concurrency_per_driver": concurrency, "passed": passed,
            "errors": len(errors), "first_errors": errors[:3], "wall_s": round(wall, 2),
            "episodes_per_s": round(passed / wall, 2) if wall > 0 else 0.0,
            "late_start": max(r["started"] for r in results) > start_at + 1.0}


def runtime_mode() -> str:
    """``"pinned"`` when termgym's task runtime is built here, else ``"host"`` (set for the drivers too)."""
    from termgym.sandbox import runtime as task_runtime

    if os.environ.get("TERMGYM_RUNTIME") == "host":
        return "host"
    try:
        task_runtime.require_runtime()
        return "pinned"
    except Exception:  # noqa: BLE001 - RuntimeMissing: substitute the host's /usr
        os.environ["TERMGYM_RUNTIME"] = "host"
        return "host"


def machine() -> dict:
    from benchmarks.common import cpu_model, memory_gib

    try:
        bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        bwrap = "not installed"
    return {"cpu_model": cpu_model(), "cores": len(os.sched_getaffinity(0)), "memory_gib": memory_gib(),
            "kernel": platform.release(), "python": platform.python_version(), "bubblewrap": bwrap,
            "hostname": platform.node()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device_scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT"), help="where device_scaling.json goes (default: $OUT)")
    parser.add_argument("--cores", default="1,2,4,8,16", help="core counts, comma-separated (capped at the CPUs here)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per core count")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent episodes per driving process")
    parser.add_argument("--raw-seconds", type=float, default=8.0,
                        help="seconds of bare bubblewrap spawns per core count (0: skip that baseline)")
    parser.add_argument("--raw-threads", type=int, default=4, help="bare sandboxes spawned at a time per driver")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out is required when $OUT is not set")
    try:
        wanted = sorted({int(c) for c in args.cores.split(",") if c.strip()})
    except ValueError:
        parser.error(f"--cores must be comma-separated integers, not {args.cores!r}")
    if not wanted or wanted[0] < 1 or args.seconds <= 0 or args.concurrency < 1 or args.raw_threads < 1:
        parser.error("--cores, --seconds, --concurrency and --raw-threads must be positive")
    if args.raw_seconds < 0:
        parser.error("--raw-seconds must not be negative")
    if shutil.which("bwrap") is None:
        print("bubblewrap is not installed: `dpkg -i bubblewrap_*.deb` (or apt-get install bubblewrap) first",
              file=sys.stderr)
        return 2
    available = len(os.sched_getaffinity(0))
    counts = [c for c in wanted if c <= available]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join(["python -m benchmarks.device_scaling", *(argv or sys.argv[1:])]),
              "runtime": runtime_mode(), "machine": machine(), "seconds_per_point": args.seconds,
              "skipped_core_counts": [c for c in wanted if c > available],
              "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "points": []}
    base = raw_base = None
    for cores in counts:
        print(f"{cores} core(s), {cores} driver(s) x {args.concurrency} concurrent ...", file=sys.stderr, flush=True)
        row = point(cores, args.concurrency, args.seconds)
        if base is None:
            base = row["episodes_per_s"] / cores
        row["efficiency_vs_1_core"] = round(row["episodes_per_s"] / (cores * base), 3) if base else None
        if args.raw_seconds > 0:
            raw = raw_point(cores, args.raw_threads, args.raw_seconds)
            if raw_base is None:
                raw_base = raw["sandboxes_per_s"] / cores
            raw["efficiency_vs_1_core"] = round(raw["sandboxes_per_s"] / (cores * raw_base), 3) if raw_base else None
            row["raw_bwrap"] = raw
        row["load_average"] = [round(x, 2) for x in os.getloadavg()]
        report["points"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        (out / "device_scaling.json").write_text(json.dumps(report, indent=1) + "\n")  # partial results survive
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    (out / "device_scaling.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out / 'device_scaling.json'}", file=sys.stderr)
    failed = [p for p in report["points"] if p["errors"] or p.get("raw_bwrap", {}).get("failed")]
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
