"""Runtime half of contract ``gae`` (the formula, clauses and properties: spec/gae.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import torch

from rlspec.contracts.returns import (
    as_flags,
    require_dtype,
    require_time_major,
    validate_discounting,
)
from rlspec.contracts.validate import require_finite, require_shape, values_look_valid


def validate_gae(fn: str, reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor,
                 truncated: torch.Tensor, next_value: torch.Tensor, gamma: float,
                 lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Reject bad input (spec/gae.py "Conventions"); returns (terminated, truncated & ~terminated) as bool [T, ...]."""
    require_time_major(fn, "value", value)
    for name, t in (("reward", reward), ("next_value", next_value)):
        require_dtype(fn, name, t, value.dtype, "value")
        require_shape(fn, name, t, value.shape, "(= value.shape [T, B])")
    term = as_flags(fn, "terminated", terminated, tuple(value.shape), "(= value.shape [T, B])")
    trunc = as_flags(fn, "truncated", truncated, tuple(value.shape), "(= value.shape [T, B])")
    validate_discounting(fn, gamma, lam)
    if not values_look_valid(finite=(reward, value, next_value)):
        for name, t in (("reward", reward), ("value", value), ("next_value", next_value)):
            require_finite(fn, name, t)
    return term, trunc & ~term  # a step flagged both is terminal (spec/gae.py "Inputs")
