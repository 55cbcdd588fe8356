"""The bonus engine's rollout behind contract ``collector`` (spec/collector.py).

Engine code that runs: ``RolloutSide.collect`` (rlspec/engines/bonus/local.py: one fragment of ``steps`` vector
steps, with the engine's Part1 episode ids and step counters), acting with the engine's own token policy
(``make_policy`` + ``act``, rlspec/algos/bonus_vtrace.py, freshly drawn), and the engine's Part1 reassembly
(``EpisodeAssembler``, rlspec/algos/episodes.py, fed as ReplaySide.add feeds it) for the finished episodes.

Adapter: ``_TokenVector``, the contract's sub-envs (``envs.env_fns``) behind TokenReachVector's interface
(rlspec/envs/token_reach.py: same-step autoreset, ``final_obs`` = where each step arrived, ``episodes`` and
``t`` counters, float32 observations), whatever the given vector's mode. The engine acts in tokens: one action
dimension of N_BINS tokens, token k sent to the env as TOKEN_VALUES[k] = −1 + 2k/(N_BINS − 1) (the token tasks'
discretization); the stored action is that value. The given ``obs`` and ``policy`` are not used: the rollout
side resets its own vector and acts with the engine's policy.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from rlspec.algos.bonus_vtrace import BonusKit, act, make_policy
from rlspec.algos.episodes import EpisodeAssembler
from rlspec.contracts.collector import FIELDS
from rlspec.engines.bonus.config import BonusConfig
from rlspec.engines.bonus.local import Collected, RolloutSide
from rlspec.envs.token_reach import N_BINS, TOKEN_VALUES, TokenStep


class _TokenVector:
    """The contract's sub-envs as a TokenReachVector: step(tokens [N, 1]) -> TokenStep, same-step autoreset."""

    obs_dim, action_dim, n_bins = 4, 1, N_BINS

    def __init__(self, env_fns: list[Callable[[], Any]]):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.episodes = np.zeros(self.num_envs, dtype=np.int64)  # [N] episodes started per env
        self.t = np.zeros(self.num_envs, dtype=np.int64)  # [N] steps into the current episode
        self.current = [np.zeros(4) for _ in self.envs]  # each env's observation

    def _start(self, i: int) -> None:
        self.current[i], _ = self.envs[i].reset()
        self.episodes[i] += 1
        self.t[i] = 0

    def obs(self) -> np.ndarray:
        return np.stack(self.current).astype(np.float32)  # [N, 4]

    def reset(self) -> np.ndarray:
        for i in range(self.num_envs):
            self._start(i)
        return self.obs()

    def step(self, tokens: np.ndarray) -> TokenStep:
        n = self.num_envs
        reward, terminated, truncated = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool)
        for i, env in enumerate(self.envs):
            action = TOKEN_VALUES[tokens[i]].astype(np.float32)  # [1]
            self.current[i], reward[i], terminated[i], truncated[i], _ = env.step(action)
        self.t += 1
        final_obs = self.obs()
        for i in np.flatnonzero(terminated | truncated):
            self._start(i)
        return TokenStep(self.obs(), reward, terminated, truncated, terminated.copy(), final_obs)


def _episodes(c: Collected, total_envs: int) -> list[tuple[int, float, int]]:
    """The fragment's finished episodes (env, return, length), reassembled per env column by the engine."""
    frag, assembler, out = c.frag, EpisodeAssembler(), []
    done = frag.terminated | frag.truncated  # [T, N]
    for i in range(frag.obs.shape[1]):
        for ep in assembler.add(c.episode_id[:, i], c.t[:, i], frag.obs[:, i], frag.tokens[:, i],
                                frag.reward[:, i], done[:, i], c.success[:, i]):
            out.append((ep.episode.ep_id % total_envs, ep.ret, ep.episode.states.shape[0]))
    return out


def collect(envs: Any, obs: np.ndarray, policy: Callable, steps: int) -> dict:
    if steps == 0:
        return dict({k: np.zeros((0,)) for k in FIELDS}, episodes=[])
    n = envs.num_envs
    cfg = BonusConfig(num_envs=n, fragment_len=steps, kit="reference")
    side = RolloutSide(cfg, n, 0, n)
    side.envs = _TokenVector(envs.env_fns)  # the engine's envs, replaced by the contract's
    side.obs = torch.from_numpy(side.envs.reset())  # [N, 4]
    gen = torch.Generator().manual_seed(0)
    token_policy = make_policy(cfg.learner, 4, 1, N_BINS, BonusKit.named(cfg.kit), gen)
    c = side.collect(lambda o: act(token_policy, o, gen))
    frag = c.frag  # [T, N, ...]
    columns = (frag.obs, torch.from_numpy(TOKEN_VALUES)[frag.tokens], frag.reward, frag.next_obs, frag.terminated,
               frag.truncated)
    rows = {k: v.flatten(0, 1).numpy() for k, v in zip(FIELDS, columns)}
    return dict(rows, episodes=_episodes(c, n))
