"""Compiled ``twohot`` (spec/twohot.py): ``mean`` as one fused row reduction via ``torch.compile``.

Eager torch cannot beat a softmax followed by a product with the bins: softmax alone writes the
[..., n] probabilities and costs about as much as sheeprl's whole mean. Compiled (inductor: C++/OpenMP
on CPU, Triton on CUDA), max, Σ e^{l−max} and Σ e^{l−max}·b_k run in one pass over each row and nothing
of size [..., n] is written. Needs a C++ compiler at run time on CPU; the first call per dtype (and grad
mode, view layout) compiles (seconds); sizes are unbacked, so new batch shapes or bin counts reuse the
graph. Everything else is fast/twohot.py.
"""

from __future__ import annotations

import torch
from torch._dynamo.decorators import mark_unbacked

from rlspec.contracts.twohot import (
    DEFAULT_BINS,
    DEFAULT_HIGH,
    DEFAULT_LOW,
    odd_extension,
    support,
    validate_logits,
    validate_support,
)
from rlspec.contracts.validate import scalar_args
from rlspec.fast.twohot import log_prob, symexp, symlog, twohot_encode

__all__ = ["symlog", "symexp", "twohot_encode", "log_prob", "mean"]

BACKEND_NOTE = "torch.compile"
# Graphs _mean may hold: dynamo guards on the dtype (float32/64, bf16, fp16), requires_grad, and whether the rows
# are a view of a larger base (reshape of a non-contiguous or batched tensor): a checker sweeping all of them
# passes dynamo's default limit (8), past which calls silently fall back to eager.
RECOMPILE_LIMIT = 32


@torch.compile(dynamic=True)
def _mean(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """symexp(Σ_k softmax(l)_k · b_k) for logits [R, n], bins [n] -> [R] (spec/twohot.py "mean")."""
    e = torch.exp(logits - logits.amax(-1, keepdim=True))  # [R, n], fused away by inductor
    y = (e * bins).sum(-1) / e.sum(-1)  # [R]
    return odd_extension(torch.expm1, y)


@scalar_args("num_bins", "low", "high")
def mean(logits: torch.Tensor, num_bins: int = DEFAULT_BINS, low: float = DEFAULT_LOW,
         high: float = DEFAULT_HIGH) -> torch.Tensor:
    validate_logits("mean", logits, num_bins)
    validate_support("mean", num_bins, low, high)
    rows = logits.reshape(-1, num_bins)  # [R, n]: the same graph whatever the batch rank
    bins = support(num_bins, low, high, logits.dtype, logits.device)  # [n]
    for t, dim in ((rows, 0), (rows, 1), (bins, 0)):
        mark_unbacked(t, dim)  # no size specialization (e.g. R == 1): a graph per dtype, not per shape
    with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
        return _mean(rows, bins).reshape(logits.shape[:-1])
