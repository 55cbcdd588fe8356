"""Every registered ``lambda_return`` and ``gae`` implementation reproduces the returns fixtures:

* fixtures/lambda_return/sheeprl_lambda_values.json: sheeprl 0.8.4 ``compute_lambda_values``, stored in
  sheeprl's reward-on-arrival layout and converted with the spec's ``from_sheeprl``;
* fixtures/gae/sb3_rollout_buffer.json: Stable-Baselines3 2.9.2 ``RolloutBuffer.compute_returns_and_advantage``
  fed as its collect loop feeds it (γ·V(terminal obs) folded into the reward of a time-limit step, which
  then counts as an episode end), stored with our ``gae`` arguments and SB3's side of the conversion.

Both contracts live in one module, so the implementations are parametrized here (``returns_impl``, the
same resolution as tests/golden/conftest.py's ``impl``, which serves one contract per module).
"""

from __future__ import annotations

import pytest
import torch

from rlspec import registry
from rlspec.contracts.lambda_return import from_sheeprl, to_sheeprl
from rlspec.golden_bridge.fixture_io import FIXTURES_DIR, read_golden
from rlspec.reference import gae as ref_gae
from rlspec.reference import lambda_return as ref_lambda
from rlspec.spec.core import assert_close

ROOT = FIXTURES_DIR  # fixtures/
SHEEPRL = "lambda_return/sheeprl_lambda_values.json"
SB3 = "gae/sb3_rollout_buffer.json"
GAE_ARGS = ("reward", "value", "terminated", "truncated", "next_value")


def registered(contract: str):
    return pytest.mark.parametrize("returns_impl", [pytest.param((contract, name), id=name)
                                                    for name in registry.IMPLEMENTATIONS[contract]],
                                   indirect=True)


@pytest.fixture
def returns_impl(request):
    contract, name = request.param
    resolved = registry.resolve(name, registry.IMPLEMENTATIONS[contract][name])
    assert resolved.error is None, f"{contract}/{name} did not import: {resolved.error}"
    return resolved.impl


def _tol(entry: dict) -> dict:
    return dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])


# ------------------------------------------------------------------------------ sheeprl λ-returns
def _sheeprl():
    """-> (our arguments, sheeprl's stored arguments, expected [T, B], tolerance)."""
    inputs, expected, entry = read_golden(SHEEPRL, ROOT)
    gamma, lam = float(inputs["gamma"]), float(inputs["lam"])
    sheeprl_args = {k: inputs[k] for k in ("rewards", "values", "continues")}
    reward, cont, value = from_sheeprl(**sheeprl_args, gamma=gamma, first_value=inputs["first_value"])
    ours = dict(reward=reward, cont=cont, value=value, gamma=gamma, lam=lam)
    return ours, sheeprl_args, expected["lambda_values"], _tol(entry)


@registered("lambda_return")
def test_sheeprl_lambda_values(returns_impl):
    ours, _, want, tol = _sheeprl()
    assert_close("LAMBDA-1", "lambda_return(from_sheeprl(...)) vs sheeprl compute_lambda_values",
                 returns_impl.lambda_return(**ours), want, **tol)


def test_sheeprl_conversion_round_trips():
    ours, sheeprl_args, _, _ = _sheeprl()
    again = to_sheeprl(ours["reward"], ours["cont"], ours["value"], ours["gamma"])
    assert torch.equal(again["rewards"], sheeprl_args["rewards"])
    assert torch.equal(again["values"], sheeprl_args["values"])  # v[1:]: V(s_{k+1}) at arrival row k
    c = ours["cont"]
    flags = (c == 0) | (c == 1)
    assert torch.equal(again["continues"][flags], sheeprl_args["continues"][flags])  # 0/1 exactly
    assert_close("LAMBDA-1", "continues round trip", again["continues"], sheeprl_args["continues"],
                 atol=2 * torch.finfo(c.dtype).eps)  # probabilities: within a rounding
    # what the fixture exercises: a terminal on the first and on the last transition, a column without
    # any terminal (bootstrap reaches v_T) and a column of continue probabilities
    assert bool((c[0] == 0).any()) and bool((c[-1] == 0).any())
    assert bool((c == 1).all(0).any()) and bool((~flags).all(0).any())


