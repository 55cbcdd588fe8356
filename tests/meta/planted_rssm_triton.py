"""Planted bugs for the fused LayerNorm-GRU of the ``rssm`` fast-triton twin (fast/rssm_triton.py): its RSSM
with one bug each in what the kernel computes. The kernels take the LN eps and the update-gate shift as
arguments and read the gates by chunk offset, so each bug is planted where the cell is called: a kernel
with the same bug inside computes exactly the same numbers.

A backward that drops a path is caught by RSSM-15 (gradients against the reference's); the backward
kernel's own arithmetic is also checked by tests/unit/test_rssm_triton_cell.py.
Without CUDA and without TRITON_INTERPRET=1 the module cannot load and there is nothing to plant."""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.contracts.rssm import UPDATE_BIAS
from rlspec.reference.rssm import float32_region

try:
    from rlspec.fast import rssm_triton
except ImportError:  # fast/triton_mode.BackendUnavailable: neither CUDA nor the interpreter
    rssm_triton = None


def _fused(gru_call):
    """An RSSM whose ``_gru`` calls the fused cell through ``gru_call(y, weight, bias, h, eps)``."""

    class FusedWithBug(rssm_triton.RSSM):
        def _gru(self, h, x):
            with float32_region(h):
                y = self.gru(torch.cat((h.float(), x.float()), -1))  # [B, 3H]
                norm = self.gru_norm
                return gru_call(y, norm.weight.float(), norm.bias.float(), h.float(), norm.eps)

    return types.SimpleNamespace(RSSM=FusedWithBug)


def _no_update_shift(y, w, b, h, eps):  # σ(u) (PyTorch's GRUCell) instead of σ(u − 1)
    return rssm_triton.layer_norm_gru(y, w, b, h, eps, update_bias=0.0)


def _default_eps(y, w, b, h, eps):  # torch's LayerNorm default 1e-5 instead of the model's eps (1e-3)
    return rssm_triton.layer_norm_gru(y, w, b, h, 1e-5, UPDATE_BIAS)


def _gates_swapped(y, w, b, h, eps):  # reads (update, cand, reset) where the layout is (reset, cand, update)
    def swap(t):
        r, c, u = t.chunk(3, -1)
        return torch.cat((u, c, r), -1).contiguous()

    return rssm_triton.layer_norm_gru(swap(y), swap(w), swap(b), h, eps, UPDATE_BIAS)


def _state_detached(y, w, b, h, eps):  # the fused cell's ∂h' / ∂h (the (1 − u)·h path) dropped
    return rssm_triton.layer_norm_gru(y, w, b, h.detach(), eps, UPDATE_BIAS)


PLANTED_RSSM_TRITON = () if rssm_triton is None else (
    Planted("fused GRU: no gradient through the carried state", "rssm", _fused(_state_detached), "RSSM-15", "∂/∂",
            ("RSSM-2", "RSSM-4")),
    Planted("fused GRU: update gate sigma(u) instead of sigma(u - 1)", "rssm", _fused(_no_update_shift), "RSSM-4",
            "h[", ("RSSM-3", "RSSM-8")),
    Planted("fused GRU: LayerNorm eps 1e-5", "rssm", _fused(_default_eps), "RSSM-4", "h[", ("RSSM-3", "RSSM-8")),
    Planted("fused GRU: reset and update gates swapped", "rssm", _fused(_gates_swapped), "RSSM-4", "h[",
            ("RSSM-3", "RSSM-8")),
)
