"""Warp ``packed2`` (spec/packed2.py): unpack and unpack_normalized as one Warp kernel (Dreamer plan M6,
``unpack_impl = "warp"``: the same toolchain as the emulator that writes the frames); ``pack`` is
fast/packed2.py's.

One thread per byte writes its 4 pixels, ``levels[(b >> 2k) & 3]`` for k = 0..3 (least-significant pair
first), from a 4-entry table of integers of the output's width (fast/packed2.py ``level_bits``): codes
0..3 for unpack, the bit patterns of L_dtype = v/3 for unpack_normalized. No floating arithmetic, so the
result is bit-identical to every backend; the kernel is generic over the integer width (Warp builds one
overload per width on first use). It runs wherever the tensor lives: device="cpu" (single-threaded) in
the CPU gate, CUDA in the gpu gate, on the current torch stream.
"""

from __future__ import annotations

from typing import Any

import torch
import warp as wp

from rlspec.contracts.packed2 import (
    unpacked_shape,
    validate_normalized_args,
    validate_unpack_args,
)
from rlspec.fast.packed2 import NORMALIZED_DTYPES, level_bits, pack

__all__ = ["NORMALIZED_DTYPES", "pack", "unpack", "unpack_normalized"]

wp.config.log_level = wp.LOG_WARNING  # no banner or module-load lines on stdout: a command's stdout is its result
wp.init()
wp.set_module_options({"enable_backward": False})  # forward-only kernels: no adjoint code to compile

BACKEND_NOTE = "cuda" if wp.is_cuda_available() else "cpu"
DEVICE = BACKEND_NOTE  # where the conformance runner sends its tensors (the kernel runs on the tensors' device)


@wp.kernel
def _unpack_kernel(packed: wp.array(dtype=wp.uint8), levels: wp.array(dtype=Any),
                   out: wp.array(dtype=Any)):
    i = wp.tid()  # byte index
    b = wp.int32(packed[i])
    for k in range(4):  # pixel slot within the byte (spec/packed2.py PIXELS_PER_BYTE)
        out[i * 4 + k] = levels[(b >> (2 * k)) & 3]


def _unpack_into(packed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    levels = level_bits(dtype, packed.device)  # [4] integers of dtype's width
    src = packed.contiguous().reshape(-1)  # [n bytes]
    out = torch.empty(unpacked_shape(packed), dtype=levels.dtype, device=packed.device)  # [..., W]
    if src.numel():
        device = wp.device_from_torch(packed.device)
        stream = wp.stream_from_torch(torch.cuda.current_stream(packed.device)) if device.is_cuda else None
        wp.launch(_unpack_kernel, dim=src.numel(),
                  inputs=[wp.from_torch(src), wp.from_torch(levels), wp.from_torch(out.reshape(-1))],
                  device=device, stream=stream)
    return out.view(dtype)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """packed [..., W/4] uint8 -> [..., W] uint8."""
    validate_unpack_args("unpack", packed)
    return _unpack_into(packed, torch.uint8)


def unpack_normalized(packed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """packed [..., W/4] uint8 -> L_dtype[unpack(packed)] [..., W], fused in one pass."""
    validate_normalized_args(packed, dtype, NORMALIZED_DTYPES)
    return _unpack_into(packed, dtype)
