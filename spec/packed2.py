"""Contract ``packed2``: 2-bit frames, four pixels per byte, and the fused unpack + normalize.

Source: the Dreamer plan (Master Plan v2) §2.4 "Packed2 contract" (replay stores packed2; the encoder unpacks
and normalizes inside the model), milestone M4 (packed2 unpack micro-benchmark, ``unpack_impl = "lut" |
"triton" | "warp"``) and M6 (the unpack kernel on the device).

Layout
------
A row of W pixels with values v_0 .. v_{W−1} ∈ {0, 1, 2, 3} is stored in W/4 bytes; pixel j of the row
lives in byte ⌊j/4⌋ at bits 2·(j mod 4) and 2·(j mod 4)+1, least-significant pair first:

    byte_i   = Σ_{k=0..3} v_{4i+k} · 4^k  =  v_{4i} | v_{4i+1} << 2 | v_{4i+2} << 4 | v_{4i+3} << 6
    v_{4i+k} = (byte_i >> 2k) & 3

so byte 0b11_10_01_00 (0xE4) unpacks to [0, 1, 2, 3] and 0b00_01_10_11 (0x1B) to [3, 2, 1, 0]. This is the
convention of the GBxCuLE emulator whose frames the replay ring stores as ``obs [Tcap, N, 1, 72, 20]``
(Dreamer plan §2.3; 72 × 80 pixels unpacked). Packers that put the first pixel in the most significant bits
(the order of ``numpy.packbits``' default ``bitorder="big"``) produce a bug here, and one the round
trips cannot see: only the pinned layout (PACKED2-3) and the reference comparison (PACKED2-4) can.

    pack(values [..., W] uint8, values ∈ 0..3, W % 4 == 0) -> packed [..., W/4] uint8
    unpack(packed [..., W/4] uint8)                        -> values [..., W]   uint8
    unpack_normalized(packed [..., W/4] uint8, dtype=torch.float32) -> x [..., W] dtype,
        x = L_dtype[values],  L_dtype = (0/3, 1/3, 2/3, 3/3) each rounded to nearest in ``dtype``

In float32 the level table is exactly ``unpack(b).to(torch.float32) / 3`` (IEEE division is correctly
rounded); in float16/bfloat16 it is v/3 computed in float64 and rounded once to the target dtype. Any
leading dims, zero-size dims and non-contiguous inputs are accepted; outputs are contiguous, on the
input's device. Every implementation agrees bit for bit: there is no tolerance in this contract.

dtype policy
------------
Inputs must be uint8 (signed int8 or wider integers are rejected, not reinterpreted). The normalized
output dtypes an implementation supports are its module attribute ``NORMALIZED_DTYPES`` (float32 when
absent); the spec checks exactly those and expects every other dtype to be rejected naming ``dtype``.
The registered implementations all declare float32, float64, float16 and bfloat16: the Triton and Warp
kernels gather from a 4-entry level table stored as same-width integers (the bit patterns of L_dtype),
so they never compute in the output type — which is why bfloat16 works under the Triton interpreter,
which has no bfloat16 arithmetic.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from rlspec.contracts.packed2 import (
    FLOAT_DTYPES,
    FRAME_SHAPE,
    PIXELS_PER_BYTE,
    levels,
    unpacked_shape,
)
from rlspec.reference import packed2 as reference  # the oracle
from rlspec.spec.core import (
    Contract,
    Property,
    assert_identical,
    by_category,
    expect_rejection,
    fail,
)

CLAUSES = {
    "PACKED2-1": "unpack(pack(v)) == v exactly for uint8 v [..., W] with values 0..3, W % 4 == 0 "
                 "(issue: 'pack∘unpack = identity on 0..3 arrays')",
    "PACKED2-2": "pack(unpack(b)) == b exactly for every uint8 b [..., W/4], all 256 byte values "
                 "(issue: 'unpack∘pack = identity on bytes')",
    "PACKED2-3": "bit layout: pixel j of a byte is at bits 2·(j mod 4), least-significant first "
                 "(0b11_10_01_00 <-> [0, 1, 2, 3], pinned bytes in both directions)",
    "PACKED2-4": "unpack and pack equal the reference bit for bit on any shape, incl. non-contiguous views",
    "PACKED2-5": "unpack_normalized(b) and unpack_normalized(b, torch.float32) == unpack(b).to(float32) / 3 "
                 "exactly",
    "PACKED2-6": "unpack_normalized(b, dtype) == L_dtype[unpack(b)] bit for bit for every declared dtype "
                 "(NORMALIZED_DTYPES), L_dtype = v/3 rounded once to dtype",
    "PACKED2-7": "shapes: pack [..., W] -> [..., W/4]; unpack, unpack_normalized [..., W/4] -> [..., W], "
                 "any leading dims incl. zero-size; outputs contiguous, uint8 / the requested dtype",
    "PACKED2-8": "non-uint8 (or non-tensor) input is rejected with a TypeError naming the argument, "
                 "'uint8' and the actual dtype",
    "PACKED2-9": "pack rejects values > 3 naming 'values', the first offending index and value, and 0..3",
    "PACKED2-10": "pack rejects a width not divisible by 4 naming 'values', the width and 'multiple of 4'; "
                  "0-d inputs are rejected naming the argument",
    "PACKED2-11": "unpack_normalized rejects a dtype outside NORMALIZED_DTYPES naming 'dtype', the actual "
                  "dtype and the supported ones",
}

CATEGORIES = by_category(
    maths=("PACKED2-1", "PACKED2-2", "PACKED2-3", "PACKED2-4", "PACKED2-5", "PACKED2-6", "PACKED2-7"),
    validation=("PACKED2-8", "PACKED2-9", "PACKED2-10", "PACKED2-11"),
)

INTERFACE = ("pack", "unpack", "unpack_normalized")
"""
pack(values: Tensor) -> Tensor                                   # [..., W] uint8 0..3 -> [..., W/4] uint8
unpack(packed: Tensor) -> Tensor                                 # [..., W/4] uint8 -> [..., W] uint8
unpack_normalized(packed: Tensor, dtype=torch.float32) -> Tensor # [..., W/4] uint8 -> [..., W] dtype
NORMALIZED_DTYPES: tuple[torch.dtype, ...]                       # optional; (torch.float32,) if absent
"""

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def declared_dtypes(impl: Any) -> tuple[torch.dtype, ...]:
    return tuple(getattr(impl, "NORMALIZED_DTYPES", (torch.float32,)))


# --------------------------------------------------------------------------------------------------
# Exact comparison (no tolerance anywhere in this contract)
# --------------------------------------------------------------------------------------------------
def _binary(packed: torch.Tensor) -> list[str]:
    return [f"0b{b:08b}" for b in packed.reshape(-1)[:8].tolist()]


# --------------------------------------------------------------------------------------------------
# Strategies: shapes of 1..4 dims (zero-size allowed), random bytes from an explicit Generator, and
# optionally a non-contiguous view (every other element of a wider tensor, or a transposed one)
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
lead_shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
layouts = st.sampled_from(["contiguous", "strided", "transposed"])


def _tensor(shape: tuple[int, ...], high: int, seed: int, layout: str) -> torch.Tensor:
    """uint8 [shape] uniform in [0, high), laid out as asked (the values do not depend on the layout)."""
    g = torch.Generator().manual_seed(seed)
    values = torch.randint(0, high, shape, generator=g, dtype=torch.uint8)
    if layout == "strided":
        wide = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=torch.uint8)
        wide[..., 1::2] = values
        return wide[..., 1::2]  # last-dim stride 2
    if layout == "transposed" and len(shape) >= 2:
        return values.transpose(0, -1).contiguous().transpose(0, -1)  # last-dim stride != 1
    return values


@st.composite
def packed_cases(draw, max_bytes: int = 6):
    shape = (*draw(lead_shapes), draw(st.integers(0, max_bytes)))
    return dict(packed=_tensor(shape, 256, draw(seeds), draw(layouts)))


@st.composite
def value_cases(draw, max_bytes: int = 6):
    shape = (*draw(lead_shapes), PIXELS_PER_BYTE * draw(st.integers(0, max_bytes)))
    return dict(values=_tensor(shape, 4, draw(seeds), draw(layouts)))


ALL_BYTES = torch.arange(256, dtype=torch.uint8)  # [256]
PACKED_EXAMPLES = (
    dict(packed=ALL_BYTES),
    dict(packed=ALL_BYTES.reshape(4, 2, 32)[:, :, ::2]),  # every other byte, non-contiguous
    dict(packed=_tensor((2, *FRAME_SHAPE), 256, 0, "contiguous")),  # two replay frames [2, 1, 72, 20]
    dict(packed=torch.zeros(3, 0, 5, dtype=torch.uint8)),  # zero-size leading dim
)
VALUE_EXAMPLES = (
    dict(values=torch.tensor([0, 1, 2, 3, 3, 2, 1, 0], dtype=torch.uint8)),
    dict(values=ALL_BYTES.reshape(64, 4) % 4),
    dict(values=_tensor((2, 1, 72, 80), 4, 1, "strided")),
    dict(values=torch.zeros(2, 0, dtype=torch.uint8)),  # width 0
)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_roundtrip_values(impl, values):
    packed = impl.pack(values)
    assert_identical("PACKED2-1", "unpack(pack(values))", impl.unpack(packed), values,
                     values=values, packed=packed)


def check_roundtrip_bytes(impl, packed):
    values = impl.unpack(packed)
    assert_identical("PACKED2-2", "pack(unpack(packed))", impl.pack(values), packed,
                     packed=packed, values=values)


# (byte, pixels) pairs in the GBxCuLE order: pixel j at bits 2j, 2j+1 (least-significant first)
LAYOUT = (
    (0b11_10_01_00, [0, 1, 2, 3]),
    (0b00_01_10_11, [3, 2, 1, 0]),
    (0b00_00_00_01, [1, 0, 0, 0]),
    (0b00_00_00_10, [2, 0, 0, 0]),
    (0b01_00_00_00, [0, 0, 0, 1]),
    (0b11_00_00_00, [0, 0, 0, 3]),
    (0b00_11_00_00, [0, 0, 3, 0]),
    (0b11_11_11_11, [3, 3, 3, 3]),
)


def check_layout(impl):
    for byte, pixels in LAYOUT:
        got = impl.unpack(torch.tensor([byte], dtype=torch.uint8))
        if got.tolist() != pixels:
            fail("PACKED2-3", f"unpack(0b{byte:08b}) = {got.tolist()}, expected {pixels} (pixel j at bits "
                              "2·(j mod 4), least-significant first)")
        got = impl.pack(torch.tensor(pixels, dtype=torch.uint8))
        if got.tolist() != [byte]:
            shown = [f"0b{b:08b}" for b in got.tolist()]
            fail("PACKED2-3", f"pack({pixels}) = {shown}, expected ['0b{byte:08b}'] (pixel j at bits "
                              "2·(j mod 4), least-significant first)")


def check_reference_bits(impl, packed):
    ref = reference
    values = ref.unpack(packed)
    assert_identical("PACKED2-4", "unpack(packed)", impl.unpack(packed), values, packed=packed,
                     packed_bits=_binary(packed))
    assert_identical("PACKED2-4", "pack(values)", impl.pack(values), ref.pack(values), values=values)


def check_normalized_float32(impl, packed):
    want = reference.unpack(packed).to(torch.float32) / 3  # [..., W]
    assert_identical("PACKED2-5", "unpack_normalized(packed)", impl.unpack_normalized(packed), want,
                     packed=packed, packed_bits=_binary(packed))
    assert_identical("PACKED2-5", "unpack_normalized(packed, torch.float32)",
                     impl.unpack_normalized(packed, torch.float32), want, packed=packed)


def check_normalized_declared(impl, packed):
    values = reference.unpack(packed).long()  # [..., W]
    for dtype in declared_dtypes(impl):
        assert_identical("PACKED2-6", f"unpack_normalized(packed, {dtype})",
                         impl.unpack_normalized(packed, dtype), levels(dtype)[values], packed=packed,
                         packed_bits=_binary(packed))


def check_shapes(impl, lead, width_bytes, layout):
    packed = _tensor((*lead, width_bytes), 256, 0, layout)
    values = _tensor((*lead, PIXELS_PER_BYTE * width_bytes), 4, 0, layout)
    outs = [("pack(values)", impl.pack(values), (*lead, width_bytes), torch.uint8),
            ("unpack(packed)", impl.unpack(packed), unpacked_shape(packed), torch.uint8)]
    outs += [(f"unpack_normalized(packed, {d})", impl.unpack_normalized(packed, d), unpacked_shape(packed), d)
             for d in declared_dtypes(impl)]
    for what, out, shape, dtype in outs:
        if (not isinstance(out, torch.Tensor) or tuple(out.shape) != shape or out.dtype != dtype
                or out.device != packed.device or not out.is_contiguous()):
            got = (f"shape {tuple(out.shape)} dtype {out.dtype} device {out.device} contiguous "
                   f"{out.is_contiguous()}" if isinstance(out, torch.Tensor) else type(out).__name__)
            fail("PACKED2-7", f"{what}: {got}, expected a contiguous {shape} {dtype} tensor on "
                              f"{packed.device}", lead=lead, width_bytes=width_bytes, layout=layout)


_CALLS = (("pack", "values"), ("unpack", "packed"), ("unpack_normalized", "packed"))


def check_rejects_dtype(impl):
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.float32, torch.bool):
        x = torch.ones(2, 8, dtype=dtype)
        actual = str(dtype).removeprefix("torch.")
        for fn, arg in _CALLS:
            expect_rejection("PACKED2-8", lambda fn=fn, x=x: getattr(impl, fn)(x), names=[arg],
                             mentions=["uint8", actual], what=f"{fn} with a {actual} tensor")
    for fn, arg in _CALLS:
        expect_rejection("PACKED2-8", lambda fn=fn: getattr(impl, fn)([[0, 1, 2, 3]]), names=[arg],
                         mentions=["uint8", "list"], what=f"{fn} with a Python list")


def check_rejects_values(impl, index, value):
    values = torch.zeros(3, 8, dtype=torch.uint8)
    values[index] = value
    expect_rejection("PACKED2-9", lambda: impl.pack(values), names=["values"],
                     mentions=[str(list(index)), str(value), "0..3"],
                     what=f"pack with values[{index[0]}, {index[1]}] = {value}")


def check_rejects_width(impl, width):
    values = torch.zeros(3, width, dtype=torch.uint8)
    expect_rejection("PACKED2-10", lambda: impl.pack(values), names=["values"],
                     mentions=[str(width), "multiple of 4"], what=f"pack with values [3, {width}]")
    for fn, arg in _CALLS:
        expect_rejection("PACKED2-10", lambda fn=fn: getattr(impl, fn)(torch.tensor(1, dtype=torch.uint8)),
                         names=[arg], mentions=["0-d"], what=f"{fn} with a 0-d tensor")


def check_rejects_out_dtype(impl):
    declared = declared_dtypes(impl)
    packed = torch.zeros(2, 5, dtype=torch.uint8)
    for dtype in (torch.uint8, torch.int32, torch.bool, *(d for d in FLOAT_DTYPES if d not in declared)):
        expect_rejection("PACKED2-11", lambda dtype=dtype: impl.unpack_normalized(packed, dtype),
                         names=["dtype"],
                         mentions=[str(dtype), "float32"], what=f"unpack_normalized with dtype={dtype}")


PROPERTIES = (
    Property("PACKED2-1", check_roundtrip_values, value_cases(), VALUE_EXAMPLES, ("pack", "unpack")),
    Property("PACKED2-2", check_roundtrip_bytes, packed_cases(), PACKED_EXAMPLES, ("pack", "unpack")),
    Property("PACKED2-3", check_layout, requires=("pack", "unpack")),
    Property("PACKED2-4", check_reference_bits, packed_cases(), PACKED_EXAMPLES, ("pack", "unpack")),
    Property("PACKED2-5", check_normalized_float32, packed_cases(), PACKED_EXAMPLES,
             ("unpack_normalized",)),
    Property("PACKED2-6", check_normalized_declared, packed_cases(), PACKED_EXAMPLES[:2],
             ("unpack_normalized",)),
    Property("PACKED2-7", check_shapes,
             st.builds(lambda lead, w, layout: dict(lead=lead, width_bytes=w, layout=layout),
                       lead_shapes, st.integers(0, 6), layouts),
             (dict(lead=(2, *FRAME_SHAPE[:2]), width_bytes=FRAME_SHAPE[2], layout="contiguous"),
              dict(lead=(0, 3), width_bytes=2, layout="strided"), dict(lead=(), width_bytes=0,
                                                                       layout="contiguous")),
             ("pack", "unpack", "unpack_normalized"), max_examples=10),
    Property("PACKED2-8", check_rejects_dtype, requires=("pack", "unpack", "unpack_normalized")),
    Property("PACKED2-9", check_rejects_values,
             st.builds(lambda i, j, v: dict(index=(i, j), value=v), st.integers(0, 2), st.integers(0, 7),
                       st.integers(4, 255)),
             (dict(index=(2, 7), value=4), dict(index=(0, 0), value=255)), ("pack",), max_examples=5),
    Property("PACKED2-10", check_rejects_width,
             st.builds(lambda w: dict(width=w), st.integers(1, 30).filter(lambda w: w % 4)),
             (dict(width=1), dict(width=79)), ("pack", "unpack", "unpack_normalized"), max_examples=4),
    Property("PACKED2-11", check_rejects_out_dtype, requires=("unpack_normalized",)),
)

CONTRACT = Contract("packed2", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES)
