"""rssm benchmarks (issue 9 M3): reference vs fast twin in one run, float32, at sheeprl's DreamerV3-XS size
(H 256, hidden 256, S = K = 32), 6 actions, embedding 512, the anchor's batch B 16 × T 64 with a reset
every ~16 steps. Both load one state_dict.

* ``rssm.observe+backward[B16×T64, XS]`` — the world-model part of a train step: the posterior scan and
  the backward of a loss on every output (prior and posterior logits, h, z).
* ``rssm.observe[B16×T64, XS]`` — the scan without autograd (what an acting loop runs step by step).
* ``rssm.img_step×15[B1024, XS]`` — DreamerV3's imagination: horizon 15 from B·T = 1024 start states
  (the same step code in both twins: a check that the fast twin adds no overhead there).

The check compares the first steps only: a sample that flips on float32 rounding (about one in a million
draws) makes the two scans diverge after it, which says nothing about the work done.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.contracts.rssm import RSSMConfig
from rlspec.reference.rssm import RSSM as Reference
from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

IMPLS = ["reference", "fast-torch"]
CONFIG = RSSMConfig(embed_dim=512, num_actions=6)  # DreamerV3-XS defaults
T, B, HORIZON = 64, 16, 15


def _model(impl: str, device: str) -> torch.nn.Module:
    model = importlib.import_module(IMPLEMENTATIONS["rssm"][impl]).RSSM(CONFIG)
    model.load_state_dict(Reference(CONFIG, torch.Generator().manual_seed(0)).state_dict())
    return model.to(device)


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
    return out.h[:2].detach()


def _observe(model, embed, action, is_first):
    with torch.no_grad():
        return model.observe(embed, action, is_first, torch.Generator(embed.device).manual_seed(2)).h[:2]


def _imagine(model, h, z, actions):
    g = torch.Generator(h.device).manual_seed(3)
    with torch.no_grad():
        for a in actions:
            _, h, z = model.img_step(h, z, a, g)
    return h[:, :8]


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
