"""Planted bugs for the safe-control contracts (``modulation``, ``lagrange``): the reference with one bug each."""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.contracts.modulation import CLIP, EPS, MIN_FINITE
from rlspec.reference import lagrange as ref_lag
from rlspec.reference import modulation as ref_mod


def _modulation_sign_flipped(preds, episodes_completed, *, enable=True, min_episodes=10, threshold_percentile=60.0,
                             alpha=1.0, slope=1.0):
    """Accelerating instead of damping: σ(−a) in place of σ(a), so M grows with the relative tail risk."""
    m = ref_mod.modulation_scale(preds, episodes_completed, enable=enable, min_episodes=min_episodes,
                                 threshold_percentile=threshold_percentile, alpha=alpha, slope=slope)
    if m is None or float(m) == 1.0:  # gates untouched
        return m
    g = (1.0 / float(m) - 1.0) / alpha if alpha else 0.5  # σ(a) recovered from M
    return torch.tensor(1.0 / (1.0 + alpha * (1.0 - g)), dtype=torch.float64)  # σ(−a) = 1 − σ(a)


def _modulation_before_gate(preds, episodes_completed, *, enable=True, min_episodes=10, threshold_percentile=60.0,
                            alpha=1.0, slope=1.0):
    """The statistic is computed and returned before the episode-count gate is consulted."""
    x = preds.double().reshape(-1)
    x = x[torch.isfinite(x)]
    if enable and x.numel() >= MIN_FINITE:
        q = torch.quantile(x, threshold_percentile / 100)
        a = torch.clamp((x.mean() - q) / torch.clamp(q / slope, min=EPS), -CLIP, CLIP)
        return 1.0 / (1.0 + alpha * torch.sigmoid(a))
    return ref_mod.modulation_scale(preds, episodes_completed, enable=enable, min_episodes=min_episodes,
                                    threshold_percentile=threshold_percentile, alpha=alpha, slope=slope)


class _UnprojectedAscent(ref_lag.DualAscent):
    """λ allowed negative: the max(0, ·) projection is missing."""

    def update(self, jc, scale=1.0):
        self.lagrangian_multiplier = self.lagrangian_multiplier + self.lr * float(scale) * (float(jc) - self.cost_limit)
        return self.lagrangian_multiplier.clone()


def _lag(**overrides) -> types.SimpleNamespace:
    base = {n: getattr(ref_lag, n) for n in ("DualAscent", "OmniSafeLagrange", "PIDLagrangian", "SauteBudget",
                                             "SimmerPID")}
    return types.SimpleNamespace(**{**base, **overrides})


PLANTED_SAFE_CONTROL = (
    Planted("modulation sign flipped", "modulation", types.SimpleNamespace(modulation_scale=_modulation_sign_flipped),
            "MOD-3", "M rose from", ("MOD-2", "MOD-4", "MOD-9")),
    Planted("modulation before the episode gate", "modulation",
            types.SimpleNamespace(modulation_scale=_modulation_before_gate), "MOD-5", "expected exactly 1.0",
            ("MOD-1", "MOD-2", "MOD-3", "MOD-4")),
    Planted("lambda allowed negative", "lagrange", _lag(DualAscent=_UnprojectedAscent), "LAG-1", "< 0 after update",
            ("LAG-2", "LAG-5", "LAG-6", "LAG-9")),
)
