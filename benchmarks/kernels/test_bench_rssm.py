"""rssm benchmarks (Dreamer plan M3): reference, fast twin and sheeprl 0.8.4's RSSM in one run, float32, at
sheeprl's DreamerV3-XS size (H 256, hidden 256, S = K = 32), 6 actions, embedding 512, the anchor's batch
B 16 × T 64 with a reset every ~16 steps. All three load one state_dict (sheeprl's through
golden_bridge.sheeprl_rssm's name map) and take the same inputs; sheeprl runs its own train() unroll
(``project_observations`` once, ``dynamic(..., projected=True)`` per step on its shifted actions,
``prior_logits`` of the sequence) and samples from the global RNG, the contract's twins from a generator.

* ``rssm.observe+backward[B16×T64, XS]`` — the world-model part of a train step: the posterior scan and
  the backward of a loss on every output (prior and posterior logits, h, z).
* ``rssm.observe[B16×T64, XS]`` — the scan without autograd (what an acting loop runs step by step).
* ``rssm.img_step×15[B1024, XS]`` — DreamerV3's imagination: horizon 15 from B·T = 1024 start states
  (the same step code in both twins: a check that the fast twin adds no overhead there).

The check compares h at t = 0 only (it does not depend on a sample): samples differ between sheeprl and
the twins, and a sample that flips on float32 rounding makes two scans diverge after it.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

import pytest
import torch

from rlspec.contracts.rssm import RSSMConfig
from rlspec.reference.rssm import RSSM as Reference
from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

IMPLS = ["reference", "fast-torch", "sheeprl"]
CONFIG = RSSMConfig(embed_dim=512, num_actions=6)  # DreamerV3-XS defaults
T, B, HORIZON = 64, 16, 15


def _model(impl: str, device: str) -> torch.nn.Module:
    weights = Reference(CONFIG, torch.Generator().manual_seed(0)).state_dict()
    if impl == "sheeprl":
        pytest.importorskip("sheeprl.algos.dreamer_v3.agent")
        from rlspec.golden_bridge import sheeprl_rssm

        c = CONFIG
        model = sheeprl_rssm.build_sheeprl_rssm(c.deter, c.hidden, c.stoch, c.classes, c.embed_dim, c.num_actions)
        sheeprl_rssm.load_our_weights(model, weights)
        return _SheeprlUnroll(model.to(device))
    model = importlib.import_module(IMPLEMENTATIONS["rssm"][impl]).RSSM(CONFIG)
    model.load_state_dict(weights)
    return model.to(device)


class _SheeprlUnroll:
    """sheeprl 0.8.4's dreamer_v3.train() unroll of its RSSM, with the contract's observe/img_step names."""

    def __init__(self, rssm):
        self.rssm = rssm

    def zero_grad(self, set_to_none=True):
        self.rssm.zero_grad(set_to_none=set_to_none)

    def observe(self, embed, action, is_first, generator):
        rssm, (T, B) = self.rssm, is_first.shape
        onehot = torch.nn.functional.one_hot(action, CONFIG.num_actions).float()
        actions = torch.cat((torch.zeros_like(onehot[:1]), onehot[:-1]))  # sheeprl's row layout
        first = is_first.float().unsqueeze(-1)
        initial = rssm.get_initial_states((1, B))
        h, z = torch.zeros_like(initial[0]), torch.zeros_like(initial[1])
        projection = rssm.project_observations(embed)
        hs, zs, posts = [], [], []
        for t in range(T):
            h, z, post = rssm.dynamic(z, h, actions[t:t + 1], projection[t:t + 1], first[t:t + 1], initial,
                                      projected=True)
            hs.append(h)
            zs.append(z)
            posts.append(post)
        hs = torch.cat(hs)
        return _Out(rssm.prior_logits(hs), torch.cat(posts), hs, torch.cat(zs))

    def img_step(self, h, z, action, generator):
        a = torch.nn.functional.one_hot(action, CONFIG.num_actions).float()
        prior, h = self.rssm.imagination(z.flatten(-2)[None], h[None], a[None])
        return None, h[0], prior[0]  # prior sample [1, B, S, K] -> [B, S, K]


class _Out(NamedTuple):
    prior_logits: torch.Tensor
    post_logits: torch.Tensor
    h: torch.Tensor
    z: torch.Tensor


def _inputs(device: str):
    g = torch.Generator().manual_seed(1)
    embed = torch.randn(T, B, CONFIG.embed_dim, generator=g)
    action = torch.randint(0, CONFIG.num_actions, (T, B), generator=g)
    is_first = torch.rand(T, B, generator=g) < 1 / 16
    is_first[0] = True
    return embed.to(device), action.to(device), is_first.to(device)


def _observe_backward(model, embed, action, is_first):
    out = model.observe(embed, action, is_first, torch.Generator(embed.device).manual_seed(2))
    loss = out.prior_logits.mean() + out.post_logits.mean() + out.h.square().mean() + out.z.mean()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return out.h[0].detach()


def _observe(model, embed, action, is_first):
    with torch.no_grad():
        return model.observe(embed, action, is_first, torch.Generator(embed.device).manual_seed(2)).h[0]


def _imagine(model, h, z, actions):
    g = torch.Generator(h.device).manual_seed(3)
    first = None
    with torch.no_grad():
        for a in actions:
            _, h, z = model.img_step(h, z, a, g)
            first = h if first is None else first
    return first[:, :8]  # the first step's h: independent of any sample


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_observe_backward(check_and_time, device, impl):
    x = _inputs(device)
    model, fast = _model(impl, device), _model("fast-torch", device)
    check_and_time("rssm.observe+backward[B16×T64, XS]", lambda: _observe_backward(model, *x),
                   _observe_backward(fast, *x))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_observe(check_and_time, device, impl):
    x = _inputs(device)
    model, fast = _model(impl, device), _model("fast-torch", device)
    check_and_time("rssm.observe[B16×T64, XS]", lambda: _observe(model, *x), _observe(fast, *x))


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_imagine(check_and_time, device, impl):
    g = torch.Generator().manual_seed(4)
    n = T * B
    h = torch.randn(n, CONFIG.deter, generator=g).tanh().to(device)
    z = torch.nn.functional.one_hot(torch.randint(0, CONFIG.classes, (n, CONFIG.stoch), generator=g),
                                    CONFIG.classes).float().to(device)
    actions = torch.randint(0, CONFIG.num_actions, (HORIZON, n), generator=g).to(device)
    model, fast = _model(impl, device), _model("fast-torch", device)
    check_and_time("rssm.img_step×15[B1024, XS]", lambda: _imagine(model, h, z, actions),
                   _imagine(fast, h, z, actions))
