"""The fast ``behavior`` twin on CUDA (M5): at DreamerV3's size (H = 15, B = 1024, 6 actions, 255 bins)
its losses and their gradients match the float64 CPU reference, and ``imagine`` samples from a CUDA generator
only (same generator state -> same actions, whatever the global CUDA RNG holds). Unverified where no GPU runs.
"""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.behavior import BehaviorConfig
from rlspec.fast import behavior as fast
from rlspec.fast.return_ema import ReturnEMA as FastEMA
from rlspec.reference import behavior as ref
from rlspec.reference.return_ema import ReturnEMA
from rlspec.spec.core import assert_close

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]

H, B, A, BINS = 15, 1024, 6, 255


def _inputs(device: str) -> dict:
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(reward=r(H + 1, B), cont_logits=3 * r(H + 1, B), value_logits=r(H + 1, B, BINS),
                slow_value_logits=r(H + 1, B, BINS), actor_logits=r(H + 1, B, A),
                actions=torch.randint(0, A, (H + 1, B), generator=g), start_terminal=torch.rand(B, generator=g) < 0.05)


def _run(impl, inputs: dict, device: str, ema) -> tuple[dict, dict]:
    x = {k: v.to(device).clone() for k, v in inputs.items()}  # fresh leaves
    for k in ("value_logits", "actor_logits"):
        x[k].requires_grad_(True)
    out = impl.behavior_losses(**x, return_ema=ema, cfg=BehaviorConfig())
    (out["actor_loss"] + out["critic_loss"]).backward()
    return out, {k: x[k].grad for k in ("value_logits", "actor_logits")}


def test_fast_on_cuda_matches_the_reference():
    inputs = _inputs("cpu")
    got, got_grad = _run(fast, inputs, "cuda", FastEMA())
    want, want_grad = _run(ref, {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()},
                           "cpu", ReturnEMA())
    for key in ("returns", "values", "weights", "advantage", "actor_loss", "critic_loss"):
        scale = 1 + float(want[key].detach().abs().max())
        assert_close("BEHAV-5", f"{key} on CUDA vs float64 reference", got[key].cpu(), want[key], atol=1e-4 * scale)
    for key, grad in want_grad.items():
        assert_close("BEHAV-5", f"d loss / d {key} on CUDA", got_grad[key].cpu(), grad,
                     atol=1e-4 * float(grad.abs().max()) + 1e-9)


def test_imagine_uses_the_cuda_generator_only():
    w = torch.randn(8, 8, device="cuda") * 0.3
    p = torch.randn(8, A, device="cuda")
    start = torch.randn(B, 8, device="cuda")
    runs = []
    for poison in (0, 1):
        torch.cuda.manual_seed(poison)
        gen = torch.Generator(device="cuda").manual_seed(7)
        runs.append(fast.imagine(lambda s, a: torch.tanh(s @ w + a.sum(-1, keepdim=True)), lambda s: s @ p, start, H,
                                 gen).actions)
    assert torch.equal(runs[0], runs[1]), "[BEHAV-2] actions on CUDA changed with the global CUDA RNG"
