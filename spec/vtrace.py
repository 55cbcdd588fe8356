"""Contract ``vtrace``: IMPALA's V-trace targets and policy-gradient advantages, time-major [T, B].

Sources: Espeholt et al. 2018, "IMPALA" (arXiv 1802.01561), §4.1 (V-trace target, eq. 1 and its recursive
form, Remark 1: c_s = λ·min(c̄, ρ_s)) and §4.2 (policy-gradient advantage); the success-set design (PPO + V-trace +
replay: the replay's old data is corrected with V-trace; the targets are stop-gradient).

Inputs (row t = the transition x_t → x_{t+1} taken under the behaviour policy μ)
----------------------------------------------------------------------------
    log_rho          [T, B]   log π(a_t|x_t) − log μ(a_t|x_t); −inf allowed (π(a_t|x_t) = 0, ρ_t = 0)
    discount         γ_t [T, B]  in [0, 1], termination included: γ·(1 − terminated_t)
    reward           r_t [T, B]
    value            V_t = V(x_t) [T, B]
    bootstrap_value  V_T = V(x_T) [B]
    rho_bar, c_bar, lam, pg_rho_bar   ρ̄, c̄ ∈ (0, ∞], λ ∈ [0, 1]; ρ̄_pg ∈ (0, ∞], None means ρ̄_pg = ρ̄
                                      (defaults ρ̄ = c̄ = λ = 1, as in the paper)
    truncated        [T, B]   optional, with next_value: the episode was cut after transition t (time limit);
                              x_{t+1}, if in the window, belongs to the next episode (a collector's reset)
    next_value       [T, B]   V(x'_t) of the real post-action state; read only where truncated_t

Formula
-------
    ρ_t = min(ρ̄, e^{log_rho_t}),   c_t = λ·min(c̄, e^{log_rho_t}),   ρ^pg_t = min(ρ̄_pg, e^{log_rho_t})
    δ_t  = ρ_t·(r_t + γ_t·V_{t+1} − V_t)                                    (V_T = bootstrap_value)
    vs_t = V_t + δ_t + γ_t·c_t·(vs_{t+1} − V_{t+1}),   vs_T = V_T                       → vs [T, B]
    pg_t = ρ^pg_t·(r_t + γ_t·vs_{t+1} − V_t)                                  → pg_advantage [T, B]

Truncation (the collector layout, as ``gae`` takes it): at a truncated step the window ends inside the
batch, exactly as it ends at T: V_{t+1} and vs_{t+1} are both next_value_t there and the trace stops
(γ_t·c_t·(vs_{t+1} − V_{t+1}) = 0), so vs_t = V_t + ρ_t·(r_t + γ_t·b_t − V_t) and pg_t = ρ^pg_t·(r_t + γ_t·b_t − V_t).
A step with γ_t = 0 and truncated_t is terminal. Hence the concatenation clause: a batch holding several
trajectories back to back gives each of them the targets it gets alone. (TorchRL took the next trajectory's
value at an in-batch truncation until pytorch/rl#4210; its test is this clause.)

Both outputs are targets: they carry no gradient (returned detached even when inputs require grad).

On-policy (log_rho ≡ 0, ρ̄ ≥ 1, c̄ ≥ 1): ρ_t = 1, c_t = λ and vs_t = r_t + γ_t·((1 − λ)·V_{t+1} + λ·vs_{t+1}),
the λ-return of the ``lambda_return`` contract with value = [V_0..V_{T−1}, V_T] and γ·cont = γ_t, and the
GAE(λ) return of the ``gae`` contract (terminated = [γ_t = 0], no truncation, bootstrap at the last
row). pg_t is then r_t + γ_t·vs_{t+1} − V_t, which for λ = 1 is the GAE(1) advantage.

Conventions
-----------
* A zero discount ends the episode: nothing after row t reaches vs_t or pg_t; so does a truncation.
* pg advantage: the paper's r_t + γ_t·vs_{t+1}. rlax 0.1.9 ``vtrace_td_error_and_advantage`` bootstraps
  with λ·vs_{t+1} + (1 − λ)·V_{t+1} instead (equal for λ = 1); :func:`rlax_pg_advantage` converts. rlax
  also fixes c̄ = 1, takes ratios (not log ratios), per-sequence arrays [T] and v_t separately from
  v_tm1 (see :func:`to_rlax`); scalable_agent (TF) has no λ.
* dtype: all tensors share one floating dtype, outputs have it; the reference computes in float64.
  Shapes are [T, ...] with bootstrap_value [...]; T = 0 gives empty outputs.
* Bad input is rejected before any work, naming the argument (and the first offending index): shape or
  dtype mismatch, ρ̄/c̄/ρ̄_pg not in (0, ∞], λ outside [0, 1], discount outside [0, 1] (NaN included),
  NaN/±Inf in reward, value or bootstrap_value, NaN or +inf in log_rho (μ(a_t) = 0 for a taken action),
  and, where a bar is ∞ (the ratio used unclipped), log_rho above log(max of the dtype): e^log_rho would
  overflow. With finite bars any finite log_rho is fine (e^800 clipped to ρ̄ is ρ̄).
* Tolerance (vs the float64 reference), per element (``error_bounds``): step t rounds by
  ℓ_t = K·u·(|V_t| + ρ_t(|r_t| + γ_t|V_{t+1}| + |V_t|) + γ_t·c_t·(|vs_{t+1}| + |V_{t+1}|)) and the recursion
  carries an error at t+1 back by the trace factor: E_t = ℓ_t + γ_t·c_t·E_{t+1}; pg_t gets
  K·u·ρ^pg_t·(|r_t| + γ_t|vs_{t+1}| + |V_t|) + ρ^pg_t·γ_t·E_{t+1} (u = eps of the dtype, K = 16). The bound
  follows the actual amplification along the trace, so it stays below the outputs even with c̄ = ∞.
  What must *not* change an output (clipped ratios, rows after a zero discount) is checked bit for bit.
  With the dtype's largest finite values after a zero discount the literal recursion gives 0·inf = NaN
  before it: that case is the robustness clause VTRACE-16 (see its rationale).
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.vtrace import ARGS, DEFAULTS, PARAMS
from rlspec.reference import gae, lambda_return
from rlspec.reference import vtrace as reference  # the oracle
from rlspec.spec.core import Change, Contract, Property, assert_close, by_category, expect_rejection, fail
from rlspec.spec.power import defaults_check, with_omitted
from rlspec.spec.returns import (
    OVERFLOW_NOTE,
    TERMINAL,
    TRUNCATED,
    TRUNCATION_ERRORS,
    BadInput,
    assert_concatenation,
    assert_within,
    noise_like,
    overflow_rationale,
    perturbation,
    pinned_ends,
    rejects_truncation,
    seeds,
    unit_params,
    with_ends,
    with_position,
)
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "VTRACE-1": "vs follows vs_t = V_t + δ_t + γ_t·c_t·(vs_{t+1} − V_{t+1}), vs_T = V_T "
                "(vs float64 reference, within 8·(T+1)·eps·M·G^T)",
    "VTRACE-2": "pg_advantage = ρ^pg_t·(r_t + γ_t·vs_{t+1} − V_t), ρ^pg clipped at ρ̄_pg (vs float64 reference)",
    "VTRACE-3": "on-policy (log_rho = 0, ρ̄, c̄ >= 1): vs equals the λ-return and the GAE(λ) return; "
                "pg_advantage = r_t + γ_t·vs_{t+1} − V_t, the GAE(1) advantage when λ = 1",
    "VTRACE-4": "clipping thresholds are respected: raising ratios already above max(ρ̄, c̄, ρ̄_pg) "
                "changes nothing (bit for bit)",
    "VTRACE-5": "no gradient through targets: vs and pg_advantage are detached even when inputs require grad",
    "VTRACE-6": "a zero discount cuts: nothing in rows after t changes vs or pg_advantage at rows <= t "
                "(bit for bit)",
    "VTRACE-7": "λ = 0 gives the one-step target vs_t = V_t + ρ_t·(r_t + γ_t·V_{t+1} − V_t)",
    "VTRACE-8": "shape and dtype: vs and pg_advantage have value's shape [T, ...] and dtype; T = 0 is empty",
    "VTRACE-9": "mismatched shapes or dtypes are rejected naming the argument",
    "VTRACE-10": "rho_bar, c_bar, pg_rho_bar not in (0, inf] or lam outside [0, 1] are rejected naming the "
                 "argument and the value",
    "VTRACE-11": "NaN/Inf in reward, value, bootstrap_value, NaN/+inf in log_rho and discount outside "
                 "[0, 1] are rejected naming the argument and the index",
    "VTRACE-12": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "VTRACE-13": "with finite bars (rho_bar, c_bar) the outputs stay finite for any finite log_rho, also where "
                 "e^log_rho overflows (|log_rho| = 800)",
    "VTRACE-14": "documented defaults: omitting rho_bar, c_bar, lam or pg_rho_bar equals passing 1.0, 1.0, 1.0, None "
                 "(bit for bit)",
    "VTRACE-15": "with a bar at ∞ (ratio unclipped), log_rho above log(max of the dtype) is rejected naming 'log_rho' "
                 "and the bar (e^log_rho overflows)",
    "VTRACE-16": "overflow after a zero discount stays there: with discount[t] = 0 and the dtype's largest finite "
                 "rewards and values after t (vs overflows to inf there), rows <= t are bit-identical, never NaN",
    "VTRACE-17": "with truncated steps vs and pg_advantage follow the formula with V_{t+1} = vs_{t+1} = next_value_t "
                 "and no trace at a truncated step (vs float64 reference, within the error bounds)",
    "VTRACE-18": "a truncated step ends its episode: nothing after row t (log_rho, discount, reward, value, truncated, "
                 "next_value, bootstrap_value) changes vs or pg_advantage at rows <= t (bit for bit)",
    "VTRACE-19": "a step both terminal (discount 0) and truncated is terminal: the outputs equal the ones with "
                 "truncated cleared there (bit for bit)",
    "VTRACE-20": "next_value is ignored where truncated is not set or the discount is 0 (bit for bit)",
    "VTRACE-21": "concatenated trajectories: a batch whose episodes end anywhere (discount 0 or truncated; at t = 0 "
                 "and T − 1 too; in several envs) gives each trajectory the vs and pg_advantage it gets alone",
    "VTRACE-22": "truncated without next_value (or the reverse), either in another shape or dtype than value, "
                 "non-0/1 flags and NaN/Inf in next_value are rejected naming the argument",
}

CATEGORIES = by_category(
    maths=("VTRACE-1", "VTRACE-2", "VTRACE-3", "VTRACE-4", "VTRACE-5", "VTRACE-6", "VTRACE-7", "VTRACE-8",
           "VTRACE-14", "VTRACE-17", "VTRACE-18", "VTRACE-19", "VTRACE-20", "VTRACE-21"),
    robustness=("VTRACE-12", "VTRACE-13", "VTRACE-16"),
    validation=("VTRACE-9", "VTRACE-10", "VTRACE-11", "VTRACE-15", "VTRACE-22"),
)
RATIONALE = {
    "VTRACE-13": "In IEEE arithmetic the literal min(ρ̄, e^log_rho) is ρ̄ even where e^log_rho overflows to inf, so "
                 "a textbook implementation passes; one that multiplies by the unclipped ratio first, or clips in "
                 "log space against log of the wrong bar, returns inf or NaN. Log-ratios of several hundred occur "
                 "when a replayed action has become (numerically) impossible for the behaviour policy.",
    "VTRACE-16": overflow_rationale("VTRACE-6", "a zero discount"),
    "VTRACE-12": SCALAR_RATIONALE,
    "VTRACE-17": "The formula at a truncation is the paper's at a window end (V_{t+1} = vs_{t+1} = V(x'_t)); TorchRL "
                 "0.14.1 passes the truncation clauses VTRACE-18..21 and fails this one only by rounding its discounts "
                 "to float32 in float64, rlax only by its λ-mixed pg bootstrap (VTRACE-2's difference) before a "
                 "truncation. The clause keeps the paper's values; both causes are declared.",
    "VTRACE-2": "IMPALA §4.2 defines the policy-gradient advantage with vs_{t+1}. rlax bootstraps λ·vs_{t+1} + "
                "(1 − λ)·V_{t+1} instead (equal at λ = 1; spec.vtrace.rlax_pg_advantage converts) and TorchRL "
                "rounds its discounts to float32, so both adapters fail on values; the clause keeps the paper's"
                " definition, and each difference is declared with its cause.",
}

INTERFACE = ("vtrace",)
"""
vtrace(log_rho [T, B], discount [T, B], reward [T, B], value [T, B], bootstrap_value [B],
       rho_bar=1.0, c_bar=1.0, lam=1.0, pg_rho_bar=None, truncated=None [T, B] bool,
       next_value=None [T, B]) -> (vs [T, B], pg_advantage [T, B])
