"""Safe-RL learning benchmark: algorithms × seeds trained by the reference engine
(``rlspec.engines.safe.run``) on one Safety-Gymnasium task with one stated budget, summarized side by side
with OmniSafe 0.5.0's published 1e7-step table as the anchor. Writes JSON + a plot; reported, never asserted.

    python -m benchmarks.safe.learning --algos PPO PPOLag --seeds 0 1 2 --steps 100000
    python -m benchmarks.safe.learning --algos CPPOPID PPOSaute PPOSimmerPID --seeds 0 --steps 100000
    python -m benchmarks.safe.learning --summarize            # JSON + plot from every run in --runs

Needs the `safety` environment (nox -s safety's venv) and MUJOCO_GL=egl (or osmesa) for rendered frames.
Each run lives in ``--runs/ALGO-sSEED`` (a full run directory: metrics.csv, TensorBoard, checkpoints); a
finished run is kept, an interrupted one is resumed from its last checkpoint (the reference engine is
deterministic, so the result is the same), so runs of several invocations summarize together. Every
invocation ends by summarizing all runs found: ``--out/safe_learning.json`` and one plot per family
(``safe_learning_ppo.png``, ``safe_learning_trust_region.png``).

The summary of a run is the mean of Metrics/EpRet and Metrics/EpCost (OmniSafe's windowed episode means)
over its last 10% of epochs (at least one); per algorithm, the mean and spread over its seeds. The checks
the issue names (PPOLag's cost within the limit ± 5 while PPO's exceeds it) are computed and written, not
asserted: at a CPU budget far below OmniSafe's 1e7 steps they may honestly fail.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import statistics
import time
from pathlib import Path

from rlspec.evidence.cpu import identity as cpu_identity
from rlspec.evidence.curves import TAIL, plot_groups, tail_mean

# OmniSafe 0.5.0's benchmark table, SafetyPointGoal1-v0, 1e7 steps, cost limit 25: (EpRet, EpCost)
# (benchmarks/on-policy/README.md of its repository: the means of its "Reward" and "Cost" columns)
OMNISAFE_ANCHOR = {
    "PPO": (25.44, 55.72), "PPOLag": (12.96, 25.80), "CPPOPID": (8.43, 25.74), "PPOSaute": (7.06, 20.04),
    "PPOSimmerPID": (8.30, 25.32), "TRPO": (27.20, 45.88), "TRPOLag": (18.51, 22.98), "TRPOPID": (19.24, 21.38),
    "CPO": (20.46, 28.84), "P3O": (1.6, 31.1),
}
FIGURES = {"safe_learning_ppo": ["PPO", "PPOLag", "CPPOPID", "PPOSaute", "PPOSimmerPID", "PPOLagSem"],
           "safe_learning_trust_region": ["PPO", "PPOLag", "TRPO", "TRPOLag", "TRPOPID", "CPO", "P3O"]}
# the budget's overrides of OmniSafe's defaults (stated in the JSON): more, shorter epochs so that λ and the
# PID see ten updates in 1e5 steps; the episode window spans the same two epochs OmniSafe's 50 do at 20000
# (the side-by-side with OmniSafe passes ep_window=50 after these: its window is 50 episodes, whatever the epoch)
BUDGET_SET = ["steps_per_epoch=10000", "ep_window=20"]


def run_one(algo: str, seed: int, env: str, steps: int, overrides: list[str], runs: Path) -> Path:
    from rlspec.engines import safe
    from rlspec.runs.rundir import load_checkpoint

    out = runs / f"{algo}-s{seed}"
    cfg = safe.build_config("default", [*BUDGET_SET, f"total_steps={steps}", f"seed={seed}", *overrides], algo, env)
    epochs = cfg.total_steps // cfg.steps_per_epoch
    ckpt = out / "checkpoints/last.pt"
    done = load_checkpoint(ckpt)["epoch"] if ckpt.exists() else 0
    if done == epochs:
        return out
    if out.exists() and not ckpt.exists():  # stopped before its first checkpoint: start it again
        shutil.rmtree(out)
    c0, w0 = time.process_time(), time.perf_counter()
    safe.run(cfg, out, resume=ckpt.exists(), show_progress=False)
    took = {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0, "epochs": epochs - done}
    log = out / "bench_time.json"
    prior = json.loads(log.read_text()) if log.exists() else []
    log.write_text(json.dumps(prior + [took], indent=1))
    print(f"{out.name}: {epochs} epochs, {took['cpu_s']:.0f} s CPU", flush=True)
    return out


def summarize(runs: Path, out: Path) -> dict:
    from rlspec.runs.rundir import RunDir, read_metrics

    per_algo: dict[str, dict] = {}
    for run in sorted(p for p in runs.iterdir() if (p / "metrics.csv").exists()):
        cfg = RunDir.read_config(run)["config"]
        rows = read_metrics(run)
        times = json.loads((run / "bench_time.json").read_text()) if (run / "bench_time.json").exists() else []
        entry = per_algo.setdefault(cfg["algo"], {"runs": {}, "env_id": cfg["env_id"]})
        entry["runs"][f"s{cfg['seed']}"] = {
            "EpRet": tail_mean(rows, "Metrics/EpRet"), "EpCost": tail_mean(rows, "Metrics/EpCost"), "steps": rows[-1]["step"], "total_steps": cfg["total_steps"],
            "cpu_s": sum(t["cpu_s"] for t in times),
            "curve": [(r["step"], r["Metrics/EpRet"], r["Metrics/EpCost"], r.get("Metrics/LagrangeMultiplier", math.nan))
                      for r in rows]}
        entry.setdefault("rows", []).append(rows)
        entry["cost_limit"] = cfg["safety"]["cost_limit"]
    for algo, entry in per_algo.items():
        finals = [r for r in entry["runs"].values()]
        for key in ("EpRet", "EpCost"):
            vals = [r[key] for r in finals]
            entry[key] = {"mean": statistics.fmean(vals), "min": min(vals), "max": max(vals), "seeds": len(vals)}
        entry["omnisafe_1e7"] = anchor(algo)
    checks = {}
    if "PPOLag" in per_algo:
        lim = per_algo["PPOLag"]["cost_limit"]
        checks["PPOLag cost within limit ± 5"] = abs(per_algo["PPOLag"]["EpCost"]["mean"] - lim) <= 5.0
    if "PPO" in per_algo:
        checks["PPO cost exceeds the limit"] = per_algo["PPO"]["EpCost"]["mean"] > per_algo["PPO"]["cost_limit"]
    groups = {algo: entry.pop("rows") for algo, entry in per_algo.items()}
    result = {"budget": {"overrides": BUDGET_SET, "tail_fraction": TAIL, "engine": "reference (rlspec train safe)",
                         "torch_threads": 1},
              "machine": {"python": platform.python_version(), "cpu": cpu_identity()},
              "checks": checks, "algos": per_algo}
    out.mkdir(parents=True, exist_ok=True)
    (out / "safe_learning.json").write_text(json.dumps(result, indent=1))
    (out / "safe_learning.md").write_text(markdown(result))
    first = next(iter(per_algo.values()))
    for name, algos in FIGURES.items():  # one figure per family (PPO and PPOLag beside the trust-region one)
        shown = {a: groups[a] for a in algos if a in groups}
        if shown:
            plot_groups(shown, [("Metrics/EpRet", "episode return"), ("Metrics/EpCost", "episode cost"),
                                ("Metrics/LagrangeMultiplier", "Lagrange multiplier λ")], out / f"{name}.png",
                        f"{first['env_id']}: mean over seeds, band = min..max",
                        {"Metrics/EpCost": (first["cost_limit"], f"cost limit = {first['cost_limit']:g}")})
    print_table(per_algo, checks)
    return result


ORDER = list(dict.fromkeys(a for algos in FIGURES.values() for a in algos))  # the families, in order


def anchor(algo: str) -> dict:
    """OmniSafe's published 1e7-step figures of ``algo`` (None where it publishes none)."""
    return dict(zip(("EpRet", "EpCost"), OMNISAFE_ANCHOR.get(algo, (None, None))))


