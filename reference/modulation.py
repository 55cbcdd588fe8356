"""Reference ``modulation`` (spec/modulation.py): the seed's pseudocode (§4.0.5.3), statistics in float64."""

from __future__ import annotations

import math

import torch

from rlspec.contracts.modulation import (
    CLIP,
    DEFAULTS,
    EPS,
    MIN_FINITE,
    validate_modulation_args,
)
from rlspec.contracts.validate import scalar_args


@scalar_args("episodes_completed", "min_episodes", "threshold_percentile", "alpha", "slope")
def modulation_scale(preds: torch.Tensor, episodes_completed: int, *, enable: bool = DEFAULTS["enable"],
                     min_episodes: int = DEFAULTS["min_episodes"],
                     threshold_percentile: float = DEFAULTS["threshold_percentile"],
                     alpha: float = DEFAULTS["alpha"], slope: float = DEFAULTS["slope"]) -> torch.Tensor | None:
    validate_modulation_args(preds, episodes_completed, min_episodes, threshold_percentile, alpha, slope)
    if not enable:
        return None
    one = torch.ones((), dtype=torch.float64, device=preds.device)
    if episodes_completed < min_episodes:  # §4.0.5.1: gate before any prediction is read
        return one
    x = preds.detach().double().reshape(-1)  # [N]
    x = x[torch.isfinite(x)]  # [n]: non-finite predictions filtered
    if x.numel() < MIN_FINITE:
        return one
    q = torch.quantile(x, threshold_percentile / 100, interpolation="linear")
    mu = x.mean()
    if not (math.isfinite(q) and math.isfinite(mu)):
        return one
    s = torch.clamp(q / slope, min=EPS)
    a = torch.clamp((mu - q) / s, -CLIP, CLIP)
    m = 1.0 / (1.0 + alpha * torch.sigmoid(a))
    return m if math.isfinite(m) else one
