"""Execution local of the DreamerV3 engine (``execution=local``, the default): the loop of loop.py in one
process on the CPU, the room's ROM in PyBoy emulators, top to bottom. Same config and seed give the same run,
bit for bit, straight or resumed.

    rlspec train dreamer --task room-exit [--preset smoke] [--out DIR] [--set KEY=VALUE ...]
"""

from __future__ import annotations

from pathlib import Path

import torch

from rlspec.engines.dreamer.config import DreamerRunConfig
from rlspec.engines.dreamer.loop import (
    Logger,
    Loop,
    act,
    build,
    checkpoint,
    env_step,
    learn,
    make_envs,
    make_ring,
    open_rundir,
    params,
    read_checkpoint,
    row,
    validate,
)
from rlspec.runs import config as runconfig


class LocalExecution:
    """Execution local (module docstring): one process, CPU, deterministic; ``run`` trains."""

    def __init__(self, cfg: DreamerRunConfig):
        validate(cfg)
        if cfg.execution != "local":
            raise runconfig.ConfigError(f"config key 'execution': LocalExecution runs execution 'local', got "
                                        f"{cfg.execution!r}")
        self.cfg = cfg

    def run(self, out: Path, resume: bool = False, stop_after_steps: int | None = None,
            show_progress: bool = True) -> Path:
        """Train (or, with ``resume``, continue the run in ``out``); returns the run directory.
        ``stop_after_steps``: stop (with a checkpoint) after this many more env steps."""
        cfg = self.cfg
        torch.set_num_threads(cfg.torch_threads)
        ckpt = read_checkpoint(Path(out) / "checkpoints/last.pt") if resume else None  # before anything is written
        gen = torch.Generator().manual_seed(cfg.seed)
        state = build(cfg, gen)
        envs = make_envs(cfg, cfg.seed)
        ring = ckpt["ring"] if ckpt is not None else make_ring(cfg)
        if ckpt is not None:
            state.load_state_dict(ckpt["state"])
            envs.load_state_dict(ckpt["envs"])
            loop = Loop(**ckpt["loop"])
            gen.set_state(ckpt["gen"])
        else:
            loop = Loop.start(cfg, envs.reset())
        try:
            rundir = open_rundir(cfg, out, loop.env_steps if ckpt is not None else None)
            end = cfg.total_steps if stop_after_steps is None else min(cfg.total_steps,
                                                                       loop.env_steps + stop_after_steps)
            with rundir:
                log = Logger(cfg, rundir, loop.env_steps, state.updates, show_progress)
                while loop.env_steps < end:
                    env_step(cfg, envs, ring, loop, act(cfg, state, loop, gen))
                    learn(cfg, state, ring, loop, gen)
                    if log.due(loop.env_steps):
                        log.row(loop.env_steps, state.updates, row(cfg, state, loop))
                    if loop.env_steps % cfg.checkpoint_every == 0 or loop.env_steps >= end:  # end: any step
                        rundir.save(loop.env_steps, checkpoint(state, ring, envs, loop, gen), params(state))
                log.close(state, ring)
        finally:
            envs.close()
        return Path(out)
