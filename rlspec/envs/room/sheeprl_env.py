"""The room for image-based RL libraries (sheeprl, ...): Gymnasium env id ``RlspecRoom-v0``, the room of
``room_env`` (gym_room.py: one PyBoy emulator) with its packed2 frames unpacked to the grayscale image PyBoy
draws, a dict obs {key: [72, 80, 1] uint8}.

Registered on import, so a library that builds envs by id makes it with the module path in front of the id
(Gymnasium imports the module first), e.g. sheeprl 0.8.4::

    python -m sheeprl exp=dreamer_v3 env=gym env.id=rlspec.envs.room.sheeprl_env:RlspecRoom-v0 \\
        env.grayscale=True algo.cnn_keys.encoder=[rgb] ...

Keyword arguments of ``gymnasium.make``: ``scenario`` ("room-exit"), ``step_limit``, ``frameskip`` (room_env's),
``key`` (the obs key, "rgb") and ``render_mode`` (None or "rgb_array": the same frame in RGB). The library
resizes the frame to its own size (sheeprl: ``env.screen_size``, square). Imports no RL library.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from rlspec.contracts.room_env import FRAMESKIP, SCREEN_R, STEP_LIMIT
from rlspec.envs.room.gym_room import room_env
from rlspec.reference import packed2

ENV_ID = "RlspecRoom-v0"
RENDER_MODES = ("rgb_array",)
_GRAY = np.array(SCREEN_R, dtype=np.uint8)  # shade 0..3 -> the gray PyBoy draws (255, 153, 85, 0)


def frame_image(obs: np.ndarray) -> np.ndarray:
    """packed2 obs [1, 72, 20] uint8 -> the grayscale image [72, 80, 1] uint8 PyBoy draws."""
    shades = packed2.unpack(torch.from_numpy(obs)).numpy()  # [1, 72, 80] in 0..3
    return _GRAY[shades].transpose(1, 2, 0)  # [72, 80, 1]


class ImageObservation(gymnasium.ObservationWrapper):
    """A packed2 env (obs [1, 72, 20]) -> dict obs {key: [72, 80, 1] uint8 image} (``frame_image``)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 15}  # 60 Hz / frameskip 4

    def __init__(self, env: gymnasium.Env, key: str = "rgb", render_mode: str | None = None):
        super().__init__(env)
        check_render_mode(render_mode)
        c, h, w = env.observation_space.shape  # [1, 72, 20] packed2
        space = gymnasium.spaces.Box(0, 255, (h, w * packed2.PIXELS_PER_BYTE, c), np.uint8)
        self.observation_space = gymnasium.spaces.Dict({key: space})
        self.key, self._render_mode, self._last = key, render_mode, None

    @property
    def render_mode(self) -> str | None:
        return self._render_mode

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        self._last = frame_image(observation)
        return {self.key: self._last}

    def render(self) -> np.ndarray | None:
        """The last frame as RGB [72, 80, 3] uint8 (render_mode "rgb_array"; None before the first reset)."""
        if self._render_mode is None or self._last is None:
            return None
        return np.repeat(self._last, 3, axis=-1)


def check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"{ENV_ID}: argument 'render_mode' must be None or one of {RENDER_MODES}, got {render_mode!r}")


def make(scenario: str = "room-exit", *, step_limit: int = STEP_LIMIT, frameskip: int = FRAMESKIP,
         key: str = "rgb", render_mode: str | None = None) -> ImageObservation:
    """The entry point of ``ENV_ID``."""
    check_render_mode(render_mode)  # before an emulator starts
    return ImageObservation(room_env(scenario, step_limit=step_limit, frameskip=frameskip), key, render_mode)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=make)
