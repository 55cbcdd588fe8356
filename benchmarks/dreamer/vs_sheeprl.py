"""DreamerV3 on the room beside sheeprl 0.8.4's own, on the same work: the room-exit preset's task, model, budget
and seeds, greedy success on the same fresh rooms after every 2,048 env steps, per implementation (sheeprl,
rlspec's reference engine, rlspec's fast engine). Reads the runs, writes the comparison; trains nothing.

    python -m benchmarks.dreamer.vs_sheeprl --rlspec runs/room-exit --sheeprl runs/sheeprl-room-s0 ...
        [--out benchmarks/dreamer/results] [--note TEXT]
    python -m benchmarks.dreamer.vs_sheeprl --recheck benchmarks/dreamer/results/dreamer_vs_sheeprl.json  # its curves

Inputs: ``--rlspec DIR``: DIR/<engine>/s<seed>/greedy.json from benchmarks/dreamer/room_exit.py (the preset's
settings: its OVERRIDES + the conv encoder); ``--sheeprl DIR ...``: the seed directories' greedy.json under each DIR
from benchmarks/dreamer/anchors/run_sheeprl.py (sheeprl's player of each chunk checkpoint on the rooms ``rlspec
eval`` plays).
A row: env_steps, wall_s and cpu_s (training so far, evaluation excluded; one torch thread each, so cpu_s is the
time the run takes alone on a core, whatever shared the machine; None where not recorded), greedy_success.

Per implementation: the seeds that reach greedy success >= GOAL and at how many env steps and CPU seconds (mean,
bootstrap 95% CI, per seed); the uniform random rate. Goals (reported, never asserted): rlspec's reference
reaches GOAL within sheeprl's seed spread (a bootstrap 95% CI of the difference of mean env steps that contains
0, or lies below it); the fast engine in <= 0.67x sheeprl's CPU seconds; every rlspec seed reaches GOAL. A seed
that never reaches GOAL within the budget (--budget) enters the env-step statistics at the budget (a censored
value: the difference is then a bound), and is counted as such; a seed that has reached neither yet is still
running: listed (its curve drawn) and left out of every statistic and goal. Per rlspec engine against sheeprl
(``goals``: ``<engine>_vs_sheeprl``): rlspec/evidence/stats.py's comparison of the per-seed env steps to GOAL
(censored at the budget; lower is better) and of the final greedy success (IQMs, exact permutation p, minimum
detectable effect, the verdict word; at 3 seeds a side the exact p cannot go below 0.10). Writes
OUT/dreamer_vs_sheeprl.{json,png,md}: mean and per-seed curves against env steps and against CPU seconds, and the
table of those verdicts; ``--recheck JSON`` recomputes the statistics and the table from the JSON's curves.
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

from benchmarks.dreamer.room_exit import GOAL, random_rate
from rlspec.evidence import stats
from rlspec.evidence.cpu import identity as cpu_identity
from rlspec.evidence.evaluation import CI_LEVEL, bootstrap_ci, recheck

FAST_CPU_GOAL = 0.67  # the fast engine's CPU seconds to GOAL over sheeprl's
IMPLEMENTATIONS = ("sheeprl", "reference", "fast")


def read_rlspec(root: Path, name: str = "greedy.json") -> dict[str, dict[int, list[dict]]]:
    """{engine: {seed: rows}} from root/<engine>/s<seed>/NAME."""
    out: dict[str, dict[int, list[dict]]] = {}
    for path in sorted(root.glob(f"*/s*/{name}")):
        out.setdefault(path.parent.parent.name, {})[int(path.parent.name[1:])] = json.loads(path.read_text())
    return out


def read_sheeprl(roots: list[Path], name: str = "greedy.json") -> dict[int, list[dict]]:
    """{seed: rows} from the seed directories (s<seed>) with a NAME under each root."""
    return {int(path.parent.name[1:]): json.loads(path.read_text())
            for root in roots for path in sorted(root.glob(f"**/s*/{name}"))}


def first_at_goal(rows: list[dict]) -> dict | None:
    return next((r for r in rows if r["greedy_success"] >= GOAL), None)


def seed_summary(all_rows: list[dict], budget: int) -> dict:
    """The seed's figures within the budget; rows past it (a run continued further) are summarized apart."""
    rows = [r for r in all_rows if r["env_steps"] <= budget] or all_rows[:1]
    hit = first_at_goal(rows)
    later = [r for r in all_rows if r["env_steps"] > budget]
    beyond = {"beyond_budget": {"last_env_steps": later[-1]["env_steps"],
                                "best_success": max(r["greedy_success"] for r in later),
                                "first_at_goal": (first_at_goal(later) or {}).get("env_steps")}} if later else {}
    return {"complete": rows[-1]["env_steps"] >= budget or hit is not None, "reached": hit is not None,
            "env_steps": hit["env_steps"] if hit else None,
            "cpu_s": hit.get("cpu_s") if hit else None, "wall_s": hit.get("wall_s") if hit else None,
            "budget": budget, "last_env_steps": rows[-1]["env_steps"], "final_success": rows[-1]["greedy_success"],
            "best_success": max(r["greedy_success"] for r in rows), **beyond}


