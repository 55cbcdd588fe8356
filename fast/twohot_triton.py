"""Triton ``twohot`` (spec/twohot.py): ``log_prob`` as one fused kernel; the rest is fast/twohot.py.

``log_prob`` reads each logits row once: max and logsumexp over the row, the two-hot encode of
symlog(x) (bin k and weight w_{k+1} only, as fast/twohot.py ``locate``), and
sum_k encode(symlog x)_k · log_softmax(l)_k = (1 − w)·l_k + w·l_{k+1} − logsumexp(l)  (spec/twohot.py,
"log_prob"). Without CUDA the kernel runs under the Triton interpreter on CPU tensors.

Roofline (an H200, 3.35 TB/s): the kernel reads each logit once and writes one value per row, so
[64, 4096, 255] float32 moves 267 MB, ideally 80 µs. The first GPU run measured 375 µs (0.18 of the copy
bandwidth), and the machine code showed why: rows of 255 floats start anywhere modulo 16 bytes, so every
logit came in a 32-bit load. The kernel now reads each row from the aligned address below it in 128-bit
loads and takes the row's last VEC elements in a small tail load; the compile gate checks the 128-bit loads
in the sm_90 PTX (tools/compile_gate.py, ``expect``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlspec.contracts.twohot import (
    DEFAULT_BINS,
    DEFAULT_HIGH,
    DEFAULT_LOW,
    support,
    validate_log_prob_args,
)
from rlspec.contracts.validate import scalar_args
from rlspec.fast.triton_mode import BACKEND_NOTE, DEVICE
from rlspec.fast.twohot import locate, mean, symexp, symlog, twohot_encode

__all__ = ["BACKEND_NOTE", "DEVICE", "symlog", "symexp", "twohot_encode", "log_prob", "mean"]

# elements per program: BLOCK_ROWS × BLOCK_BINS (16 per thread at 4 warps). 4096 made Triton 3.6 (the GPU
# machines') spill at 41 bins (BLOCK_BINS 64: 255 registers and 80-592 B of stack by dtype); 2048 spills nowhere
# under 3.6 or 3.9 (nox -s compile_gate: benchmarks/gpu/results/compile_gate/)
TILE = 2048
VECTOR_BYTES = 16  # one 128-bit load


@triton.jit
def _log_prob_kernel(logits_ptr, x_ptr, bins_ptr, out_ptr, R, n,
                     BLOCK_ROWS: tl.constexpr, BLOCK_BINS: tl.constexpr, VEC: tl.constexpr):
    dtype = bins_ptr.dtype.element_ty  # the compute dtype
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # [BR]
    src = tl.minimum(rows, R - 1).to(tl.int64)  # [BR] rows past R re-read the last one; not stored
    row_ptrs = logits_ptr + src * n  # [BR]

    # A row of n = 255 logits starts anywhere modulo 16 bytes, so row-relative loads are scalar. Read instead
    # from the aligned address below the row start, VEC elements (16 bytes) at a time: a whole vector is read
    # only where it ends inside the row (c counts from the aligned start, the row is c in [lead, lead + n)),
    # and the row's last VEC elements come from a small tail load, so nothing past the tensor is read.
    lead = (src * n) % VEC  # [BR]
    start = tl.multiple_of(src * n - lead, VEC)  # [BR]
    body_end = lead + n - VEC  # [BR] the body holds c in [lead, body_end); the tail [body_end, lead + n)
    cols = tl.arange(0, BLOCK_BINS)  # [BB] BLOCK_BINS >= n >= body_end
    vec_start = (cols // VEC) * VEC  # [BB]
    body = tl.load(logits_ptr + start[:, None] + cols[None, :], mask=vec_start[None, :] < body_end[:, None],
                   other=float("-inf")).to(dtype)  # [BR, BB]
    body = tl.where((cols[None, :] >= lead[:, None]) & (cols[None, :] < body_end[:, None]), body, float("-inf"))
    j = n - VEC + tl.arange(0, VEC)  # [VEC] the tail's places in the row (< 0 only where n < VEC)
    tail = tl.load(row_ptrs[:, None] + j[None, :], mask=(j >= 0)[None, :], other=float("-inf")).to(dtype)  # [BR, VEC]
    m = tl.maximum(tl.max(body, axis=1), tl.max(tail, axis=1))  # [BR]
    lse = m + tl.log(tl.sum(tl.exp(body - m[:, None]), axis=1) + tl.sum(tl.exp(tail - m[:, None]), axis=1))  # [BR]

    # y = clamp(symlog(x), b_0, b_{n-1}) (spec/twohot.py "symlog"); log1p(a) = log(u) + (a − (u − 1))/u
    # with u = fl(1 + a) restores the bits of a lost in 1 + a; a = ±inf maps to itself
    x = tl.load(x_ptr + src).to(dtype)  # [BR]
    a = tl.abs(x)
    finite = a < float("inf")
    u = 1 + tl.where(finite, a, 0.0)
    log1p = tl.where(finite, tl.log(u) + (a - (u - 1)) / u, a)
    b_first, b_last = tl.load(bins_ptr), tl.load(bins_ptr + n - 1)
    y = tl.clamp(tl.where(x < 0, -log1p, log1p), b_first, b_last)  # [BR]

    # bin k: b_k <= y < b_{k+1}, k <= n-2; the division can land one bin off next to a bin edge,
    # so correct against the table itself (fast/twohot.py `locate`)
    k = tl.floor((y - b_first) / ((b_last - b_first) / (n - 1))).to(tl.int32)
    k = tl.minimum(tl.maximum(k, 0), n - 2)  # [BR]
    k -= (tl.load(bins_ptr + k) > y).to(tl.int32)
    k += (tl.load(bins_ptr + tl.minimum(k + 1, n - 1)) <= y).to(tl.int32)
    k = tl.minimum(tl.maximum(k, 0), n - 2)
    b_lo, b_hi = tl.load(bins_ptr + k), tl.load(bins_ptr + k + 1)
    w = tl.clamp((y - b_lo) / (b_hi - b_lo), 0.0, 1.0)  # [BR] weight of bin k+1

    l_lo, l_hi = tl.load(row_ptrs + k).to(dtype), tl.load(row_ptrs + k + 1).to(dtype)  # [BR]
    # a zero weight contributes 0 even against a -inf logit, as in the reference
    picked = (1 - w) * tl.where(w < 1, l_lo, 0.0) + w * tl.where(w > 0, l_hi, 0.0)  # [BR]
    tl.store(out_ptr + rows, picked - lse, mask=rows < R)


def vector(dtype: torch.dtype) -> int:
    """Elements of ``dtype`` in one 128-bit load."""
    return VECTOR_BYTES // dtype.itemsize


def _log_prob_forward(logits: torch.Tensor, x: torch.Tensor, num_bins: int, low: float,
                      high: float) -> torch.Tensor:
    dtype = torch.promote_types(logits.dtype, x.dtype)
    if dtype.itemsize < 4:
        dtype = torch.float32  # float16/bfloat16: compute in float32, store in the input dtype
    bins = support(num_bins, low, high, x.dtype, x.device).to(dtype)  # [n], built in the input dtype
    rows = logits.reshape(-1, num_bins).contiguous()  # [R, n]
    out = torch.empty(rows.shape[0], dtype=logits.dtype, device=logits.device)  # [R]
    if rows.shape[0]:
        block_bins = triton.next_power_of_2(num_bins)
        block_rows = max(1, TILE // block_bins)
        grid = (triton.cdiv(rows.shape[0], block_rows),)
        _log_prob_kernel[grid](rows, x.reshape(-1).contiguous(), bins, out, rows.shape[0], num_bins,
                               BLOCK_ROWS=block_rows, BLOCK_BINS=block_bins, VEC=vector(rows.dtype))
    return out.reshape(logits.shape[:-1])


class _LogProb(torch.autograd.Function):
    """The kernel forward; the backward in torch from the same two-hot encode (fast/twohot.py):
    ∂/∂l = g·(w − softmax(l)) [..., n];  ∂/∂x = g·(l_{k+1} − l_k)/(b_{k+1} − b_k)·symlog'(x) inside the
    support (1/(1 + |x|)), 0 where symlog(x) is clamped to an end."""

    @staticmethod
    def forward(ctx, logits, x, num_bins, low, high):
        ctx.save_for_backward(logits, x)
        ctx.support = (num_bins, low, high)
        return _log_prob_forward(logits, x, num_bins, low, high)

    @staticmethod
    def backward(ctx, grad):
        logits, x = ctx.saved_tensors
        num_bins, low, high = ctx.support
        bins = support(num_bins, low, high, x.dtype, x.device)  # [n]
        g = grad.unsqueeze(-1)  # [..., 1]
        grad_logits = grad_x = None
        if ctx.needs_input_grad[0]:
            w = twohot_encode(symlog(x.detach()), num_bins, low, high).to(logits.dtype)  # [..., n]
            grad_logits = g * (w - torch.softmax(logits.detach(), dim=-1))
        if ctx.needs_input_grad[1]:
            y = symlog(x.detach())  # [...]
            k, _ = locate(y, bins)  # [...]
            pair = logits.detach().gather(-1, torch.stack((k, k + 1), dim=-1)).to(x.dtype)  # [..., 2]
            inside = (y > bins[0]) & (y < bins[-1])
            slope = (pair[..., 1] - pair[..., 0]) / (bins[k + 1] - bins[k]) / (1 + x.detach().abs())
            grad_x = grad.to(x.dtype) * torch.where(inside, slope, torch.zeros_like(slope))
        return grad_logits, grad_x, None, None, None


@scalar_args("num_bins", "low", "high")
def log_prob(logits: torch.Tensor, x: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
             high: float = DEFAULT_HIGH) -> torch.Tensor:
    validate_log_prob_args(logits, x, num_bins, low, high)
    return _LogProb.apply(logits, x, num_bins, low, high)