"""


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
thresholds = st.sampled_from([1.0, 0.5, 2.0, math.inf])


@st.composite
def cases(draw, on_policy: bool = False, lam: float | None = None):
    """log_rho (zeros, gaussian, mostly clipped, some −inf), discount = γ·cont (0/1 flags or
    probabilities), reward, value [T, B], bootstrap_value [B]; thresholds and λ."""
    g = torch.Generator().manual_seed(draw(seeds))
    T, B = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    r_scale, v_scale = draw(st.sampled_from([0.0, 1.0, 10.0, 1e3])), draw(st.sampled_from([0.0, 1.0, 100.0]))
    gamma = draw(unit_params)
    u = torch.rand(T, B, generator=g, dtype=torch.float64)
    cont = u if draw(st.booleans()) else (u > 0.2).double()
    kind = "zeros" if on_policy else draw(st.sampled_from(["zeros", "normal", "clipped", "with -inf", "huge"]))
    log_rho = torch.randn(T, B, generator=g, dtype=torch.float64)
    log_rho = {"zeros": 0 * log_rho, "normal": log_rho, "clipped": 1.5 + log_rho.abs(),
               "with -inf": torch.where(u < 0.2, -math.inf, log_rho),
               "huge": 800 * log_rho.sign()}[kind]  # e^800 overflows float64: only clipping makes it finite

    def randn(shape, scale):
        return (scale * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)

    rho_bar, c_bar = draw(thresholds), draw(st.sampled_from([1.0, 0.5, 0.9, math.inf]))
    pg_rho_bar = draw(st.sampled_from([None, 1.0, 5.0]))
    if on_policy:
        rho_bar, c_bar = max(rho_bar, 1.0), max(c_bar, 1.0)
    if kind == "huge":  # finite bars: the overflowing ratios are clipped (VTRACE-13 covers ∞ bars)
        rho_bar, c_bar = min(rho_bar, 2.0), min(c_bar, 2.0)
    return dict(log_rho=log_rho.to(dtype), discount=(gamma * cont).to(dtype), reward=randn((T, B), r_scale),
                value=randn((T, B), v_scale), bootstrap_value=randn((B,), v_scale), rho_bar=rho_bar,
                c_bar=c_bar, lam=draw(unit_params) if lam is None else lam, pg_rho_bar=pg_rho_bar)


def _pinned(T: int, B=(3,), dtype=torch.float32, lam=1.0, rho_bar=1.0, c_bar=1.0, pg_rho_bar=None,
            scale=1.0) -> dict:
    g = torch.Generator().manual_seed(T)
    cont = (torch.rand(T, *B, generator=g) > 0.25).to(dtype)
    return dict(log_rho=(scale * torch.randn(T, *B, generator=g)).to(dtype), discount=0.99 * cont,
                reward=torch.randn(T, *B, generator=g).to(dtype), value=torch.randn(T, *B, generator=g).to(dtype),
                bootstrap_value=torch.randn(B, generator=g).to(dtype), rho_bar=rho_bar, c_bar=c_bar, lam=lam,
                pg_rho_bar=pg_rho_bar)


EXAMPLES = (_pinned(12, (4,)), _pinned(1), _pinned(6, (), torch.float64, lam=0.9),
            _pinned(8, (2,), rho_bar=2.0, c_bar=0.5, pg_rho_bar=1.0, scale=2.0),
            _pinned(5, (2, 2), lam=0.5, rho_bar=math.inf, c_bar=math.inf),
            dict(_pinned(3, (2,), torch.float64), log_rho=torch.full((3, 2), 800.0, dtype=torch.float64)))


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


TRUNCATION = ("truncated", "next_value")  # the collector layout's optional pair


def _call(impl, case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    pair = {k: case[k] for k in TRUNCATION if case.get(k) is not None}
    return impl.vtrace(*(case[k] for k in ARGS), **{k: case[k] for k in PARAMS}, **pair)


def _inputs(case: dict) -> dict:
    return {k: case[k] for k in ARGS + PARAMS + TRUNCATION if k in case}


def error_bounds(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-element bounds [T, ...] on |vs − vs_ref| and |pg − pg_ref| (see the module docstring) for an
    implementation computing in the input dtype (eps u), in float64 from the reference's clipped ratios:
    step t rounds by ℓ_t = K·u·(|V_t| + ρ_t(|r_t| + γ_t|V_{t+1}| + |V_t|) + γ_t c_t(|vs_{t+1}| + |V_{t+1}|)), and
    the recursion carries errors back through the trace factors: E_t = ℓ_t + γ_t c_t E_{t+1}, E_T = K·u·|V_T|;
    pg_t adds K·u·ρ^pg_t(|r_t| + γ_t|vs_{t+1}| + |V_t|) + ρ^pg_t γ_t E_{t+1}. K = 16 covers a few roundings per
    term and scan kernels that compose the affine steps in another order."""
    T = case["value"].shape[0]
    u = 16 * torch.finfo(case["value"].dtype).eps
    ratio = torch.exp(case["log_rho"].double().clamp(max=700.0))
    pg_bar = case["rho_bar"] if case["pg_rho_bar"] is None else case["pg_rho_bar"]
    rho, rho_pg = ratio.clamp(max=case["rho_bar"]), ratio.clamp(max=pg_bar)
    c = case["lam"] * ratio.clamp(max=case["c_bar"])
    disc, r, v = (case[k].double() for k in ("discount", "reward", "value"))
    boot = case["bootstrap_value"].double()
    cut = case.get("truncated")
    cut = torch.zeros(v.shape, dtype=torch.bool) if cut is None else cut.bool()  # [T, B]
    b = torch.zeros_like(v) if case.get("next_value") is None else case["next_value"].double()  # [T, B]
    vs, _ = _vs_reference(case)
    vs = vs.double()
    bound_vs, bound_pg = torch.zeros_like(v), torch.zeros_like(v)
    err, next_v, next_vs = u * boot.abs(), boot, boot  # E_T, V_T, vs_T
    for t in reversed(range(T)):  # a truncation ends the window as T does: E = K·u·|b_t|, no trace
        err, next_v, next_vs = (torch.where(cut[t], x, y) for x, y in ((u * b[t].abs(), err), (b[t], next_v),
                                                                         (b[t], next_vs)))
        trace = disc[t] * c[t] * ~cut[t]
        local = u * (v[t].abs() + rho[t] * (r[t].abs() + disc[t] * next_v.abs() + v[t].abs())
                     + trace * (next_vs.abs() + next_v.abs()))
        bound_pg[t] = u * rho_pg[t] * (r[t].abs() + disc[t] * next_vs.abs() + v[t].abs()) + rho_pg[t] * disc[t] * err
        err = local + trace * err
        bound_vs[t], next_v, next_vs = err, v[t], vs[t]
    return bound_vs, bound_pg


