"""The engine's TRPO and CPO actor step (rlspec/algos/trust_region.py) against OmniSafe 0.5.0's own
_update_actor on the trust_region fixtures (fixtures/trust_region/omnisafe_{trpo,cpo}.json, 28-parameter
tanh Gaussian policy): the same parameters after the update, the same line-search decision and case.

The fixture lays θ out as OmniSafe's GaussianLearningActor (log_std, W1, b1, W2, b2); GaussianActor's own
order is (W1, b1, W2, b2, log_std): the test moves log_std across. CPO rows where OmniSafe's dual differs from
the mathematics (tests/golden/test_trust_region_golden.py) are compared on the case only.
"""

from __future__ import annotations

import types

import pytest
import torch

from rlspec.algos.safe_ppo import LOCAL, Kit, SafetyConfig
from rlspec.algos.trust_region import TrustRegionConfig, _actor_step, _ActorProblem
from rlspec.contracts.trust_region import ALL_FEASIBLE, INFEASIBLE_RECOVERY, ZERO_COST_GRAD
from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.models.actor_critic import GaussianActor

KIT = Kit.reference()
SAFETY = SafetyConfig()  # d = 25: J_c = 25 + c


def engine_state(algo: str, theta: torch.Tensor, obs_dim: int, act_dim: int):
    hidden = (theta.numel() - 2 * act_dim) // (obs_dim + 1 + act_dim)
    actor = GaussianActor(obs_dim, act_dim, (hidden,), "tanh", torch.Generator().manual_seed(0)).double()
    with torch.no_grad():
        actor.log_std.copy_(theta[:act_dim])
        for p, chunk in zip(actor.mean.parameters(),
                            theta[act_dim:].split([p.numel() for p in actor.mean.parameters()])):
            p.copy_(chunk.view_as(p))
    return types.SimpleNamespace(algo=algo, actor=actor)


def fixture_layout(actor: GaussianActor) -> torch.Tensor:
    return torch.cat([actor.log_std.detach(), *(p.detach().reshape(-1) for p in actor.mean.parameters())])


def step(algo, inputs, adv_c, jc, target_kl):
    state = engine_state(algo, inputs["theta"], inputs["obs"].shape[1], inputs["act"].shape[1])
    tr = TrustRegionConfig(target_kl=target_kl)
    problem = _ActorProblem(state, inputs["obs"], inputs["act"], inputs["logp"], inputs["adv_r"], adv_c, tr, KIT,
                            LOCAL)
    return state, _actor_step(state, problem, jc, SAFETY, tr, KIT)


def test_engine_trpo_step_is_omnisafes():
    inputs, expected, entry = read_golden("trust_region/omnisafe_trpo.json")
    tol = entry["tolerance"]
    for k, max_kl in enumerate(inputs["target_kl"].tolist()):
        accept, xhx, alpha = expected["stats"][k].tolist()
        state, m = step("TRPO", inputs, torch.zeros_like(inputs["adv_r"]), float("nan"), max_kl)
        assert m["Misc/AcceptanceStep"] == accept
        assert m["Misc/xHx"] == pytest.approx(xhx, rel=tol["rtol"], abs=tol["atol"])
        assert m["Misc/Alpha"] == pytest.approx(alpha, rel=tol["rtol"], abs=tol["atol"])
        torch.testing.assert_close(fixture_layout(state.actor), expected["theta_new"][k], atol=tol["atol"],
                                   rtol=tol["rtol"])


@pytest.mark.parametrize("k", range(9))
def test_engine_cpo_step_is_omnisafes(k):
    inputs, expected, entry = read_golden("trust_region/omnisafe_cpo.json")
    tol = entry["tolerance"]
    case_os, *_, lam_os, nu_os, accept_os = expected["stats"][k].tolist()
    state, m = step("CPO", inputs, inputs["adv_c"][k], 25.0 + float(inputs["c"][k]), 0.01)
    assert m["Misc/OptimCase"] == case_os
    same_dual = m["Misc/Lambda_star"] == pytest.approx(lam_os, rel=1e-6, abs=1e-9) and \
        m["Misc/Nu_star"] == pytest.approx(nu_os, rel=1e-6, abs=1e-9)
    if int(case_os) in (INFEASIBLE_RECOVERY, ALL_FEASIBLE, ZERO_COST_GRAD) or same_dual:
        assert m["Misc/AcceptanceStep"] == accept_os
        torch.testing.assert_close(fixture_layout(state.actor), expected["theta_new"][k], atol=tol["atol"],
                                   rtol=tol["rtol"])
