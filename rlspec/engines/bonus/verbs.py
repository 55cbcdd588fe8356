"""The bonus engine's verbs beyond `train`: `rlspec eval`, `rlspec plot`, `rlspec compare bonus` (the local and
the Ray execution on one config).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from rlspec import jsonio
from rlspec.engines.bonus.config import EXECUTIONS, BonusConfig, validate
from rlspec.engines.bonus.local import World, make_envs
from rlspec.engines.bonus.loop import DESCRIPTION, panels, run
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.compare import difference, mean
from rlspec.runs.faults import attempt
from rlspec.runs.plots import draw, overlay
from rlspec.runs.rundir import EpisodeProgress, load_run, read_metrics


def plot(run_dir: Path) -> int:
    for f in draw(run_dir, panels()):
        print(f)
    return 0


def policy_state(world: dict) -> dict:
    """The policy's weights in a checkpoint's world: the local learner's, or (execution=ray) trainer 0's — the
    trainers average their gradients, so every one holds the same."""
    side = world["learner"] if "learner" in world else world["trainers"][0]["side"]
    return side["policy"]


def evaluate(run_dir: Path, argv: list[str]) -> int:
    """Success rate and mean return of the greedy policy (argmax token per dimension) over K episodes drawn
    from a seed the run never trained on; RUN/eval/eval.json."""
    opened = shell.eval_inputs(shell.eval_parser(episodes=20), argv,
                               lambda: load_run(run_dir, BonusConfig, ("update", "world")))
    if opened is None:
        return 2
    args, cfg, ckpt = opened
    seed = shell.eval_seed(args, cfg.seed)
    w = World(cfg)
    w.learner.learner.policy.load_state_dict(policy_state(ckpt["world"]))
    envs = make_envs(dataclasses.replace(cfg, seed=seed), 1, 0)
    obs, ret, results, progress = torch.from_numpy(envs.reset()), 0.0, [], EpisodeProgress(args.episodes)
    while len(results) < args.episodes:
        with torch.no_grad():
            out = envs.step(w.learner.learner.policy(obs).argmax(-1).numpy())
        ret += float(out.reward[0])
        if out.terminated[0] or out.truncated[0]:
            results.append((ret, float(out.success[0])))
            progress.update(len(results))
            ret = 0.0
        obs = torch.from_numpy(out.obs)
    return shell.write_eval(run_dir, {"episodes": len(results),
                                      **shell.episode_means(results, ("EpRet", "SuccessRate"))}, ckpt, seed)


COMPARED = ("Metrics/SuccessRate", "Metrics/EpRet", "pairs/queue", "bonus/updates")


def compare(argv: list[str]) -> int:
    """`rlspec compare bonus [--task T] [--ablation A] [--preset P] [--set k=v ...] [--out DIR]`: one config run
    by the local execution (one process) and by the Ray execution (actors, gloo trainers) into DIR/local and
    DIR/ray; DIR/compare.json (per run: the last 10% of rows' mean success rate and return, env steps/s) and
    DIR/compare.png (their curves side by side), with the difference of those means (rlspec/runs/compare.py).
    The two draw their random numbers differently (one generator vs one per worker), so their curves are
    compared, not their rows."""
    args = shell.compare_parser(DESCRIPTION, compare.__doc__, "compare-bonus-TASK-sSEED").parse_args(argv)

    def both() -> tuple[Path, dict[str, Path]]:
        cfg = shell.compare_config(DESCRIPTION, args)
        out = shell.claim_compare_out(args.out or Path("runs") / f"compare-bonus-{cfg.task}-s{cfg.seed}")
        configs = {execution: runconfig.for_execution(cfg, execution, EXECUTIONS) for execution in EXECUTIONS}
        for c in configs.values():  # both valid before either run writes anything
            validate(c)
        return out, {execution: run(c, out / execution, show_progress=not args.quiet) for execution, c in configs.items()}

    status, ran = attempt("rlspec compare bonus", both)
    if status is not None:
        return status
    out, runs = ran
    result = {name: summary(path) for name, path in runs.items()}
    diff = {k: difference(result["local"][k], result["ray"][k]) for k in ("SuccessRate", "EpRet")}
    (out / "compare.json").write_text(jsonio.dumps({**result, "difference": diff}))
    overlay(runs, COMPARED, out / "compare.png", cols=2)
    print("; ".join(f"{name}: success {r['SuccessRate']:.3f}, return {r['EpRet']:.3g}, {r['env_steps_per_s']:.0f} "
                    f"env steps/s" for name, r in result.items()) + f"; written to {out / 'compare.json'}")
    return 0


def summary(run_dir: Path) -> dict:
    """The last 10% of a run's rows (at least one): mean success rate and return; env steps/s over all rows."""
    rows = read_metrics(run_dir)
    tail = rows[-max(1, len(rows) // 10):]
    return {"run": str(run_dir), "rows": len(rows), "SuccessRate": mean(tail, "Metrics/SuccessRate"),
            "EpRet": mean(tail, "Metrics/EpRet"), "env_steps_per_s": mean(rows, "Time/env_steps_per_s")}
