"""Triton ``packed2`` (spec/packed2.py): unpack and unpack_normalized as one kernel (Dreamer plan M4/M6,
``unpack_impl = "triton"``); ``pack`` is fast/packed2.py's.

Each program reads BLOCK bytes and writes their [BLOCK, 4] pixels: code (b >> 2k) & 3 for k = 0..3
(least-significant pair first), then ``levels[code]`` from a 4-entry table, loaded once per program and
selected per pixel in registers (a gather read the table from memory once per pixel). The table and the output
are integers of the output's width (fast/packed2.py ``level_bits``): the codes 0..3 for unpack, the bit
patterns of L_dtype = v/3 for unpack_normalized. The kernel therefore never does floating arithmetic,
agrees bit for bit with every backend by construction, and supports bfloat16 even under the Triton
interpreter (which cannot compute in bfloat16). Without CUDA it runs interpreted on CPU tensors.

Roofline: n packed bytes in, 4n pixels of the output's width out (uint8: 5n bytes moved; float32: 17n), so
the stores are the traffic. The first GPU run reached 0.39 (uint8) and 0.62 (bfloat16) of the copy
bandwidth but 0.76 for float32, whose pixels already left in 128-bit stores; uint8 left in 32-bit stores,
one per byte. The pixels are now stored as one run, so where n is a multiple of 16 (a frame's 1024 bytes
are) every width leaves in 128-bit stores; the compile gate checks this in the sm_90 PTX.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlspec.contracts.packed2 import (
    unpacked_shape,
    validate_normalized_args,
    validate_unpack_args,
)
from rlspec.fast.packed2 import NORMALIZED_DTYPES, level_bits, pack
from rlspec.fast.triton_mode import BACKEND_NOTE, DEVICE

__all__ = ["BACKEND_NOTE", "DEVICE", "NORMALIZED_DTYPES", "pack", "unpack", "unpack_normalized"]

BLOCK = 1024  # bytes per program -> 4096 outputs


@triton.jit
def _unpack_kernel(packed_ptr, levels_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK] byte index
    mask = offs < n
    b = tl.load(packed_ptr + offs, mask=mask, other=0).to(tl.int32)  # [BLOCK]
    k = tl.arange(0, 4)  # [4] pixel slot within the byte (spec/packed2.py PIXELS_PER_BYTE)
    codes = (b[:, None] >> (2 * k[None, :])) & 3  # [BLOCK, 4]
    l0, l1 = tl.load(levels_ptr), tl.load(levels_ptr + 1)  # the 4-entry table, once, in registers
    l2, l3 = tl.load(levels_ptr + 2), tl.load(levels_ptr + 3)
    vals = tl.where(codes < 2, tl.where(codes == 0, l0, l1), tl.where(codes == 2, l2, l3))  # [BLOCK, 4]
    # stored as one run of 4·BLOCK pixels, not as BLOCK rows of 4: a thread's pixels then leave in 128-bit
    # stores where n is a multiple of 16 (a frame's bytes are), not in one 4-pixel store per byte
    pixels = tl.program_id(0).to(tl.int64) * (4 * BLOCK) + tl.arange(0, 4 * BLOCK)  # [4·BLOCK]
    tl.store(out_ptr + pixels, tl.reshape(vals, (4 * BLOCK,)), mask=pixels < 4 * n)


def _unpack_into(packed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    levels = level_bits(dtype, packed.device)  # [4] integers of dtype's width
    src = packed.contiguous()  # [..., W/4]
    out = torch.empty(unpacked_shape(packed), dtype=levels.dtype, device=packed.device)  # [..., W]
    n = src.numel()
    if n:
        _unpack_kernel[(triton.cdiv(n, BLOCK),)](src, levels, out, n, BLOCK=BLOCK)
    return out.view(dtype)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """packed [..., W/4] uint8 -> [..., W] uint8."""
    validate_unpack_args("unpack", packed)
    return _unpack_into(packed, torch.uint8)


def unpack_normalized(packed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """packed [..., W/4] uint8 -> L_dtype[unpack(packed)] [..., W], fused in one pass."""
    validate_normalized_args(packed, dtype, NORMALIZED_DTYPES)
    return _unpack_into(packed, dtype)
