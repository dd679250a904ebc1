"""termgym's performance benchmarks, side by side with what users would pick instead.

``python -m benchmarks [--quick] [--only NAME ...] [--out DIR | --update-results]`` (or ``termgym
bench`` from a source checkout) runs, in one process on one machine:

1. ``step`` — per-step overhead of a trivial command (:mod:`benchmarks.step_overhead`);
2. ``reset`` — SWE-SYNTH reset latency and container start (:mod:`benchmarks.reset_latency`);
3. ``grading`` — SWE-SYNTH grading latency against running the tests (:mod:`benchmarks.grading`);
4. ``throughput`` — oracle episodes per second and memory under concurrency (:mod:`benchmarks.throughput`);
5. ``generation`` — SWE-SYNTH task generation rate and yield per bug type (:mod:`benchmarks.generation`);

and writes ``RESULTS.md``, ``results.json`` and PNG plots into ``DIR`` (default: a new folder
``runs/bench/<UTC time>`` under the current directory). The committed results in this folder change
only with ``--update-results``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import time
import traceback
from pathlib import Path

#: name -> module, in report order.
BENCHMARKS = {
    "step": "benchmarks.step_overhead",
    "reset": "benchmarks.reset_latency",
    "grading": "benchmarks.grading",
    "throughput": "benchmarks.throughput",
    "generation": "benchmarks.generation",
}
#: Run order: generation first, so that without a bundled suite its tasks serve the others.
RUN_ORDER = ["step", "generation", "reset", "grading", "throughput"]
#: Where ``--update-results`` writes: the committed report beside this file.
COMMITTED_RESULTS = Path(__file__).resolve().parent


def default_out_dir(now: float | None = None) -> Path:
    """A fresh run folder, ``runs/bench/<UTC time>`` under the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return Path.cwd() / "runs" / "bench" / stamp


def build_parser(prog: str = "python -m benchmarks") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run termgym's benchmarks and write RESULTS.md.")
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="a small version of every benchmark (CI; under 3 minutes on 2 cores)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help=f"run only these benchmarks (repeatable or comma-separated): {', '.join(BENCHMARKS)}")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, metavar="DIR",
                       help="where RESULTS.md, results.json and the plots go (default: runs/bench/<UTC time>)")
    where.add_argument("--update-results", action="store_true",
                       help=f"overwrite the committed results in {COMMITTED_RESULTS} instead")


def selected(only: list[str] | None) -> list[str]:
    """The benchmark names to run, in run order; unknown names raise ``ValueError`` listing the known ones."""
    if not only:
        return list(RUN_ORDER)
    wanted = [name.strip() for item in only for name in item.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(map(repr, unknown))}; known: {', '.join(BENCHMARKS)}")
    return [name for name in RUN_ORDER if name in wanted]


def run(args: argparse.Namespace, command: str) -> int:
    """Run the benchmarks ``args`` select and write the report; 0 when every benchmark ran."""
    from benchmarks import report
    from benchmarks.common import Context, Section, machine_info, utc_now

    try:
        names = selected(args.only)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "update_results", False):
        out_dir = COMMITTED_RESULTS
    else:
        out_dir = Path(args.out).resolve() if args.out else default_out_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    date = utc_now()
    ctx = Context(quick=args.quick, out_dir=out_dir)
    started = time.monotonic()
    sections: dict[str, Section] = {}
    try:
        for name in names:
            module = importlib.import_module(BENCHMARKS[name])
            ctx.log(f"[{name}] {module.TITLE}")
            t0 = time.monotonic()
            try:
                section = module.run(ctx)
            except Exception as exc:  # noqa: BLE001 - one broken benchmark must not lose the others' numbers
                traceback.print_exc()
                section = Section(name, module.TITLE, (module.__doc__ or "").split("\n\n", 1)[-1].strip(),
                                  error=f"{type(exc).__name__}: {exc}")
            section.seconds = time.monotonic() - t0
            sections[name] = section
            ctx.log(f"[{name}] done in {section.seconds:.0f} s" + (f" (FAILED: {section.error})"
                                                                     if section.error else ""))
    finally:
        ctx.close()
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if ctx.suite_origin:
        machine["swesynth_suite"] = ctx.suite_origin
    ordered = [sections[name] for name in BENCHMARKS if name in sections]
    cores = os.cpu_count() or 1
    peak_load = max(machine["load_average_at_start"][0], machine["load_average_at_end"][0])
    shared = (f"The machine was shared with other work during the run (load above its {cores} cores), so "
              "absolute numbers are pessimistic; ratios come from interleaved measurements in the same run."
              if peak_load > cores else "The machine was otherwise idle.")
    path = report.write(out_dir, ordered, machine, command=command, date=date, quick=args.quick,
                        total_seconds=time.monotonic() - started, shared_note=shared)
    print(f"wrote {path}")
    return 1 if any(s.error for s in ordered) else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks``."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    return run(args, shlex.join(["python", "-m", "benchmarks", *argv]))
