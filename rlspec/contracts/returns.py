"""Runtime half of contract ``returns`` (the formula, clauses and properties: spec/returns.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import torch

from rlspec.contracts.validate import require_floating, require_range, require_shape


def _first_bad(t: torch.Tensor, bad: torch.Tensor) -> str:
    idx = [int(i) for i in bad.nonzero()[0].tolist()]
    return f"{int(bad.sum())} of {t.numel()} elements (first at index {idx}: {t[tuple(idx)].item()})"


def require_time_major(fn: str, name: str, t: torch.Tensor) -> None:
    require_floating(fn, name, t)
    if t.dim() == 0:
        raise ValueError(f"{fn}: argument '{name}' must be time-major [T, B], got a 0-d tensor")


def require_dtype(fn: str, name: str, t: torch.Tensor, dtype: torch.dtype, like: str) -> None:
    require_floating(fn, name, t)
    if t.dtype != dtype:
        raise TypeError(f"{fn}: argument '{name}' has dtype {t.dtype}, expected {dtype} (= {like}.dtype)")


def require_unit_interval(fn: str, name: str, t: torch.Tensor) -> None:
    bad = ~((t >= 0) & (t <= 1))  # NaN counts as outside
    if bool(bad.any()):
        raise ValueError(f"{fn}: argument '{name}' has values outside [0, 1]: {_first_bad(t, bad)}")


def as_flags(fn: str, name: str, t: torch.Tensor, shape: tuple[int, ...], why: str) -> torch.Tensor:
    """A flag tensor as bool: either bool, or any dtype holding only 0 and 1."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}' must be a torch.Tensor, got {type(t).__name__}")
    require_shape(fn, name, t, shape, why)
    if t.dtype == torch.bool:
        return t
    bad = (t != 0) & (t != 1)
    if bool(bad.any()):
        raise ValueError(f"{fn}: argument '{name}' must hold 0/1 flags, got {_first_bad(t, bad)}")
    return t != 0


def validate_discounting(fn: str, gamma: float, lam: float) -> None:
    require_range(fn, "gamma", gamma, 0.0, 1.0)
    require_range(fn, "lam", lam, 0.0, 1.0)
