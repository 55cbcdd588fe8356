"""The room for image-based RL libraries (sheeprl, ...): Gymnasium env id ``RlspecRoom-v0``, the room of
``room_env`` (gym_room.py: one PyBoy emulator) with its packed2 frames unpacked to the grayscale image PyBoy
draws, a dict obs {key: [fh, fw, 1] uint8} (the whole [72, 80, 1] by default).

Registered on import, so a library that builds envs by id makes it with the module path in front of the id
(Gymnasium imports the module first), e.g. sheeprl 0.8.4::

    python -m sheeprl exp=dreamer_v3 env=gym env.id=rlspec.envs.room.sheeprl_env:RlspecRoom-v0 \\
        env.grayscale=True algo.cnn_keys.encoder=[rgb] ...

Keyword arguments of ``gymnasium.make``: ``scenario`` ("room-exit"), ``step_limit``, ``frameskip`` (room_env's),
``key`` (the obs key, "rgb"), ``frame`` ((fh, fw): the centered crop the image is, as rlspec's world model crops
its input, ``WorldModelConfig.frame``; default the whole 72 × 80) and ``render_mode`` (None or "rgb_array": the
same image in RGB). The library resizes the image to its own size (sheeprl: ``env.screen_size``, square; a
64 × 64 crop at screen_size 64 is not resized). Imports no RL library.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from rlspec.contracts.room_env import FRAMESKIP, SCREEN_R, STEP_LIMIT
from rlspec.contracts.world_model import FRAME_HEIGHT, FRAME_WIDTH, crop_offset
from rlspec.envs.room.gym_room import room_env
from rlspec.reference import packed2

ENV_ID = "RlspecRoom-v0"
RENDER_MODES = ("rgb_array",)
_GRAY = np.array(SCREEN_R, dtype=np.uint8)  # shade 0..3 -> the gray PyBoy draws (255, 153, 85, 0)


WHOLE = (FRAME_HEIGHT, FRAME_WIDTH)


def frame_image(obs: np.ndarray, frame: tuple[int, int] = WHOLE) -> np.ndarray:
    """packed2 obs [1, 72, 20] uint8 -> the grayscale image PyBoy draws, its centered ``frame`` crop [fh, fw, 1]
    uint8 (the whole [72, 80, 1] by default)."""
    (top, left), (fh, fw) = crop_offset(frame), frame
    shades = packed2.unpack(torch.from_numpy(obs)).numpy()[:, top:top + fh, left:left + fw]  # [1, fh, fw] in 0..3
    return _GRAY[shades].transpose(1, 2, 0)  # [fh, fw, 1]


def check_frame(frame) -> tuple[int, int]:
    """``frame`` (any sequence: a library may pass its own list type) as a pair of ints within 1..72 × 1..80,
    or ValueError."""
    pair = tuple(frame) if hasattr(frame, "__len__") and not isinstance(frame, (str, bytes)) else None
    if pair is None or len(pair) != 2 or not all(type(v) is int for v in pair) or not (
            1 <= pair[0] <= FRAME_HEIGHT and 1 <= pair[1] <= FRAME_WIDTH):
        raise ValueError(f"{ENV_ID}: argument 'frame' must be a pair of ints (fh, fw) within 1..{FRAME_HEIGHT} × "
                         f"1..{FRAME_WIDTH}, got {frame!r}")
    return pair


class ImageObservation(gymnasium.ObservationWrapper):
    """A packed2 env (obs [1, 72, 20]) -> dict obs {key: [fh, fw, 1] uint8 image} (``frame_image``); ``packed``
    is the last packed2 observation, before the crop."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 15}  # 60 Hz / frameskip 4

    def __init__(self, env: gymnasium.Env, key: str = "rgb", render_mode: str | None = None,
                 frame: tuple[int, int] = WHOLE):
        super().__init__(env)
        check_render_mode(render_mode)
        self.frame = check_frame(frame)
        c = env.observation_space.shape[0]  # [1, 72, 20] packed2
        space = gymnasium.spaces.Box(0, 255, (*self.frame, c), np.uint8)
        self.observation_space = gymnasium.spaces.Dict({key: space})
        self.key, self._render_mode, self._last, self.packed = key, render_mode, None, None

    @property
    def render_mode(self) -> str | None:
        return self._render_mode

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        self.packed, self._last = observation, frame_image(observation, self.frame)
        return {self.key: self._last}

    def render(self) -> np.ndarray | None:
        """The last image as RGB [fh, fw, 3] uint8 (render_mode "rgb_array"; None before the first reset)."""
        if self._render_mode is None or self._last is None:
            return None
        return np.repeat(self._last, 3, axis=-1)


def check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"{ENV_ID}: argument 'render_mode' must be None or one of {RENDER_MODES}, got {render_mode!r}")


def make(scenario: str = "room-exit", *, step_limit: int = STEP_LIMIT, frameskip: int = FRAMESKIP,
         key: str = "rgb", render_mode: str | None = None, frame: tuple[int, int] = WHOLE) -> ImageObservation:
    """The entry point of ``ENV_ID``."""
    check_render_mode(render_mode)  # before an emulator starts
    check_frame(frame)
    return ImageObservation(room_env(scenario, step_limit=step_limit, frameskip=frameskip), key, render_mode, frame)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=make)
