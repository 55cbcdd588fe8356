"""Fast ``success_set`` (spec/success_set.py): Loss A and the mining primitives vectorized in the input dtype
(float32 within the spec's tolerances), on the input's device.

* loss_a: one log_softmax, one masked logsumexp and one gather over [N, A, B]; masked rows get a full
  positive set before the logsumexp (finite values, so torch.where's zero gradient stays zero, not NaN).
* top_k_successes: cosine of every query against the pool by one matmul of row-normalized embeddings
  [Q, E] @ [E, M]; a stable descending sort; cluster leaders by a scatter-min of sorted positions.
* divergence_step: per-step cosine over the common prefix and first-below-threshold / argmin without a
  Python loop.

The stateful parts (SuccessPrototypes, PairedQueue, BonusScheduler) are the reference's: they act once per
episode or per bonus phase, on host data.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from rlspec.contracts.success_set import (COS_EPS, Episode, LossA, PairPack, SuccessSetConfig, TopK,
                                          mine_pair_with, validate_divergence, validate_loss_a, validate_top_k)
from rlspec.contracts.validate import scalar_args
from rlspec.reference.success_set import BonusScheduler, PairedQueue, SuccessPrototypes  # noqa: F401 - shared

DEFAULT = SuccessSetConfig()


@scalar_args("tau", "margin")
def loss_a(logits: torch.Tensor, fail_actions: torch.Tensor, pos_mask: torch.Tensor, zone_weight: torch.Tensor,
           tau: float = DEFAULT.tau, margin: float = DEFAULT.margin, empty_positive: str = "mask") -> LossA:
    validate_loss_a(logits, fail_actions, pos_mask, zone_weight, tau, margin, empty_positive)
    logp = torch.log_softmax(logits, dim=-1)  # [N, A, B]
    valid = pos_mask.any(-1).all(-1)  # [N]
    positives = pos_mask | ~valid[:, None, None]  # [N, A, B] masked rows: every token (finite, then dropped)
    lp_pos = torch.logsumexp(logp.masked_fill(~positives, -math.inf), dim=-1).sum(-1)  # [N]
    lp_neg = logp.gather(-1, fail_actions.unsqueeze(-1)).squeeze(-1).sum(-1)  # [N]
    x = (lp_pos - lp_neg - margin) / tau  # [N]
    per_step = torch.where(valid, -zone_weight.to(logits.dtype) * torch.nn.functional.logsigmoid(x), 0.0)  # [N]
    loss = per_step.sum() / valid.sum().clamp_min(1)
    return LossA(loss, per_step, torch.where(valid, lp_pos, -math.inf).detach(), lp_neg.detach(), valid)


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(COS_EPS)


def top_k_successes(query: torch.Tensor, pool: torch.Tensor, k: int,
                    cluster_ids: torch.Tensor | None = None) -> TopK:
    validate_top_k(query, pool, k, cluster_ids)
    q, m = query.shape[0], pool.shape[0]
    sims = _unit_rows(query) @ _unit_rows(pool).T  # [Q, M]
    order = torch.sort(sims, dim=1, descending=True, stable=True).indices  # [Q, M] ties: lower row first
    if cluster_ids is not None:
        _, cluster = torch.unique(cluster_ids.to(sims.device), return_inverse=True)  # [M] ids 0..C-1
        sorted_cluster = cluster[order]  # [Q, M]
        position = torch.arange(m, device=sims.device).expand(q, m)  # [Q, M]
        first = torch.full((q, int(cluster.max()) + 1 if m else 1), m, device=sims.device)
        first = first.scatter_reduce(1, sorted_cluster, position, "amin")  # [Q, C] first position per cluster
        follower = (first.gather(1, sorted_cluster) != position).to(torch.int8)  # [Q, M] 0 for leaders
        order = order.gather(1, torch.sort(follower, dim=1, stable=True).indices)
    indices = order[:, :min(k, m)]
    return TopK(indices, sims.gather(1, indices))


@scalar_args("threshold")
def divergence_step(fail_states: torch.Tensor, succ_states: torch.Tensor, threshold: float = DEFAULT.sim_threshold
                    ) -> int:
    validate_divergence(fail_states, succ_states, threshold)
    t = min(fail_states.shape[0], succ_states.shape[0])
    f, s = fail_states[:t], succ_states[:t]  # [T, O]
    sims = (f * s).sum(-1) / (f.norm(dim=-1).clamp_min(COS_EPS) * s.norm(dim=-1).clamp_min(COS_EPS))  # [T]
    below = sims < threshold
    return int(torch.where(below.any(), below.to(torch.int8).argmax(), sims.argmin()))


def mine_pair(fail: Episode, successes: Sequence[Episode], config: SuccessSetConfig = DEFAULT) -> PairPack | None:
    return mine_pair_with(top_k_successes, divergence_step, fail, successes, config)
