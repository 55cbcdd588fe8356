"""Episode videos of ``rlspec eval RUN --video``, shared by the engines: a list of RGB or
grayscale frames written as an MP4 through imageio (needs ``imageio`` and ``imageio-ffmpeg``: the semantic
and safety extras)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_mp4(path: Path, frames: list[np.ndarray], fps: int = 30) -> Path:
    """``frames``: [H, W, 3] or [H, W] uint8 arrays of one size; written to ``path`` (its folder made)."""
    try:
        import imageio.v2 as imageio
    except ImportError as err:
        raise RuntimeError("rlspec eval --video needs imageio and imageio-ffmpeg (pip install "
                           "'rlspec[semantic]')") from err
    if not frames:
        raise ValueError("write_mp4: argument 'frames' is empty, expected at least one frame")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(path, frames, fps=fps, macro_block_size=1)
    return path
