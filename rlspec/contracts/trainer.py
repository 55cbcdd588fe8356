"""Runtime half of contract ``trainer`` (clauses and properties: spec/trainer.py): what a fingerprint is and
how two are compared. Imports only numpy and torch.

A fingerprint is what a trainer saves and a resumed run depends on: parameters, optimizer state, RNG states,
replay, counters. It is a mapping whose values are tensors, numpy arrays, numbers, strings, bytes or None,
or mappings, lists and tuples of those; ``flatten`` names each leaf by its path ("actor.0.weight",
"opt.state.3.exp_avg").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

LEAVES = (torch.Tensor, np.ndarray, np.generic, bool, int, float, complex, str, bytes, type(None))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{path: leaf} of a fingerprint; a TypeError naming the path of a value that is none of the kinds above."""
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif isinstance(value, LEAVES):
        return {prefix or "(fingerprint)": value}
    else:
        raise TypeError(f"fingerprint entry {prefix or '(fingerprint)'!r} is a {type(value).__name__}, expected a "
                        "tensor, numpy array, number, string, bytes, None, or a mapping, list or tuple of those")
    out: dict[str, Any] = {}
    for key, item in items:
        out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _raw(value: Any) -> tuple:
    """(kind, dtype, shape, bytes) of an array-like leaf."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous().reshape(-1)
        return "tensor", t.dtype, tuple(value.shape), t.view(torch.uint8).numpy().tobytes()
    a = np.asarray(value)
    return "array", a.dtype, a.shape, a.tobytes()


def same_leaf(a: Any, b: Any) -> bool:
    """Bit for bit: tensors and arrays by kind, dtype, shape and bytes (a NaN equals itself), floats by their
    bytes, other leaves by type and ==."""
    if isinstance(a, (torch.Tensor, np.ndarray, np.generic)) or isinstance(b, (torch.Tensor, np.ndarray, np.generic)):
        return _raw(a) == _raw(b)
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b


def differences(a: Mapping, b: Mapping) -> list[str]:
    """The paths where two flattened fingerprints differ (a path in one only counts), sorted."""
    return sorted(k for k in set(a) | set(b) if k not in a or k not in b or not same_leaf(a[k], b[k]))
