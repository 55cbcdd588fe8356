"""The fused LayerNorm-over-channels + SiLU kernel (fast/channel_norm.py) against the reference composition
(reference/world_model.py ``norm_silu``): outputs and the gradients of x, weight and bias."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlspec.fast import channel_norm
from rlspec.reference.world_model import norm_silu

CL = torch.channels_last


def _norm(C: int, dtype: torch.dtype, g: torch.Generator) -> nn.LayerNorm:
    norm = nn.LayerNorm(C, eps=1e-3).to(dtype)
    with torch.no_grad():  # away from (1, 0), so a kernel that ignores w or b fails
        norm.weight.copy_(torch.randn(C, generator=g, dtype=dtype))
        norm.bias.copy_(torch.randn(C, generator=g, dtype=dtype))
    return norm


def _run(fn, norm: nn.LayerNorm, x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(output, dx, dw, db) of fn(norm, x) with upstream gradient g."""
    xi = x.detach().clone().requires_grad_(True)
    y = fn(norm, xi)
    return (y, *torch.autograd.grad(y, [xi, norm.weight, norm.bias], g))


def _both(norm: nn.LayerNorm, x: torch.Tensor, g: torch.Tensor):
    """[(output, dx, dw, db)] of the fused call and of the reference."""
    return [_run(fn, norm, x, g) for fn in (channel_norm.channel_norm_silu, norm_silu)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 24, 8, 8), (1, 37, 6, 2), (4, 16, 1, 1)])
def test_fused_matches_reference(dtype, shape):
    g = torch.Generator().manual_seed(sum(shape))
    norm = _norm(shape[1], dtype, g)
    # per-pixel scale and offset: rows with tiny and large variance, |u| far into σ's saturation
    x = (torch.randn(shape, generator=g, dtype=dtype) * torch.rand(shape[0], 1, *shape[2:], generator=g,
                                                                   dtype=dtype) * 50 + 3).contiguous(memory_format=CL)
    grad = torch.randn(shape, generator=g, dtype=dtype).contiguous(memory_format=CL)
    fused, ref = _both(norm, x, grad)
    assert fused[0].is_contiguous(memory_format=CL)
    # truth: the reference in float64; the kernel's error may not exceed twice the reference's own rounding
    truth = _run(norm_silu, norm.to(torch.float64), x.double(), grad.double())
    norm.to(dtype)
    for name, f, r, t in zip(("output", "grad of x", "grad of weight", "grad of bias"), fused, ref, truth):
        err_f, err_r = (f.double() - t).abs().max().item(), (r.double() - t).abs().max().item()
        scale = t.abs().max().item()
        assert err_f <= 2 * err_r + 1e-13 * scale + (1e-6 * scale if dtype == torch.float32 else 0), \
            f"{name} ({dtype}): fused error {err_f:.3g}, reference error {err_r:.3g} (max |value| {scale:.3g})"


def test_threaded_rows_match_single_thread():
    """Rows split over several std::threads (per-thread dw, db partials summed): same numbers as one thread."""
    g = torch.Generator().manual_seed(0)
    norm = _norm(8, torch.float32, g)
    x = torch.randn(4, 8, 64, 64, generator=g).contiguous(memory_format=CL)  # 16384 rows: 4 threads' worth
    grad = torch.randn(4, 8, 64, 64, generator=g).contiguous(memory_format=CL)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 4):
            torch.set_num_threads(threads)
            results.append(_both(norm, x, grad)[0])
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_other_layouts_and_dtypes_take_the_reference_path():
    """Not channels-last, or bf16 (autocast's conv output): the reference composition, value for value."""
    g = torch.Generator().manual_seed(1)
    norm = _norm(6, torch.float32, g)
    x = torch.randn(2, 6, 4, 4, generator=g)  # contiguous NCHW
    torch.testing.assert_close(channel_norm.channel_norm_silu(norm, x), norm_silu(norm, x), rtol=0, atol=0)
    xb = x.to(torch.bfloat16).contiguous(memory_format=CL)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(channel_norm.channel_norm_silu(norm, xb), norm_silu(norm, xb), rtol=0, atol=0)


def test_unusable_compiler_is_a_clear_error(no_cxx):
    no_cxx(channel_norm.library, channel_norm._usable)
    with pytest.raises(RuntimeError, match=r"C\+\+ compiler .*no-such-compiler.*\$CXX"):
        channel_norm.library()
    # the model keeps working on the reference composition, and says so once
    norm, x = nn.LayerNorm(4, eps=1e-3), torch.randn(2, 4, 3, 3).contiguous(memory_format=CL)
    with pytest.warns(RuntimeWarning, match="eager composition.*no-such-compiler"):
        y = channel_norm.channel_norm_silu(norm, x)
    torch.testing.assert_close(y, norm_silu(norm, x), rtol=0, atol=0)


def test_unwritable_cache_is_a_clear_error(monkeypatch, tmp_path):
    blocker = tmp_path / "file"  # a file where the cache directory would go: mkdir fails
    blocker.write_text("")
    monkeypatch.setenv("RLSPEC_CACHE", str(blocker))
    channel_norm.library.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"cannot build or load .*RLSPEC_CACHE"):
            channel_norm.library()
    finally:
        channel_norm.library.cache_clear()