def _assert_unchanged(clause: str, what: str, got, base, rows: slice, case: dict) -> None:
    for name, g, b in (("vs", got[0], base[0]), ("pg_advantage", got[1], base[1])):
        if not torch.equal(g[rows], b[rows]):
            idx = [int(i) for i in (g[rows] != b[rows]).nonzero()[0].tolist()]
            idx[0] += rows.start or 0
            fail(clause, f"{what}: {name}{idx} = {g[tuple(idx)].item()!r}, was {b[tuple(idx)].item()!r}",
                 **_inputs(case))


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def _vs_reference(case: dict):
    ref = dict(case, **{k: case[k].double() for k in ARGS + ("next_value",) if case.get(k) is not None})
    return _call(reference, ref)


def check_vs(impl, **case):
    vs, _ = _call(impl, case)
    want, _ = _vs_reference(case)
    assert_within("VTRACE-1", "vs", vs, want, error_bounds(case)[0], **_inputs(case))


def check_pg(impl, **case):
    _, pg = _call(impl, case)
    _, want = _vs_reference(case)
    assert_within("VTRACE-2", "pg_advantage", pg, want, error_bounds(case)[1], **_inputs(case))


def check_on_policy(impl, **case):
    vs, pg = _call(impl, case)
    disc, r, v, boot = (case[k].double() for k in ("discount", "reward", "value", "bootstrap_value"))
    values = torch.cat([v, boot.unsqueeze(0)])  # [T+1, B]: V_0..V_T
    lam, (tol_vs, tol_pg) = case["lam"], error_bounds(case)
    # λ-return with γ = 1 and cont = γ_t: the per-step discount is the product γ·c_t = γ_t
    want = lambda_return.lambda_return(r, disc, values, 1.0, lam)
    assert_within("VTRACE-3", "on-policy vs vs the λ-return (lambda_return reference)", vs, want, tol_vs,
                  **_inputs(case))
    want_pg = r + disc * torch.cat([want[1:], boot.unsqueeze(0)]) - v
    assert_within("VTRACE-3", "on-policy pg_advantage vs r_t + γ_t·R^λ_{t+1} − V_t", pg, want_pg, tol_pg,
                  **_inputs(case))
    gamma = disc.max().item()
    if bool(((disc == 0) | (disc == gamma)).all()) and gamma > 0:  # γ_t = γ·(1 − terminated_t): GAE applies
        terminated = disc == 0
        boot_rows = torch.zeros_like(v)
        boot_rows[-1] = boot
        adv, ret = gae.gae(r, v, terminated, torch.zeros_like(terminated), boot_rows, gamma, lam)
        assert_within("VTRACE-3", "on-policy vs vs the GAE(λ) return (gae reference)", vs, ret, tol_vs,
                      **_inputs(case))
        if lam == 1.0:
            assert_within("VTRACE-3", "on-policy pg_advantage (λ = 1) vs the GAE(1) advantage", pg, adv,
                          tol_pg, **_inputs(case))


