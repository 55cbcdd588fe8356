"""Planted bugs: textbook slips in numerics, shaping, lagrange and parity, each the reference with one of them.

These are the mistakes a literal reading of a formula makes (eps outside the square root, the unbiased where the
population std is meant, a window one longer, Adam without its bias corrections, the advantage mix without its
1 + λ); test_planted.py requires each to die under the ``ci`` profile, and test_planted_draws.py under random
draws of the same budget, so that the kill rests on pinned edge cases, not on which examples happen to be drawn.
"""

from __future__ import annotations

import math
import types
from collections import deque

import torch
from planted import Planted

from rlspec.contracts.parity import ADV_EPS
from rlspec.reference import lagrange as ref_lag
from rlspec.reference import numerics as ref_num
from rlspec.reference import parity as ref_parity
from rlspec.reference import shaping as ref_shaping


def _with(module, names: tuple[str, ...], **overrides) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{**{n: getattr(module, n) for n in names}, **overrides})


NUMERICS = ("safe_standardize", "safe_zero_center", "RunningMeanStd", "ObsNormalizer", "ratio_guard", "LossGuard",
            "masked_component_weights", "kl_early_stop", "kl_guarded_updates", "value_loss", "masked_mean",
            "masked_policy_loss", "entropy_loss")
SHAPING = ("prompt_centroid", "semantic_margin", "beta_schedule", "additive_shaping", "MarginNormalizer",
           "PotentialShaper", "TemporalPool")
LAGRANGE = ("DualAscent", "OmniSafeLagrange", "PIDLagrangian", "SauteBudget", "SimmerPID")


class _EpsOutsideRoot(ref_num.ObsNormalizer):
    """(obs − mean) / (sqrt(var) + eps): the epsilon added outside the square root."""

    def normalize(self, obs):
        z = (obs.double() - self.rms.mean) / (torch.sqrt(self.rms.var) + self.epsilon)
        return z.clamp(-self.clip, self.clip).to(obs.dtype)


def _value_loss_min(values, old_values, returns, value_clip=10.0):
    """min, not max, of the clipped and unclipped squared errors."""
    ref_num.value_loss(values, old_values, returns, value_clip)  # the contract's validation
    if value_clip is None:
        return ref_num.value_loss(values, old_values, returns, None)
    v, o, r = values.double(), old_values.double(), returns.double()
    clipped = (o + (v - o).clamp(-value_clip, value_clip) - r) ** 2
    return (0.5 * torch.minimum((v - r) ** 2, clipped).mean()).to(values.dtype)


def _ratio_without_outer_clamp(new_log_prob, old_log_prob):
    """exp(clamp(Δ, ±20)) without the clamp of the ratio to [0.01, 100]."""
    _, events = ref_num.ratio_guard(new_log_prob, old_log_prob)
    d = new_log_prob.double() - old_log_prob.double()
    ratio = torch.where(torch.isfinite(d), d.clamp(-20.0, 20.0).exp(), torch.ones_like(d))
    return ratio.to(new_log_prob.dtype), events


def _kl_k1(log_ratio, target_kl):
    """KL estimated as mean(−Δ) (Schulman's k1) instead of k3."""
    _, kl = ref_num.kl_early_stop(log_ratio, target_kl)
    k1 = (-log_ratio.double()).mean()
    stop = torch.tensor(False) if target_kl is None else ~(k1 <= 1.5 * target_kl)
    return stop, k1.to(kl.dtype)


def _standardize_population(x, eps=1e-8):
    """(x − μ)/σ with the population σ (ddof 0) where the unbiased one is meant."""
    out = ref_num.safe_standardize(x, eps)
    if x.numel() < 2:
        return out
    flat = x.double().reshape(-1)
    mu = flat[0] + (flat - flat[0]).mean()
    sigma = ((flat - mu) ** 2).mean().sqrt()
    return ((flat - mu) / sigma if sigma >= eps else flat - mu).reshape(x.shape).to(x.dtype)


class _WindowOneLonger(ref_shaping.MarginNormalizer):
    """Keeps norm_window + 1 margins."""

    def __init__(self, norm_window=1000, margin_scale=1.0, margin_norm_enable=True):
        super().__init__(norm_window, margin_scale, margin_norm_enable)
        self.window = deque(maxlen=norm_window + 1)


class _WindowUnbiased(ref_shaping.MarginNormalizer):
    """z-normalizes by the unbiased std of the window where the population std is meant."""

    def __call__(self, m):
        ref_shaping.validate_margins(m)
        x = m.double()
        if self.margin_norm_enable:
            self.window.extend(x.tolist())
            w = torch.tensor(list(self.window), dtype=torch.float64)
            std = w.std(unbiased=True) if w.numel() > 1 else torch.zeros((), dtype=torch.float64)
            x = (x - w.mean()) / (std + ref_shaping.NORM_EPS)
        y = x * self.margin_scale
        self.clamp_count += int((y.abs() > ref_shaping.CLAMP).sum())
        self.count += y.numel()
        return y.clamp(-ref_shaping.CLAMP, ref_shaping.CLAMP).to(m.dtype)


class _PoolOneLonger(ref_shaping.TemporalPool):
    """Pools the last window + 1 captures."""

    def __init__(self, num_envs, dim, window):
        super().__init__(num_envs, dim, window)
        self.windows = [deque(maxlen=window + 1) for _ in range(num_envs)]


