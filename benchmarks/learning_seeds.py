"""Does the pick task's learning hold over seeds? The single-turn and two-turn pick tasks, several seeds,
each beside a shuffled-credit baseline on the same seed.

Not a timing benchmark: the numbers are rewards. Each run is
:func:`trainers.verl.learning.learn_in_process`: episodes played by termgym's agent loop
(``TermgymAgentLoop``) in real bubblewrap sandboxes with the tiny model's choice turns,
``termgym_turn_grpo`` advantages, veRL's PPO-clip policy loss on the rank-8 LoRA, AdamW at lr 1e-2
with weight decay 0 — the pick recipe of the trainer tests without veRL's trainer process around it
(seconds a step instead of minutes a launch, so many seeds fit; the runs through veRL's ``run_ppo``
are ``tests/trainers/test_verl_learning.py`` and, for the tasks that must be read or graded by
SWE-SYNTH, ``benchmarks.read_task`` and ``benchmarks.choose_fix``). Two variants per setting and seed
(the seed draws the tiny model's random weights and the sampling):

* ``intact`` — each episode's own return;
* ``shuffled`` — each step's returns permuted across its batch before the advantages
  (:func:`trainers.verl.sabotage.shuffled_credit_advantage`): the same updates' size, no signal.

Per run: the mean episode reward per step. The claim, per setting: every seed's intact final reward is
at least :data:`MARGIN` above its own shuffled baseline's::

    python -m benchmarks.learning_seeds                       # turns 1 and 2, seeds 0-4, 6 steps
    python -m benchmarks.learning_seeds --turns 2 --seeds 0,1 -o seeds.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks.common import load_line, seed_list, write_results
from benchmarks.plots import seed_curves

VARIANTS = ("intact", "shuffled")
#: How far each seed's intact final reward must be above its shuffled baseline's.
MARGIN = 0.3


def measure(*, turns: int, seed: int, variant: str, steps: int) -> dict:
    from trainers.verl import learning

    started = time.monotonic()
    curve = learning.learn_in_process(turns=turns, steps=steps, seed=seed, shuffled=variant == "shuffled")
    return {"turns": turns, "seed": seed, "variant": variant, "steps": steps, "curve": curve,
            "final": curve[-1], "seconds": round(time.monotonic() - started, 1)}


def summary(runs: list[dict]) -> dict[str, dict]:
    """Per (turns, variant): the final reward's mean / min / max over seeds; per setting, each seed's margin
    (intact minus shuffled) and whether every seed's reaches :data:`MARGIN`."""
    out: dict[str, dict] = {}
    for turns in sorted({r["turns"] for r in runs}):
        for variant in VARIANTS:
            values = [r["final"] for r in runs if r["turns"] == turns and r["variant"] == variant]
            if values:
                out[f"{turns} turn(s), {variant}"] = {"seeds": len(values), "mean": round(statistics.mean(values), 4),
                                                     "min": min(values), "max": max(values)}
        final = {(r["variant"], r["seed"]): r["final"] for r in runs if r["turns"] == turns}
        margins = {seed: round(final[("intact", seed)] - final[("shuffled", seed)], 4)
                   for variant, seed in final if variant == "intact" and ("shuffled", seed) in final}
        if margins:
            out[f"{turns} turn(s), margin"] = {"per_seed": margins, "required": MARGIN,
                                               "every_seed": all(m >= MARGIN for m in margins.values())}
    return out


def markdown(runs: list[dict], machine: str) -> str:
    lines = ["| turns | variant | seed | mean episode reward per step | wall |", "|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['turns']} | {r['variant']} | {r['seed']} | {' '.join(f'{x:.2f}' for x in r['curve'])} | "
                     f"{r['seconds']:.0f} s |")
    lines.append("")
    for name, s in summary(runs).items():
        if name.endswith("margin"):
            verdict = "every seed beats" if s["every_seed"] else "NOT every seed beats"
            lines.append(f"- {name} (intact minus shuffled, final step): "
                         f"{', '.join(f'{k}: {v:+.2f}' for k, v in s['per_seed'].items())}; {verdict} its baseline "
                         f"by {s['required']}.")
        else:
            lines.append(f"- {name}: final reward {s['mean']:.3f} (min {s['min']}, max {s['max']}, {s['seeds']} seeds).")
    lines.append(f"\n{machine}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning_seeds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds (default 0,1,2,3,4)")
    parser.add_argument("--turns", type=int, action="append", choices=(1, 2), help="1, 2 or both (default both)")
    parser.add_argument("--steps", type=int, default=6, help="steps per run (default 6)")
    parser.add_argument("-o", "--out", default=None, help="write the results as JSON here (and a .md beside it)")
    args = parser.parse_args(argv)
    seeds = seed_list(parser, args.seeds)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    machine = load_line()
    runs = []
    for turns in args.turns or [1, 2]:
        for seed in seeds:
            for variant in VARIANTS:
                runs.append(measure(turns=turns, seed=seed, variant=variant, steps=args.steps))
                print(f"[learning_seeds] {turns} turn(s), seed {seed}, {variant}: "
                      f"{' '.join(f'{x:.2f}' for x in runs[-1]['curve'])} ({runs[-1]['seconds']:.0f} s)",
                      file=sys.stderr, flush=True)
    machine += f", at end {os.getloadavg()[0]:.1f}"
    write_results(args.out, runs, summary(runs), machine, markdown(runs, machine),
                  curves=lambda png: seed_curves(png, "pick tasks in process: reward per step", runs,
                                                 group=lambda run: f"{run['turns']} turn(s), {run['variant']}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
