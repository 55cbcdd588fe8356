"""Planted bugs for contract ``behavior``: the reference with one formula step (or imagine's sampler) replaced."""

from __future__ import annotations

import types

import torch
from planted import Planted
from rlspec.fast.lambda_return import lambda_return as differentiable_lambda_return
from rlspec.reference import behavior as ref


def _behavior(imagine=ref.imagine, **steps) -> types.SimpleNamespace:
    return types.SimpleNamespace(imagine=imagine, behavior_losses=ref.losses_with(ref.Steps(**steps)),
                                 update_slow_critic=ref.update_slow_critic)


def _unnormalized_advantage(R, v, return_ema):
    """adv = R − v: the EMA is updated (and reported) but the advantage is not divided by its scale."""
    _, offset, invscale = ref.advantage(R, v, return_ema)
    return (R - v[:-1]).detach(), offset, invscale


def _returns_with_gradient(reward, c, v, cfg):
    """The critic's target keeps its graph to the world model's reward/continue heads (no stop-gradient)."""
    return differentiable_lambda_return(reward[1:], c[1:], v, cfg.gamma, cfg.lam)


def _swapped_continue(cont_logits, start_terminal, cfg):
    """"mode" computes the probability and "prob" the mode."""
    other = "prob" if cfg.continue_mode == "mode" else "mode"
    return ref.continues(cont_logits, start_terminal, types.SimpleNamespace(continue_mode=other))


def _weights_with_gradient(c, cfg):
    """cumprod(γc)/γ without the stop-gradient: with a probability continue the actor trains the continue head."""
    return torch.cumprod(cfg.gamma * c, dim=0) / cfg.gamma


def _bootstrap_through_terminal(reward, c, v, cfg):
    """λ-returns computed with continue ≡ 1: the value after a terminal state still bootstraps."""
    return ref.returns(reward, torch.ones_like(c), v, cfg)


def _entropy_penalty(actor_logits, actions, adv, w, cfg):
    """The entropy term with the wrong sign: a penalty on exploration instead of a bonus."""
    return ref.actor_loss(actor_logits, actions, adv, w, types.SimpleNamespace(entropy_coef=-cfg.entropy_coef))


def _continue_mode_at_zero(cont_logits, start_terminal, cfg):
    """"mode" as 1[l >= 0]: a logit of exactly 0 (probability 0.5) counts as continuing."""
    c = ref.continues(cont_logits, start_terminal, cfg)
    if cfg.continue_mode == "mode":
        c = torch.cat([c[:1], (cont_logits[1:] >= 0).to(c.dtype)])
    return c


def _entropy_with_graph(actor_logits, actions, adv, w, cfg):
    """The entropy diagnostic returned with its graph (a logged metric that keeps the actor's graph alive)."""
    loss, _ = ref.actor_loss(actor_logits, actions, adv, w, cfg)
    p = actor_logits.softmax(-1)
    return loss, -(p * actor_logits.log_softmax(-1)).sum(-1)


def _global_rng_imagine(img_step, policy, start_state, horizon, gen):
    """Samples with torch.multinomial on the global RNG; the generator is accepted and ignored."""
    states, actions, logits = [start_state], [], []
    for t in range(horizon + 1):
        step_logits = policy(ref.map_state(torch.Tensor.detach, states[t]))
        action = torch.multinomial(torch.softmax(step_logits.detach().double(), -1), 1).squeeze(-1)
        logits.append(step_logits)
        actions.append(action)
        if t < horizon:
            onehot = torch.nn.functional.one_hot(action, step_logits.shape[-1]).to(step_logits.dtype)
            states.append(img_step(states[t], onehot))
    return ref.Imagination(ref.stack_states(states), torch.stack(actions), torch.stack(logits))


PLANTED_BEHAVIOR = (
    Planted("unnormalized advantage", "behavior", _behavior(advantage=_unnormalized_advantage),
            "BEHAV-7", "advantage at scale", ("BEHAV-3", "BEHAV-6", "BEHAV-8")),
    Planted("critic target without stop-gradient", "behavior", _behavior(returns=_returns_with_gradient),
            "BEHAV-6", "critic_loss has a gradient to 'reward'", ("BEHAV-3", "BEHAV-4", "BEHAV-7")),
    Planted("continue probability and mode swapped", "behavior", _behavior(continues=_swapped_continue),
            "BEHAV-3", "continues (continue_mode=", ("BEHAV-6", "BEHAV-7")),
    Planted("trajectory weights without stop-gradient", "behavior", _behavior(weights=_weights_with_gradient),
            "BEHAV-3", "weights carry a gradient", ("BEHAV-4", "BEHAV-8")),
    Planted("bootstrap through a terminal", "behavior", _behavior(returns=_bootstrap_through_terminal),
            "BEHAV-8", "at a terminal", ("BEHAV-3", "BEHAV-6")),
    Planted("entropy sign flipped", "behavior", _behavior(actor_loss=_entropy_penalty),
            "BEHAV-5", "actor_loss", ("BEHAV-3", "BEHAV-4", "BEHAV-6", "BEHAV-8")),
    Planted("continue mode 1[l >= 0]", "behavior", _behavior(continues=_continue_mode_at_zero),
            "BEHAV-3", "continues (continue_mode='mode')", ("BEHAV-6", "BEHAV-7")),
    Planted("entropy diagnostic keeps its graph", "behavior", _behavior(actor_loss=_entropy_with_graph),
            "BEHAV-6", "the returned 'entropy' carries a graph", ("BEHAV-3", "BEHAV-4", "BEHAV-5")),
    Planted("sampling on the global RNG", "behavior", _behavior(imagine=_global_rng_imagine),
            "BEHAV-2", "global RNG", ("BEHAV-1", "BEHAV-6")),
)


def _imagine_detached_states(img_step, policy, start_state, horizon, gen):
    """every imagined state cut from the graph: the same values, no gradient back to the start state."""
    return ref.imagine(lambda s, onehot: ref.map_state(torch.Tensor.detach, img_step(s, onehot)), policy,
                       start_state, horizon, gen)


PLANTED_BEHAVIOR_GRAPH = (
    Planted("imagined states detached from img_step's graph", "behavior", _behavior(imagine=_imagine_detached_states),
            "BEHAV-6", "img_step's graph kept", ("BEHAV-1", "BEHAV-2")),
)
