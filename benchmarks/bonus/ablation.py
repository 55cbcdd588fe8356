"""Success-set design §7 ablations of the bonus phase: the same task, env-step budget and seeds for
baseline (PPO + V-trace + replay), + paired queue without Loss A, + Loss A with the Top-1 success, + the
Top-K set, + prototypes and cross-cluster sampling, and a placebo (the Top-K arm's Loss A on positive sets
shuffled across the batch's rows: the same dose without the success sets' information); success-rate curves and bonus trigger / early-stop
statistics. Local execution (one process), deterministic per seed. Writes JSON + a plot; reported, never
asserted.

    python -m benchmarks.bonus.ablation --task token-reach --seeds 0 1 2 --steps 60000
    python -m benchmarks.bonus.ablation --task metaworld:reach-v3 --seeds 0 1 2 3 4 --steps 150000 \\
        --set bonus.cooldown_steps=2048 --preset metaworld
    python -m benchmarks.bonus.ablation --recheck benchmarks/bonus/results/bonus_ablation_metaworld_reach-v3.json

Runs live in ``--runs/TASK/ABLATION-sSEED`` (finished runs are kept, interrupted ones resumed, one that another
invocation is running now is skipped: two invocations may share a folder); every
invocation ends by summarizing all runs of the task into ``--out/bonus_ablation_TASK.json`` and ``.png``.
The summary of a run: the mean success rate over its last 10% of updates and over the whole run (sample
efficiency: the area under the curve) of Metrics/SuccessRate, a window of the last ep_window episodes; the env
steps to a success rate of --threshold; the greedy policy's success rate (``rlspec eval RUN --episodes 20``,
run once per run); the bonus statistics: updates with bonus time, mean bonus updates per trigger, early stops
by reason (the KL / entropy guard), reasons the trigger did not fire. Only runs that reached their last update
enter (the others are listed as unfinished). Per arm: mean, 95% bootstrap CI, min and max over seeds, the
bonus statistics added up; a seed that never reaches the threshold counts at its budget. Per bonus arm against
the baseline, for the late success and the success over the run: whether the CIs overlap and whether the arm is
ahead or behind outside the baseline's CI, and rlspec/evidence/stats.py's comparison of the per-seed values
(``compare``: exact permutation p, minimum detectable effect, the verdict word); ``bonus_ablation_TASK.md`` is
the table of those verdicts. ``--recheck JSON`` recomputes them from the JSON's per-seed values. The figure:
each arm's mean with its 95% band and every seed's curve (rlspec.evidence.evaluation.plot_groups).
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

from rlspec.algos.config import ABLATIONS
from rlspec.evidence.curves import TAIL, tail_mean

THRESHOLD, GREEDY_EPISODES = 0.3, 20  # success rate of "steps to threshold"; greedy evaluation episodes


def run_one(task: str, ablation: str, seed: int, steps: int, overrides: list[str], runs: Path,
            preset: str = "default") -> Path:
    from rlspec.engines import bonus
    from rlspec.engines.bonus.config import ablation_decides
    from rlspec.runs.rundir import load_checkpoint, lock

    out = runs / f"{ablation}-s{seed}"
    common = [f"total_steps={steps}", f"seed={seed}"]
    decided = ablation_decides(bonus.build_config(preset, common, task, ablation))
    # an override this arm's ablation decides (bonus keys under baseline, top_k under top1) is not this arm's:
    # its config.json shows what it ran
    mine = [o for o in overrides if o.partition("=")[0].strip() not in decided]
    cfg = bonus.build_config(preset, [*common, *mine], task, ablation)
    updates = cfg.total_steps // bonus.steps_per_update(cfg)
    ckpt = out / "checkpoints/last.pt"
    done = load_checkpoint(ckpt)["update"] if ckpt.exists() else 0
    if done == updates:
        return out
    if out.exists() and not ckpt.exists():  # an interrupted first chunk: start again, unless a process runs it now
        lock(out).close()  # RunLocked (nothing deleted) when another process writes this run
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
            "pairs_mined": rows[-1].get("pairs/mined", math.nan),
            "bonus_errors": rows[-1].get("bonus/errors", math.nan)}


def greedy_success(run: Path, episodes: int = GREEDY_EPISODES) -> float:
    """The greedy policy's success rate (`rlspec eval RUN --episodes N`, argmax token, an env index no training
    run uses), measured once per run into RUN/eval/eval.json."""
    from rlspec.engines import bonus

    path = run / "eval/eval.json"
    if not path.is_file() and bonus.evaluate(run, ["--episodes", str(episodes)]) != 0:
        return math.nan
    return float(json.loads(path.read_text())["SuccessRate"])


def spread(values: list[float]) -> dict:
    """Mean with its 95% bootstrap CI over seeds, min and max (NaN seeds left out), and the number of seeds."""
    from rlspec.evidence.evaluation import summary

    finite = [v for v in values if math.isfinite(v)]
    return {**summary(values), "min": min(finite, default=math.nan), "max": max(finite, default=math.nan),
            "seeds": len(values)}


def against_baseline(arms: dict) -> dict:
    """Per bonus arm, for its late success rate and its success over the whole run (area under the curve): whether
    its CI overlaps the baseline's, whether it is ahead or behind outside the baseline's CI (its whole CI above or
    below the baseline's), and the comparison of the per-seed values (``compare``)."""
    from rlspec.evidence import stats

    if "baseline" not in arms:
        return {}
    out = {}
    for arm, entry in arms.items():
        if arm == "baseline":
            continue
        out[arm] = {}
        for key in ("success_rate", "success_rate_mean_over_run"):
            a, b = entry[key], arms["baseline"][key]
            seeds = ([r[key] for r in x["runs"].values()] for x in (entry, arms["baseline"]))
            out[arm][key] = {"ci_overlaps_baseline": bool(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]),
                             "ahead_outside_ci": bool(a["ci_low"] > b["ci_high"]),
                             "behind_outside_ci": bool(a["ci_high"] < b["ci_low"]),
                             "compare": stats.compare(*seeds)}
    return out


