"""MLP Gaussian actor and value critics of the PPO family (OmniSafe 0.5.0 ``GaussianLearningActor`` and
``Critic``: hidden [64, 64], tanh, a state-independent learned log σ initialised to 0).

Weights are drawn from the caller's ``torch.Generator`` (kaiming-uniform with a = √5 and the matching bias
bound 1/√fan_in, i.e. torch.nn.Linear's own init, OmniSafe's ``kaiming_uniform``), never the global RNG.
"""

from __future__ import annotations

import math

import torch
from torch import nn

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(sizes: list[int], activation: str, gen: torch.Generator) -> nn.Sequential:
    """Linear layers of widths ``sizes`` with ``activation`` between them (none after the last)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"mlp: argument 'activation' must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        linear = nn.utils.skip_init(nn.Linear, n_in, n_out)  # nn.Linear's own init would draw from the global RNG
        with torch.no_grad():
            nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=gen)
            linear.bias.uniform_(-1 / math.sqrt(n_in), 1 / math.sqrt(n_in), generator=gen)
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class GaussianActor(nn.Module):
    """π(a|s) = N(μ_θ(s), diag σ²), σ = exp(log_std) independent of s."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], activation: str, gen: torch.Generator):
        super().__init__()
        self.mean = mlp([obs_dim, *hidden, act_dim], activation, gen)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: torch.Tensor) -> torch.distributions.Normal:
        """obs [N, D] -> the action distribution with batch shape [N, A]. Arguments are not validated: a
        non-finite σ reaches the KL check and the loss guards (numerics note), which stop or count it."""
        return torch.distributions.Normal(self.mean(obs), self.log_std.exp(), validate_args=False)

    def log_prob(self, obs: torch.Tensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π(a|s) [N], summed over action dimensions; entropy [N], the mean of the action dimensions'
        entropies: OmniSafe 0.5.0's convention, whose PPO._loss_pi subtracts entropy_coef·``entropy().mean()``
        over batch and action dimensions and logs that mean as Train/Entropy)."""
        dist = self(obs)
        return dist.log_prob(act).sum(-1), dist.entropy().mean(-1)


class Critic(nn.Module):
    """V(s): obs [N, D] -> [N]."""

    def __init__(self, obs_dim: int, hidden: tuple[int, ...], activation: str, gen: torch.Generator):
        super().__init__()
        self.net = mlp([obs_dim, *hidden, 1], activation, gen)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)
