"""Golden fixture for contract ``behavior`` from sheeprl 0.8.4's DreamerV3 behaviour learning.

sheeprl's own ``imagine``, ``actor_loss`` and ``critic_loss`` (sheeprl/algos/dreamer_v3/dreamer_v3.py) and its
``Moments`` run on a tiny imagined batch in float32. Its networks are stubs holding their weights: a linear-tanh
RSSM ``imagination``, linear reward / continue heads, a linear actor whose categorical policy samples from an
explicit generator (the sampled actions are stored), a linear critic and target critic. The fixture stores the
imagined trajectories, the heads' outputs, the critic weights, the stored actions and the Moments state before
the update; the golden test rebuilds our inputs from them and compares the λ-values, discounts, values, the
Moments outputs, both losses and the gradients of the losses w.r.t. the actor's and the critic's weights.
"""

from __future__ import annotations

import types

import torch
from sheeprl.algos.dreamer_v3.dreamer_v3 import actor_loss, critic_loss, imagine
from sheeprl.algos.dreamer_v3.utils import Moments
from sheeprl.utils.distribution import TwoHotEncodingDistribution
from torch import nn
from torch.distributions import OneHotCategoricalStraightThrough

from rlspec.golden_bridge.manifest import Fixture

PACKAGE = "sheeprl"
EPS32 = torch.finfo(torch.float32).eps
H, N, A, S, K, R = 3, 3, 3, 1, 2, 2  # horizon, start states, actions, stochastic S×K, recurrent size
L = S * K + R  # latent size
GAMMA, LMBDA, ENT = 1 - 1 / 333, 0.95, 3e-4
EMA_LOW, EMA_HIGH = -2.0, 6.0  # a Moments state mid-training, so that invscale is above its floor of 1


def _linear(g: torch.Generator, n_in: int, n_out: int, scale: float) -> nn.Linear:
    """nn.Linear with weights drawn from ``g`` and rounded to 1/64 (short JSON decimals)."""
    layer = nn.Linear(n_in, n_out)
    with torch.no_grad():
        layer.weight.copy_(torch.round(scale * torch.randn(n_out, n_in, generator=g) * 64) / 64)
        layer.bias.copy_(torch.round(scale * torch.randn(n_out, generator=g) * 64) / 64)
    return layer


class _RSSM(nn.Module):
    """imagination(prior [1, N, S·K], h [1, N, R], action [1, N, A]) -> (prior', h'): a linear-tanh recurrence."""

    def __init__(self, g: torch.Generator):
        super().__init__()
        self.rec, self.stoch = _linear(g, L + A, R, 0.7), _linear(g, R, S * K, 0.7)

    def imagination(self, prior, h, action):
        h = torch.tanh(self.rec(torch.cat([prior.reshape(1, N, -1), h, action], -1)))
        return torch.tanh(self.stoch(h)), h


class _Actor(nn.Module):
    """forward(x, clip) -> ([one-hot samples], [OneHotCategoricalStraightThrough(logits)]), drawn from ``gen``."""

    def __init__(self, g: torch.Generator, sampler: torch.Generator):
        super().__init__()
        self.head, self.sampler = _linear(g, L, A, 1.0), sampler

    def forward(self, x, clip=False):
        dist = OneHotCategoricalStraightThrough(logits=self.head(x))
        flat = dist.probs.reshape(-1, A)
        ids = torch.multinomial(flat.detach(), 1, generator=self.sampler).reshape(dist.probs.shape[:-1])
        return [nn.functional.one_hot(ids, A).to(x.dtype)], [dist]


