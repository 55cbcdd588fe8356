"""λ learning-rate modulation (PPOLagSem design §4.0.5, §4.0.5.1, §5.3): M ∈ (0, 1] from the risk head's
predictions on the buffered embeddings, through the ``modulation`` contract's fast implementation.

The engine multiplies its Lagrange multiplier's learning rate by M for the next λ update (contract
``lagrange``: ``update(J_c, scale=M)``). M_raw = 1 (no modulation) until ``modulation_min_episodes``
episodes have completed, with fewer than 10 finite predictions, on any non-finite statistic, and while the
risk head's correlation with its targets is below ``modulation_corr_min`` (§4.0.5.1's quality gate). M is
M_raw smoothed: M ← (1 − β)·M + β·M_raw with β = ``modulation_ema`` (§4.0.5.1's EMA; M starts at 1, β = 1
is no smoothing), so M stays in (0, 1]. Risk/ModulationActive is 1 when every gate passes (enough episodes,
at least 10 finite predictions, the correlation); Risk/ModulationRaw is M_raw, Risk/ModulationScale is M.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlspec.contracts.modulation import MIN_FINITE
from rlspec.fast.modulation import modulation_scale as fast_modulation_scale
from rlspec.semantics.config import SemanticConfig
from rlspec.semantics.telemetry import MODULATION_KEYS


class LambdaModulator:
    def __init__(self, cfg: SemanticConfig, modulation_scale: Callable = fast_modulation_scale):
        """``modulation_scale``: contract modulation's implementation (the run's kit; default the fast twin)."""
        self.cfg, self.modulation_scale = cfg, modulation_scale
        self.last = dict.fromkeys(MODULATION_KEYS, 1.0) | {"Risk/ModulationActive": 0.0}

    def scale(self, predictions: torch.Tensor, episodes_completed: int, corr: float) -> float:
        """M for predictions ĝ [N] (any device) after ``episodes_completed`` finished episodes, the risk head's
        correlation with its targets being ``corr``; M of the previous call is the EMA's memory."""
        cfg = self.cfg
        m = self.modulation_scale(predictions, episodes_completed, enable=True,
                                  min_episodes=cfg.modulation_min_episodes,
                                  threshold_percentile=cfg.threshold_percentile, alpha=cfg.alpha_modulation,
                                  slope=cfg.slope)
        finite = int(torch.isfinite(predictions).sum())
        trusted = corr >= cfg.modulation_corr_min
        active = episodes_completed >= cfg.modulation_min_episodes and finite >= MIN_FINITE and trusted
        raw = float(m) if trusted else 1.0
        beta = cfg.modulation_ema
        smoothed = (1 - beta) * self.last["Risk/ModulationScale"] + beta * raw
        self.last = {"Risk/ModulationScale": smoothed, "Risk/ModulationRaw": raw,
                     "Risk/ModulationActive": float(active)}
        return smoothed
