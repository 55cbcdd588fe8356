"""Runtime half of contract ``packed2`` (the formula, clauses and properties: spec/packed2.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rlspec.contracts.validate import require_none

PIXELS_PER_BYTE = 4


SHIFTS = (0, 2, 4, 6)  # bit offset of pixel j mod 4 within its byte, least-significant first


FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


FRAME_SHAPE = (1, 72, 20)  # the replay ring's packed observation [C, H, W/4] (Dreamer plan §2.3, M1)


def levels(dtype: torch.dtype) -> torch.Tensor:
    """L_dtype [4] on CPU: v/3 for v = 0..3, computed in float64 and rounded once to ``dtype``."""
    return (torch.arange(PIXELS_PER_BYTE, dtype=torch.float64) / 3).to(dtype)


def require_uint8(fn: str, name: str, t: Any) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}' must be a torch.Tensor of dtype torch.uint8, "
                        f"got {type(t).__name__}")
    if t.dtype != torch.uint8:
        raise TypeError(f"{fn}: argument '{name}' must have dtype torch.uint8, got {t.dtype}")
    if t.dim() == 0:
        raise ValueError(f"{fn}: argument '{name}' must have at least 1 dimension (the pixel row), "
                         "got a 0-d tensor")


def validate_pack_args(values: torch.Tensor) -> None:
    require_uint8("pack", "values", values)
    width = values.shape[-1]
    if width % PIXELS_PER_BYTE:
        raise ValueError(f"pack: argument 'values' has last dimension {width} (shape {tuple(values.shape)}), "
                         f"expected a multiple of 4 ({PIXELS_PER_BYTE} pixels per byte)")
    require_none("pack", "values", values, values > 3, "values > 3", "values in 0..3 (2 bits per pixel)")


def validate_unpack_args(fn: str, packed: torch.Tensor) -> None:
    require_uint8(fn, "packed", packed)


def validate_normalized_args(packed: torch.Tensor, dtype: torch.dtype,
                             supported: Sequence[torch.dtype]) -> None:
    validate_unpack_args("unpack_normalized", packed)
    if dtype not in supported:
        names = ", ".join(str(d) for d in supported)
        raise TypeError(f"unpack_normalized: argument 'dtype' must be one of ({names}), got {dtype}")


def unpacked_shape(packed: torch.Tensor) -> tuple[int, ...]:
    return (*packed.shape[:-1], packed.shape[-1] * PIXELS_PER_BYTE)
