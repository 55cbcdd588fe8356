"""The bonus engine's run loop (updates, checkpoints, the finite check) and its verbs beyond `train` —
`rlspec eval`, `rlspec plot`, `rlspec compare bonus` — over the two executions (local.py, ray_world.py); they
import torch, so the package loads this module on first use.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from rlspec import jsonio
from rlspec.engines.bonus.config import ENGINE, EXECUTIONS, BonusConfig, describe, steps_per_update, validate
from rlspec.engines.bonus.local import World, make_envs
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.compare import difference, mean
from rlspec.runs.faults import attempt, check_finite
from rlspec.runs.plots import Panel, draw, overlay
from rlspec.runs.rundir import EpisodeProgress, Progress, RunDir, load_checkpoint, load_run, read_metrics


def panels() -> list[Panel]:
    return [Panel("Metrics/SuccessRate", "success.png", "success rate (recent episodes)"),
            Panel("Metrics/EpRet", "return.png", "episode return"),
            Panel("pairs/queue", "queue.png", "paired-queue size"),
            Panel("bonus/updates", "bonus_updates.png", "bonus updates per main update")]


def make_world(cfg: BonusConfig):
    """The execution: World (one process) or RayWorld (actors; ray_world.py, imported only here: the `bonus` extra)."""
    if cfg.execution == "ray":
        from rlspec.engines.bonus.ray_world import RayWorld

        return RayWorld(cfg)
    return World(cfg)


def run(cfg: BonusConfig, out: Path, resume: bool = False, stop_after_updates: int | None = None,
        show_progress: bool = True) -> Path:
    validate(cfg)
    torch.set_num_threads(cfg.torch_threads)
    per_update = steps_per_update(cfg)
    w = make_world(cfg)
    updates, start = cfg.total_steps // per_update, 0
    try:
        if resume:
            ckpt = load_checkpoint(Path(out) / "checkpoints/last.pt", ("update", "world"))
            w.load_state_dict(ckpt["world"])
            start = ckpt["update"]
            rundir = RunDir(out, ENGINE, runconfig.to_dict(cfg), resume_step=start * per_update,
                            final_step=updates * per_update)
        else:
            rundir = RunDir(out, ENGINE, runconfig.to_dict(cfg))
        with rundir:
            _loop(cfg, w, rundir, start, min(updates, start + stop_after_updates) if stop_after_updates is not None
                  else updates, show_progress)
    finally:
        w.close()
    if cfg.plots:
        draw(rundir.path, panels())
    return Path(out)


def _loop(cfg: BonusConfig, w, rundir: RunDir, start: int, stop: int, show_progress: bool) -> None:
    """Updates ``start`` .. ``stop`` − 1: rollout, update, check that losses and parameters are finite, log,
    checkpoint."""
    per_update = steps_per_update(cfg)
    updates = cfg.total_steps // per_update
    bar = Progress(updates * per_update, ("Metrics/SuccessRate", "Metrics/EpRet", "pairs/queue"), on=show_progress)
    for k in range(start, stop):
        t0 = time.perf_counter()
        step = (k + 1) * per_update
        metrics = w.train_update(step)
        check_finite(step, {key: v for key, v in metrics.items() if key.startswith("Loss/")}, w.params())
        metrics["Time/env_steps_per_s"] = per_update / max(time.perf_counter() - t0, 1e-9)
        rundir.log(step, metrics)
        bar.update(step, metrics, force=True)
        if (k + 1) % cfg.checkpoint_every == 0 or k + 1 == updates:
            rundir.save(step, {"update": k + 1, "world": w.state_dict()}, w.params())
    bar.close()


# ------------------------------------------------------------------------------------ CLI entry points
DESCRIPTION = describe(lambda cfg, out, resume, stop_after, show_progress: run(
    cfg, out, resume=resume, stop_after_updates=stop_after, show_progress=show_progress))


def build_config(preset: str = "default", overrides: list[str] = (), task: str | None = None,
                 ablation: str | None = None) -> BonusConfig:
    shorthands = [f"task={task}"] * bool(task) + [f"ablation={ablation}"] * bool(ablation)
    return shell.build_config(DESCRIPTION, preset, [*shorthands, *overrides])


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
