"""A room vector env that can be checkpointed by *replay* (as rlspec/envs/safe_vector.py): ``state_dict()``
records, per env, the episode index and the actions taken since its reset; ``load_state_dict()`` resets
each emulator with that episode's seed and replays the actions. The room's frames, rewards and flags are
a function of the episode seed and the actions since the reset (contract room_env: the Warp twin, which
has no other state, agrees with the ROM bit for bit), so a restored env continues exactly as the original.
The same holds for a user's game whose every episode starts from one save state (PyBoy is deterministic).
"""

from __future__ import annotations

import numpy as np
import torch

from rlspec.contracts.room_env import Step, episode_seed
from rlspec.envs.pyboy_env import pack_frames
from rlspec.envs.room import pyboy_room


class RecordedRoom:
    def __init__(self, num_envs: int, scenario: str, *, step_limit: int, seed: int, frameskip: int, make_game=None):
        """``make_game``: pyboy_room.RoomVecEnv's (another game than the room, e.g. a user's ROM and plug-in)."""
        self.env = pyboy_room.RoomVecEnv(num_envs, scenario, step_limit=step_limit, seed=seed, frameskip=frameskip,
                                         make_game=make_game)
        self.num_envs = num_envs
        self.actions: list[list[int]] = [[] for _ in range(num_envs)]  # per env, since its episode's reset

    def reset(self) -> Step:
        self.actions = [[] for _ in range(self.num_envs)]
        return self.env.reset()

    def step(self, actions: torch.Tensor, final_out: torch.Tensor | None = None) -> Step:
        """actions [N] int64 -> Step (same-step auto-reset, rlspec/envs/room/pyboy_room.py); ``final_out``
        [N, 1, 72, 20] receives the frames before any reset."""
        out = self.env.step(actions, final_out=final_out)
        for i, (a, ended) in enumerate(zip(actions.tolist(), (out.terminated | out.truncated).tolist())):
            self.actions[i] = [] if ended else self.actions[i] + [a]
        return out

    @property
    def frames(self) -> torch.Tensor:
        """[N, 1, 72, 20] the current observations."""
        return self.env.frames

    def state_dict(self) -> dict:
        return {"seed": self.env.seed, "episode": list(self.env.episode), "actions": [list(a) for a in self.actions]}

    def load_state_dict(self, sd: dict) -> None:
        env = self.env
        if sd["seed"] != env.seed or len(sd["episode"]) != self.num_envs:
            raise ValueError(f"RecordedRoom.load_state_dict: the state is of {len(sd['episode'])} envs with seed "
                             f"{sd['seed']}, expected {self.num_envs} envs with seed {env.seed}")
        env.reset()
        for i, game in enumerate(env.games):
            game.reset(episode_seed(env.seed, i, sd["episode"][i]))
            for a in sd["actions"][i]:
                game.step(a)
        env.episode, env.steps = list(sd["episode"]), [len(a) for a in sd["actions"]]
        env.frames = pack_frames(np.stack([game.shades() for game in env.games]))  # [N, 1, 72, 20]
        self.actions = [list(a) for a in sd["actions"]]

    def close(self) -> None:
        self.env.close()
