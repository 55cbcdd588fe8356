"""Planted bugs for ``shaping``: the reference with exactly one bug each, and the clause that catches it."""

from __future__ import annotations

import functools
import math
import types

import torch
from planted import Planted

from rlspec.contracts.shaping import (
    validate_beta_args,
    validate_margin_args,
    validate_potential_args,
)
from rlspec.reference import parity as ref_parity
from rlspec.reference import shaping as ref

_NAMES = ("prompt_centroid", "semantic_margin", "beta_schedule", "additive_shaping", "MarginNormalizer",
          "PotentialShaper", "TemporalPool")


def _shaping(**overrides) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{**{n: getattr(ref, n) for n in _NAMES}, **overrides})


class _NoGammaShaper(ref.PotentialShaper):
    """F = β(φ' − φ): the discount left out of the potential difference."""

    def __call__(self, phi, captured, beta):
        validate_potential_args(self.num_envs, phi, captured, beta)
        out = torch.zeros(self.num_envs, dtype=torch.float64)
        for b in range(self.num_envs):
            if bool(captured[b]):
                if self.last[b] is not None:
                    out[b] = beta * (float(phi[b]) - self.last[b])
                self.last[b] = float(phi[b])
        return out.to(phi.dtype)


def _beta_with_floor(step, total_steps, beta_start, beta_end_step_fraction):
    """Cosine annealing to a floor of 1e-3·β_0 (a "min lr" habit): β never reaches 0."""
    validate_beta_args(step, total_steps, beta_start, beta_end_step_fraction)
    progress = min(1.0, step / (beta_end_step_fraction * total_steps))
    return max(beta_start * 0.5 * (1.0 + math.cos(math.pi * progress)), 1e-3 * beta_start)


class _PoolIgnoringResets(ref.TemporalPool):
    """The episode boundary is validated but the deque is kept: pooling runs across episodes."""

    def reset(self, mask):
        super().reset(torch.zeros_like(mask))


def _dot_margin(e, mu_safe, mu_unsafe):
    """⟨e, μ_safe⟩ − ⟨e, μ_unsafe⟩ on the raw embedding: no L2 normalization of e."""
    validate_margin_args(e, mu_safe, mu_unsafe)
    return ((e.double() * mu_safe.double()).sum(-1) - (e.double() * mu_unsafe.double()).sum(-1)).to(e.dtype)


PLANTED_SHAPING = (
    Planted("potential shaping without gamma", "shaping", _shaping(PotentialShaper=_NoGammaShaper),
            "SHAPE-10", "sum_k gamma^(k-1) F_k", ("SHAPE-12", "SHAPE-14", "SHAPE-15", "SHAPE-16", "SHAPE-17")),
    Planted("beta that never reaches 0", "shaping", _shaping(beta_schedule=_beta_with_floor),
            "SHAPE-4", "expected exactly 0", ("SHAPE-6", "SHAPE-10", "SHAPE-11", "SHAPE-17")),
    Planted("pooling across an episode reset", "shaping", _shaping(TemporalPool=_PoolIgnoringResets),
            "SHAPE-14", "since the episode began", ("SHAPE-10", "SHAPE-12", "SHAPE-15", "SHAPE-17")),
    Planted("margin from unnormalized embeddings", "shaping", _shaping(semantic_margin=_dot_margin),
            "SHAPE-3", "cosines ignore scale", ("SHAPE-2", "SHAPE-4", "SHAPE-17")),
)


# -------------------------------------------------------------------------------------------- parity
class _LogsSemanticKeys(ref_parity.SemanticPPOLag):
    """Disabled, but still reports Semantics/* telemetry (zeros): the logged key set changes."""

    def update(self, batch):
        logs = super().update(batch)
        logs.setdefault("Semantics/Beta", 0.0)
        return logs


class _BuildsSemantics(ref_parity.SemanticPPOLag):
    """Allocates the margin normalizer up front, enabled or not."""

    def __init__(self, config, semantic_cfgs, seed):
        super().__init__(config, semantic_cfgs, seed)
        self.normalizer = ref.MarginNormalizer()


class _DrawsFromGenerator(ref_parity.SemanticPPOLag):
    """Draws a random capture phase from the learner's generator, enabled or not: minibatch order shifts."""

    def __init__(self, config, semantic_cfgs, seed):
        super().__init__(config, semantic_cfgs, seed)
        self.capture_phase = int(torch.randint(0, 20, (1,), generator=self.generator))


class _CastsRewards(ref_parity.SemanticPPOLag):
    """The disabled hook returns float32 rewards."""

    def process_rewards(self, reward, step, embeddings=None, captured=None, is_first=None):
        return super().process_rewards(reward, step, embeddings, captured, is_first).float()


class _NoPenaltyNormalization(ref_parity.PPOLagLearner):
    """A = Â_r − λ·Â_c, without OmniSafe's 1/(1+λ): invisible to parity (both paths share it)."""

    def combined_advantage(self, adv_r, adv_c, lam):
        return super().combined_advantage(adv_r, adv_c, lam) * (1 + lam)


class _NoPenaltySemantic(_NoPenaltyNormalization, ref_parity.SemanticPPOLag):
    pass


def _parity(learner=ref_parity.PPOLagLearner, wrapper=ref_parity.SemanticPPOLag) -> types.SimpleNamespace:
    return types.SimpleNamespace(make_learner=functools.partial(_make, learner),
                                 make_semantic_learner=functools.partial(_make_semantic, wrapper),
                                 SEMANTIC_MODULES=ref_parity.SEMANTIC_MODULES)


def _make(cls, config, seed):
    return cls(config, seed)


def _make_semantic(cls, config, semantic_cfgs, seed):
    return cls(config, semantic_cfgs, seed)


PLANTED_PARITY = (
    Planted("disabled wrapper logs semantic keys", "parity", _parity(wrapper=_LogsSemanticKeys),
            "PARITY-1", "logged keys", ("PARITY-2", "PARITY-4", "PARITY-5", "PARITY-6")),
    Planted("disabled wrapper allocates a normalizer", "parity", _parity(wrapper=_BuildsSemantics),
            "PARITY-2", "semantic object allocated", ("PARITY-1", "PARITY-4", "PARITY-5", "PARITY-6")),
    Planted("disabled wrapper draws from the learner's generator", "parity", _parity(wrapper=_DrawsFromGenerator),
            "PARITY-1", "differ", ("PARITY-2", "PARITY-4", "PARITY-5", "PARITY-6")),
    Planted("disabled hook casts rewards", "parity", _parity(wrapper=_CastsRewards),
            "PARITY-4", "unchanged", ("PARITY-1", "PARITY-2", "PARITY-5", "PARITY-6")),
    Planted("advantage without 1/(1+lambda)", "parity",
            _parity(learner=_NoPenaltyNormalization, wrapper=_NoPenaltySemantic),
            "PARITY-6", "Loss/Loss_pi", ("PARITY-1", "PARITY-2", "PARITY-4", "PARITY-5")),
)
