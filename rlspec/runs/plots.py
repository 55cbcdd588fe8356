"""Plots a person would rather look at than read, drawn from RUN/metrics.csv into
RUN/plots/. Each panel is one metric against env steps, with optional horizontal reference lines (the
cost limit on the cost panel)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from rlspec.runs.rundir import read_metrics


@dataclass(frozen=True)
class Panel:
    key: str
    """The metrics.csv column drawn."""
    file: str
    """PNG name under RUN/plots/."""
    title: str = ""
    """Axes title (default: the key)."""
    hlines: dict[str, float] = field(default_factory=dict)
    """label -> y of horizontal reference lines (e.g. {"cost limit": 25.0})."""


def draw(run_dir: Path, panels: list[Panel]) -> list[Path]:
    """Write one PNG per panel whose key has at least one finite value; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")  # headless: files only
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    out_dir = Path(run_dir) / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for panel in panels:
        pts = [(r["step"], r[panel.key]) for r in rows if math.isfinite(r.get(panel.key, math.nan))]
        if not pts:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if len(pts) < 30 else None, label=panel.key)
        for label, y in panel.hlines.items():
            ax.axhline(y, color="tab:red", linestyle="--", linewidth=1, label=f"{label} = {y:g}")
        ax.set_xlabel("env steps")
        ax.set_title(panel.title or panel.key)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        path = out_dir / panel.file
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def curve(run_dir: Path, xs: list[str], ys: list[str], file: str, title: str, xlabel: str, ylabel: str) -> Path | None:
    """One x-y curve from the last metrics row where every pair (xs[i], ys[i]) it has finite is drawn, with the
    diagonal y = x (a reliability curve: mean prediction against mean target per bin); None when no row has one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = []
    for row in reversed(read_metrics(run_dir)):
        pairs = [(row[x], row[y]) for x, y in zip(xs, ys) if math.isfinite(row.get(x, math.nan))
                 and math.isfinite(row.get(y, math.nan))]
        if pairs:
            step = row["step"]
            break
    if not pairs:
        return None
    fig, ax = plt.subplots(figsize=(4.5, 4.5), dpi=100)
    ax.plot(*zip(*pairs), marker="o", label=f"step {step:.0f}")
    lo, hi = min(min(p) for p in pairs), max(max(p) for p in pairs)
    ax.plot([lo, hi], [lo, hi], color="gray", linestyle="--", linewidth=1, label="y = x")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path = Path(run_dir) / "plots" / file
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def overlay(runs: dict[str, Path], keys: tuple[str, ...], path: Path, cols: int = 4) -> Path:
    """One panel per key, each run's curve over env steps (``rlspec compare``: two executions of one config)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {name: read_metrics(run) for name, run in runs.items()}
    nrows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3 * nrows), dpi=90, squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for (name, rs), style in zip(rows.items(), ("-", "--", ":", "-.")):
            pts = [(r["step"], r[key]) for r in rs if key in r and math.isfinite(r[key])]
            if pts:
                ax.plot(*zip(*pts), style, label=name)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("env steps", fontsize=8)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
