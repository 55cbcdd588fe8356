"""Fast ``numerics`` (spec/numerics/): the input's dtype and device, no host synchronization.

Every hot function returns tensors and branches with ``torch.where`` instead of Python ``if`` on tensor
values, so a CUDA training loop never stalls on a guard. The only host syncs are where the contract
needs a decision on the host: rejecting a bad RunningMeanStd / ObsNormalizer batch (state unchanged),
``LossGuard.counts()`` (which also emits the deferred warnings) and the early-stop ``break`` of
``kl_guarded_updates``. Shape and dtype validation reads metadata only.
"""

from __future__ import annotations

import math
import warnings

import torch

from rlspec.contracts.numerics import (
    KL_MULTIPLIER,
    LOG_RATIO_CLAMP,
    OBS_CLIP,
    OBS_EPSILON,
    RATIO_MAX,
    RATIO_MIN,
    RMS_EPSILON,
    STD_EPS,
    component_std,
    read_rms_state,
    validate_components,
    validate_entropy_heads,
    validate_log_ratio,
    validate_loss,
    validate_mask,
    validate_obs,
    validate_positive,
    validate_rms_batch,
    validate_same_shape,
    validate_shape_arg,
)
from rlspec.contracts.validate import require_floating, scalar_args
from rlspec.reference.numerics import kl_guarded_updates as _kl_guarded_updates

_LOG_RATIO_MIN, _LOG_RATIO_MAX = math.log(RATIO_MIN), math.log(RATIO_MAX)


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _centered(x: torch.Tensor) -> torch.Tensor:
    """x − (K + mean(x − K)), K = x_0: exact zeros for a constant x."""
    v = x.to(_compute_dtype(x))
    shifted = v - v.reshape(-1)[0]  # K = x_0 as a 0-d view: stays on the device
    return shifted - shifted.mean()


@scalar_args("eps")
def safe_standardize(x: torch.Tensor, eps: float = STD_EPS) -> torch.Tensor:
    require_floating("safe_standardize", "x", x)
    validate_positive("safe_standardize", "eps", eps)
    if x.numel() == 0:
        return x.clone()
    centered = _centered(x)
    n = x.numel()
    sigma = (centered.square().sum() / (n - 1)).sqrt() if n > 1 else centered.new_zeros(())
    divided = centered / torch.where(sigma >= eps, sigma, torch.ones_like(sigma))
    return torch.where(sigma >= eps, divided, centered).to(x.dtype)


def safe_zero_center(x: torch.Tensor) -> torch.Tensor:
    require_floating("safe_zero_center", "x", x)
    return x.clone() if x.numel() == 0 else _centered(x).to(x.dtype)


class RunningMeanStd:
    """Chan's update with float64 state on the batch's device; update() syncs once (input check)."""

    @scalar_args("epsilon")
    def __init__(self, shape=(), epsilon: float = RMS_EPSILON):
        self.shape = validate_shape_arg("RunningMeanStd", shape)
        validate_positive("RunningMeanStd", "epsilon", epsilon)
        self.mean = torch.zeros(self.shape, dtype=torch.float64)
        self.var = torch.ones(self.shape, dtype=torch.float64)
        self.count = torch.tensor(epsilon, dtype=torch.float64)

    def update(self, x: torch.Tensor) -> None:
        validate_rms_batch("RunningMeanStd.update", x, self.shape)
        batch_var, batch_mean = torch.var_mean(x.to(torch.float64), dim=0, correction=0)  # [*shape] each
        n = x.shape[0]
        mean, var, count = (t.to(x.device) for t in (self.mean, self.var, self.count))
        delta = batch_mean - mean
        total = count + n
        self.var = (var * count + batch_var * n + delta.square() * count * n / total) / total
        self.mean = mean + delta * n / total
        self.count = total

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = read_rms_state("RunningMeanStd.load_state_dict", state, self.shape)


class ObsNormalizer:
    """Frozen statistics: commit() refreshes the cached (mean, 1/sqrt(var+eps)); normalize() only reads."""

    @scalar_args("epsilon", "clip")
    def __init__(self, shape=(), epsilon: float = OBS_EPSILON, clip: float = OBS_CLIP):
        validate_positive("ObsNormalizer", "epsilon", epsilon)
        validate_positive("ObsNormalizer", "clip", clip)
        self.rms = RunningMeanStd(shape)
        self.epsilon, self.clip = epsilon, clip
        self._refresh()

    def _refresh(self) -> None:
        self._mean = self.rms.mean
        self._inv_std = torch.rsqrt(self.rms.var + self.epsilon)  # [*shape] float64

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        validate_obs("ObsNormalizer.normalize", obs, self.rms.shape)
        dtype = _compute_dtype(obs)
        mean = self._mean.to(device=obs.device, dtype=dtype)
        inv_std = self._inv_std.to(device=obs.device, dtype=dtype)
        return ((obs.to(dtype) - mean) * inv_std).clamp(-self.clip, self.clip).to(obs.dtype)

    def commit(self, x: torch.Tensor) -> None:
        self.rms.update(x)
        self._refresh()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.rms.load_state_dict(state)
        self._refresh()


