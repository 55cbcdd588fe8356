"""Reference ``numerics`` (spec/numerics/): float64 arithmetic, plain Python control flow.

Readability over speed: branches on tensor values (host syncs) are fine here; the fast twin
(fast/numerics.py) does the same maths without them.
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


# ------------------------------------------------------------------------------- numerics note §1
def _centered(x: torch.Tensor) -> torch.Tensor:
    """x − μ in float64, μ = K + mean(x − K), K = x_0 (exact zeros for a constant x)."""
    v = x.double()
    k = v.reshape(-1)[0]
    return v - (k + (v - k).mean())


@scalar_args("eps")
def safe_standardize(x: torch.Tensor, eps: float = STD_EPS) -> torch.Tensor:
    require_floating("safe_standardize", "x", x)
    validate_positive("safe_standardize", "eps", eps)
    if x.numel() == 0:
        return x.clone()
    centered = _centered(x)
    n = x.numel()
    sigma = math.sqrt(float((centered**2).sum()) / (n - 1)) if n > 1 else 0.0
    out = centered / sigma if sigma >= eps else centered  # tiny variance: zero-centre, never divide
    return out.to(x.dtype)


def safe_zero_center(x: torch.Tensor) -> torch.Tensor:
    require_floating("safe_zero_center", "x", x)
    return x.clone() if x.numel() == 0 else _centered(x).to(x.dtype)


class RunningMeanStd:
    """Chan's parallel update from (mean 0, var 1, count epsilon), as Stable-Baselines3."""

    @scalar_args("epsilon")
    def __init__(self, shape=(), epsilon: float = RMS_EPSILON):
        self.shape = validate_shape_arg("RunningMeanStd", shape)
        validate_positive("RunningMeanStd", "epsilon", epsilon)
        self.mean = torch.zeros(self.shape, dtype=torch.float64)
        self.var = torch.ones(self.shape, dtype=torch.float64)
        self.count = torch.tensor(epsilon, dtype=torch.float64)

    def update(self, x: torch.Tensor) -> None:
        validate_rms_batch("RunningMeanStd.update", x, self.shape)
        batch = x.double()  # [N, *shape]
        n = batch.shape[0]
        batch_mean = batch.sum(0) / n
        batch_var = ((batch - batch_mean) ** 2).sum(0) / n
        delta = batch_mean - self.mean
        total = self.count + n
        self.var = (self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total
        self.mean = self.mean + delta * n / total
        self.count = total

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = read_rms_state("RunningMeanStd.load_state_dict", state, self.shape)


# ------------------------------------------------------------------------ PPO review CRITICAL-1
class ObsNormalizer:
    """normalize() reads the statistics as last committed and never changes them; commit() updates."""

    @scalar_args("epsilon", "clip")
    def __init__(self, shape=(), epsilon: float = OBS_EPSILON, clip: float = OBS_CLIP):
        validate_positive("ObsNormalizer", "epsilon", epsilon)
        validate_positive("ObsNormalizer", "clip", clip)
        self.rms = RunningMeanStd(shape)
        self.epsilon, self.clip = epsilon, clip

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        validate_obs("ObsNormalizer.normalize", obs, self.rms.shape)
        z = (obs.double() - self.rms.mean) / torch.sqrt(self.rms.var + self.epsilon)
        return z.clamp(-self.clip, self.clip).to(obs.dtype)

    def commit(self, x: torch.Tensor) -> None:
        self.rms.update(x)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.rms.load_state_dict(state)


# ------------------------------------------------------------------------------- numerics note §3
def ratio_guard(new_log_prob: torch.Tensor, old_log_prob: torch.Tensor):
    validate_same_shape("ratio_guard", "new_log_prob", new_log_prob, old_log_prob=old_log_prob)
    d = new_log_prob.double() - old_log_prob.double()
    finite = torch.isfinite(d)
    safe = torch.where(finite, d, torch.zeros_like(d))  # no NaN reaches exp (or its gradient)
    ratio = torch.exp(safe.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)).clamp(RATIO_MIN, RATIO_MAX)
    ratio = torch.where(finite, ratio, torch.ones_like(ratio))
    detached = d.detach()
    outside = (detached < math.log(RATIO_MIN)) | (detached > math.log(RATIO_MAX))
    events = {"log_ratio_clamped": (finite & (detached.abs() > LOG_RATIO_CLAMP)).sum(),
              "nonfinite": (~finite).sum(), "ratio_clamped": (finite & outside).sum()}
    return ratio.to(new_log_prob.dtype), events


