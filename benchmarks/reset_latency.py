"""Benchmark 2: how long until a SWE-SYNTH episode can act, and what a container start costs.

**SWE-SYNTH reset.** ``TerminalEnv.reset(options={"task_id": ...})`` until the sandbox holds the
buggy repository and the first command can run: local (bubblewrap; sandbox root where termgym puts
it by default — a roomy tmpfs such as /dev/shm when there is one — and on the temp directory's disk),
Docker without a pool (``pool_size=0``: a container made for the reset), and Docker with a warm pool
(refilled between resets, as it is while an agent works). The anchor is what a user does by hand:
``docker run`` plus ``docker cp`` of the same prepared repository. Goals (issue 28): a warm-pool
Docker reset at most 2× the local one, a cold one no slower than ``docker run`` + ``docker cp``. The previous episode is
closed before each timed reset (its close time is reported separately); the first reset of each
method, which also builds the prepared-repository cache, is not counted.

The local rows run on the pinned task runtime; one row runs the same sandbox on the host's ``/usr``
(``runtime="host"``) for comparison.

**Container start** (issue 3): ``docker run -d --rm --network none --init IMAGE sleep infinity``
through the CLI against ``DockerSandbox`` start plus a first ``exec``, without a pool and with a
warm one, and the local sandbox for reference.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable

from benchmarks.common import (
    MS_COLUMNS,
    Context,
    Goal,
    Samples,
    Section,
    Table,
    filesystem_type,
    ms_cells,
    temp_root,
)
from benchmarks.plots import latency_bars

NAME = "reset"
TITLE = "Reset latency (SWE-SYNTH) and container start"


def _wait_for_pool(pool, spec, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while pool.ready_count(spec) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)


def _rounds(methods: dict[str, tuple[Callable[[], None], Callable[[], None]]], n: int, rounds: int) -> dict[str, Samples]:
    """``methods``: name -> (prepare, act); only ``act`` is timed. Batches alternate between methods."""
    out = {name: Samples() for name in methods}
    per_round = [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]
    for count in per_round:
        for name, (prepare, act) in methods.items():
            for _ in range(count):
                prepare()
                started = time.perf_counter()
                act()
                out[name].add(time.perf_counter() - started)
    return out


def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, __doc__.split("\n\n", 1)[1].strip())
    from termgym.env import TerminalEnv
    from termgym.tasks.swesynth.task import prepare_workspace

    suite = ctx.swesynth_suite()
    task_id = ctx.swesynth_task_ids(1)[0]
    section.notes.append(f"Task `{task_id}` from {ctx.suite_origin}.")
    n = 3 if ctx.quick else 10
    docker_ok, why = ctx.docker()
    from termgym.sandbox.local import sandbox_parent_dir

    tmp = tempfile.gettempdir()
    default_root = sandbox_parent_dir() or tmp  # where roots go unless TERMGYM_SANDBOX_DIR says otherwise
    close_times: dict[str, Samples] = {}

    with contextlib.ExitStack() as stack:
        methods: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}

        def env_method(label: str, backend: str, root: str | None = None, **sandbox_options) -> None:
            env = TerminalEnv(suite, backend=backend, sandbox_options=sandbox_options or None)
            stack.callback(env.close)
            closes = close_times.setdefault(label, Samples())

            def prepare() -> None:
                started = time.perf_counter()
                env.close()
                closes.add(time.perf_counter() - started)

            def act() -> None:
                with temp_root(root):
                    _, info = env.reset(options={"task_id": task_id})
                if info["task_id"] != task_id:
                    raise RuntimeError(f"{label}: reset gave task {info['task_id']!r}, not {task_id!r}")

            act()  # builds the prepared-repository cache; not counted
            prepare()
            closes.values.clear()
            methods[label] = (prepare, act)

        env_method(f"termgym local (default: root in {default_root}, {filesystem_type(default_root)})", "local")
        if default_root != tmp:  # also on the temp directory's disk, as without a roomy tmpfs
            env_method(f"termgym local (root in {tmp}, {filesystem_type(tmp)})", "local", root=tmp)
        # the same sandbox on this host's /usr instead of the pinned task runtime (issue 20)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            env_method("local on the host's /usr (runtime='host')", "local", runtime="host")
        if docker_ok:
            from termgym.sandbox.docker.pool import WarmPool
            from termgym.sandbox.images import DEFAULT_BASE_IMAGE

            env_method("termgym docker (no pool)", "docker", pool_size=0)
            pool = WarmPool(size=2)
            stack.callback(pool.close)
            spec = suite.load(task_id).sandbox_spec()
            pool.warm(spec)
            env_method("termgym docker + warm pool", "docker", pool=pool)
            warm_prepare, warm_act = methods["termgym docker + warm pool"]

            def warm_prepare_and_refill() -> None:
                warm_prepare()
                _wait_for_pool(pool, spec)  # an agent's episode leaves the pool time to refill

            methods["termgym docker + warm pool"] = (warm_prepare_and_refill, warm_act)

            tree = prepare_workspace(suite.record(task_id), suite.cache_dir)
            workdir = suite.record(task_id).workdir
            made: list[str] = []

            def cli_remove() -> None:
                while made:
                    subprocess.run(["docker", "rm", "-f", made.pop()], capture_output=True)

            def cli_run_and_copy() -> None:
                cid = subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", "--init",
                                      DEFAULT_BASE_IMAGE, "sleep", "infinity"], check=True, capture_output=True,
                                     text=True).stdout.strip()
                made.append(cid)
                subprocess.run(["docker", "cp", f"{tree}/.", f"{cid}:{workdir}"], check=True, capture_output=True)

            stack.callback(cli_remove)
            methods["raw docker run + docker cp"] = (cli_remove, cli_run_and_copy)
            hits_before = pool.hits
        else:
            section.notes.append(f"Docker rows skipped: {why}")

        ctx.log(f"  {len(methods)} reset methods x{n}")
        resets = _rounds(methods, n, rounds=min(n, 3))
        if docker_ok:
            section.notes.append(f"Warm pool: {pool.hits - hits_before} of {n} timed resets took a pooled "
                                 f"container (pool size 2).")
        starts = _container_starts(ctx, section, stack, docker_ok)

    reset_table = Table("SWE-SYNTH reset until the first command can run", ["method", *MS_COLUMNS,
                                                                              "close ms (median)"])
    for name, s in resets.items():
        close = close_times.get(name)
        reset_table.add(name, *ms_cells(s), ms_cells(close)[0] if close and close.n else "—")
    section.tables.append(reset_table)
    section.data["reset"] = {name: s.summary_ms() for name, s in resets.items()}
    if starts:
        start_table = Table("Container / sandbox start until the first command has run", ["method", *MS_COLUMNS])
        for name, s in starts.items():
            start_table.add(name, *ms_cells(s))
        section.tables.append(start_table)
        section.data["start"] = {name: s.summary_ms() for name, s in starts.items()}

    local_names = [name for name in resets if name.startswith("termgym local")]
    for name in local_names:
        median = resets[name].median * 1000
        section.goals.append(Goal(f"SWE-SYNTH reset median, {name}", median, "≤ 50 ms", median <= 50, unit="ms"))
    ratios = Table("Ratios (medians)", ["ratio", "value"])
    if "termgym docker + warm pool" in resets:
        warm, cold = resets["termgym docker + warm pool"].median, resets["termgym docker (no pool)"].median
        raw = resets["raw docker run + docker cp"].median
        for name in local_names:
            r = warm / resets[name].median
            section.goals.append(Goal(f"reset docker + warm pool / {name}", r, "≤ 2×", r <= 2))
            ratios.add(f"reset: termgym docker + warm pool / {name}", f"{r:.2f}×")
        section.goals.append(Goal("reset docker without a pool / raw docker run + docker cp", cold / raw, "≤ 1×",
                                  cold <= raw))
        ratios.add("reset: termgym docker (no pool) / raw docker run + docker cp", f"{cold / raw:.2f}×")
        ratios.add("reset: raw docker run + docker cp / termgym docker + warm pool", f"{raw / warm:.2f}×")
        ratios.add("reset: termgym docker (no pool) / termgym docker + warm pool", f"{cold / warm:.2f}×")
    if "termgym docker (no pool)" in starts:
        cli = starts["raw docker run (CLI)"].median
        ratios.add("start: termgym docker (no pool) / raw docker run", f"{starts['termgym docker (no pool)'].median / cli:.2f}×")
        ratios.add("start: raw docker run / termgym docker + warm pool",
                   f"{cli / starts['termgym docker + warm pool'].median:.2f}×")
    if ratios.rows:
        section.tables.append(ratios)
        section.data["ratios"] = dict((r[0], r[1]) for r in ratios.rows)
    names = list(resets) + [f"start: {n}" for n in starts]
    path = ctx.out_dir / "reset_latency.png"
    latency_bars(path, "SWE-SYNTH reset and sandbox start", names, [*resets.values(), *starts.values()],
                 highlight=[n.startswith("termgym") or n.startswith("start: termgym") for n in names])
    section.plots.append(path.name)
    return section


def _container_starts(ctx: Context, section: Section, stack: contextlib.ExitStack,
                      docker_ok: bool) -> dict[str, Samples]:
    from termgym.sandbox import SandboxSpec, make_sandbox

    n = 2 if ctx.quick else 6
    methods: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}

    def sandbox_start(backend: str, **options) -> Callable[[], None]:
        def act() -> None:
            box = make_sandbox(backend, SandboxSpec(), **options)
            box.start()
            if box.exec("true").exit_code != 0:
                raise RuntimeError(f"{backend}: `true` failed in a fresh sandbox")
            opened.append(box)
        return act

    opened: list = []

    def close_opened() -> None:
        while opened:
            opened.pop().close()

    stack.callback(close_opened)
    methods["termgym local"] = (close_opened, sandbox_start("local"))
    if docker_ok:
        from termgym.sandbox.docker.pool import WarmPool
        from termgym.sandbox.images import DEFAULT_BASE_IMAGE

        made: list[str] = []

        def cli_remove() -> None:
            while made:
                subprocess.run(["docker", "rm", "-f", made.pop()], capture_output=True)

        def cli_run() -> None:
            made.append(subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", "--init",
                                        DEFAULT_BASE_IMAGE, "sleep", "infinity"], check=True, capture_output=True,
                                       text=True).stdout.strip())

        stack.callback(cli_remove)
        pool = WarmPool(size=2)
        stack.callback(pool.close)
        pool.warm(SandboxSpec())

        def pool_prepare() -> None:
            close_opened()
            _wait_for_pool(pool, SandboxSpec())

        methods["raw docker run (CLI)"] = (cli_remove, cli_run)
        methods["termgym docker (no pool)"] = (close_opened, sandbox_start("docker", pool_size=0))
        methods["termgym docker + warm pool"] = (pool_prepare, sandbox_start("docker", pool=pool))
    ctx.log(f"  {len(methods)} start methods x{n}")
    return _rounds(methods, n, rounds=min(n, 3))