def ci(values: list[float]) -> dict:
    mean, low, high = bootstrap_ci(values)
    return {"mean": mean, "ci": [low, high], "n": sum(not math.isnan(v) for v in values)}


def steps_or_budget(summary: dict) -> float:
    """Env steps to GOAL; a complete seed that never reached it: the budget (censored)."""
    return float(summary["env_steps"] if summary["reached"] else summary["budget"])


def difference_ci(a: list[float], b: list[float], resamples: int = 10_000, seed: int = 0) -> list[float]:
    """Percentile bootstrap CI of mean(a) - mean(b), each sample resampled within itself."""
    rng = np.random.default_rng(seed)
    x, y = np.asarray(a, float), np.asarray(b, float)
    diffs = (x[rng.integers(0, x.size, (resamples, x.size))].mean(1)
             - y[rng.integers(0, y.size, (resamples, y.size))].mean(1))
    tail = (1 - CI_LEVEL) / 2 * 100
    return [float(np.percentile(diffs, tail)), float(np.percentile(diffs, 100 - tail))]


def implementation(seeds: dict[int, list[dict]], budget: int) -> dict:
    """Per seed its summary; the statistics over the complete seeds (those that reached GOAL or the budget), the
    seeds still running listed apart."""
    per_seed = {seed: seed_summary(rows, budget) for seed, rows in sorted(seeds.items())}
    done = [s for s in per_seed.values() if s["complete"]]
    reached = [s for s in done if s["reached"]]
    cpu = [s["cpu_s"] for s in reached if s["cpu_s"] is not None]
    censored_cpu = [[r for r in seeds[seed] if r["env_steps"] <= s["budget"]][-1].get("cpu_s")
                    for seed, s in per_seed.items() if s["complete"] and not s["reached"]]
    return {"seeds": per_seed, "reached": f"{len(reached)} of {len(done)}",
            "running": [seed for seed, s in per_seed.items() if not s["complete"]],
            "env_steps_to_goal": ci([steps_or_budget(s) for s in done]) if done else None,
            "env_steps_to_goal_censored": sum(not s["reached"] for s in done),
            "cpu_s_to_goal": ci(cpu) if cpu else None, "cpu_s_seeds": len(cpu),
            # seeds that never reached GOAL: the CPU seconds of their whole budget, a lower bound on their time to it
            "cpu_s_censored": [c for c in censored_cpu if c is not None]}


def goals(impls: dict[str, dict]) -> dict:
    out = {}
    sheep, ref, fast = (impls.get(k) for k in IMPLEMENTATIONS)
    if sheep and ref and sheep["env_steps_to_goal"] and ref["env_steps_to_goal"]:
        steps = [[steps_or_budget(s) for s in impl["seeds"].values() if s["complete"]] for impl in (ref, sheep)]
        low, high = difference_ci(*steps)
        out["reference_env_steps_minus_sheeprl"] = {
            "mean": float(np.mean(steps[0]) - np.mean(steps[1])), "ci": [low, high],
            "met": bool(low <= 0), "goal": "the 95% CI contains 0 or lies below it"}
    if sheep and fast and fast["cpu_s_to_goal"]:
        goal = f"<= {FAST_CPU_GOAL} (mean CPU seconds to {GOAL}, seeds that reached it)"
        if sheep["cpu_s_to_goal"]:
            ratio = fast["cpu_s_to_goal"]["mean"] / sheep["cpu_s_to_goal"]["mean"]
            out["fast_cpu_s_over_sheeprl"] = {"ratio": ratio, "met": bool(ratio <= FAST_CPU_GOAL), "goal": goal}
        elif sheep["cpu_s_censored"]:  # no sheeprl seed got there: its budget's CPU seconds bound its time from below
            bound = fast["cpu_s_to_goal"]["mean"] / float(np.mean(sheep["cpu_s_censored"]))
            out["fast_cpu_s_over_sheeprl"] = {
                "ratio_at_most": bound, "met": bool(bound <= FAST_CPU_GOAL), "goal": goal,
                "censored": "no sheeprl seed reached the goal within the budget: the ratio is at most fast's CPU "
                            "seconds to it over sheeprl's for its whole budget"}
    for name in ("reference", "fast"):
        if impls.get(name):
            seeds = [s for s in impls[name]["seeds"].values() if s["complete"]]
            out[f"{name}_all_seeds_reach"] = {"met": len(seeds) >= 3 and all(s["reached"] for s in seeds),
                                              "reached": impls[name]["reached"]}
            if sheep:
                out[f"{name}_vs_sheeprl"] = against(impls[name], sheep)
    return out


