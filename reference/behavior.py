"""Reference ``behavior`` (spec/behavior.py): DreamerV3 actor-critic learning in imagination, float64 inside.

``behavior_losses`` is the composition of the six formula steps in :class:`Steps` (one small function per
formula of the spec); ``losses_with(steps)`` builds it from any set of steps, so a variant differs from the
reference in exactly the step it replaces. Every step computes in float64 and returns the input dtype.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from rlspec.contracts.behavior import (
    BehaviorConfig,
    Imagination,
    check_policy_out,
    check_step_out,
    map_state,
    sample_categorical,
    stack_states,
    validate_behavior,
    validate_imagine,
    validate_slow_update,
)
from rlspec.contracts.validate import scalar_args
from rlspec.reference import twohot
from rlspec.reference.lambda_return import lambda_return

F64 = torch.float64


@scalar_args("horizon")
def imagine(img_step: Callable, policy: Callable, start_state: Any, horizon: int,
            gen: torch.Generator) -> Imagination:
    """Roll ``horizon`` steps: a_t ~ π(·|sg(s_t)) from ``gen``, s_{t+1} = img_step(s_t, onehot(a_t))."""
    batch = validate_imagine(img_step, policy, start_state, horizon, gen)
    states, actions, logits, n_act = [start_state], [], [], None
    for t in range(horizon + 1):
        step_logits = policy(map_state(torch.Tensor.detach, states[t]))  # [B, A]: no actor grad into the model
        n_act = check_policy_out(step_logits, batch, n_act, t)
        action = sample_categorical(step_logits, gen)  # [B]
        logits.append(step_logits)
        actions.append(action)
        if t < horizon:
            onehot = torch.nn.functional.one_hot(action, n_act).to(step_logits.dtype)  # [B, A]
            nxt = img_step(states[t], onehot)
            check_step_out(nxt, start_state, t)
            states.append(nxt)
    return Imagination(stack_states(states), torch.stack(actions), torch.stack(logits))


# --------------------------------------------------------------------------------------------------
# The formula steps (spec/behavior.py "Formula"), each [H+1, B] time-major
# --------------------------------------------------------------------------------------------------
def continues(cont_logits: torch.Tensor, start_terminal: torch.Tensor, cfg: BehaviorConfig) -> torch.Tensor:
    """c_0 = 1 − start_terminal; c_t = 1[l_t > 0] ("mode") or σ(l_t) ("prob") for t >= 1.  [H+1, B]"""
    l = cont_logits.to(F64)
    c = (l > 0).to(F64) if cfg.continue_mode == "mode" else torch.sigmoid(l)
    first = 1.0 - start_terminal.to(F64)  # [B]
    return torch.cat([first.unsqueeze(0), c[1:]]).to(cont_logits.dtype)


def returns(reward: torch.Tensor, c: torch.Tensor, v: torch.Tensor, cfg: BehaviorConfig) -> torch.Tensor:
    """R_t = r_{t+1} + γc_{t+1}((1 − λ)v_{t+1} + λR_{t+1}), R_H = v_H, t < H: lambda_return on rows 1..H,
    all inputs stop-gradient.  [H, B]"""
    return lambda_return(reward.detach()[1:], c.detach()[1:], v.detach(), cfg.gamma, cfg.lam)


def weights(c: torch.Tensor, cfg: BehaviorConfig) -> torch.Tensor:
    """w_t = cumprod(γc)_t / γ = γ^t·Π_{k<=t} c_k, stop-gradient.  [H+1, B]"""
    return (torch.cumprod(cfg.gamma * c.detach().to(F64), dim=0) / cfg.gamma).to(c.dtype)


def advantage(R: torch.Tensor, v: torch.Tensor, return_ema: Any) -> tuple[torch.Tensor, ...]:
    """(adv [H, B], offset, invscale): the EMA updated with R, adv = (R − o)/s − (v_t − o)/s, stop-gradient."""
    offset, invscale = return_ema.update(R.detach())
    o, s = offset.to(F64), invscale.to(F64)
    adv = (R.detach().to(F64) - o) / s - (v.detach()[:-1].to(F64) - o) / s
    return adv.to(R.dtype), offset, invscale


def actor_loss(actor_logits: torch.Tensor, actions: torch.Tensor, adv: torch.Tensor, w: torch.Tensor,
               cfg: BehaviorConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(−mean_{t<H}(w_t·(log π(a_t|s_t)·adv_t + η·H[π(·|s_t)])), entropy [H+1, B]): REINFORCE."""
    log_p = torch.log_softmax(actor_logits.to(F64), dim=-1)  # [H+1, B, A]
    p = log_p.exp()
    # 0·log 0 = 0, with log 0 replaced before the product: a masked action (logit −inf) has p = 0 and
    # log p = −inf, and p·log p there would give the logits a NaN gradient even where its value is masked out
    entropy = -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)  # [H+1, B]
    chosen = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # [H+1, B]
    objective = chosen[:-1] * adv.to(F64) + cfg.entropy_coef * entropy[:-1]  # [H, B]; adv, w: already sg
    loss = -(w[:-1].to(F64) * objective).mean()
    return loss.to(actor_logits.dtype), entropy.detach().to(actor_logits.dtype)


