"""The Dreamer engine's env stepping and replay writing behind contract ``collector`` (spec/collector.py).

Engine code that runs (rlspec/engines/dreamer/reference.py): ``Loop.start``, then per vector step ``act`` and
``env_step`` (which pushes the step's replay rows and tracks the finished episodes in ``advance``), writing into
the engine's replay, ``ReplayRing`` (reference/replay.py). The ring is built with the scripted env's vector
observation, obs_shape (4,) float64, instead of the room's packed frame (1, 72, 20) uint8 that ``make_ring``
fixes: the loop and the ring never look inside an observation. The world-model policy is not run (it encodes the
room's frames): ``min_ready_steps`` is set past the collection, so ``act`` draws the prefill's uniform actions
and no update is due.

Adapter: ``_RoomVector``, the contract's sub-envs (``envs.env_fns``) behind the room's interface (contract
room_env's ``Step``: same-step autoreset, is_first and episode_id of the returned obs, success = terminated),
whatever the given vector's mode; like the room, it hands the loop no final observation. The room's NUM_ACTIONS
action ids are sent to the env as a = −1 + 2k/(NUM_ACTIONS − 1) (the stored action is that value).

What the replay stores is one transition row per step (contract replay), not DreamerV3's arrival
rows with is_last / is_terminal: (obs_t, action_t, reward, continue = 1 − terminated, is_first of obs_t,
episode_id), no final observation and no truncation flag. The rows convert as: next_obs = the env column's next
row's obs (the loop's current obs after the last row), which after an episode's end is the next episode's
first obs; the episode ended where that next obs is_first; terminated = continue 0, truncated = ended with
continue 1 (a step both terminated and truncated is stored as terminated only). Episodes are the loop's
``finished`` (return, length), with the env index of the is_first the same step set. The given ``obs`` and
``policy`` are not used: the loop resets its own vector and acts with its own prefill.

So the replay fails COLL-2 (no final observation: an episode's last row leads to the next episode's reset
observation) and COLL-5 (a step both terminated and truncated keeps only continue 0); the conversion hides
neither. The room never sets both flags on one step, and the world model trains on these transition rows by
design; but no consumer of this replay can bootstrap a time limit from its real final state.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from rlspec.contracts.collector import FIELDS
from rlspec.contracts.room_env import NUM_ACTIONS, Step
from rlspec.engines.dreamer.config import DreamerRunConfig
from rlspec.engines.dreamer.reference import Loop, act, env_step
from rlspec.reference.replay import ReplayRing


class _RoomVector:
    """The contract's sub-envs in the room's interface: step(actions [N] int64) -> Step, same-step autoreset."""

    def __init__(self, env_fns: list[Callable[[], Any]]):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.episode = torch.zeros(self.num_envs, dtype=torch.int32)  # [N] episode id of each env's obs

    def reset(self) -> Step:
        n = self.num_envs
        obs = torch.from_numpy(np.stack([env.reset()[0] for env in self.envs]))  # [N, 4] float64
        false = torch.zeros(n, dtype=torch.bool)
        return Step(obs, torch.zeros(n), false, false.clone(), false.clone(), ~false, self.episode.clone())

    def step(self, actions: torch.Tensor) -> Step:
        obs, reward, terminated, truncated = [], [], [], []
        for i, (env, k) in enumerate(zip(self.envs, actions.tolist())):
            a = np.array([-1.0 + 2.0 * k / (NUM_ACTIONS - 1)], dtype=np.float32)
            o, r, term, trunc, _ = env.step(a)
            if term or trunc:
                o, _ = env.reset()
                self.episode[i] += 1
            obs.append(o), reward.append(r), terminated.append(term), truncated.append(trunc)
        terminated, truncated = torch.tensor(terminated), torch.tensor(truncated)
        return Step(torch.from_numpy(np.stack(obs)), torch.tensor(reward, dtype=torch.float32), terminated,
                    truncated, terminated.clone(), terminated | truncated, self.episode.clone())


def _run(envs: Any, steps: int) -> tuple[ReplayRing, Loop, list[tuple[int, float, int]]]:
    """``steps`` iterations of the engine's loop (act, env_step) over the contract's sub-envs: the ring, the
    loop's state after them, and the finished episodes (env, return, length)."""
    n = envs.num_envs
    cfg = DreamerRunConfig(num_envs=n, min_ready_steps=steps * n, replay_capacity=max(steps, 2))
    vector = _RoomVector(envs.env_fns)
    ring = ReplayRing(cfg.replay_capacity, n, obs_shape=(4,), obs_dtype=torch.float64)
    loop, gen = Loop.start(cfg, vector.reset()), torch.Generator().manual_seed(cfg.seed)
    episodes = []
    for _ in range(steps):
        env_step(cfg, vector, ring, loop, act(cfg, None, loop, gen))  # prefill: act reads no model state
        ended = loop.is_first.nonzero().flatten().tolist()  # in env order, as advance appends them
        finished = loop.finished[len(loop.finished) - len(ended):]
        episodes += [(i, ret, length) for i, (ret, length, _) in zip(ended, finished)]
    return ring, loop, episodes


def collect(envs: Any, obs: np.ndarray, policy: Callable, steps: int) -> dict:
    if steps == 0:
        return dict({k: np.zeros((0,)) for k in FIELDS}, episodes=[])
    ring, loop, episodes = _run(envs, steps)
    store = {k: v[:steps] for k, v in ring.storage().items()}  # [T, N, ...]: no wrap, capacity >= steps
    next_obs = torch.cat([store["obs"][1:], loop.obs[None]])  # [T, N, 4]
    ended = torch.cat([store["is_first"][1:], loop.is_first[None]])  # [T, N]
    terminated = store["continue"] == 0
    action = -1.0 + 2.0 * store["action"].double() / (NUM_ACTIONS - 1)  # [T, N]
    columns = (store["obs"], action, store["reward"], next_obs, terminated, ended & ~terminated)
    rows = {k: v.flatten(0, 1).numpy() for k, v in zip(FIELDS, columns)}
    return dict(rows, episodes=episodes)
