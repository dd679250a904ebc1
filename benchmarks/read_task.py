"""Does the policy read its prompt? veRL's trainer on ReadPick, several seeds, with the colour shown and masked.

Not a timing benchmark: the numbers are rewards. Each run is one launch of veRL's own trainer
(``run_ppo``, v1, CPU path; :func:`trainers.verl.learning.run_reading`) on
``termgym-learn/ReadPick-v0``: every prompt asks for one of three colours in one of seven wordings,
the task's grader passes only on that colour, and every episode runs in a real bubblewrap sandbox.
Training uses four wordings, validation the three held-out ones (8 sampled episodes per task).
Two variants per seed (the seed draws the tiny model's random weights):

* ``intact`` — the prompts as the suite writes them;
* ``masked`` — the same run with the colour word replaced by ``???`` in every prompt, the grader
  unchanged: the no-signal baseline. A wording's three masked prompts are the same tokens, so its
  held-out reward is 1/3 in expectation whatever the policy learns;
* ``shuffled`` — the prompts intact, each step's returns permuted across its batch before the
  advantages (:data:`trainers.verl.sabotage.SHUFFLED_ESTIMATOR`): credit that says nothing about
  what a row did (run it with ``--variant shuffled``; the default runs intact and masked).

Per run: the training reward per step, the held-out reward before and after training, whether every
step passed every check on what veRL logged (:data:`trainers.verl.learning.STEP_CHECKS`), and the wall
time. Results go to a JSON file and a Markdown table::

    python -m benchmarks.read_task                         # seeds 0,1,2, 6 steps, both variants
    python -m benchmarks.read_task --quick                 # seed 0, 5 steps, both variants
    python -m benchmarks.read_task --seeds 0,1,2,3 --steps 8 --variant intact -o read.json

Each launch takes minutes on a 2-core machine (Ray and veRL's workers start for each).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import load_line, seed_list, write_results
from benchmarks.plots import seed_curves

VARIANTS = ("intact", "masked", "shuffled")
#: The learning claim: every seed's intact held-out reward beats its own masked baseline by this much.
MARGIN = 0.3


def measure(out: Path, *, seed: int, variant: str, steps: int) -> dict:
    """One launch of veRL's trainer on ReadPick; the numbers the report keeps."""
    from trainers.verl import learning

    started = time.monotonic()
    metrics = learning.run_reading(out, steps=steps, masked=variant == "masked", shuffled=variant == "shuffled",
                                   seed=seed)
    seconds = time.monotonic() - started
    checks = {name: check for name, check in learning.STEP_CHECKS.items() if name != "observations masked"}
    trained = {step: m for step, m in metrics.items() if step >= 1}
    return {
        "seed": seed, "variant": variant, "steps": steps,
        "held_out_before": learning.held_out_reward(metrics.get(0, {})),
        "held_out_after": learning.held_out_reward(metrics.get(steps, {})),
        "train_curve": learning.reward_curve(trained),
        "failed_checks": {str(step): sorted(learning.failing_checks(m, checks)) for step, m in trained.items()
                          if learning.failing_checks(m, checks)},
        "seconds": round(seconds, 1),
    }


def summary(runs: list[dict]) -> dict[str, dict]:
    """Per variant: the held-out reward after training, mean / min / max over seeds; and, where a seed ran
    intact and a baseline, its margin (intact minus masked: ``margin``; minus shuffled: ``margin over shuffled``)
    and whether every seed's margin reaches :data:`MARGIN`."""
    out: dict[str, dict] = {}
    for variant in VARIANTS:
        values = [r["held_out_after"] for r in runs if r["variant"] == variant and r["held_out_after"] is not None]
        if values:
            out[variant] = {"seeds": len(values), "mean": round(statistics.mean(values), 4),
                            "min": min(values), "max": max(values)}
    after = {(r["variant"], r["seed"]): r["held_out_after"] for r in runs if r["held_out_after"] is not None}
    for baseline, key in (("masked", "margin"), ("shuffled", "margin over shuffled")):
        margins = {seed: round(after[("intact", seed)] - after[(baseline, seed)], 4)
                   for variant, seed in after if variant == "intact" and (baseline, seed) in after}
        if margins:
            out[key] = {"baseline": baseline, "per_seed": margins, "required": MARGIN,
                        "every_seed_beats_its_baseline": all(m >= MARGIN for m in margins.values())}
    return out


def markdown(runs: list[dict], machine: str) -> str:
    lines = ["| variant | seed | steps | held-out before | held-out after | training reward per step | checks | wall |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        checks = "all pass" if not r["failed_checks"] else json.dumps(r["failed_checks"])
        lines.append(f"| {r['variant']} | {r['seed']} | {r['steps']} | {r['held_out_before']} | {r['held_out_after']} | "
                     f"{' '.join(f'{x:.2f}' for x in r['train_curve'])} | {checks} | {r['seconds']:.0f} s |")
    for variant, s in summary(runs).items():
        if variant.startswith("margin"):
            verdict = "every seed beats" if s["every_seed_beats_its_baseline"] else "NOT every seed beats"
            lines.append(f"\nintact minus {s['baseline']}, per seed: {', '.join(f'{k}: {v:+.2f}' for k, v in s['per_seed'].items())}"
                         f"; {verdict} its own baseline by {s['required']}.")
            continue
        lines.append(f"\n{variant}: held-out reward after training {s['mean']:.3f} (min {s['min']}, max {s['max']}, "
                     f"{s['seeds']} seeds); chance is 0.333.")
    lines.append(f"\n{machine}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.read_task", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default=None, help="comma-separated model seeds (default 0,1,2; --quick: 0)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per run (default 6; --quick: 5)")
    parser.add_argument("--variant", action="append", choices=VARIANTS, help="run only these (repeatable)")
    parser.add_argument("--quick", action="store_true", help="one seed, 5 steps, both variants")
    parser.add_argument("-o", "--out", default=None, help="write the results as JSON here (and a .md beside it)")
    parser.add_argument("--workdir", default=None, help="where the runs' models, data and logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    seeds = seed_list(parser, args.seeds or ("0" if args.quick else "0,1,2"))
    steps = args.steps or (5 if args.quick else 6)
    if steps < 1:
        parser.error("--steps must be at least 1")
    variants = args.variant or ["intact", "masked"]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="read-task-"))
    machine = load_line()
    runs = []
    for seed in seeds:
        for variant in variants:
            print(f"[read_task] seed {seed}, {variant}, {steps} steps", file=sys.stderr, flush=True)
            runs.append(measure(workdir / f"{variant}-seed{seed}", seed=seed, variant=variant, steps=steps))
            print(f"[read_task]   held-out {runs[-1]['held_out_before']} -> {runs[-1]['held_out_after']} "
                  f"({runs[-1]['seconds']:.0f} s)", file=sys.stderr, flush=True)
    machine += f", at end {os.getloadavg()[0]:.1f}"
    write_results(args.out, runs, summary(runs), machine, markdown(runs, machine),
                  curves=lambda png: seed_curves(png, "ReadPick: veRL run_ppo, training reward per step", runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
