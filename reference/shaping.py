"""Reference ``shaping`` (spec/shaping.py): float64 arithmetic, per-env Python loops and deques."""

from __future__ import annotations

import math
from collections import deque

import torch

from rlspec.contracts.shaping import (
    CLAMP,
    NORM_EPS,
    UNIT_EPS,
    validate_additive_args,
    validate_beta_args,
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


def _unit(x: torch.Tensor) -> torch.Tensor:
    """x / max(‖x‖, 1e-12) along the last dim, in float64."""
    x = x.double()
    return x / x.norm(dim=-1, keepdim=True).clamp_min(UNIT_EPS)


def prompt_centroid(prompts: torch.Tensor) -> torch.Tensor:
    """μ = normalize(mean_p normalize(prompt_p)): prompts [P, D] -> [D] (§5.1)."""
    validate_prompts(prompts)
    return _unit(_unit(prompts).mean(0)).to(prompts.dtype)


def semantic_margin(e: torch.Tensor, mu_safe: torch.Tensor, mu_unsafe: torch.Tensor) -> torch.Tensor:
    """m = cos(e, μ_safe) − cos(e, μ_unsafe): e [B, D] -> [B] (§5.1, §4.0.3)."""
    validate_margin_args(e, mu_safe, mu_unsafe)
    u = _unit(e)  # [B, D]
    return ((u * _unit(mu_safe)).sum(-1) - (u * _unit(mu_unsafe)).sum(-1)).to(e.dtype)


@scalar_args("step", "total_steps", "beta_start", "beta_end_step_fraction")
def beta_schedule(step: int, total_steps: int, beta_start: float, beta_end_step_fraction: float) -> float:
    """β_t = β_0 · ½(1 + cos(π · min(1, t / (α·T)))) (§4.0.3); exactly 0 from t = α·T on."""
    validate_beta_args(step, total_steps, beta_start, beta_end_step_fraction)
    progress = min(1.0, step / (beta_end_step_fraction * total_steps))
    return beta_start * 0.5 * (1.0 + math.cos(math.pi * progress))


@scalar_args("beta")
def additive_shaping(reward: torch.Tensor, beta: float, margin: torch.Tensor, captured: torch.Tensor) -> torch.Tensor:
    """r' = r + β·m̄ on captured envs, r on skipped ones: [B] (§5.1, §26.4)."""
    validate_additive_args(reward, beta, margin, captured)
    shaped = (reward.double() + beta * margin.double()).to(reward.dtype)
    return torch.where(captured, shaped, reward)


class MarginNormalizer:
    """Running z-normalization over the last ``norm_window`` margins, scale, clamp ±2, clamp counter."""

    @scalar_args("norm_window", "margin_scale")
    def __init__(self, norm_window: int = 1000, margin_scale: float = 1.0, margin_norm_enable: bool = True):
        validate_normalizer_config(norm_window, margin_scale, margin_norm_enable)
        self.margin_scale, self.margin_norm_enable = margin_scale, margin_norm_enable
        self.window: deque[float] = deque(maxlen=norm_window)
        self.clamp_count = 0
        self.count = 0

    def __call__(self, m: torch.Tensor) -> torch.Tensor:  # [N] -> [N]
        validate_margins(m)
        x = m.double()
        if self.margin_norm_enable:
            self.window.extend(x.tolist())
            w = torch.tensor(list(self.window), dtype=torch.float64)  # [min(seen, norm_window)]
            x = (x - w.mean()) / (w.std(unbiased=False) + NORM_EPS)
        y = x * self.margin_scale
        self.clamp_count += int((y.abs() > CLAMP).sum())
        self.count += y.numel()
        return y.clamp(-CLAMP, CLAMP).to(m.dtype)

    @property
    def clamp_fraction(self) -> float:
        return self.clamp_count / self.count if self.count else 0.0


class PotentialShaper:
    """F = β(γ·φ − φ_last) per env; skipped captures and first captures of an episode give exactly 0."""

    @scalar_args("num_envs", "gamma")
    def __init__(self, num_envs: int, gamma: float):
        validate_env_count("PotentialShaper", num_envs)
        validate_gamma(gamma)
        self.num_envs, self.gamma = num_envs, gamma
        self.last: list[float | None] = [None] * num_envs  # φ of the env's last captured observation

    @scalar_args("beta")
    def __call__(self, phi: torch.Tensor, captured: torch.Tensor, beta: float) -> torch.Tensor:  # [B] -> [B]
        validate_potential_args(self.num_envs, phi, captured, beta)
        out = torch.zeros(self.num_envs, dtype=torch.float64)
        for b in range(self.num_envs):
            if not bool(captured[b]):
                continue  # reuse the last potential: zero increment (§4.0.3)
            p = float(phi[b])
            if self.last[b] is not None:
                out[b] = beta * (self.gamma * p - self.last[b])
            self.last[b] = p
        return out.to(phi.dtype)

    def reset(self, mask: torch.Tensor) -> None:
        validate_mask("PotentialShaper.reset", "mask", mask, self.num_envs)
        for b in mask.nonzero().flatten().tolist():
            self.last[b] = None


class TemporalPool:
    """Per-env mean of the last ``window`` captured embeddings of the current episode (§5.4, §33)."""

    @scalar_args("num_envs", "dim", "window")
    def __init__(self, num_envs: int, dim: int, window: int):
        validate_env_count("TemporalPool", num_envs)
        require_int("TemporalPool", "dim", dim, 1)
        require_int("TemporalPool", "window", window, 1)
        self.num_envs, self.dim = num_envs, dim
        self.windows = [deque(maxlen=window) for _ in range(num_envs)]  # of [D] float64 tensors

    def __call__(self, e: torch.Tensor, captured: torch.Tensor) -> torch.Tensor:  # [B, D] -> [B, D]
        validate_env_tensor("TemporalPool", "e", e, (self.num_envs, self.dim))
        validate_mask("TemporalPool", "captured", captured, self.num_envs)
        out = torch.zeros(self.num_envs, self.dim, dtype=torch.float64)
        for b, window in enumerate(self.windows):
            if bool(captured[b]):
                window.append(e[b].double().clone())
            if window:
                out[b] = torch.stack(list(window)).mean(0)
        return out.to(e.dtype)

    def reset(self, mask: torch.Tensor) -> None:
        validate_mask("TemporalPool.reset", "mask", mask, self.num_envs)
        for b in mask.nonzero().flatten().tolist():
            self.windows[b].clear()
