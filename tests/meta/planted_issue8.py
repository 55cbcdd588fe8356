"""Planted bugs for the silent wrong results and false positives found by an outside review, one per class: each is
what an implementation did (ours before the fix, or one the outside run met), kept so the clause stays."""

from __future__ import annotations

import math
import types

import torch
import torch.nn.functional as F
from planted import Planted

from rlspec.contracts.lagrange import check_cost, check_scale
from rlspec.contracts.replay import episode_end, validate_push_meta, validate_push_values
from rlspec.contracts.shaping import UNIT_EPS, validate_margin_args
from rlspec.reference import gae as ref_gae
from rlspec.reference import lagrange as ref_lag
from rlspec.reference import lambda_return as ref_lambda
from rlspec.reference import replay as ref_replay
from rlspec.reference import risk_target as ref_risk
from rlspec.reference import shaping as ref_shaping
from rlspec.reference import vtrace as ref_vtrace


# --- lagrange ---------------------------------------------------------------------------------------
class _ScaleReadAsIs(ref_lag.DualAscent):
    """A tensor M is read as a float whatever its value: M = −1 lowers λ while J_c > d, NaN resets it."""

    def update(self, jc, scale=1.0):
        check_cost("DualAscent.update", jc)
        check_scale("DualAscent.update", scale)
        if not math.isfinite(float(jc)):
            return self._skip()
        lam = float(self.lagrangian_multiplier) + self.lr * float(scale) * (float(jc) - self.cost_limit)
        self.lagrangian_multiplier = torch.tensor(max(0.0, lam) if not math.isnan(lam) else 0.0,
                                                  dtype=torch.float64)
        return self.lagrangian_multiplier.clone()


class _LambdaKeepsGraph(ref_lag.DualAscent):
    """λ built from J_c by tensor ops, not detached: every update extends the autograd graph."""

    def update(self, jc, scale=1.0):
        jc_t = torch.as_tensor(jc, dtype=torch.float64)
        if not torch.isfinite(jc_t):
            return self._skip()
        self.lagrangian_multiplier = torch.clamp_min(self.lagrangian_multiplier + self.lr * scale *
                                                     (jc_t - self.cost_limit), 0.0)
        return self.lagrangian_multiplier


class _SautePoisoned(ref_lag.SauteBudget):
    """A NaN cost flows into z: every later reward of that env becomes unsafe_reward (OmniSafe-style)."""

    def step(self, next_obs, reward, cost, done):
        z = (self.z - cost.double() / self.budget) / self.gamma
        shaped = torch.where(z > 0, reward.double(), torch.full_like(z, self.unsafe_reward))
        self.z = torch.where(done.bool(), torch.ones_like(z), z)
        return self._augment(next_obs), shaped.to(reward.dtype)


def _lag(**overrides) -> types.SimpleNamespace:
    base = {n: getattr(ref_lag, n) for n in ("DualAscent", "OmniSafeLagrange", "PIDLagrangian", "SauteBudget",
                                             "SimmerPID")}
    return types.SimpleNamespace(**{**base, **overrides})


# --- shaping ----------------------------------------------------------------------------------------
def _margin_squared_norm(e, mu_safe, mu_unsafe):
    """F.normalize in float32: ‖e‖² overflows at |e| ~ 1e20 and the margin collapses to 0."""
    validate_margin_args(e, mu_safe, mu_unsafe)
    u = F.normalize(e, dim=-1, eps=UNIT_EPS)
    return (u * F.normalize(mu_safe, dim=0, eps=UNIT_EPS)).sum(-1) - (u * F.normalize(mu_unsafe, dim=0,
                                                                                         eps=UNIT_EPS)).sum(-1)


def _shaping(**overrides) -> types.SimpleNamespace:
    names = ("prompt_centroid", "semantic_margin", "beta_schedule", "additive_shaping", "MarginNormalizer",
             "PotentialShaper", "TemporalPool")
    return types.SimpleNamespace(**{**{n: getattr(ref_shaping, n) for n in names}, **overrides})


# --- returns family ---------------------------------------------------------------------------------
def _vtrace_math_exp(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                     pg_rho_bar=None):
    """e^log_rho before clipping, in Python floats: OverflowError at log_rho = 800 though ρ̄ = 1."""
    [math.exp(x) for x in log_rho.double().reshape(-1).tolist()]
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)


def _vtrace_overflow_silent(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                            pg_rho_bar=None):
    """With a bar at ∞ the overflowing ratio is used: inf/NaN outputs instead of an error."""
    if math.inf in (rho_bar, c_bar, pg_rho_bar):
        return torch.full_like(value, math.nan), torch.full_like(value, math.nan)
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)


def _strict_floats(fn, *names):
    """The implementation without its scalar conversion: np.float32(0.99) is refused, 0-d tensors too."""
    def call(*args, **kwargs):
        for n in names:
            if n in kwargs and not isinstance(kwargs[n], (int, float)):
                raise ValueError(f"{fn.__name__}: argument '{n}' must lie in [0, 1], got {kwargs[n]!r}")
        return fn(*args, **kwargs)
    return call


def _gae_positional_strict(reward, value, terminated, truncated, next_value, gamma, lam):
    if not (isinstance(gamma, (int, float)) and isinstance(lam, (int, float))):
        raise ValueError(f"gae: argument 'gamma' must lie in [0, 1], got {gamma!r}")
    return ref_gae.gae(reward, value, terminated, truncated, next_value, gamma, lam)