def check_clipping(impl, seed, **case):
    bound = max(case["rho_bar"], case["c_bar"], case["rho_bar"] if case["pg_rho_bar"] is None
                else case["pg_rho_bar"])
    if math.isinf(bound):
        return  # nothing is clipped
    log_rho = case["log_rho"].clone()
    g = torch.Generator().manual_seed(seed)
    clipped = torch.rand(log_rho.shape, generator=g) < 0.5  # these ratios go above every threshold
    log_rho[clipped] = (math.log(bound) + 1e-3 + 3 * torch.rand(int(clipped.sum()), generator=g,
                                                                dtype=torch.float64)).to(log_rho.dtype)
    base = _call(impl, dict(case, log_rho=log_rho))
    raised = log_rho.clone()
    raised[clipped] += (1 + 5 * torch.rand(int(clipped.sum()), generator=g, dtype=torch.float64)).to(
        log_rho.dtype)
    got = _call(impl, dict(case, log_rho=raised))
    _assert_unchanged("VTRACE-4", f"ratios above the clipping thresholds (max(ρ̄, c̄, ρ̄_pg) = {bound:g}) "
                                  "raised further", got, base, slice(None), dict(case, log_rho=log_rho))


def check_no_grad(impl, **case):
    leaves = {k: case[k].detach().clone().requires_grad_(True) for k in ARGS}
    vs, pg = _call(impl, dict(case, **leaves))
    for name, out in (("vs", vs), ("pg_advantage", pg)):
        if out.requires_grad or out.grad_fn is not None:
            fail("VTRACE-5", f"{name} carries a gradient (requires_grad={out.requires_grad}, "
                             f"grad_fn={type(out.grad_fn).__name__}) while the inputs require grad; "
                             "targets must be detached", **_inputs(case))


