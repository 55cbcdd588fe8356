"""The room as Gymnasium envs: ``room_env(...)`` (one emulator, rlspec/envs/room/pyboy_room.py) and
``RoomVectorEnv`` (a ``gymnasium.vector.VectorEnv`` over either backend: "pyboy", the ROM, or "warp", the
twin on any device), with NumPy observations packed2 ``[N, 1, 72, 20]`` uint8.

The vector env resets in the same step (``AutoresetMode.SAME_STEP``): the obs of an env whose episode ended
is the next episode's first, and ``infos["final_obs"][i]`` is the frame it ended on (as Gymnasium's own
vector envs do). ``infos`` also carries ``success``, ``episode_id`` and ``is_first`` for every env.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from rlspec.contracts.room_env import FRAMESKIP, MASK32, NUM_ACTIONS, OBS_SHAPE, STEP_LIMIT
from rlspec.contracts.validate import require_int
from rlspec.envs.pyboy_env import PyBoyEnv
from rlspec.envs.room.pyboy_room import ROM, RoomTask

BACKENDS = ("pyboy", "warp")


def room_env(scenario: str = "room-exit", *, step_limit: int = STEP_LIMIT, frameskip: int = FRAMESKIP) -> PyBoyEnv:
    """The room as a Gymnasium env (one emulator): obs packed2 [1, 72, 20], 5 d-pad actions."""
    return PyBoyEnv(ROM, RoomTask(scenario), frameskip=frameskip, step_limit=step_limit)


def vec_env(backend: str, num_envs: int, scenario: str = "room-exit", **kwargs):
    """The contract's vector env (torch tensors) of ``backend``: "pyboy" (the ROM) or "warp" (the twin)."""
    if backend == "pyboy":
        from rlspec.envs.room.pyboy_room import RoomVecEnv
    elif backend == "warp":
        from rlspec.envs.room.warp_room import RoomVecEnv
    else:
        raise ValueError(f"vec_env: argument 'backend' must be one of {BACKENDS}, got {backend!r}")
    return RoomVecEnv(num_envs, scenario, **kwargs)


class RoomVectorEnv(VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, scenario: str = "room-exit", *, backend: str = "pyboy",
                 step_limit: int = STEP_LIMIT, seed: int = 0, **backend_kwargs):
        self.env = vec_env(backend, num_envs, scenario, step_limit=step_limit, seed=seed, **backend_kwargs)
        self.num_envs, self.backend = num_envs, backend
        self.single_observation_space = gymnasium.spaces.Box(0, 255, OBS_SHAPE, np.uint8)
        self.single_action_space = gymnasium.spaces.Discrete(NUM_ACTIONS)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, num_envs)
        self._final = torch.empty(num_envs, *OBS_SHAPE, dtype=torch.uint8, device=self.env.device)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            require_int("RoomVectorEnv.reset", "seed", seed, 0)
            if seed > MASK32:
                raise ValueError(f"RoomVectorEnv.reset: argument 'seed' must be in [0, 2**32 - 1], got {seed}")
            self.env.seed = seed
        step = self.env.reset()
        return step.obs.cpu().numpy().copy(), self._infos(step)

    def step(self, actions):
        actions = np.asarray(actions)
        if actions.dtype.kind not in "iu":
            raise TypeError(f"RoomVectorEnv.step: argument 'actions' must hold integers, got dtype {actions.dtype}")
        step = self.env.step(torch.as_tensor(actions, dtype=torch.int64, device=self.env.device),
                             final_out=self._final)
        infos = self._infos(step)
        ended = (step.terminated | step.truncated).cpu().numpy()
        if ended.any():
            final = np.full(self.num_envs, None, dtype=object)
            frames = self._final.cpu().numpy()
            for i in np.flatnonzero(ended):
                final[i] = frames[i].copy()
            infos.update(final_obs=final, _final_obs=ended)
        return (step.obs.cpu().numpy().copy(), step.reward.cpu().numpy().copy(), step.terminated.cpu().numpy().copy(),
                step.truncated.cpu().numpy().copy(), infos)

    def close_extras(self, **kwargs):
        self.env.close()

    @staticmethod
    def _infos(step) -> dict:
        return {"success": step.success.cpu().numpy().copy(), "episode_id": step.episode_id.cpu().numpy().copy(),
                "is_first": step.is_first.cpu().numpy().copy()}
