"""Planted bugs for ``numerics``: the reference with exactly one bug each (after the contract's own input
validation), named with the clause that must catch it and the clauses that must still pass."""

from __future__ import annotations

import types
import warnings

import torch
from planted import Planted

from rlspec.contracts.numerics import component_std, validate_components, validate_mask
from rlspec.reference import numerics as ref
from rlspec.spec.numerics import INTERFACE


def _numerics(**overrides) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{**{n: getattr(ref, n) for n in INTERFACE}, **overrides})


class _CountsBatches(ref.RunningMeanStd):
    """Chan's update with a wrong count: +1 per batch instead of +N samples."""

    def update(self, x):
        count = self.count.clone()
        super().update(x)
        self.count = count + 1


class _ObsNormalizerThatLearns(ref.ObsNormalizer):
    """CRITICAL-1 drift: statistics updated on every normalize() during the rollout."""

    def normalize(self, obs):
        out = super().normalize(obs)
        self.rms.update(obs.reshape(-1, *self.rms.shape))
        return out


class _ObsNormalizer(ref.ObsNormalizer):
    """The reference normalizer on top of the buggy RunningMeanStd (so commit == update still holds)."""

    def __init__(self, shape=(), epsilon=1e-8, clip=10.0):
        super().__init__(shape, epsilon, clip)
        self.rms = _CountsBatches(shape)


class _LossGuardWarnsEveryTime(ref.LossGuard):
    def __call__(self, loss, kind):
        out = super().__call__(loss, kind)
        if not bool(torch.isfinite(loss)) and self._counts[kind] > 1:
            warnings.warn(f"LossGuard: non-finite {kind} loss replaced by 0", RuntimeWarning, stacklevel=2)
        return out


def _kl_after_step(log_ratio_fn, step_fn, n_steps, target_kl):
    """KL checked after the optimizer step: the step that overshoots has already been taken."""
    kls = []
    for i in range(n_steps):
        step_fn(i, log_ratio_fn(i))
        stop, kl = ref.kl_early_stop(log_ratio_fn(i).detach(), target_kl)
        kls.append(kl)
        if bool(stop):
            return kls, i + 1
    return kls, n_steps


def _value_loss_policy_clip(values, old_values, returns, value_clip=10.0):
    """Clips the value with the policy clip ratio 0.2 instead of value_clip."""
    ref.value_loss(values, old_values, returns, value_clip)  # the contract's validation
    return ref.value_loss(values, old_values, returns, 0.2 if value_clip is not None else None)


def _standardize_plain(x, eps=1e-8):
    """(x − mean) / std with no tiny-variance rule: a constant gives 0/0 = NaN."""
    ref.safe_standardize(x, eps)  # the contract's validation
    return x.clone() if x.numel() == 0 else ((x - x.mean()) / x.std()).to(x.dtype)


def _masked_mean_unclamped(x, mask):
    """Σ m·x / Σ m: a head with no relevant sample divides 0 by 0."""
    validate_mask("masked_mean", x, mask)
    return torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum()


def _ratio_clamp_then_check(new_log_prob, old_log_prob):
    """Numerics note §3 read literally: clamp first, so Δ = ±Inf becomes ratio 100 / 0.01, not 1."""
    ratio, events = ref.ratio_guard(new_log_prob, old_log_prob)
    d = (new_log_prob - old_log_prob).clamp(-20.0, 20.0)
    ratio = torch.where(torch.isnan(d), torch.ones_like(d), d.exp().clamp(0.01, 100.0))
    return ratio, events


def _mask_with_fill(advantages, logits, std_eps=1e-8):
    """Numerics note §2 literally: fill masked logits with -1e10; with no active component all get 1/C."""
    validate_components("masked_component_weights", advantages, logits, std_eps)
    valid = component_std(advantages) > std_eps
    return torch.softmax(torch.where(valid, logits, torch.full_like(logits, -1e10)), 0), valid


def _entropy_over_all_steps(entropy, masks, coef=None):
    """MEDIUM-3's dilution: every head averaged over all steps, also those where it did nothing."""
    per_head = {head: h.double().mean().to(h.dtype) for head, h in entropy.items()}
    return -sum((coef or {}).get(head, 1.0) * v for head, v in per_head.items()), per_head


