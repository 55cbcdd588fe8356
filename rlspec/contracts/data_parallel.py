"""Runtime half of contract ``data_parallel`` (clauses and properties: spec/data_parallel.py): how a global
batch is split over the ranks by default, and how close two updates' parameters must be. Imports only numpy and
torch; parameters are nested the way a trainer's fingerprint is (rlspec/contracts/trainer.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlspec.contracts.trainer import same_leaf

# W ranks sum their shards' gradients in another order than one process does, and a few optimizer steps
# carry that rounding on: float32 parameters agree to about 1e-6 (torch.testing's float32 default); the
# contract allows 100 times that relative, 1e-5 absolute
RTOL, ATOL = 1e-4, 1e-5


def shard(batch: Any, rank: int, world: int) -> Any:
    """Rank ``rank``'s contiguous part (of ``world`` equal parts) of every tensor and array along dim 0; other
    leaves as they are, in the same nesting."""
    if isinstance(batch, Mapping):
        return {k: shard(v, rank, world) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(shard(v, rank, world) for v in batch)
    if not isinstance(batch, (torch.Tensor, np.ndarray)):
        return batch
    if batch.shape[0] % world:
        raise ValueError(f"shard: a batch entry of {batch.shape[0]} rows does not split into {world} equal parts")
    n = batch.shape[0] // world
    return batch[rank * n:(rank + 1) * n]


def _gap(a: Any, b: Any) -> float:
    """max |a − b| − (atol + rtol·|b|) over the entries (> 0: too far; inf: shapes or kinds differ)."""
    a, b = (torch.as_tensor(np.asarray(v) if not isinstance(v, torch.Tensor) else v).detach().cpu().double()
            for v in (a, b))
    if a.shape != b.shape:
        return float("inf")
    both_nan = a.isnan() & b.isnan()
    gap = ((a - b).abs() - (ATOL + RTOL * b.abs())).masked_fill(both_nan, -1.0).nan_to_num(float("inf"))
    return float(gap.max()) if gap.numel() else -1.0


def _numeric(v: Any) -> bool:
    return isinstance(v, (torch.Tensor, np.ndarray, np.generic, int, float)) and not isinstance(v, bool)


def too_far(got: Mapping, want: Mapping) -> list[str]:
    """The paths of two flattened parameter sets that are not within RTOL / ATOL (numbers and arrays) or not
    equal (other leaves); a path in one only counts. Sorted."""
    out = []
    for k in sorted(set(got) | set(want)):
        if k not in got or k not in want:
            out.append(k)
        elif _numeric(got[k]) and _numeric(want[k]):
            if _gap(got[k], want[k]) > 0:
                out.append(k)
        elif not same_leaf(got[k], want[k]):
            out.append(k)
    return out
