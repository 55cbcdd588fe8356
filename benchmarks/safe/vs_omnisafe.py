"""rlspec's safe engine beside OmniSafe 0.5.0's own code (and, for PPO, Stable-Baselines3 2.9.2's) on the same
work: one JSON, its Markdown table (the safe engine's docs page includes it) and a figure per algorithm from the
runs of every side (benchmarks/safe/learning.py for rlspec, benchmarks/safe/anchors/run_omnisafe.py for OmniSafe,
benchmarks/safe/anchors/run_sb3.py for SB3, the same override set). Reported, never asserted.

    python -m benchmarks.safe.vs_omnisafe --rlspec runs/safe-cmp --omnisafe runs/omnisafe \\
        --total-steps 200000 --out benchmarks/safe/results

Per algorithm and side (rlspec `ALGO-sSEED` run directories; OmniSafe `ALGO-{ENV}/seed-SSS-<time>`): only runs that
reached --total-steps enter the statistics (`rlspec.evidence.evaluation.group_report`: the last 10% of each run's
epochs, mean and 95% bootstrap CI over seeds, violation rate, late-cost variance, λ oscillation); unfinished runs
are listed with the env steps they reached. Per algorithm, for final return and final cost against each anchor:
whether the two CIs overlap (which says little at 3 to 5 seeds), and rlspec/evidence/stats.py's comparison of the
per-seed values (IQMs, the exact permutation p, the minimum detectable effect at 80% power, and the verdict word
those numbers allow; no equivalence margin was declared before these runs, so none is claimed); for the
Lagrangian algorithms, whether each side's late cost is within the limit ± 5 (checks keyed by group, e.g.
"omnisafe PPOLag"). Wall
seconds per epoch (the median of each run's Time/Rollout + Time/Update) are written beside, and the differences
in settings that the override set does not remove (the defaults table of omnisafe_safe.json, rows whose values
differ) are copied in.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.safe.anchors.run_omnisafe import shared  # the override set both sides run with
from rlspec.evidence import stats
from rlspec.evidence.evaluation import Curve, group_report, plot_groups, read_csv, read_run

COST_LIMIT, COST_BAND = 25.0, 5.0
LAGRANGIAN = ("PPOLag", "CPPOPID", "TRPOLag", "TRPOPID", "PPOLagSem")
NATURAL_GRADIENT = ("TRPO", "TRPOLag", "TRPOPID", "CPO")
# Columns of one name that the two tools log differently (read in OmniSafe 0.5.0's code; the JSON carries them)
KL_PPO = ("Train/KL: rlspec logs the last minibatch's k3 estimate before its step (the early-stop statistic); "
          "OmniSafe's PolicyGradient._update the exact KL, summed over action dimensions, over the whole batch "
          "after the last update iteration")
KL_NATURAL = ("Train/KL: OmniSafe's NaturalPG._fvp stores the KL of the policy with itself (0) at every "
              "Fisher-vector product (33 in a CPO update: two 15-iteration conjugate-gradient solves of 16 products "
              "each, and xHx) beside the line search's one KL after the step, and the logger averages them: its "
              "Train/KL is about the real one / 34 (rlspec logs the line search's KL)")
LOSS_CPO = ("Loss/Loss_pi: OmniSafe's _loss_pi stores -S at each call (before the step, where it is 0; each line-"
            "search trial; after the step) and CPO then stores -S + S_c, averaged together; rlspec logs -S + S_c "
            "after the step, as CPO's own store")


def logged_otherwise(algo: str) -> list[str]:
    """What a column of the same name means in each tool, for one algorithm (the entropy is one convention since
    rlspec took OmniSafe's: the mean over action dimensions)."""
    if algo not in NATURAL_GRADIENT:
        return [KL_PPO]
    return [KL_NATURAL] + ([LOSS_CPO] if algo == "CPO" else [])


def find_runs(rlspec_dir: Path, omnisafe_dir: Path, algo: str, sb3_dir: Path | None = None) -> list[Path]:
    """rlspec's ALGO-s* run directories, OmniSafe's ALGO-{*}/seed-* (the latest directory of a seed), and for PPO
    SB3's PPO-s* (benchmarks/safe/anchors/run_sb3.py)."""
    ours = sorted(p for p in rlspec_dir.glob(f"{algo}-s*") if (p / "metrics.csv").is_file())
    theirs: dict[str, Path] = {}
    for p in sorted(omnisafe_dir.glob(f"{algo}-{{*}}/seed-*"), reverse=True):
        if (p / "progress.csv").is_file():
            theirs.setdefault(p.name.split("-")[1], p)  # seed-000-<time>: the seed's latest directory
    sb3 = [] if sb3_dir is None or algo != "PPO" else sorted(
        p for p in sb3_dir.glob("PPO-s*") if (p / "progress.csv").is_file())
    return ours + sorted(theirs.values()) + sb3


def log_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a run's own log: rlspec's metrics.csv, else OmniSafe's or SB3's progress.csv."""
    name = "metrics.csv" if (path / "metrics.csv").is_file() else "progress.csv"
    return read_csv(path / name)[1]


def optim_cases(curves: list[Curve]) -> dict[str, dict[str, int]]:
    """Per group, the epochs in which CPO's dual took each case (Misc/OptimCase, which both tools log): rlspec's
    dual differs from OmniSafe 0.5.0's in cases 1-2 only (the sign of r; case 1 at B = 0), so the counts say
    whether that difference could act on these runs; {} for algorithms that log no case."""
    counts: dict[str, dict[str, int]] = {}
    for c in curves:
        for row in log_rows(c.path):
            if row.get("Misc/OptimCase") not in (None, ""):
                group = counts.setdefault(c.group, {})
                case = str(int(float(row["Misc/OptimCase"])))
                group[case] = group.get(case, 0) + 1
    return counts


def seconds_per_epoch(path: Path) -> float:
    """Median wall seconds per epoch: of Time/Rollout + Time/Update where the tool logs them (rlspec, OmniSafe),
    else of the steps of SB3's time/time_elapsed (whole seconds since the start, a row per rollout + train); the
    median, so that an epoch that waited (a paused or crowded machine) does not move it."""
    rows = log_rows(path)
    per = [float(r["Time/Rollout"]) + float(r["Time/Update"]) for r in rows
           if r.get("Time/Rollout") not in (None, "") and r.get("Time/Update") not in (None, "")]
    if not per and rows and "time/time_elapsed" in rows[0]:
        per = list(np.diff([0.0] + [float(r["time/time_elapsed"]) for r in rows]))
    return float(np.median(per)) if per else math.nan


def overlap(a: dict, b: dict) -> bool | None:
    """Whether two [ci_low, ci_high] intervals overlap (None when either is missing)."""
    if any(math.isnan(x) for x in (a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"])):
        return None
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def against(ours: dict, anchor: dict, metric: str, higher_is_better: bool) -> dict | None:
    """stats.compare of rlspec's per-seed values of ``metric`` with the anchor's (None where one side lacks it)."""
    mine, theirs = ([r[metric] for r in g["runs"]] for g in (ours, anchor))
    if any(math.isnan(v) for v in mine + theirs):
        return None
    return stats.compare(mine, theirs, None, higher_is_better)


def without_multiplier(algo: str, curve: Curve) -> Curve:
    """The curve as compared: λ only for the Lagrangian algorithms (rlspec logs λ = 0 for PPO and CPO, which have
    none; OmniSafe logs none for them)."""
    if algo in LAGRANGIAN:
        return curve
    return replace(curve, values={k: v for k, v in curve.values.items() if k != "multiplier"})


def reached(curve: Curve, total_steps: int) -> bool:
    """Whether a run got to total_steps (only such runs enter the statistics and the figure)."""
    return bool(curve.steps.size) and curve.steps[-1] >= total_steps


def setting_mismatches(curve: Curve, expected: list[str]) -> dict[str, list[str]]:
    """An rlspec run's config.json values that differ from the shared override set ``expected`` ("key=value", seed
    left out): key -> [the run's, the set's]; {} for another tool's run (its settings are the set by
    construction: omnisafe_safe.py, sb3_safe.py)."""
    if curve.source != "rlspec":
        return {}
    config = json.loads((curve.path / "config.json").read_text())["config"]
    wanted = dict(item.split("=", 1) for item in expected if not item.startswith("seed="))
    found = {k: str(_dotted(config, k)) for k in wanted}
    return {k: [found[k], v] for k, v in wanted.items() if not _same(found[k], v)}


def _dotted(config: dict, key: str):
    """config.json's value of a dotted key ("ppo.update_iters"); None when absent."""
    for part in key.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config