def with_statistics(result: dict) -> dict:
    """Per arm the spreads over its seeds (steps to threshold: an unreached seed at its budget, its last step),
    and the comparisons against the baseline."""
    from rlspec.evidence import stats

    for entry in result["ablations"].values():
        seeds = list(entry["runs"].values())
        for key in ("success_rate", "success_rate_mean_over_run", "greedy_success", "return"):
            entry[key] = spread([r[key] for r in seeds])
        entry["steps_to_threshold"] = spread(stats.censored_at([r["steps_to_threshold"] for r in seeds],
                                                               [r["steps"] for r in seeds]))
        entry["steps_to_threshold"]["reached"] = f"{sum(math.isfinite(r['steps_to_threshold']) for r in seeds)}/" \
                                                 f"{len(seeds)}"
        entry["bonus"] = summed([r["bonus"] for r in seeds])
    result["against_baseline"] = against_baseline(result["ablations"])
    return result


def markdown(result: dict) -> str:
    """Per bonus arm against the baseline: the difference and the verdict for both success measures."""
    rows = ["| arm against the baseline | late success: difference | verdict | success over the run: difference | "
            "verdict |", "|---|---|---|---|---|"]
    for arm, measures in result["against_baseline"].items():
        cells = []
        for key in ("success_rate", "success_rate_mean_over_run"):
            c = measures[key]["compare"]
            cells += [f"{c['difference']:+.3f}", f"{c['verdict']} (p = {c['permutation_p']:.2g})"]
        rows.append(f"| {arm} | {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"


def summed(stats: list[dict]) -> dict:
    """The bonus statistics of an arm's seeds added up (counts) or averaged (means)."""
    total = {"updates_with_bonus": sum(b["updates_with_bonus"] for b in stats),
             "of_updates": sum(b["of_updates"] for b in stats),
             "mean_bonus_updates": spread([b["mean_bonus_updates"] for b in stats])["mean"],
             "pairs_mined": spread([b["pairs_mined"] for b in stats])["mean"],
             "bonus_errors": sum(b["bonus_errors"] for b in stats if math.isfinite(b["bonus_errors"]))}
    for key in ("early_stops", "not_triggered"):
        total[key] = {k: sum(b[key][k] for b in stats) for k in stats[0][key]}
    return total


def finished(config: dict, rows: list[dict]) -> bool:
    """Whether a run reached its last whole update within its total_steps (only such runs are summarized)."""
    from rlspec.engines import bonus
    from rlspec.runs import config as runconfig

    cfg = runconfig.from_dict(bonus.BonusConfig, config)
    per_update = bonus.steps_per_update(cfg)
    return bool(rows) and rows[-1]["step"] >= cfg.total_steps // per_update * per_update


def summarize(runs: Path, out: Path, task: str, threshold: float = THRESHOLD, greedy: bool = True) -> dict:
    """Every run under ``runs`` into OUT/bonus_ablation_TASK.json and .png (module docstring)."""
    from rlspec.evidence.evaluation import plot_groups, read_run, steps_to_threshold
    from rlspec.runs.rundir import RunDir, read_metrics

    result: dict = {"task": task, "tail_fraction": TAIL, "success_threshold": threshold,
                    "engine": "bonus, local execution", "ablations": {}}
    curves, unfinished = [], []
    for run in sorted(p for p in runs.iterdir() if (p / "metrics.csv").exists()):
        cfg = RunDir.read_config(run)["config"]
        rows = read_metrics(run)
        if not finished(cfg, rows):
            unfinished.append({"run": str(run), "env_steps": rows[-1]["step"] if rows else 0})
            continue
        curve = read_run(run, group_by="ablation")
        curves.append(curve)
        cpu = json.loads((run / "bench_time.json").read_text())["cpu_s"] if (run / "bench_time.json").exists() else None
        entry = result["ablations"].setdefault(cfg["ablation"], {"runs": {}})
        entry["runs"][f"s{cfg['seed']}"] = {"success_rate": tail_mean(rows, "Metrics/SuccessRate"),
                                            "success_rate_mean_over_run": tail_mean(rows, "Metrics/SuccessRate", 1.0),
                                            "steps_to_threshold": steps_to_threshold(curve, threshold, "success"),
                                            "greedy_success": greedy_success(run) if greedy else math.nan,
                                            "return": tail_mean(rows, "Metrics/EpRet"), "steps": rows[-1]["step"],
                                            "cpu_s": cpu, "bonus": bonus_stats(rows)}
    with_statistics(result)
    result["unfinished"] = unfinished
    out.mkdir(parents=True, exist_ok=True)
    name = task.replace(":", "_")
    (out / f"bonus_ablation_{name}.json").write_text(json.dumps(result, indent=1))
    (out / f"bonus_ablation_{name}.md").write_text(markdown(result))
    plot_groups(curves, out / f"bonus_ablation_{name}.png")
    for ablation in ABLATIONS:
        if ablation in result["ablations"]:
            e = result["ablations"][ablation]["success_rate"]
            print(f"{ablation:11s} success {e['mean']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}] over {e['seeds']} "
                  f"seeds; {result['against_baseline'].get(ablation, '')}")
    return result


def main() -> None:
    from rlspec.runs.rundir import RunLocked

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="token-reach")
    p.add_argument("--ablations", nargs="*", default=list(ABLATIONS), choices=ABLATIONS)
    p.add_argument("--seeds", nargs="*", type=int, default=[0])
    p.add_argument("--steps", type=int, default=60_000, help="env steps per run")
    p.add_argument("--preset", default="default", help="the bonus engine's preset every run starts from")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every run")
    p.add_argument("--runs", type=Path, default=Path("bench-results/bonus_ablation"))
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--summarize", action="store_true", help="only summarize the runs found")
    p.add_argument("--threshold", type=float, default=THRESHOLD, help="success rate of 'steps to threshold'")
    p.add_argument("--no-greedy", action="store_true", help="do not evaluate the greedy policy of each run")
    p.add_argument("--recheck", type=Path, help="a JSON this script wrote: recompute its statistics and table only")
    args = p.parse_args()
    if args.recheck:
        from rlspec.evidence.evaluation import recheck

        recheck(args.recheck, with_statistics, markdown)
        return
    runs = args.runs / args.task.replace(":", "_")
    runs.mkdir(parents=True, exist_ok=True)
    if not args.summarize:
        for seed in args.seeds:
            for ablation in args.ablations:
                try:
                    run_one(args.task, ablation, seed, args.steps, args.set, runs, args.preset)
                except RunLocked as err:  # another invocation runs this one: leave it to it
                    print(f"{args.task} {ablation}-s{seed}: skipped, {err}", flush=True)
    summarize(runs, args.out, args.task, args.threshold, not args.no_greedy)


if __name__ == "__main__":
    main()
