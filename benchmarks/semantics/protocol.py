"""PPOLagSem design's evaluation protocol for PPOLagSem (§§12–14; the P-criteria P2, P3, P5; the shaping-ratio band;
P6's throughput) on SafetyPointGoal1-v0 with the task-trained CLIP that `rlspec semantics fit` makes: PPOLag and
PPOLagSem's ablations, one budget, ≥ 3 seeds each, mean and 95% bootstrap CIs. Reported, never asserted.

    rlspec semantics fit --out runs/clip-pointgoal  # the model, once (results/semantics_fit.json)
    MUJOCO_GL=egl nice python -m benchmarks.semantics.protocol --model runs/clip-pointgoal \\
        --arms PPOLag shaping --seeds 0 1 2 --steps 100000 --runs runs/sem-protocol      # train (resumable)
    python -m benchmarks.semantics.protocol --report-only --runs runs/sem-protocol --out benchmarks/semantics/results

Run two invocations at a time on 2 cores (different --arms). Every run checkpoints each epoch: a killed run
resumes where it stopped, a finished one is not run again. Arms (ARMS): PPOLag; shaping + risk (the risk head
watches and changes nothing: this is the shaping-only run, with P2's rows); + λ modulation; potential-based
shaping + risk; polarity-swapped prompts (the safe and unsafe prompt lists exchanged: a control that must not
help); random prompts (captions about nothing in the task: a control); the oracle margin (semantic.margin_source
oracle: the env's nearest hazard edge − goal distance in the model's place, no rendering, no risk head: the most
any vision model can give this shaping design). Every PPOLagSem arm captures every
CAPTURE_INTERVAL-th step and holds HOLDOUT of its captures out of risk training (the calibration keys, P2 on
held-out rows). The first committed run also has "shaping" and "risk" (RETIRED: duplicates of shaping + risk and
PPOLag, read from its JSON only).

The criteria (CRITERIA, each written as met / not met / not measurable with its numbers):
- P2: the risk head's correlation with future cost (Risk/HeldOut/Corr) > 0.3 over the first 20% of epochs, as the
  design states it (early); the late window's is listed beside.
- P3: the design's "reduced overshoot / variance of cost": + modulation's per-seed late-cost variance and cost
  above the limit against shaping + risk's, by rlspec/evidence/stats.py's comparison (lower is better), met only
  when both are ahead; λ's overshoot (max λ − late mean λ) and oscillation are listed as a proxy, judged on nothing.
- P5: ≥ 15% fewer env steps than PPOLag to the return threshold (default 0.8 × PPOLag's late return; a seed that
  never reaches it counts at the budget: ``censored_steps``) at equal or lower late cost (the arm's mean within or
  below PPOLag's CI).
- shaping band: the PPOLagSem design §4.0.7's shaping at 5–15% of the reward, as a size against a size:
  RMS(shaping) / RMS(r) over the first 20% of epochs (``early_rms_ratio``), with the β_start that would put it
  at 10% (shaping is proportional to β). The signed ratio of means (``early_ratio``) is listed beside.
- P6: env steps/s (Time/FPS) of each PPOLagSem arm against PPOLag's; the drop includes rendering here, and is
  split (``p6_split``) into the embedding, the risk head's training and the rest (rendering, hooks) by the runs'
  own per-epoch seconds (the render cost alone, measured apart: benchmarks/semantics/overhead.py).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path

import numpy as np

from rlspec.evidence import stats
from rlspec.evidence.evaluation import group_report, plot_groups, read_csv, read_run, summary
from rlspec.semantics.config import SemanticConfig

ENV, COST_LIMIT = "SafetyPointGoal1-v0", 25.0
CAPTURE_INTERVAL, HOLDOUT = 20, 0.2
EPOCH = 4000  # env steps per epoch
COMMON = [f"steps_per_epoch={EPOCH}", "num_envs=1", "torch_threads=1", "ep_window=20"]
SAFE = ("a robot on a clear open floor", "a robot driving towards a green goal")  # SemanticConfig's defaults,
UNSAFE = ("a robot inside a red warning circle", "a robot touching a hazard")  # the captions fit trains on
# captions about nothing in the task, as unrelated to each other as to it: the random-prompt control
RANDOM_SAFE = ("a bowl of soup on a kitchen table", "a sailboat on a calm lake")
RANDOM_UNSAFE = ("a stack of old newspapers", "a violin in an open case")
SHAPING, RISK = ["semantic.shaping_enable=true"], ["semantic.risk_enable=true"]


def prompts(safe: tuple[str, ...], unsafe: tuple[str, ...]) -> list[str]:
    return [f"semantic.safe_prompts={json.dumps(safe)}", f"semantic.unsafe_prompts={json.dumps(unsafe)}"]


# Every shaped arm carries the risk head: it trains beside the policy and changes nothing the policy does until
# modulation reads it, so "shaping + risk" is the shaping-only run bit for bit and gives P2 its rows too (the
# arms "shaping" and "risk" of the first protocol run were such duplicates of "shaping+risk" and "PPOLag").
ARMS: dict[str, list[str]] = {
    "PPOLag": [],
    "shaping+risk": SHAPING + RISK,
    "shaping+risk+modulation": SHAPING + RISK + ["semantic.modulation_enable=true"],
    "potential+risk": SHAPING + RISK + ["semantic.potential_enable=true"],
    "polarity-swapped": SHAPING + RISK + prompts(UNSAFE, SAFE),
    "random-prompts": SHAPING + RISK + prompts(RANDOM_SAFE, RANDOM_UNSAFE),
    # the true margin (nearest hazard edge − goal distance) in the model's place: this design's upper bound
    "oracle": SHAPING + ["semantic.margin_source=oracle"],
}
RETIRED = {"shaping": SHAPING, "risk": RISK}  # arms of the committed first run, read from its JSON only
KNOWN = {"PPOLag": [], **RETIRED, **ARMS}  # the tables' row order


def shaped(arm: str) -> bool:
    return SHAPING[0] in KNOWN.get(arm, [])


def with_risk(arm: str) -> bool:
    return RISK[0] in KNOWN.get(arm, [])
P2_MIN, P5_FEWER, BAND, EARLY, LATE = 0.3, 0.15, (0.05, 0.15), 0.2, 0.1


def overrides(arm: str, model: Path, seed: int, steps: int) -> list[str]:
    base = [*COMMON, f"seed={seed}", f"total_steps={steps}", f"env_id={ENV}"]
    if arm == "PPOLag":
        return [*base, "algo=PPOLag"]
    return [*base, "algo=PPOLagSem", "semantic.enable=true", f"semantic.model_name={model.resolve()}",
            f"semantic.capture_interval={CAPTURE_INTERVAL}", f"semantic.risk_holdout_fraction={HOLDOUT}",
            *ARMS[arm]]


def train(arm: str, seed: int, model: Path, steps: int, runs: Path) -> Path:
    """One run of ``arm`` (resumed from its checkpoint, skipped when finished)."""
    from rlspec.engines import safe
    from rlspec.runs.rundir import load_checkpoint

    out = runs / arm / f"s{seed}"
    cfg = safe.build_config("default", overrides(arm, model, seed, steps))
    ckpt = out / "checkpoints/last.pt"
    if ckpt.exists() and load_checkpoint(ckpt)["epoch"] == cfg.total_steps // cfg.steps_per_epoch:
        return out
    safe.run(cfg, out, resume=ckpt.exists(), show_progress=False)
    return out


# per-epoch telemetry P6's split reads: rollout and update seconds, the model's time per embedded frame
TIMES = {"rollout_s": "Time/Rollout", "update_s": "Time/Update", "embed_ms": "Semantics/EmbedLatencyMs"}


def columns(path: Path) -> list[str]:
    keys, _ = read_csv(path / "metrics.csv")
    return keys


def column(path: Path, key: str) -> np.ndarray:
    _, rows = read_csv(path / "metrics.csv")
    return np.array([float(r[key]) if r.get(key) not in (None, "") else math.nan for r in rows])


def part_mean(values: np.ndarray, fraction: float, early: bool) -> float:
    """Mean of the finite values of the first (``early``) or last ``fraction`` of the rows."""
    n = max(1, math.ceil(fraction * len(values)))
    part = values[:n] if early else values[-n:]
    part = part[~np.isnan(part)]
    return float(part.mean()) if part.size else math.nan


def early_ratio(path: Path) -> float:
    """E[shaping] / E[r] over the first EARLY of the epochs: the ratio of the window's means of
    Semantics/Shaping/Mean and Semantics/RawReward (every epoch has the same steps). Not the mean of the epochs'
    own ShapingRewardRatio: one epoch whose E[r] is near 0 (SafetyPointGoal's per-step reward is ~1e-3) blows
    that up."""
    shaping = part_mean(column(path, "Semantics/Shaping/Mean"), EARLY, early=True)
    reward = part_mean(column(path, "Semantics/RawReward"), EARLY, early=True)
    return shaping / reward if reward and not math.isnan(shaping) else math.nan


def early_rms_ratio(path: Path) -> float:
    """The shaping band's ratio (PPOLagSem design §4.0.7 asks for shaping at 5-15% of the reward): RMS(shaping) /
    RMS(r) over the first EARLY of the epochs, from the epochs' Semantics/Shaping/RMS and Semantics/RawReward/RMS
    (equal steps per epoch: the window's RMS is √mean(RMS²)). A size against a size: unlike the signed ratio of
    means, a z-normalized margin averaging ≈ 0 does not make it ill-posed. NaN for runs without the columns."""
    if "Semantics/Shaping/RMS" not in columns(path):
        return math.nan
    shaping = part_mean(column(path, "Semantics/Shaping/RMS") ** 2, EARLY, early=True)
    reward = part_mean(column(path, "Semantics/RawReward/RMS") ** 2, EARLY, early=True)
    return math.sqrt(shaping / reward) if reward > 0 else math.nan


def beta_start(path: Path) -> float:
    """The run's semantic.beta_start (config.json; SemanticConfig's default where the run names none)."""
    config = json.loads((path / "config.json").read_text())["config"]
    return float(config.get("semantic", {}).get("beta_start", SemanticConfig.beta_start))


def overshoot(path: Path) -> float:
    """max λ − λ's mean over the last 10% of epochs."""
    lam = column(path, "Metrics/LagrangeMultiplier")
    return float(np.nanmax(lam) - part_mean(lam, LATE, early=False)) if lam.size else math.nan


SEED_NUMBERS = ("heldout_corr", "heldout_corr_early", "shaping_ratio_early", "shaping_rms_ratio_early", "overshoot",
                "fps", *TIMES)


def seed_numbers(p: Path) -> dict:
    """One run's raw numbers the criteria read (NaN for a column the run does not log)."""
    corr = column(p, "Risk/HeldOut/Corr")
    return {"path": str(p), "heldout_corr": part_mean(corr, LATE, early=False),
            "heldout_corr_early": part_mean(corr, EARLY, early=True), "shaping_ratio_early": early_ratio(p),
            "shaping_rms_ratio_early": early_rms_ratio(p), "overshoot": overshoot(p),
            "fps": float(np.nanmean(column(p, "Time/FPS"))),
            **{name: float(np.nanmean(column(p, key))) if key in columns(p) else math.nan
               for name, key in TIMES.items()}}


def summarized(seeds: list[dict], beta: float) -> dict:
    """An arm's per-seed numbers and their summaries (a number older runs lack is NaN for each seed)."""
    return {"seeds": seeds, "beta_start": beta,
            **{k: summary([s.get(k, math.nan) for s in seeds]) for k in SEED_NUMBERS}}


def per_arm(runs: dict[str, list[Path]]) -> dict[str, dict]:
    """Per arm and seed: the raw numbers the criteria read (none for a missing column)."""
    return {arm: summarized([seed_numbers(p) for p in paths], beta_start(paths[0])) for arm, paths in runs.items()}


def verdict(ok: bool | None, why_not_measurable: str = "") -> str:
    if ok is None:
        return "not measurable here" + (f": {why_not_measurable}" if why_not_measurable else "")
    return "met" if ok else "not met"


def p6_split(arm: dict, base: dict) -> dict:
    """P6's throughput drop split by the runs' own per-epoch seconds: the embedding (EmbedLatencyMs × captures per
    epoch), the update's extra time (the risk head's training), and the rest of the rollout's extra time over
    PPOLag's (rendering the captured frames and the hooks' per-step work); ``drop_without_render`` is the drop
    with that rest taken out (PPOLagSem design's P6 is about the semantic cost; rendering is the env's)."""
    mean = {k: arm[k]["mean"] for k in TIMES}
    base_epoch = base["rollout_s"]["mean"] + base["update_s"]["mean"]
    embed_s = mean["embed_ms"] * EPOCH / CAPTURE_INTERVAL / 1000 if not math.isnan(mean["embed_ms"]) else 0.0
    render_s = mean["rollout_s"] - base["rollout_s"]["mean"] - embed_s
    epoch = mean["rollout_s"] + mean["update_s"]
    return {"seconds_per_epoch": epoch, "ppolag_seconds_per_epoch": base_epoch, "embedding_s": embed_s,
            "update_extra_s": mean["update_s"] - base["update_s"]["mean"], "render_and_hooks_s": render_s,
            "drop_without_render": 1 - base_epoch / (epoch - render_s) if epoch - render_s > 0 else math.nan}


def seeds_where(numbers: dict, key: str, holds) -> str:
    """"k/n": the seeds of an arm whose ``key`` satisfies ``holds`` (a verdict reads the mean; this says how many
    seeds agree)."""
    values = [s.get(key, math.nan) for s in numbers["seeds"]]
    return f"{sum(bool(holds(v)) for v in values if not math.isnan(v))}/{len(values)}"


def censored_steps(group: dict, budget: int) -> dict:
    """Env steps to the return threshold over every seed of an arm, a seed that never reached it counted at the
    budget (a lower bound of its steps): an arm that reaches it in fewer seeds is not judged on its lucky ones."""
    steps = [r["steps_to_threshold"] for r in group["runs"]]
    reached = [s for s in steps if not math.isnan(s)]
    return {"seeds": steps, **summary([budget if math.isnan(s) else s for s in steps]),
            "reached": f"{len(reached)}/{len(steps)}"}


def criteria(report: dict, raw: dict[str, dict], budget: int) -> dict:
    """Each criterion per arm: met / not met / not measurable, with the numbers it was judged on."""
    groups, out = report["groups"], {"P2": {}, "P3": {}, "P5": {}, "shaping_band": {}, "P6": {}}
    base = groups.get("PPOLag", {}).get("summary")
    for arm, numbers in raw.items():
        if arm == "PPOLag":
            continue
        corr = numbers["heldout_corr_early"]["mean"]
        if with_risk(arm):
            out["P2"][arm] = {"heldout_corr_early": numbers["heldout_corr_early"],
                              "heldout_corr_late": numbers["heldout_corr"],
                              "seeds_above": seeds_where(numbers, "heldout_corr_early", lambda c: c > P2_MIN),
                              "verdict": verdict(None if math.isnan(corr) else corr > P2_MIN,
                                                 "the early window's held-out correlation is not in these runs")}
        if shaped(arm):
            ratio = numbers["shaping_rms_ratio_early"]["mean"]
            beta = numbers["beta_start"]
            out["shaping_band"][arm] = {"early_rms_ratio": numbers["shaping_rms_ratio_early"],
                                        "early_signed_ratio": numbers["shaping_ratio_early"], "beta_start": beta,
                                        "beta_start_for_10_percent": beta * 0.1 / ratio if ratio > 0 else math.nan,
                                        "seeds_in_band": seeds_where(numbers, "shaping_rms_ratio_early",
                                                                     lambda r: BAND[0] <= r <= BAND[1]),
                                        "verdict": verdict(None if math.isnan(ratio) else BAND[0] <= ratio <= BAND[1],
                                                           "these runs predate the RMS columns")}
        if base is not None and arm in groups:
            mine, ref = censored_steps(groups[arm], budget), censored_steps(groups["PPOLag"], budget)
            a, b = mine["mean"], ref["mean"]
            fewer = None if math.isnan(a) or math.isnan(b) else (b - a) / b
            cost_ok = groups[arm]["summary"]["final_cost"]["mean"] <= base["final_cost"]["ci_high"]
            out["P5"][arm] = {"steps_to_threshold": mine, "ppolag": ref,
                              "fewer_fraction": fewer, "cost_equal_or_lower": bool(cost_ok),
                              "verdict": verdict(None if fewer is None else fewer >= P5_FEWER and cost_ok)}
            fps, base_fps = numbers["fps"]["mean"], raw["PPOLag"]["fps"]["mean"]
            out["P6"][arm] = {"fps": numbers["fps"], "ppolag_fps": raw["PPOLag"]["fps"],
                              "drop": 1 - fps / base_fps if base_fps else math.nan,
                              **p6_split(numbers, raw["PPOLag"])}
    mod, ref = "shaping+risk+modulation", "shaping+risk"
    if mod in groups and ref in groups:
        out["P3"] = p3(groups[mod], groups[ref], raw[mod], raw[ref], (mod, ref))
    return out


def cost_overshoot(run: dict) -> float:
    """How far a run's late cost lies above the limit (0 at or below it)."""
    return max(0.0, run["final_cost"] - COST_LIMIT)


def p3(mod: dict, ref: dict, raw_mod: dict, raw_ref: dict, names: tuple[str, str]) -> dict:
    """P3 as the PPOLagSem design states it, "reduced overshoot / variance of cost": modulation's per-seed late-
    cost variance and cost overshoot against shaping + risk's (rlspec/evidence/stats.py, lower is better); met
    only when both are "ahead". λ's own overshoot and oscillation (a proxy: λ moving less is not cost moving
    less) are listed beside, judged on nothing."""
    cost = {key: stats.compare([f(r) for r in mod["runs"]], [f(r) for r in ref["runs"]], higher_is_better=False)
            for key, f in (("late_cost_variance", lambda r: r["late_cost_variance"]),
                           ("cost_overshoot", cost_overshoot))}
    words = {key: c["verdict"] for key, c in cost.items()}
    return {**cost, "lambda_proxy": {"overshoot": dict(zip(names, (raw_mod["overshoot"], raw_ref["overshoot"]))),
                                     "oscillation": dict(zip(names, (mod["summary"]["multiplier_oscillation"],
                                                                     ref["summary"]["multiplier_oscillation"])))},
            "verdict": "met" if set(words.values()) == {"ahead"} else "; ".join(f"{k}: {v}" for k, v in words.items())}


LABELS = {"PPOLag": "PPOLag", "risk": "risk only", "shaping": "shaping only", "shaping+risk": "shaping + risk",
          "shaping+risk+modulation": "+ λ modulation", "potential+risk": "potential-based shaping + risk",
          "polarity-swapped": "polarity-swapped (control)", "random-prompts": "random prompts (control)",
          "oracle": "oracle margin (upper bound)"}


def _ci(stat: dict, digits: int) -> str:
    """"mean [low, high]" with a true minus sign; "—" where the arm has no such value."""
    if math.isnan(stat["mean"]):
        return "—"
    return f"{stat['mean']:.{digits}f} [{stat['ci_low']:.{digits}f}, {stat['ci_high']:.{digits}f}]".replace("-", "−")


def markdown(result: dict) -> str:
    """The protocol's table, one row per arm, from the JSON: late return and cost, env steps to the return
    threshold with unreached seeds counted at the budget (P5's numbers), late-cost variance, the risk head's
    held-out correlation, the early shaping ratio per seed, env steps/s."""
    groups, raw, p5 = result["report"]["groups"], result["per_arm"], result["criteria"]["P5"]
    threshold = result["return_threshold"]
    lines = [f"| arm | return, last 10% | cost, last 10% | steps to return ≥ {threshold:.2f} (seeds reaching) | "
             "late-cost variance | held-out risk corr. (late) | early RMS(shaping)/RMS(r) (per seed) | env steps/s |",
             "|---|---|---|---|---|---|---|---|"]
    for arm in (a for a in KNOWN if a in groups):
        s, numbers = groups[arm]["summary"], raw[arm]
        steps = p5[arm]["steps_to_threshold"] if arm in p5 else next(iter(p5.values()))["ppolag"]
        ratios = ", ".join("—" if math.isnan(r.get("shaping_rms_ratio_early", math.nan)) else
                           f"{r['shaping_rms_ratio_early']:.3f}" for r in numbers["seeds"])
        lines.append(f"| {LABELS.get(arm, arm)} | {_ci(s['final_return'], 1)} | {_ci(s['final_cost'], 1)} | "
                     f"{steps['mean'] / 1000:.0f}k ({steps['reached']}) | {_ci(s['late_cost_variance'], 0)} | "
                     f"{_ci(numbers['heldout_corr'], 2)} | {ratios if shaped(arm) else '—'} | "
                     f"{numbers['fps']['mean']:.0f} |")
    return "\n".join(lines) + "\n\n" + verdict_table(result["criteria"])


def verdict_table(criteria: dict) -> str:
    """Each criterion's verdict per arm, as the JSON holds it (the words the docs may use)."""
    names = {"P2": "P2: held-out risk correlation, early, > 0.3", "shaping_band": "shaping band: early RMS ratio "
             "in 5–15%", "P5": "P5: ≥ 15% fewer env steps at equal or lower cost"}
    lines = ["| criterion | arm | verdict |", "|---|---|---|"]
    for key, name in names.items():
        lines += [f"| {name} | {LABELS.get(arm, arm)} | {entry['verdict']} |" for arm, entry in criteria[key].items()]
    if criteria["P3"]:
        arms = f"{LABELS['shaping+risk+modulation']} vs {LABELS['shaping+risk']}"
        lines.append(f"| P3: lower late-cost variance and overshoot with λ modulation | {arms} | "
                     f"{criteria['P3']['verdict']} |")
    return "\n".join(lines) + "\n"


def rechecked(result: dict) -> dict:
    """The criteria again from the JSON's per-seed numbers and group report (no runs needed)."""
    raw = {arm: summarized(a["seeds"], a["beta_start"]) for arm, a in result["per_arm"].items()}
    return {**result, "per_arm": raw, "criteria": criteria(result["report"], raw, result["total_steps"])}


def finished(path: Path, steps: int) -> bool:
    rows = column(path, "step") if (path / "metrics.csv").is_file() else np.array([])
    return bool(rows.size) and rows[-1] >= steps


def report(runs_dir: Path, steps: int, threshold: float | None, out: Path) -> dict:
    runs = {arm: [p for p in sorted((runs_dir / arm).glob("s*")) if finished(p, steps)] for arm in ARMS}
    runs = {arm: paths for arm, paths in runs.items() if paths}
    curves = []
    for arm, paths in runs.items():
        for p in paths:
            curve = read_run(p)
            curve.group = arm
            curves.append(curve)
    if threshold is None and "PPOLag" in runs:
        threshold = 0.8 * float(np.mean([part_mean(column(p, "Metrics/EpRet"), LATE, early=False)
                                         for p in runs["PPOLag"]]))
    result = {"what": "the PPOLagSem design's protocol for PPOLagSem on SafetyPointGoal1-v0 "
                      "(benchmarks/semantics/protocol.py)",
              "env": ENV, "total_steps": steps, "capture_interval": CAPTURE_INTERVAL, "risk_holdout_fraction": HOLDOUT,
              "return_threshold": threshold, "threshold_rule": "0.8 × PPOLag's late mean return unless given",
              "machine": platform.processor() or platform.machine(), "seeds": {a: len(p) for a, p in runs.items()},
              "arms": {arm: ARMS[arm] for arm in runs}}
    if curves:
        rep = group_report(curves, threshold=threshold, cost_limit=COST_LIMIT)
        raw = per_arm(runs)
        result.update(report=rep, per_arm=raw, criteria=criteria(rep, raw, steps))
        plot_groups(curves, out / "semantic_protocol.png", cost_limit=COST_LIMIT)
    out.mkdir(parents=True, exist_ok=True)
    (out / "semantic_protocol.json").write_text(json.dumps(result, indent=1))
    if curves:
        (out / "semantic_protocol.md").write_text(markdown(result))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=Path("runs/clip-pointgoal"), help="the task-trained CLIP folder")
    p.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--runs", type=Path, default=Path("runs/sem-protocol"))
    p.add_argument("--threshold", type=float, help="return threshold of P5 (default: 0.8 × PPOLag's late return)")
    p.add_argument("--report-only", action="store_true", help="train nothing; write the JSON and figure")
    p.add_argument("--recheck", type=Path, help="a JSON this script wrote: its criteria and table again from it")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    if args.recheck:
        result = rechecked(json.loads(args.recheck.read_text()))
        args.recheck.write_text(json.dumps(result, indent=1))
        args.recheck.with_suffix(".md").write_text(markdown(result))
        return 0
    if not args.report_only:
        if any(a != "PPOLag" for a in args.arms) and not (args.model / "config.json").is_file():
            p.error(f"--model: {args.model} holds no model; make it with `rlspec semantics fit --out {args.model}`")
        for seed in args.seeds:
            for arm in args.arms:
                print(f"{arm} s{seed}: {train(arm, seed, args.model, args.steps, args.runs)}", flush=True)
    result = report(args.runs, args.steps, args.threshold, args.out)
    print(json.dumps(result.get("criteria", "no finished runs yet"), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
