"""The sheeprl 0.8.4 convention of ``lambda_return`` (spec/lambda_return.py) and worked examples of the
returns contracts' conventions, computed by hand."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given

from rlspec.contracts import lambda_return as contract
from rlspec.fast import gae as fast_gae
from rlspec.fast import lambda_return as fast_lambda
from rlspec.reference import gae as ref_gae
from rlspec.reference import lambda_return as ref_lambda
from rlspec.spec import lambda_return as spec
from rlspec.spec.core import assert_close

IMPLS = pytest.mark.parametrize("impl", [ref_lambda, fast_lambda], ids=["reference", "fast-torch"])


def sheeprl_compute_lambda_values(rewards, values, continues, lmbda=0.95):
    """sheeprl 0.8.4 ``compute_lambda_values``, transcribed (reward-on-arrival indexing, γ in continues)."""
    vals = [values[-1:]]
    interm = rewards + continues * values * (1 - lmbda)
    for t in reversed(range(len(continues))):
        vals.append(interm[t] + continues[t] * lmbda * vals[-1])
    return torch.cat(list(reversed(vals))[:-1])


@IMPLS
@given(case=spec.cases(masked=False))
def test_to_sheeprl_reproduces_compute_lambda_values(impl, case):
    r, c, v, gamma, lam = (case[k] for k in ("reward", "cont", "value", "gamma", "lam"))
    sheeprl_args = contract.to_sheeprl(r.double(), c.double(), v.double(), gamma)
    want = sheeprl_compute_lambda_values(**sheeprl_args, lmbda=lam)
    assert_close("sheeprl", "lambda_return vs compute_lambda_values(**to_sheeprl(...))",
                 impl.lambda_return(r, c, v, gamma, lam), want, atol=spec.tolerance(r, v))


@given(case=spec.cases(masked=False))
def test_from_sheeprl_inverts_to_sheeprl(case):
    r, c, v, gamma = (case[k] for k in ("reward", "cont", "value", "gamma"))
    gamma = max(gamma, 0.01)  # from_sheeprl divides by γ
    r2, c2, v2 = contract.from_sheeprl(**contract.to_sheeprl(r, c, v, gamma), gamma=gamma, first_value=v[0])
    assert torch.equal(r2, r) and torch.equal(v2, v)
    flags = (c == 0) | (c == 1)
    assert torch.equal(c2[flags], c[flags])  # 0/1 continues come back exactly
    assert_close("round trip", "cont", c2, c, atol=2 * torch.finfo(c.dtype).eps)  # probabilities: a rounding


@given(case=spec.cases(masked=False))
def test_to_sheeprl_inverts_from_sheeprl(case):
    gamma = max(case["gamma"], 0.01)
    sheeprl_args = dict(rewards=case["reward"], values=case["value"][1:], continues=gamma * case["cont"])
    again = contract.to_sheeprl(*contract.from_sheeprl(**sheeprl_args, gamma=gamma, first_value=case["value"][0]),
                            gamma=gamma)
    for k, want in sheeprl_args.items():
        assert_close("round trip", k, again[k], want, atol=2 * torch.finfo(want.dtype).eps)


def test_from_sheeprl_needs_a_positive_gamma():
    with pytest.raises(ValueError, match="'gamma'"):
        contract.from_sheeprl(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), 0.0, torch.zeros(2))


@IMPLS
def test_dreamer_call_site_slices_arrival_indexed_arrays(impl):
    """DreamerV3 holds imagination arrays by state s_0..s_H (reward and continue predicted on arrival) and
    calls compute_lambda_values(rewards[1:], values[1:], gamma * continues[1:]): row t of the transition
    convention is arrival row t + 1."""
    g = torch.Generator().manual_seed(0)
    H, gamma, lam = 15, 0.997, 0.95
    rewards_at, values = torch.randn(H + 1, 4, generator=g), torch.randn(H + 1, 4, generator=g)
    continues_at = (torch.rand(H + 1, 4, generator=g) > 0.1).float()
    want = sheeprl_compute_lambda_values(rewards_at[1:], values[1:], gamma * continues_at[1:], lam)
    got = impl.lambda_return(rewards_at[1:], continues_at[1:], values, gamma, lam)
    assert_close("sheeprl", "lambda_return on arrival-indexed rows 1..H", got, want, atol=1e-5)


@IMPLS
def test_lambda_return_by_hand(impl):
    r, c = torch.tensor([[1.0], [2.0]]), torch.tensor([[1.0], [0.0]])
    v = torch.tensor([[10.0], [4.0], [8.0]])  # v_0 is never used; v_2 is cut off by c_1 = 0
    # R_1 = 2 + 0.5·0·(...) = 2;  R_0 = 1 + 0.5·1·(0.5·4 + 0.5·2) = 2.5
    assert impl.lambda_return(r, c, v, 0.5, 0.5).flatten().tolist() == [2.5, 2.0]
    # a reset before s_1: R_0 = r_0 (the cut counts as terminal), R_1 unchanged
    is_first = torch.tensor([[False], [True], [False]])
    assert impl.lambda_return(r, c, v, 0.5, 0.5, is_first=is_first).flatten().tolist() == [1.0, 2.0]


@pytest.mark.parametrize("impl", [ref_gae, fast_gae], ids=["reference", "fast-torch"])
def test_gae_by_hand(impl):
    r, v = torch.tensor([[1.0], [1.0], [1.0]]), torch.tensor([[2.0], [3.0], [4.0]])
    terminated = torch.tensor([[False], [False], [False]])
    truncated = torch.tensor([[False], [True], [False]])
    boot = torch.tensor([[9.0], [5.0], [6.0]])  # read at t = 1 (truncated) and t = 2 (rollout cut) only
    adv, ret = impl.gae(r, v, terminated, truncated, boot, 0.5, 0.5)
    # δ_2 = 1 + 0.5·6 − 4 = 0;  δ_1 = 1 + 0.5·5 − 3 = 0.5 (no carry);  δ_0 = 1 + 0.5·3 − 2 = 0.5
    # A_0 = 0.5 + 0.25·A_1 = 0.625
    assert adv.flatten().tolist() == [0.625, 0.5, 0.0]
    assert ret.flatten().tolist() == [2.625, 3.5, 4.0]