def test_sheeprl_layout_read_as_ours_disagrees():
    """The fixture tells the conventions apart: sheeprl's arrays read as transition-aligned ones
    (continues as c, values as v_0..v_{T-1} plus a repeated last value) miss by far more than the
    tolerance."""
    ours, sheeprl_args, want, tol = _sheeprl()
    values = sheeprl_args["values"]
    naive = ref_lambda.lambda_return(sheeprl_args["rewards"], sheeprl_args["continues"],
                                     torch.cat([values, values[-1:]]), ours["gamma"], ours["lam"])
    assert float((naive - want).abs().max()) > 100 * tol["atol"]


# ------------------------------------------------------------------------- SB3 GAE with time limits
def _sb3():
    """-> (our gae arguments, the stored inputs, expected {advantages, returns}, tolerance)."""
    inputs, expected, entry = read_golden(SB3, ROOT)
    ours = {k: inputs[k] for k in GAE_ARGS}
    ours.update(gamma=float(inputs["gamma"]), lam=float(inputs["lam"]))
    return ours, inputs, expected, _tol(entry)


@registered("gae")
def test_sb3_rollout_buffer(returns_impl):
    ours, _, expected, tol = _sb3()
    adv, ret = returns_impl.gae(**ours)
    assert_close("GAE-1", "advantages vs SB3 RolloutBuffer (timeout bootstrap)", adv, expected["advantages"],
                 **tol)
    assert_close("GAE-1", "returns vs SB3 RolloutBuffer (advantages + values)", ret, expected["returns"], **tol)


def test_sb3_side_follows_the_collect_loop():
    """The stored SB3-side arrays are our inputs under SB3's on-policy collect loop convention."""
    ours, inputs, _, _ = _sb3()
    term, trunc = ours["terminated"] == 1, ours["truncated"] == 1  # [T, B]
    done = term | trunc
    gamma, boot = ours["gamma"], ours["next_value"]
    # rewards[idx] += gamma * V(terminal_observation) on TimeLimit.truncated, in float32
    assert torch.equal(inputs["sb3_rewards"], torch.where(trunc, ours["reward"] + gamma * boot, ours["reward"]))
    assert torch.equal(inputs["sb3_values"], ours["value"])
    assert torch.equal(inputs["sb3_episode_starts"][1:] == 1, done[:-1])  # episode_start = previous done
    assert torch.equal(inputs["sb3_dones"] == 1, done[-1])
    open_end = ~done[-1]  # the rollout cut bootstraps V(new_obs) = V(s'_{T-1}) there
    assert torch.equal(inputs["sb3_last_values"][open_end], boot[-1][open_end])
    # what the fixture exercises: truncation on the last row, right after a reset, twice in a row,
    # termination at t = 0 and on the last row, and an env with no episode end
    T = term.shape[0]
    assert bool(trunc[-1].any()) and bool(term[-1].any()) and bool(term[0].any())
    assert bool((trunc[1:] & done[:-1]).any()) and bool((~done).all(0).any()) and T >= 16


def test_sb3_fixture_rejects_the_cleanrl_convention():
    """CleanRL's convention (done = terminated or truncated, nothing bootstrapped) misses the fixture's
    advantages on truncated episodes by far more than the tolerance: the fixture pins GAE-3's rule."""
    ours, _, expected, tol = _sb3()
    done = (ours["terminated"] == 1) | (ours["truncated"] == 1)
    cleanrl = dict(ours, terminated=done, truncated=torch.zeros_like(done))
    adv, _ = ref_gae.gae(**cleanrl)
    assert float((adv - expected["advantages"]).abs().max()) > 100 * tol["atol"]