def _entropy_loss_constant(entropy, masks, coef=None):
    """the right value as a new tensor: no gradient reaches any head's entropy."""
    loss, per_head = ref.entropy_loss(entropy, masks, coef)
    return loss.detach(), per_head


def _value_loss_clipped_side_detached(values, old_values, returns, value_clip=10.0):
    """the clipped branch on detached inputs: the same value, no gradient where it is the larger term."""
    if value_clip is None:
        return ref.value_loss(values, old_values, returns, None)
    v, o, r = values.double(), old_values.double(), returns.double()
    clipped = (o + (v - o).clamp(-value_clip, value_clip) - r).square().detach()
    return (0.5 * torch.maximum((v - r).square(), clipped).mean()).to(values.dtype)


def _policy_loss_select_after(ratio, advantages, mask, clip_ratio=0.2):
    """the surrogate of every entry, then a select: right values, but NaN/inf garbage in masked-out entries
    sends 0·NaN = NaN gradients."""
    validate_mask("masked_policy_loss", ratio, mask)
    surrogate = torch.minimum(ratio * advantages, ratio.clamp(1 - clip_ratio, 1 + clip_ratio) * advantages)
    return -torch.where(mask, surrogate, torch.zeros_like(surrogate)).sum() / mask.sum().clamp(min=1)


def _spared(*failing: str) -> tuple[str, ...]:
    return tuple(f"NUM-{i}" for i in range(1, 23) if f"NUM-{i}" not in failing)


PLANTED_NUMERICS = (
    Planted("Chan update with a wrong count", "numerics",
            _numerics(RunningMeanStd=_CountsBatches, ObsNormalizer=_ObsNormalizer), "NUM-6", "count after",
            _spared("NUM-6", "NUM-7", "NUM-10", "NUM-11")),
    Planted("KL checked after the step", "numerics", _numerics(kl_guarded_updates=_kl_after_step), "NUM-18",
            "AFTER the optimizer step", _spared("NUM-18")),
    Planted("value clip using the policy clip range", "numerics", _numerics(value_loss=_value_loss_policy_clip),
            "NUM-19", "value_loss (value_clip=10.0)", _spared("NUM-19")),
    Planted("standardize of a constant gives NaN", "numerics", _numerics(safe_standardize=_standardize_plain),
            "NUM-2", "expected exact zeros", _spared("NUM-2", "NUM-3")),
    Planted("masked mean dividing by 0", "numerics", _numerics(masked_mean=_masked_mean_unclamped), "NUM-20",
            "(0 relevant)", _spared("NUM-20")),
    Planted("normalizer updated during the rollout", "numerics",
            _numerics(ObsNormalizer=_ObsNormalizerThatLearns), "NUM-11", "must stay frozen until commit()",
            _spared("NUM-11", "NUM-9")),
    Planted("ratio guard clamps before the finiteness check", "numerics",
            _numerics(ratio_guard=_ratio_clamp_then_check), "NUM-13", "ratio", _spared("NUM-13")),
    Planted("loss guard warns on every event", "numerics", _numerics(LossGuard=_LossGuardWarnsEveryTime),
            "NUM-15", "expected exactly one per kind", _spared("NUM-15")),
    Planted("component mask by -1e10 fill", "numerics", _numerics(masked_component_weights=_mask_with_fill),
            "NUM-16", "softmax over the valid components only", _spared("NUM-16")),
    Planted("entropy averaged over steps where the head did nothing", "numerics",
            _numerics(entropy_loss=_entropy_over_all_steps), "NUM-22", "entropy of head",
            _spared("NUM-22")),
    Planted("entropy loss without a graph", "numerics", _numerics(entropy_loss=_entropy_loss_constant), "NUM-29",
            "entropy_loss", ("NUM-22",)),
    Planted("value loss with its clipped branch detached", "numerics",
            _numerics(value_loss=_value_loss_clipped_side_detached), "NUM-29", "value_loss", ("NUM-19", "NUM-24")),
    Planted("masked policy loss selecting after the surrogate", "numerics",
            _numerics(masked_policy_loss=_policy_loss_select_after), "NUM-32", "masked_policy_loss", ("NUM-20", "NUM-29")),
)
