"""The bonus engine's token learner beside Stable-Baselines3 PPO on the same Meta-World task and budget: one JSON
and one figure from the runs of both sides (benchmarks/bonus/ablation.py's runs for rlspec, any ablation arm;
benchmarks/bonus/anchors/run_sb3.py's for SB3). Reported, never asserted.

    python -m benchmarks.bonus.vs_sb3 --task reach-v3 --total-steps 150000 \\
        --rlspec bench-results/bonus_ablation --sb3 runs/sb3-mw --out benchmarks/bonus/results
    python -m benchmarks.bonus.vs_sb3 --rlspec default=bench-results/mw-default obsnorm=bench-results/mw-obsnorm ...
    python -m benchmarks.bonus.vs_sb3 --recheck benchmarks/bonus/results/bonus_vs_sb3_reach-v3.json  # per-seed values

Per side (rlspec `ARM-sSEED` under each RLSPEC/metaworld_TASK, grouped as "rlspec ARM", or "rlspec LABEL ARM"
for a directory given as LABEL=DIR; SB3 `PPO-sSEED` under SB3/TASK): only runs that did
the --total-steps budget enter the statistics (``finished``: the bonus engine ends at its last whole update
within it, SB3 at its first whole rollout past it; each run's env steps are in the JSON), through
`rlspec.evidence.evaluation.group_report` (the last 10% of each run's rows, mean and 95% bootstrap CI over seeds
of the success rate and return); the env steps to a success rate of --threshold;
the greedy policy's success per seed where it was measured (rlspec: RUN/eval/eval.json of `rlspec eval RUN
--episodes 20`; SB3: its greedy.json), both on the env index 1,000,003 no training env uses. A seed that never
reaches the threshold counts at its budget (its last step). Per rlspec arm against SB3 (``checks``): whether the
late-success CIs overlap, and rlspec/evidence/stats.py's comparison of the per-seed late success (IQMs, exact
permutation p, minimum detectable effect, the verdict word; no equivalence margin was declared before these
runs); ``--recheck JSON`` recomputes these and the table from the JSON's per-seed values, without the runs. The
table (``bonus_vs_sb3_TASK.md``) is written from the JSON.
The late episode length (an episode ends at its first success, so a learner that succeeds
sooner has shorter episodes and, on a dense reward, a lower return). --arms keeps only the named ablation arms.
Per rlspec group, ``settings``: the config keys its runs set apart from the engine's preset
for the task and arm (besides seed and total_steps), so variants of the learner stand beside each other.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path

from rlspec.engines.bonus import BonusConfig, build_config, steps_per_update
from rlspec.evidence import stats as compare_stats
from rlspec.evidence.evaluation import (
    Curve,
    group_report,
    late_mean,
    plot_groups,
    read_run,
    recheck,
    steps_to_threshold,
    summary,
)
from rlspec.runs import config as runconfig
from rlspec.runs.rundir import RunDir

SB3_GROUP = "sb3 PPO"


def labelled(spec: str) -> tuple[str, Path]:
    """--rlspec's DIR or LABEL=DIR -> (label, DIR); no label: ''."""
    label, sep, path = spec.rpartition("=")
    return (label, Path(path)) if sep else ("", Path(spec))


def find_runs(rlspec_dirs: list[tuple[str, Path]], sb3_dir: Path, task: str) -> list[tuple[str, Path]]:
    """(label, run) of every rlspec run of the task under the labelled directories, then SB3's (label '')."""
    ours = [(label, p) for label, root in rlspec_dirs
            for p in sorted((root / f"metaworld_{task}").glob("*-s*")) if (p / "metrics.csv").is_file()]
    theirs = [("", p) for p in sorted((sb3_dir / task).glob("PPO-s*")) if (p / "progress.csv").is_file()]
    return ours + theirs


