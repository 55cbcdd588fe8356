"""Triton ``twohot`` (spec/twohot.py): ``log_prob`` as one fused kernel; the rest is fast/twohot.py.

``log_prob`` reads each logits row once: max and logsumexp over the row, the two-hot encode of
symlog(x) (bin k and weight w_{k+1} only, as fast/twohot.py ``locate``), and
sum_k encode(symlog x)_k · log_softmax(l)_k = (1 − w)·l_k + w·l_{k+1} − logsumexp(l)  (spec/twohot.py,
"log_prob"). Without CUDA the kernel runs under the Triton interpreter on CPU tensors.
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


@triton.jit
def _log_prob_kernel(logits_ptr, x_ptr, bins_ptr, out_ptr, R, n,
                     BLOCK_ROWS: tl.constexpr, BLOCK_BINS: tl.constexpr):
    dtype = bins_ptr.dtype.element_ty  # the compute dtype
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # [BR]
    src = tl.minimum(rows, R - 1).to(tl.int64)  # [BR] rows past R re-read the last one; not stored
    cols = tl.arange(0, BLOCK_BINS)  # [BB]
    row_ptrs = logits_ptr + src * n  # [BR]
    l = tl.load(row_ptrs[:, None] + cols[None, :], mask=(cols < n)[None, :],
                other=float("-inf")).to(dtype)  # [BR, BB]
    m = tl.max(l, axis=1)  # [BR]
    lse = m + tl.log(tl.sum(tl.exp(l - m[:, None]), axis=1))  # [BR]

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
                               BLOCK_ROWS=block_rows, BLOCK_BINS=block_bins)
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
