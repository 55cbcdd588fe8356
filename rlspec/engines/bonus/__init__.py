"""Bonus-phase engine (success-set design): rollout, Part1 episode metadata, pair mining, PPO + V-trace over a fragment
replay, bonus time. The package has the engines' one layout: config.py (the keys and `rlspec train bonus`'s
description; no torch), loop.py (the run loop and checkpoints), one module per execution — local.py (the sides
in one process) and ray.py (the same sides as Ray actors) —, verbs.py (eval, plot, compare). Nothing below
imports this module back.

    rlspec train bonus --task token-reach [--ablation prototypes] [--preset smoke] [--out DIR] [--set k=v ...]
    rlspec train bonus --resume RUN
    rlspec eval RUN [--episodes K]            # greedy tokens: mean return and success rate
    rlspec plot RUN
    rlspec compare bonus [--preset smoke] ... # the local and the Ray execution on one config, side by side

Same config and seed ⇒ the same run, straight or resumed: every random draw (weights, actions, replay
picks, pack sampling) comes from one ``torch.Generator``; the envs draw each episode from its own seed.
The algorithm is rlspec/algos/bonus_vtrace.py (learner, miner, bonus phase) and rlspec/algos/episodes.py
(Part1 reassembly); this file only runs them. The ablations of the success-set design §7 are ``--ablation``: baseline
(PPO + V-trace + replay), queue (+ paired queue, no Loss A), top1 (+ Loss A with the Top-1 success),
topk (+ the Top-K set), prototypes (+ prototypes and cross-cluster sampling, the default).
"""

from __future__ import annotations

from pathlib import Path

from rlspec.engines import lazy
from rlspec.engines.bonus.config import ENGINE, PRESETS, BonusConfig, describe, steps_per_update, total_envs, validate
from rlspec.runs import shell

__all__ = ["ENGINE", "PRESETS", "BonusConfig", "steps_per_update", "total_envs", "train", "validate"]

# every other name (DESCRIPTION, build_config, run, evaluate, plot, compare, summary, World, make_envs, ...) from
# the loop, the local execution or the verbs, imported on first use: they import torch
__getattr__ = lazy(__name__, ("loop", "local", "verbs"))


def _run(cfg: BonusConfig, out: Path, resume: bool, stop_after: int | None, show_progress: bool) -> Path:
    from rlspec.engines.bonus.loop import DESCRIPTION

    return DESCRIPTION.run(cfg, out, resume, stop_after, show_progress)


def train(argv: list[str]) -> int:
    """`rlspec train bonus ...`: parsing and --help import no torch."""
    return shell.train(describe(_run), argv)