def against(mine: dict, sheep: dict) -> dict:
    """stats.compare of an rlspec engine's complete seeds with sheeprl's: env steps to GOAL (censored at the
    budget, lower is better) and the final greedy success."""
    done = [[s for s in impl["seeds"].values() if s["complete"]] for impl in (mine, sheep)]
    steps = [[steps_or_budget(s) for s in d] for d in done]
    return {"env_steps_to_goal": stats.compare(*steps, higher_is_better=False),
            "censored_seeds": [sum(not s["reached"] for s in d) for d in done],
            "final_success": stats.compare(*([s["final_success"] for s in d] for d in done))}


def markdown(out: dict) -> str:
    """Per implementation: seeds reaching GOAL, env steps and CPU seconds to it (censored seeds at the budget);
    then per rlspec engine the verdicts against sheeprl (from ``goals``)."""
    goal = f"{out['goal_success']:g}"
    impls = out["implementations"]
    budget = next(s["budget"] for impl in impls.values() for s in impl["seeds"].values())
    names = [n for n in IMPLEMENTATIONS if n in impls]
    label = {"sheeprl": "sheeprl", "reference": "rlspec reference", "fast": "rlspec fast"}
    rows = [f"| room-exit, {budget:,} env steps | " + " | ".join(label[n] for n in names) + " |",
            "|---" * (len(names) + 1) + "|",
            f"| seeds reaching greedy success ≥ {goal} | " + " | ".join(f"**{impls[n]['reached']}**" for n in names)
            + " |",
            f"| env steps to {goal}: mean [95% CI] (per seed) | " + " | ".join(_steps_cell(impls[n]) for n in names)
            + " |",
            f"| CPU seconds to {goal} (one core) | " + " | ".join(_cpu_cell(impls[n]) for n in names) + " |", ""]
    sides = {len([s for s in impls[n]["seeds"].values() if s["complete"]]) for n in names}
    seeds = f"{sides.pop()} seeds a side" if len(sides) == 1 else "seeds per side as above"
    rows += [f"| against sheeprl ({seeds}) | env steps to {goal}: difference (censored "
             "seeds) | verdict | final greedy success: difference | verdict |", "|---|---|---|---|---|"]
    for name in ("reference", "fast"):
        c = out["goals"].get(f"{name}_vs_sheeprl")
        if c:
            steps, success = c["env_steps_to_goal"], c["final_success"]
            rows.append(f"| rlspec {name} | {steps['difference']:+,.0f} ({c['censored_seeds'][0]} vs "
                        f"{c['censored_seeds'][1]}) | {steps['verdict']} (p = {steps['permutation_p']:.2g}) | "
                        f"{success['difference']:+.2f} | {success['verdict']} (p = {success['permutation_p']:.2g}) |")
    return "\n".join(rows) + "\n"


def _steps_cell(impl: dict) -> str:
    seeds = [s for s in impl["seeds"].values() if s["complete"]]
    if not any(s["reached"] for s in seeds):
        return (f"> {seeds[0]['budget']:,} (censored: " + ", ".join(f"{s['final_success']:.1f}" for s in seeds)
                + " at the budget)")
    e = impl["env_steps_to_goal"]
    per = ", ".join(f"{steps_or_budget(s):,.0f}" + ("" if s["reached"] else " censored") for s in seeds)
    return f"{e['mean']:,.0f} [{e['ci'][0]:,.0f}, {e['ci'][1]:,.0f}] ({per})"


def _cpu_cell(impl: dict) -> str:
    if impl["cpu_s_to_goal"] is None:
        spent = impl["cpu_s_censored"]
        return (f"> {np.mean(spent):,.0f} (the whole budget: " + ", ".join(f"{c:,.0f}" for c in spent) + ")"
                if spent else "not recorded")
    timed = [(k, s["cpu_s"]) for k, s in impl["seeds"].items() if s["complete"] and s["cpu_s"] is not None]
    return (f"{impl['cpu_s_to_goal']['mean']:,.0f} (seeds " + ", ".join(str(k) for k, _ in timed) + ": "
            + ", ".join(f"{c:,.0f}" for _, c in timed) + ")")


