"""RSSM features without the one-hot: f = [h; flatten(z)] where z [..., S, K] is exactly one-hot (the
straight-through sample's forward value, contract rssm), kept as the class indices (fast kit).

A Linear over f splits as W f = W_h h + W_z flatten(z), and W_z flatten(z) is the sum of one column of W_z per
latent: Σ_s W_z[:, s·K + idx_s]. At DreamerV3-XS (S = K = 32, 16k imagined rows) the gather-sum costs ~6 ms
where the dense [16k, 1024] @ [1024, 256] costs ~54 ms. The weight gradient is a per-latent ``index_add_`` of
the output gradient into the rows idx_s of W_zᵀ (~33 vs ~59 ms dense per 16k rows at XS; ~9 vs ~7 ms at
S = K = 16, out 128: one path kept, a few milliseconds per update there).

    f = features(h, z)                   # Features(h [..., H], idx [..., S] int64, classes K)
    y = linear(f, weight, bias)          # == F.linear(f.dense(), weight, bias); a dense tensor: F.linear
    FeatureLinear(n_in, n_out)           # nn.Linear (same parameters, same state_dict) whose forward is linear

No gradient reaches z through a Features (it holds indices): it is for the readers of detached imagined
states (actor, critic, slow critic, reward and continue heads, img_step without grad).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Features:
    """f = [h; flatten(one_hot(idx, classes))] [..., H + S·K], the one-hot never built."""

    h: torch.Tensor  # [..., H] floating
    idx: torch.Tensor  # [..., S] int64 in [0, classes)
    classes: int  # K

    def __post_init__(self):
        if self.idx.dtype != torch.int64:
            raise TypeError(f"Features: field 'idx' has dtype {self.idx.dtype}, expected torch.int64")
        if self.h.shape[:-1] != self.idx.shape[:-1]:
            raise ValueError(f"Features: fields 'h' {list(self.h.shape)} and 'idx' {list(self.idx.shape)} have "
                             f"different leading shapes, expected the same")

    @property
    def lead_shape(self) -> torch.Size:
        """The leading shape [...] (f without its feature dimension)."""
        return self.h.shape[:-1]

    @property
    def feature_dim(self) -> int:
        """H + S·K."""
        return self.h.shape[-1] + self.idx.shape[-1] * self.classes

    def detach(self) -> Features:
        return Features(self.h.detach(), self.idx, self.classes)

    def dense(self) -> torch.Tensor:
        """[..., H + S·K]: the features as a tensor (tests, and readers that need them dense)."""
        return torch.cat((self.h, F.one_hot(self.idx, self.classes).to(self.h.dtype).flatten(-2)), -1)


def indices(z: torch.Tensor) -> torch.Tensor:
    """One-hot z [..., S, K] -> its classes [..., S] int64: z · (0, 1, ..., K−1), exact for a one-hot z (one
    product per latent; several times cheaper than argmax on CPU)."""
    return (z @ torch.arange(z.shape[-1], dtype=z.dtype, device=z.device)).long()


def features(h: torch.Tensor, z: torch.Tensor) -> Features:
    """h [..., H], one-hot z [..., S, K] -> Features (the indices of z; z's gradient, if any, is dropped)."""
    return Features(h, indices(z.detach()), z.shape[-1])


class _OneHotMatmul(torch.autograd.Function):
    """(idx [N, S], W [out, S·K], K) -> Σ_s W[:, s·K + idx[:, s]] [N, out]; gradient for W only."""

    @staticmethod
    def forward(ctx, idx: torch.Tensor, weight: torch.Tensor, classes: int) -> torch.Tensor:
        S = idx.shape[-1]
        offsets = torch.arange(0, S * classes, classes, device=idx.device)  # [S]: latent s's first column
        ctx.save_for_backward(idx)
        ctx.classes = classes
        # the table contiguous: embedding_bag over the strided view Wᵀ is ~2× slower than the dense matmul
        return F.embedding_bag(idx + offsets, weight.t().contiguous(), mode="sum")  # [N, out]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):  # grad [N, out]
        (idx,) = ctx.saved_tensors
        K = ctx.classes
        grad_t = grad.new_zeros(idx.shape[-1] * K, grad.shape[-1])  # [S·K, out] = (dL/dW)ᵀ
        for s in range(idx.shape[-1]):
            grad_t[s * K:(s + 1) * K].index_add_(0, idx[:, s], grad)
        return None, grad_t.t(), None


def onehot_matmul(idx: torch.Tensor, weight: torch.Tensor, classes: int) -> torch.Tensor:
    """W flatten(one_hot(idx, K)): idx [..., S] int64, weight [out, S·K] -> [..., out] (weight's dtype)."""
    out = _OneHotMatmul.apply(idx.reshape(-1, idx.shape[-1]), weight, classes)
    return out.reshape(*idx.shape[:-1], weight.shape[0])


def linear(x: torch.Tensor | Features, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) for a tensor x [..., F]; for Features, W_h h + Σ_s W_z[:, s·K + idx_s] + b."""
    if not isinstance(x, Features):
        return F.linear(x, weight, bias)
    if x.feature_dim != weight.shape[1]:
        raise ValueError(f"linear: Features of dimension {x.feature_dim} (H {x.h.shape[-1]} + S·K "
                         f"{x.idx.shape[-1]}·{x.classes}), expected weight's in_features {weight.shape[1]}")
    H = x.h.shape[-1]
    return F.linear(x.h, weight[:, :H], bias) + onehot_matmul(x.idx, weight[:, H:], x.classes)


class FeatureLinear(nn.Linear):
    """nn.Linear (same parameters and state_dict keys) that also reads Features (module docstring)."""

    def forward(self, x: torch.Tensor | Features) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