def _same(a: str, b: str) -> bool:
    """Two --set values alike: as numbers where both are (0.0003 is 3e-4), else as text."""
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def compare_algo(algo: str, curves: list[Curve], total_steps: int, expected: list[str]) -> dict:
    """One algorithm: finished runs' group report per side, unfinished runs listed, runs made with other settings
    than the shared set listed and left out, the checks."""
    mismatched = {str(c.path): setting_mismatches(c, expected) for c in curves}
    out = {"unfinished": [{"path": str(c.path), "env_steps": float(c.steps[-1]) if c.steps.size else 0.0}
                          for c in curves if not reached(c, total_steps)],
           "excluded_other_settings": {path: diff for path, diff in mismatched.items() if diff},
           "wall_s_per_epoch": {c.group: [] for c in curves}}
    curves = [c for c in curves if not mismatched[str(c.path)]]
    done = [c for c in curves if reached(c, total_steps)]
    for c in curves:
        out["wall_s_per_epoch"][c.group].append(seconds_per_epoch(c.path))
    if not done:
        out["report"], out["checks"] = None, {}
        return out
    report = group_report(done, cost_limit=COST_LIMIT)
    out["report"] = report
    ours = report["groups"].get(f"rlspec {algo}")
    checks: dict = {}
    for name, anchor in report["groups"].items():
        if ours and anchor is not ours:  # per anchor (OmniSafe; SB3 for PPO): SB3's cost CI exists by its callback
            s, a = ours["summary"], anchor["summary"]
            checks[name] = {"return_ci_overlaps": overlap(s["final_return"], a["final_return"]),
                            "cost_ci_overlaps": overlap(s["final_cost"], a["final_cost"]),
                            "return": against(ours, anchor, "final_return", True),
                            "cost": against(ours, anchor, "final_cost", False)}
    if algo in LAGRANGIAN:
        for name, g in report["groups"].items():
            checks.setdefault(name, {})["late_cost_within_limit_pm5"] = (
                abs(g["summary"]["final_cost"]["mean"] - COST_LIMIT) <= COST_BAND)
    out["checks"] = checks
    return out


