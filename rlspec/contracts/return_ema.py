"""Runtime half of contract ``return_ema`` (the formula, clauses and properties: spec/return_ema.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import require_range

DEFAULTS = dict(decay=0.99, max_range=1.0, percentile_low=0.05, percentile_high=0.95)


def validate_config(decay: float, max_range: float, percentile_low: float, percentile_high: float) -> None:
    require_range("ReturnEMA", "decay", decay, 0.0, 1.0, hi_open=True)
    require_range("ReturnEMA", "max_range", max_range, 0.0, math.inf, lo_open=True, hi_open=True)
    require_range("ReturnEMA", "percentile_low", percentile_low, 0.0, 1.0)
    require_range("ReturnEMA", "percentile_high", percentile_high, percentile_low, 1.0, lo_open=True)


def read_state(state: dict, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) as 0-d ``dtype`` tensors from a state dict, rejecting anything else by name."""
    for key in ("low", "high"):
        if key not in state or torch.as_tensor(state[key]).numel() != 1:
            raise ValueError(f"ReturnEMA.load_state_dict: argument 'state' needs a scalar '{key}', "
                             f"got keys {sorted(state)}")
    return tuple(torch.as_tensor(state[k]).to(dtype).reshape(()).clone() for k in ("low", "high"))
