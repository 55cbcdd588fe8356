"""Standing still beside sheeprl 0.8.4: the world model's reconstruction loss on the room's standing-still
scenario (the player never moves; only the world model has something to learn), rlspec's reference engine and
sheeprl's own DreamerV3, the room-exit preset's model on both sides, the same seeds: how far the loss falls
within the first N updates.

    # sheeprl's side first, in its own venv (nox -s bench_sheeprl_room's), one row per gradient step:
    python -m benchmarks.dreamer.anchors.run_sheeprl --set task=standing-still --set log_every=8 --total-steps 2624 \\
        --episodes 0 --seeds 0 1 2 --out runs/sheeprl-still
    # rlspec's side (each seed trained once, then read again) and the comparison:
    python -m benchmarks.dreamer.still_vs_sheeprl --sheeprl runs/sheeprl-still [--seeds 0 1 2]
        [--runs runs/still] [--out benchmarks/dreamer/results]

The run: the room-exit preset with task=standing-still, N = 200 updates after the 1,024 prefill env steps (train
ratio 32 with batch 8 x 32: one update per 8 env steps on both sides, sheeprl's replay_ratio 0.125), a row per 8
env steps. The two losses are not on one scale (sheeprl: the frame resized to 64 x 64 and scaled to
[-0.5, 0.5]; rlspec: the 72 x 80 shade codes / 3), so the measure is each seed's fall 1 - loss(after N updates) /
loss(first update), per implementation its mean with a bootstrap 95% CI, and the CI of the difference
(reference - sheeprl). Goal (reported, never asserted): the difference's CI contains 0 or lies above it, and
rlspec's own bar holds on every seed (fall >= 80%, as benchmarks/dreamer/standing_still.py judges the smoke
model). Writes OUT/dreamer_still_vs_sheeprl.{json,png}: per-seed curves of loss / first loss against updates.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

from benchmarks.dreamer.vs_sheeprl import ci, difference_ci
from rlspec.engines import dreamer
from rlspec.evidence.cpu import identity as cpu_identity
from rlspec.evidence.evaluation import read_run

N_UPDATES = 200
GOAL = 0.80  # rlspec's own bar: the fall within N updates (benchmarks/dreamer/standing_still.py)
PREFILL, ENV_STEPS_PER_UPDATE = 1024, 8  # the room-exit preset: min_ready_steps; batch 8 x 32 / train ratio 32
TOTAL = PREFILL + ENV_STEPS_PER_UPDATE * N_UPDATES
OVERRIDES = ["task=standing-still", f"total_steps={TOTAL}", f"log_every={ENV_STEPS_PER_UPDATE}",
             f"checkpoint_every={TOTAL}"]
KEY = "observation_loss"  # read_run's name: rlspec Loss/recon_loss, sheeprl Loss/observation_loss


def run_rlspec(runs: Path, seed: int) -> Path:
    """The reference engine's run of ``seed`` under runs/s<seed> (trained unless its summary is there)."""
    run = runs / f"s{seed}"
    if not (run / "summary.json").is_file():
        cfg = dreamer.build_config("room-exit", [*OVERRIDES, f"seed={seed}"])
        assert dreamer.updates_due(cfg, cfg.total_steps) == N_UPDATES, "N updates after the prefill"
        dreamer.execution(cfg).run(run, resume=False, show_progress=False)
    return run


