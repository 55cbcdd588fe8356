"""The Triton backward scan behind fast/gae_triton.py and fast/lambda_return_triton.py.

Both returns contracts reduce to one backward linear recursion over time, independently per column:

    y_T = init,    y_t = base_t + coef_t·y_{t+1},    t = T−1, ..., 0                    → y [T, B]

* gae (spec/gae.py "Formula", PPO review CRITICAL-2): base = δ, coef = γλ·carry, init = 0, and returns =
  y + value (``offset``); the coefficients come from fast/gae.py ``gae_coefficients``;
* lambda_return (spec/lambda_return.py "Formula", Dreamer plan M5): base_t = r_t + γc_t(1−f_{t+1})(1−λ)·v_{t+1},
  coef_t = γc_t(1−f_{t+1})·λ, init = v_T; from fast/lambda_return.py ``lambda_coefficients``.

Kernel. One program per BLOCK_B batch columns loops over time from the end, CHUNK rows at a time
(sequential in T, parallel over B). Each chunk is read as one [CHUNK, BLOCK_B] tile, and the affine maps
y ↦ base_t + coef_t·y of its rows are composed with ``tl.associative_scan`` over the rows ordered latest
first: afterwards row t holds (α_t, β_t) with y_t = β_t + α_t·y_in, y_in the value carried in from the chunk
after it. The carry out is y at the chunk's earliest row.

Roofline (an H200, 3.35 TB/s; [T, B] = [512, 16384] float32, 33.5 MB per array): λ-return moves base, coef
in and y out, 100.7 MB, ideally 30 µs; GAE also offset in and y + offset out, 168 MB, 50 µs. The work is
sequential in T, so only B columns are independent: ~124 per SM at B = 16384. Keeping the memory busy
takes ~25 KB in flight per SM (Little's law: 3.35 TB/s × ~1 µs loaded latency / 132 SMs), so each
column must have the next rows' loads in flight while the current chunk is composed. Hence, on CUDA:
* one warp per program and a narrow BLOCK_B (32): 512 programs of one warp, ~4 per SM, and the rows of a
  chunk spread over the lanes of one warp only, so the scan's exchanges are shuffles, never a
  shared-memory round trip with barriers between warps (the [32, 64] tile on 4 warps of the first GPU
  run split its rows over the warps: 6 barriers per chunk, ~2 programs per SM, 0.22 / 0.31 of the copy
  bandwidth);
* the time loop software-pipelined (``tl.range(..., num_stages=STAGES)``): the loads of the next
  STAGES − 1 chunks are asynchronous copies (cp.async) into shared memory, issued before the current
  chunk is composed: 2 × 16 × 32 × 4 B × 2 arrays = 8 KB in flight per program, ~31 KB per SM.
The compile gate (tools/compile_gate.py) checks both in the sm_90 machine code: the loads are cp.async and
no program spills.

Rounding. y_t = Σ_k (Π coef)·base_k + (Π coef)·init is summed along a tree of depth log2(CHUNK) inside a
chunk (sequentially under the interpreter) and sequentially across chunks: within the contracts'
8·(T+1)·eps·M. Zero coefficients (terminals, cuts, episode ends) stay exact whatever the grouping: every
composed α through a zero coef is exactly 0 and every composed β through it exactly the β of the maps
before it — selected, not multiplied by 0, so an inf that overflowed after a cut stays out — and the
bit-for-bit clauses (LAMBDA-3/6/7, GAE-4/5/6) hold.

dtype: float32 and float64 compute in their own dtype; float16/bfloat16 compute in float32 and are stored
back (the interpreter cannot compute in bfloat16). Any [T, ...] is flattened to [T, B]. The outputs
carry no autograd graph (they are targets). Without CUDA the kernel runs under the Triton interpreter on
CPU tensors.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

# (rows per tile, columns per program) by the tensors' device. On CUDA: see "Roofline" above; B = 16384
# gives 512 programs. On CPU (the interpreter, the CPU gate), tiles are tiny so that the contracts' small
# cases (T <= 16, B <= 4) cross chunk and program boundaries: the carry between chunks gets checked.
TILES = {"cuda": (16, 32), "cpu": (4, 2)}
NUM_WARPS = 1
STAGES = 3  # chunks in flight: the one composed and the next two being copied


@triton.jit
def _compose(a_later, b_later, a_row, b_row):
    """(map of a row) ∘ (composed maps of the later rows): y ↦ b_row + a_row·(b_later + a_later·y); a cut
    (a_row = 0) gives exactly b_row, also where b_later overflowed to inf (0·inf would be NaN)."""
    return a_row * a_later, tl.where(a_row == 0, b_row, b_row + a_row * b_later)


@triton.jit
def _backward_scan_kernel(base_ptr, coef_ptr, init_ptr, offset_ptr, out_ptr, shifted_ptr, T, B, n_chunks,
                          HAS_OFFSET: tl.constexpr, CHUNK: tl.constexpr, BLOCK_B: tl.constexpr,
                          STAGES: tl.constexpr):
    cols = tl.program_id(0).to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)  # [BB]
    col_ok = cols < B
    i = tl.arange(0, CHUNK)  # [C] place in the chunk, 0 = its latest row
    y = tl.load(init_ptr + cols, mask=col_ok, other=0.0)  # [BB] y_T
    for k in tl.range(n_chunks, num_stages=STAGES):  # pipelined: later chunks' loads in flight
        t = T - 1 - k * CHUNK - i  # [C] the chunk's rows, latest first
        mask = (t >= 0)[:, None] & col_ok[None, :]  # [C, BB]
        offs = t.to(tl.int64)[:, None] * B + cols[None, :]  # [C, BB]
        a = tl.load(coef_ptr + offs, mask=mask, other=1.0)  # rows before t = 0: identity maps
        b = tl.load(base_ptr + offs, mask=mask, other=0.0)
        alpha, beta = tl.associative_scan((a, b), 0, _compose)  # [C, BB]: row ∘ ... ∘ latest row
        out = tl.where(alpha == 0, beta, beta + alpha * y[None, :])  # [C, BB] y_t (a cut: exactly β)
        tl.store(out_ptr + offs, out, mask=mask)
        if HAS_OFFSET:
            shift = tl.load(offset_ptr + offs, mask=mask, other=0.0)  # [C, BB]
            tl.store(shifted_ptr + offs, out + shift, mask=mask)
        y = tl.sum(tl.where(i[:, None] == CHUNK - 1, out, 0.0), axis=0)  # [BB] y at the earliest row


def backward_scan(base: torch.Tensor, coef: torch.Tensor, init: torch.Tensor,
                  offset: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """y [T, ...] with y_t = base_t + coef_t·y_{t+1} and y_T = init [...]; with ``offset`` [T, ...] the pair
    (y, y + offset). For inputs the caller has validated (one dtype, base's shape): no data-dependent
    check here, hence no host synchronization."""
    T, n = base.shape[0], math.prod(base.shape[1:])
    dtype = base.dtype
    compute = dtype if dtype in (torch.float32, torch.float64) else torch.float32

    def flat(x: torch.Tensor, rows: int) -> torch.Tensor:
        return x.reshape(rows, n).to(compute).contiguous()  # [rows, B]

    b, a, y_T = flat(base, T), flat(coef, T), flat(init, 1)  # [T, B], [T, B], [1, B]
    out = torch.empty((T, n), dtype=compute, device=base.device)  # [T, B]
    shift = flat(offset, T) if offset is not None else out  # [T, B] (a placeholder without offset)
    shifted = torch.empty_like(out) if offset is not None else out  # [T, B]
    if T and n:
        max_chunk, block_b = TILES[base.device.type]
        chunk = min(max_chunk, max(2, triton.next_power_of_2(T)))
        _backward_scan_kernel[(triton.cdiv(n, block_b),)](
            b, a, y_T, shift, out, shifted, T, n, triton.cdiv(T, chunk), HAS_OFFSET=offset is not None,
            CHUNK=chunk, BLOCK_B=block_b, STAGES=STAGES, num_warps=NUM_WARPS)
    y = out.reshape(base.shape).to(dtype)
    return y if offset is None else (y, shifted.reshape(base.shape).to(dtype))