def with_anchor(result: dict) -> dict:
    """The JSON with each algorithm's OmniSafe figures from OMNISAFE_ANCHOR (a figure added to the table later)."""
    for algo, entry in result["algos"].items():
        entry["omnisafe_1e7"] = anchor(algo)
    return result


def _spread(stat: dict) -> str:
    """Mean over seeds, with (min..max) where there are several."""
    if stat["seeds"] == 1:
        return f"{stat['mean']:.2f}"
    return f"{stat['mean']:.2f} ({stat['min']:.1f}..{stat['max']:.1f})"


def markdown(result: dict) -> str:
    """The JSON's table: per algorithm the seeds, the last-10% return and cost with their spread, the CPU seconds
    per run, and OmniSafe's published 1e7-step figures where it publishes them."""
    lines = ["| algorithm | seeds | EpRet, last 10% (min..max) | EpCost, last 10% (min..max) | CPU s per run | "
             "OmniSafe 1e7 (ret / cost) |", "|---|---|---|---|---|---|"]
    algos = result["algos"]
    for algo in [a for a in ORDER if a in algos] + sorted(set(algos) - set(ORDER)):
        e = algos[algo]
        cpu = statistics.fmean(r["cpu_s"] for r in e["runs"].values())
        anchor = e["omnisafe_1e7"]
        published = "—" if anchor["EpRet"] is None else f"{anchor['EpRet']:g} / {anchor['EpCost']:g}"
        lines.append(f"| {algo} | {e['EpRet']['seeds']} | {_spread(e['EpRet'])} | {_spread(e['EpCost'])} | "
                     f"{cpu:.0f} | {published} |")
    return "\n".join(lines) + "\n"


