"""The Dreamer engine's env stepping and replay writing behind contract ``collector`` (spec/collector.py).

Engine code that runs (rlspec/engines/dreamer/loop.py): ``Loop.start``, then per vector step ``act`` and
``env_step`` (which pushes the step's replay rows and tracks the finished episodes in ``advance``), writing into
the engine's replay, ``ReplayRing`` (reference/replay.py). The ring is built with the scripted env's vector
observation, obs_shape (4,) float64, instead of the room's packed frame (1, 72, 20) uint8 that ``make_ring``
fixes: the loop and the ring never look inside an observation. The world-model policy is not run (it encodes the
room's frames): ``min_ready_steps`` is set past the collection, so ``act`` draws the prefill's uniform actions
and no update is due.

The loop runs with ``replay_ends`` on (the config key that makes the ring store each step's terminated and
truncated flags and its final observation, contract replay's store_flags and store_final).

Adapter: ``_RoomVector``, the contract's sub-envs (``envs.env_fns``) behind the room's interface (contract
room_env's ``Step``: same-step autoreset, is_first and episode_id of the returned obs, success = terminated,
``final_out`` receiving the observation before any reset), whatever the given vector's mode. The room's
NUM_ACTIONS action ids are sent to the env as a = −1 + 2k/(NUM_ACTIONS − 1) (the stored action is that value).

The replay stores one transition row per step (contract replay), not DreamerV3's arrival rows with is_last /
is_terminal: (obs_t, action_t, reward, continue, is_first of obs_t, episode_id, terminated, truncated,
final_obs). The rows convert one to one: next_obs = final_obs, the flags as stored. Episodes are the loop's
``finished`` (return, length), with the env index of the is_first the same step set. The given ``obs`` and
``policy`` are not used: the loop resets its own vector and acts with its own prefill.

With ``replay_ends`` off (the default: half the replay's frame memory) the ring keeps neither the final
observation nor the flags: an episode's last row then leads only to the next episode's reset observation,
and a step both terminated and truncated keeps continue 0 alone (COLL-2 and COLL-5 fail;
tests/engines/dreamer/test_dreamer_collector.py pins both verdicts).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from rlspec.contracts.collector import FIELDS
from rlspec.contracts.room_env import NUM_ACTIONS, Step
from rlspec.engines.dreamer.config import DreamerRunConfig
from rlspec.engines.dreamer.loop import Loop, act, env_step
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

    def step(self, actions: torch.Tensor, final_out: torch.Tensor | None = None) -> Step:
        obs, reward, terminated, truncated = [], [], [], []
        for i, (env, k) in enumerate(zip(self.envs, actions.tolist())):
            a = np.array([-1.0 + 2.0 * k / (NUM_ACTIONS - 1)], dtype=np.float32)
            o, r, term, trunc, _ = env.step(a)
            if final_out is not None:
                final_out[i] = torch.from_numpy(o)
            if term or trunc:
                o, _ = env.reset()
                self.episode[i] += 1
            obs.append(o), reward.append(r), terminated.append(term), truncated.append(trunc)
        terminated, truncated = torch.tensor(terminated), torch.tensor(truncated)
        return Step(torch.from_numpy(np.stack(obs)), torch.tensor(reward, dtype=torch.float32), terminated,
                    truncated, terminated.clone(), terminated | truncated, self.episode.clone())


def _run(envs: Any, steps: int, replay_ends: bool) -> tuple[ReplayRing, Loop, list[tuple[int, float, int]]]:
    """``steps`` iterations of the engine's loop (act, env_step) over the contract's sub-envs: the ring, the
    loop's state after them and the finished episodes (env, return, length)."""
    n = envs.num_envs
    cfg = DreamerRunConfig(num_envs=n, min_ready_steps=steps * n, replay_capacity=max(steps, 2),
                           replay_ends=replay_ends)
    vector = _RoomVector(envs.env_fns)
    ring = ReplayRing(cfg.replay_capacity, n, obs_shape=(4,), obs_dtype=torch.float64, store_flags=replay_ends,
                      store_final=replay_ends)  # make_ring's, with the scripted env's observation
    loop, gen = Loop.start(cfg, vector.reset()), torch.Generator().manual_seed(cfg.seed)
    episodes = []
    for _ in range(steps):
        env_step(cfg, vector, ring, loop, act(cfg, None, loop, gen))  # prefill: act reads no model state
        ended = loop.is_first.nonzero().flatten().tolist()  # in env order, as advance appends them
        finished = loop.finished[len(loop.finished) - len(ended):]
        episodes += [(i, ret, length) for i, (ret, length, _) in zip(ended, finished)]
    return ring, loop, episodes


def collect(envs: Any, obs: np.ndarray, policy: Callable, steps: int) -> dict:
    return rows(envs, steps, replay_ends=True)


def rows(envs: Any, steps: int, replay_ends: bool) -> dict:
    """The collector's transitions from the ring; without ``replay_ends`` the next observation is the next
    row's (the loop's current one after the last row) and the flags come from continue and is_first."""
    if steps == 0:
        return dict({k: np.zeros((0,)) for k in FIELDS}, episodes=[])
    ring, loop, episodes = _run(envs, steps, replay_ends)
    store = {k: v[:steps] for k, v in ring.storage().items()}  # [T, N, ...]: no wrap, capacity >= steps
    action = -1.0 + 2.0 * store["action"].double() / (NUM_ACTIONS - 1)  # [T, N]
    if replay_ends:
        ends = store["final_obs"], store["terminated"], store["truncated"]
    else:
        ends = _inferred_ends(store, loop)
    columns = (store["obs"], action, store["reward"], *ends)
    return dict({k: v.flatten(0, 1).numpy() for k, v in zip(FIELDS, columns)}, episodes=episodes)


def _inferred_ends(store: dict, loop: Loop) -> tuple[torch.Tensor, ...]:
    """(next_obs, terminated, truncated) [T, N, ...] from a ring without the flags and final_obs: the next row's
    obs (after the last row, the loop's current one), which after an episode's end is the next episode's first;
    terminated = continue 0, truncated = the next obs is_first with continue 1."""
    next_obs = torch.cat([store["obs"][1:], loop.obs[None]])  # [T, N, 4]
    ended = torch.cat([store["is_first"][1:], loop.is_first[None]])  # [T, N]
    terminated = store["continue"] == 0
    return next_obs, terminated, ended & ~terminated
