"""Planted bugs for ``vtrace`` and ``risk_target``: each implementation validates its input with the
contract's own validator, then makes exactly one mistake (most as the reference fed rewritten inputs, a
short loop where no rewrite expresses the bug).

Each entry names the clause that must catch it; ``spared`` clauses (the bad-input ones included) must
still pass.
"""

from __future__ import annotations

import math
import types

import torch
from planted import Planted

from rlspec.contracts.risk_target import validate_risk_target
from rlspec.contracts.vtrace import validate_vtrace
from rlspec.fast.recursion import carry_step
from rlspec.reference import risk_target as ref_risk
from rlspec.reference import vtrace as ref_vtrace


# ------------------------------------------------------------------------------------------- vtrace
def _vtrace_loop(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar, *,
                 trace_discount=True, pg_next=True):
    """V-trace in float64 with two switches: the trace uses γ_t (else 1) and pg bootstraps vs_{t+1}
    (else vs_t)."""
    dtype = value.dtype
    log_rho, d, r, v, bootstrap_value = (x.detach().double() for x in (
        log_rho, discount, reward, value, bootstrap_value))
    ratio = torch.exp(log_rho)
    next_v = torch.cat([v[1:], bootstrap_value.unsqueeze(0)])  # [T, B]
    delta = ratio.clamp(max=rho_bar) * (r + d * next_v - v)
    trace = (d if trace_discount else torch.ones_like(d)) * lam * ratio.clamp(max=c_bar)
    diff, acc = torch.zeros_like(v), v.new_zeros(v.shape[1:])
    for t in reversed(range(v.shape[0])):
        acc = diff[t] = carry_step(delta[t], trace[t], acc)  # a cut selects (VTRACE-6)
    vs = v + diff
    boot = vs if not pg_next else torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])
    pg = ratio.clamp(max=pg_rho_bar) * (carry_step(r, d, boot) - v)
    return vs.to(dtype), pg.to(dtype)


def _vtrace_with(**switches):
    def vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
               pg_rho_bar=None):
        pg_rho_bar = validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar,
                                     c_bar, lam, pg_rho_bar)
        return _vtrace_loop(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar,
                            **switches)

    return vtrace


def _c_clipped_at_rho_bar(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                          pg_rho_bar=None):
    validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, rho_bar, lam, pg_rho_bar)


def _unclipped(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
               pg_rho_bar=None):  # the thresholds are validated, then ignored
    validate_vtrace("vtrace", log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, math.inf, math.inf, lam, math.inf)


def _with_gradient(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                   pg_rho_bar=None):  # the reference's outputs, re-attached to value's graph
    vs, pg = ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)
    return vs + 0 * value, pg + 0 * value


def _nan_accepted(log_rho, discount, reward, value, bootstrap_value, rho_bar=1.0, c_bar=1.0, lam=1.0,
                  pg_rho_bar=None):  # NaN rewards pass through (nan_to_num'd before validation)
    return ref_vtrace.vtrace(log_rho, discount, torch.nan_to_num(reward), value, bootstrap_value, rho_bar, c_bar,
                             lam, pg_rho_bar)


# -------------------------------------------------------------------------------------------- risk
def _seed_block_reset(cost, done, gamma, horizon):
    """PPOLagSem design §29.2.1 verbatim: the accumulator also resets whenever ``look >= H``."""
    flags = validate_risk_target("risk_target", cost, done, gamma, horizon)
    c, d = cost.double(), flags
    out, running, look = torch.zeros_like(c), c.new_zeros(c.shape[1:]), torch.zeros(c.shape[1:], dtype=torch.long)
    for i in reversed(range(c.shape[0])):
        reset = d[i] | (look >= horizon)
        running = torch.where(reset, 0.0, running)
        look = torch.where(reset, 0, look)
        running = c[i] + gamma * running
        out[i] = running
        look = look + 1
    return out.to(cost.dtype)


def _prefix_difference(cost, done, gamma, horizon):
    """O(L) by differencing prefix sums of γ^k-scaled costs in the input dtype: (P_end − P_t)/γ^t."""
    flags = validate_risk_target("risk_target", cost, done, gamma, horizon)
    L = cost.shape[0]
    if cost.numel() == 0:
        return cost.new_zeros(cost.shape)
    steps = torch.arange(L).reshape((L,) + (1,) * (cost.dim() - 1))
    scale = (gamma ** steps.double()).to(cost.dtype)  # γ^t
    P = torch.cat([torch.zeros_like(cost[:1]), torch.cumsum(scale * cost, 0)])  # [L+1, B]
    pos = torch.where(flags, steps, L)  # the next done at or after t: reverse cumulative min
    next_done = torch.flip(torch.cummin(torch.flip(pos, [0]), 0).values, [0])
    end = torch.minimum(torch.minimum(steps + horizon, next_done + 1), torch.full_like(steps, L))
    return (torch.gather(P, 0, end.expand(cost.shape)) - P[:L]) / scale