def updates_curve(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(updates, loss) of a run's logged rows after the prefill: update u is the one at env step
    PREFILL + 8u, as both sides schedule them."""
    curve = read_run(path)
    loss = curve.values[KEY]
    keep = (curve.steps > PREFILL) & ~np.isnan(loss)
    updates = (curve.steps[keep] - PREFILL) / ENV_STEPS_PER_UPDATE
    return updates, loss[keep]


def fall(updates: np.ndarray, loss: np.ndarray) -> dict:
    """The seed's first logged loss, its loss at N updates (the first row at or after it) and the fall."""
    at_n = np.flatnonzero(updates >= N_UPDATES)
    if not at_n.size:
        raise SystemExit(f"dreamer_still_vs_sheeprl: a run ends at update {updates.max():.0f}, before {N_UPDATES}")
    start, after = float(loss[0]), float(loss[at_n[0]])
    reached = np.flatnonzero(loss <= (1 - GOAL) * start)
    return {"start": start, "after_n": after, "fall": 1 - after / start,
            "first_update_with_goal_fall": float(updates[reached[0]]) if reached.size else None}


def plot(curves: dict[str, dict[int, tuple]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    for color, (name, seeds) in zip(("tab:red", "tab:blue"), curves.items()):
        for i, (updates, loss) in enumerate(seeds.values()):
            ax.plot(updates, loss / loss[0], color=color, lw=1, alpha=0.6,
                    label=f"{name} ({len(seeds)} seeds)" if i == 0 else None)
    ax.axhline(1 - GOAL, color="black", ls="--", lw=0.8, label=f"{GOAL:.0%} below the first update")
    ax.axvline(N_UPDATES, color="grey", ls=":", lw=0.8)
    ax.set(xlabel="updates", ylabel="reconstruction loss / first update's", yscale="log",
           title="standing still (room-exit model): sheeprl 0.8.4 vs rlspec reference")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sheeprl", type=Path, required=True, help="sheeprl_room.py's --out of the standing-still runs")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--runs", type=Path, default=Path("runs/still"), help="rlspec's runs (s<seed>)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    missing = [s for s in args.seeds if not (args.sheeprl / "standing-still" / f"s{s}").is_dir()]
    if missing:
        print(f"dreamer_still_vs_sheeprl: --sheeprl {args.sheeprl}: no standing-still run of seeds {missing} "
              "(run benchmarks/dreamer/anchors/run_sheeprl.py first, as the module docstring says)", file=sys.stderr)
        return 2
    curves = {"sheeprl": {s: updates_curve(args.sheeprl / "standing-still" / f"s{s}") for s in args.seeds},
              "reference": {s: updates_curve(run_rlspec(args.runs, s)) for s in args.seeds}}
    per_seed = {name: {s: fall(*c) for s, c in seeds.items()} for name, seeds in curves.items()}
    falls = {name: [r["fall"] for r in rows.values()] for name, rows in per_seed.items()}
    low, high = difference_ci(falls["reference"], falls["sheeprl"])
    out = {"what": "standing still: the reconstruction loss's fall within N updates, sheeprl 0.8.4 vs rlspec's "
                   "reference engine, the room-exit preset's model on both sides", "n_updates": N_UPDATES,
           "rlspec_overrides": ["preset room-exit", *OVERRIDES],
           "scale_note": "the losses are on different scales (sheeprl: 64 x 64 resized frame in [-0.5, 0.5]; rlspec: "
                         "72 x 80 shade codes / 3): only the relative fall is compared",
           "implementations": {name: {"seeds": rows, "fall": ci(falls[name]), "first_update_with_goal_fall": ci(
               [math.nan if r["first_update_with_goal_fall"] is None else r["first_update_with_goal_fall"]
                for r in rows.values()])} for name, rows in per_seed.items()},
           "goals": {"reference_fall_minus_sheeprl": {
                         "mean": float(np.mean(falls["reference"]) - np.mean(falls["sheeprl"])), "ci": [low, high],
                         "met": bool(high >= 0), "goal": "the 95% CI contains 0 or lies above it"},
                     "reference_every_seed_falls_80pct": {"met": all(f >= GOAL for f in falls["reference"])},
                     "sheeprl_seeds_falling_80pct": sum(f >= GOAL for f in falls["sheeprl"])},
           "machine": {"cpu": cpu_identity(), "cores": os.cpu_count(), "python": platform.python_version(),
                       "torch": torch.__version__},
           "curves": {name: {s: [[float(u), round(float(v), 4)] for u, v in zip(*c)] for s, c in seeds.items()}
                      for name, seeds in curves.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dreamer_still_vs_sheeprl.json").write_text(json.dumps(out, indent=2) + "\n")
    plot(curves, args.out / "dreamer_still_vs_sheeprl.png")
    for name, impl in out["implementations"].items():
        print(f"{name}: fall {impl['fall']}; per seed {[round(f, 3) for f in falls[name]]}; first update "
              f"{GOAL:.0%} below the start {impl['first_update_with_goal_fall']}")
    print(json.dumps(out["goals"], indent=1))
    return 0 if all(not math.isnan(f) for f in falls["reference"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
