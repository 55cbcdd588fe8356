"""Reference ``twohot`` (spec/twohot.py): float64 arithmetic, written to read like the formulas.

Every function also takes ``support_dtype``: the dtype whose ``linspace`` values are the bins (by default
the input's dtype). The spec's oracle calls pass float64 inputs with the caller's original dtype here, so
a float32 implementation is compared against the bins it is supposed to use.
"""

from __future__ import annotations

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


def symlog(x: torch.Tensor) -> torch.Tensor:
    require_floating("symlog", "x", x)
    return odd_extension(torch.log1p, x.double()).to(x.dtype)


def symexp(y: torch.Tensor) -> torch.Tensor:
    require_floating("symexp", "y", y)
    return odd_extension(torch.expm1, y.double()).to(y.dtype)


def _bins(fn: str, num_bins: int, low: float, high: float, dtype: torch.dtype,
          device: torch.device) -> torch.Tensor:
    validate_support(fn, num_bins, low, high)
    return support(num_bins, low, high, dtype).double().to(device)  # [n]: built on the CPU: the same bits anywhere


@scalar_args("num_bins", "low", "high")
def twohot_encode(y: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
                  high: float = DEFAULT_HIGH, support_dtype: torch.dtype | None = None) -> torch.Tensor:
    """y [...] (symlog space) -> weights [..., num_bins]."""
    require_floating("twohot_encode", "y", y)
    require_no_nan("twohot_encode", "y", y)
    bins = _bins("twohot_encode", num_bins, low, high, support_dtype or y.dtype, y.device)  # [n]
    y_hat = y.double().clamp(bins[0].item(), bins[-1].item())  # [...]
    # k = the largest index with b_k <= y_hat, capped at n-2 so that k+1 is a bin
    k = (torch.searchsorted(bins, y_hat.reshape(-1), right=True) - 1).clamp(0, num_bins - 2)
    k = k.reshape(y.shape)  # [...]
    b_lo, b_hi = bins[k], bins[k + 1]
    w_hi = (y_hat - b_lo) / (b_hi - b_lo)  # [...]
    weights = torch.zeros(*y.shape, num_bins, dtype=torch.float64, device=y.device)  # [..., n]
    weights.scatter_(-1, k.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
    weights.scatter_add_(-1, (k + 1).unsqueeze(-1), w_hi.unsqueeze(-1))
    return weights.to(y.dtype)


@scalar_args("num_bins", "low", "high")
def log_prob(logits: torch.Tensor, x: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
             high: float = DEFAULT_HIGH, support_dtype: torch.dtype | None = None) -> torch.Tensor:
    """logits [..., n], x [...] (raw space) -> sum_k twohot(symlog x)_k · log_softmax(logits)_k  [...]."""
    validate_log_prob_args(logits, x, num_bins, low, high)
    target = twohot_encode(symlog(x.double()), num_bins, low, high, support_dtype or x.dtype)  # [..., n]
    log_p = torch.log_softmax(logits.double(), dim=-1)  # [..., n]
    terms = torch.where(target > 0, target * log_p, torch.zeros_like(log_p))  # 0·(-inf) counts as 0
    return terms.sum(-1).to(logits.dtype)


@scalar_args("num_bins", "low", "high")
def mean(logits: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
         high: float = DEFAULT_HIGH, support_dtype: torch.dtype | None = None) -> torch.Tensor:
    """logits [..., n] -> symexp(sum_k softmax(logits)_k · b_k)  [...], summed in mirror pairs."""
    validate_logits("mean", logits, num_bins)
    bins = _bins("mean", num_bins, low, high, support_dtype or logits.dtype, logits.device)  # [n]
    terms = torch.softmax(logits.double(), dim=-1) * bins  # [..., n]
    half = num_bins // 2
    # mirror pairs (k, n-1-k) first: with a symmetric support and equal probabilities each pair is 0
    pairs = terms[..., :half] + terms[..., num_bins - half:].flip(-1)  # [..., n//2]
    middle = terms[..., half] if num_bins % 2 else torch.zeros_like(terms[..., 0])  # [...]
    return symexp(pairs.sum(-1) + middle).to(logits.dtype)
