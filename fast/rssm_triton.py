"""Triton ``rssm`` twin: fast/rssm.py with the LayerNorm GRU after its matmul fused into one kernel each way.

The GRU of one step (reference/rssm.py ``_gru``; spec/rssm.py, Dreamer plan §3 M3) is a matmul and then a chain
of row-wise elementwise work. The matmul stays in torch (cuBLAS / MKL); everything after it is one Triton
program per row of y = W [h; x] [B, 3H] (float32):

    n = (y − mean(y)) · rstd,  rstd = 1/√(var(y) + eps)          LayerNorm over the 3H gate pre-activations
    g = n · w + b = (r, c, u)                                     chunks in this order (sheeprl LayerNormGRUCell)
    h' = σ(u − 1)·tanh(σ(r)·c) + (1 − σ(u − 1))·h                 [B, H]

Backward (a second kernel, one program per row; nothing but y, w, b, h is saved, the rest recomputed), with
s_u = σ(u − 1), s_r = σ(r), ĉ = tanh(s_r·c) and ∂h' the incoming gradient:

    ∂h = ∂h'·(1 − s_u)          ∂u = ∂h'·(ĉ − h)·s_u(1 − s_u)
    ∂p = ∂h'·s_u·(1 − ĉ²)       ∂c = ∂p·s_r       ∂r = ∂p·c·s_r(1 − s_r)          (p = s_r·c)
    ∂g = (∂r, ∂c, ∂u):  ∂w = Σ_rows ∂g·n,  ∂b = Σ_rows ∂g,  ∂y = rstd·(∂n − mean(∂n) − n·mean(∂n·n)), ∂n = ∂g·w

∂w and ∂b are written per row and summed by torch (deterministic: no atomics). Rows are padded to the next
power of two of H per chunk, so any H works. float32 only: the precision policy (spec/rssm.py RSSM-12) runs
the GRU in float32 whatever the autocast, and the cell is entered inside that float32 region.

Where the kernels run (fast/triton_mode.py): under the interpreter on the tensors' device (CPU in the CPU
gate); compiled, on CUDA. Compiled and handed CPU tensors (the rssm properties draw CPU tensors), the cell
moves its four inputs to CUDA and its output back, as registry.OnDevice does for function backends: the
properties then check the compiled kernels; a model on CUDA makes no copy.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlspec.contracts.rssm import UPDATE_BIAS
from rlspec.fast import rssm as fast
from rlspec.fast.triton_mode import DEVICE, INTERPRETED
from rlspec.reference.rssm import float32_region

__all__ = ["BACKEND_NOTE", "RSSM", "layer_norm_gru"]

BACKEND_NOTE = f"fused LayerNorm-GRU, Triton {'interpreted' if INTERPRETED else 'cuda'}"


@triton.jit
def _sigmoid(x):
    return 1 / (1 + tl.exp(-x))


@triton.jit
def _tanh(x):
    return 2 * _sigmoid(2 * x) - 1


@triton.jit
def _load_row(y_ptr, w_ptr, b_ptr, row, cols, mask, H, eps):
    """LayerNorm of row ``row`` of y [B, 3H]: (n_r, n_c, n_u, g_r, g_c, g_u, rstd), each chunk [BLOCK]."""
    base = y_ptr + row * 3 * H
    y_r = tl.load(base + cols, mask=mask, other=0.0)
    y_c = tl.load(base + H + cols, mask=mask, other=0.0)
    y_u = tl.load(base + 2 * H + cols, mask=mask, other=0.0)
    mean = (tl.sum(y_r, 0) + tl.sum(y_c, 0) + tl.sum(y_u, 0)) / (3 * H)
    d_r = tl.where(mask, y_r - mean, 0.0)
    d_c = tl.where(mask, y_c - mean, 0.0)
    d_u = tl.where(mask, y_u - mean, 0.0)
    var = (tl.sum(d_r * d_r, 0) + tl.sum(d_c * d_c, 0) + tl.sum(d_u * d_u, 0)) / (3 * H)  # biased, as torch
    rstd = 1 / tl.sqrt(var + eps)
    n_r, n_c, n_u = d_r * rstd, d_c * rstd, d_u * rstd
    g_r = n_r * tl.load(w_ptr + cols, mask=mask, other=0.0) + tl.load(b_ptr + cols, mask=mask, other=0.0)
    g_c = n_c * tl.load(w_ptr + H + cols, mask=mask, other=0.0) + tl.load(b_ptr + H + cols, mask=mask, other=0.0)
    g_u = n_u * tl.load(w_ptr + 2 * H + cols, mask=mask, other=0.0) + tl.load(b_ptr + 2 * H + cols, mask=mask,
                                                                                other=0.0)
    return n_r, n_c, n_u, g_r, g_c, g_u, rstd


def warps_for(block: int) -> int:
    """Warps per program for rows padded to BLOCK: 4 up to 1024, then one per 256 lanes up to 16. At 4 warps a
    BLOCK of 4096 (DreamerV3's largest H) held 255 registers and spilled, forward and backward, under Triton 3.6
    and 3.9 (nox -s compile_gate: benchmarks/gpu/results/compile_gate/)."""
    return min(16, max(4, block // 256))


@triton.jit
def _forward_kernel(y_ptr, w_ptr, b_ptr, h_ptr, out_ptr, H, eps, UPDATE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    _, _, _, g_r, g_c, g_u, _ = _load_row(y_ptr, w_ptr, b_ptr, row, cols, mask, H, eps)
    h = tl.load(h_ptr + row * H + cols, mask=mask, other=0.0)
    s_u = _sigmoid(g_u + UPDATE)
    cand = _tanh(_sigmoid(g_r) * g_c)
    tl.store(out_ptr + row * H + cols, s_u * cand + (1 - s_u) * h, mask=mask)


@triton.jit
def _backward_kernel(y_ptr, w_ptr, b_ptr, h_ptr, grad_ptr, dy_ptr, dh_ptr, dw_ptr, db_ptr, H, eps,
                     UPDATE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    n_r, n_c, n_u, g_r, g_c, g_u, rstd = _load_row(y_ptr, w_ptr, b_ptr, row, cols, mask, H, eps)
    h = tl.load(h_ptr + row * H + cols, mask=mask, other=0.0)
    gh = tl.load(grad_ptr + row * H + cols, mask=mask, other=0.0)
    s_u = _sigmoid(g_u + UPDATE)
    s_r = _sigmoid(g_r)
    cand = _tanh(s_r * g_c)
    tl.store(dh_ptr + row * H + cols, gh * (1 - s_u), mask=mask)
    dg_u = gh * (cand - h) * s_u * (1 - s_u)
    dp = gh * s_u * (1 - cand * cand)
    dg_c = dp * s_r
    dg_r = dp * g_c * s_r * (1 - s_r)
    # per-row parts of ∂w, ∂b (summed over rows by the caller); masked lanes hold 0
    out = row * 3 * H
    tl.store(dw_ptr + out + cols, dg_r * n_r, mask=mask)
    tl.store(dw_ptr + out + H + cols, dg_c * n_c, mask=mask)
    tl.store(dw_ptr + out + 2 * H + cols, dg_u * n_u, mask=mask)
    tl.store(db_ptr + out + cols, dg_r, mask=mask)
    tl.store(db_ptr + out + H + cols, dg_c, mask=mask)
    tl.store(db_ptr + out + 2 * H + cols, dg_u, mask=mask)
    dn_r = dg_r * tl.load(w_ptr + cols, mask=mask, other=0.0)
    dn_c = dg_c * tl.load(w_ptr + H + cols, mask=mask, other=0.0)
    dn_u = dg_u * tl.load(w_ptr + 2 * H + cols, mask=mask, other=0.0)
    mean_dn = (tl.sum(dn_r, 0) + tl.sum(dn_c, 0) + tl.sum(dn_u, 0)) / (3 * H)
    mean_dnn = (tl.sum(dn_r * n_r, 0) + tl.sum(dn_c * n_c, 0) + tl.sum(dn_u * n_u, 0)) / (3 * H)
    tl.store(dy_ptr + out + cols, rstd * (dn_r - mean_dn - n_r * mean_dnn), mask=mask)
    tl.store(dy_ptr + out + H + cols, rstd * (dn_c - mean_dn - n_c * mean_dnn), mask=mask)
    tl.store(dy_ptr + out + 2 * H + cols, rstd * (dn_u - mean_dn - n_u * mean_dnn), mask=mask)


class _LayerNormGRU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, weight, bias, h, eps, update_bias):
        B, H = h.shape
        out = torch.empty_like(h)  # [B, H]
        if B:
            block = triton.next_power_of_2(H)
            _forward_kernel[(B,)](y, weight, bias, h, out, H, eps, UPDATE=update_bias, BLOCK=block,
                                  num_warps=warps_for(block))
        ctx.save_for_backward(y, weight, bias, h)
        ctx.eps, ctx.update_bias = eps, update_bias
        return out

    @staticmethod
    def backward(ctx, grad):
        y, weight, bias, h = ctx.saved_tensors
        B, H = h.shape
        grad = grad.contiguous()
        dy, dh = torch.empty_like(y), torch.empty_like(h)  # [B, 3H], [B, H]
        dw, db = torch.empty_like(y), torch.empty_like(y)  # per-row parts [B, 3H]
        if B:
            block = triton.next_power_of_2(H)
            _backward_kernel[(B,)](y, weight, bias, h, grad, dy, dh, dw, db, H, ctx.eps,
                                   UPDATE=ctx.update_bias, BLOCK=block, num_warps=warps_for(block))
        return dy, dw.sum(0), db.sum(0), dh, None, None


def layer_norm_gru(y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, h: torch.Tensor, eps: float,
                   update_bias: float = UPDATE_BIAS) -> torch.Tensor:
    """h' [B, H] from the gate pre-activations y = W [h; x] [B, 3H], the LayerNorm's weight and bias [3H]
    and h [B, H] (module docstring), all float32; differentiable in y, weight, bias and h."""
    B, H = h.shape
    for name, t, shape in (("y", y, (B, 3 * H)), ("weight", weight, (3 * H,)), ("bias", bias, (3 * H,))):
        if t.dtype != torch.float32 or tuple(t.shape) != shape:
            raise ValueError(f"layer_norm_gru: argument '{name}' is {tuple(t.shape)} {t.dtype}, expected "
                             f"{shape} torch.float32 (h is {tuple(h.shape)} {h.dtype})")
    if h.dtype != torch.float32:
        raise ValueError(f"layer_norm_gru: argument 'h' is {h.dtype}, expected torch.float32")
    device = h.device
    if not INTERPRETED and device.type != DEVICE:  # compiled: the kernels take CUDA tensors (docstring)
        args = (t.to(DEVICE) for t in (y, weight, bias, h))
        return _LayerNormGRU.apply(*(t.contiguous() for t in args), eps, update_bias).to(device)
    return _LayerNormGRU.apply(y.contiguous(), weight.contiguous(), bias.contiguous(), h.contiguous(), eps,
                               update_bias)


class RSSM(fast.RSSM):
    """fast/rssm.py's RSSM (projections hoisted out of the scan) with the fused LayerNorm-GRU cell; same
    parameters and interface."""

    def _gru(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        with float32_region(h):
            y = self.gru(torch.cat((h.float(), x.float()), -1))  # [B, 3H] float32
            norm = self.gru_norm
            return layer_norm_gru(y, norm.weight.float(), norm.bias.float(), h.float(), norm.eps)
