"""Planted bugs for ``packed2``: the reference with exactly one bug each, the way a packer or an unpack
kernel typically gets it wrong (bit order, normalization, a bfloat16 conversion, strides, validation).

Each entry names the clause that must catch it; ``spared`` clauses must still pass, which shows that
the catching clause is the one that sees the bug (the MSB-first order passes both round trips).
"""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.contracts.packed2 import (
    PIXELS_PER_BYTE,
    require_uint8,
    unpacked_shape,
    validate_normalized_args,
    validate_pack_args,
    validate_unpack_args,
)
from rlspec.reference import packed2 as ref

MSB_SHIFTS = (6, 4, 2, 0)  # pixel 4i+k at bits 6-2k: the first pixel in the most significant pair


def _impl(**overrides) -> types.SimpleNamespace:
    base = dict(pack=ref.pack, unpack=ref.unpack, unpack_normalized=ref.unpack_normalized,
                NORMALIZED_DTYPES=ref.NORMALIZED_DTYPES)
    return types.SimpleNamespace(**{**base, **overrides})


# ------------------------------------------------------------------------------------------ layout
def _pack_msb(values):
    validate_pack_args(values)
    packed = torch.zeros(*values.shape[:-1], values.shape[-1] // PIXELS_PER_BYTE, dtype=torch.uint8)
    for k, shift in enumerate(MSB_SHIFTS):
        packed |= values[..., k::PIXELS_PER_BYTE] << shift
    return packed


def _unpack_msb(packed):
    validate_unpack_args("unpack", packed)
    values = torch.empty(unpacked_shape(packed), dtype=torch.uint8)
    for k, shift in enumerate(MSB_SHIFTS):
        values[..., k::PIXELS_PER_BYTE] = (packed >> shift) & 3
    return values


def _unpack_msb_normalized(packed, dtype=torch.float32):
    validate_normalized_args(packed, dtype, ref.NORMALIZED_DTYPES)
    return (_unpack_msb(packed).double() / 3).to(dtype)


def _unpack_ignoring_strides(packed):  # a raw-pointer kernel fed a view without .contiguous()
    validate_unpack_args("unpack", packed)
    raw = packed.as_strided((packed.numel(),), (1,), packed.storage_offset())  # storage order
    return ref.unpack(raw).reshape(unpacked_shape(packed))


def _unpack_flat(packed):  # loses the leading dims
    return ref.unpack(packed).reshape(-1)


# ----------------------------------------------------------------------------------- normalization
def _normalized_by_255(packed, dtype=torch.float32):  # the uint8-image convention, x/255
    validate_normalized_args(packed, dtype, ref.NORMALIZED_DTYPES)
    return (ref.unpack(packed).double() / 255).to(dtype)


def _normalized_rounded_third(packed, dtype=torch.float32):  # a hand-typed 1/3
    validate_normalized_args(packed, dtype, ref.NORMALIZED_DTYPES)
    return (ref.unpack(packed).to(dtype) * 0.3333).to(dtype)


def _normalized_bf16_truncated(packed, dtype=torch.float32):  # bfloat16 = top 16 bits of float32
    validate_normalized_args(packed, dtype, ref.NORMALIZED_DTYPES)
    if dtype != torch.bfloat16:
        return ref.unpack_normalized(packed, dtype)
    bits = ref.unpack_normalized(packed, torch.float32).view(torch.int32) >> 16  # [..., W]
    return bits.to(torch.int16).view(torch.bfloat16)


def _normalized_any_dtype(packed, dtype=torch.float32):  # no dtype check: int32 gives 0, 0, 0, 1
    validate_unpack_args("unpack_normalized", packed)
    return (ref.unpack(packed).double() / 3).to(dtype)


# -------------------------------------------------------------------------------------- validation
def _pack_masking(values):  # values > 3 silently masked to their low 2 bits
    require_uint8("pack", "values", values)
    return ref.pack(values & 3)


def _pack_truncating_width(values):  # width % 4 pixels silently dropped
    require_uint8("pack", "values", values)
    width = values.shape[-1] - values.shape[-1] % PIXELS_PER_BYTE
    return ref.pack(values[..., :width])


def _unpack_reinterpreting(packed):  # int8 (or any 8-bit) input reinterpreted as uint8
    if isinstance(packed, torch.Tensor) and packed.dtype == torch.int8:
        packed = packed.view(torch.uint8)
    return ref.unpack(packed)


SAFE = ("PACKED2-8", "PACKED2-10", "PACKED2-11")  # validation clauses a computation bug must not trip

PLANTED_PACKED2 = (
    Planted("MSB-first bit order", "packed2",
            _impl(pack=_pack_msb, unpack=_unpack_msb, unpack_normalized=_unpack_msb_normalized),
            "PACKED2-3", "unpack(0b11100100) = [3, 2, 1, 0], expected [0, 1, 2, 3]",
            ("PACKED2-1", "PACKED2-2", "PACKED2-7", *SAFE)),
    Planted("unpack ignores input strides", "packed2", _impl(unpack=_unpack_ignoring_strides),
            "PACKED2-4", "unpack(packed):", ("PACKED2-1", "PACKED2-3", *SAFE)),
    Planted("unpack flattens leading dims", "packed2", _impl(unpack=_unpack_flat),
            "PACKED2-7", "unpack(packed): shape", ("PACKED2-3", *SAFE)),
    Planted("normalization x/255", "packed2", _impl(unpack_normalized=_normalized_by_255),
            "PACKED2-5", "unpack_normalized(packed)",
            ("PACKED2-1", "PACKED2-3", "PACKED2-4", "PACKED2-7", *SAFE)),
    Planted("normalization by 0.3333", "packed2", _impl(unpack_normalized=_normalized_rounded_third),
            "PACKED2-5", "expected 1.0", ("PACKED2-1", "PACKED2-3", "PACKED2-4", "PACKED2-7", *SAFE)),
    Planted("bfloat16 by truncation", "packed2", _impl(unpack_normalized=_normalized_bf16_truncated),
            "PACKED2-6", "unpack_normalized(packed, torch.bfloat16)",
            ("PACKED2-4", "PACKED2-5", "PACKED2-7", *SAFE)),
    Planted("any output dtype accepted", "packed2", _impl(unpack_normalized=_normalized_any_dtype),
            "PACKED2-11", "accepted silently", ("PACKED2-5", "PACKED2-6", "PACKED2-8")),
    Planted("pack masks values > 3", "packed2", _impl(pack=_pack_masking),
            "PACKED2-9", "accepted silently", ("PACKED2-1", "PACKED2-2", "PACKED2-3", "PACKED2-4", *SAFE)),
    Planted("pack drops a partial byte", "packed2", _impl(pack=_pack_truncating_width),
            "PACKED2-10", "accepted silently", ("PACKED2-1", "PACKED2-2", "PACKED2-3", "PACKED2-8")),
    Planted("int8 input reinterpreted", "packed2", _impl(unpack=_unpack_reinterpreting),
            "PACKED2-8", "accepted silently", ("PACKED2-1", "PACKED2-2", "PACKED2-4", "PACKED2-10")),
)
