"""behavior benchmarks (M5): fast twin vs float64 reference, one run, float32, at DreamerV3's
behaviour-learning size: H = 15 imagined steps from B = 16 × 64 = 1024 posterior states, 6 actions, 255 bins.

* ``behavior.losses+backward`` — behavior_losses (values, continues, λ-returns, ReturnEMA update, advantage,
  actor and critic losses) plus one backward of actor_loss + critic_loss into the actor and critic logits.
  Each implementation uses its own return_ema twin (reference: float64 full sort; fast: topk).
* ``behavior.update_slow_critic`` — the slow-critic EMA over a DreamerV3-S-sized critic (2 × 512 MLP + 255
  bins head on a 1536-d latent, ≈ 1.2 M parameters): per-tensor float64 arithmetic vs one ``_foreach_lerp_``.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.contracts.behavior import BehaviorConfig
from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

IMPLS = ["reference", "fast-torch"]
H, B, A, BINS = 15, 1024, 6, 255
EMA = {"reference": "rlspec.reference.return_ema", "fast-torch": "rlspec.fast.return_ema"}


def _module(impl: str):
    return importlib.import_module(IMPLEMENTATIONS["behavior"][impl])


def _inputs(device: str) -> dict:
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(reward=r(H + 1, B).to(device), cont_logits=(3 * r(H + 1, B)).abs().to(device),
                value_logits=r(H + 1, B, BINS).to(device).requires_grad_(True),
                slow_value_logits=r(H + 1, B, BINS).to(device),
                actor_logits=r(H + 1, B, A).to(device).requires_grad_(True),
                actions=torch.randint(0, A, (H + 1, B), generator=g).to(device),
                start_terminal=(torch.rand(B, generator=g) < 0.05).to(device))


def _step(impl: str, inputs: dict) -> torch.Tensor:
    """One behaviour-learning loss evaluation and backward from a fresh EMA; returns (actor, critic) losses."""
    for name in ("value_logits", "actor_logits"):
        inputs[name].grad = None
    ema = importlib.import_module(EMA[impl]).ReturnEMA()
    out = _module(impl).behavior_losses(**inputs, return_ema=ema, cfg=BehaviorConfig())
    (out["actor_loss"] + out["critic_loss"]).backward()
    return torch.stack([out["actor_loss"], out["critic_loss"]]).detach()


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_losses_backward(check_and_time, device, impl):
    inputs = _inputs(device)
    expected = _step("fast-torch", _inputs(device))
    check_and_time(f"behavior.losses+backward[H={H}, B={B}, A={A}, bins={BINS}]", lambda: _step(impl, inputs),
                   expected)


def _critic(device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1536, 512), torch.nn.LayerNorm(512), torch.nn.Linear(512, 512),
                               torch.nn.LayerNorm(512), torch.nn.Linear(512, BINS)).to(device)


def _pair(device: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    critic, slow = _critic(device), _critic(device)
    with torch.no_grad():
        for p in slow.parameters():
            p.mul_(0.5)
    return critic, slow


def _update(impl: str, pair) -> torch.Tensor:
    _module(impl).update_slow_critic(*pair, 0.02)
    return next(iter(pair[1].parameters()))[:4, :8].detach().clone()


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_update_slow_critic(check_and_time, device, impl):
    pair = _pair(device)
    check_and_time("behavior.update_slow_critic[1.2M params]", lambda: _update(impl, pair),
                   _update("fast-torch", _pair(device)))
