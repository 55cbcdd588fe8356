"""The fused LayerNorm-GRU cell (fast/rssm_triton.py) against the reference cell (reference/rssm.py ``_gru``):
forward and every gradient (y, LN weight and bias, h; through the RSSM: h, x and the parameters) on random
inputs of several shapes, H not a power of two included, and a whole observe's gradients against the torch
twin — the rssm clauses compare values and the straight-through identity, not gradients against another
implementation, so a wrong backward kernel is caught here.

gradcheck is float64 and the kernels are float32 (the interpreter runs them in numpy float32), so the
gradients are compared with the reference's float32 autograd instead. Tolerance: 1e-5 absolute (scaled by
the largest magnitude of the expected tensor when it exceeds 1) + 1e-4 relative; measured differences are
~1e-7 (float32 rounding of the same sums in another order). Runs under TRITON_INTERPRET=1 on CPU, or on CUDA.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rlspec.contracts.rssm import LN_EPS, RSSMConfig
from rlspec.fast import rssm as fast
from rlspec.reference import rssm as reference
from rlspec.spec.core import assert_close
from rlspec.spec.rssm import make_inputs, random_state_dict

rssm_triton = pytest.importorskip("rlspec.fast.rssm_triton", exc_type=ImportError,
                                  reason="Triton needs CUDA or TRITON_INTERPRET=1")

SHAPES = [(1, 1), (3, 16), (4, 24), (2, 100), (5, 256)]  # (B, H): 1, 24 and 100 are not powers of two


def _assert_close(what: str, got: torch.Tensor, want: torch.Tensor) -> None:
    scale = max(1.0, float(want.detach().abs().max()))
    assert_close("GRU", what, got, want, atol=1e-5 * scale, rtol=1e-4)


def _cell_inputs(B: int, H: int, seed: int) -> list[torch.Tensor]:
    """y [B, 3H] (scale 2), LN weight 1 ± 0.3, bias ± 0.3 [3H], h in (−1, 1) [B, H]: all require grad."""
    g = torch.Generator().manual_seed(seed)
    y = 2 * torch.randn(B, 3 * H, generator=g)
    w = 1 + 0.3 * torch.randn(3 * H, generator=g)
    b = 0.3 * torch.randn(3 * H, generator=g)
    h = torch.randn(B, H, generator=g).tanh()
    return [t.requires_grad_(True) for t in (y, w, b, h)]


def _formula(y, w, b, h, eps=LN_EPS, update_bias=-1.0):
    """reference/rssm.py ``_gru`` after its matmul."""
    r, c, u = F.layer_norm(y, y.shape[-1:], w, b, eps).chunk(3, -1)
    u = torch.sigmoid(u + update_bias)
    return u * torch.tanh(torch.sigmoid(r) * c) + (1 - u) * h


@pytest.mark.parametrize("B,H", SHAPES)
def test_cell_forward_and_gradients_match_the_reference(B, H):
    inputs = _cell_inputs(B, H, seed=B * 1000 + H)
    got = rssm_triton.layer_norm_gru(*inputs, LN_EPS)
    want = _formula(*inputs)
    _assert_close(f"h' (B={B}, H={H})", got, want)
    weight = torch.randn(B, H, generator=torch.Generator().manual_seed(H))
    g_got = torch.autograd.grad((weight * got).sum(), inputs)
    g_want = torch.autograd.grad((weight * want).sum(), inputs)
    for name, a, b in zip(("∂y", "∂weight", "∂bias", "∂h"), g_got, g_want):
        _assert_close(f"{name} (B={B}, H={H})", a, b)


@pytest.mark.parametrize("eps,update_bias", [(0.5, -1.0), (LN_EPS, 0.0), (1e-5, 2.0)])
def test_cell_takes_eps_and_update_bias(eps, update_bias):
    """eps and the update-gate shift reach the kernels (a large eps changes h' well beyond the tolerance)."""
    inputs = _cell_inputs(3, 24, seed=7)
    got = rssm_triton.layer_norm_gru(*inputs, eps, update_bias)
    _assert_close(f"h' (eps={eps}, update bias {update_bias})", got, _formula(*inputs, eps, update_bias))
    g_got = torch.autograd.grad(got.sum(), inputs)
    g_want = torch.autograd.grad(_formula(*inputs, eps, update_bias).sum(), inputs)
    for name, a, b in zip(("∂y", "∂weight", "∂bias", "∂h"), g_got, g_want):
        _assert_close(f"{name} (eps={eps}, update bias {update_bias})", a, b)


@pytest.mark.parametrize("B,H", [(3, 16), (2, 100)])
def test_rssm_gru_step_matches_the_reference_gru(B, H):
    """The subclass's ``_gru(h, x)``: value and gradients wrt h, x, the GRU weight and the LN affine."""
    cfg = RSSMConfig(embed_dim=3, num_actions=2, deter=H, stoch=2, classes=3, hidden=12)
    sd = random_state_dict(cfg, seed=H, scale=1.0)
    models = [reference.RSSM(cfg), rssm_triton.RSSM(cfg)]
    for m in models:
        m.load_state_dict(sd)
    g = torch.Generator().manual_seed(B)
    h, x = torch.randn(B, H, generator=g).tanh(), torch.randn(B, cfg.hidden, generator=g)
    results = []
    for m in models:
        hh, xx = h.clone().requires_grad_(True), x.clone().requires_grad_(True)
        out = m._gru(hh, xx)
        wrt = [hh, xx, m.gru.weight, m.gru_norm.weight, m.gru_norm.bias]
        results.append((out, torch.autograd.grad((out * out).sum(), wrt)))
    (want, g_want), (got, g_got) = results
    _assert_close("_gru(h, x)", got, want)
    for name, a, b in zip(("∂h", "∂x", "∂gru.weight", "∂gru_norm.weight", "∂gru_norm.bias"), g_got, g_want):
        _assert_close(name, a, b)


def test_observe_gradients_match_the_torch_twin():
    """A whole observe (resets inside, T = 6): the gradient of a loss on its logits and h reaches every
    parameter and the embeddings exactly as through fast/rssm.py's torch cell."""
    cfg = RSSMConfig(embed_dim=5, num_actions=3, deter=20, stoch=3, classes=4, hidden=12)
    sd = random_state_dict(cfg, seed=3, scale=2.0)
    embed, action, is_first = make_inputs(cfg, 6, 3, seed=4, resets=[(0, 0), (3, 1)])
    results = []
    for cls in (fast.RSSM, rssm_triton.RSSM):
        model = cls(cfg)
        model.load_state_dict(sd)
        e = embed.clone().requires_grad_(True)
        out = model.observe(e, action, is_first, torch.Generator().manual_seed(5))
        loss = out.post_logits.exp().square().sum() + out.prior_logits.exp().sum() + out.h.square().sum()
        names = ["embed", *(n for n, _ in model.named_parameters())]
        grads = torch.autograd.grad(loss, [e, *model.parameters()])
        results.append((out, dict(zip(names, grads))))
    (want, g_want), (got, g_got) = results
    assert torch.equal(got.z, want.z), "the samples differ: compare with another seed"
    _assert_close("observe h", got.h, want.h)
    for name, grad in g_want.items():
        _assert_close(f"∂{name}", g_got[name], grad)


@pytest.mark.parametrize("bad,match", [("y_float64", "'y'.*float64"), ("y_shape", r"'y'.*\(3, 47\)"),
                                       ("h_float16", "'h'.*float16"), ("bias_shape", r"'bias'.*\(47,\)")])
def test_cell_rejects_wrong_dtype_or_shape(bad, match):
    y, w, b, h = (t.detach() for t in _cell_inputs(3, 16, seed=1))
    args = dict(y=y, weight=w, bias=b, h=h)
    change = dict(y_float64=dict(y=y.double()), y_shape=dict(y=y[:, :47]), h_float16=dict(h=h.half()),
                  bias_shape=dict(bias=b[:47]))[bad]
    with pytest.raises(ValueError, match=match):
        rssm_triton.layer_norm_gru(**{**args, **change}, eps=LN_EPS)