def _changed_after(case: dict, pos: int, g: torch.Generator, huge: bool) -> dict:
    """``case`` with fresh rows after ``pos`` (log_rho, reward, value, discount, and truncated / next_value where
    given) and a fresh V_T; rewards and values the dtype's largest if ``huge``."""
    changed = dict(case)
    for k in ("log_rho", "reward", "value"):
        changed[k] = case[k].clone()
        changed[k][pos + 1:] = perturbation(changed[k][pos + 1:], g, huge and k != "log_rho")
    changed["discount"] = case["discount"].clone()  # rows after pos: the case's own discounts, shuffled
    after = changed["discount"][pos + 1:]  # (flags stay flags: a library with one scalar γ can express it)
    pool = case["discount"].reshape(-1)
    after[...] = pool[torch.randint(pool.numel(), after.shape, generator=g)]
    changed["bootstrap_value"] = perturbation(case["bootstrap_value"], g, huge)
    if case.get("truncated") is not None:
        changed["truncated"], changed["next_value"] = case["truncated"].clone(), case["next_value"].clone()
        changed["truncated"][pos + 1:] = torch.rand(changed["truncated"][pos + 1:].shape, generator=g) < 0.5
        changed["next_value"][pos + 1:] = noise_like(changed["next_value"][pos + 1:], g)
    return changed


