"""Fast ``packed2`` (spec/packed2.py), torch on any device: a 256×4 lookup table (Dreamer plan M4,
``unpack_impl = "lut"``, the default).

``CODES[b] = [(b >> 0) & 3, (b >> 2) & 3, (b >> 4) & 3, (b >> 6) & 3]`` for every byte b; unpack_normalized
uses ``L_dtype[CODES]`` (spec/packed2.py ``levels``), so unpack and normalization are one gather. A table
row (4 uint8, 4 float16/bfloat16, 4 float32 = 4, 8, 16 bytes) is gathered as one int32 / int64 /
complex128 word with int32 indices: on CPU ``index_select`` of [256, 4] rows is 5-20× slower (it takes a
per-row path) and advanced indexing with int64 indices slower still.

The module also hosts the other backends' table plumbing: ``level_bits(dtype, device)`` is L_dtype as
same-width integers, which the Triton and Warp kernels gather from without ever computing in ``dtype``.
"""

from __future__ import annotations

import torch

from rlspec.contracts.packed2 import (
    FLOAT_DTYPES,
    PIXELS_PER_BYTE,
    SHIFTS,
    levels,
    unpacked_shape,
    validate_normalized_args,
    validate_pack_args,
    validate_unpack_args,
)

NORMALIZED_DTYPES = FLOAT_DTYPES
# table rows move as whole words, bits untouched (complex128: the only 16-byte dtype; no arithmetic on it)
_WORD = {4: torch.int32, 8: torch.int64, 16: torch.complex128}
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_TABLES: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}


def _table(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[256, 4] table of ``dtype`` on ``device``: codes for uint8, L_dtype[codes] for floats (cached)."""
    key = (dtype, device)
    if key not in _TABLES:
        shifts = torch.tensor(SHIFTS)
        codes = (torch.arange(256)[:, None] >> shifts) & 3  # [256, 4]
        table = codes.to(torch.uint8) if dtype == torch.uint8 else levels(dtype)[codes]
        _TABLES[key] = table.to(device).contiguous()
    return _TABLES[key]


def level_bits(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[4] levels of the output: the codes 0..3 for uint8, else L_dtype as same-width integers."""
    table = _table(dtype, device)[0b11_10_01_00]  # the row of byte 0xE4 is [L(0), L(1), L(2), L(3)]
    return table.view(_INT_OF_SIZE[dtype.itemsize])


def _gather(packed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    table = _table(dtype, packed.device)  # [256, 4]
    index = packed.reshape(-1).to(torch.int32)  # [n bytes]
    words = table.view(_WORD[min(PIXELS_PER_BYTE * dtype.itemsize, 16)])  # [256, words per row]
    rows = words.reshape(256) if words.shape[1] == 1 else words
    return rows.index_select(0, index).view(dtype).reshape(unpacked_shape(packed))


def pack(values: torch.Tensor) -> torch.Tensor:
    """values [..., W] uint8 in 0..3 -> [..., W/4] uint8."""
    validate_pack_args(values)
    quads = values.reshape(*values.shape[:-1], values.shape[-1] // PIXELS_PER_BYTE,
                           PIXELS_PER_BYTE)  # [..., W/4, 4]
    return (quads[..., 0] | (quads[..., 1] << 2) | (quads[..., 2] << 4) | (quads[..., 3] << 6)).contiguous()


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """packed [..., W/4] uint8 -> [..., W] uint8."""
    validate_unpack_args("unpack", packed)
    return _gather(packed, torch.uint8)


def unpack_normalized(packed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """packed [..., W/4] uint8 -> L_dtype[unpack(packed)] [..., W]: unpack and v/3 in one gather."""
    validate_normalized_args(packed, dtype, NORMALIZED_DTYPES)
    return _gather(packed, dtype)
