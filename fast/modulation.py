"""Fast ``modulation`` (spec/modulation.py): on the predictions' device, no host synchronization.

Every data-dependent gate (fewer than 10 finite predictions, non-finite statistics) is a ``torch.where``,
and the finite subset is never materialized (its size would need a sync): non-finite entries sort to the
end as +inf, and the quantile reads the order statistics at p·(n − 1) with n a device tensor. Only the
configuration (enable, episode counts: host integers) is branched on.
"""

from __future__ import annotations

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
    dtype = torch.float64 if preds.dtype == torch.float64 else torch.float32
    one = torch.ones((), dtype=dtype, device=preds.device)
    if episodes_completed < min_episodes:
        return one
    x = preds.detach().reshape(-1).to(dtype)  # [N]
    if x.numel() < MIN_FINITE:  # a shape, not a value: no sync
        return one
    finite = torch.isfinite(x)  # [N]
    n = finite.sum()  # 0-d int64
    v = torch.sort(torch.where(finite, x, torch.inf)).values  # [N]: finite values first, ascending
    pos = (threshold_percentile / 100) * (n - 1).clamp(min=0).to(dtype)  # 0-d
    lo = pos.floor().long()
    hi = torch.minimum(lo + 1, (n - 1).clamp(min=0))
    v_lo, v_hi = v.gather(0, torch.stack((lo, hi)))  # 0-d each; v[lo] would read lo back to the host
    q = torch.lerp(v_lo, v_hi, pos - lo.to(dtype))  # linear interpolation (torch.quantile)
    mu = torch.where(finite, x, 0.0).sum() / n.clamp(min=1).to(dtype)
    s = torch.clamp(q / slope, min=EPS)
    a = torch.clamp((mu - q) / s, -CLIP, CLIP)
    m = 1.0 / (1.0 + alpha * torch.sigmoid(a))
    ok = (n >= MIN_FINITE) & torch.isfinite(q) & torch.isfinite(mu) & torch.isfinite(m)
    return torch.where(ok, m, one)
