"""Every registered ``lagrange`` implementation reproduces OmniSafe 0.5.0's λ sequences over a fixed J_c
series (fixtures/lagrange/*.json): ``Lagrange`` with Adam (LAG-5) and ``PIDLagrangian`` (LAG-6).

The manifest's tolerance is OmniSafe's own arithmetic (float32 Adam, float64 PID); an implementation
that keeps float32 state is additionally allowed its own rounding, 64 ulp of the update's magnitude per
step, accumulated over the steps (the same allowance as the conformance clauses).
"""

from __future__ import annotations

import torch

from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close

CONTRACT = "lagrange"


def _state_slack(obj, t: int, magnitude: float) -> float:
    eps = torch.finfo(torch.as_tensor(obj.lagrangian_multiplier).dtype).eps
    return 64 * eps * (1.0 + magnitude) * (t + 1)


def test_omnisafe_lagrange_adam(impl):
    inputs, expected, entry = read_golden("lagrange/omnisafe_lagrange.json")
    tol = entry["tolerance"]
    for k, (d, lam0, lr) in enumerate(inputs["config"].tolist()):
        obj = impl.OmniSafeLagrange(cost_limit=d, lagrangian_multiplier_init=lam0, lambda_lr=lr)
        for t, jc in enumerate(inputs["jc"].tolist()):
            got = obj.update(jc)
            want = expected["lam"][k, t]
            assert_close("LAG-5", f"λ after step {t} vs OmniSafe Lagrange (config {k})", got.double(), want.double(),
                         atol=tol["atol"] + _state_slack(obj, t, float(want) + lr), rtol=tol["rtol"],
                         jc=jc, cost_limit=d, lagrangian_multiplier_init=lam0, lambda_lr=lr)


def test_omnisafe_pid_lagrangian(impl):
    inputs, expected, entry = read_golden("lagrange/omnisafe_pid_lagrangian.json")
    tol = entry["tolerance"]
    names = ("pid_kp", "pid_ki", "pid_kd", "pid_d_delay", "pid_delta_p_ema_alpha", "pid_delta_d_ema_alpha",
             "sum_norm", "diff_norm", "penalty_max", "lagrangian_multiplier_init", "cost_limit")
    casts = dict(pid_d_delay=int, sum_norm=bool, diff_norm=bool)
    for k, row in enumerate(inputs["config"].tolist()):
        config = {n: casts.get(n, float)(v) for n, v in zip(names, row)}
        obj = impl.PIDLagrangian(**config)
        big = 0.0
        for t, jc in enumerate(inputs["jc"].tolist()):
            got = obj.update(jc)
            big = max(big, abs(jc))
            assert_close("LAG-6", f"λ after update {t} vs OmniSafe PIDLagrangian (config {k})", got.double(),
                         expected["lam"][k, t], atol=tol["atol"] + _state_slack(obj, t, big), rtol=tol["rtol"],
                         jc=jc, **config)
