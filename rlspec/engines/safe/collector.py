"""The safe engine's collection behind contract ``collector`` (spec/collector.py).

``collect`` builds the engine's own vector, SafeVectorEnv (same-step autoreset with ``final_obs``, whatever the
given vector's mode), over the contract's sub-envs (``envs.env_fns``, in Safety-Gymnasium's step API with cost
0), runs the engine's ``collect`` (rlspec/engines/safe/loop.py) with a freshly drawn PPO policy, and returns
its Rollout as rows [T·N] and the vector's finished episodes. The given ``obs`` and ``policy`` are not used: the
engine resets its own vector and acts with its own policy. The observation and reward normalizers are off: they
rescale what is stored, by design. Stored actions are the Gaussian samples; the env gets them clipped.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from rlspec.algos.config import PPOConfig, SafetyConfig
from rlspec.algos.safe_ppo import Kit, make_state
from rlspec.contracts.collector import FIELDS
from rlspec.engines.safe import loop
from rlspec.envs.safe_vector import SafeVectorEnv


class _SafetyApi:
    """A Gymnasium env in Safety-Gymnasium's API: step -> (obs, reward, cost = 0, terminated, truncated, info)."""

    def __init__(self, env: Any):
        self.env, self.action_space, self.observation_space = env, env.action_space, env.observation_space

    def reset(self, seed: int | None = None):
        return self.env.reset(seed=seed)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, 0.0, terminated, truncated, info


def collect(envs: Any, obs: np.ndarray, policy: Callable, steps: int) -> dict:
    fns = iter(envs.env_fns)
    vector = SafeVectorEnv(lambda: _SafetyApi(next(fns)()), envs.num_envs, seed=0)
    vector.reset()
    if steps == 0:
        return dict({k: np.zeros((0,)) for k in FIELDS}, episodes=[])
    state = make_state("PPO", PPOConfig(obs_normalize=False, reward_normalize=False), SafetyConfig(), vector.obs_dim,
                       vector.act_dim, envs.num_envs, Kit.reference(), torch.Generator().manual_seed(0))
    rollout = loop.collect(state, vector, steps, torch.Generator().manual_seed(1))  # [T, N, ...]
    columns = (rollout.obs, rollout.act, rollout.reward, rollout.next_obs, rollout.terminated, rollout.truncated)
    rows = {k: v.flatten(0, 1).numpy() for k, v in zip(FIELDS, columns)}
    episodes = [(env, ret, length) for ret, _, length, _, env in vector.pop_finished()]
    return dict(rows, episodes=episodes)
