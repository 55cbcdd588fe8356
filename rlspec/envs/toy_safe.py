"""``ToyGoal-v0``: a tiny point-goal task with a hazard and Safety-Gymnasium's API, in numpy only.

It exists so that the safe-RL engine, its resume identity and its algorithms can be tested in the core
environment, where Safety-Gymnasium (numpy < 2, old gymnasium) is not installed. Not a benchmark.

A point p ∈ ℝ² with velocity v; action a ∈ [−1, 1]²: v ← 0.8·v + 0.2·a, p ← p + 0.1·v. Reward: the
decrease of the distance to the goal, +1 when within 0.2 of it (a new goal is drawn). Cost: 1 per step
inside the hazard (radius 0.5). Observation [8]: p, v, goal − p, hazard − p. The episode terminates when
|p|∞ > 3 and is truncated after ``max_steps`` (100) steps. ``forced_cost`` adds a constant cost every step
(tests: λ must rise when the cost exceeds the limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HAZARD_RADIUS = 0.5  # cost 1 per step inside


@dataclass(frozen=True)
class Box:
    low: np.ndarray
    high: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.low.shape


class ToyGoal:
    observation_space = Box(np.full(8, -np.inf), np.full(8, np.inf))
    action_space = Box(np.full(2, -1.0), np.full(2, 1.0))

    def __init__(self, max_steps: int = 100, forced_cost: float = 0.0, width: int = 64, height: int = 64):
        self.max_steps, self.forced_cost, self.size = max_steps, forced_cost, (height, width)
        self.rng = np.random.default_rng(0)
        self.p = self.v = self.goal = self.hazard = np.zeros(2)
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.p, self.v, self.goal - self.p, self.hazard - self.p]).astype(np.float32)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.p, self.v = self.rng.uniform(-1, 1, 2), np.zeros(2)
        self.goal, self.hazard = self.rng.uniform(-1.5, 1.5, 2), self.rng.uniform(-1, 1, 2)
        self.t = 0
        return self._obs(), {}

    def oracle_margin(self) -> float:
        """The true margin of the state (rlspec.envs.safety_gym.oracle_margin): hazard edge − goal distance."""
        return float(np.linalg.norm(self.hazard - self.p) - HAZARD_RADIUS - np.linalg.norm(self.goal - self.p))

    def step(self, action):
        a = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        before = np.linalg.norm(self.goal - self.p)
        self.v = 0.8 * self.v + 0.2 * a
        self.p = self.p + 0.1 * self.v
        dist = np.linalg.norm(self.goal - self.p)
        reward = before - dist
        if dist < 0.2:
            reward += 1.0
            self.goal = self.rng.uniform(-1.5, 1.5, 2)
        cost = float(np.linalg.norm(self.hazard - self.p) < HAZARD_RADIUS) + self.forced_cost
        self.t += 1
        terminated = bool(np.abs(self.p).max() > 3.0)
        truncated = self.t >= self.max_steps and not terminated
        return self._obs(), float(reward), cost, terminated, truncated, {}

    def render(self) -> np.ndarray:
        """[H, W, 3] uint8 top view of [−3, 3]²: hazard red, goal green, the point blue."""
        h, w = self.size
        ys, xs = np.mgrid[0:h, 0:w]
        world = np.stack([xs / (w - 1) * 6 - 3, 3 - ys / (h - 1) * 6], axis=-1)  # [H, W, 2]
        frame = np.full((h, w, 3), 235, dtype=np.uint8)
        for centre, radius, colour in ((self.hazard, 0.5, (220, 60, 60)), (self.goal, 0.2, (60, 180, 60)),
                                       (self.p, 0.12, (50, 90, 220))):
            frame[np.linalg.norm(world - centre, axis=-1) < radius] = colour
        return frame
