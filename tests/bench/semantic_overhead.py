"""PPOLagSem overhead benchmark (seed 000 §8 P6: "< 10% FPS drop vs baseline" at capture_interval 20):
env steps/s of PPOLag and of PPOLagSem with the tiny random CLIP on CPU at capture_interval 1 and 20,
same env, seed and budget, run one after the other on this machine. Writes JSON and a bar plot.

    python tests/bench/semantic_overhead.py --env SafetyPointGoal1-v0 --steps 20000 --out bench-results

Needs the safe-RL engine (`rlspec train safe`): ENGINE_ARGS below is the one place that names its
command-line flags and metric columns; check it against the engine's --help when the engine lands.
steps/s is read from the run's metrics.csv (STEPS_COLUMN / TIME_COLUMN of its last row), which leaves
out process start-up and model loading; without those columns it falls back to the wall clock.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

ENGINE_ARGS = ["-m", "rlspec.cli", "train", "safe"]  # then --algo, --env, --steps, --seed, --run-dir, --set k=v
STEPS_COLUMN, TIME_COLUMN = "TotalEnvSteps", "Time/Total"  # cumulative env steps and training seconds


def semantic_settings(model_dir: Path, capture_interval: int) -> list[str]:
    return ["semantic.enable=true", f"semantic.model_name={model_dir}", "semantic.model_device=cpu",
            "semantic.dtype_preference=[float32]", "semantic.shaping_enable=true",
            f"semantic.capture_interval={capture_interval}"]


def run(name: str, algo: str, settings: list[str], args, out: Path) -> dict:
    run_dir = out / "overhead-runs" / name
    cmd = [sys.executable, *ENGINE_ARGS, "--algo", algo, "--env", args.env, "--steps", str(args.steps),
           "--seed", str(args.seed), "--run-dir", str(run_dir)] + [x for s in settings for x in ("--set", s)]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - start
    rows = list(csv.DictReader(open(run_dir / "metrics.csv"))) if (run_dir / "metrics.csv").exists() else []
    last = rows[-1] if rows else {}
    if STEPS_COLUMN in last and TIME_COLUMN in last:
        steps_per_s, source = float(last[STEPS_COLUMN]) / float(last[TIME_COLUMN]), "metrics.csv"
    else:
        steps_per_s, source = args.steps / wall, "wall clock (includes start-up)"
    return dict(algo=algo, settings=settings, steps_per_s=steps_per_s, source=source, wall_s=wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="SafetyPointGoal1-v0")
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)

    from rlspec.semantics.tiny import save_tiny_clip

    model_dir = save_tiny_clip(args.out / "overhead-tiny-clip")
    runs = {"PPOLag": run("ppolag", "PPOLag", [], args, args.out)}
    for k in (1, 20):
        runs[f"PPOLagSem@{k}"] = run(f"ppolagsem-ci{k}", "PPOLagSem", semantic_settings(model_dir, k), args, args.out)
    base = runs["PPOLag"]["steps_per_s"]
    drops = {name: 1 - r["steps_per_s"] / base for name, r in runs.items() if name != "PPOLag"}
    report = dict(env=args.env, steps=args.steps, seed=args.seed, model="tiny random CLIP (float32, cpu)",
                  runs=runs, drop_vs_PPOLag=drops, goal_P6="drop < 10% at capture_interval 20",
                  goal_P6_met=drops["PPOLagSem@20"] < 0.10)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "semantic_overhead.json").write_text(json.dumps(report, indent=1))
    plot(runs, args.out / "semantic_overhead.png")
    for name, r in runs.items():
        print(f"{name:<16} {r['steps_per_s']:9.1f} env steps/s  ({r['source']})"
              + (f"  drop {100 * drops[name]:.1f}%" if name in drops else ""))
    return 0


def plot(runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(list(runs), [r["steps_per_s"] for r in runs.values()], color=["gray", "tab:red", "tab:green"])
    ax.axhline(0.9 * runs["PPOLag"]["steps_per_s"], ls="--", color="k", lw=1, label="PPOLag − 10% (goal P6)")
    ax.set_ylabel("env steps / s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
