"""Execution local of the safe engine (``execution=local``, the default): the loop (loop.py) in one process, its
envs in it, deterministic, top to bottom. Same config and seed give the same run, bit for bit, straight or
resumed.

    rlspec train safe --algo PPOLag --env SafetyPointGoal1-v0 [--set k=v ...]
"""

from __future__ import annotations

from rlspec.engines.safe.config import SafeConfig
from rlspec.engines.safe.loop import Execution


def execution(cfg: SafeConfig) -> Execution:
    """One process: in-process vector envs, no process group, the networks on the CPU."""
    return Execution()