def behavior_losses(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    rssm, actor = _RSSM(g), _Actor(g, torch.Generator().manual_seed(seed + 1))
    reward_head, continue_head = _linear(g, L, 255, 0.5), _linear(g, L, 1, 1.0)
    with torch.no_grad():
        continue_head.bias.add_(3.0)  # mostly continuing, with some predicted terminals
    critic, target_critic = _linear(g, L, 255, 0.5), _linear(g, L, 255, 0.5)
    world_model = types.SimpleNamespace(rssm=rssm, reward_model=reward_head, continue_model=continue_head)
    posteriors = torch.round(torch.rand(1, N, S, K, generator=g) * 8) / 8  # [1, N, S, K]
    recurrent = torch.round(torch.randn(1, N, R, generator=g) * 8) / 8  # [1, N, R]
    terminated = torch.tensor([[0.0], [1.0], [0.0]]).reshape(1, N, 1)  # sheeprl data["terminated"] [T=1, B=N, 1]
    with torch.no_grad():
        traj, actions, values, lambda_values, discount = imagine(
            world_model, actor, critic, posteriors, recurrent, terminated, horizon=H, gamma=GAMMA, lmbda=LMBDA)
        reward = TwoHotEncodingDistribution(reward_head(traj), dims=1).mean  # [H+1, N, 1]
        cont_logits = continue_head(traj)  # [H+1, N, 1]
    moments = Moments(decay=0.99, max_=1.0, percentile_low=0.05, percentile_high=0.95)
    moments.low, moments.high = torch.tensor(EMA_LOW), torch.tensor(EMA_HIGH)

    class _Fabric:
        all_gather = staticmethod(lambda x: x)

    offset, invscale = moments(lambda_values, _Fabric())
    policy_loss = actor_loss(actor, traj, actions, values, lambda_values, discount, offset, invscale,
                             objective_mix=None, is_continuous=False, actions_dim=(A,), ent_coef=ENT)
    policy_loss.backward()
    value_loss = critic_loss(critic, target_critic, traj, lambda_values, discount)
    value_loss.backward()
    sq = lambda t: t.squeeze(-1)  # noqa: E731 - sheeprl's trailing 1 -> ours
    return Fixture(
        path="behavior/sheeprl_behavior_losses.json", contract="behavior", package=PACKAGE,
        qualname="sheeprl.algos.dreamer_v3.dreamer_v3.imagine, actor_loss, critic_loss (+ utils.Moments)",
        seed=seed, atol=64 * EPS32, rtol=64 * EPS32,
        why="float32 on both sides, the same linear layers; the λ-values take H = 3 steps and the losses are means "
            "of H·N terms of 255-bin log-softmaxes: a few dozen eps relative",
        convention="sheeprl rows are states s_0..s_H with reward/continue predicted on arrival (as ours); trailing 1 "
                   "squeezed; actions stored as float ids (sheeprl: one-hot); actor_logits = actor_w·traj + actor_b, "
                   "value_logits / slow_value_logits from critic_* / target_* the same way; start_terminal = "
                   "terminated; the Moments state (low, high) before the update is the ReturnEMA state; "
                   "gamma = 1 − 1/333, lambda 0.95, ent 3e-4, slow_reg 1, continue_mode 'mode'",
        inputs=dict(traj=traj, actions=actions.argmax(-1).float(), reward=sq(reward), cont_logits=sq(cont_logits),
                    start_terminal=terminated.reshape(N), actor_w=actor.head.weight.detach(),
                    actor_b=actor.head.bias.detach(), critic_w=critic.weight.detach(), critic_b=critic.bias.detach(),
                    target_w=target_critic.weight.detach(), target_b=target_critic.bias.detach(),
                    ema_low=torch.tensor(EMA_LOW), ema_high=torch.tensor(EMA_HIGH)),
        expected=dict(lambda_values=sq(lambda_values), discount=sq(discount), values=sq(values),
                      offset=offset, invscale=invscale, policy_loss=policy_loss.detach(),
                      value_loss=value_loss.detach(), actor_w_grad=actor.head.weight.grad,
                      actor_b_grad=actor.head.bias.grad, critic_b_grad=critic.bias.grad))


GENERATORS = [behavior_losses]
