"""A synchronous vector of safe-RL environments for the reference engine: one process, deterministic,
checkpointable.

Each wrapped env follows Safety-Gymnasium's API: ``reset(seed=) -> (obs, info)``,
``step(action) -> (obs, reward, cost, terminated, truncated, info)``. The vector:

* seeds every episode explicitly: episode k of env i is reset with a seed drawn from
  SeedSequence([seed, i, k]), so a run never depends on an env's internal RNG carrying over;
* auto-resets an env whose episode ended and returns the real final observation beside the new one
  (``final_obs``), which the truncation bootstrap needs (PPO review CRITICAL-2);
* clips actions to the action space (the sampled, unclipped action is what the policy is trained on);
* tracks episode return, cost and length (finished episodes are reported in step, then env order);
* renders on request (``step(actions, render=True)``): each env's rgb_array frame of s'_t, taken right
  after its step and before an autoreset, as PPOLagSem's semantic captures need them (envs made with
  render_mode="rgb_array"; ToyGoal-v0 draws a small top view);
* checkpoints by *replay*: ``state_dict()`` records, per env, the episode index and the actions taken since
  its reset; ``load_state_dict()`` resets with the same seed and replays them. For a deterministic simulator
  (MuJoCo on one thread, the toy env) the restored env is bit-identical, which is what makes a resumed run
  identical to a straight one. Replay costs at most one episode of steps per env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from rlspec.envs.oracle import oracle_margin


@dataclass
class VectorStep:
    obs: torch.Tensor  # [N, D] float32: next observation (the new episode's first one where done)
    reward: torch.Tensor  # [N] float32
    cost: torch.Tensor  # [N] float32
    terminated: torch.Tensor  # [N] bool
    truncated: torch.Tensor  # [N] bool
    final_obs: torch.Tensor  # [N, D] float32: s'_t, the real last observation where the episode ended
    frames: np.ndarray | None = None  # [N, H, W, 3] uint8 of s'_t (before any autoreset), if asked for
    margins: torch.Tensor | None = None  # [N] float32 oracle margins of s'_t (before any autoreset), if asked for


def episode_seed(seed: int, env_index: int, episode: int) -> int:
    return int(np.random.SeedSequence([seed, env_index, episode]).generate_state(1)[0])


class SafeVectorEnv:
    def __init__(self, make_env: Callable[[], object], num_envs: int, seed: int, first_index: int = 0):
        """``first_index``: the global index of this vector's first env (a slice of a larger vector, in a
        worker process or on one rank of several, draws the same episodes as the whole vector would)."""
        if num_envs < 1:
            raise ValueError(f"SafeVectorEnv: argument 'num_envs' must be >= 1, got {num_envs}")
        self.envs = [make_env() for _ in range(num_envs)]
        self.num_envs, self.seed, self.first_index = num_envs, seed, first_index
        space = self.envs[0].action_space
        self.act_low = np.asarray(space.low, dtype=np.float64)
        self.act_high = np.asarray(space.high, dtype=np.float64)
        self.act_dim = int(np.prod(space.shape))
        self.obs_dim = int(np.prod(self.envs[0].observation_space.shape))
        self.episode = [0] * num_envs
        self.actions: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
        self.ep_ret, self.ep_cost, self.ep_len = (np.zeros(num_envs) for _ in range(3))
        self.finished: list[tuple[float, float, int, int, int]] = []  # since the last pop, in order
        self.t = 0  # vectorized steps taken
        self._obs: torch.Tensor | None = None
        self._pending: tuple[torch.Tensor, bool, bool] | None = None  # step_async's (actions, render, margins)

    def _reset_env(self, i: int) -> np.ndarray:
        obs, _ = self.envs[i].reset(seed=episode_seed(self.seed, self.first_index + i, self.episode[i]))
        self.actions[i] = []
        self.ep_ret[i] = self.ep_cost[i] = self.ep_len[i] = 0.0
        return np.asarray(obs, dtype=np.float32).reshape(-1)

    def reset(self) -> torch.Tensor:
        """First observations [N, D] (episode 0 of every env)."""
        self._obs = torch.as_tensor(np.stack([self._reset_env(i) for i in range(self.num_envs)]))
        return self._obs

    @property
    def obs(self) -> torch.Tensor:
        """The current observations [N, D] (after reset, step or load_state_dict)."""
        if self._obs is None:
            raise RuntimeError("SafeVectorEnv: call reset() or load_state_dict() first")
        return self._obs

    def _step_env(self, i: int, action: np.ndarray):
        obs, reward, cost, terminated, truncated, _ = self.envs[i].step(action)
        self.actions[i].append(action)
        self.ep_ret[i] += reward
        self.ep_cost[i] += cost
        self.ep_len[i] += 1
        obs = np.asarray(obs, dtype=np.float32).reshape(-1)
        return obs, float(reward), float(cost), bool(terminated), bool(truncated)

    def step(self, actions: torch.Tensor, render: bool = False, margins: bool = False) -> VectorStep:
        """actions [N, A] (clipped to the action space here) -> one step of every env, with autoreset;
        ``render``: also each env's frame of s'_t (``VectorStep.frames``); ``margins``: each env's true margin
        of s'_t (rlspec/envs/oracle.py, ``VectorStep.margins``)."""
        acts = np.clip(actions.detach().double().numpy(), self.act_low, self.act_high)  # [N, A]
        out = [self._step_env(i, acts[i]) for i in range(self.num_envs)]
        frames = np.stack([np.asarray(env.render(), dtype=np.uint8) for env in self.envs]) if render else None
        truth = torch.tensor([oracle_margin(env) for env in self.envs], dtype=torch.float32) if margins else None
        final = np.stack([o[0] for o in out])  # [N, D]
        nxt = final.copy()
        for i, (_, _, _, term, trunc) in enumerate(out):
            if term or trunc:
                self.finished.append((float(self.ep_ret[i]), float(self.ep_cost[i]), int(self.ep_len[i]), self.t,
                                      self.first_index + i))
                self.episode[i] += 1
                nxt[i] = self._reset_env(i)
        self.t += 1
        self._obs = torch.as_tensor(nxt)
        col = lambda k, dtype: torch.tensor([o[k] for o in out], dtype=dtype)  # noqa: E731
        return VectorStep(obs=self._obs, reward=col(1, torch.float32), cost=col(2, torch.float32),
                          terminated=col(3, torch.bool), truncated=col(4, torch.bool),
                          final_obs=torch.as_tensor(final), frames=frames, margins=truth)

    def step_async(self, actions: torch.Tensor, render: bool = False, margins: bool = False) -> None:
        """The first half of ``step`` (the split interface of SubprocSafeVectorEnv, whose workers step while
        the caller works): here the step itself runs in ``step_wait``."""
        self._pending = (actions, render, margins)

    def step_wait(self) -> VectorStep:
        """The step that ``step_async`` started."""
        if self._pending is None:
            raise RuntimeError("SafeVectorEnv.step_wait: no step started (call step_async first)")
        (actions, render, margins), self._pending = self._pending, None
        return self.step(actions, render, margins)

    def pop_finished(self) -> list[tuple[float, float, int, int, int]]:
        """Episodes finished since the last call: (return, cost, length, vectorized step, global env index)."""
        done, self.finished = self.finished, []
        return done

    def state_dict(self) -> dict:
        return {"seed": self.seed, "first_index": self.first_index, "episode": list(self.episode),
                "actions": [np.array(a, dtype=np.float64).reshape(len(a), self.act_dim) for a in self.actions],
                "finished": list(self.finished), "t": self.t}

    def load_state_dict(self, state: dict) -> None:
        """Reset every env to its recorded episode and replay its actions (bit-identical for deterministic envs)."""
        if (state["seed"], state.get("first_index", 0), len(state["episode"])) != (self.seed, self.first_index,
                                                                                 self.num_envs):
            raise ValueError(f"SafeVectorEnv.load_state_dict: state is for seed {state['seed']}, envs from "
                             f"{state.get('first_index', 0)}, {len(state['episode'])} envs; this vector has seed "
                             f"{self.seed}, envs from {self.first_index}, {self.num_envs} envs")
        self.episode = list(state["episode"])
        obs = []
        for i, actions in enumerate(state["actions"]):
            o = self._reset_env(i)
            for a in actions:
                o = self._step_env(i, a)[0]
            obs.append(o)
        self.finished, self.t = list(state["finished"]), state["t"]
        self._obs = torch.as_tensor(np.stack(obs))

    def close(self) -> None:
        for env in self.envs:
            getattr(env, "close", lambda: None)()
