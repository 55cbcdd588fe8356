"""Seed 003 §7 ablations of the bonus phase: the same task, env-step budget and seeds for
baseline (PPO + V-trace + replay), + paired queue without Loss A, + Loss A with the Top-1 success, + the
Top-K set, + prototypes and cross-cluster sampling; success-rate curves and bonus trigger / early-stop
statistics. Local execution (one process), deterministic per seed. Writes JSON + a plot; reported, never
asserted.

    python tests/bench/bonus_ablation.py --task token-reach --seeds 0 1 2 --steps 60000
    python tests/bench/bonus_ablation.py --task metaworld:reach-v3 --seeds 0 1 2 --steps 150000 --set bonus.cooldown_steps=2048

Runs live in ``--runs/TASK/ABLATION-sSEED`` (finished runs are kept, interrupted ones resumed); every
invocation ends by summarizing all runs of the task into ``--out/bonus_ablation_TASK.json`` and ``.png``.
The summary of a run: the mean success rate over its last 10% of updates and over the whole run (sample
efficiency: the area under the curve) of Metrics/SuccessRate, a window of the last ep_window episodes (the
greedy policy's success rate is ``rlspec eval``'s);
the bonus statistics: updates with bonus time, mean bonus updates per trigger, early stops by reason.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import time
from collections import Counter
from pathlib import Path

from curves import TAIL, plot_groups, tail_mean  # tests/bench/curves.py

ABLATIONS = ("baseline", "queue", "top1", "topk", "prototypes")


def run_one(task: str, ablation: str, seed: int, steps: int, overrides: list[str], runs: Path) -> Path:
    from rlspec.engines import bonus
    from rlspec.runs.rundir import load_checkpoint

    out = runs / f"{ablation}-s{seed}"
    cfg = bonus.build_config("default", [f"total_steps={steps}", f"seed={seed}", *overrides], task, ablation)
    updates = cfg.total_steps // bonus.steps_per_update(cfg)
    ckpt = out / "checkpoints/last.pt"
    done = load_checkpoint(ckpt)["update"] if ckpt.exists() else 0
    if done == updates:
        return out
    if out.exists() and not ckpt.exists():
        shutil.rmtree(out)
    c0 = time.process_time()
    bonus.run(cfg, out, resume=ckpt.exists(), show_progress=False)
    (out / "bench_time.json").write_text(json.dumps({"cpu_s": time.process_time() - c0}))
    print(f"{task} {out.name}: {updates} updates, {time.process_time() - c0:.0f} s CPU", flush=True)
    return out


def bonus_stats(rows: list[dict]) -> dict:
    ran = [r for r in rows if r.get("bonus/ran") == 1]
    reasons = Counter(int(r["bonus/not_triggered_reason_code"]) for r in rows
                      if r.get("bonus/ran") == 0 and math.isfinite(r.get("bonus/not_triggered_reason_code", math.nan)))
    stops = Counter(int(r["bonus/early_stop_reason"]) for r in ran)
    return {"updates_with_bonus": len(ran), "of_updates": len(rows),
            "mean_bonus_updates": statistics.fmean(r["bonus/updates"] for r in ran) if ran else math.nan,
            "early_stops": {"kl": stops.get(1, 0), "entropy": stops.get(2, 0)},
            "not_triggered": {"few_pairs": reasons.get(1, 0), "coverage": reasons.get(2, 0),
                              "no_pack": reasons.get(3, 0), "cooldown": reasons.get(4, 0)},
            "pairs_mined": rows[-1].get("pairs/mined", math.nan), "bonus_errors": rows[-1].get("bonus/errors", math.nan)}


def summarize(runs: Path, out: Path, task: str) -> dict:
    from rlspec.runs.rundir import RunDir, read_metrics

    groups: dict[str, list[list[dict]]] = {}
    result: dict = {"task": task, "tail_fraction": TAIL, "engine": "bonus, local execution", "ablations": {}}
    for run in sorted(p for p in runs.iterdir() if (p / "metrics.csv").exists()):
        cfg = RunDir.read_config(run)["config"]
        rows = read_metrics(run)
        groups.setdefault(cfg["ablation"], []).append(rows)
        cpu = json.loads((run / "bench_time.json").read_text())["cpu_s"] if (run / "bench_time.json").exists() else None
        entry = result["ablations"].setdefault(cfg["ablation"], {"runs": {}})
        entry["runs"][f"s{cfg['seed']}"] = {"success_rate": tail_mean(rows, "Metrics/SuccessRate"),
                                            "success_rate_mean_over_run": tail_mean(rows, "Metrics/SuccessRate", 1.0),
                                            "return": tail_mean(rows, "Metrics/EpRet"), "steps": rows[-1]["step"],
                                            "cpu_s": cpu, "bonus": bonus_stats(rows)}
    for entry in result["ablations"].values():
        for key in ("success_rate", "success_rate_mean_over_run"):
            vals = [r[key] for r in entry["runs"].values()]
            entry[key] = {"mean": statistics.fmean(vals), "min": min(vals), "max": max(vals), "seeds": len(vals)}
    out.mkdir(parents=True, exist_ok=True)
    name = task.replace(":", "_")
    (out / f"bonus_ablation_{name}.json").write_text(json.dumps(result, indent=1))
    plot_groups({a: groups[a] for a in ABLATIONS if a in groups},
                [("Metrics/SuccessRate", "success rate (recent episodes)"), ("Metrics/EpRet", "episode return"),
                 ("pairs/queue", "paired-queue size")],
                out / f"bonus_ablation_{name}.png", f"{task}: seed 003 §7 ablations, mean over seeds, band = min..max")
    for ablation in ABLATIONS:
        if ablation in result["ablations"]:
            e = result["ablations"][ablation]
            print(f"{ablation:11s} success {e['success_rate']['mean']:.3f} [{e['success_rate']['min']:.3f}, "
                  f"{e['success_rate']['max']:.3f}] over {e['success_rate']['seeds']} seeds")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="token-reach")
    p.add_argument("--ablations", nargs="*", default=list(ABLATIONS), choices=ABLATIONS)
    p.add_argument("--seeds", nargs="*", type=int, default=[0])
    p.add_argument("--steps", type=int, default=60_000, help="env steps per run")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every run")
    p.add_argument("--runs", type=Path, default=Path("bench-results/bonus_ablation"))
    p.add_argument("--out", type=Path, default=Path("docs/bench"))
    p.add_argument("--summarize", action="store_true", help="only summarize the runs found")
    args = p.parse_args()
    runs = args.runs / args.task.replace(":", "_")
    runs.mkdir(parents=True, exist_ok=True)
    if not args.summarize:
        for seed in args.seeds:
            for ablation in args.ablations:
                run_one(args.task, ablation, seed, args.steps, args.set, runs)
    summarize(runs, args.out, args.task)


if __name__ == "__main__":
    main()
