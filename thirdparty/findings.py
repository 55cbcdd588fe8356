"""Pinned reproductions of what the outside run reported, measured again through the adapters.

Each finding runs the pinned library on a small, stated example, records the numbers and decides
``verified`` from them (a finding that no longer reproduces is a problem for ``python -m
rlspec.thirdparty``, like a stale declaration). The conformance table shows where the same behaviour
fails a clause; these give the exact figures a maintainer can reproduce.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch

from rlspec.reference import gae as reference_gae
from rlspec.reference import vtrace as reference_vtrace


@dataclasses.dataclass(frozen=True)
class Finding:
    id: str
    library: str
    claim: str
    measure: Callable[[], tuple[bool, dict[str, Any], str]]  # -> (verified, figures, one-line summary)

    def run(self) -> dict[str, Any]:
        try:
            verified, figures, summary = self.measure()
        except Exception as err:  # noqa: BLE001 - a library that cannot load is reported, not crashed on
            verified, figures, summary = False, {}, f"could not run: {type(err).__name__}: {err}"
        return dict(id=self.id, library=self.library, claim=self.claim, verified=verified, figures=figures,
                    summary=summary)


F64 = torch.float64
GAMMA, LAM = 0.99, 0.95
# a 5-step, one-env rollout without episode ends (float64): r, V(s_t), and V(s_5) at the rollout cut
REWARD = torch.tensor([[1.0], [0.0], [0.5], [0.0], [1.0]], dtype=F64)  # [5, 1]
VALUE = torch.tensor([[0.5], [0.25], [0.75], [0.5], [0.25]], dtype=F64)  # [5, 1]
BOOTSTRAP = 1.0  # V(s_5)


def _f32(x: float) -> float:
    return float(torch.tensor(x, dtype=torch.float32))


def torchrl_float32_discounts():
    from rlspec.thirdparty import torchrl_adapter as adapter

    flags = torch.zeros(5, 1, dtype=torch.bool)
    next_value = torch.full((5, 1), BOOTSTRAP, dtype=F64)
    adv, _ = adapter.gae(REWARD, VALUE, flags, flags, next_value, GAMMA, LAM)
    exact, _ = reference_gae.gae(REWARD, VALUE, flags, flags, next_value, GAMMA, LAM)
    g32, gl32 = _f32(GAMMA), _f32(GAMMA * LAM)  # what gamma * (~done).int() and lmbda * gamma * ... become
    rounded, _ = reference_gae.gae(REWARD, VALUE, flags, flags, next_value, g32, gl32 / g32)
    gae_err, gae_vs_rounded = float((adv - exact).abs().max()), float((adv - rounded).abs().max())

    log_rho, discount = torch.zeros(5, 1, dtype=F64), torch.full((5, 1), GAMMA, dtype=F64)
    boot = torch.tensor([BOOTSTRAP], dtype=F64)
    vs, _ = adapter.vtrace(log_rho, discount, REWARD, VALUE, boot)
    vs_exact, _ = reference_vtrace.vtrace(log_rho, discount, REWARD, VALUE, boot)
    vs_rounded, _ = reference_vtrace.vtrace(log_rho, torch.full_like(discount, g32), REWARD, VALUE, boot)
    vt_err, vt_vs_rounded = float((vs - vs_exact).abs().max()), float((vs - vs_rounded).abs().max())
    eps64 = torch.finfo(F64).eps
    verified = (adv.dtype == F64 and gae_err > 1e-9 and gae_vs_rounded < 64 * eps64
                and vt_err > 1e-9 and vt_vs_rounded < 64 * eps64)
    figures = dict(gae_max_abs_error=gae_err, gae_error_vs_float32_discounts=gae_vs_rounded,
                   vtrace_vs_max_abs_error=vt_err, vtrace_error_vs_float32_discounts=vt_vs_rounded,
                   output_dtype=str(adv.dtype))
    summary = (f"5-step float64 rollout (r = {REWARD[:, 0].tolist()}, V = {VALUE[:, 0].tolist()}, V(s_5) = "
               f"{BOOTSTRAP}, γ = {GAMMA}, λ = {LAM}): GAE off by {gae_err:.2g} (vs the float64 reference), "
               f"{gae_vs_rounded:.2g} from the reference run with float32(γ) and float32(γλ); V-trace vs off by "
               f"{vt_err:.2g}, {vt_vs_rounded:.2g} from float32(γ)")
    return verified, figures, summary


def omnisafe_nan_cost():
    from rlspec.thirdparty import omnisafe_adapter as adapter

    costs = [30.0, 30.0, math.nan] + [30.0] * 6  # J_c above the limit d = 25 before and after one NaN
    pid = adapter.PIDLagrangian()
    pid_lams = [float(pid.update(jc)) for jc in costs]
    smoothed = dict(delta_p=pid._impl._delta_p, cost_d=pid._impl._cost_d)  # OmniSafe's EMA terms
    adam = adapter.OmniSafeLagrange()
    adam_lams = [float(adam.update(jc)) for jc in costs]
    after = pid_lams[2:]
    verified = (pid_lams[1] > 0 and all(lam == 0.0 for lam in after)
                and all(math.isnan(v) for v in smoothed.values()) and all(math.isnan(v) for v in adam_lams[2:]))
    figures = dict(costs=[str(c) for c in costs], pid_lambda=pid_lams, pid_smoothed_terms=str(smoothed),
                   lagrange_adam_lambda=[str(v) for v in adam_lams])
    summary = (f"PIDLagrangian (defaults, d = 25), J_c = 30, 30, NaN, then 30 × 6: λ = {pid_lams[1]:.4g} before the "
               f"NaN, then {sorted(set(after))} for the remaining {len(after)} updates although J_c > d "
               f"(_delta_p, _cost_d = {smoothed['delta_p']}, {smoothed['cost_d']}); Lagrange (Adam): λ = "
               f"{adam_lams[-1]} from the NaN on")
    return verified, figures, summary


def sheeprl_twohot():
    from sheeprl.utils.distribution import TwoHotEncodingDistribution

    from rlspec.thirdparty import sheeprl_adapter as adapter

    n = 255
    bins64 = torch.linspace(-20.0, 20.0, n, dtype=F64)
    logits = (-0.5 * bins64**2).unsqueeze(0)  # [1, 255] float64: mass around 0 in symlog space
    dist = TwoHotEncodingDistribution(logits, dims=1)
    nan_lp = float(adapter.log_prob(logits, torch.tensor([math.nan], dtype=F64)))
    lowest = float(torch.log_softmax(logits, -1)[0, 0])
    verified = dist.bins.dtype == torch.float32 and math.isfinite(nan_lp) and nan_lp == lowest
    figures = dict(logits_dtype=str(logits.dtype), bins_dtype=str(dist.bins.dtype), nan_target_log_prob=nan_lp,
                   log_softmax_lowest_bin=lowest)
    summary = (f"logits [1, 255] float64 (−b²/2, peaked at 0): TwoHotEncodingDistribution.bins is "
               f"{dist.bins.dtype}; log_prob at x = NaN is {nan_lp:.6g}, exactly log_softmax(logits) of the lowest "
               f"bin ({lowest:.6g}): the NaN target is encoded one-hot on bin 0")
    return verified, figures, summary


FINDINGS = (
    Finding("torchrl-float32-discounts", "torchrl 0.14.1",
            "float64 GAE is computed with float32 discounts (error 5.5e-8 on a 5-step example; V-trace likewise)",
            torchrl_float32_discounts),
    Finding("omnisafe-pid-nan", "omnisafe 0.5.0",
            "PIDLagrangian: one NaN cost sets λ to 0 for good (max(0.0, nan) is 0.0 while its smoothed terms stay "
            "NaN): the constraint is silently switched off",
            omnisafe_nan_cost),
    Finding("sheeprl-twohot", "sheeprl 0.8.4",
            "TwoHot builds float32 bins for float64 logits and encodes a NaN target one-hot on the lowest bin "
            "(a finite, very negative log-prob)",
            sheeprl_twohot),
)