def _cut(clause, huge, impl, pos, seed, **case):
    case = dict(case, discount=case["discount"].clone())
    case["discount"][pos] = 0  # every env's episode ends with transition pos
    changed = _changed_after(case, pos, torch.Generator().manual_seed(seed), huge)
    _assert_unchanged(clause, f"discount[{pos}] = 0, then rows after {pos} and V_T changed{OVERFLOW_NOTE * huge}",
                      _call(impl, changed), _call(impl, case), slice(0, pos + 1), case)


def check_cut(impl, **case):
    _cut("VTRACE-6", False, impl, **case)


def check_cut_overflow(impl, **case):
    _cut("VTRACE-16", True, impl, **case)


def check_lambda_zero(impl, **case):
    vs, _ = _call(impl, dict(case, lam=0.0))
    disc, r, v, boot = (case[k].double() for k in ("discount", "reward", "value", "bootstrap_value"))
    rho = torch.exp(case["log_rho"].double()).clamp(max=case["rho_bar"])
    next_v = torch.cat([v[1:], boot.unsqueeze(0)])  # [T, B]
    want = v + rho * (r + disc * next_v - v)
    tol = 8 * torch.finfo(case["value"].dtype).eps * (1 + v.abs().max().item() + boot.abs().max().item() + (
        rho.max().item() * (r.abs().max().item() + 2 * v.abs().max().item() + 2 * boot.abs().max().item())))
    assert_close("VTRACE-7", "vtrace with λ = 0 vs V_t + ρ_t·(r_t + γ_t·V_{t+1} − V_t)", vs, want, atol=tol,
                 **_inputs(dict(case, lam=0.0)))


def check_shape(impl, **case):
    value = case["value"]
    for name, out in zip(("vs", "pg_advantage"), _call(impl, case)):
        if out.shape != value.shape or out.dtype != value.dtype:
            fail("VTRACE-8", f"{name} has shape {tuple(out.shape)} dtype {out.dtype}, expected "
                             f"{tuple(value.shape)} {value.dtype}")


def _bad_input_case() -> dict:
    return dict(log_rho=torch.zeros(5, 3), discount=torch.full((5, 3), 0.99), reward=torch.zeros(5, 3),
                value=torch.zeros(5, 3), bootstrap_value=torch.zeros(3), rho_bar=1.0, c_bar=1.0, lam=1.0,
                pg_rho_bar=None)


# The collector layout: truncated and next_value
@st.composite
def truncation_cases(draw):
    """A case plus ``truncated`` [T, B] (at a drawn rate, every step at 1.0) and ``next_value`` [T, B]."""
    case = draw(cases())
    g = torch.Generator().manual_seed(draw(seeds))
    T, B = case["value"].shape
    scale = draw(st.sampled_from([0.0, 1.0, 100.0]))
    return dict(case, truncated=torch.rand(T, B, generator=g) < draw(st.sampled_from([0.1, 0.3, 1.0])),
                next_value=(scale * torch.randn(T, B, generator=g, dtype=torch.float64)).to(case["value"].dtype))


