"""Input validation shared by implementations: every error names the function, the argument, the
expected and the actual value. Validation happens before any state is touched, so a rejected call
loses nothing already stored."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np
import torch

from rlspec.contracts.params import require_int, require_range  # noqa: F401  (re-exported)

_VALUE_CHECKS = contextvars.ContextVar("rlspec_value_checks", default=True)


@contextlib.contextmanager
def without_value_checks():
    """Inside the block, the checks that read tensor *values* back to the host (NaN/Inf, ids in range, 0/1
    flags) are skipped; types, dtypes and shapes are still checked. For a device hot loop whose inputs the
    engine produced itself and guards on the device (the fast Dreamer engine counts non-finite metrics and
    replay push violations there): on CUDA every value check is a host synchronization."""
    token = _VALUE_CHECKS.set(False)
    try:
        yield
    finally:
        _VALUE_CHECKS.reset(token)


def value_checks_on() -> bool:
    """False inside ``without_value_checks()``."""
    return _VALUE_CHECKS.get()


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
    if value_checks_on() and bool(bad.any()):
        n_bad = int(bad.sum())
        first = tuple(int(i) for i in bad.nonzero()[0].tolist())
        raise ValueError(f"{fn}: argument '{name}' has {n_bad} {kind} of {t.numel()} elements "
                         f"(first at index {list(first)}: {t[first].item()}), expected {expected}")


def scalar(value: Any) -> Any:
    """A numpy scalar or a 0-d non-bool tensor as the Python number it holds; anything else unchanged
    (the validators then judge it). Hyper-parameters go through this, so np.float32(0.99), np.int64(5)
    and torch.tensor(0.99) are validated and used exactly like float(...)/int(...) of them."""
    if isinstance(value, np.generic) and not isinstance(value, np.bool_):
        return value.item()
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool:
        return value.item()
    return value


def scalar_args(*names: str) -> Callable:
    """Decorator: the named arguments (positional or keyword, defaults untouched) pass through
    :func:`scalar` before the function or method runs."""

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        missing = [n for n in names if n not in sig.parameters]
        if missing:
            raise TypeError(f"scalar_args: {fn.__qualname__} has no parameters {missing}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            for n in names:
                if n in bound.arguments:
                    bound.arguments[n] = scalar(bound.arguments[n])
            return fn(*bound.args, **bound.kwargs)

        return wrapper

    return wrap


def values_look_valid(finite: tuple[torch.Tensor, ...] = (), unit: tuple[torch.Tensor, ...] = ()) -> bool:
    """One host read for the happy path: True when every ``finite`` tensor is finite and every ``unit``
    tensor lies in [0, 1]. A sum is non-finite iff an element is NaN/±Inf or the sum overflows, so False
    only means "look closer": the caller then runs its per-argument checks, which name the culprit. The sums
    accumulate in float32 at least, not float64: a float64 sum of float32 costs ~4× as much on CPU (the
    conversion), and a float32 sum that overflows only means "look closer"."""
    if not value_checks_on():
        return True
    checks = [torch.isfinite(t.sum(dtype=torch.promote_types(t.dtype, torch.float32))) for t in finite]
    for t in unit:
        if t.numel():
            lo, hi = torch.aminmax(t)
            checks.append((lo >= 0) & (hi <= 1))  # NaN compares False
    return bool(torch.stack(checks).all()) if checks else True
