"""risk_target on the design's buffer (PPOLagSem design §29.2: L = 2048, H = 64, one entry per capture) in float32:
fast (O(L) blocked scan) vs the reference (float64 loops, O(L·H)); also a per-env buffer [2048, 16]."""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.registry import IMPLEMENTATIONS

pytestmark = pytest.mark.bench

L, H, GAMMA = 2048, 64, 0.99


def _buffer(shape: tuple[int, ...], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """cost ~ U(0, 1) [shape] and done at rate 1/200 (episodes longer than the horizon, some inside it)."""
    gen = torch.Generator().manual_seed(0)
    cost = torch.rand(shape, generator=gen)
    done = torch.rand(shape, generator=gen) < 1 / 200
    return cost.to(device), done.to(device)


def _fn(impl: str):
    return importlib.import_module(IMPLEMENTATIONS["risk_target"][impl]).risk_target


@pytest.mark.parametrize("shape", [(L,), (L, 16)], ids=["L2048", "L2048xB16"])
@pytest.mark.parametrize("impl", ["reference", "fast-torch"], indirect=True)
def test_risk_target(check_and_time, device, impl, shape):
    cost, done = _buffer(shape, device)
    fn = _fn(impl)
    check_and_time(f"risk_target[{'x'.join(map(str, shape))}, H={H}]", lambda: fn(cost, done, GAMMA, H),
            _fn("fast-torch")(cost, done, GAMMA, H))
