"""Frames of a Safety-Gymnasium task labelled from the env's true state: the data ``rlspec semantics fit``
trains on, rendered as PPOLagSem renders (rgb_array, size × size; MuJoCo, MUJOCO_GL=egl headless), a new layout
every ``EPISODE_STEPS`` steps. A frame is "hazard" when the agent is within ``NEAR`` of a hazard's edge (inside
counts), else "goal" within ``NEAR`` of the goal's edge, else "clear".

A uniformly random policy hardly moves a Point robot (300 random steps met no hazard), so the policy is scripted,
one mode per episode in turn (MODES): steer to the nearest hazard, steer to the goal, or act at random; steering
drives forward by the cosine of the bearing and turns by the bearing, with Gaussian noise (σ ``NOISE``)."""

from __future__ import annotations

import numpy as np

NEAR = 0.3  # metres from a hazard's or the goal's edge
EPISODE_STEPS = 100  # steps before a new layout (reset with the next seed)
MODES = ("hazard", "goal", "random")  # the scripted policy's mode of episode k: MODES[k % 3]
NOISE = 0.3


def label_of(agent_xy: np.ndarray, hazards_xy: np.ndarray, hazard_size: float, goal_xy: np.ndarray,
             goal_size: float) -> str:
    """"hazard", "goal" or "clear" by the nearest-edge rule (module docstring); positions in metres [2]."""
    if len(hazards_xy) and np.min(np.linalg.norm(hazards_xy - agent_xy, axis=1)) - hazard_size < NEAR:
        return "hazard"
    return "goal" if np.linalg.norm(goal_xy - agent_xy) - goal_size < NEAR else "clear"


def steer(heading_xy: np.ndarray, agent_xy: np.ndarray, target_xy: np.ndarray) -> np.ndarray:
    """[forward, turn] in [-1, 1]² toward target: forward = max(cos β, 0), turn = clip(2β/π, -1, 1), β the
    bearing of the target from the heading (counter-clockwise positive)."""
    v = target_xy - agent_xy
    bearing = np.arctan2(heading_xy[0] * v[1] - heading_xy[1] * v[0], heading_xy @ v)
    return np.array([max(np.cos(bearing), 0.0), np.clip(2 * bearing / np.pi, -1.0, 1.0)])


def safety_frames(env_id: str, n: int, size: int, seed: int) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """(frames uint8 [n, size, size, 3], their labels, the env's cost of each step [n], the episode of each
    frame [n]: a counter raised at every reset, so one episode is one layout) from the scripted policy in
    ``env_id`` (a step with cost > 0 is inside a hazard: its label must be "hazard")."""
    from rlspec.envs import safety_gym

    env = safety_gym.make_env(env_id, render_mode="rgb_array", width=size, height=size)
    rng = np.random.default_rng(seed)
    frames, labels, costs = np.empty((n, size, size, 3), np.uint8), [], np.empty(n)
    episodes, episode = np.empty(n, np.int64), -1
    low, high = env.action_space.low, env.action_space.high
    for i in range(n):
        if i % EPISODE_STEPS == 0:
            env.reset(seed=seed + i // EPISODE_STEPS)
            episode += 1
        task = env.unwrapped.task
        agent, hazards, goal = task.agent.pos[:2], np.array([h[:2] for h in task.hazards.pos]), task.goal.pos[:2]
        mode = MODES[i // EPISODE_STEPS % len(MODES)]
        if mode == "random":
            action = rng.uniform(low, high)
        else:
            target = hazards[np.argmin(np.linalg.norm(hazards - agent, axis=1))] if mode == "hazard" else goal
            action = np.clip(steer(task.agent.mat[:2, 0], agent, target) + rng.normal(0, NOISE, 2), low, high)
        _, _, costs[i], terminated, truncated, _ = env.step(action)
        frames[i], episodes[i] = env.render(), episode
        labels.append(label_of(task.agent.pos[:2], hazards, task.hazards.size, np.asarray(task.goal.pos[:2]),
                               task.goal.size))
        if terminated or truncated:
            env.reset(seed=seed + 10_000 + i)
            episode += 1
    env.close()
    return frames, labels, costs, episodes
