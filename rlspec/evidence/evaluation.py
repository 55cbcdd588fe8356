"""PPOLagSem design's evaluation protocol as a tool (PPOLagSem design §10 "Evaluation Plan" and §12): runs grouped by
algorithm, mean and IQM with 95% bootstrap CIs over seeds (rlspec/evidence/stats.py), and per group

- steps to a return threshold: the first logged env step whose return reaches it (a run that never does counts
  at its budget, its last logged step: censored, not dropped; the report says how many reached it);
- final return, cost, success rate and λ (where a run logs them): the mean over the last `late` fraction of
  each run's logged rows;
- cost-violation rate: the share of late rows whose episode cost is above the limit (rows are epoch means of
  episodes in every format read here, so this is a rate over epochs, not single episodes);
- late-cost variance: the variance of the late rows' episode cost;
- λ oscillation amplitude: √2 × the standard deviation of the late rows' multiplier around its centred moving
  average (window 5, where it fits) — the amplitude of a sinusoid with that spread; 0 for a multiplier that
  only drifts. Its late rows are at least twice the window.

Readers turn four formats into one Curve with one vocabulary (NAMES): an rlspec run directory (config.json +
metrics.csv, any engine), OmniSafe's own log directory (progress.csv with `Metrics/EpRet`, `Metrics/EpCost`,
`Metrics/LagrangeMultiplier`, `TotalEnvSteps`, its config.json naming the algorithm), Stable-Baselines3's CSV
log (progress.csv with `time/total_timesteps`, `rollout/ep_rew_mean`; SB3 logs no cost, so `rollout/ep_cost_mean`
is read where a callback wrote it, as benchmarks/safe/anchors/run_sb3.py's does) and sheeprl's
TensorBoard events (`Rewards/rew_avg`, `Loss/world_model_loss`, ... against its policy step; read with the
`tensorboard` package of the `runs` extra). Names are mapped, values are as each tool logs them: a loss may be
scaled differently in another tool (e.g. summed over pixels instead of averaged). Imports no torch.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlspec import jsonio

# canonical name -> the name each tool logs it under (None: the tool does not log it; a tuple: the first present,
# e.g. rlspec's safe engine logs OmniSafe's loss names and its Dreamer engine sheeprl-like ones)
NAMES: dict[str, dict[str, str | tuple[str, ...] | None]] = {
    "return": {"rlspec": "Metrics/EpRet", "omnisafe": "Metrics/EpRet", "sb3": "rollout/ep_rew_mean",
               "sheeprl": "Rewards/rew_avg"},
    # SB3 logs no cost: rollout/ep_cost_mean is the column benchmarks/safe/anchors/run_sb3.py's callback adds
    "cost": {"rlspec": "Metrics/EpCost", "omnisafe": "Metrics/EpCost", "sb3": "rollout/ep_cost_mean",
             "sheeprl": None},
    "multiplier": {"rlspec": "Metrics/LagrangeMultiplier", "omnisafe": "Metrics/LagrangeMultiplier", "sb3": None,
                   "sheeprl": None},
    # SB3 logs rollout/success_rate where the env's info carries is_success (benchmarks/bonus/anchors/run_sb3.py's does)
    "success": {"rlspec": "Metrics/SuccessRate", "omnisafe": None, "sb3": "rollout/success_rate", "sheeprl": None},
    "episode_length": {"rlspec": "Metrics/EpLen", "omnisafe": "Metrics/EpLen", "sb3": "rollout/ep_len_mean",
                       "sheeprl": "Game/ep_len_avg"},
    "world_model_loss": {"rlspec": "Loss/loss", "omnisafe": None, "sb3": None, "sheeprl": "Loss/world_model_loss"},
    "observation_loss": {"rlspec": "Loss/recon_loss", "omnisafe": None, "sb3": None,
                         "sheeprl": "Loss/observation_loss"},
    "reward_loss": {"rlspec": "Loss/reward_loss", "omnisafe": None, "sb3": None, "sheeprl": "Loss/reward_loss"},
    "continue_loss": {"rlspec": "Loss/continue_loss", "omnisafe": None, "sb3": None,
                      "sheeprl": "Loss/continue_loss"},
    "kl_loss": {"rlspec": "Loss/kl_loss", "omnisafe": None, "sb3": None, "sheeprl": "Loss/state_loss"},
    "policy_loss": {"rlspec": ("Loss/actor_loss", "Loss/Loss_pi"), "omnisafe": "Loss/Loss_pi",
                    "sb3": "train/policy_gradient_loss", "sheeprl": "Loss/policy_loss"},
    "value_loss": {"rlspec": ("Loss/critic_loss", "Loss/Loss_reward_critic"), "omnisafe": "Loss/Loss_reward_critic",
                   "sb3": "train/value_loss", "sheeprl": "Loss/value_loss"},
}
KEYS = tuple(NAMES)
LATE = 0.1
CI_LEVEL = 0.95
OSCILLATION_WINDOW = 5


class EvaluationError(ValueError):
    """A run that cannot be read or evaluated; the message names the path and what is missing."""


@dataclass
class Curve:
    """One run: env steps [N] and, per key of KEYS present, values [N] (NaN where a row has none)."""
    group: str
    path: Path
    source: str  # rlspec | omnisafe | sb3
    steps: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(column names, rows) of a CSV log (rlspec's metrics.csv, SB3's and OmniSafe's progress.csv), values as
    written."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _column(rows: list[dict[str, str]], key: str, path: Path) -> np.ndarray:
    """Column ``key`` as floats (an empty cell is NaN); a cell that is no number is an EvaluationError naming
    the file, the row (its line in the file) and the value."""
    out = np.full(len(rows), math.nan)
    for i, r in enumerate(rows):
        cell = r.get(key)
        if cell in (None, ""):
            continue
        try:
            out[i] = float(cell)
        except (TypeError, ValueError):
            raise EvaluationError(f"{path}: column {key!r}, line {i + 2}: expected a number, got {cell!r}") from None
    return out


def logged_names(source: str, logged) -> dict[str, str]:
    """canonical key -> the column (or tag) ``source`` logged it under, for the keys found in ``logged``."""
    out = {}
    for key, tools in NAMES.items():
        names = tools[source] if isinstance(tools[source], tuple) else (tools[source],)
        found = [n for n in names if n is not None and n in logged]
        if found:
            out[key] = found[0]
    return out


def _curve(group: str, path: Path, source: str, table: tuple[list[str], list[dict[str, str]]],
           step_key: str, file: Path) -> Curve:
    """The Curve of run ``path`` from ``table``, read from its CSV ``file`` (named in a bad cell's error)."""
    columns, rows = table
    if step_key not in columns:
        raise EvaluationError(f"{path}: no column {step_key!r} (env steps); columns: {', '.join(columns)}")
    if not rows:
        raise EvaluationError(f"{path}: no logged rows")
    names = logged_names(source, columns)
    if "return" not in names:
        raise EvaluationError(f"{path}: no return column {NAMES['return'][source]!r}")
    return Curve(group, path, source, _column(rows, step_key, file),
                 {key: _column(rows, col, file) for key, col in names.items()})


def _written_at(events: Path) -> tuple[int, str]:
    """(creation time, path) of an event file named events.out.tfevents.<unix time>.<host>...: the chunks of a
    resumed sheeprl run (version_0, version_1, ..., version_10: not in name order) in the order they ran."""
    stamp = events.name.split(".")[3]
    return (int(stamp) if stamp.isdigit() else 0, str(events))


def _run_folder(events: Path) -> Path:
    """The run an event file belongs to: its folder, or the folder above a version_N (a resumed chunk)."""
    folder = events.parent
    return folder.parent if re.fullmatch(r"version_\d+", folder.name) else folder


def _read_events(path: Path, group: str) -> Curve:
    """sheeprl's TensorBoard scalars: steps = the union of the logged steps, each metric NaN where not logged; where
    two event files log one step (a run resumed from a checkpoint before its end), the later file's value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(path.rglob("events.out.tfevents.*"), key=_written_at)  # a later chunk's value wins
    runs = sorted({str(_run_folder(f).relative_to(path)) for f in files})
    if len(runs) > 1:
        raise EvaluationError(f"{path}: TensorBoard events of {len(runs)} runs ({', '.join(runs[:3])}"
                              f"{', ...' if len(runs) > 3 else ''}): name each run's directory")
    scalars: dict[str, dict[int, float]] = {}
    for events in files:
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    names = logged_names("sheeprl", scalars)
    if "return" not in names:
        raise EvaluationError(f"{path}: TensorBoard events without sheeprl's return {NAMES['return']['sheeprl']!r}; "
                              f"tags: {', '.join(sorted(scalars)) or 'none'}")
    steps = np.array(sorted({step for tag in names.values() for step in scalars[tag]}), dtype=float)
    values = {key: np.array([scalars[tag].get(int(step), math.nan) for step in steps]) for key, tag in names.items()}
    return Curve(group, path, "sheeprl", steps, values)


def read_run(path: Path, group_by: str = "algo") -> Curve:
    """The Curve of a run directory in any of the three formats (see the module docstring)."""
    path = Path(path)
    progress, metrics, config = path / "progress.csv", path / "metrics.csv", path / "config.json"
    if metrics.is_file() and config.is_file():  # rlspec: OmniSafe's metric names, the step in column `step`
        cfg = json.loads(config.read_text())
        label = cfg.get("config", {}).get(group_by, cfg.get("engine", path.name))
        return _curve(f"rlspec {label}", path, "rlspec", read_csv(metrics), "step", metrics)
    if progress.is_file():
        table = read_csv(progress)
        if "TotalEnvSteps" in table[0]:  # OmniSafe: runs/<Algo>-{<env>}/seed-XXX-<time>/
            cfg = json.loads(config.read_text()) if config.is_file() else {}
            label = cfg.get(group_by, path.parent.name.split("-{")[0])
            return _curve(f"omnisafe {label}", path, "omnisafe", table, "TotalEnvSteps", progress)
        if "time/total_timesteps" in table[0]:
            return _curve("sb3 PPO", path, "sb3", table, "time/total_timesteps", progress)
        raise EvaluationError(f"{progress}: neither OmniSafe's (TotalEnvSteps) nor SB3's (time/total_timesteps) "
                              "columns")
    if path.is_dir() and next(path.rglob("events.out.tfevents.*"), None) is not None:
        return _read_events(path, "sheeprl dreamer_v3" if group_by == "algo" else path.name)
    raise EvaluationError(f"{path}: not a run directory (no metrics.csv + config.json, no progress.csv, no "
                          "TensorBoard events)")


def bootstrap_ci(samples, level: float = CI_LEVEL, resamples: int = 10_000,
                 seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the percentile bootstrap of the mean of `samples` (NaN dropped; a single sample has
    no spread: low = high = it). Seeded, so a report is reproducible."""
    x = np.asarray([s for s in samples if not math.isnan(s)], dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    means = x[np.random.default_rng(seed).integers(0, x.size, (resamples, x.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    return float(x.mean()), float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


def late_values(curve: Curve, key: str, late: float = LATE) -> np.ndarray:
    """The logged values of ``key`` (a canonical name) over the last ``late`` fraction of the run's rows (at
    least one), NaN rows dropped; empty when the run does not log the key."""
    values = curve.values.get(key)
    if values is None:
        return np.array([])
    n = max(1, math.ceil(late * len(values)))
    return values[-n:][~np.isnan(values[-n:])]


def late_mean(curve: Curve, key: str, late: float = LATE) -> float:
    """The mean of ``late_values``; NaN when there are none."""
    values = late_values(curve, key, late)
    return float(values.mean()) if values.size else math.nan


def summary(samples) -> dict[str, float]:
    """{"mean", "ci_low", "ci_high"}: ``bootstrap_ci`` of ``samples`` by name, and {"iqm", "iqm_ci_low",
    "iqm_ci_high"}: the interquartile mean and its bootstrap CI (NaN samples dropped; NaN when none is left)."""
    stats = _stats()
    out = dict(zip(("mean", "ci_low", "ci_high"), bootstrap_ci(samples)))
    x = [v for v in samples if not math.isnan(v)]
    iqm = (stats.iqm(x), *stats.interval([x], "iqm")) if x else (math.nan,) * 3
    return {**out, **dict(zip(("iqm", "iqm_ci_low", "iqm_ci_high"), iqm))}


def steps_to_threshold(curve: Curve, threshold: float, key: str = "return") -> float:
    """The first logged env step whose ``key`` (a canonical name) is ≥ threshold; NaN when the run never gets
    there or does not log the key."""
    hit = np.flatnonzero(curve.values.get(key, np.array([])) >= threshold)
    return float(curve.steps[hit[0]]) if hit.size else math.nan


def oscillation_amplitude(values: np.ndarray, window: int = OSCILLATION_WINDOW) -> float:
    """√2 × std of values around their centred moving average, where the whole window fits (NaN when fewer
    than `window` values): 0 for a straight drift, A·√2·(1 − 1/window) for a drift plus ±A alternating."""
    if values.size < window:
        return math.nan
    trend = np.convolve(values, np.ones(window) / window, "valid")  # [N - window + 1], centred
    inner = values[window // 2: window // 2 + trend.size]
    return float(math.sqrt(2) * np.std(inner - trend))


def run_metrics(curve: Curve, threshold: float | None, cost_limit: float | None, late: float = LATE) -> dict:
    cost = late_values(curve, "cost", late)
    multiplier = late_values(curve, "multiplier", max(late, 2 * OSCILLATION_WINDOW / len(curve.steps)))
    return {
        "path": str(curve.path), "source": curve.source, "env_steps": float(curve.steps[-1]),
        "final_return": late_mean(curve, "return", late),
        "final_cost": float(cost.mean()) if cost.size else math.nan,
        "final_success": late_mean(curve, "success", late),
        "final_multiplier": late_mean(curve, "multiplier", late),
        "steps_to_threshold": steps_to_threshold(curve, threshold) if threshold is not None else math.nan,
        "violation_rate": float(np.mean(cost > cost_limit)) if cost.size and cost_limit is not None else math.nan,
        "late_cost_variance": float(np.var(cost)) if cost.size else math.nan,
        "multiplier_oscillation": oscillation_amplitude(multiplier) if multiplier.size else math.nan,
    }


METRICS = ("final_return", "final_cost", "final_success", "final_multiplier", "steps_to_threshold",
           "violation_rate", "late_cost_variance", "multiplier_oscillation")


def group_report(curves: list[Curve], threshold: float | None = None, cost_limit: float | None = None,
                 late: float = LATE, baseline: str | None = None, margin: float | None = None) -> dict:
    """Per group: each run's metrics and, per metric, mean and IQM with 95% bootstrap CIs over the runs (seeds);
    steps to threshold counts a run that never reaches it at its budget. With ``baseline`` (a group), each other
    group's final return and cost against it (``comparisons``, rlspec/evidence/stats.py ``compare``; ``margin``:
    the return difference declared equivalent, before the runs)."""
    if not curves:
        raise EvaluationError("no runs to evaluate")
    report = {"threshold": threshold, "cost_limit": cost_limit, "late_fraction": late, "ci_level": CI_LEVEL,
              "groups": {}}
    for group in sorted({c.group for c in curves}):
        runs = [run_metrics(c, threshold, cost_limit, late) for c in curves if c.group == group]
        summaries = {m: summary([r[m] for r in runs]) for m in METRICS if m != "steps_to_threshold"}
        steps = [r["steps_to_threshold"] for r in runs]  # a run that never reached it: at its budget
        steps = _stats().censored_at(steps, [r["env_steps"] for r in runs]) if threshold is not None else steps
        reached = sum(not math.isnan(r["steps_to_threshold"]) for r in runs)
        summaries["steps_to_threshold"] = {**summary(list(steps)), "reached": f"{reached}/{len(runs)}"}
        report["groups"][group] = {"runs": runs, "summary": {m: summaries[m] for m in METRICS}}
    if baseline is not None:
        report["baseline"], report["margin"] = baseline, margin
        report["comparisons"] = comparisons(report["groups"], baseline, margin)
    return report


def _stats():
    """rlspec/evidence/stats.py (scipy.stats, the `stats` extra): an EvaluationError that says so when missing."""
    try:
        from rlspec.evidence import stats
    except ModuleNotFoundError as err:
        raise EvaluationError(f"the statistics need {err.name}: pip install 'rlspec[runs,stats]'") from None
    return stats


def comparisons(groups: dict, baseline: str, margin: float | None) -> dict:
    """{group: {metric: compare(group's seeds, baseline's seeds)}} for final return (higher is better, the
    declared margin) and final cost (lower is better), where both groups log the metric."""
    if baseline not in groups:
        raise EvaluationError(f"--baseline {baseline!r} is none of the groups {sorted(groups)}")
    out = {}
    for group, g in groups.items():
        if group == baseline:
            continue
        out[group] = {}
        for metric, higher, m in (("final_return", True, margin), ("final_cost", False, None)):
            mine, base = ([r[metric] for r in x["runs"]] for x in (g, groups[baseline]))
            if not any(math.isnan(v) for v in mine + base):
                out[group][metric] = _stats().compare(mine, base, m, higher)
    return out


def _grid_band(curves: list[Curve], key: str, points: int = 100) -> tuple[np.ndarray, np.ndarray] | None:
    """Common env-step grid [points] and the runs' values interpolated on it [runs, points]."""
    curves = [c for c in curves if key in c.values]
    if not curves:
        return None
    grid = np.linspace(0, min(c.steps[-1] for c in curves), points)
    def on_grid(c: Curve) -> np.ndarray:
        ok = ~np.isnan(c.values[key])
        return np.interp(grid, c.steps[ok], c.values[key][ok]) if ok.any() else np.full(points, math.nan)
    return grid, np.stack([on_grid(c) for c in curves])


def plot_groups(curves: list[Curve], path: Path, cost_limit: float | None = None, cols: int = 3) -> Path:
    """One panel per metric that any run logs, against env steps: each group's mean with its 95% bootstrap
    band (over seeds, at each step of a common grid) and each seed as a thin line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in KEYS if any(k in c.values for c in curves)]
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    groups = sorted({c.group for c in curves})
    for ax, key in zip(axes.flat, keys):
        for i, group in enumerate(groups):
            band = _grid_band([c for c in curves if c.group == group], key)
            if band is None:
                continue
            grid, ys = band
            for y in ys:
                ax.plot(grid, y, color=f"C{i}", lw=0.6, alpha=0.35)
            cis = np.array([bootstrap_ci(col)[1:] for col in ys.T])
            ax.plot(grid, np.nanmean(ys, axis=0), color=f"C{i}", lw=2, label=f"{group} (n={len(ys)})")
            ax.fill_between(grid, cis[:, 0], cis[:, 1], color=f"C{i}", alpha=0.2)
        if key == "cost" and cost_limit is not None:
            ax.axhline(cost_limit, color="k", ls="--", lw=1, label="cost limit")
        ax.set_title(key.replace("_", " "))
        ax.set_xlabel("env steps")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def recheck(path: Path, recompute, markdown, indent: int = 1) -> dict:
    """A comparison's JSON (a benchmark script wrote it) with its statistics recomputed from the per-seed values it
    holds: ``recompute(result) -> result``, written back, and ``markdown(result)`` beside it as PATH.md."""
    result = recompute(json.loads(path.read_text()))
    path.write_text(json.dumps(result, indent=indent) + "\n")
    path.with_suffix(".md").write_text(markdown(result))
    print(f"rechecked {path} and wrote {path.with_suffix('.md')}")
    return result


def _fmt(stat: dict) -> str:
    mean, lo, hi = stat["mean"], stat["ci_low"], stat["ci_high"]
    return "—" if math.isnan(mean) else f"{mean:.4g} [{lo:.4g}, {hi:.4g}]"


def table(report: dict) -> str:
    """The report as a Markdown table: a row per group, mean [95% CI] per metric."""
    head = ["group", "runs", *METRICS]
    rows = [f"| {' | '.join(head)} |", f"|{'---|' * len(head)}"]
    for group, g in report["groups"].items():
        cells = [_fmt(g["summary"][m]) + (f" ({g['summary'][m]['reached']} reached)" if m == "steps_to_threshold"
                                          else "") for m in METRICS]
        rows.append(f"| {group} | {len(g['runs'])} | {' | '.join(cells)} |")
    if report.get("comparisons"):
        rows += ["", f"Against {report['baseline']} (exact permutation p; MDE at 80% power):", "",
                 "| group | metric | difference | IQM (group / baseline) | p | MDE | verdict |",
                 "|---|---|---|---|---|---|---|"]
        for group, metrics in report["comparisons"].items():
            for metric, c in metrics.items():
                rows.append(f"| {group} | {metric} | {c['difference']:.4g} | {c['iqm'][0]:.4g} / {c['iqm'][1]:.4g} | "
                            f"{c['permutation_p']:.3g} | {c['mde']:.4g} | {c['verdict']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """`rlspec report RUN... [--threshold R] [--cost-limit L] [--late F] [--out DIR]`."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="rlspec report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="run directories: rlspec, OmniSafe, SB3 (CSV) or sheeprl "
                                                      "(TensorBoard events), mixed freely")
    p.add_argument("--threshold", type=float, help="the return of 'steps to threshold' (none: not reported)")
    p.add_argument("--cost-limit", type=float, help="the cost limit of the violation rate (none: not reported)")
    p.add_argument("--late", type=float, default=LATE, help=f"the late fraction of each run (default {LATE})")
    p.add_argument("--baseline", help="a group the others are compared with: final return and cost, exact "
                                      "permutation p, MDE at 80%% power, and a verdict word")
    p.add_argument("--margin", type=float, help="with --baseline: the final-return difference that counts as "
                                                "equivalent (TOST), declared before the runs")
    p.add_argument("--out", type=Path, default=Path("rlspec-report/runs"),
                   help="where report.json, report.md and report.png go (default rlspec-report/runs)")
    args = p.parse_args(argv)
    if not 0 < args.late <= 1:
        p.error(f"--late: expected a fraction in (0, 1], got {args.late}")
    if args.margin is not None and (args.baseline is None or not args.margin > 0):
        p.error(f"--margin: expected a number > 0 given with --baseline, got {args.margin}"
                f"{'' if args.baseline else ' without --baseline'}")
    for flag, value in (("--threshold", args.threshold), ("--cost-limit", args.cost_limit)):
        if value is not None and not math.isfinite(value):
            p.error(f"{flag}: expected a finite number, got {value}")
    if args.out.exists() and not args.out.is_dir():
        p.error(f"--out {args.out} is a file; expected a folder")
    seen: dict[Path, Path] = {}
    for path in args.runs:  # one run given twice would count as two seeds of its group
        if path.resolve() in seen:
            p.error(f"run {path} is given twice (also as {seen[path.resolve()]}); each run counts once")
        seen[path.resolve()] = path
    try:
        curves = [read_run(path) for path in args.runs]
        report = group_report(curves, args.threshold, args.cost_limit, args.late, args.baseline, args.margin)
    except EvaluationError as err:
        print(f"rlspec report: error: {err}", file=sys.stderr)
        return 2
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(jsonio.dumps(report, indent=1) + "\n")
        (args.out / "report.md").write_text(table(report) + "\n")
        plot_groups(curves, args.out / "report.png", args.cost_limit)
    except OSError as err:  # a full disk, an unwritable folder
        print(f"rlspec report: error: the report could not be written ({err}); the table follows", file=sys.stderr)
        print(table(report))
        return 1
    print(table(report))
    print(f"written to {args.out}/report.json, report.md, report.png", file=sys.stderr)
    return 0
