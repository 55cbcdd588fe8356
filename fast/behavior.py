"""Fast ``behavior`` (spec/behavior.py): vectorized torch in the input dtype, on any device, no host sync
after validation.

* λ-returns through the fast lambda_return (one fused multiply-add per step, time loop only) and values
  through the fast twohot mean (softmax·bins per cache-sized chunk).
* The actor's log-softmax is formed once and gives both log π(a_t) (one gather) and the entropy.
* The critic's two cross-entropies share one logsumexp: with l the logits and (k, w) the two-hot bin and
  upper weight of a target, −log p(x) = lse(l) − ((1 − w)·l_k + w·l_{k+1}), so
  −log p(R) − β·log p(x_slow) = (1 + β)·lse(l) − picked(R) − β·picked(x_slow): one reduction over the bins
  for both targets, and the [H, B, bins] two-hot targets are never built.
* ``imagine`` is the reference's: its cost is the caller's img_step and policy, its own work one sample and
  one one-hot per step. ``update_slow_critic`` is one multi-tensor lerp (``torch._foreach_lerp_``).
"""

from __future__ import annotations

from typing import Any

import torch

from rlspec.contracts.behavior import BehaviorConfig, validate_behavior, validate_slow_update
from rlspec.contracts.twohot import support
from rlspec.contracts.validate import scalar_args
from rlspec.fast import twohot
from rlspec.fast.lambda_return import lambda_return
from rlspec.reference.behavior import imagine  # noqa: F401 - shared: the loop's cost is the callables


def critic_nll(value_logits: torch.Tensor, targets: torch.Tensor, coefs: tuple[float, ...],
               cfg: BehaviorConfig) -> torch.Tensor:
    """Σ_j coefs_j·(−log p(targets_j)) [...] for logits [..., bins] and targets [J, ...] (raw space)."""
    bins = support(cfg.num_bins, cfg.low, cfg.high, targets.dtype, targets.device)  # [bins]
    k, w_hi = twohot.locate(twohot.symlog(targets), bins)  # [J, ...] each
    pair_idx = torch.stack((k, k + 1), dim=-1)  # [J, ..., 2]
    logits = value_logits.unsqueeze(0).expand(targets.shape[0], *value_logits.shape)  # [J, ..., bins]
    picked = twohot.picked_logit(logits.gather(-1, pair_idx), w_hi.to(value_logits.dtype))  # [J, ...]
    weighted = sum(c * picked[j] for j, c in enumerate(coefs))  # [...]: Python floats, no host-to-device copy
    return sum(coefs) * torch.logsumexp(value_logits, dim=-1) - weighted


def behavior_losses(reward: torch.Tensor, cont_logits: torch.Tensor, value_logits: torch.Tensor,
                    slow_value_logits: torch.Tensor, actor_logits: torch.Tensor, actions: torch.Tensor,
                    start_terminal: torch.Tensor, return_ema: Any, cfg: BehaviorConfig = BehaviorConfig()
                    ) -> dict[str, torch.Tensor]:
    terminal = validate_behavior(reward, cont_logits, value_logits, slow_value_logits, actor_logits, actions,
                                 start_terminal, return_ema, cfg)
    hb = dict(num_bins=cfg.num_bins, low=cfg.low, high=cfg.high)
    v = twohot.mean(value_logits.detach(), **hb)  # [H+1, B]
    c = torch.sigmoid(cont_logits) if cfg.continue_mode == "prob" else (cont_logits > 0).to(reward.dtype)
    c = torch.cat([(~terminal).to(reward.dtype).unsqueeze(0), c[1:]])  # [H+1, B]
    R = lambda_return(reward.detach()[1:], c.detach()[1:], v, cfg.gamma, cfg.lam)  # [H, B]
    w = torch.cumprod(cfg.gamma * c.detach(), dim=0) / cfg.gamma  # [H+1, B]
    offset, invscale = return_ema.update(R)
    adv = (R - offset) / invscale - (v[:-1] - offset) / invscale  # [H, B]

    log_p = torch.log_softmax(actor_logits, dim=-1)  # [H+1, B, A]
    p = log_p.exp()
    entropy = -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)  # [H+1, B]: 0·log 0 = 0, no NaN grad
    chosen = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # [H+1, B]
    a_loss = -(w[:-1] * (chosen[:-1] * adv + cfg.entropy_coef * entropy[:-1])).mean()

    slow_target = twohot.mean(slow_value_logits.detach()[:-1], **hb)  # [H, B]
    nll = critic_nll(value_logits[:-1], torch.stack((R, slow_target)), (1.0, cfg.slow_reg), cfg)  # [H, B]
    c_loss = (w[:-1] * nll).mean()
    return dict(actor_loss=a_loss, critic_loss=c_loss, returns=R, values=v, continues=c.detach(), weights=w,
                advantage=adv, offset=offset, invscale=invscale, entropy=entropy.detach())


@scalar_args("rate")
def update_slow_critic(critic: Any, slow: Any, rate: float) -> None:
    """slow ← rate·critic + (1 − rate)·slow = lerp(slow, critic, rate), all parameters in one call."""
    src, dst = validate_slow_update(critic, slow, rate)
    with torch.no_grad():
        torch._foreach_lerp_(dst, src, rate)
