"""The bonus engine's run loop (updates, checkpoints, the finite check) over its two executions (local.py,
ray.py); it imports torch, so the package loads this module on first use.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rlspec.engines.bonus.config import ENGINE, BonusConfig, describe, steps_per_update, validate
from rlspec.engines.bonus.local import World
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.faults import check_finite
from rlspec.runs.plots import Panel, draw
from rlspec.runs.rundir import Progress, RunDir, load_checkpoint


def panels() -> list[Panel]:
    return [Panel("Metrics/SuccessRate", "success.png", "success rate (recent episodes)"),
            Panel("Metrics/EpRet", "return.png", "episode return"),
            Panel("pairs/queue", "queue.png", "paired-queue size"),
            Panel("bonus/updates", "bonus_updates.png", "bonus updates per main update")]


def make_world(cfg: BonusConfig):
    """The execution: World (one process) or RayWorld (actors; ray.py, imported only here: the `bonus` extra)."""
    if cfg.execution == "ray":
        from rlspec.engines.bonus.ray import RayWorld

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
