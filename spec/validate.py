"""Input validation shared by implementations: every error names the function, the argument, the
expected and the actual value. Validation happens before any state is touched, so a rejected call
loses nothing already stored."""

from __future__ import annotations

from typing import Sequence

import torch


def require_floating(fn: str, name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}' must be a torch.Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"{fn}: argument '{name}' must have a floating dtype "
                        f"(float16/bfloat16/float32/float64), got {t.dtype}")


def require_shape(fn: str, name: str, t: torch.Tensor, expected: Sequence[int], why: str = "") -> None:
    if tuple(t.shape) != tuple(expected):
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected "
                         f"{tuple(expected)}{' ' + why if why else ''}")


def require_nonempty(fn: str, name: str, t: torch.Tensor) -> None:
    if t.numel() == 0:
        raise ValueError(f"{fn}: argument '{name}' is empty (shape {tuple(t.shape)}), "
                         "expected at least one element")


def require_no_nan(fn: str, name: str, t: torch.Tensor) -> None:
    require_none(fn, name, t, torch.isnan(t), "NaN", "non-NaN values")


def require_finite(fn: str, name: str, t: torch.Tensor) -> None:
    require_none(fn, name, t, ~torch.isfinite(t), "non-finite", "finite values")


def require_none(fn: str, name: str, t: torch.Tensor, bad: torch.Tensor, kind: str, expected: str) -> None:
    """Reject ``t`` where the mask ``bad`` is set, naming how many elements, the first index and value."""
    if bool(bad.any()):
        n_bad = int(bad.sum())
        first = tuple(int(i) for i in bad.nonzero()[0].tolist())
        raise ValueError(f"{fn}: argument '{name}' has {n_bad} {kind} of {t.numel()} elements "
                         f"(first at index {list(first)}: {t[first].item()}), expected {expected}")


def require_int(fn: str, name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{fn}: argument '{name}' must be an int >= {minimum}, got {value!r}")


def require_range(fn: str, name: str, value: float, lo: float, hi: float,
                  lo_open: bool = False, hi_open: bool = False) -> None:
    ok_lo = value > lo if lo_open else value >= lo
    ok_hi = value < hi if hi_open else value <= hi
    if not (isinstance(value, (int, float)) and ok_lo and ok_hi):
        interval = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
        raise ValueError(f"{fn}: argument '{name}' must lie in {interval}, got {value!r}")


def values_look_valid(finite: tuple[torch.Tensor, ...] = (), unit: tuple[torch.Tensor, ...] = ()) -> bool:
    """One host read for the happy path: True when every ``finite`` tensor is finite and every ``unit``
    tensor lies in [0, 1]. A sum is non-finite iff an element is NaN/±Inf or the sum overflows, so False
    only means "look closer": the caller then runs its per-argument checks, which name the culprit."""
    checks = [torch.isfinite(t.sum(dtype=torch.float64)) for t in finite]
    for t in unit:
        if t.numel():
            lo, hi = torch.aminmax(t)
            checks.append((lo >= 0) & (hi <= 1))  # NaN compares False
    return bool(torch.stack(checks).all()) if checks else True
