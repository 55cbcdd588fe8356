"""Fast ``twohot`` (spec/twohot.py): vectorized torch in the input dtype, on any device.

* ``log_prob`` never builds the [..., n] two-hot target: with weights w on bins k and k+1 only,
  sum_k w_k·log_softmax(l)_k = lerp(l_k, l_{k+1}, w_{k+1}) − logsumexp(l), one gather and one reduction.
* ``mean`` on CPU (float32/float64, no graph): one C++ kernel (fast/twohot_mean.cpp, built by
  fast/cpu_kernel.py) reads each row of logits once and sums e^{l−max} and e^{l−max}·b_k in one vectorized
  loop while the row sits in L1; its polynomial e^x is cheaper than torch's, the cost every exact mean pays
  once per logit. Elsewhere (CUDA, a graph, no C++ compiler) softmax runs into a reused cache-sized buffer
  and a matrix-vector product per row chunk, so the [..., n] probabilities never travel to main memory.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from rlspec.contracts.twohot import (
    DEFAULT_BINS,
    DEFAULT_HIGH,
    DEFAULT_LOW,
    odd_extension,
    support,
    validate_log_prob_args,
    validate_logits,
    validate_support,
)
from rlspec.contracts.validate import require_floating, require_no_nan, scalar_args
from rlspec.fast import cpu_kernel

MEAN_CHUNK_ROWS = 1024  # 1024 × 255 floats ≈ 1 MiB: stays in L2 between softmax and mv
MEAN_SOURCE = Path(__file__).with_name("twohot_mean.cpp")
MIN_LOGITS_PER_THREAD = 1 << 18  # below this a std::thread costs more than it saves


@functools.cache
def mean_library() -> ctypes.CDLL:
    return cpu_kernel.build(MEAN_SOURCE, ("twohot_mean",))


@functools.cache
def _mean_kernel_usable() -> bool:
    return cpu_kernel.available(mean_library, "softmax and a product with the bins")


def symlog(x: torch.Tensor) -> torch.Tensor:
    require_floating("symlog", "x", x)
    return odd_extension(torch.log1p, x)


def symexp(y: torch.Tensor) -> torch.Tensor:
    require_floating("symexp", "y", y)
    return odd_extension(torch.expm1, y)


def locate(y: torch.Tensor, bins: torch.Tensor):
    """Bin index k [...] (b_k <= clamp(y) < b_{k+1}, k <= n-2) and the upper weight w_{k+1} [...]."""
    n = bins.shape[0]
    y_hat = y.clamp(bins[0], bins[-1])
    step = (bins[-1] - bins[0]) / (n - 1)
    k = ((y_hat - bins[0]) / step).floor().clamp(0, n - 2).long()
    # the division can land one bin off next to a bin edge: correct against the table itself
    k = k - (bins[k] > y_hat).long()
    k = (k + (bins[(k + 1).clamp_max(n - 1)] <= y_hat).long()).clamp(0, n - 2)
    b_lo, b_hi = bins[k], bins[k + 1]
    return k, ((y_hat - b_lo) / (b_hi - b_lo)).clamp(0, 1)


@scalar_args("num_bins", "low", "high")
def twohot_encode(y: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
                  high: float = DEFAULT_HIGH) -> torch.Tensor:
    require_floating("twohot_encode", "y", y)
    require_no_nan("twohot_encode", "y", y)
    validate_support("twohot_encode", num_bins, low, high)
    bins = support(num_bins, low, high, y.dtype, y.device)  # [n]
    k, w_hi = locate(y, bins)  # [...]
    weights = torch.zeros(*y.shape, num_bins, dtype=y.dtype, device=y.device)  # [..., n]
    weights.scatter_(-1, k.unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
    return weights.scatter_add_(-1, (k + 1).unsqueeze(-1), w_hi.unsqueeze(-1))


@scalar_args("num_bins", "low", "high")
def log_prob(logits: torch.Tensor, x: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
             high: float = DEFAULT_HIGH) -> torch.Tensor:
    validate_log_prob_args(logits, x, num_bins, low, high)
    bins = support(num_bins, low, high, x.dtype, x.device)  # [n]
    k, w_hi = locate(symlog(x), bins)  # [...]
    pair = logits.gather(-1, torch.stack((k, k + 1), dim=-1))  # [..., 2]
    return picked_logit(pair, w_hi.to(logits.dtype)) - torch.logsumexp(logits, dim=-1)


def picked_logit(pair: torch.Tensor, w_hi: torch.Tensor) -> torch.Tensor:
    """(1 − w)·l_k + w·l_{k+1} for pair = (l_k, l_{k+1}) [..., 2], where a zero weight contributes 0 even
    against a −inf (masked) logit, as in the reference: never lerp, which gives −inf + 1·inf = NaN."""
    zero = torch.zeros((), dtype=pair.dtype, device=pair.device)
    lo = torch.where(w_hi < 1, (1 - w_hi) * pair[..., 0], zero)
    hi = torch.where(w_hi > 0, w_hi * pair[..., 1], zero)
    return lo + hi


@scalar_args("num_bins", "low", "high")
def mean(logits: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
         high: float = DEFAULT_HIGH) -> torch.Tensor:
    validate_logits("mean", logits, num_bins)
    validate_support("mean", num_bins, low, high)
    bins = support(num_bins, low, high, logits.dtype, logits.device)  # [n]
    if logits.requires_grad and torch.is_grad_enabled():  # out= buffers cannot carry a graph
        return symexp(torch.softmax(logits, dim=-1) @ bins)
    rows = logits.reshape(-1, num_bins)  # [R, n]
    if rows.device.type == "cpu" and rows.dtype in cpu_kernel.SUFFIX and _mean_kernel_usable():
        return _kernel_mean(rows.contiguous(), bins).reshape(logits.shape[:-1])
    out = torch.empty(rows.shape[0], dtype=logits.dtype, device=logits.device)  # [R]
    buf = torch.empty(min(MEAN_CHUNK_ROWS, rows.shape[0]), num_bins, dtype=logits.dtype,
                      device=logits.device)  # [chunk, n]
    for start in range(0, rows.shape[0], MEAN_CHUNK_ROWS):
        chunk = rows[start:start + MEAN_CHUNK_ROWS]
        probs = buf[: chunk.shape[0]]
        torch.ops.aten._softmax.out(chunk, -1, False, out=probs)
        torch.mv(probs, bins, out=out[start:start + chunk.shape[0]])
    return symexp(out).reshape(logits.shape[:-1])


def _kernel_mean(rows: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """symexp(softmax(rows)·bins) [R] for contiguous CPU rows [R, n] (fast/twohot_mean.cpp)."""
    R, n = rows.shape
    out = rows.new_empty(R)
    getattr(mean_library(), f"twohot_mean_{cpu_kernel.SUFFIX[rows.dtype]}")(
        cpu_kernel.ptr(rows), cpu_kernel.ptr(bins), cpu_kernel.ptr(out), ctypes.c_int64(R), ctypes.c_int64(n),
        cpu_kernel.threads(R * n, MIN_LOGITS_PER_THREAD))
    return out
