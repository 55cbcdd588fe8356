"""Runtime half of contract ``risk_target`` (the formula, clauses and properties: spec/risk_target.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import torch

from rlspec.contracts.returns import as_flags
from rlspec.contracts.validate import (
    require_finite,
    require_floating,
    require_int,
    require_range,
)


def validate_risk_target(fn: str, cost: torch.Tensor, done: torch.Tensor, gamma: float,
                         horizon: int) -> torch.Tensor:
    """Reject bad input (see the module docstring); returns done as bool [L, ...]."""
    require_floating(fn, "cost", cost)
    if cost.dim() == 0:
        raise ValueError(f"{fn}: argument 'cost' must be time-major [L, B], got a 0-d tensor")
    flags = as_flags(fn, "done", done, tuple(cost.shape), "(= cost.shape [L, B])")
    require_range(fn, "gamma", gamma, 0.0, 1.0)
    require_int(fn, "horizon", horizon, 1)
    require_finite(fn, "cost", cost)
    return flags


def at_captures(target: torch.Tensor, capture_steps: torch.Tensor) -> torch.Tensor:
    """The targets of a per-capture buffer: g [L, ...] read at the captured steps t_j [J] (strictly
    increasing env steps in [0, L)) → [J, ...]."""
    if capture_steps.dtype in (torch.bool,) or capture_steps.dtype.is_floating_point or capture_steps.dim() != 1:
        raise TypeError(f"at_captures: argument 'capture_steps' must be a 1-d integer tensor, got "
                        f"{capture_steps.dtype} of shape {tuple(capture_steps.shape)}")
    L = target.shape[0]
    bad = (capture_steps < 0) | (capture_steps >= L)
    if bool(bad.any()):
        j = int(bad.nonzero()[0])
        raise ValueError(f"at_captures: argument 'capture_steps' has index {j} = {int(capture_steps[j])} "
                         f"outside [0, {L})")
    if capture_steps.numel() > 1 and not bool((capture_steps[1:] > capture_steps[:-1]).all()):
        j = int((capture_steps[1:] <= capture_steps[:-1]).nonzero()[0]) + 1
        raise ValueError(f"at_captures: argument 'capture_steps' must be strictly increasing, got "
                         f"{int(capture_steps[j - 1])} then {int(capture_steps[j])} at index {j}")
    return target[capture_steps]
