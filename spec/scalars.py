"""Hyper-parameters given as numpy scalars or 0-d tensors.

Configuration often arrives as ``np.float32(0.99)`` (a YAML loader, a numpy sweep) or ``torch.tensor(5)``.
An implementation must validate and use such a value exactly like the Python number it holds: the
result with ``np.float32(0.99)`` equals, bit for bit, the result with ``float(np.float32(0.99))``.
Refusing it ("must lie in [0, 1]" for 0.99) or computing in float32 inside a float64 reference both fail.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from rlspec.spec.core import fail

RATIONALE = ("The formula is over real numbers and says nothing about how a number is spelled. NumPy and JAX "
             "promotion rules make a np.float32 or 0-d tensor hyper-parameter change the result (a float64 rollout "
             "computed with γ rounded to float32, float32 state turned float64, a value refused as out of range) "
             "while the Python number it holds gives the formula's value. The kit asks that the number held be "
             "used, because configuration reaches trainers as numpy scalars (YAML loaders, sweeps) and the "
             "difference is silent.")


def variants(value: Any) -> list[tuple[str, Any, Any]]:
    """(label, the value as given, the Python number it holds) for each foreign type of ``value``."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [("np.int64", np.int64(value), value), ("np.int32", np.int32(value), value),
                ("0-d int64 tensor", torch.tensor(value), value)]
    if isinstance(value, float):
        f32 = float(np.float32(value))
        return [("np.float32", np.float32(value), f32), ("np.float64", np.float64(value), value),
                ("0-d float64 tensor", torch.tensor(value, dtype=torch.float64), value),
                ("0-d float32 tensor", torch.tensor(value, dtype=torch.float32), f32)]
    return []


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            (torch.isnan(a) & torch.isnan(b) | (a == b)).all()) if a.dtype.is_floating_point else torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b or (a != a and b != b)  # NaN == NaN here


def check_scalar_types(clause: str, call: Callable[..., Any], params: dict[str, Any], **inputs: Any) -> None:
    """``call(**params)`` with each parameter in turn given as a numpy scalar / 0-d tensor must return
    what it returns with the Python number that value holds (compared bit for bit)."""
    for name, value in params.items():
        for label, given, python in variants(value):
            try:
                got = call(**dict(params, **{name: given}))
            except Exception as err:  # noqa: BLE001 - refusing a valid value is the violation
                fail(clause, f"{name}={label}({python!r}) raised {type(err).__name__}: {err}", **inputs)
            want = call(**dict(params, **{name: python}))
            if not _same(got, want):
                fail(clause, f"{name}={label}({python!r}) gives a different result than {name}={python!r} "
                             "(the Python number it holds)", **inputs)