def setting_differences(omnisafe_json: Path, algo: str) -> list[dict] | None:
    """Rows of omnisafe_safe.json's defaults table whose two values differ (what the override set leaves); None
    when that file holds no defaults table for the algorithm (omnisafe_safe.py writes it once its seeds ran)."""
    if not omnisafe_json.is_file():
        return None
    entry = json.loads(omnisafe_json.read_text()).get("algos", {}).get(algo, {})
    return entry.get("defaults_differ")


def anchor_sets(omnisafe_json: Path, algo: str) -> list[str]:
    """The rlspec --set overrides that give rlspec OmniSafe's defaults where the algorithm's yaml differs (e.g.
    CPO's update_iters 10): rlspec runs must have been made with them; [] when the file holds none."""
    if not omnisafe_json.is_file():
        return []
    return json.loads(omnisafe_json.read_text()).get("algos", {}).get(algo, {}).get("rlspec_anchor_sets") or []


def _ci(stat: dict, digits: int = 1) -> str:
    if math.isnan(stat["mean"]):
        return "—"
    return f"{stat['mean']:.{digits}f} [{stat['ci_low']:.{digits}f}, {stat['ci_high']:.{digits}f}]"


def _said(result: dict | None) -> str:
    return "—" if result is None else f"{result['verdict']} (p = {result['permutation_p']:.2g})"


def _yes(value: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "—"}[value]


