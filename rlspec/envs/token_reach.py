"""TokenReach-v0: the bonus phase's tiny CI task, numpy only, vectorized, with two ways to succeed.

A point in the square [-1, 1]² starts left of a wall at x = 0 and must reach a goal right of it. The wall
has two gaps (y ≈ +0.5 and y ≈ −0.5), so successful episodes form two clusters (what the success-set design Part4's
prototypes are for) and a failure usually diverges from its nearest success where it misses a gap.

    obs [N, 4] float32 = (x, y, goal_x, goal_y)
    action [N, ACTION_DIM = 2] int64 tokens in [0, N_BINS = 5): each dimension's token picks a velocity
        in TOKEN_VALUES · STEP (the discretization scheme of every token task: N_BINS evenly spaced values
        in [-1, 1], bin i = -1 + 2i/(N_BINS - 1))
    reward = (distance before − distance after) + SUCCESS_REWARD on success
    terminated = success (distance < GOAL_RADIUS); truncated = MAX_STEPS steps without success;
    info["success"] [N] bool. A move that would cross the wall outside a gap is blocked (the point stays).

Each env's k-th episode is drawn from SeedSequence([seed, global env index, k]): the same seed gives the same
episodes whatever the number of envs stepped beside it. Autoreset: a finished env's next ``obs`` row is
the new episode's first observation; the step's ``final_obs`` holds the observation it ended on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTION_DIM, N_BINS = 2, 5
TOKEN_VALUES = np.linspace(-1.0, 1.0, N_BINS)  # [N_BINS] token -> velocity in units of STEP
STEP = 0.1
GOAL_RADIUS = 0.15
SUCCESS_REWARD = 1.0
MAX_STEPS = 60
GAPS = (0.5, -0.5)  # y centres of the wall's gaps
GAP_HALF = 0.15


@dataclass
class TokenStep:
    obs: np.ndarray  # [N, 4] next observation (a new episode's first after a done)
    reward: np.ndarray  # [N]
    terminated: np.ndarray  # [N] bool
    truncated: np.ndarray  # [N] bool
    success: np.ndarray  # [N] bool
    final_obs: np.ndarray  # [N, 4] the observation each env's step arrived at (before any reset)


def require_tokens(fn: str, tokens, num_envs: int, action_dim: int, n_bins: int) -> np.ndarray:
    """``tokens`` as an int array [num_envs, action_dim] with values in [0, n_bins), or a ValueError naming it."""
    tokens = np.asarray(tokens)
    ok = (tokens.shape == (num_envs, action_dim) and np.issubdtype(tokens.dtype, np.integer)
          and tokens.min() >= 0 and tokens.max() < n_bins)
    if not ok:
        got = f"{tokens.dtype} of shape {tokens.shape}" + (f" in [{tokens.min()}, {tokens.max()}]" if tokens.size else "")
        raise ValueError(f"{fn}: argument 'tokens' must be ints in [0, {n_bins}) of shape {(num_envs, action_dim)}, "
                         f"got {got}")
    return tokens


def tokens_to_velocity(tokens: np.ndarray) -> np.ndarray:
    """[N, ACTION_DIM] int tokens -> [N, ACTION_DIM] velocities."""
    return TOKEN_VALUES[tokens] * STEP


def _blocked(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """[N] True where the move old -> new crosses x = 0 outside both gaps."""
    crosses = np.sign(old[:, 0]) != np.sign(new[:, 0])
    in_gap = np.zeros(len(old), dtype=bool)
    for y in GAPS:
        in_gap |= np.abs(new[:, 1] - y) < GAP_HALF
    return crosses & ~in_gap


class TokenReachVector:
    obs_dim, action_dim, n_bins = 4, ACTION_DIM, N_BINS

    def __init__(self, num_envs: int, seed: int, first_env: int = 0):
        if num_envs < 1:
            raise ValueError(f"TokenReachVector: argument 'num_envs' must be >= 1, got {num_envs}")
        self.num_envs, self.seed, self.first_env = num_envs, seed, first_env
        self.episodes = np.zeros(num_envs, dtype=np.int64)  # [N] episodes started per env
        self.t = np.zeros(num_envs, dtype=np.int64)  # [N] steps into the current episode
        self.pos = np.zeros((num_envs, 2))
        self.goal = np.zeros((num_envs, 2))

    def _start(self, i: int) -> None:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, self.first_env + i, int(self.episodes[i])]))
        self.pos[i] = (rng.uniform(-0.9, -0.5), rng.uniform(-0.9, 0.9))
        self.goal[i] = (rng.uniform(0.5, 0.9), rng.uniform(-0.9, 0.9))
        self.episodes[i] += 1
        self.t[i] = 0

    def obs(self) -> np.ndarray:
        return np.concatenate([self.pos, self.goal], axis=1).astype(np.float32)  # [N, 4]

    def reset(self) -> np.ndarray:
        for i in range(self.num_envs):
            self._start(i)
        return self.obs()

    def step(self, tokens: np.ndarray) -> TokenStep:
        tokens = require_tokens("TokenReachVector.step", tokens, self.num_envs, ACTION_DIM, N_BINS)
        before = np.linalg.norm(self.pos - self.goal, axis=1)
        new = np.clip(self.pos + tokens_to_velocity(tokens), -1.0, 1.0)
        blocked = _blocked(self.pos, new)
        self.pos = np.where(blocked[:, None], self.pos, new)
        after = np.linalg.norm(self.pos - self.goal, axis=1)
        self.t += 1
        success = after < GOAL_RADIUS
        truncated = ~success & (self.t >= MAX_STEPS)
        reward = (before - after) + SUCCESS_REWARD * success
        final_obs = self.obs()
        for i in np.flatnonzero(success | truncated):
            self._start(i)
        return TokenStep(self.obs(), reward.astype(np.float32), success, truncated, success, final_obs)

    def state_dict(self) -> dict:
        return {k: getattr(self, k).copy() for k in ("episodes", "t", "pos", "goal")}

    def load_state_dict(self, state: dict) -> None:
        for k, v in state.items():
            setattr(self, k, v.copy())
