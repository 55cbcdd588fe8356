"""The compiled Triton LayerNorm-GRU (fast/rssm_triton.py) on CUDA: the cell's value and gradients against the
reference formula in float32 autograd, a whole observe against the reference RSSM (RSSM-2's comparison), the
precision policy under CUDA autocast, and a timing report of the fused cell against the torch cell (forward +
backward; bench-results/rssm_triton_gpu.json, reported, never asserted). The CPU gate checks the same kernels
under the interpreter (tests/unit/test_rssm_triton_cell.py, rlspec check rssm). Written without a GPU at hand:
unverified until ``nox -s gpu_gate`` runs on a CUDA machine."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from cuda_util import cuda_seconds, write_report
from test_rssm_cuda import CONFIG, _models

from rlspec.contracts.rssm import LN_EPS
from rlspec.spec.core import assert_close
from rlspec.spec.rssm import close_until_flip, make_inputs

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="CUDA is not available: the compiled Triton kernels need a GPU")]


def _formula(y, w, b, h):
    r, c, u = F.layer_norm(y, y.shape[-1:], w, b, LN_EPS).chunk(3, -1)
    u = torch.sigmoid(u - 1)
    return u * torch.tanh(torch.sigmoid(r) * c) + (1 - u) * h


def _cell_inputs(B: int, H: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(B + H)
    ts = (2 * torch.randn(B, 3 * H, generator=g), 1 + 0.3 * torch.randn(3 * H, generator=g),
          0.3 * torch.randn(3 * H, generator=g), torch.randn(B, H, generator=g).tanh())
    return [t.cuda().requires_grad_(True) for t in ts]


@pytest.mark.parametrize("B,H", [(1, 7), (16, 256), (1024, 512), (4096, 1000)])
def test_cell_matches_the_formula_on_cuda(B, H):
    from rlspec.fast import rssm_triton

    assert rssm_triton.INTERPRETED is False, "TRITON_INTERPRET is set: unset it to test the compiled kernels"
    inputs = _cell_inputs(B, H)
    got, want = rssm_triton.layer_norm_gru(*inputs, LN_EPS), _formula(*inputs)
    assert got.is_cuda
    assert_close("GRU", f"h' on CUDA (B={B}, H={H})", got, want, atol=1e-5, rtol=1e-4)
    weight = torch.randn(B, H, device="cuda")
    g_got = torch.autograd.grad((weight * got).sum(), inputs)
    g_want = torch.autograd.grad((weight * want).sum(), inputs)
    for name, a, b in zip(("∂y", "∂weight", "∂bias", "∂h"), g_got, g_want):
        scale = max(1.0, float(b.abs().max()))  # ∂weight, ∂bias sum over B rows
        assert_close("GRU", f"{name} on CUDA (B={B}, H={H})", a, b, atol=1e-5 * scale, rtol=1e-4)


def _observe(cfg, model, dtype=None):
    embed, action, is_first = (t.cuda() for t in make_inputs(cfg, 12, 8, seed=1, resets=[(0, 0), (5, 1), (9, 3)]))
    g = torch.Generator("cuda").manual_seed(2)
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        return model.observe(embed, action, is_first, g)


def test_fused_rssm_matches_reference_on_cuda():
    from rlspec.fast.rssm_triton import RSSM

    cfg, (ref, fused) = CONFIG, _models(RSSM)
    got, want = _observe(cfg, fused), _observe(cfg, ref)
    assert got.h.is_cuda
    close_until_flip("RSSM-2", "cuda observe (fused GRU)", got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_rssm_precision_policy_under_cuda_autocast(dtype):
    from rlspec.fast.rssm_triton import RSSM

    cfg, (_, fused) = CONFIG, _models(RSSM)
    got, want = _observe(cfg, fused, dtype), _observe(cfg, fused)
    assert got.h.dtype == got.state.h.dtype == torch.float32
    assert torch.isfinite(got.h).all() and (got.h.to(dtype).float() == got.h).float().mean() < 0.9
    assert (got.h[0] - want.h[0]).abs().max() < 0.05


def test_fused_cell_timing_report():
    """Forward + backward of the cell after the matmul, fused vs torch (LayerNorm + gates), at the default
    RSSM width (H 256) and DreamerV3-M's (1024), for imagination's batch (T·B = 1024 starts)."""
    from rlspec.fast import rssm_triton

    report = {"device": torch.cuda.get_device_name()}
    for B, H in ((1024, 256), (1024, 1024), (16, 256)):
        inputs = _cell_inputs(B, H)
        grad = torch.randn(B, H, device="cuda")
        row = {}
        for name, fn in (("fused-triton", lambda: rssm_triton.layer_norm_gru(*inputs, LN_EPS)),
                         ("torch", lambda: _formula(*inputs))):
            row[f"{name}_ms"] = cuda_seconds(lambda: torch.autograd.backward(fn(), grad)) * 1e3
        row["speedup"] = row["torch_ms"] / row["fused-triton_ms"]
        report[f"B{B}_H{H}"] = row
    print(write_report("rssm_triton_gpu", report).read_text())
    assert all(r["fused-triton_ms"] > 0 for k, r in report.items() if k != "device")