def _pinned_truncated(T: int, B=(3,), dtype=torch.float32, **params) -> dict:
    """Truncations at rows 0, T//2 and T−1 of env 0 and one in env 1, none terminal."""
    case = _pinned(T, B, dtype, **params)
    truncated = torch.zeros(T, *B, dtype=torch.bool)
    truncated[[0, T // 2, T - 1], 0] = True
    truncated[T // 3, 1] = True
    case["discount"][truncated] = 0.99
    g = torch.Generator().manual_seed(T + 1)
    return dict(case, truncated=truncated, next_value=torch.randn(T, *B, generator=g).to(dtype))


TRUNCATED_EXAMPLES = (_pinned_truncated(12), _pinned_truncated(6, (2,), torch.float64, lam=0.9, rho_bar=2.0,
                                                                   c_bar=0.5, scale=2.0))


def check_truncation_reference(impl, **case):
    vs, pg = _call(impl, case)
    want_vs, want_pg = _vs_reference(case)
    bound_vs, bound_pg = error_bounds(case)
    assert_within("VTRACE-17", "vs with truncated steps", vs, want_vs, bound_vs, **_inputs(case))
    assert_within("VTRACE-17", "pg_advantage with truncated steps", pg, want_pg, bound_pg, **_inputs(case))


def check_truncation_isolates(impl, pos, seed, **case):
    truncated = case["truncated"].clone()
    truncated[pos] = True  # every env's episode is cut after transition pos
    case = dict(case, truncated=truncated)
    changed = _changed_after(case, pos, torch.Generator().manual_seed(seed), False)
    _assert_unchanged("VTRACE-18", f"truncated[{pos}] set, then rows after {pos} and V_T changed",
                      _call(impl, changed), _call(impl, case), slice(0, pos + 1), case)


def check_truncated_terminal(impl, pos, seed, **case):
    discount, truncated = case["discount"].clone(), case["truncated"].clone()
    discount[pos], truncated[pos] = 0, True
    both = dict(case, discount=discount, truncated=truncated)
    cleared = dict(both, truncated=truncated & (discount != 0))
    _assert_unchanged("VTRACE-19", f"discount[{pos}] = 0 and truncated[{pos}] set (and wherever the case has both), "
                                   "vs truncated cleared there", _call(impl, both), _call(impl, cleared), slice(None),
                      both)


def check_next_value_ignored(impl, seed, **case):
    ignored = ~case["truncated"] | (case["discount"] == 0)  # [T, B]
    moved = case["next_value"].clone()
    moved[ignored] = noise_like(moved[ignored], torch.Generator().manual_seed(seed))
    _assert_unchanged("VTRACE-20", "next_value changed where truncated is not set or the discount is 0",
                      _call(impl, dict(case, next_value=moved)), _call(impl, case), slice(None), case)


def check_concatenation(impl, ends, seed, **case):
    discount = case["discount"].clone()
    discount[ends == TERMINAL] = 0
    truncated = ends == TRUNCATED
    batch = dict(case, discount=discount, truncated=truncated,
                 next_value=noise_like(case["value"], torch.Generator().manual_seed(seed)))
    nxt = torch.where(truncated, batch["next_value"],
                      torch.cat([case["value"][1:], case["bootstrap_value"].unsqueeze(0)]))  # [T, B]: V_{t+1}

    def piece(col, a, z):  # the trajectory alone: bootstrapped from what its last row bootstraps from in the batch
        return dict(case, **{k: batch[k][a:z + 1, col:col + 1] for k in ("log_rho", "discount", "reward", "value")},
                    bootstrap_value=nxt[z, col:col + 1])

    def bound(col, a, z):
        return tuple(2 * b for b in error_bounds(piece(col, a, z)))

    assert_concatenation("VTRACE-21", ("vs", "pg_advantage"), _call(impl, batch),
                         lambda *p: _call(impl, piece(*p)), (discount == 0) | truncated,
                         bound, **_inputs(batch))


def _bad_truncation_case() -> dict:
    return dict(_bad_input_case(), truncated=torch.zeros(5, 3, dtype=torch.bool), next_value=torch.zeros(5, 3))


def check_rejects_truncation(impl, problem, name):
    def call(case):
        return impl.vtrace(*(case[k] for k in ARGS), **{k: case[k] for k in PARAMS + TRUNCATION})

    rejects_truncation("VTRACE-22", "vtrace", call, _bad_truncation_case, problem, name)


BAD = BadInput("vtrace", "VTRACE-9", "VTRACE-10", "VTRACE-11", _bad_input_case, _call)


def check_scalar_hyperparameters(impl, **case):
    check_scalar_types("VTRACE-12", lambda **p: _call(impl, dict(case, **p)), {k: case[k] for k in PARAMS},
                       **_inputs(case))


def _huge_log_rho(dtype: torch.dtype, sign: float) -> dict:
    case = _pinned(4, (2,), dtype)
    return dict(case, log_rho=torch.full((4, 2), sign * 800.0, dtype=dtype))


def check_overflow(impl, dtype, sign, rho_bar, c_bar):
    finite = dict(_huge_log_rho(dtype, sign), rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=None)
    vs, pg = _call(impl, finite)
    if not bool(torch.isfinite(vs).all() and torch.isfinite(pg).all()):
        fail("VTRACE-13", f"log_rho = {sign * 800.0} with finite bars gives non-finite outputs vs={vs.tolist()}",
             **_inputs(finite))


def check_rejects_overflow(impl, which, dtype):
    unclipped = dict(_huge_log_rho(dtype, 1.0), **{which: math.inf})
    expect_rejection("VTRACE-15", lambda: _call(impl, unclipped), names=["'log_rho'"], mentions=[which],
                     what=f"vtrace with log_rho = 800 ({dtype}) and {which} = inf")


PROPERTIES = (
    Property("VTRACE-1", check_vs, cases(), EXAMPLES, INTERFACE),
    Property("VTRACE-2", check_pg, cases(), EXAMPLES, INTERFACE),
    Property("VTRACE-3", check_on_policy, cases(on_policy=True),
             (dict(_pinned(12, (4,)), log_rho=torch.zeros(12, 4)),
              dict(_pinned(7, (), torch.float64, lam=0.8), log_rho=torch.zeros(7, dtype=torch.float64))),
             INTERFACE),
    Property("VTRACE-4", check_clipping, st.builds(lambda c, s: dict(c, seed=s), cases(), seeds),
             (dict(_pinned(8, (2,), rho_bar=2.0, c_bar=0.5, pg_rho_bar=1.0), seed=0),), INTERFACE),
    Property("VTRACE-5", check_no_grad, cases(), EXAMPLES[:1], INTERFACE),
    Property("VTRACE-6", check_cut, with_position(cases(), "reward"), requires=INTERFACE),
    Property("VTRACE-7", check_lambda_zero, cases(lam=0.0), requires=INTERFACE),
    Property("VTRACE-8", check_shape, cases(), EXAMPLES + (_pinned(0),), INTERFACE),
    Property("VTRACE-9", BAD.rejects_shape,
             st.sampled_from([dict(name="log_rho", shape=(5, 2), dtype=torch.float32),
                              dict(name="discount", shape=(5, 3), dtype=torch.float64),
                              dict(name="reward", shape=(6, 3), dtype=torch.float32),
                              dict(name="bootstrap_value", shape=(5, 3), dtype=torch.float32),
                              dict(name="bootstrap_value", shape=(3,), dtype=torch.float64)]),
             requires=INTERFACE, max_examples=5),
    Property("VTRACE-10", BAD.rejects_param,
             st.sampled_from([dict(name="rho_bar", value=0.0), dict(name="c_bar", value=-1.0),
                              dict(name="pg_rho_bar", value=float("nan")), dict(name="lam", value=1.5),
                              dict(name="lam", value=-0.1)]),
             requires=INTERFACE, max_examples=5),
    Property("VTRACE-11", BAD.rejects_value,
             st.builds(lambda nb, t, b: dict(name=nb[0], bad=nb[1], t=t, b=b),
                       st.sampled_from([("reward", float("nan")), ("value", float("inf")),
                                        ("bootstrap_value", float("nan")), ("log_rho", float("nan")),
                                        ("log_rho", float("inf")), ("discount", 1.5), ("discount", -0.01),
                                        ("discount", float("nan"))]),
                       st.integers(0, 4), st.integers(0, 2)),
             (dict(name="discount", bad=1.01, t=4, b=2),), INTERFACE, max_examples=10),
    Property("VTRACE-12", check_scalar_hyperparameters, cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("VTRACE-13", check_overflow,
             st.fixed_dictionaries(dict(dtype=st.sampled_from([torch.float32, torch.float64]),
                                        sign=st.sampled_from([1.0, -1.0]), rho_bar=st.sampled_from([1.5, 1.0]),
                                        c_bar=st.sampled_from([0.9, 1.0]))),
             (dict(dtype=torch.float32, sign=1.0, rho_bar=1.5, c_bar=0.9),
              dict(dtype=torch.float64, sign=1.0, rho_bar=1.0, c_bar=1.0)), INTERFACE, max_examples=8),
    Property("VTRACE-15", check_rejects_overflow,
             st.fixed_dictionaries(dict(which=st.sampled_from(["rho_bar", "c_bar", "pg_rho_bar"]),
                                        dtype=st.sampled_from([torch.float32, torch.float64]))),
             requires=INTERFACE, max_examples=6),
    Property("VTRACE-14", defaults_check("VTRACE-14", "vtrace",
                                         lambda impl, case, kw: impl.vtrace(*(case[k] for k in ARGS), **kw),
                                         PARAMS, DEFAULTS),
             with_omitted(cases(), PARAMS), (dict(EXAMPLES[3], omitted=frozenset(PARAMS)),), INTERFACE,
             max_examples=10),
    Property("VTRACE-16", check_cut_overflow, with_position(cases(), "reward"), requires=INTERFACE),
    Property("VTRACE-17", check_truncation_reference, truncation_cases(), TRUNCATED_EXAMPLES, INTERFACE),
    Property("VTRACE-18", check_truncation_isolates, with_position(truncation_cases(), "reward"), requires=INTERFACE),
    Property("VTRACE-19", check_truncated_terminal, with_position(truncation_cases(), "reward"), requires=INTERFACE),
    Property("VTRACE-20", check_next_value_ignored, st.builds(lambda c, s: dict(c, seed=s), truncation_cases(), seeds),
             (dict(TRUNCATED_EXAMPLES[0], seed=0),), INTERFACE),
    Property("VTRACE-21", check_concatenation, with_ends(cases(), "reward"),
             (dict(_pinned(9, (3,)), ends=pinned_ends(9), seed=9),), INTERFACE),
    Property("VTRACE-22", check_rejects_truncation, TRUNCATION_ERRORS, requires=INTERFACE, max_examples=7),
)

CHANGES = (
    Change("1.0", "first versioned release"),
    Change("1.1", "the collector layout: optional truncated and next_value (a truncated step bootstraps from V(x'_t) "
                  "and ends its episode), and the concatenation clause",
           added=("VTRACE-17", "VTRACE-18", "VTRACE-19", "VTRACE-20", "VTRACE-21", "VTRACE-22")),
)

CONTRACT = Contract("vtrace", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE,
                    changes=CHANGES)
