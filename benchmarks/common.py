"""What every benchmark shares: timing samples, the report data model, the machine and the run context.

A benchmark module exposes ``NAME``, ``TITLE`` and ``run(ctx: Context) -> Section``. A
:class:`Section` holds tables (rows of already-formatted cells), goals (a measured ratio against
its target), notes (what was skipped or broke, and why) and plots; ``data`` keeps the raw numbers
for ``results.json``. The entry point (:mod:`benchmarks.__main__`) renders sections to Markdown.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


# -- samples ------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Durations in seconds of one measured thing, with the summary statistics the report prints."""

    values: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    @property
    def n(self) -> int:
        return len(self.values)

    def quantile(self, q: float) -> float:
        """Linear-interpolated quantile (``q`` in 0..1); NaN without samples."""
        if not self.values:
            return float("nan")
        data = sorted(self.values)
        pos = q * (len(data) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(data) - 1)
        return data[lo] + (data[hi] - data[lo]) * (pos - lo)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def p10(self) -> float:
        return self.quantile(0.10)

    @property
    def p90(self) -> float:
        return self.quantile(0.90)

    def summary_ms(self) -> dict[str, float]:
        """``{"median_ms", "p10_ms", "p90_ms", "n"}`` rounded for the report and JSON."""
        return {"median_ms": round(self.median * 1000, 4), "p10_ms": round(self.p10 * 1000, 4),
                "p90_ms": round(self.p90 * 1000, 4), "n": self.n}


def time_calls(fn: Callable[[], object], n: int, samples: Samples | None = None) -> Samples:
    """Call ``fn`` ``n`` times, timing each call with ``perf_counter``."""
    samples = samples if samples is not None else Samples()
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.add(time.perf_counter() - started)
    return samples


def interleaved(methods: dict[str, Callable[[], object]], n: int, rounds: int = 5,
                warmup: int = 3) -> dict[str, Samples]:
    """Time every method ``n`` times in ``rounds`` alternating batches.

    On a shared machine the load changes over a run; alternating batches spreads that noise over
    all methods instead of charging it to whichever ran during a busy minute.
    """
    out = {name: Samples() for name in methods}
    for fn in methods.values():
        for _ in range(warmup):
            fn()
    per_round = [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]
    for count in per_round:
        for name, fn in methods.items():
            time_calls(fn, count, out[name])
    return out


def fmt_ms(seconds: float) -> str:
    """Milliseconds with precision that suits the magnitude (0.213, 4.71, 168)."""
    ms = seconds * 1000
    if ms != ms:  # NaN
        return "n/a"
    if ms < 10:
        return f"{ms:.3f}"
    if ms < 100:
        return f"{ms:.2f}"
    return f"{ms:.0f}"


def ms_cells(s: Samples) -> list[str]:
    """``[median, p10, p90, n]`` cells for a table row."""
    return [fmt_ms(s.median), fmt_ms(s.p10), fmt_ms(s.p90), str(s.n)]


MS_COLUMNS = ["median ms", "p10 ms", "p90 ms", "n"]


# -- report model -------------------------------------------------------------------------------


@dataclass
class Table:
    """A Markdown table: a caption, column names and rows of formatted cells."""

    caption: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.caption!r}: row has {len(cells)} cells, expected {len(self.columns)}")
        self.rows.append([str(c) for c in cells])

    def to_markdown(self) -> str:
        lines = [f"**{self.caption}**", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "|".join("---" for _ in self.columns) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass
class Goal:
    """A target from the issues, checked against a ratio or value measured in this run.

    ``met`` is ``None`` when the goal could not be measured (then ``value`` is NaN and a note says why).
    """

    name: str
    value: float
    target: str
    met: bool | None
    unit: str = "×"

    def cells(self) -> list[str]:
        value = "n/a" if self.value != self.value else (f"{self.value:.1f}{self.unit}" if self.unit == "×"
                                                        else f"{self.value:.3g} {self.unit}")
        verdict = {True: "met", False: "NOT met", None: "not measured"}[self.met]
        return [self.name, value, self.target, verdict]


@dataclass
class Section:
    """One benchmark's results."""

    name: str
    title: str
    description: str
    tables: list[Table] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)  # file names next to RESULTS.md
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # the benchmark itself crashed (the rest of the report still runs)