def print_table(per_algo: dict, checks: dict) -> None:
    print(f"{'algo':14s} seeds  steps    EpRet          EpCost         OmniSafe 1e7 (ret/cost)")
    for algo, e in sorted(per_algo.items()):
        anchor = e["omnisafe_1e7"]
        steps = next(iter(e["runs"].values()))["steps"]
        print(f"{algo:14s} {e['EpRet']['seeds']:5d}  {steps:7.0f}  {e['EpRet']['mean']:6.2f}"
              f" [{e['EpRet']['min']:.1f},{e['EpRet']['max']:.1f}]  {e['EpCost']['mean']:6.2f}"
              f" [{e['EpCost']['min']:.1f},{e['EpCost']['max']:.1f}]  {anchor['EpRet']}/{anchor['EpCost']}")
    for name, ok in checks.items():
        print(f"{name}: {ok}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", nargs="*", default=[])
    p.add_argument("--seeds", nargs="*", type=int, default=[0])
    p.add_argument("--env", default="SafetyPointGoal1-v0")
    p.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every run")
    p.add_argument("--runs", type=Path, default=Path("bench-results/safe_learning"), help="run directories")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--summarize", action="store_true", help="only summarize the runs found")
    p.add_argument("--recheck", type=Path, help="a JSON this script wrote: OmniSafe's figures and the table again")
    args = p.parse_args()
    if args.recheck:
        result = with_anchor(json.loads(args.recheck.read_text()))
        args.recheck.write_text(json.dumps(result, indent=1))
        args.recheck.with_suffix(".md").write_text(markdown(result))
        return
    args.runs.mkdir(parents=True, exist_ok=True)
    if not args.summarize:
        for seed in args.seeds:  # seed-major: an early stop still leaves every algorithm with seed 0
            for algo in args.algos:
                run_one(algo, seed, args.env, args.steps, args.set, args.runs)
    summarize(args.runs, args.out)


if __name__ == "__main__":
    main()
