"""Golden fixtures from rlax 0.1.9 (V-trace and truncated GAE): the only module that imports rlax / jax.

rlax functions take one sequence [T] at a time; the generators vmap them over the batch axis of our
time-major [T, B] arrays. jax runs with x64 enabled and every array is float64, so the fixtures pin the
*conventions* (which value is bootstrapped where, which ratio is clipped at what) with tolerances near
float64 rounding. Inputs come from an explicit ``torch.Generator``, rounded to short dyadic decimals so
the JSON stays a few KB.
"""

from __future__ import annotations

import jax
import numpy as np
import rlax
import torch

from rlspec.contracts.vtrace import to_rlax
from rlspec.golden_bridge.manifest import Fixture

jax.config.update("jax_enable_x64", True)

PACKAGE = "rlax"
T, B, GAMMA = 12, 4, 0.99
TOL = 1e-12  # float64 recursions over T = 12 steps on values <= ~10: errors ~1e-14, margin 100×
WHY = "float64 on both sides; T = 12 backward steps on |values| <= ~10 err by ~1e-14"


def _round(t: torch.Tensor, step: float = 1 / 64) -> torch.Tensor:
    return torch.round(t / step) * step


def _vtrace_inputs(seed: int) -> dict[str, torch.Tensor]:
    """Ours: log_rho, discount = γ·(1 − terminated), reward, value [T, B], bootstrap_value [B], float64."""
    g = torch.Generator().manual_seed(seed)
    log_rho = _round(torch.randn(T, B, generator=g, dtype=torch.float64))
    log_rho[0, 0], log_rho[1, 0] = 2.0, -3.0  # a ratio far above every threshold, one far below
    terminated = torch.rand(T, B, generator=g) < 0.2
    terminated[T - 1, 0] = True  # a terminal on the last row: V_T is not bootstrapped there
    return dict(log_rho=log_rho, discount=GAMMA * (~terminated).double(),
                reward=_round(torch.randn(T, B, generator=g, dtype=torch.float64)),
                value=_round(3 * torch.randn(T, B, generator=g, dtype=torch.float64)),
                bootstrap_value=_round(3 * torch.randn(B, generator=g, dtype=torch.float64)))


def _rlax_columns(fn, inputs: dict[str, torch.Tensor], **kwargs):
    """fn applied to each column b of rlax's arguments (to_rlax of our inputs), outputs stacked [T, B]."""
    args = {k: jax.numpy.asarray(v.numpy()) for k, v in to_rlax(**inputs).items()}
    order = ("v_tm1", "v_t", "r_t", "discount_t", "rho_tm1")
    return jax.vmap(lambda *cols: fn(*cols, **kwargs), in_axes=1, out_axes=1)(*(args[k] for k in order))


def _t(x) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x, dtype=np.float64))


def _scalars(**values: float) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in values.items()}


VTRACE_CONVENTION = ("ours -> rlax per column b: v_tm1 = value, v_t = cat(value[1:], bootstrap_value) "
                     "(V_{t+1}), r_t = reward, discount_t = discount, rho_tm1 = exp(log_rho); rlax clips c at "
                     "1 (c_bar = 1); rlax errors = vs - value")


def vtrace_errors(seed: int = 0) -> Fixture:
    inputs = _vtrace_inputs(seed)
    errors = _rlax_columns(rlax.vtrace, inputs, lambda_=0.9, clip_rho_threshold=1.5)
    return Fixture(
        path="vtrace/rlax_vtrace.json", contract="vtrace", package=PACKAGE, qualname="rlax.vtrace", seed=seed,
        atol=TOL, rtol=0.0, why=WHY,
        convention=VTRACE_CONVENTION + "; lambda_ = 0.9, clip_rho_threshold = 1.5 (= rho_bar)",
        inputs=dict(inputs, **_scalars(lam=0.9, rho_bar=1.5, c_bar=1.0)), expected=dict(errors=_t(errors)))


def _td_error_and_advantage(seed: int, lam: float, pg_rho_bar: float, name: str, note: str) -> Fixture:
    inputs = _vtrace_inputs(seed)
    out = _rlax_columns(rlax.vtrace_td_error_and_advantage, inputs, lambda_=lam, clip_rho_threshold=1.0,
                        clip_pg_rho_threshold=pg_rho_bar)
    return Fixture(
        path=f"vtrace/{name}.json", contract="vtrace", package=PACKAGE,
        qualname="rlax.vtrace_td_error_and_advantage", seed=seed, atol=TOL, rtol=0.0, why=WHY,
        convention=VTRACE_CONVENTION + f"; lambda_ = {lam}, clip_rho_threshold = 1.0, clip_pg_rho_threshold = "
                   f"{pg_rho_bar}; {note}",
        inputs=dict(inputs, **_scalars(lam=lam, rho_bar=1.0, c_bar=1.0, pg_rho_bar=pg_rho_bar)),
        expected=dict(errors=_t(out.errors), pg_advantage=_t(out.pg_advantage), q_estimate=_t(out.q_estimate)))


def vtrace_advantage_lambda_one(seed: int = 1) -> Fixture:
    return _td_error_and_advantage(seed, 1.0, 2.0, "rlax_td_error_and_advantage_lam1",
                                   "with lambda_ = 1 rlax's pg advantage is the paper's (ours)")


def vtrace_advantage_lambda_08(seed: int = 2) -> Fixture:
    return _td_error_and_advantage(
        seed, 0.8, 1.0, "rlax_td_error_and_advantage_lam08",
        "rlax's q_estimate bootstraps lambda_*vs_{t+1} + (1-lambda_)*V_{t+1} where the paper (ours) takes "
        "vs_{t+1}: compare pg via spec.vtrace.rlax_pg_advantage")


def truncated_gae(seed: int = 3) -> Fixture:
    """rlax's layout stored as is: r_t [T, B], discount_t [T, B] (γ or 0), values [T+1, B]."""
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(T, B, generator=g) < 0.2
    terminated[T - 1, 0] = True
    inputs = dict(r_t=_round(torch.randn(T, B, generator=g, dtype=torch.float64)),
                  discount_t=GAMMA * (~terminated).double(),
                  values=_round(3 * torch.randn(T + 1, B, generator=g, dtype=torch.float64)))
    args = [jax.numpy.asarray(inputs[k].numpy()) for k in ("r_t", "discount_t", "values")]
    adv = jax.vmap(lambda r, d, v: rlax.truncated_generalized_advantage_estimation(r, d, 0.95, v),
                   in_axes=1, out_axes=1)(*args)
    return Fixture(
        path="gae/rlax_truncated_gae.json", contract="gae", package=PACKAGE,
        qualname="rlax.truncated_generalized_advantage_estimation", seed=seed, atol=TOL, rtol=0.0, why=WHY,
        convention="stored in rlax's layout (lambda_ = 0.95, discount_t = 0.99 or 0); to ours: reward = r_t, "
                   "value = values[:-1], terminated = (discount_t == 0), truncated = none, gamma = 0.99, "
                   "next_value = values[-1] on the last row (0 elsewhere, unread); no truncation in rlax",
        inputs=dict(inputs, **_scalars(lam=0.95, gamma=GAMMA)), expected=dict(advantages=_t(adv)))


GENERATORS = [vtrace_errors, vtrace_advantage_lambda_one, vtrace_advantage_lambda_08, truncated_gae]