# ------------------------------------------------------------------------------- numerics note §5
class LossGuard:
    """Non-finite losses become a detached 0, counted per kind, with one warning per kind."""

    def __init__(self):
        self._counts: dict[str, int] = {}

    def __call__(self, loss: torch.Tensor, kind: str) -> torch.Tensor:
        validate_loss("LossGuard", loss, kind)
        seen = self._counts.setdefault(kind, 0)
        if bool(torch.isfinite(loss)):
            return loss
        self._counts[kind] = seen + 1
        if seen == 0:
            warnings.warn(f"LossGuard: non-finite {kind} loss ({float(loss.detach())!r}) replaced by 0; "
                          f"further {kind} events are only counted", RuntimeWarning, stacklevel=2)
        return torch.zeros_like(loss).detach()

    def counts(self) -> dict[str, int]:
        return dict(self._counts)


# ------------------------------------------------------------------------------- numerics note §2
@scalar_args("std_eps")
def masked_component_weights(advantages: torch.Tensor, logits: torch.Tensor, std_eps: float = STD_EPS):
    validate_components("masked_component_weights", advantages, logits, std_eps)
    valid = component_std(advantages.double()) > std_eps  # [C]; N = 1 gives NaN → invalid
    weights = torch.zeros_like(logits, dtype=torch.float64)
    if bool(valid.any()):
        active = logits.double()[valid]
        weights = weights.masked_scatter(valid, torch.softmax(active, dim=0))
    return weights.to(logits.dtype), valid


# ------------------------------------------------------------------------------ PPO review HIGH-2
@scalar_args("target_kl")
def kl_early_stop(log_ratio: torch.Tensor, target_kl: float | None):
    validate_log_ratio("kl_early_stop", log_ratio, target_kl)
    d = log_ratio.double()
    kl = (torch.expm1(d) - d).mean()  # k3 = mean(exp(Δ) − 1 − Δ)
    stop = target_kl is not None and not float(kl) <= KL_MULTIPLIER * target_kl
    return torch.tensor(stop), kl.to(log_ratio.dtype)


@scalar_args("n_steps", "target_kl")
def kl_guarded_updates(log_ratio_fn, step_fn, n_steps: int, target_kl: float | None, *,
                       estimator=kl_early_stop):
    """Each step: estimate KL at the current parameters, stop before stepping if it is too large."""
    validate_positive("kl_guarded_updates", "target_kl", target_kl, allow_none=True)
    kls = []
    for i in range(n_steps):
        log_ratio = log_ratio_fn(i)  # pre-step parameters
        stop, kl = estimator(log_ratio.detach(), target_kl)
        kls.append(kl)
        if bool(stop):
            return kls, i
        step_fn(i, log_ratio)
    return kls, n_steps


# ------------------------------------------------------------------------------ PPO review HIGH-4
@scalar_args("value_clip")
def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               value_clip: float | None = 10.0) -> torch.Tensor:
    validate_same_shape("value_loss", "values", values, old_values=old_values, returns=returns)
    validate_positive("value_loss", "value_clip", value_clip, allow_none=True)
    v, old, ret = values.double(), old_values.double(), returns.double()
    unclipped = (v - ret) ** 2
    if value_clip is None:
        return (0.5 * unclipped.mean()).to(values.dtype)
    clipped = (old + (v - old).clamp(-value_clip, value_clip) - ret) ** 2
    return (0.5 * torch.maximum(unclipped, clipped).mean()).to(values.dtype)


# ------------------------------------------------------------------------------ PPO review HIGH-3
def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    require_floating("masked_mean", "x", x)
    validate_mask("masked_mean", x, mask)
    selected = x.double()[mask]
    return (selected.sum() / max(selected.numel(), 1)).to(x.dtype)


@scalar_args("clip_ratio")
def masked_policy_loss(ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                       clip_ratio: float = 0.2) -> torch.Tensor:
    validate_same_shape("masked_policy_loss", "ratio", ratio, advantages=advantages)
    validate_mask("masked_policy_loss", ratio, mask)
    validate_positive("masked_policy_loss", "clip_ratio", clip_ratio)
    r, a = ratio.double()[mask], advantages.double()[mask]
    surrogate = torch.minimum(r * a, r.clamp(1 - clip_ratio, 1 + clip_ratio) * a)
    return (-surrogate.sum() / max(surrogate.numel(), 1)).to(ratio.dtype)


def entropy_loss(entropy: dict[str, torch.Tensor], masks: dict[str, torch.Tensor],
                 coef: dict[str, float] | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """−Σ_h c_h·masked_mean(H_h, mask_h) and the per-head masked means (PPO review MEDIUM-3)."""
    coefs = validate_entropy_heads("entropy_loss", entropy, masks, coef)
    per_head = {head: masked_mean(h, masks[head]) for head, h in entropy.items()}
    loss = -sum(coefs[head] * v.double() for head, v in per_head.items())  # validated: at least one head
    return loss.to(next(iter(entropy.values())).dtype), per_head  # with its graph: a loss to differentiate
