"""Runtime half of contract ``shaping`` (the formula, clauses and properties: spec/shaping.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import (
    require_finite,
    require_floating,
    require_int,
    require_nonempty,
    require_range,
)

CLAMP = 2.0  # §5.1: clamp(., -2, 2)


NORM_EPS = 1e-8  # §4.0.3: (m - mu_m) / (sigma_m + eps)


UNIT_EPS = 1e-12  # torch.nn.functional.normalize's default


NORMALIZER_DEFAULTS = dict(norm_window=1000, margin_scale=1.0, margin_norm_enable=True)  # MarginNormalizer (SHAPE-19)


def validate_prompts(prompts: torch.Tensor) -> None:
    require_floating("prompt_centroid", "prompts", prompts)
    if prompts.dim() != 2:
        raise ValueError(f"prompt_centroid: argument 'prompts' must be [P, D], got shape {tuple(prompts.shape)}")
    require_nonempty("prompt_centroid", "prompts", prompts)
    require_finite("prompt_centroid", "prompts", prompts)


def validate_margin_args(e: torch.Tensor, mu_safe: torch.Tensor, mu_unsafe: torch.Tensor) -> None:
    require_floating("semantic_margin", "e", e)
    if e.dim() != 2:
        raise ValueError(f"semantic_margin: argument 'e' must be [B, D], got shape {tuple(e.shape)}")
    for name, mu in (("mu_safe", mu_safe), ("mu_unsafe", mu_unsafe)):
        require_floating("semantic_margin", name, mu)
        if mu.dim() != 1 or mu.shape[0] != e.shape[1]:
            raise ValueError(f"semantic_margin: argument '{name}' has shape {tuple(mu.shape)}, expected "
                             f"({e.shape[1]},) (the embedding dimension D of 'e' {tuple(e.shape)})")


def validate_beta_args(step: int, total_steps: int, beta_start: float, beta_end_step_fraction: float) -> None:
    require_int("beta_schedule", "step", step, 0)
    require_int("beta_schedule", "total_steps", total_steps, 1)
    require_range("beta_schedule", "beta_start", beta_start, 0.0, math.inf, hi_open=True)
    require_range("beta_schedule", "beta_end_step_fraction", beta_end_step_fraction, 0.0, 1.0, lo_open=True)


def validate_normalizer_config(norm_window: int, margin_scale: float, margin_norm_enable: bool) -> None:
    require_int("MarginNormalizer", "norm_window", norm_window, 1)
    require_range("MarginNormalizer", "margin_scale", margin_scale, 0.0, math.inf, lo_open=True, hi_open=True)
    if not isinstance(margin_norm_enable, bool):
        raise TypeError(f"MarginNormalizer: argument 'margin_norm_enable' must be a bool, "
                        f"got {type(margin_norm_enable).__name__}")


def validate_margins(m: torch.Tensor) -> None:
    require_floating("MarginNormalizer", "m", m)
    if m.dim() != 1:
        raise ValueError(f"MarginNormalizer: argument 'm' must be [N], got shape {tuple(m.shape)}")
    require_finite("MarginNormalizer", "m", m)


def validate_env_tensor(fn: str, name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    require_floating(fn, name, t)
    if tuple(t.shape) != shape:
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected {shape} "
                         "(one row per env)")


def validate_mask(fn: str, name: str, mask: torch.Tensor, num_envs: int) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{fn}: argument '{name}' must be a torch.bool tensor, got {got}")
    if tuple(mask.shape) != (num_envs,):
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(mask.shape)}, expected ({num_envs},)")


def validate_additive_args(reward, beta, margin, captured) -> None:
    require_floating("additive_shaping", "reward", reward)
    if reward.dim() != 1:
        raise ValueError(f"additive_shaping: argument 'reward' must be [B], got shape {tuple(reward.shape)}")
    validate_env_tensor("additive_shaping", "margin", margin, tuple(reward.shape))
    validate_mask("additive_shaping", "captured", captured, reward.shape[0])
    require_range("additive_shaping", "beta", beta, 0.0, math.inf, hi_open=True)


def validate_env_count(fn: str, num_envs: int) -> None:
    require_int(fn, "num_envs", num_envs, 1)


def validate_gamma(gamma: float) -> None:
    require_range("PotentialShaper", "gamma", gamma, 0.0, 1.0)


def validate_potential_args(num_envs: int, phi, captured, beta) -> None:
    validate_env_tensor("PotentialShaper", "phi", phi, (num_envs,))
    validate_mask("PotentialShaper", "captured", captured, num_envs)
    require_range("PotentialShaper", "beta", beta, 0.0, math.inf, hi_open=True)
