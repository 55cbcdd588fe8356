"""Inputs shared by the semantic tests (fixtures are in conftest.py)."""

from __future__ import annotations

import numpy as np
import torch

from rlspec.semantics.config import SemanticConfig

SAFE = ("a robot on a clear open floor", "a robot driving towards a green goal")
UNSAFE = ("a robot inside a red warning circle", "a robot touching a hazard")


def config(model_dir, **overrides) -> SemanticConfig:
    """An enabled float32 CPU configuration on a tiny model."""
    base = dict(enable=True, model_name=str(model_dir), model_device="cpu", dtype_preference=("float32",),
                safe_prompts=SAFE, unsafe_prompts=UNSAFE)
    return SemanticConfig(**{**base, **overrides})


def frames(n: int, seed: int = 0, size: int = 40) -> np.ndarray:
    """n random uint8 RGB frames [n, size, size, 3]."""
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def disk(radius: float, size: int = 32) -> np.ndarray:
    """A red disk of the given radius centred on a gray floor, uint8 [size, size, 3]."""
    yy, xx = np.mgrid[:size, :size]
    image = np.full((size, size, 3), 200, np.uint8)
    image[(yy - size / 2) ** 2 + (xx - size / 2) ** 2 <= radius**2] = (220, 30, 30)
    return image


def zeros(n: int) -> torch.Tensor:
    return torch.zeros(n)
