"""PNG plots for the report (matplotlib with the Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import Samples


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_bars(path: Path, title: str, labels: Sequence[str], samples: Sequence[Samples],
                 log: bool = True, highlight: Sequence[bool] | None = None) -> None:
    """Horizontal bars of medians (ms) with p10–p90 whiskers, one per method."""
    plt = _pyplot()
    medians = [s.median * 1000 for s in samples]
    lo = [max(m - s.p10 * 1000, 0) for m, s in zip(medians, samples)]
    hi = [max(s.p90 * 1000 - m, 0) for m, s in zip(medians, samples)]
    colours = ["#2b7bba" if (highlight and highlight[i]) else "#999999" for i in range(len(labels))]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.4))
    y = range(len(labels))
    ax.barh(list(y), medians, xerr=[lo, hi], color=colours, capsize=3)
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("milliseconds (median, whiskers p10–p90)")
    ax.set_title(title)
    for i, m in enumerate(medians):
        ax.text(m, i, f" {m:.3g}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lines(path: Path, title: str, xlabel: str, series: dict[str, tuple[Sequence[float], Sequence[float]]],
          ylabel: str, second: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
          second_label: str = "") -> None:
    """One or two panels of x/y lines (e.g. throughput and memory against concurrency)."""
    plt = _pyplot()
    panels = 2 if second else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4))
    axes = axes if panels > 1 else [axes]
    for ax, data, label in ((axes[0], series, ylabel), *(((axes[1], second, second_label),) if second else ())):
        for name, (xs, ys) in data.items():
            ax.plot(xs, ys, marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def grouped_bars(path: Path, title: str, categories: Sequence[str], groups: dict[str, Sequence[float]],
                 ylabel: str) -> None:
    """Vertical bars: one group per category, one bar per series."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(categories) + 2), 4.2))
    width = 0.8 / max(len(groups), 1)
    for i, (name, values) in enumerate(groups.items()):
        xs = [c + i * width for c in range(len(categories))]
        ax.bar(xs, values, width=width, label=name)
    ax.set_xticks([c + width * (len(groups) - 1) / 2 for c in range(len(categories))], categories,
                  rotation=40, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(groups) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def seed_curves(path: Path, title: str, runs: Sequence[dict], *, group=lambda run: run["variant"],
                ylabel: str = "mean training reward per step") -> None:
    """A learning benchmark's curves: every run's per-step reward (``train_curve`` or ``curve``), one
    colour per group (a variant; a no-signal baseline dashed), one thin line per seed, the group's mean bold."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    groups: dict[str, list[Sequence[float]]] = {}
    for run in runs:
        groups.setdefault(str(group(run)), []).append(run.get("train_curve") or run.get("curve") or [])
    for index, (name, curves) in enumerate(groups.items()):
        colour = f"C{index}"
        style = "--" if "shuffled" in name or "masked" in name else "-"
        for curve in curves:
            ax.plot(range(1, len(curve) + 1), curve, style, color=colour, alpha=0.3, linewidth=1)
        steps = min(len(c) for c in curves)
        if steps:
            mean = [sum(c[i] for c in curves) / len(curves) for i in range(steps)]
            ax.plot(range(1, steps + 1), mean, style, color=colour, linewidth=2.5, marker="o",
                    label=f"{name} (mean of {len(curves)} seeds)")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
