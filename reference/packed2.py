"""Reference ``packed2`` (spec/packed2.py): the bit formulas written out, one pixel slot at a time.

    byte_i = v_{4i} | v_{4i+1} << 2 | v_{4i+2} << 4 | v_{4i+3} << 6        v_{4i+k} = (byte_i >> 2k) & 3

unpack_normalized maps v to v/3 computed in float64 and rounded once to the requested dtype.
"""

from __future__ import annotations

import torch

from rlspec.contracts.packed2 import (
    FLOAT_DTYPES,
    PIXELS_PER_BYTE,
    SHIFTS,
    unpacked_shape,
    validate_normalized_args,
    validate_pack_args,
    validate_unpack_args,
)

NORMALIZED_DTYPES = FLOAT_DTYPES


def pack(values: torch.Tensor) -> torch.Tensor:
    """values [..., W] uint8 in 0..3 -> packed [..., W/4] uint8."""
    validate_pack_args(values)
    packed = torch.zeros(*values.shape[:-1], values.shape[-1] // PIXELS_PER_BYTE, dtype=torch.uint8,
                         device=values.device)  # [..., W/4]
    for k, shift in enumerate(SHIFTS):
        packed |= values[..., k::PIXELS_PER_BYTE] << shift  # pixel 4i+k -> bits shift, shift+1
    return packed


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """packed [..., W/4] uint8 -> values [..., W] uint8."""
    validate_unpack_args("unpack", packed)
    values = torch.empty(unpacked_shape(packed), dtype=torch.uint8, device=packed.device)  # [..., W]
    for k, shift in enumerate(SHIFTS):
        values[..., k::PIXELS_PER_BYTE] = (packed >> shift) & 3  # bits shift, shift+1 -> pixel 4i+k
    return values


def unpack_normalized(packed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """packed [..., W/4] uint8 -> v/3 [..., W] in ``dtype`` (one rounding, from float64)."""
    validate_normalized_args(packed, dtype, NORMALIZED_DTYPES)
    return (unpack(packed).double() / 3).to(dtype)