def arm_curve(label: str, path: Path) -> Curve:
    """A run's curve, an rlspec run grouped by its label and ablation arm (the directory's ARM-sSEED)."""
    curve = read_run(path)
    if curve.source == "rlspec":
        curve.group = " ".join(["rlspec", *[label] * bool(label), path.name.rsplit("-s", 1)[0]])
    return curve


def _flat(d: dict, prefix: str = "") -> dict:
    """A nested config dict as {dotted key: value}."""
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def settings(path: Path) -> dict:
    """The config keys (dotted) an rlspec run set apart from the preset of its task and arm, besides seed and
    total_steps."""
    config = RunDir.read_config(path)["config"]
    cfg = runconfig.from_dict(BonusConfig, config)
    ran, base = (_flat(runconfig.to_dict(c)) for c in (cfg, build_config(task=cfg.task, ablation=cfg.ablation)))
    return {k: v for k, v in sorted(ran.items()) if k not in ("seed", "total_steps") and base.get(k) != v}


def finished(curve: Curve, total_steps: int) -> bool:
    """Whether a run did all of a ``total_steps`` budget: SB3 runs whole rollouts until it is reached (it ends at
    or above it); the bonus engine runs whole updates within it (it ends at the last update boundary at or below
    it, e.g. 149,760 of 150,000 with 256 env steps per update), so an rlspec run counts when it was made for this
    budget and reached its own last update."""
    if not curve.steps.size:
        return False
    if curve.source != "rlspec":
        return curve.steps[-1] >= total_steps
    cfg = runconfig.from_dict(BonusConfig, RunDir.read_config(curve.path)["config"])
    per_update = steps_per_update(cfg)
    return cfg.total_steps == total_steps and curve.steps[-1] >= total_steps // per_update * per_update


def greedy(path: Path) -> float:
    """The greedy policy's success rate measured for a run (NaN where not measured yet)."""
    for name, key in (("eval/eval.json", "SuccessRate"), ("greedy.json", "greedy_success")):
        if (path / name).is_file():
            return float(json.loads((path / name).read_text())[key])
    return math.nan


def stats(values: list[float]) -> dict:
    """Per-seed values with their mean and 95% bootstrap CI (NaN seeds left out of both)."""
    return {"seeds": values, **summary(values)}


def verdicts(report: dict) -> dict:
    """Per rlspec arm: whether its late-success CI overlaps SB3's, and the comparison of the per-seed values."""
    groups = report["groups"]
    if SB3_GROUP not in groups:
        return {}
    anchor = groups[SB3_GROUP]
    out = {}
    for name, g in groups.items():
        if name == SB3_GROUP:
            continue
        mine, theirs = g["summary"]["final_success"], anchor["summary"]["final_success"]
        overlap = mine["ci_low"] <= theirs["ci_high"] and theirs["ci_low"] <= mine["ci_high"]
        seeds = ([r["final_success"] for r in x["runs"]] for x in (g, anchor))
        out[name] = {"success_ci_overlaps": bool(overlap), "success": compare_stats.compare(*seeds)}
    return out


def to_threshold_stats(steps: list[float], budgets: list[float]) -> dict:
    """Steps to the threshold per seed (NaN: never reached), summarized with the unreached seeds at their budget."""
    reached = sum(map(math.isfinite, steps))
    return {**stats(compare_stats.censored_at(steps, budgets)), "raw": steps, "reached": f"{reached}/{len(steps)}"}


def markdown(result: dict) -> str:
    """Per group: late success mean [CI] and IQM, steps to the threshold (unreached seeds at the budget), and for
    rlspec arms the verdict against SB3 (exact permutation p, MDE)."""
    rows = [f"| {result['task']}, {result['total_steps']:,} env steps | late success: mean [95% CI] | IQM | "
            f"env steps to {result['success_threshold']:g} (reached) | against SB3 |", "|---|---|---|---|---|"]
    for group, g in result["report"]["groups"].items():
        s, steps = g["summary"]["final_success"], result["steps_to_success_threshold"][group]
        check = result["checks"].get(group)
        said = "—" if check is None else f"{check['success']['verdict']} (p = {check['success']['permutation_p']:.2g})"
        rows.append(f"| {group} | {s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}] | {s['iqm']:.3f} | "
                    f"{steps['mean'] / 1000:.1f}k ({steps['reached']}) | {said} |")
    return "\n".join(rows) + "\n"


