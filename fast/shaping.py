"""Fast ``shaping`` (spec/shaping.py): per-env state as tensors on the input's device, vectorized over envs.

No host synchronization in the hot path: ring-buffer positions that depend only on shapes are Python
ints, everything that depends on values (potentials, capture masks, windows, the clamp counter) stays a
tensor on the device. The margin window is float64 (a few hundred values; its mean/std condition the
z-score); embeddings and potentials keep the input dtype. ``beta_schedule`` is scalar host arithmetic
of the global step and is the reference's.
"""

from __future__ import annotations

import torch

from rlspec.contracts.shaping import (
    CLAMP,
    NORM_EPS,
    UNIT_EPS,
    validate_additive_args,
    validate_env_count,
    validate_env_tensor,
    validate_gamma,
    validate_margin_args,
    validate_margins,
    validate_mask,
    validate_normalizer_config,
    validate_potential_args,
    validate_prompts,
)
from rlspec.contracts.validate import require_int, scalar_args
from rlspec.reference.shaping import beta_schedule  # noqa: F401 - scalar host math, nothing to vectorize


def unit(x: torch.Tensor) -> torch.Tensor:
    """x / max(‖x‖, 1e-12) along the last dim (F.normalize's rule) with ‖x‖ = p·‖x/p‖, p = max|x|: ‖x‖² never
    overflows (float32 at |x| ≳ 1.8e19) or underflows in the input dtype."""
    peak = x.abs().amax(-1, keepdim=True)  # [..., 1]
    norm = peak * (x / peak.clamp_min(torch.finfo(x.dtype).tiny)).norm(dim=-1, keepdim=True)  # [..., 1]
    return x / norm.clamp_min(UNIT_EPS)


def prompt_centroid(prompts: torch.Tensor) -> torch.Tensor:  # [P, D] -> [D]
    validate_prompts(prompts)
    return unit(unit(prompts).mean(0))


def semantic_margin(e: torch.Tensor, mu_safe: torch.Tensor, mu_unsafe: torch.Tensor) -> torch.Tensor:
    validate_margin_args(e, mu_safe, mu_unsafe)
    u = unit(e)  # [B, D]
    # two separate reductions (not one [B, D] @ [D, 2]): swapping the prompt sets negates bit for bit
    cos_safe = (u * unit(mu_safe)).sum(-1)  # [B]
    cos_unsafe = (u * unit(mu_unsafe)).sum(-1)  # [B]
    return cos_safe - cos_unsafe


@scalar_args("beta")
def additive_shaping(reward: torch.Tensor, beta: float, margin: torch.Tensor, captured: torch.Tensor) -> torch.Tensor:
    validate_additive_args(reward, beta, margin, captured)
    return torch.where(captured, reward + beta * margin, reward)  # [B]


class MarginNormalizer:
    @scalar_args("norm_window", "margin_scale")
    def __init__(self, norm_window: int = 1000, margin_scale: float = 1.0, margin_norm_enable: bool = True):
        validate_normalizer_config(norm_window, margin_scale, margin_norm_enable)
        self.norm_window, self.margin_scale, self.margin_norm_enable = norm_window, margin_scale, margin_norm_enable
        self.buffer: torch.Tensor | None = None  # [norm_window] float64 ring, allocated on the first device seen
        self.pos = self.filled = 0  # host ints: they depend on batch sizes only
        self.clamp_count = torch.zeros((), dtype=torch.int64)
        self.count = torch.zeros((), dtype=torch.int64)

    def __call__(self, m: torch.Tensor) -> torch.Tensor:  # [N] -> [N]
        validate_margins(m)
        x = m.double()
        if self.margin_norm_enable:
            w = self._append(x)  # [filled] the window, in ring order (order-free statistics)
            x = (x - w.mean()) / (w.std(unbiased=False) + NORM_EPS)
        y = x * self.margin_scale
        self.clamp_count = self.clamp_count.to(m.device) + (y.abs() > CLAMP).sum()
        self.count = self.count.to(m.device) + y.numel()
        return y.clamp(-CLAMP, CLAMP).to(m.dtype)

    def _append(self, x: torch.Tensor) -> torch.Tensor:
        if self.buffer is None:
            self.buffer = torch.zeros(self.norm_window, dtype=torch.float64, device=x.device)
        tail = x[-self.norm_window:]  # [n <= norm_window]: older values would be overwritten anyway
        n = tail.numel()
        idx = (self.pos + torch.arange(n, device=x.device)) % self.norm_window
        self.buffer[idx] = tail
        self.pos = (self.pos + n) % self.norm_window
        self.filled = min(self.norm_window, self.filled + n)
        return self.buffer[: self.filled]

    @property
    def clamp_fraction(self) -> torch.Tensor:
        return self.clamp_count.double() / self.count.clamp_min(1).double()