def ratio_guard(new_log_prob: torch.Tensor, old_log_prob: torch.Tensor):
    validate_same_shape("ratio_guard", "new_log_prob", new_log_prob, old_log_prob=old_log_prob)
    d = new_log_prob - old_log_prob  # [...]
    finite = torch.isfinite(d)
    safe = torch.where(finite, d, torch.zeros_like(d))
    ratio = torch.where(finite, safe.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp().clamp(RATIO_MIN, RATIO_MAX),
                        torch.ones_like(d))
    dd = safe.detach()
    events = {"log_ratio_clamped": (dd.abs() > LOG_RATIO_CLAMP).sum(),
              "nonfinite": (~finite).sum(),
              "ratio_clamped": ((dd < _LOG_RATIO_MIN) | (dd > _LOG_RATIO_MAX)).sum()}
    return ratio, events


class LossGuard:
    """Counts live on the device; counts() is the sync point that reads them and warns once per kind."""

    def __init__(self):
        self._counts: dict[str, torch.Tensor] = {}
        self._warned: set[str] = set()

    def __call__(self, loss: torch.Tensor, kind: str) -> torch.Tensor:
        validate_loss("LossGuard", loss, kind)
        finite = torch.isfinite(loss)
        seen = self._counts.get(kind)
        bad = (~finite).to(torch.int64)
        self._counts[kind] = bad if seen is None else seen + bad
        return torch.where(finite, loss, torch.zeros_like(loss))

    def counts(self) -> dict[str, int]:
        out = {k: int(v) for k, v in self._counts.items()}
        for kind, n in out.items():
            if n and kind not in self._warned:
                self._warned.add(kind)
                warnings.warn(f"LossGuard: {n} non-finite {kind} loss(es) replaced by 0; further {kind} "
                              "events are only counted", RuntimeWarning, stacklevel=2)
        return out


@scalar_args("std_eps")
def masked_component_weights(advantages: torch.Tensor, logits: torch.Tensor, std_eps: float = STD_EPS):
    validate_components("masked_component_weights", advantages, logits, std_eps)
    valid = component_std(advantages) > std_eps  # [C]; NaN (N = 1) → False
    top = torch.where(valid, logits, torch.full_like(logits, -math.inf)).amax().detach()
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    z = torch.where(valid, logits - top, torch.zeros_like(logits))  # masked logits never reach exp
    e = torch.where(valid, z.exp(), torch.zeros_like(z))
    total = e.sum()
    return e / torch.where(total > 0, total, torch.ones_like(total)), valid


@scalar_args("target_kl")
def kl_early_stop(log_ratio: torch.Tensor, target_kl: float | None):
    validate_log_ratio("kl_early_stop", log_ratio, target_kl)
    kl = (torch.expm1(log_ratio) - log_ratio).mean()
    if target_kl is None:
        return torch.zeros((), dtype=torch.bool, device=log_ratio.device), kl
    return ~(kl <= KL_MULTIPLIER * target_kl), kl


@scalar_args("n_steps", "target_kl")
def kl_guarded_updates(log_ratio_fn, step_fn, n_steps: int, target_kl: float | None):
    """The reference loop with this module's estimator (its break is the one sync per step)."""
    return _kl_guarded_updates(log_ratio_fn, step_fn, n_steps, target_kl, estimator=kl_early_stop)


@scalar_args("value_clip")
def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               value_clip: float | None = 10.0) -> torch.Tensor:
    validate_same_shape("value_loss", "values", values, old_values=old_values, returns=returns)
    validate_positive("value_loss", "value_clip", value_clip, allow_none=True)
    unclipped = (values - returns).square()
    if value_clip is None:
        return 0.5 * unclipped.mean()
    clipped = (old_values + (values - old_values).clamp(-value_clip, value_clip) - returns).square()
    return 0.5 * torch.maximum(unclipped, clipped).mean()


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    require_floating("masked_mean", "x", x)
    validate_mask("masked_mean", x, mask)
    return torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum().clamp(min=1)


@scalar_args("clip_ratio")
def masked_policy_loss(ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                       clip_ratio: float = 0.2) -> torch.Tensor:
    validate_same_shape("masked_policy_loss", "ratio", ratio, advantages=advantages)
    validate_mask("masked_policy_loss", ratio, mask)
    validate_positive("masked_policy_loss", "clip_ratio", clip_ratio)
    # select before the surrogate: masked-out garbage (NaN, inf) would give 0·NaN gradients through a later select
    r = torch.where(mask, ratio, torch.ones_like(ratio))
    a = torch.where(mask, advantages, torch.zeros_like(advantages))
    return -masked_mean(torch.minimum(r * a, r.clamp(1 - clip_ratio, 1 + clip_ratio) * a), mask)


def entropy_loss(entropy: dict[str, torch.Tensor], masks: dict[str, torch.Tensor],
                 coef: dict[str, float] | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """−Σ_h c_h·masked_mean(H_h, mask_h) and the per-head masked means (PPO review MEDIUM-3); no host sync."""
    coefs = validate_entropy_heads("entropy_loss", entropy, masks, coef)
    per_head = {head: masked_mean(h, masks[head]) for head, h in entropy.items()}
    return -sum(coefs[head] * v for head, v in per_head.items()), per_head