# -- machine ------------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def memory_gib() -> float:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return float("nan")


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "unknown"


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def machine_info() -> dict[str, Any]:
    """The machine the run happened on, as the report's header prints it."""
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "kernel": platform.release(),
        "os": _read("/etc/debian_version").strip() and f"Debian {_read('/etc/debian_version').strip()}"
        or platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "termgym": package_version("termgym"),
        "termgym_commit": git_commit(),
        "mini_swe_agent": package_version("mini-swe-agent"),
        "pexpect": package_version("pexpect"),
        "bubblewrap": _version(["bwrap", "--version"]),
        "docker_client": _version(["docker", "version", "--format", "{{.Client.Version}}"]),
        "docker_engine": _version(["docker", "version", "--format", "{{.Server.Version}}"]),
        "tmpdir": f"{tempfile.gettempdir()} ({filesystem_type(tempfile.gettempdir())})",
    }


def filesystem_type(path: str) -> str:
    """The filesystem type of the mount holding ``path`` (from /proc/mounts), or "unknown"."""
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    for line in _read("/proc/mounts").splitlines():
        parts = line.split()
        if len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")) \
                and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


# -- context ------------------------------------------------------------------------------------


class Context:
    """What one run shares between benchmarks: its mode, scratch space, Docker and the task suite.

    The SWE-SYNTH suite is the bundled one when it has tasks; otherwise the generation benchmark's
    output (or a small suite generated on first use) stands in, and the report says so.
    """

    def __init__(self, quick: bool, out_dir: Path, log: Callable[[str], None] | None = None) -> None:
        self.quick = quick
        self.out_dir = out_dir
        self.scratch = Path(tempfile.mkdtemp(prefix="termgym-bench-"))
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self._docker: tuple[bool, str] | None = None
        self._suite = None
        self.suite_origin = ""
        self.generated_suite: Path | None = None  # set by the generation benchmark
        self.generation_project = "planwise"

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    # docker ----------------------------------------------------------------------------------

    def docker(self) -> tuple[bool, str]:
        """``(usable, reason)``: an engine answers and termgym's base image is there."""
        if self._docker is None:
            try:
                from termgym.sandbox.docker import get_client
                from termgym.sandbox.images import DEFAULT_BASE_IMAGE

                client = get_client()
                client.ping()
                client.images.get(DEFAULT_BASE_IMAGE)
                self._docker = (True, "")
            except ImportError:
                self._docker = (False, "the Docker SDK is not installed (pip install 'termgym[docker]')")
            except Exception as exc:  # noqa: BLE001 - any failure means: no Docker rows, say why
                name = type(exc).__name__
                hint = ("start it with `dockerd > /tmp/dockerd.log 2>&1 &`" if "Connection" in str(exc)
                        or "connection" in str(exc) else "build the base image with `termgym images build-base`")
                self._docker = (False, f"Docker is not usable here ({name}: {str(exc)[:160]}); {hint}")
        return self._docker

    # swe-synth -------------------------------------------------------------------------------

    def swesynth_suite(self):
        """A SWE-SYNTH suite with at least one task (bundled, or generated here)."""
        if self._suite is not None:
            return self._suite
        from termgym.tasks.swesynth import TOY_DIR, SweSynthSuite

        cache = self.scratch / "swesynth-cache"
        if (TOY_DIR / "suite.json").is_file():
            suite = SweSynthSuite(TOY_DIR, cache_dir=cache, behaviour="any")
            if suite.task_ids("all"):
                self._suite, self.suite_origin = suite, "the bundled toy suite (termgym_data/swesynth/tasks)"
                return suite
        if self.generated_suite is None:
            self.generated_suite = self.scratch / "generated-suite"
            self.log(f"  no bundled SWE-SYNTH tasks: generating a small suite from corpus project "
                     f"{self.generation_project!r}")
            generate_corpus_tasks(self.generation_project, self.generated_suite, n=2, seed=7)
        self._suite = SweSynthSuite(self.generated_suite, cache_dir=cache, behaviour="any")
        self.suite_origin = (f"tasks generated in this run from the bundled corpus project "
                             f"{self.generation_project!r} (the bundled suite had no tasks)")
        return self._suite

    def swesynth_task_ids(self, k: int) -> list[str]:
        """``k`` task ids spread over the suite (deterministic)."""
        ids = list(self.swesynth_suite().task_ids("all"))
        if len(ids) <= k:
            return ids
        step = len(ids) / k
        return [ids[int(i * step)] for i in range(k)]