class _PidDelayOneLonger(ref_lag.PIDLagrangian):
    """The derivative term reads the cost EMA d_delay + 1 updates back."""

    def __init__(self, **config):
        super().__init__(**config)
        self.cost_ds = deque([0.0], maxlen=self.cost_ds.maxlen + 1)


class _AdamWithoutBiasCorrection(ref_lag.OmniSafeLagrange):
    """Adam's step without the bias corrections 1 − β₁ᵗ and 1 − β₂ᵗ."""

    def update(self, jc, scale=1.0):
        jc, m, usable = ref_lag._read("OmniSafeLagrange.update", jc, scale)
        if not usable:
            return self._skip()
        b1, b2 = ref_lag.ADAM_BETAS
        grad = -(jc - self.cost_limit)
        self.steps += 1
        self.exp_avg += (grad - self.exp_avg) * (1 - b1)
        self.exp_avg_sq = self.exp_avg_sq * b2 + (1 - b2) * grad * grad
        lam = float(self.lagrangian_multiplier) - self.lambda_lr * m * self.exp_avg / (
            math.sqrt(self.exp_avg_sq) + ref_lag.ADAM_EPS)
        lam = max(0.0, lam if self.upper is None else min(lam, self.upper))
        self.lagrangian_multiplier = torch.tensor(lam, dtype=torch.float64)
        return self.lagrangian_multiplier.clone()


def _learners(learner: type) -> types.SimpleNamespace:
    """A parity implementation whose plain learner is ``learner`` (the semantic wrapper built on it)."""

    class Semantic(learner, ref_parity.SemanticPPOLag):
        pass

    return types.SimpleNamespace(make_learner=lambda config, seed: learner(config, seed),
                                 make_semantic_learner=lambda config, sc, seed: Semantic(config, sc, seed),
                                 SEMANTIC_MODULES=ref_parity.SEMANTIC_MODULES)


class _MixWithoutOnePlusLambda(ref_parity.PPOLagLearner):
    """Â_r − λ·Â_c, without the division by 1 + λ."""

    @staticmethod
    def combined_advantage(adv_r, adv_c, lam):
        adv_r = (adv_r - adv_r.mean()) / (adv_r.std(unbiased=False) + ADV_EPS)
        return adv_r - lam * (adv_c - adv_c.mean())


class _CostAdvantageStandardized(ref_parity.PPOLagLearner):
    """Â_c standardized like Â_r, where it is only centred."""

    @staticmethod
    def combined_advantage(adv_r, adv_c, lam):
        adv_r = (adv_r - adv_r.mean()) / (adv_r.std(unbiased=False) + ADV_EPS)
        adv_c = (adv_c - adv_c.mean()) / (adv_c.std(unbiased=False) + ADV_EPS)
        return (adv_r - lam * adv_c) / (1 + lam)


PLANTED_CLASSIC = (
    Planted("ObsNormalizer: eps outside the square root", "numerics",
            _with(ref_num, NUMERICS, ObsNormalizer=_EpsOutsideRoot), "NUM-10", "normalize(obs)", ("NUM-11",)),
    Planted("value loss: min of the squared errors", "numerics", _with(ref_num, NUMERICS, value_loss=_value_loss_min),
            "NUM-19", "value_loss", ("NUM-20",)),
    Planted("ratio_guard: no clamp of the ratio", "numerics",
            _with(ref_num, NUMERICS, ratio_guard=_ratio_without_outer_clamp), "NUM-13", "ratio", ("NUM-17",)),
    Planted("kl_early_stop: the k1 estimator", "numerics", _with(ref_num, NUMERICS, kl_early_stop=_kl_k1),
            "NUM-17", "kl", ("NUM-13",)),
    Planted("safe_standardize: population std", "numerics",
            _with(ref_num, NUMERICS, safe_standardize=_standardize_population), "NUM-3", "safe_standardize",
            ("NUM-4",)),
    Planted("margin normalizer: a window one longer", "shaping",
            _with(ref_shaping, SHAPING, MarginNormalizer=_WindowOneLonger), "SHAPE-7", "normalized margins",
            ("SHAPE-1", "SHAPE-5")),
    Planted("margin normalizer: unbiased std", "shaping",
            _with(ref_shaping, SHAPING, MarginNormalizer=_WindowUnbiased), "SHAPE-7", "normalized margins",
            ("SHAPE-1", "SHAPE-5")),
    Planted("temporal pool: a window one longer", "shaping", _with(ref_shaping, SHAPING, TemporalPool=_PoolOneLonger),
            "SHAPE-13", "pool", ("SHAPE-7",)),
    Planted("PID: derivative delay one longer", "lagrange",
            _with(ref_lag, LAGRANGE, PIDLagrangian=_PidDelayOneLonger), "LAG-6", "PID update", ("LAG-3", "LAG-5")),
    Planted("OmniSafeLagrange: Adam without bias corrections", "lagrange",
            _with(ref_lag, LAGRANGE, OmniSafeLagrange=_AdamWithoutBiasCorrection), "LAG-5", "Adam", ("LAG-3", "LAG-6")),
    Planted("PPOLag: advantage mix without 1 + λ", "parity", _learners(_MixWithoutOnePlusLambda), "PARITY-6",
            "Loss/Loss_pi", ("PARITY-7",)),
    Planted("PPOLag: cost advantage standardized", "parity", _learners(_CostAdvantageStandardized), "PARITY-6",
            "Loss/Loss_pi", ("PARITY-7",)),
)