def critic_loss(value_logits: torch.Tensor, slow_value_logits: torch.Tensor, R: torch.Tensor, w: torch.Tensor,
                cfg: BehaviorConfig) -> torch.Tensor:
    """mean_{t<H}(w_t·(−log p_t(sg R_t) − β·log p_t(sg mean(slow_t)))), p_t the critic's symlog two-hot."""
    support = dict(num_bins=cfg.num_bins, low=cfg.low, high=cfg.high)
    logits = value_logits[:-1].to(F64)  # [H, B, bins]
    slow_target = twohot.mean(slow_value_logits.detach()[:-1].to(F64), support_dtype=value_logits.dtype, **support)
    target = R.to(F64)  # [H, B]: already sg (``returns``)
    nll = -twohot.log_prob(logits, target, support_dtype=value_logits.dtype, **support) \
        - cfg.slow_reg * twohot.log_prob(logits, slow_target, support_dtype=value_logits.dtype, **support)
    return (w[:-1].to(F64) * nll).mean().to(value_logits.dtype)  # w: already sg


class Steps(NamedTuple):
    continues: Callable = continues
    returns: Callable = returns
    weights: Callable = weights
    advantage: Callable = advantage
    actor_loss: Callable = actor_loss
    critic_loss: Callable = critic_loss


def losses_with(steps: Steps) -> Callable[..., dict]:
    """``behavior_losses`` built from ``steps``."""

    def behavior_losses(reward: torch.Tensor, cont_logits: torch.Tensor, value_logits: torch.Tensor,
                        slow_value_logits: torch.Tensor, actor_logits: torch.Tensor, actions: torch.Tensor,
                        start_terminal: torch.Tensor, return_ema: Any, cfg: BehaviorConfig = BehaviorConfig()
                        ) -> dict[str, torch.Tensor]:
        terminal = validate_behavior(reward, cont_logits, value_logits, slow_value_logits, actor_logits, actions,
                                     start_terminal, return_ema, cfg)
        support = dict(num_bins=cfg.num_bins, low=cfg.low, high=cfg.high)
        v = twohot.mean(value_logits.detach(), **support)  # [H+1, B]: the critic's values, stop-gradient
        c = steps.continues(cont_logits, terminal, cfg)  # [H+1, B]
        R = steps.returns(reward, c, v, cfg)  # [H, B]
        w = steps.weights(c, cfg)  # [H+1, B]
        adv, offset, invscale = steps.advantage(R, v, return_ema)  # [H, B]
        a_loss, entropy = steps.actor_loss(actor_logits, actions, adv, w, cfg)
        c_loss = steps.critic_loss(value_logits, slow_value_logits, R, w, cfg)
        return dict(actor_loss=a_loss, critic_loss=c_loss, returns=R, values=v, continues=c.detach(),
                    weights=w, advantage=adv, offset=offset, invscale=invscale, entropy=entropy)

    return behavior_losses


behavior_losses = losses_with(Steps())


@scalar_args("rate")
def update_slow_critic(critic: Any, slow: Any, rate: float) -> None:
    """slow ← rate·critic + (1 − rate)·slow for every parameter, in place (float64 arithmetic)."""
    src, dst = validate_slow_update(critic, slow, rate)
    with torch.no_grad():
        for a, b in zip(src, dst):
            b.copy_(rate * a.to(F64) + (1 - rate) * b.to(F64))
