"""Kernels with the defects the Triton interpreter accepts and the compiler rejects (tests/unit/
test_compile_gate.py): each sums x[0..N) into out[0], and each runs correctly under TRITON_INTERPRET=1."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def type_changes_in_loop(x_ptr, out_ptr, N: tl.constexpr):
    acc = 0  # int32, then float32 after the first iteration: a loop-carried variable must keep its type
    for i in range(N):
        acc = acc + tl.load(x_ptr + i)
    tl.store(out_ptr, acc)


@triton.jit
def breaks_out_of_loop(x_ptr, out_ptr, N: tl.constexpr):
    acc = 0.0
    for i in range(N):
        v = tl.load(x_ptr + i)
        if v < 0:
            break  # not supported by the compiler
        acc += v
    tl.store(out_ptr, acc)


def _double(v):
    return v * 2  # a plain Python function: the compiler cannot call it


@triton.jit
def calls_plain_python(x_ptr, out_ptr, N: tl.constexpr):
    acc = 0.0
    for i in range(N):
        acc += tl.load(x_ptr + i)
    tl.store(out_ptr, _double(acc) / 2)


PLANTED = ("type_changes_in_loop", "breaks_out_of_loop", "calls_plain_python")