def rechecked(out: dict) -> dict:
    """The JSON's statistics and goals recomputed from its own curves (each seed's budget is in its summary)."""
    curves = {name: {int(seed): rows for seed, rows in seeds.items()} for name, seeds in out["curves"].items()}
    budgets = {s["budget"] for impl in out["implementations"].values() for s in impl["seeds"].values()}
    if len(budgets) != 1:
        raise SystemExit(f"dreamer_vs_sheeprl: the JSON holds seeds of several budgets {sorted(budgets)}")
    budget = budgets.pop()
    out["implementations"] = {name: implementation(seeds, budget) for name, seeds in curves.items()}
    out["goals"] = goals(out["implementations"])
    return out


def plot(curves: dict[str, dict[int, list[dict]]], rate: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), dpi=100, sharey=True)
    for (key, label), ax in zip((("env_steps", "env steps"), ("cpu_s", "training CPU seconds (one core)")), axes):
        for color, (name, seeds) in zip(("tab:red", "tab:blue", "tab:green"), curves.items()):
            rows = {seed: [r for r in rs if r.get(key) is not None] for seed, rs in seeds.items()}
            for rs in rows.values():
                ax.plot([r[key] for r in rs], [r["greedy_success"] for r in rs], color=color, lw=0.8, alpha=0.35)
            common = [r[key] for r in min(rows.values(), key=len)] if key == "env_steps" and rows else []
            if common:  # the mean over seeds at the env steps every seed has
                mean = [np.mean([next(r["greedy_success"] for r in rs if r[key] == x) for rs in rows.values()])
                        for x in common]
                ax.plot(common, mean, color=color, lw=2.2, marker="o", ms=3, label=f"{name} (mean of {len(rows)})")
            else:
                ax.plot([], [], color=color, lw=2.2, label=f"{name} ({len(rows)} seeds)")
        ax.axhline(rate, color="grey", ls=":", label="uniform random policy")
        ax.axhline(GOAL, color="black", ls="--", lw=0.8, label=f"goal {GOAL}")
        ax.set_xlabel(label)
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("greedy success rate (fresh rooms)")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("DreamerV3 on room-exit: sheeprl 0.8.4 and rlspec, same preset, thin lines = seeds")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rlspec", type=Path, help="RUNS of dreamer_room_exit.py (<engine>/s<seed>)")
    p.add_argument("--sheeprl", type=Path, nargs="+", help="output directories of sheeprl_room.py")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--budget", type=int, default=20_480, help="env steps per run (the preset's total_steps)")
    p.add_argument("--note", default="", help="a sentence stored in the JSON (what the runs show, what remains)")
    p.add_argument("--start-cells", action="store_true", help="read the evaluations over every start cell "
                   "(greedy_cells.json, --start-cells of both runners) instead of greedy.json")
    p.add_argument("--recheck", type=Path, help="a JSON this script wrote: recompute its statistics and table only")
    args = p.parse_args(argv)
    if args.recheck:
        recheck(args.recheck, rechecked, markdown, indent=2)
        return 0
    if args.rlspec is None or args.sheeprl is None:
        p.error("--rlspec and --sheeprl are required (or --recheck JSON)")
    name = "greedy_cells.json" if args.start_cells else "greedy.json"
    curves = {"sheeprl": read_sheeprl(args.sheeprl, name), **read_rlspec(args.rlspec, name)}
    curves = {impl: curves[impl] for impl in IMPLEMENTATIONS if curves.get(impl)}
    if not curves:
        print(f"dreamer_vs_sheeprl: no {name} under --rlspec or --sheeprl", file=sys.stderr)
        return 2
    impls = {name: implementation(seeds, args.budget) for name, seeds in curves.items()}
    rate = random_rate()
    out = {"what": "DreamerV3 on room-exit: sheeprl 0.8.4's own vs rlspec's reference and fast engines, the "
                   "room-exit preset on both sides, greedy success on the same fresh rooms every 2,048 env steps",
           "goal_success": GOAL, "random_success_rate": round(rate, 4), "implementations": impls,
           "evaluation": "one greedy episode from every start cell" if args.start_cells else
                         "the first 20 greedy episodes to end on 4 rooms",
           "goals": goals(impls), "note": args.note,
           "machine": {"cpu": cpu_identity(), "cores": os.cpu_count(), "python": platform.python_version(),
                       "torch": torch.__version__,
                       "note": "2 cores, two runs at a time under nice, one torch thread each"},
           "curves": curves}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dreamer_vs_sheeprl.json").write_text(json.dumps(out, indent=2) + "\n")
    (args.out / "dreamer_vs_sheeprl.md").write_text(markdown(out))
    plot(curves, rate, args.out / "dreamer_vs_sheeprl.png")
    for name, impl in impls.items():
        print(f"{name}: reached {impl['reached']}; env steps to {GOAL} {impl['env_steps_to_goal']}; "
              f"CPU s {impl['cpu_s_to_goal']}")
    print(json.dumps(out["goals"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
