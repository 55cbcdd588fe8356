"""The loss an update logs when the numerics contract's LossGuard stood in for some of its steps (a non-finite
loss becomes a detached 0 and is counted).

The guard is for a rare non-finite step. When it replaced every step's loss of one kind in an update, that
network learned nothing in it (a critic whose outputs overflowed stays so), and going on would train the rest
against it. The update then logs that loss as NaN, so the engine's finite check stops the run as Diverged,
naming the loss, with the last clean checkpoint kept; a partly replaced update logs the mean with its zeros.
"""

from __future__ import annotations

import math


def logged_loss(total: float, steps: int, replaced: int) -> float:
    """total / steps, the mean of an update's per-step losses (a replaced one counted as 0); NaN when the guard
    replaced all ``steps`` of them in this update (``replaced``), or there was no step."""
    return math.nan if replaced >= steps else total / steps
