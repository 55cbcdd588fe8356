"""Runtime half of contract ``collector`` (the clauses, the scripted env and the properties: spec/collector.py).

What a collector returns and how it reads a Gymnasium 1.x vector env's autoreset mode; imports only numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# the values of gymnasium.vector.AutoresetMode (compared by value: no gymnasium import at run time)
NEXT_STEP, SAME_STEP = "NextStep", "SameStep"
MODES = (NEXT_STEP, SAME_STEP)

# a collector's result: one row per stored transition, M rows (any order), and the finished episodes
FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")
"""obs [M, D], action [M, A], reward [M], next_obs [M, D], terminated [M], truncated [M]; "episodes": a list of
(env index, return, length), one per episode that finished."""


def autoreset_mode(envs: Any) -> str:
    """The autoreset mode of a Gymnasium 1.x vector env (``envs.metadata["autoreset_mode"]``), as its value."""
    mode = getattr(envs, "metadata", {}).get("autoreset_mode")
    value = getattr(mode, "value", mode)
    if value not in MODES:
        raise ValueError(f"collect: envs.metadata['autoreset_mode'] is {mode!r}, expected one of "
                         f"{list(MODES)} (gymnasium.vector.AutoresetMode NEXT_STEP or SAME_STEP)")
    return value


def real_next_obs(mode: str, next_obs: np.ndarray, info: dict) -> np.ndarray:
    """[N, D] the state each step really reached: in same-step mode info["final_obs"] where an episode ended
    (the returned observation there is the next episode's first), else the returned observation."""
    real = np.array(next_obs, copy=True)
    if mode == SAME_STEP and "_final_obs" in info:
        for i in np.flatnonzero(info["_final_obs"]):
            real[i] = info["final_obs"][i]
    return real
