"""The safe-RL update's one entry point: every algorithm of ``safe_ppo.ALGOS``, dispatched by its family —
the PPO family's clipped surrogate (rlspec/algos/safe_ppo.py ``update``), P3O's minibatch loss on the same loop
(rlspec/algos/trust_region.py ``p3o_update``), or the natural-gradient step of TRPO, TRPOLag, TRPOPID and CPO
(``natural_update``). The engines call this ``update`` only."""

from __future__ import annotations

import torch

from rlspec.algos import safe_ppo
from rlspec.algos.safe_ppo import ALGOS, LOCAL, Comm, Kit, PPOConfig, Rollout, SafePPOState, SafetyConfig
from rlspec.algos.trust_region import TrustRegionConfig, natural_update, p3o_update


def update(state: SafePPOState, batch: Rollout, jc: float, ppo: PPOConfig, safety: SafetyConfig, kit: Kit,
           gen: torch.Generator, progress: float = 0.0, comm: Comm = LOCAL,
           tr: TrustRegionConfig = TrustRegionConfig(), lambda_scale: float = 1.0) -> dict[str, float]:
    """One update of ``state.algo`` (arguments as ``safe_ppo.update``; ``tr``: the trust-region settings).
    ``lambda_scale`` (PPOLagSem's modulation M) reaches the PPO family's λ step only. The rollout's training
    fields move to the networks' device first (a GPU policy; nothing moves on the host)."""
    batch = batch.to(state.device)
    family = ALGOS[state.algo].family
    if family == "ppo":
        return safe_ppo.update(state, batch, jc, ppo, safety, kit, gen, progress, comm, lambda_scale=lambda_scale)
    if family == "p3o":
        return p3o_update(state, batch, jc, ppo, safety, kit, gen, progress, comm, tr)
    return natural_update(state, batch, jc, ppo, safety, kit, gen, comm, tr)
