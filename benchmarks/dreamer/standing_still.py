"""Standing still (validation, Dreamer plan M8): the reference Dreamer engine's reconstruction loss on the
room's standing-still scenario (the player never moves: the view barely changes) falls by >= 80% within the
first N = 200 updates.

    nice -n 10 python -m benchmarks.dreamer.standing_still [OUT_DIR]
        (default benchmarks/dreamer/results/: dreamer_standing_still.json and .png; ~30 s wall, ~12 s CPU)

The run: ``rlspec train dreamer --task standing-still --preset smoke`` (2 PyBoy rooms,
the smoke preset's tiny model, batch 4 × 16 steps) with 64 prefill env steps, train ratio 32 (one update
per vector step of the 2 envs), seed 0, one torch thread, a metrics row per update. Loss/recon_loss is
the sum over the pooled 18 × 20 frame of the squared error, averaged over the batch (rlspec/algos/dreamer.py).
"start" is the first update's loss, "after N" the N-th's; the fall is 1 − after / start. Also recorded: the
first update at which the loss is 80% below the start, the mean of the last 10 updates, wall and CPU time.
Reported (and checked against the goal in the JSON), never asserted in the test suite.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

from rlspec.engines import dreamer
from rlspec.evidence.cpu import identity as cpu_identity
from rlspec.runs.rundir import read_metrics

N_UPDATES = 200
GOAL = 0.80  # the fall of the reconstruction loss within the first N updates
PREFILL, NUM_ENVS = 64, 2
OVERRIDES = ["task=standing-still", f"num_envs={NUM_ENVS}", f"min_ready_steps={PREFILL}", "train_ratio=32",
             f"total_steps={PREFILL + NUM_ENVS * N_UPDATES}", f"log_every={NUM_ENVS}",
             f"checkpoint_every={PREFILL + NUM_ENVS * N_UPDATES}", "seed=0", "torch_threads=1"]


def main(out_dir: Path) -> dict:
    cfg = dreamer.build_config("smoke", OVERRIDES)
    d = cfg.dreamer
    assert dreamer.updates_due(cfg, cfg.total_steps) == N_UPDATES  # one update per vector step after the prefill
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        run = dreamer.LocalExecution(cfg).run(Path(tmp) / "run", show_progress=False)
        rows = read_metrics(run)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    curve = [(int(r["Train/updates"]), r["Loss/recon_loss"]) for r in rows if r["Train/updates"] > 0]
    assert [u for u, _ in curve] == list(range(1, N_UPDATES + 1)), "one metrics row per update"
    losses = [loss for _, loss in curve]
    start, after = losses[0], losses[-1]
    reached = next((u for u, loss in curve if loss <= (1 - GOAL) * start), None)
    report = dict(
        what="reference Dreamer engine, standing-still: reconstruction loss at the first update vs after N updates",
        goal=f"falls by >= {GOAL:.0%} within the first N = {N_UPDATES} updates",
        n_updates=N_UPDATES, recon_loss_start=start, recon_loss_after_n=after,
        fall=1 - after / start, meets_goal=(1 - after / start) >= GOAL, first_update_with_80pct_fall=reached,
        recon_loss_mean_last_10=sum(losses[-10:]) / 10, env_steps=cfg.total_steps, wall_s=round(wall, 1),
        cpu_s=round(cpu, 1), peak_rss_mib=rows[-1].get("Memory/peak_rss_mib"),
        config=dict(preset="smoke", overrides=OVERRIDES, batch_size=d.batch_size, seq_len=d.seq_len,
                    deter=d.deter, stoch=d.stoch, classes=d.classes, pool=d.pool, frameskip=cfg.frameskip),
        machine=dict(cpu=cpu_identity(), cores=os.cpu_count(),
                     load_average=os.getloadavg(), python=platform.python_version(), torch=torch.__version__),
        curve=[[u, round(loss, 4)] for u, loss in curve],
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "dreamer_standing_still.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out_dir / "dreamer_standing_still.png")
    print(f"recon loss {start:.2f} -> {after:.2f} after {N_UPDATES} updates: fall {report['fall']:.1%} "
          f"(goal >= {GOAL:.0%}: {report['meets_goal']}; 80% first reached at update {reached}); "
          f"wall {wall:.0f} s, CPU {cpu:.0f} s")
    return report


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    updates, losses = zip(*report["curve"])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(updates, losses, label="Loss/recon_loss (one update each)")
    target = (1 - GOAL) * report["recon_loss_start"]
    ax.axhline(target, color="tab:red", linestyle="--", linewidth=1, label=f"{GOAL:.0%} below the first update")
    if report["first_update_with_80pct_fall"] is not None:
        ax.axvline(report["first_update_with_80pct_fall"], color="tab:gray", linestyle=":", linewidth=1)
    ax.set(xlabel="updates", ylabel="reconstruction loss (sum of squared errors)",
           title=f"standing still, reference engine: fall {report['fall']:.0%} in {report['n_updates']} updates")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results")
