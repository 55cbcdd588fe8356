"""Runtime half of contract ``modulation`` (the formula, clauses and properties: spec/modulation.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import require_floating, require_int, require_range

DEFAULTS = dict(enable=True, min_episodes=10, threshold_percentile=60.0, alpha=1.0, slope=1.0)


MIN_FINITE = 10  # §4.0.5 implementation note 2


EPS = 1e-6  # §4.0.5: s = max(q_p/slope, ε)


CLIP = 20.0  # §4.0.5: A = 20


def validate_modulation_args(preds: torch.Tensor, episodes_completed: int, min_episodes: int,
                             threshold_percentile: float, alpha: float, slope: float) -> None:
    """Shared by every implementation; reads no tensor values (no host synchronization)."""
    fn = "modulation_scale"
    require_floating(fn, "preds", preds)
    require_int(fn, "episodes_completed", episodes_completed, 0)
    require_int(fn, "min_episodes", min_episodes, 0)
    require_range(fn, "threshold_percentile", threshold_percentile, 0.0, 100.0, lo_open=True, hi_open=True)
    require_range(fn, "alpha", alpha, 0.0, math.inf, hi_open=True)
    require_range(fn, "slope", slope, 0.0, math.inf, lo_open=True, hi_open=True)