def markdown(result: dict) -> str:
    """The table: per algorithm and side, the finished seeds, last-10% return and cost (mean [95% CI]), each
    seed's return/cost, violation rate, final λ, wall seconds per epoch (range of the seeds' medians), whether the
    late cost is within the limit ± 5 (Lagrangian algorithms), and for rlspec the verdict of its return and of its
    cost against each anchor (rlspec/evidence/stats.py's words, with the permutation p)."""
    head = ["algorithm", "side", "seeds", "return", f"cost (limit {COST_LIMIT:g})", "per seed: return / cost",
            "violation rate", "final λ", "wall s / epoch", f"cost in {COST_LIMIT:g} ± {COST_BAND:g}",
            "against the anchor: return; cost"]
    rows = [f"| {' | '.join(head)} |", f"|{'---|' * len(head)}"]
    for algo, r in result["algos"].items():
        for group, g in (r["report"] or {"groups": {}})["groups"].items():
            summ, checks = g["summary"], r["checks"]
            seeds = ", ".join(f"{run['final_return']:.1f}/{run['final_cost']:.0f}" for run in g["runs"])
            wall = [w for w in r["wall_s_per_epoch"].get(group, []) if not math.isnan(w)]
            anchors = "; ".join(f"{name.split()[0]}: {_said(c['return'])}; {_said(c['cost'])}"
                                for name, c in checks.items() if "return" in c)
            rows.append("| " + " | ".join([
                algo, group.split()[0], str(len(g["runs"])), _ci(summ["final_return"]), _ci(summ["final_cost"]),
                seeds, _ci(summ["violation_rate"], 2), _ci(summ["final_multiplier"], 2),
                f"{min(wall):.0f}–{max(wall):.0f}" if wall else "—",
                _yes(checks.get(group, {}).get("late_cost_within_limit_pm5")),
                anchors if anchors and group.startswith("rlspec") else "—"]) + " |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rlspec", type=Path, default=Path("runs/safe-cmp"), help="rlspec run directories")
    p.add_argument("--omnisafe", type=Path, default=Path("runs/omnisafe"), help="OmniSafe's log directory")
    p.add_argument("--sb3", type=Path, default=Path("runs/sb3"), help="SB3 PPO runs (anchors/run_sb3.py)")
    p.add_argument("--algos", nargs="+", default=["PPOLag"])
    p.add_argument("--total-steps", type=int, default=200_000)
    p.add_argument("--steps-per-epoch", type=int, default=4_000, help="of the shared override set")
    p.add_argument("--num-envs", type=int, default=1, help="of the shared override set")
    p.add_argument("--settings", type=Path, help="omnisafe_safe.json holding the defaults table (default: the one "
                                                 "under --omnisafe)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    result = {"what": "rlspec's safe engine beside OmniSafe 0.5.0 on the same work (benchmarks/safe/vs_omnisafe.py)",
              "total_steps": args.total_steps, "cost_limit": COST_LIMIT, "machine": platform.processor() or
              platform.machine(), "algos": {}}
    figures: dict[str, list[Curve]] = {}
    for algo in args.algos:
        curves = [without_multiplier(algo, read_run(path))
                  for path in find_runs(args.rlspec, args.omnisafe, algo, args.sb3)]
        settings = args.settings or args.omnisafe / "omnisafe_safe.json"
        aligned = anchor_sets(settings, algo)
        expected = shared(algo, 0, args.total_steps, args.steps_per_epoch, args.num_envs)["rlspec"] + aligned
        result["algos"][algo] = compare_algo(algo, curves, args.total_steps, expected)
        figures[algo] = [c for c in curves if reached(c, args.total_steps)
                         and str(c.path) not in result["algos"][algo]["excluded_other_settings"]]
        result["algos"][algo]["optim_cases"] = optim_cases(figures[algo])
        result["algos"][algo]["logged_otherwise"] = logged_otherwise(algo)
        result["algos"][algo]["rlspec_anchor_sets"] = aligned
        result["algos"][algo]["setting_differences"] = setting_differences(settings, algo)
        result["algos"][algo]["settings_from"] = str(settings)
    if not any(figures.values()):
        print(f"safe_vs_omnisafe: no finished runs under {args.rlspec} or {args.omnisafe}")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "safe_vs_omnisafe.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "safe_vs_omnisafe.md").write_text(markdown(result))
    for algo, curves in figures.items():
        if curves:
            plot_groups(curves, args.out / f"safe_vs_omnisafe_{algo}.png", COST_LIMIT)
    for algo, r in result["algos"].items():
        finished = {g: len(v["runs"]) for g, v in (r["report"] or {"groups": {}})["groups"].items()}
        print(f"{algo}: finished {finished}, unfinished {len(r['unfinished'])}, checks {r['checks']}")
    print(f"wrote {args.out / 'safe_vs_omnisafe.json'}, safe_vs_omnisafe.md and safe_vs_omnisafe_ALGO.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