class PotentialShaper:
    @scalar_args("num_envs", "gamma")
    def __init__(self, num_envs: int, gamma: float):
        validate_env_count("PotentialShaper", num_envs)
        validate_gamma(gamma)
        self.num_envs, self.gamma = num_envs, gamma
        self.last: torch.Tensor | None = None  # [B] φ of the last captured observation, input dtype
        self.has_last: torch.Tensor | None = None  # [B] bool: a capture happened in this episode

    @scalar_args("beta")
    def __call__(self, phi: torch.Tensor, captured: torch.Tensor, beta: float) -> torch.Tensor:  # [B] -> [B]
        validate_potential_args(self.num_envs, phi, captured, beta)
        if self.last is None:
            self.last = torch.zeros_like(phi)
        if self.has_last is None:
            self.has_last = torch.zeros_like(captured)
        last = self.last.to(phi.dtype)
        shaped = captured & self.has_last
        out = torch.where(shaped, beta * (self.gamma * phi - last), torch.zeros_like(phi))
        self.last = torch.where(captured, phi, last)
        self.has_last = self.has_last | captured
        return out

    def reset(self, mask: torch.Tensor) -> None:
        validate_mask("PotentialShaper.reset", "mask", mask, self.num_envs)
        if self.has_last is not None:  # nothing stored yet: nothing to forget
            self.has_last = self.has_last & ~mask


class TemporalPool:
    @scalar_args("num_envs", "dim", "window")
    def __init__(self, num_envs: int, dim: int, window: int):
        validate_env_count("TemporalPool", num_envs)
        require_int("TemporalPool", "dim", dim, 1)
        require_int("TemporalPool", "window", window, 1)
        self.num_envs, self.dim, self.window = num_envs, dim, window
        self.buffer: torch.Tensor | None = None  # [B, window, D] ring per env
        self.count: torch.Tensor | None = None  # [B] embeddings held (<= window)
        self.pos: torch.Tensor | None = None  # [B] next slot to write

    def __call__(self, e: torch.Tensor, captured: torch.Tensor) -> torch.Tensor:  # [B, D] -> [B, D]
        validate_env_tensor("TemporalPool", "e", e, (self.num_envs, self.dim))
        validate_mask("TemporalPool", "captured", captured, self.num_envs)
        if self.buffer is None:
            self.buffer = e.new_zeros(self.num_envs, self.window, self.dim)
            self.count = torch.zeros(self.num_envs, dtype=torch.int64, device=e.device)
            self.pos = torch.zeros(self.num_envs, dtype=torch.int64, device=e.device)
        rows = torch.arange(self.num_envs, device=e.device)
        self.buffer[rows, self.pos] = torch.where(captured[:, None], e, self.buffer[rows, self.pos])
        self.pos = torch.where(captured, (self.pos + 1) % self.window, self.pos)
        self.count = torch.where(captured, (self.count + 1).clamp_max(self.window), self.count)
        total = torch.zeros_like(e)  # [B, D]; slot by slot, elementwise: each env's sum is its own
        for j in range(self.window):
            total = total + torch.where((j < self.count)[:, None], self.buffer[:, j], torch.zeros_like(e))
        return total / self.count.clamp_min(1)[:, None].to(e.dtype)

    def reset(self, mask: torch.Tensor) -> None:
        validate_mask("TemporalPool.reset", "mask", mask, self.num_envs)
        if self.count is not None:
            self.count = torch.where(mask, torch.zeros_like(self.count), self.count)
            self.pos = torch.where(mask, torch.zeros_like(self.pos), self.pos)
