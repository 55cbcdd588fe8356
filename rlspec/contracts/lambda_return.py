"""Runtime half of contract ``lambda_return`` (the formula, clauses and properties: spec/lambda_return.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import torch

from rlspec.contracts.returns import (
    as_flags,
    require_dtype,
    require_time_major,
    require_unit_interval,
    validate_discounting,
)
from rlspec.contracts.validate import (
    require_finite,
    require_range,
    require_shape,
    values_look_valid,
)


def validate_lambda_return(fn: str, reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor,
                           gamma: float, lam: float, is_first: torch.Tensor | None) -> torch.Tensor | None:
    """Reject bad input (see the module docstring); returns ``is_first`` as bool [T+1, ...] or None."""
    require_time_major(fn, "reward", reward)
    T, batch = reward.shape[0], tuple(reward.shape[1:])
    require_dtype(fn, "cont", cont, reward.dtype, "reward")
    require_dtype(fn, "value", value, reward.dtype, "reward")
    require_shape(fn, "cont", cont, reward.shape, "(= reward.shape [T, B])")
    require_shape(fn, "value", value, (T + 1, *batch), "([T+1, B]: values of s_0..s_T)")
    validate_discounting(fn, gamma, lam)
    if not values_look_valid(finite=(reward, value), unit=(cont,)):
        require_finite(fn, "reward", reward)
        require_finite(fn, "value", value)
        require_unit_interval(fn, "cont", cont)
    if is_first is None:
        return None
    return as_flags(fn, "is_first", is_first, (T + 1, *batch), "([T+1, B]: flags of s_0..s_T, as value)")


def to_sheeprl(reward: torch.Tensor, cont: torch.Tensor, value: torch.Tensor, gamma: float) -> dict:
    """Keyword arguments (rewards, values, continues) of sheeprl's ``compute_lambda_values``, each [T, B]. A
    pure conversion: it validates nothing, so an adapter built on it shows sheeprl's own behaviour."""
    return dict(rewards=reward, values=value[1:], continues=gamma * cont)


def from_sheeprl(rewards: torch.Tensor, values: torch.Tensor, continues: torch.Tensor, gamma: float,
                 first_value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reward [T, B], cont [T, B], value [T+1, B]) from sheeprl's arguments; ``first_value`` [B] = V(s_0)."""
    require_range("from_sheeprl", "gamma", gamma, 0.0, 1.0, lo_open=True)
    require_shape("from_sheeprl", "first_value", first_value, values.shape[1:], "(= values.shape[1:])")
    value = torch.cat([first_value.unsqueeze(0), values])  # [T+1, B]
    return rewards, continues / gamma, value  # the implementation that takes them validates them
