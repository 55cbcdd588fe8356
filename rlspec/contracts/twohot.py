"""Runtime half of contract ``twohot`` (the formula, clauses and properties: spec/twohot.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import (
    require_floating,
    require_int,
    require_no_nan,
    require_range,
    require_shape,
)

DEFAULT_BINS, DEFAULT_LOW, DEFAULT_HIGH = 255, -20.0, 20.0


FLOAT_DTYPES = (torch.float32, torch.float64)


def support(num_bins: int, low: float, high: float, dtype: torch.dtype = torch.float32,
            device: torch.device | str = "cpu") -> torch.Tensor:
    """The bins b_k [num_bins], in ``dtype`` (the definition every implementation shares)."""
    return torch.linspace(low, high, num_bins, dtype=dtype, device=device)


def odd_extension(f, x: torch.Tensor) -> torch.Tensor:
    """sign(x)·f(|x|) for f with f(0) = 0, written so that autograd gives f'(0) at x = 0 (sign(x)·f(|x|)
    differentiates to 0 there: sign' = |x|' = 0 at 0) and never evaluates f outside [0, ∞). The magnitude is a
    select, whose gradient is +1 at 0 in every torch version (the gradient of a clamp at its own bound is not:
    torch 2.14 makes it 0)."""
    magnitude = torch.where(x < 0, -x, x)  # |x|, with d/dx = 1 at 0
    return torch.where(x < 0, -f(magnitude), f(magnitude))


def validate_support(fn: str, num_bins: int, low: float, high: float) -> None:
    require_int(fn, "num_bins", num_bins, 2)
    for name, end in (("low", low), ("high", high)):
        require_range(fn, name, end, -math.inf, math.inf, lo_open=True, hi_open=True)
    if not low < high:
        raise ValueError(f"{fn}: arguments 'low' < 'high' expected, got low={low!r}, high={high!r}")


def validate_logits(fn: str, logits: torch.Tensor, num_bins: int) -> None:
    require_floating(fn, "logits", logits)
    require_int(fn, "num_bins", num_bins, 2)
    if logits.dim() == 0 or logits.shape[-1] != num_bins:
        width = logits.shape[-1] if logits.dim() else "none (0-d)"
        raise ValueError(f"{fn}: argument 'logits' must have last dimension num_bins={num_bins}, "
                         f"got {width} (shape {tuple(logits.shape)})")


def validate_log_prob_args(logits: torch.Tensor, x: torch.Tensor, num_bins: int, low: float,
                           high: float) -> None:
    validate_logits("log_prob", logits, num_bins)
    require_floating("log_prob", "x", x)
    require_shape("log_prob", "x", x, logits.shape[:-1], "(= logits.shape[:-1]; no trailing 1, no broadcast)")
    require_no_nan("log_prob", "x", x)
    validate_support("log_prob", num_bins, low, high)
