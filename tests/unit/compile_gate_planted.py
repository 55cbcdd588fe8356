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


# Design regressions: kernels that compile and compute the right sum of x[0..ROWS·n), yet lack the machine code
# their design promises; the gate reports each (tools/compile_gate.py ``unmet``), the interpreter cannot.


@triton.jit
def row_relative_loads(x_ptr, out_ptr, n, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows, cols = tl.arange(0, ROWS), tl.arange(0, COLS)
    # rows of a runtime n start anywhere modulo 16 bytes: these loads stay scalar (twohot before its window)
    v = tl.load(x_ptr + rows[:, None] * n + cols[None, :], mask=(cols < n)[None, :], other=0.0)
    tl.store(out_ptr, tl.sum(tl.sum(v, axis=1), axis=0))


@triton.jit
def unpipelined_loop(x_ptr, out_ptr, n, ROWS: tl.constexpr, COLS: tl.constexpr):
    acc = tl.zeros([COLS], dtype=tl.float32)
    for k in range(ROWS):  # a plain range: each chunk's loads wait for the one before (no cp.async)
        acc += tl.load(x_ptr + k * n + tl.arange(0, COLS), mask=tl.arange(0, COLS) < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


REGRESSIONS = {"row_relative_loads": dict(min_load_bits=128), "unpipelined_loop": dict(async_copies=True)}
