"""Shared pieces of the learning benchmarks (safe_learning.py, bonus_ablation.py): the tail mean of a run's
metric and one figure of mean-over-seeds curves with a min..max band per group."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

TAIL = 0.1  # the last 10% of a run's rows


def tail_mean(rows: list[dict], key: str, tail: float = TAIL) -> float:
    """Mean of the finite values of ``key`` over the last ``tail`` fraction of rows (at least one row)."""
    vals = [r[key] for r in rows[-max(1, math.ceil(tail * len(rows))):] if math.isfinite(r.get(key, math.nan))]
    return statistics.fmean(vals) if vals else math.nan


def plot_groups(groups: dict[str, list[list[dict]]], panels: list[tuple[str, str]], path: Path, title: str,
                hlines: dict[str, tuple[float, str]] | None = None) -> None:
    """groups: label -> runs (each a list of metric rows with "step"); panels: (metric key, axes title).
    One line per group (mean over its runs, truncated to the shortest run), band min..max when >1 run;
    hlines: metric key -> (y, label) of a reference line on that panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), dpi=100, squeeze=False)
    for i, (label, runs) in enumerate(sorted(groups.items())):
        n = min(len(r) for r in runs)
        xs = [row["step"] for row in runs[0][:n]]
        for (key, _), ax in zip(panels, axes[0]):
            ys = [[run[j].get(key, math.nan) for run in runs] for j in range(n)]  # [row][run]
            if all(math.isnan(v) for row in ys for v in row):
                continue
            ax.plot(xs, [statistics.fmean(row) for row in ys], color=f"C{i}", label=f"{label} ({len(runs)} seeds)")
            if len(runs) > 1:
                ax.fill_between(xs, [min(row) for row in ys], [max(row) for row in ys], color=f"C{i}", alpha=0.15)
    for (key, name), ax in zip(panels, axes[0]):
        if hlines and key in hlines:
            y, text = hlines[key]
            ax.axhline(y, color="tab:red", linestyle="--", linewidth=1, label=text)
        ax.set_title(name)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
