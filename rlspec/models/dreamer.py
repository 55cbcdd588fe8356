"""DreamerV3's actor and critic over the RSSM features f = [h; flatten(z)] (Dreamer plan M5; sheeprl 0.8.4
``Actor`` and critic ``MLP``: ``layers`` × (Linear without bias → LayerNorm(eps 1e-3) → SiLU), then a linear
output). The actor gives the logits of the discrete actions; the critic the logits of its symlog two-hot
value (contract ``twohot``), its output layer zero-initialised as sheeprl does (the first values are 0).

Weights U(−1/√fan_in, 1/√fan_in) from the caller's ``torch.Generator`` (torch.nn.Linear's bound, as the
world model's heads), never the global RNG.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rlspec.contracts.rssm import LN_EPS


class MLPHead(nn.Module):
    """[..., n_in] -> [..., n_out]: ``layers`` × silu(LN(W x)), then out(x)."""

    def __init__(self, n_in: int, hidden: int, layers: int, n_out: int, gen: torch.Generator,
                 zero_out: bool = False, linear: type = nn.Linear):
        super().__init__()
        with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws from the global RNG: undone
            blocks: list[nn.Module] = []
            for i in range(layers):
                blocks += [(linear if i == 0 else nn.Linear)(n_in if i == 0 else hidden, hidden, bias=False),
                           nn.LayerNorm(hidden, eps=LN_EPS), nn.SiLU()]
            self.body = nn.Sequential(*blocks)
            self.out = (nn.Linear if layers else linear)(hidden if layers else n_in, n_out)
        with torch.no_grad():
            for lin in [m for m in self.body if isinstance(m, nn.Linear)] + [self.out]:
                bound = 1 / math.sqrt(lin.in_features)
                for p in lin.parameters():
                    p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
            if zero_out:
                self.out.weight.zero_()
                self.out.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


def actor(feature_dim: int, num_actions: int, hidden: int, layers: int, gen: torch.Generator,
          linear: type = nn.Linear) -> MLPHead:
    """f [..., F] -> action logits [..., A]."""
    return MLPHead(feature_dim, hidden, layers, num_actions, gen, linear=linear)


def critic(feature_dim: int, num_bins: int, hidden: int, layers: int, gen: torch.Generator,
           linear: type = nn.Linear) -> MLPHead:
    """f [..., F] -> value two-hot logits [..., bins] (zero output layer: v = 0 at start)."""
    return MLPHead(feature_dim, hidden, layers, num_bins, gen, zero_out=True, linear=linear)
