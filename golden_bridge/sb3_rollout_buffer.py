"""Golden fixture from Stable-Baselines3 2.9.2's GAE with its time-limit bootstrapping (the only module
that imports stable_baselines3's rollout buffer).

SB3 has no truncation flag in its buffer. Its on-policy collect loop
(``OnPolicyAlgorithm.collect_rollouts``) handles a time limit by folding the bootstrap into the reward,
``rewards[idx] += gamma * V(terminal_observation)`` where ``TimeLimit.truncated`` (= truncated and not
terminated), and then treats the step like any other episode end: ``episode_starts[t+1] = done_t``
(done = terminated or truncated) cuts both the next value and the recursion in
``RolloutBuffer.compute_returns_and_advantage``. At the rollout cut it bootstraps
``last_values = V(new_obs)`` unless the last step is done. spec/gae.py states that this equals our
truncation rule; this fixture checks it.

The generator draws *our* ``gae`` arguments (float32, SB3's buffer dtype) with pinned episode ends,
builds SB3's side step by step exactly as the collect loop does, fills a real ``RolloutBuffer`` through
``add`` and records its advantages and returns. The SB3-side arrays are stored too, so the golden test
checks the conversion itself.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer

from rlspec.golden_bridge.manifest import Fixture

PACKAGE = "stable-baselines3"
EPS32 = torch.finfo(torch.float32).eps
T, B = 16, 4
GAMMA, LAM = 0.99, 0.95
# episode ends (row, env): every kind of boundary the truncation rule has to get right
TERMINATED = ((9, 1), (0, 2), (15, 2), (12, 3))  # at t = 0 and on the last row included
TRUNCATED = ((4, 1), (15, 1), (1, 2), (7, 3), (8, 3))  # on the last row, right after a reset, twice in a row


def _round(t: torch.Tensor, step: float) -> torch.Tensor:
    return (torch.round(t / step) * step).float()


def _flags(places) -> torch.Tensor:
    flags = torch.zeros(T, B, dtype=torch.bool)
    for t, b in places:
        flags[t, b] = True
    return flags


def _sb3_side(reward, value, terminated, truncated, next_value, reset_value):
    """SB3's collect loop on our episode data: per step, the reward with γ·V(terminal_obs) folded in on a
    time limit and the episode_start flag handed to ``add``; at the end last_values and dones."""
    done = terminated | truncated  # [T, B]
    time_limit = truncated & ~terminated  # infos["TimeLimit.truncated"]
    rewards = torch.where(time_limit, reward + GAMMA * next_value, reward)  # float32, as SB3's += [T, B]
    episode_starts = torch.cat([torch.ones(1, B, dtype=torch.bool), done[:-1]])  # _last_episode_starts [T, B]
    # new_obs after the last step: s'_{T-1} if it did not end, else the next episode's first obs
    last_values = torch.where(done[-1], reset_value, next_value[-1])  # [B]
    return dict(rewards=rewards, episode_starts=episode_starts.float(), values=value, last_values=last_values,
                dones=done[-1].float())


def _run_rollout_buffer(side: dict) -> tuple[torch.Tensor, torch.Tensor]:
    buffer = RolloutBuffer(T, spaces.Box(-1.0, 1.0, (1,), np.float32), spaces.Box(-1.0, 1.0, (1,), np.float32),
                           device="cpu", gae_lambda=LAM, gamma=GAMMA, n_envs=B)
    for t in range(T):
        buffer.add(np.zeros((B, 1), np.float32), np.zeros((B, 1), np.float32), side["rewards"][t].numpy(),
                   side["episode_starts"][t].numpy(), side["values"][t].clone(), torch.zeros(B))
    buffer.compute_returns_and_advantage(last_values=side["last_values"].clone(),
                                         dones=side["dones"].numpy().astype(bool))
    return torch.from_numpy(buffer.advantages.copy()), torch.from_numpy(buffer.returns.copy())  # [T, B] each


def rollout_gae(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    ours = dict(reward=_round(torch.randn(T, B, generator=g, dtype=torch.float64), 1 / 64),  # r [T, B]
                value=_round(10 * torch.randn(T, B, generator=g, dtype=torch.float64), 1 / 16),  # V(s_t)
                terminated=_flags(TERMINATED), truncated=_flags(TRUNCATED),
                # V(s'_t) on every row; ours reads it on truncated rows and the unterminated last row only
                next_value=_round(10 * torch.randn(T, B, generator=g, dtype=torch.float64), 1 / 16))
    reset_value = _round(10 * torch.randn(B, generator=g, dtype=torch.float64), 1 / 16)  # V(reset obs) [B]
    side = _sb3_side(**ours, reset_value=reset_value)
    advantages, returns = _run_rollout_buffer(side)
    # per backward step: δ_t rounds <= 4 times on terms <= D (SB3: one more, r + γ·V folded), A_t and
    # A_t + V_t once or twice on <= max|A| + max|V|; errors are damped by γλ <= 1
    D = float(ours["reward"].abs().max() + 2 * torch.maximum(ours["value"].abs(), ours["next_value"].abs()).max())
    A = float(advantages.abs().max() + ours["value"].abs().max())
    atol = 2 * (T + 1) * EPS32 * (5 * D + 2 * A)
    return Fixture(
        path="gae/sb3_rollout_buffer.json", contract="gae", package=PACKAGE,
        qualname="stable_baselines3.common.buffers.RolloutBuffer.compute_returns_and_advantage "
                 "(+ the timeout bootstrap of OnPolicyAlgorithm.collect_rollouts)", seed=seed,
        atol=atol, rtol=0.0,
        why="both sides float32 (SB3's buffer dtype): <= (T+1)·eps·(5·D + 2·A) per side, D = max|r| + "
            "2·max(|V|, |b|) bounding δ's terms, A = max|adv| + max|V| the recursion's; twice that",
        convention="stored: ours (reward, value, terminated, truncated as 0/1, next_value [16, 4]) and "
                   "SB3's side (sb3_*): rewards = reward + gamma·next_value where truncated (SB3's "
                   "timeout bootstrap), episode_starts = cat(1, terminated|truncated [:-1]), values = value, "
                   "last_values = next_value[-1] unless the last step is done (then V(reset obs), "
                   "masked), dones = (terminated|truncated)[-1]; gamma 0.99, gae_lambda 0.95",
        inputs=dict(reward=ours["reward"], value=ours["value"], terminated=ours["terminated"].float(),
                    truncated=ours["truncated"].float(), next_value=ours["next_value"],
                    gamma=torch.tensor(GAMMA, dtype=torch.float64), lam=torch.tensor(LAM, dtype=torch.float64),
                    **{f"sb3_{k}": v for k, v in side.items()}),
        expected=dict(advantages=advantages, returns=returns))


GENERATORS = [rollout_gae]
