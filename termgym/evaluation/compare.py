"""Comparing evaluation runs side by side, with a paired bootstrap interval on the difference.

Each run's per-task value is the mean over its scored attempts of the ``score`` (or of ``passed``
with ``metric="passed"``). Runs are compared with the first one (the baseline) on the tasks they
all scored: the difference is the mean over those tasks of ``run - baseline``; its interval comes
from resampling the tasks with replacement (the same resample for both runs, which is what makes
it paired), and ``p_value`` is the two-sided bootstrap probability that the difference has the
other sign.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.evaluation.results import RunDir, _natural_key, summarize

METRICS = ("score", "passed")


@dataclass
class RunData:
    """A run loaded from disk: its config, summary and per-task values."""

    path: str
    label: str
    config: dict[str, Any]
    summary: dict[str, Any]
    values: dict[str, float]


@dataclass
class Comparison:
    """The comparison of runs (see the module docstring); ``str()`` renders it as text tables."""

    metric: str
    runs: list[RunData]
    task_ids: list[str]
    common: list[str]
    differences: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "runs": [{"path": r.path, "label": r.label, "env_id": r.summary.get("env_id"),
                      "agent": r.summary.get("agent"), "model": r.summary.get("model"),
                      "solve_rate": r.summary.get("solve_rate"), "mean_score": r.summary.get("mean_score"),
                      "pass_at_k": r.summary.get("pass_at_k"), "episodes": r.summary.get("episodes"),
                      "infra_errors": r.summary.get("infra_errors"),
                      "tokens": r.summary.get("prompt_tokens", 0) + r.summary.get("completion_tokens", 0)}
                     for r in self.runs],
            "tasks": [{"task_id": t, "values": [r.values.get(t) for r in self.runs]} for t in self.task_ids],
            "common_tasks": len(self.common),
            "differences": self.differences,
        }

    def table(self) -> str:
        labels = [r.label for r in self.runs]
        width = max([10] + [len(t) for t in self.task_ids])
        col = max([8] + [len(x) for x in labels])
        head = f"{'task':<{width}}  " + "  ".join(f"{x:>{col}}" for x in labels)
        if len(self.runs) == 2:
            head += f"  {'diff':>7}"
        lines = [head, "-" * len(head)]
        for task_id in self.task_ids:
            values = [r.values.get(task_id) for r in self.runs]
            row = f"{task_id:<{width}}  " + "  ".join(f"{_fmt(v):>{col}}" for v in values)
            if len(self.runs) == 2:
                diff = None if None in values else values[1] - values[0]
                row += f"  {_fmt(diff, signed=True):>7}"
            lines.append(row)
        lines.append("-" * len(head))
        means = [statistics.fmean(r.values[t] for t in self.common) if self.common else None for r in self.runs]
        total = f"{'mean*':<{width}}  " + "  ".join(f"{_fmt(m):>{col}}" for m in means)
        if len(self.runs) == 2 and self.differences:
            total += f"  {_fmt(self.differences[0]['mean_diff'], signed=True):>7}"
        lines.append(total)
        for key, name in (("solve_rate", "solve rate"), ("mean_score", "mean score")):
            lines.append(f"{name:<{width}}  " + "  ".join(f"{_fmt(r.summary.get(key)):>{col}}" for r in self.runs))
        lines.append(f"(* over the {len(self.common)} task(s) every run scored; metric: {self.metric})")
        for d in self.differences:
            lines.append(
                f"{d['run']} - {d['baseline']}: {d['mean_diff']:+.3f}  {int(d['confidence'] * 100)}% paired bootstrap "
                f"interval [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]  p={d['p_value']:.3f}  "
                f"(better on {d['wins']}, worse on {d['losses']}, tied on {d['ties']} of {d['tasks']} tasks)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def load_harbor_job(path: str | Path, metric: str = "score") -> RunData:
    """Load a Harbor job directory (``harbor run``'s ``result.json``) as a run: per-task mean reward
    (or pass rate, reward >= 1) over the trials with a valid reward, as Harbor's mean leaves the others out."""
    from termgym.evaluation.harbor_job import read_job_rewards

    rewards = read_job_rewards(path)
    if not rewards:
        raise ValueError(f"Harbor job {path} has no trial results")
    per_task: dict[str, list[float]] = defaultdict(list)
    for (task, _), value in rewards.items():
        if value is not None:
            per_task[task].append(float(value >= 1.0) if metric == "passed" else value)
    values = {t: statistics.fmean(v) for t, v in per_task.items()}
    scored = [v for vs in per_task.values() for v in vs]
    # A Harbor job runs Harbor tasks: it compares with termgym runs of termgym/Harbor-v0.
    summary = {"env_id": "termgym/Harbor-v0", "agent": "harbor job", "episodes": len(rewards),
               "solve_rate": statistics.fmean(float(v >= 1.0) for v in scored) if scored else None,
               "mean_score": statistics.fmean(scored) if scored else None, "infra_errors": 0}
    return RunData(path=str(path), label=Path(path).name, config={}, summary=summary, values=values)


def load_run(path: str | Path, metric: str = "score") -> RunData:
    """Load a run directory (config, episodes) into per-task values for ``metric``.

    A directory without termgym's ``config.json`` but with a Harbor job's ``result.json`` is read
    as a Harbor job (:func:`load_harbor_job`), so a termgym run compares with ``harbor run``'s.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    store = RunDir(path)
    if not store.exists() and (Path(path) / "result.json").is_file():
        return load_harbor_job(path, metric)
    config = store.read_config()
    results = store.episodes()
    if not results:
        raise ValueError(f"run {path} has no finished episodes")
    per_task: dict[str, list[float]] = defaultdict(list)
    for r in results:
        if r.scored:
            per_task[r.task_id].append(float(r.passed) if metric == "passed" else r.score)
    values = {t: statistics.fmean(v) for t, v in per_task.items()}
    summary = summarize(results, config)
    return RunData(path=str(path), label=summary.get("model") or Path(path).name, config=config,
                   summary=summary, values=values)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, samples: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> dict[str, float]:
    """Mean of ``b - a`` over paired items, its bootstrap percentile interval and a two-sided p-value."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    if not a:
        raise ValueError("paired_bootstrap needs at least one pair")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    tail = (1 - confidence) / 2
    low = means[int(tail * (samples - 1))]
    high = means[int(round((1 - tail) * (samples - 1)))]
    mean = sum(diffs) / n
    below = sum(m <= 0 for m in means) / samples
    above = sum(m >= 0 for m in means) / samples
    return {"mean_diff": mean, "ci_low": low, "ci_high": high, "p_value": min(1.0, 2 * min(below, above)),
            "confidence": confidence}


def compare_runs(paths: Sequence[str | Path], *, metric: str = "score", samples: int = 2000,
                 confidence: float = 0.95, seed: int = 0, labels: Sequence[str] | None = None) -> Comparison:
    """Compare runs with the first one (see the module docstring)."""
    if len(paths) < 2:
        raise ValueError("compare needs at least two runs")
    runs = [load_run(p, metric) for p in paths]
    if labels is not None:
        if len(labels) != len(runs):
            raise ValueError(f"{len(labels)} label(s) for {len(runs)} run(s)")
        for run, label in zip(runs, labels, strict=True):
            run.label = label
    _dedupe_labels(runs)
    envs = {r.summary.get("env_id") for r in runs}
    if len(envs) > 1:
        raise ValueError(f"the runs evaluate different environments ({', '.join(sorted(map(str, envs)))}); "
                         "compare runs of the same environment")
    task_ids = sorted(set().union(*(r.values for r in runs)), key=_natural_key)
    common = [t for t in task_ids if all(t in r.values for r in runs)]
    comparison = Comparison(metric=metric, runs=runs, task_ids=task_ids, common=common)
    base = runs[0]
    for run in runs[1:]:
        if not common:
            continue
        a = [base.values[t] for t in common]
        b = [run.values[t] for t in common]
        stats = paired_bootstrap(a, b, samples=samples, confidence=confidence, seed=seed)
        stats.update({"run": run.label, "baseline": base.label, "tasks": len(common),
                      "wins": sum(y > x for x, y in zip(a, b, strict=True)), "losses": sum(y < x for x, y in zip(a, b, strict=True)),
                      "ties": sum(y == x for x, y in zip(a, b, strict=True))})
        comparison.differences.append(stats)
    return comparison


def _dedupe_labels(runs: list[RunData]) -> None:
    # Two runs of the same model (say, two temperatures) need their directory names to tell them apart.
    duplicated = {r.label for r in runs if sum(o.label == r.label for o in runs) > 1}
    for run in runs:
        if run.label in duplicated:
            run.label = f"{run.label}@{Path(run.path).name}"


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
