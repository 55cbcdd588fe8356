"""Every registered ``vtrace`` implementation reproduces rlax 0.1.9 (fixtures/vtrace/*.json) through the
explicit conversion of spec/vtrace.py: ``to_rlax`` for the inputs, vs = errors + value for rlax's
outputs, and ``rlax_pg_advantage`` for rlax's λ-mixed pg bootstrap (λ < 1)."""

from __future__ import annotations

import torch

from rlspec.contracts.vtrace import ARGS, rlax_pg_advantage, to_rlax
from rlspec.golden_bridge.fixture_io import FIXTURES_DIR, read_golden
from rlspec.spec.core import assert_close

CONTRACT = "vtrace"
ROOT = FIXTURES_DIR  # fixtures/


def _load(name: str):
    inputs, expected, entry = read_golden(f"vtrace/{name}.json", ROOT)
    args = {k: inputs[k] for k in ARGS}  # log_rho, discount, reward, value [T, B], bootstrap_value [B]
    params = {k: float(inputs[k]) for k in ("rho_bar", "c_bar", "lam", "pg_rho_bar") if k in inputs}
    return args, params, expected, dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])


def _next(vs: torch.Tensor, bootstrap_value: torch.Tensor) -> torch.Tensor:
    return torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])  # [T, B]: vs_{t+1}, vs_T = V_T


def test_vtrace_errors(impl):
    args, params, expected, tol = _load("rlax_vtrace")
    vs, _ = impl.vtrace(**args, **params)
    assert_close("VTRACE-1", "vs − value vs rlax.vtrace (λ = 0.9, ρ̄ = 1.5)", vs - args["value"],
                 expected["errors"], **tol)


def test_td_error_and_advantage_lambda_one(impl):
    args, params, expected, tol = _load("rlax_td_error_and_advantage_lam1")
    vs, pg = impl.vtrace(**args, **params)
    assert_close("VTRACE-1", "vs − value vs rlax errors (λ = 1)", vs - args["value"], expected["errors"], **tol)
    assert_close("VTRACE-2", "pg_advantage vs rlax (λ = 1, ρ̄_pg = 2)", pg, expected["pg_advantage"], **tol)
    q = args["reward"] + args["discount"] * _next(vs, args["bootstrap_value"])
    assert_close("VTRACE-2", "r_t + γ_t·vs_{t+1} vs rlax q_estimate (λ = 1)", q, expected["q_estimate"], **tol)


def test_td_error_and_advantage_lambda_08(impl):
    args, params, expected, tol = _load("rlax_td_error_and_advantage_lam08")
    vs, pg = impl.vtrace(**args, **params)
    assert_close("VTRACE-1", "vs − value vs rlax errors (λ = 0.8)", vs - args["value"], expected["errors"], **tol)
    converted = rlax_pg_advantage(vs, **args, lam=params["lam"], pg_rho_bar=params["pg_rho_bar"])
    assert_close("VTRACE-2", "rlax_pg_advantage(our vs) vs rlax pg_advantage (λ = 0.8)", converted,
                 expected["pg_advantage"], **tol)
    # the conventions really differ for λ < 1: the paper's pg is not rlax's on this fixture
    assert (pg - expected["pg_advantage"]).abs().max() > 1e-3


def test_to_rlax_layout():
    args, _, _, _ = _load("rlax_vtrace")
    out = to_rlax(**args)
    assert torch.equal(out["v_tm1"], args["value"])
    assert torch.equal(out["v_t"][:-1], args["value"][1:]) and torch.equal(out["v_t"][-1], args["bootstrap_value"])
    assert torch.equal(out["r_t"], args["reward"]) and torch.equal(out["discount_t"], args["discount"])
    assert torch.equal(out["rho_tm1"], torch.exp(args["log_rho"]))
