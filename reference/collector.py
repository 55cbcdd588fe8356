"""Reference ``collector`` (spec/collector.py): the textbook loop over a Gymnasium 1.x vector env, both autoreset
modes, one stored row per real step."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rlspec.contracts.collector import FIELDS, NEXT_STEP, autoreset_mode, real_next_obs


def collect(envs: Any, obs: np.ndarray, policy: Callable[[np.ndarray], np.ndarray], steps: int) -> dict:
    """``steps`` calls of envs.step from ``obs`` [N, D]; rows (obs, action, reward, real next state, flags) and the
    finished episodes (env, return, length)."""
    mode = autoreset_mode(envs)
    n = envs.num_envs
    rows: dict[str, list] = {k: [] for k in FIELDS}
    episodes, ret, length = [], np.zeros(n), np.zeros(n, dtype=np.int64)
    resetting = np.zeros(n, dtype=bool)  # next-step mode: this step only resets these envs
    for _ in range(steps):
        action = np.asarray(policy(obs))  # [N, A]
        next_obs, reward, terminated, truncated, info = envs.step(action)
        real = real_next_obs(mode, next_obs, info)  # [N, D]
        for i in np.flatnonzero(~resetting):
            for k, v in zip(FIELDS, (obs[i], action[i], reward[i], real[i], terminated[i], truncated[i])):
                rows[k].append(v)
            ret[i] += reward[i]
            length[i] += 1
            if terminated[i] or truncated[i]:
                episodes.append((int(i), float(ret[i]), int(length[i])))
                ret[i], length[i] = 0.0, 0
        ended = np.asarray(terminated) | np.asarray(truncated)  # a reset step reports neither
        resetting = ended if mode == NEXT_STEP else np.zeros(n, dtype=bool)
        obs = next_obs
    out = {k: np.asarray(v) for k, v in rows.items()}
    return dict(out, episodes=episodes)