def _running_minus_leaving(cost, done, gamma, horizon):
    """O(L) backward running sum in the input dtype that subtracts the cost leaving the window:
    S_t = c_t + γ·(1 − d_t)·S_{t+1} − γ^H·[no done in t..t+H−1]·c_{t+H}."""
    flags = validate_risk_target("risk_target", cost, done, gamma, horizon)
    L = cost.shape[0]
    dones = torch.cat([torch.zeros_like(flags[:1], dtype=torch.long), torch.cumsum(flags.long(), 0)])
    out, running = torch.zeros_like(cost), cost.new_zeros(cost.shape[1:])
    for t in reversed(range(L)):
        running = carry_step(cost[t], gamma * (~flags[t]).to(cost.dtype), running)  # a done selects (RISK-3)
        if t + horizon < L:
            running = running - gamma ** horizon * (dones[t + horizon] == dones[t]) * cost[t + horizon]
        out[t] = running
    return out


def _done_ignored(cost, done, gamma, horizon):  # risk_episode_mask_enable=False
    validate_risk_target("risk_target", cost, done, gamma, horizon)
    return ref_risk.risk_target(cost, torch.zeros_like(done), gamma, horizon)


def _one_step_too_far(cost, done, gamma, horizon):  # range(t, t + H + 1): H + 1 terms
    validate_risk_target("risk_target", cost, done, gamma, horizon)
    return ref_risk.risk_target(cost, done, gamma, horizon + 1)


def _none_when_empty(cost, done, gamma, horizon):  # the seed: "Empty buffers → return None"
    if cost.numel() == 0:
        return None
    return ref_risk.risk_target(cost, done, gamma, horizon)


def _vt(fn):
    return types.SimpleNamespace(vtrace=fn)


def _rt(fn):
    return types.SimpleNamespace(risk_target=fn)


VTRACE_BAD_INPUT = ("VTRACE-9", "VTRACE-10", "VTRACE-11")
RISK_BAD_INPUT = ("RISK-9", "RISK-10", "RISK-11")

PLANTED_VTRACE_RISK = (
    Planted("c clipped at rho_bar instead of c_bar", "vtrace", _vt(_c_clipped_at_rho_bar), "VTRACE-1", "vs:",
            ("VTRACE-3", "VTRACE-5", "VTRACE-6", "VTRACE-7", "VTRACE-8") + VTRACE_BAD_INPUT),
    Planted("importance ratios not clipped", "vtrace", _vt(_unclipped), "VTRACE-4", "clipping thresholds",
            ("VTRACE-3",) + VTRACE_BAD_INPUT),  # e^800 unclipped overflows: the value clauses fail too
    Planted("pg advantage bootstraps vs_t", "vtrace", _vt(_vtrace_with(pg_next=False)), "VTRACE-2",
            "pg_advantage", ("VTRACE-1", "VTRACE-4", "VTRACE-5", "VTRACE-6", "VTRACE-7", "VTRACE-8")
            + VTRACE_BAD_INPUT),
    Planted("trace carried across a terminal", "vtrace", _vt(_vtrace_with(trace_discount=False)), "VTRACE-6",
            "discount[", ("VTRACE-4", "VTRACE-5", "VTRACE-7", "VTRACE-8") + VTRACE_BAD_INPUT),
    Planted("targets not detached", "vtrace", _vt(_with_gradient), "VTRACE-5", "carries a gradient",
            ("VTRACE-1", "VTRACE-2", "VTRACE-3", "VTRACE-4", "VTRACE-6", "VTRACE-7", "VTRACE-8")
            + VTRACE_BAD_INPUT),
    Planted("NaN reward accepted", "vtrace", _vt(_nan_accepted), "VTRACE-11", "accepted silently",
            ("VTRACE-1", "VTRACE-2", "VTRACE-3", "VTRACE-9", "VTRACE-10")),
    Planted("seed's block reset when look >= H", "risk_target", _rt(_seed_block_reset), "RISK-5",
            "the window slides", ("RISK-3", "RISK-4", "RISK-6", "RISK-8") + RISK_BAD_INPUT),
    Planted("difference of prefix sums", "risk_target", _rt(_prefix_difference), "RISK-7",
            "outside the error bound", ("RISK-6", "RISK-8") + RISK_BAD_INPUT),
    Planted("running sum minus the leaving cost", "risk_target", _rt(_running_minus_leaving), "RISK-7",
            "outside the error bound", ("RISK-3", "RISK-6", "RISK-8") + RISK_BAD_INPUT),
    Planted("done ignored", "risk_target", _rt(_done_ignored), "RISK-3", "done[",
            ("RISK-2", "RISK-4", "RISK-6", "RISK-8") + RISK_BAD_INPUT),
    Planted("one step beyond the horizon", "risk_target", _rt(_one_step_too_far), "RISK-2", "+ H on changed",
            ("RISK-3", "RISK-6", "RISK-8") + RISK_BAD_INPUT),
    Planted("None for an empty buffer", "risk_target", _rt(_none_when_empty), "RISK-6", "expected an empty",
            ("RISK-1", "RISK-2", "RISK-3", "RISK-4", "RISK-5", "RISK-7", "RISK-8") + RISK_BAD_INPUT),
)