def rechecked(result: dict) -> dict:
    """The JSON's checks and steps to threshold recomputed from its per-seed values (no runs needed)."""
    for group, g in result["report"]["groups"].items():
        g["summary"]["final_success"] = summary([r["final_success"] for r in g["runs"]])
        steps = result["steps_to_success_threshold"][group]
        result["steps_to_success_threshold"][group] = to_threshold_stats(steps.get("raw", steps["seeds"]),
                                                                         result["env_steps"][group])
    result["checks"] = verdicts(result["report"])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="reach-v3")
    p.add_argument("--total-steps", type=int, default=150_000)
    p.add_argument("--threshold", type=float, default=0.5, help="success rate of 'steps to threshold'")
    p.add_argument("--rlspec", nargs="+", default=["bench-results/bonus_ablation"], metavar="[LABEL=]DIR",
                   help="rlspec run directories (bonus_ablation.py's --runs), each optionally labelled")
    p.add_argument("--arms", nargs="*", default=None, metavar="ARM",
                   help="only these ablation arms of the rlspec directories (default: every arm found)")
    p.add_argument("--sb3", type=Path, default=Path("runs/sb3-mw"))
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--recheck", type=Path, help="a JSON this script wrote: recompute its checks and table only")
    args = p.parse_args(argv)
    if args.recheck:
        recheck(args.recheck, rechecked, markdown)
        return 0
    found = find_runs([labelled(d) for d in args.rlspec], args.sb3, args.task)
    curves = [arm_curve(label, path) for label, path in found
              if args.arms is None or path.name.startswith("PPO-s") or path.name.rsplit("-s", 1)[0] in args.arms]
    done = [c for c in curves if finished(c, args.total_steps)]
    if not done:
        print(f"bonus_vs_sb3: no finished runs of {args.task} under {args.rlspec} or {args.sb3}")
        return 1
    report = group_report(done)
    greedy_by_group = {g: [greedy(c.path) for c in done if c.group == g] for g in report["groups"]}
    to_threshold = {g: [steps_to_threshold(c, args.threshold, "success") for c in done if c.group == g]
                    for g in report["groups"]}
    result = {"what": "the bonus engine's token learner beside SB3 PPO on Meta-World (benchmarks/bonus/vs_sb3.py)",
              "task": args.task, "total_steps": args.total_steps, "success_threshold": args.threshold,
              "machine": platform.processor() or platform.machine(), "report": report,
              "env_steps": {g: [float(c.steps[-1]) for c in done if c.group == g] for g in report["groups"]},
              "greedy_success": {g: stats(v) for g, v in greedy_by_group.items()},
              "final_episode_length": {g: stats([late_mean(c, "episode_length") for c in done if c.group == g])
                                       for g in report["groups"]},
              "steps_to_success_threshold": {g: to_threshold_stats(v, [float(c.steps[-1]) for c in done
                                                                       if c.group == g])
                                             for g, v in to_threshold.items()},
              "settings": {g: settings(next(c.path for c in done if c.group == g)) for g in report["groups"]
                           if g != SB3_GROUP},
              "unfinished": [str(c.path) for c in curves if c.path not in {d.path for d in done}],
              "checks": verdicts(report)}
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"bonus_vs_sb3_{args.task}"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(markdown(result))
    plot_groups(done, args.out / f"{name}.png")
    print(f"{args.task}: finished {{{', '.join(f'{g}: {len(v)}' for g, v in greedy_by_group.items())}}}, "
          f"checks {result['checks']}; wrote {args.out / name}.json and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
