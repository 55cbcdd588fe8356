"""λ learning-rate modulation (seed 000 §4.0.5, §4.0.5.1, §5.3): M ∈ (0, 1] from the risk head's
predictions on the buffered embeddings, through the ``modulation`` contract's fast implementation.

The engine multiplies its Lagrange multiplier's learning rate by M for the next λ update (contract
``lagrange``: ``update(J_c, scale=M)``). M = 1 (no modulation) until ``modulation_min_episodes``
episodes have completed, with fewer than 10 finite predictions, and on any non-finite statistic.
Risk/ModulationActive is 1 when both gates pass (enough episodes, at least 10 finite predictions).
"""

from __future__ import annotations

import torch

from rlspec.contracts.modulation import MIN_FINITE
from rlspec.fast.modulation import modulation_scale
from rlspec.semantics.config import SemanticConfig


class LambdaModulator:
    def __init__(self, cfg: SemanticConfig):
        self.cfg = cfg
        self.last = {"Risk/ModulationScale": 1.0, "Risk/ModulationActive": 0.0}

    def scale(self, predictions: torch.Tensor, episodes_completed: int) -> float:
        """M for predictions ĝ [N] (any device) after ``episodes_completed`` finished episodes."""
        cfg = self.cfg
        m = modulation_scale(predictions, episodes_completed, enable=True, min_episodes=cfg.modulation_min_episodes,
                             threshold_percentile=cfg.threshold_percentile, alpha=cfg.alpha_modulation,
                             slope=cfg.slope)
        finite = int(torch.isfinite(predictions).sum())
        active = episodes_completed >= cfg.modulation_min_episodes and finite >= MIN_FINITE
        self.last = {"Risk/ModulationScale": float(m), "Risk/ModulationActive": float(active)}
        return float(m)
