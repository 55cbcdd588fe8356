"""Runtime half of contract ``returns`` (the formula, clauses and properties: spec/returns.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import torch

from rlspec.contracts.validate import require_finite, require_floating, require_range, require_shape


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


def validate_truncation(fn: str, truncated: torch.Tensor | None, next_value: torch.Tensor | None,
                        like: torch.Tensor, like_name: str) -> torch.Tensor | None:
    """The optional collector-layout pair of ``lambda_return`` and ``vtrace``: ``truncated`` [T, ...] (0/1 flags)
    and ``next_value`` [T, ...] = V(s'_t) of the real post-action state, in ``like``'s shape and dtype, given
    together or not at all. Returns the flags as bool, or None when neither is given."""
    if truncated is None and next_value is None:
        return None
    if truncated is None or next_value is None:
        given, missing = ("truncated", "next_value") if next_value is None else ("next_value", "truncated")
        raise ValueError(f"{fn}: argument '{given}' given without '{missing}': a truncated step bootstraps from "
                         "next_value[t] = V(s'_t), so pass both or neither")
    require_dtype(fn, "next_value", next_value, like.dtype, like_name)
    require_shape(fn, "next_value", next_value, like.shape, f"(= {like_name}.shape [T, B])")
    flags = as_flags(fn, "truncated", truncated, tuple(like.shape), f"(= {like_name}.shape [T, B])")
    require_finite(fn, "next_value", next_value)
    return flags