def generate_corpus_tasks(project: str, out: Path, *, n: int, seed: int, bug_types=None, workers: int = 2,
                          max_attempts: int | None = None):
    """Run the SWE-SYNTH generator on a bundled corpus project (as ``termgym swesynth bundle`` does)."""
    from termgym.factory.swesynth.bundle import corpus_projects
    from termgym.factory.swesynth.generate import generate

    info = corpus_projects()[project]
    return generate(info["path"], info["test_command"], n=n, seed=seed, out=out, name=project,
                    workers=workers, source_dirs=info["source_dirs"], test_dirs=info["test_dirs"],
                    bug_types=bug_types, max_attempts=max_attempts)


@contextlib.contextmanager
def temp_root(path: str | None) -> Iterator[None]:
    """Make new local sandboxes' roots live under ``path`` for a while (``TERMGYM_SANDBOX_DIR``)."""
    if path is None:
        yield
        return
    saved = os.environ.get("TERMGYM_SANDBOX_DIR")
    os.environ["TERMGYM_SANDBOX_DIR"] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TERMGYM_SANDBOX_DIR", None)
        else:
            os.environ["TERMGYM_SANDBOX_DIR"] = saved


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# -- the learning benchmarks' shared plumbing (read_task, choose_fix, learning_seeds) ---------------------------

def seed_list(parser, text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``; anything else is the parser's error, naming the flag."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers, not {text!r}")
        raise  # parser.error exits; this keeps type checkers honest


def load_line() -> str:
    """The machine line of a learning benchmark's report, as it starts (cores and load average)."""
    return f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}"


def write_results(out: str | None, runs: list[dict], summary: dict, machine: str, table: str, *,
                  curves=None) -> None:
    """Print a learning benchmark's table; with ``out``, write the runs, their summary and the machine as
    JSON there, the table as Markdown beside it (``.md``) and, given ``curves`` (a function of the PNG's
    path, e.g. :func:`benchmarks.plots.seed_curves` bound to the runs), their curves (``.png``, where
    matplotlib is installed)."""
    import json

    print(table)
    if out:
        path = Path(out)
        path.write_text(json.dumps({"runs": runs, "summary": summary, "machine": machine}, indent=1) + "\n")
        path.with_suffix(".md").write_text(table)
        if curves is not None:
            try:
                curves(path.with_suffix(".png"))
            except ImportError:  # matplotlib ([bench] extra) not installed: the JSON and table still stand
                pass


def write_run_json(out_dir: str | Path, name: str, data: dict, load_before: list[float]) -> Path:
    """Write a benchmark's ``data`` as ``out_dir/name`` with the machine (cores, platform, load average
    before and after) and the UTC date added; print and return the path."""
    import json

    data = {**data, "machine": {"cores": os.cpu_count(), "platform": platform.platform(),
                                "load_average_before": load_before,
                                "load_average_after": [round(x, 2) for x in os.getloadavg()]},
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {path}")
    return path