def _risk_target_keeps_grad(cost, done, gamma, horizon):
    return ref_risk.risk_target(cost, done, gamma, horizon) + 0 * cost  # a target with a graph


# --- replay -----------------------------------------------------------------------------------------
class _Int32Wrap(ref_replay.ReplayRing):
    """The +1 rule in int32 (the contract's code before the fix): 2³¹−1 → −2³¹ passes as the next episode."""

    def push(self, obs, action, reward, is_first, continue_, episode_id, terminated=None, truncated=None,
             final_obs=None):
        fields = {"obs": obs, "action": action, "reward": reward, "is_first": is_first, "continue": continue_,
                  "episode_id": episode_id, "terminated": terminated, "truncated": truncated, "final_obs": final_obs}
        validate_push_meta(self, fields, slot_written=self._slot_step == self.t)
        if self.t > 0:  # the +1 rule in int32 arithmetic: an env whose id wrapped passes as "+1"; all else checked
            plus_one = is_first & (episode_id == self._prev_episode_id + 1)  # int32 add
            prev = torch.where(plus_one, episode_id.long() - 1, self._prev_episode_id.long())
            validate_push_values(self.t, prev, self._prev_end, fields)
        else:
            validate_push_values(self.t, self._prev_episode_id, self._prev_end, fields)
        row = self.t % self.capacity
        for name, column in self._store.items():
            if fields[name] is not None:
                column[row] = fields[name]
        self._prev_episode_id, self._prev_end = episode_id.clone(), episode_end(fields)
        self.t += 1
        if self.t % self.commit_stride == 0:
            self.commit()


class _ObsNoneAccepted(ref_replay.ReplayRing):
    """push(obs=None) accepted without a prior obs_slot write: the row keeps a stale frame."""

    def push(self, obs, *args, **kwargs):
        if obs is None:
            self._slot_step = self.t
        return super().push(obs, *args, **kwargs)


class _StoresGraph(ref_replay.ReplayRing):
    def push(self, obs, action, reward, is_first, continue_, episode_id, terminated=None, truncated=None,
             final_obs=None):
        fields = {"obs": obs, "action": action, "reward": reward, "is_first": is_first, "continue": continue_,
                  "episode_id": episode_id, "terminated": terminated, "truncated": truncated, "final_obs": final_obs}
        validate_push_meta(self, fields, slot_written=self._slot_step == self.t)
        super().push(obs, action, reward.detach(), is_first, continue_, episode_id, terminated, truncated, final_obs)
        self._store["reward"][(self.t - 1) % self.capacity] = reward  # the graph goes into storage


def _ring(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(ReplayRing=cls)


LAG_SPARED = ("LAG-1", "LAG-2", "LAG-3", "LAG-7", "LAG-8")
PLANTED_ISSUE8 = (
    Planted("tensor scale read as is", "lagrange", _lag(DualAscent=_ScaleReadAsIs), "LAG-12", "scale=tensor(",
            LAG_SPARED),
    Planted("λ keeps the autograd graph", "lagrange", _lag(DualAscent=_LambdaKeepsGraph), "LAG-14",
            "keeps an autograd graph", ("LAG-1", "LAG-2", "LAG-7")),
    Planted("Sauté poisoned by a NaN cost", "lagrange", _lag(SauteBudget=_SautePoisoned), "LAG-13",
            "accepted silently", ("LAG-9", "LAG-10")),
    Planted("margin through a float32 squared norm", "shaping", _shaping(semantic_margin=_margin_squared_norm),
            "SHAPE-1", "semantic_margin", ("SHAPE-2",)),
    Planted("vtrace exp before clipping", "vtrace",
            types.SimpleNamespace(vtrace=_vtrace_math_exp), "VTRACE-13", "OverflowError", ()),
    Planted("vtrace silent overflow with a bar at ∞", "vtrace", types.SimpleNamespace(vtrace=_vtrace_overflow_silent),
            "VTRACE-15", "accepted silently", ("VTRACE-5", "VTRACE-9", "VTRACE-10", "VTRACE-11", "VTRACE-13")),
    Planted("numpy gamma refused (lambda_return)", "lambda_return",
            types.SimpleNamespace(lambda_return=_strict_floats(ref_lambda.lambda_return.__wrapped__, "gamma", "lam")),
            "LAMBDA-12", "gamma=np.float32", ("LAMBDA-1", "LAMBDA-3", "LAMBDA-6")),
    Planted("numpy gamma refused (gae)", "gae", types.SimpleNamespace(gae=_gae_positional_strict), "GAE-12",
            "raised ValueError", ("GAE-1", "GAE-3", "GAE-5")),
    Planted("risk target keeps a gradient", "risk_target", types.SimpleNamespace(risk_target=_risk_target_keeps_grad),
            "RISK-13", "requires grad", ("RISK-1", "RISK-2", "RISK-3")),
    Planted("episode_id int32 wrap taken as + 1", "replay", _ring(_Int32Wrap), "REPLAY-14", "episode_id",
            ("REPLAY-2", "REPLAY-3", "REPLAY-4")),
    Planted("obs=None accepted without an obs_slot write", "replay", _ring(_ObsNoneAccepted), "REPLAY-14",
            "accepted silently", ("REPLAY-2", "REPLAY-3", "REPLAY-16")),
    Planted("replay storage keeps the reward's graph", "replay", _ring(_StoresGraph), "REPLAY-18", "require grad",
            ("REPLAY-2", "REPLAY-3", "REPLAY-14")),
)
