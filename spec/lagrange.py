"""Contract ``lagrange``: the safe-RL constraint controllers of the PPOLagSem baselines.

Sources: the PPOLagSem design §2A (PPOLag, CPPOPID, PPOSaute, PPOSimmerPID), §5.5 step 4 (projected dual ascent),
§4.0.5 (the modulation scale M multiplies the λ learning rate; contract ``modulation``); OmniSafe 0.5.0
``omnisafe/common/lagrange.py``, ``pid_lagrange.py``, ``adapter/saute_adapter.py``,
``adapter/simmer_adapter.py``, ``common/simmer_agent.py`` for the exact updates the baselines run.
J_c is the mean episodic cost of the last rollout (a float or 0-d tensor), d the cost limit.

DualAscent (§5.5, §2A PPOLag)
    λ ← max(0, λ + η·M·(J_c − d))                                  M = 1 unless modulated

OmniSafeLagrange (OmniSafe ``Lagrange`` with ``lambda_optimizer="Adam"``)
    λ is trained by Adam (β = (0.9, 0.999), ε_adam = 1e-8) on the loss −λ·(J_c − d), i.e. gradient
    g = −(J_c − d), with learning rate η·M; after each step λ ← clamp(λ, 0, upper_bound).
        m ← m + (1 − β1)(g − m)      v ← β2·v + (1 − β2)·g²      k ← k + 1
        λ ← λ − (η·M / (1 − β1^k)) · m / (√v / √(1 − β2^k) + ε_adam)
    Defaults d = 25, λ_0 = 0.001, η = 0.035 (OmniSafe PPOLag.yaml). The first step moves λ by
    η·M·(J_c − d)/(|J_c − d| + ε_adam) ≈ ±η·M whatever |J_c − d|.

PIDLagrangian (CPPOPID; OmniSafe ``PIDLagrangian.pid_update``; §2A states the textbook PID, OmniSafe's is
the one the baseline runs, so the spec takes it)
    e      = J_c − d
    I      ← max(0, I + K_i·e);  I ← clip(I, 0, 1) if diff_norm                  I_0 = λ_0
    P      ← α_p·P + (1 − α_p)·e                                                 P_0 = 0
    C      ← α_d·C + (1 − α_d)·J_c                                               C_0 = 0
    D      = max(0, C − C_{k−D_delay})      C_j = 0 for j <= 0 (a deque of length d_delay seeded with 0)
    λ      = max(0, K_p·P + I + K_d·D);  λ ← min(λ, 1) if diff_norm;  λ ← min(λ, penalty_max) unless
             diff_norm or sum_norm
    Defaults K_p 0.1, K_i 0.01, K_d 0.01, d_delay 10, α_p = α_d = 0.95, sum_norm True, diff_norm False,
    penalty_max 100, λ_0 0.001, d 25 (OmniSafe CPPOPID.yaml). M does not apply (no learning rate).

SauteBudget (PPOSaute; OmniSafe ``SauteAdapter``), B parallel environments
    d̃      = d_s·(1 − γ_s^T)/((1 − γ_s)·T)       (safety_budget d_s, saute_gamma γ_s, max_ep_len T)
    reset:   z [B] ← 1;  observation [B, D] → [B, D+1] with z appended
    step:    z ← (z − c_t/d̃)/γ_s;   r'_t = r_t if z > 0 else unsafe_reward   (z ≤ 0: replaced)
             z ← 1 where done_t (auto-reset);   next observation [B, D] → [B, D+1] with z appended
    §2A writes b_{t+1} = b_t − c_t; the issue and OmniSafe normalize by d̃ and discount by γ_s: the spec
    takes the normalized form. As in OmniSafe, the observation returned on a done step is the reset one
    (z = 1). Defaults d_s 25, γ_s 0.999, T 1000, unsafe_reward −1 (OmniSafe PPOSaute.yaml).

SimmerPID (PPOSimmerPID; OmniSafe ``SimmerPIDAgent.get_greedy_action``)
    act(b [...], J̃_c) with b the current safety budget and J̃_c the episodic cost already converted by
    the same factor (1 − γ_s^T)/((1 − γ_s)·T) as d̃ (the adapter's job, not the controller's):
        ẽ_k   = ρ·ẽ_{k−1} + (1 − ρ)·(b − J̃_c)                 ẽ_0 = 0   (polyak-smoothed error)
        S_k   = Σ of the last 10 ẽ (fewer while warming up)
        u_k   = K_p·ẽ_k + K_i·S_k + K_d·(a_{k−1} − u_{k−1})     a_0 = u_0 = 0
        b'    = clip(b + clip(u_k, −1, 1), 1e-6, b_max);   a_k = b' − b
    Ambiguous in the seed (§2A only says "PID-regulated safety pressure that simmers the effective
    budget/penalty"): (1) what is controlled — the spec controls the *budget* (Simmer paper, OmniSafe),
    not λ; (2) the error's sign — budget minus cost, so overspending lowers the budget; (3) the "D" term
    is OmniSafe's clip residual a_{k−1} − u_{k−1} (back-calculation anti-windup), not a derivative of the
    error; with the default K_d = 0 it vanishes; (4) the integral is a 10-step window of smoothed errors,
    not the full history. The spec takes OmniSafe's reading on all four. Defaults K_p 5e-4, K_i 1e-5,
    K_d 0, ρ = 0.995, b_max 25 (OmniSafe PPOSimmerPID.yaml).

Conventions shared by the Lagrangian updates
--------------------------------------------
* ``update(jc, scale=1.0)`` returns λ as a 0-d tensor (and keeps it in ``lagrangian_multiplier``);
  ``scale`` is the modulation M, a positive float or a 0-d tensor (fast twins take it on the device).
* A non-finite J_c is a skipped update, not an error (reading it would need a host sync on the GPU):
  λ and every internal state stay as they were, and the 0-d counter ``skipped`` increments.
* dtype: the reference keeps float64 state; fast twins keep float32 state on J_c's device and never
  synchronize with the host (no ``.item()``, ``float()`` or branching on tensor values; checked by
  tests/unit/test_safe_control_device.py under ``spec.core.no_host_sync``, a guard that fails on any
  tensor→host conversion).
* Bad configuration is rejected at construction naming the argument: negative cost_limit / learning
  rate / initial λ, non-positive scale, gains < 0, d_delay < 1, EMA alphas outside [0, 1],
  safety_budget <= 0, saute_gamma outside (0, 1), max_ep_len < 1, polyak outside [0, 1].
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.lagrange import (
    _INF,
    ADAM_EPS,
    DUAL_DEFAULTS,
    LAGRANGE_DEFAULTS,
    PID_DEFAULTS,
    SAUTE_DEFAULTS,
    SIMMER_BUDGET_MIN,
    SIMMER_DEFAULTS,
    saute_budget,
)
from rlspec.reference import lagrange as reference  # the oracle
from rlspec.spec.core import Contract, Property, assert_close, by_category, expect_rejection, fail
from rlspec.spec.power import same_with_defaults
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "LAG-1": "λ >= 0 after every update (DualAscent, OmniSafeLagrange, PIDLagrangian)",
    "LAG-2": "plain ascent: λ rises while J_c > d and falls (or stays at 0) while J_c < d",
    "LAG-3": "plain ascent follows λ ← max(0, λ + η·M·(J_c − d)) (float64 closed form)",
    "LAG-4": "M scales the step (DualAscent, OmniSafeLagrange): unprojected Δλ(M) = M·Δλ(1); "
             "scale=1 reproduces the unmodulated update bit for bit",
    "LAG-5": "OmniSafeLagrange is Adam on −λ·(J_c − d) then clamp: first step closed form, sequence vs the "
             "float64 reference",
    "LAG-6": "PIDLagrangian follows OmniSafe's pid_update: first step closed form, sequence vs the float64 "
             "reference",
    "LAG-7": "a non-finite J_c skips the update: λ and later updates unchanged, 'skipped' counts it",
    "LAG-8": "bad configuration (negative cost_limit or learning rate, ...) is rejected naming the argument",
    "LAG-9": "Sauté: z ← (z − c/d̃)/γ_s with d̃ = d_s(1−γ_s^T)/((1−γ_s)T), z = 1 at reset and after done, "
             "observation augmented with z",
    "LAG-10": "Sauté: the reward is replaced by unsafe_reward exactly where the updated z <= 0",
    "LAG-11": "SimmerPID follows OmniSafe's budget rule (vs float64 reference); budget in [1e-6, b_max], "
              "|Δb| <= 1",
    "LAG-12": "a 0-d tensor scale M that is not finite and > 0 skips the update like a non-finite J_c (λ unchanged, skipped counts it); λ never moves against J_c − d",
    "LAG-13": "Sauté: a non-finite cost is rejected naming 'cost'; z is unchanged (later steps as if the call never happened)",
    "LAG-14": "state is detached: updates with J_c or M that require grad leave no autograd graph in λ or any state tensor",
    "LAG-15": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "LAG-16": "documented defaults: constructing any controller with its keyword arguments omitted equals passing "
              "the documented values (DUAL_, LAGRANGE_, PID_, SAUTE_, SIMMER_DEFAULTS), bit for bit over a run",
    "LAG-17": "before any update λ is its documented start (DualAscent lambda_init, OmniSafeLagrange "
              "lagrangian_multiplier_init, PIDLagrangian 0) and skipped is 0",
    "LAG-18": "bad calls are rejected naming the argument: a J_c that is not a real number or a 0-d tensor, a number "
              "scale that is not finite and > 0 (DualAscent, OmniSafeLagrange); SauteBudget.reset/step tensors whose "
              "batch is not num_envs",
    "LAG-19": "Sauté at the boundary: a cost that spends exactly the remaining budget (z = 0 exactly) gives "
              "unsafe_reward; SimmerPID moves the budget by at most 1 per step also when its raw PID term exceeds 1",
    "LAG-20": "returned λ are copies: writing into the λ an update returned changes neither λ nor later updates",
}

CATEGORIES = by_category(
    maths=("LAG-1", "LAG-2", "LAG-3", "LAG-4", "LAG-5", "LAG-6", "LAG-9", "LAG-10", "LAG-11", "LAG-14", "LAG-16",
           "LAG-17", "LAG-19"),
    robustness=("LAG-7", "LAG-12", "LAG-15", "LAG-20"),
    validation=("LAG-8", "LAG-13", "LAG-18"),
)
RATIONALE = {
    "LAG-7": "The literal update λ ← max(0, λ + η(J_c − d)) with a NaN cost gives max(0, NaN), which is NaN or "
             "0 depending on the argument order of max, and an inf cost drives λ to inf for good. The kit asks "
             "that a non-finite J_c skip the update and be counted, because one diverged episode's cost must "
             "not end the constraint for the rest of the run.",
    "LAG-12": "The literal update multiplies the step by M; a scale that is NaN, inf, zero or negative (a "
              "modulation computed from diverged statistics) would make λ NaN, frozen or move it against the "
              "constraint. The kit asks such a scale to skip the update like a non-finite cost, so λ never "
              "moves the wrong way.",
    "LAG-20": "The update formula says nothing about aliasing, so returning the state tensor itself gives every"
              " value right. The kit asks for a copy because a caller that scales the returned λ in place (as a"
              " penalty coefficient) would otherwise rewrite the controller's state silently.",
    "LAG-15": SCALAR_RATIONALE,
}

INTERFACE = ("DualAscent", "OmniSafeLagrange", "PIDLagrangian", "SauteBudget", "SimmerPID")
"""
DualAscent(cost_limit=25.0, lr=0.035, lambda_init=0.0)                  .update(jc, scale=1.0) -> λ
OmniSafeLagrange(cost_limit=25.0, lagrangian_multiplier_init=0.001, lambda_lr=0.035,
                 lagrangian_upper_bound=None)                            .update(jc, scale=1.0) -> λ
PIDLagrangian(pid_kp=0.1, pid_ki=0.01, pid_kd=0.01, pid_d_delay=10, pid_delta_p_ema_alpha=0.95,
              pid_delta_d_ema_alpha=0.95, sum_norm=True, diff_norm=False, penalty_max=100.0,
              lagrangian_multiplier_init=0.001, cost_limit=25.0)       .update(jc) -> λ
    each with .lagrangian_multiplier (0-d tensor) and .skipped (0-d integer tensor)
SauteBudget(num_envs, safety_budget=25.0, saute_gamma=0.999, max_ep_len=1000, unsafe_reward=-1.0)
    .reset(obs [B, D]) -> [B, D+1];  .step(next_obs [B, D], reward [B], cost [B], done [B])
    -> (obs [B, D+1], reward [B]);  .z [B]
SimmerPID(kp=0.0005, ki=0.00001, kd=0.0, polyak=0.995, budget_bound=25.0)
    .act(safety_budget [...], ep_cost) -> next safety_budget [...]
"""

# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
COST_KINDS = ("above", "below", "mixed", "zero", "near_limit", "large")


def cost_series(seed: int, length: int, kind: str, cost_limit: float) -> list[float]:
    """J_c [length] around the limit from an explicit generator (mean episodic costs are >= 0)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(length, generator=g, dtype=torch.float64)
    x = {
        "above": cost_limit + 1.0 + 10.0 * z.abs(),
        "below": (cost_limit - 1.0 - 10.0 * z.abs()).clamp(min=0.0) if cost_limit > 1.0 else torch.zeros(length),
        "mixed": (cost_limit + 15.0 * z).clamp(min=0.0),
        "zero": torch.zeros(length, dtype=torch.float64),
        "near_limit": cost_limit + 1e-3 * z,
        "large": cost_limit + 1e4 * z.abs(),
    }[kind]
    return [float(v) for v in x]


dual_configs = st.fixed_dictionaries(dict(
    cost_limit=st.sampled_from([25.0, 0.0, 1.5]),
    lr=st.sampled_from([0.035, 0.5, 1e-3]),
    lambda_init=st.sampled_from([0.001, 0.0, 2.0]),
))
series = st.builds(lambda s, n, k: (s, n, k), seeds, st.integers(1, 12), st.sampled_from(COST_KINDS))
scales = st.sampled_from([1.0, 0.5, 0.9, 1e-3, 2 / 3])


@st.composite
def dual_cases(draw):
    config = draw(dual_configs)
    s, n, k = draw(series)
    return dict(config=config, costs=cost_series(s, n, k, config["cost_limit"]),
                scales=[draw(scales) for _ in range(n)])


@st.composite
def omnisafe_cases(draw):
    config = dict(cost_limit=draw(st.sampled_from([25.0, 0.0, 1.5])),
                  lagrangian_multiplier_init=draw(st.sampled_from([0.001, 0.0, 2.0])),
                  lambda_lr=draw(st.sampled_from([0.035, 0.5, 1e-3])),
                  lagrangian_upper_bound=draw(st.sampled_from([None, None, 2.5])))
    s, n, k = draw(series)
    return dict(config=config, costs=cost_series(s, n, k, config["cost_limit"]),
                scales=[draw(scales) for _ in range(n)])


@st.composite
def pid_cases(draw):
    config = dict(PID_DEFAULTS)
    config.update(pid_kp=draw(st.sampled_from([0.1, 1.0, 0.0])), pid_ki=draw(st.sampled_from([0.01, 0.1])),
                  pid_kd=draw(st.sampled_from([0.01, 0.5])), pid_d_delay=draw(st.sampled_from([10, 1, 3])),
                  pid_delta_p_ema_alpha=draw(st.sampled_from([0.95, 0.0, 0.5])),
                  pid_delta_d_ema_alpha=draw(st.sampled_from([0.95, 0.5])),
                  sum_norm=draw(st.booleans()), diff_norm=draw(st.booleans()),
                  penalty_max=draw(st.sampled_from([100.0, 0.5])),
                  lagrangian_multiplier_init=draw(st.sampled_from([0.001, 0.0, 0.7])),
                  cost_limit=draw(st.sampled_from([25.0, 0.0, 1.5])))
    s, n, k = draw(series)
    return dict(config=config, costs=cost_series(s, n, k, config["cost_limit"]))


LAGRANGIANS = ("DualAscent", "OmniSafeLagrange", "PIDLagrangian")


def _build(impl, which: str, case: dict):
    return getattr(impl, which)(**case["config"])


def _lam(x) -> float:
    return float(torch.as_tensor(x).double())


def _run(obj, costs, scales=None):
    out = []
    for t, jc in enumerate(costs):
        out.append(_lam(obj.update(jc) if scales is None else obj.update(jc, scale=scales[t])))
    return out


def _tol(obj, magnitude: float) -> float:
    return _tol_dtype(torch.as_tensor(obj.lagrangian_multiplier).dtype, magnitude)


def _tol_dtype(dtype: torch.dtype, magnitude: float) -> float:
    """64 ulps of the implementation's state dtype at the update's magnitude."""
    return 64 * torch.finfo(dtype).eps * (1.0 + magnitude)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_nonnegative(impl, which, case):
    obj = _build(impl, which, case)
    lams = _run(obj, case["costs"], case.get("scales") if which != "PIDLagrangian" else None)
    for t, lam in enumerate(lams):
        if not lam >= 0.0:
            fail("LAG-1", f"{which}: λ = {lam!r} < 0 after update {t} (J_c = {case['costs'][t]!r})",
                 costs=case["costs"][: t + 1], **case["config"])


def check_direction(impl, config, costs, scales):
    obj = impl.DualAscent(**config)
    lam = _lam(obj.lagrangian_multiplier)
    for t, (jc, m) in enumerate(zip(costs, scales)):
        new = _lam(obj.update(jc, scale=m))
        d = config["cost_limit"]
        # strictly, unless the step is below the state's rounding (λ + tiny == λ in float32)
        visible = config["lr"] * m * abs(jc - d) > _tol(obj, lam) / 8
        rose, fell = (new > lam if visible else new >= lam), (new < lam if visible else new <= lam)
        if (jc > d and not rose) or (jc < d and not (fell or new == 0.0)):
            fail("LAG-2", f"λ went from {lam!r} to {new!r} with J_c = {jc!r} {'>' if jc > d else '<'} d = {d!r}",
                 step=t, scale=m, **config)
        lam = new


def check_plain_formula(impl, config, costs, scales):
    obj = impl.DualAscent(**config)
    lam = config["lambda_init"]
    for t, (jc, m) in enumerate(zip(costs, scales)):
        lam = max(0.0, lam + config["lr"] * m * (jc - config["cost_limit"]))
        got = obj.update(jc, scale=m)
        assert_close("LAG-3", f"λ after update {t}", _lam(got), lam, atol=_tol(obj, abs(lam) + abs(jc)),
                     rtol=_tol(obj, 0.0), jc=jc, scale=m, **config)


def check_scaled_step(impl, which, case):
    config, costs = case["config"], case["costs"]
    plain, ones = _build(impl, which, case), _build(impl, which, case)
    for t, jc in enumerate(costs):
        a, b = plain.update(jc), ones.update(jc, scale=1.0)
        if not torch.equal(torch.as_tensor(a), torch.as_tensor(b)):
            fail("LAG-4", f"{which}: update(jc, scale=1.0) = {_lam(b)!r}, update(jc) = {_lam(a)!r} at step {t}",
                 costs=costs, **config)
    # one more step from identical states with M and with 1: the unprojected steps scale by M
    for m in case["scales"]:
        one, mod = _build(impl, which, case), _build(impl, which, case)
        for jc in costs[:-1]:
            one.update(jc)
            mod.update(jc)
        before = _lam(one.lagrangian_multiplier)
        step1 = _lam(one.update(costs[-1], scale=1.0)) - before
        stepm = _lam(mod.update(costs[-1], scale=m)) - before
        upper = config.get("lagrangian_upper_bound") or _INF
        if before + step1 <= 0.0 or before + step1 >= upper:  # projected: the clamp decides, not M
            continue
        tol = _tol(one, abs(before) + abs(step1))
        if abs(stepm - m * step1) > tol:
            fail("LAG-4", f"{which}: step with M = {m!r} is {stepm!r}, expected M·{step1!r} = {m * step1!r} ± {tol:.3g}",
                 costs=costs, **config)
        break


def check_omnisafe(impl, config, costs, scales):
    obj, ref = impl.OmniSafeLagrange(**config), reference.OmniSafeLagrange(**config)
    d, lr, lam0 = config["cost_limit"], config["lambda_lr"], config["lagrangian_multiplier_init"]
    upper = config["lagrangian_upper_bound"] or _INF
    e = costs[0] - d
    first = min(max(lam0 + lr * scales[0] * e / (abs(e) + ADAM_EPS), 0.0), upper)
    got = _lam(obj.update(costs[0], scale=scales[0]))
    # float32 Adam: g/|g| is exact-ish, λ0 + step rounds at eps·(|λ0| + lr)
    assert_close("LAG-5", "λ after the first Adam step", got, first, atol=_tol(obj, lam0 + lr), rtol=0.0,
                 jc=costs[0], **config)
    ref.update(costs[0], scale=scales[0])
    eps = torch.finfo(torch.as_tensor(obj.lagrangian_multiplier).dtype).eps
    # rounding J_c and d to the state dtype perturbs g = J_c − d by a relative δ <= 4·eps·(|J_c|+|d|)/|g|;
    # Adam's m̂/(√v̂+ε) is scale-free, so each later step moves by up to lr·M·2·max δ (large when J_c ≈ d)
    delta = min(2.0, 4 * eps * (abs(costs[0]) + abs(d)) / (abs(e) + ADAM_EPS))
    drift = 0.0
    for t in range(1, len(costs)):
        got, want = _lam(obj.update(costs[t], scale=scales[t])), _lam(ref.update(costs[t], scale=scales[t]))
        delta = max(delta, min(2.0, 4 * eps * (abs(costs[t]) + abs(d)) / (abs(costs[t] - d) + ADAM_EPS)))
        drift += lr * abs(scales[t]) * 2 * delta
        # otherwise Adam's m/√v has condition ~1; per step error <= eps·(|λ| + lr·M·4)
        assert_close("LAG-5", f"λ after Adam step {t} vs float64 reference", got, want,
                     atol=_tol(obj, abs(want) + 4 * lr) * (t + 1) + drift, rtol=0.0, costs=costs[: t + 1],
                     **config)


def check_pid(impl, config, costs):
    obj, ref = impl.PIDLagrangian(**config), reference.PIDLagrangian(**config)
    c = config
    e = costs[0] - c["cost_limit"]
    i = max(0.0, c["lagrangian_multiplier_init"] + c["pid_ki"] * e)
    i = min(i, 1.0) if c["diff_norm"] else i
    p = (1 - c["pid_delta_p_ema_alpha"]) * e
    dd = max(0.0, (1 - c["pid_delta_d_ema_alpha"]) * costs[0])
    lam = max(0.0, c["pid_kp"] * p + i + c["pid_kd"] * dd)
    lam = min(lam, 1.0) if c["diff_norm"] else lam
    lam = min(lam, c["penalty_max"]) if not (c["diff_norm"] or c["sum_norm"]) else lam
    scale = 1.0 + abs(costs[0]) + c["lagrangian_multiplier_init"]
    assert_close("LAG-6", "λ after the first PID update", _lam(obj.update(costs[0])), lam,
                 atol=_tol(obj, scale), rtol=0.0, jc=costs[0], **config)
    ref.update(costs[0])
    for t in range(1, len(costs)):
        got, want = _lam(obj.update(costs[t])), _lam(ref.update(costs[t]))
        scale = 1.0 + max(abs(x) for x in costs[: t + 1]) * (1 + c["pid_kp"] + c["pid_ki"] * (t + 1) + c["pid_kd"])
        assert_close("LAG-6", f"λ after PID update {t} vs float64 reference", got, want,
                     atol=_tol(obj, scale) * (t + 1), rtol=0.0, costs=costs[: t + 1], **config)


def check_skip(impl, which, case, bad, position):
    costs = case["costs"]
    position %= len(costs) + 1
    dirty = costs[:position] + [bad] + costs[position:]
    clean_obj, dirty_obj = _build(impl, which, case), _build(impl, which, case)
    clean = _run(clean_obj, costs)
    got = _run(dirty_obj, dirty)
    expect = clean[:position] + [clean[position - 1] if position else _lam(_build(impl, which, case).lagrangian_multiplier)] \
        + clean[position:]
    if got != expect:
        fail("LAG-7", f"{which}: λ sequence {got!r} with J_c = {bad!r} inserted at {position}, expected {expect!r} "
                      "(the non-finite update skipped, nothing else changed)", costs=dirty, **case["config"])
    if int(dirty_obj.skipped) != 1 or int(clean_obj.skipped) != 0:
        fail("LAG-7", f"{which}: skipped = {int(dirty_obj.skipped)} after one non-finite J_c "
                      f"(and {int(clean_obj.skipped)} without), expected 1 (and 0)", costs=dirty)


BAD_CONFIGS = (
    ("DualAscent", "cost_limit", -1.0), ("DualAscent", "lr", -0.01), ("DualAscent", "lr", 0.0),
    ("DualAscent", "lambda_init", -0.5),
    ("OmniSafeLagrange", "cost_limit", -25.0), ("OmniSafeLagrange", "lambda_lr", -0.035),
    ("OmniSafeLagrange", "lagrangian_multiplier_init", -0.001),
    ("PIDLagrangian", "cost_limit", -5.0), ("PIDLagrangian", "pid_ki", -0.01), ("PIDLagrangian", "pid_d_delay", 0),
    ("PIDLagrangian", "pid_delta_p_ema_alpha", 1.5),
    ("SauteBudget", "safety_budget", -25.0), ("SauteBudget", "saute_gamma", 1.0), ("SauteBudget", "max_ep_len", 0),
    ("SimmerPID", "polyak", 1.2), ("SimmerPID", "kp", -1.0),
)
_ARGS = {"SauteBudget": dict(num_envs=2)}


def check_rejects_config(impl, which, name, value):
    kwargs = dict(_ARGS.get(which, {}), **{name: value})
    expect_rejection("LAG-8", lambda: getattr(impl, which)(**kwargs), names=[name], mentions=[repr(value)],
                     what=f"{which}({name}={value!r})")
    if which in ("DualAscent", "OmniSafeLagrange"):
        obj = getattr(impl, which)()
        expect_rejection("LAG-8", lambda: obj.update(30.0, scale=-0.5), names=["scale"], mentions=["-0.5"],
                         what=f"{which}.update(scale=-0.5)")


@st.composite
def saute_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    config = dict(safety_budget=draw(st.sampled_from([25.0, 0.5, 2.0])),
                  saute_gamma=draw(st.sampled_from([0.999, 0.9, 0.5])),
                  max_ep_len=draw(st.sampled_from([1000, 5, 1])),
                  unsafe_reward=draw(st.sampled_from([-1.0, 0.0, -0.2])))
    b, d, t = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 12))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    return dict(config=config, num_envs=b,
                obs=torch.randn(t + 1, b, d, generator=g).to(dtype),  # [T+1, B, D]
                reward=torch.randn(t, b, generator=g).to(dtype),  # [T, B]
                cost=(torch.rand(t, b, generator=g) < 0.4).to(dtype) * torch.rand(t, b, generator=g).to(dtype) * 2,
                done=torch.rand(t, b, generator=g) < 0.15)  # [T, B]


def _saute_truth(config, num_envs, obs, reward, cost, done):
    """float64 z after each step [T, B], rewards [T, B], observations [T+1, B, D+1] from the closed form."""
    dt = saute_budget(config["safety_budget"], config["saute_gamma"], config["max_ep_len"])
    z = torch.ones(num_envs, dtype=torch.float64)
    zs, rs, os_ = [], [], [torch.cat([obs[0].double(), z[:, None]], -1)]
    for t in range(reward.shape[0]):
        z = (z - cost[t].double() / dt) / config["saute_gamma"]
        unsafe = torch.full_like(reward[t], config["unsafe_reward"]).double()  # in the reward's dtype
        rs.append(torch.where(z > 0, reward[t].double(), unsafe))
        zs.append(z)
        z = torch.where(done[t], torch.ones_like(z), z)
        os_.append(torch.cat([obs[t + 1].double(), z[:, None]], -1))
    return torch.stack(zs), torch.stack(rs), torch.stack(os_)


def _saute_run(impl, config, num_envs, obs, reward, cost, done):
    sb = impl.SauteBudget(num_envs, **config)
    outs, rewards = [sb.reset(obs[0])], []
    for t in range(reward.shape[0]):
        o, r = sb.step(obs[t + 1], reward[t], cost[t], done[t])
        outs.append(o)
        rewards.append(r)
    eps = max(torch.finfo(obs.dtype).eps, torch.finfo(sb.z.dtype).eps)  # z may be kept in float32
    return torch.stack(outs), torch.stack(rewards), eps


def check_saute_budget(impl, config, num_envs, obs, reward, cost, done):
    _, _, want = _saute_truth(config, num_envs, obs, reward, cost, done)
    got, _, eps = _saute_run(impl, config, num_envs, obs, reward, cost, done)
    t = reward.shape[0]
    zmax = float(want[..., -1].abs().max())
    assert_close("LAG-9", "augmented observations [T+1, B, D+1] (last column z)", got.double(), want,
                 atol=8 * eps * (t + 1) * (1 + zmax), rtol=0.0, cost=cost, done=done, **config)


def check_saute_reward(impl, config, num_envs, obs, reward, cost, done):
    z, want, _ = _saute_truth(config, num_envs, obs, reward, cost, done)
    _, got, eps = _saute_run(impl, config, num_envs, obs, reward, cost, done)
    decided = z.abs() > 8 * eps * (reward.shape[0] + 1) * (1 + z.abs())  # z clearly on one side of 0
    bad = decided & (got.double() != want)
    if bool(bad.any()):
        t, b = (int(i) for i in bad.nonzero()[0])
        fail("LAG-10", f"reward at step {t}, env {b} = {float(got[t, b])!r} with z = {float(z[t, b])!r}, expected "
                       f"{float(want[t, b])!r} (unsafe_reward where z <= 0)", reward=reward, cost=cost, **config)


@st.composite
def simmer_cases(draw):
    config = dict(kp=draw(st.sampled_from([0.0005, 0.05, 0.5])), ki=draw(st.sampled_from([1e-5, 0.01])),
                  kd=draw(st.sampled_from([0.0, 0.1])), polyak=draw(st.sampled_from([0.995, 0.0, 0.5])),
                  budget_bound=draw(st.sampled_from([25.0, 3.0])))
    s, n, k = draw(series)
    budget = draw(st.sampled_from([1.0, 25.0, 0.1]))
    return dict(config=config, budget0=min(budget, config["budget_bound"]),
                costs=cost_series(s, n + 3, k, budget), num_envs=draw(st.integers(1, 3)))


def check_simmer(impl, config, budget0, costs, num_envs):
    obj, ref = impl.SimmerPID(**config), reference.SimmerPID(**config)
    b = b_ref = torch.full((num_envs, 1), budget0, dtype=torch.float32)
    for t, jc in enumerate(costs):
        new, new_ref = obj.act(b, torch.tensor(jc, dtype=torch.float32)), ref.act(b_ref, jc)
        lo, hi = float(new.min()), float(new.max())
        if not (SIMMER_BUDGET_MIN * (1 - 1e-6) <= lo and hi <= config["budget_bound"] * (1 + 1e-6)):
            fail("LAG-11", f"budget {new.tolist()!r} outside [1e-6, {config['budget_bound']!r}] at step {t}",
                 costs=costs[: t + 1], **config)
        if float((new.double() - b.double()).abs().max()) > 1 + 1e-5:
            fail("LAG-11", f"budget moved from {b.tolist()!r} to {new.tolist()!r} (|Δ| > 1) at step {t}",
                 costs=costs[: t + 1], **config)
        scale = 1 + max(abs(x) for x in costs[: t + 1]) + config["budget_bound"]
        assert_close("LAG-11", f"budget after step {t} vs float64 reference", new.double(), new_ref.double(),
                     atol=_tol_dtype(new.dtype, scale) * (t + 1), rtol=0.0, costs=costs[: t + 1], **config)
        b, b_ref = new, new_ref


_which = st.sampled_from(LAGRANGIANS)


@st.composite
def any_lagrangian(draw):
    which = draw(_which)
    case = {"DualAscent": dual_cases, "OmniSafeLagrange": omnisafe_cases, "PIDLagrangian": pid_cases}[which]()
    return dict(which=which, case=draw(case))


_scaled = st.sampled_from(("DualAscent", "OmniSafeLagrange")).flatmap(
    lambda w: (dual_cases() if w == "DualAscent" else omnisafe_cases()).map(lambda c: dict(which=w, case=c)))
PINNED_DUAL = dict(config=dict(cost_limit=25.0, lr=0.035, lambda_init=0.001), costs=[30.0, 25.0, 0.0, 0.0, 40.0],
                   scales=[1.0, 0.5, 1.0, 1.0, 0.25])  # at the limit, driven to 0, back up
PINNED_OMNI = dict(config=LAGRANGE_DEFAULTS, costs=[30.0, 20.0, 25.0, 0.0, 0.0, 0.0], scales=[1.0] * 6)
# decisive edge cases: J_c within Adam's eps of the limit (the eps term decides the step's size and sign), and a
# crossing from far above to below the limit (bias corrections, the clamp at 0)
OMNI_EXAMPLES = (PINNED_OMNI,
                 dict(config=LAGRANGE_DEFAULTS, costs=[25.0 + 1e-9, 25.0 - 1e-9, 25.0 + 1e-9], scales=[1.0] * 3),
                 dict(config=dict(LAGRANGE_DEFAULTS, lambda_lr=0.5), costs=[80.0, 80.0, 0.0, 0.0, 0.0, 0.0],
                      scales=[1.0] * 6))
# PIDLagrangian's decisive cases: the defaults crossing the limit; diff_norm with the integral pushed past 1 and
# then costs below the limit (kp·Δp < 0, so the clamp of I at 1 shows in λ); diff_norm with λ above 1 before its
# clamp; neither norm, with the penalty cap reached; the d-term's delay line (d_delay 3, costs rising)
PID_EXAMPLES = (
    dict(config=PID_DEFAULTS, costs=[30.0, 40.0, 10.0, 0.0] * 3),
    dict(config=dict(PID_DEFAULTS, pid_kp=1.0, pid_ki=0.1, diff_norm=True, sum_norm=False,
                     pid_delta_p_ema_alpha=0.0), costs=[50.0, 50.0, 20.0, 20.0]),
    dict(config=dict(PID_DEFAULTS, pid_kp=1.0, pid_ki=0.1, diff_norm=True, sum_norm=False), costs=[60.0] * 4),
    dict(config=dict(PID_DEFAULTS, pid_kp=1.0, pid_ki=0.1, sum_norm=False, penalty_max=0.5), costs=[60.0] * 4),
    dict(config=dict(PID_DEFAULTS, pid_kd=0.5, pid_d_delay=3, pid_delta_d_ema_alpha=0.5),
         costs=[0.0, 10.0, 20.0, 40.0, 80.0, 0.0]),
)
# SimmerPID's decisive cases: a raw PID term beyond ±1 (the clamp of the step) both ways, polyak 0
SIMMER_EXAMPLES = (
    dict(config=dict(kp=0.5, ki=0.01, kd=0.1, polyak=0.0, budget_bound=25.0), budget0=10.0,
         costs=[0.0, 30.0, 0.0, 30.0, 10.0, 10.0], num_envs=2),
)

def check_bad_tensor_scale(impl, which, case, bad, position):
    costs, scales = case["costs"], case["scales"]
    position %= len(costs)
    clean_obj, dirty_obj = _build(impl, which, case), _build(impl, which, case)
    clean = _run(clean_obj, costs[:position], scales[:position])
    got = _run(dirty_obj, costs[:position], scales[:position])
    lam = _lam(dirty_obj.update(costs[position], scale=torch.tensor(bad)))
    if lam != (got[-1] if got else _lam(_build(impl, which, case).lagrangian_multiplier)):
        fail("LAG-12", f"{which}: update(J_c = {costs[position]!r}, scale=tensor({bad!r})) moved λ to {lam!r} "
                       f"(from {got[-1] if got else 'the initial λ'}), expected the update skipped", **case["config"])
    if int(dirty_obj.skipped) != 1:
        fail("LAG-12", f"{which}: skipped = {int(dirty_obj.skipped)} after one update with scale=tensor({bad!r}), "
                       "expected 1", **case["config"])
    rest = _run(dirty_obj, costs[position:], scales[position:])
    want = _run(clean_obj, costs[position:], scales[position:])
    if rest != want or clean != got:
        fail("LAG-12", f"{which}: the λ sequence after a skipped update differs from the sequence without it: "
                       f"{rest!r} vs {want!r}", **case["config"])


def check_saute_rejects_cost(impl, config, num_envs, obs, reward, cost, done, bad, position):
    t = reward.shape[0]
    position %= t
    env = position % num_envs
    sb, clean = impl.SauteBudget(num_envs, **config), impl.SauteBudget(num_envs, **config)
    sb.reset(obs[0]), clean.reset(obs[0])
    for s in range(position):
        sb.step(obs[s + 1], reward[s], cost[s], done[s]), clean.step(obs[s + 1], reward[s], cost[s], done[s])
    dirty = cost[position].clone()
    dirty[env] = bad
    expect_rejection("LAG-13", lambda: sb.step(obs[position + 1], reward[position], dirty, done[position]),
                     names=["'cost'"], mentions=[f"[{env}]"], what=f"SauteBudget.step with cost[{env}] = {bad}")
    for s in range(position, t):
        got, want = sb.step(obs[s + 1], reward[s], cost[s], done[s]), clean.step(obs[s + 1], reward[s], cost[s], done[s])
        if not (torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])):
            fail("LAG-13", f"step {s} after the rejected step differs from the run without it", cost=cost, **config)


def check_detached(impl, which, case):
    obj = _build(impl, which, case)
    for t, jc in enumerate(case["costs"]):
        jc = torch.tensor(jc, dtype=torch.float64, requires_grad=True)
        if which == "PIDLagrangian":
            obj.update(jc)
        else:
            obj.update(jc, scale=torch.tensor(case["scales"][t], dtype=torch.float64, requires_grad=True))
    attached = [k for k, v in vars(obj).items() if isinstance(v, torch.Tensor) and (v.requires_grad or v.grad_fn)]
    if attached:
        fail("LAG-14", f"{which}: state {attached} keeps an autograd graph after updates with inputs that require "
                       "grad (memory grows every update)", **case["config"])


def check_scalar_hyperparameters(impl, which, case):
    config = {k: v for k, v in case["config"].items() if v is not None}

    def run(**config):
        return _run(getattr(impl, which)(**config), case["costs"], None if which == "PIDLagrangian" else case["scales"])

    check_scalar_types("LAG-15", run, config, **config)


ALL_DEFAULTS = {"DualAscent": DUAL_DEFAULTS, "OmniSafeLagrange": LAGRANGE_DEFAULTS, "PIDLagrangian": PID_DEFAULTS,
                "SauteBudget": SAUTE_DEFAULTS, "SimmerPID": SIMMER_DEFAULTS}


def _drive(obj, which, costs):
    """What a run shows: λ after each update, or Sauté's (obs, reward) and Simmer's budgets."""
    if which in LAGRANGIANS:
        return [obj.update(jc).clone() for jc in costs]
    if which == "SauteBudget":
        obs = torch.zeros(2, 3, dtype=torch.float64)
        out = [obj.reset(obs)]
        for jc in costs:
            out += list(obj.step(obs, torch.ones(2, dtype=torch.float64), torch.full((2,), jc / 10, dtype=torch.float64),
                                 torch.zeros(2, dtype=torch.bool)))
        return out
    b = torch.full((2, 1), 5.0, dtype=torch.float64)
    return [b := obj.act(b, jc) for jc in costs]


def check_defaults(impl, which, omitted, costs):
    defaults = ALL_DEFAULTS[which]
    omitted = sorted(omitted & set(defaults))
    args = (2,) if which == "SauteBudget" else ()

    def run(extra):
        return _drive(getattr(impl, which)(*args, **extra), which, costs)

    same_with_defaults("LAG-16", f"{which}({', '.join(omitted)} omitted)", run,
                       {k: defaults[k] for k in omitted}, costs=costs)


def check_start(impl, which, case):
    obj = _build(impl, which, case)
    start = {"DualAscent": case["config"].get("lambda_init"), "PIDLagrangian": 0.0,
             "OmniSafeLagrange": case["config"].get("lagrangian_multiplier_init")}[which]
    start = float(torch.tensor(start, dtype=torch.as_tensor(obj.lagrangian_multiplier).dtype))  # in the state's dtype
    if _lam(obj.lagrangian_multiplier) != start or int(obj.skipped) != 0:
        fail("LAG-17", f"{which}: before any update λ = {_lam(obj.lagrangian_multiplier)!r}, skipped = "
                       f"{int(obj.skipped)}; expected λ = {start!r}, skipped = 0", **case["config"])


def check_copies(impl, which, case):
    obj, twin = _build(impl, which, case), _build(impl, which, case)
    for t, jc in enumerate([*case["costs"], math.nan]):  # a skipped update (NaN J_c) returns λ too
        got = obj.update(jc)
        want = twin.update(jc)
        if isinstance(got, torch.Tensor):
            got.fill_(123.0)  # the caller writes into what it got back
        now, expected = _lam(obj.lagrangian_multiplier), _lam(want)
        if now != expected and not (math.isnan(now) and math.isnan(expected)):  # a NaN λ is LAG-7's business
            fail("LAG-20", f"{which}: writing into the λ returned by update {t} changed the controller's λ to "
                           f"{_lam(obj.lagrangian_multiplier)!r} (expected {_lam(want)!r}): return a copy",
                 **case["config"])


def check_rejects_calls(impl, which, bad):
    if which == "SauteBudget":
        sb = impl.SauteBudget(3)
        good = torch.zeros(3, 2)
        expect_rejection("LAG-18", lambda: sb.reset(torch.zeros(2, 2)), names=["obs"], mentions=["3"],
                         what="SauteBudget(3).reset with obs of batch 2")
        sb.reset(good)
        for name in ("next_obs", "reward", "cost", "done"):
            args = dict(next_obs=good, reward=torch.zeros(3), cost=torch.zeros(3), done=torch.zeros(3, dtype=torch.bool))
            args[name] = args[name][:2]
            expect_rejection("LAG-18", lambda: sb.step(**args), names=[name], mentions=["3"],
                             what=f"SauteBudget(3).step with {name} of batch 2")
        return
    obj = getattr(impl, which)()
    for jc in (torch.ones(2), True, "30"):
        expect_rejection("LAG-18", lambda: obj.update(jc), names=["jc"], what=f"{which}.update({jc!r})")
    expect_rejection("LAG-18", lambda: obj.update(30.0, scale=bad), names=["scale"],
                     what=f"{which}.update(30.0, scale={bad!r})")


def check_boundaries(impl):
    sb = impl.SauteBudget(2, safety_budget=2.0, saute_gamma=0.5, max_ep_len=1, unsafe_reward=-1.0)  # d̃ = 2 exactly
    sb.reset(torch.zeros(2, 1, dtype=torch.float64))
    _, reward = sb.step(torch.zeros(2, 1, dtype=torch.float64), torch.full((2,), 3.0, dtype=torch.float64),
                        torch.tensor([2.0, 1.0], dtype=torch.float64), torch.zeros(2, dtype=torch.bool))
    if reward.tolist() != [-1.0, 3.0]:
        fail("LAG-19", f"SauteBudget rewards {reward.tolist()} for costs [2.0, 1.0] with d̃ = 2 (z = 0 and 0.5 after "
                       "the step), expected [-1.0, 3.0]: z = 0 is unsafe")
    simmer = impl.SimmerPID(kp=0.5, ki=1e-5, kd=0.0, polyak=0.0, budget_bound=25.0)
    b = torch.full((2, 1), 10.0, dtype=torch.float64)
    for jc in (0.0, 0.0, 20.0):
        new = simmer.act(b, jc)
        if float((new.double() - b.double()).abs().max()) > 1 + 1e-9:
            fail("LAG-19", f"SimmerPID moved the budget from {b.flatten().tolist()} to {new.flatten().tolist()} "
                           f"(ep_cost {jc}): more than 1 per step")
        b = new


PROPERTIES = (
    Property("LAG-1", check_nonnegative, any_lagrangian(),
             (dict(which="DualAscent", case=PINNED_DUAL), dict(which="OmniSafeLagrange", case=PINNED_OMNI)),
             INTERFACE[:3]),
    Property("LAG-2", check_direction, dual_cases(), (PINNED_DUAL,), ("DualAscent",)),
    Property("LAG-3", check_plain_formula, dual_cases(), (PINNED_DUAL,), ("DualAscent",)),
    Property("LAG-4", check_scaled_step, _scaled, (dict(which="DualAscent", case=PINNED_DUAL),), INTERFACE[:2]),
    Property("LAG-5", check_omnisafe, omnisafe_cases(), OMNI_EXAMPLES, ("OmniSafeLagrange",)),
    Property("LAG-6", check_pid, pid_cases(), PID_EXAMPLES, ("PIDLagrangian",)),
    Property("LAG-7", check_skip,
             st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), any_lagrangian(),
                       st.sampled_from([math.nan, math.inf, -math.inf]), st.integers(0, 100)),
             requires=INTERFACE[:3]),
    Property("LAG-8", check_rejects_config,
             st.sampled_from([dict(which=w, name=n, value=v) for w, n, v in BAD_CONFIGS]),
             requires=INTERFACE, max_examples=len(BAD_CONFIGS)),
    Property("LAG-9", check_saute_budget, saute_cases(), requires=("SauteBudget",)),
    Property("LAG-10", check_saute_reward, saute_cases(), requires=("SauteBudget",)),
    Property("LAG-11", check_simmer, simmer_cases(), SIMMER_EXAMPLES, ("SimmerPID",)),
    Property("LAG-12", check_bad_tensor_scale,
             st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), _scaled,
                       st.sampled_from([-1.0, 0.0, math.nan, math.inf, -math.inf]), st.integers(0, 100)),
             tuple(dict(which=which, case=dict(case, costs=[30.0] * 3, scales=[1.0] * 3), bad=bad, position=1)
                   for which, case in (("DualAscent", PINNED_DUAL), ("OmniSafeLagrange", PINNED_OMNI))
                   for bad in (0.0, -1.0, math.nan)), INTERFACE[:2]),  # 0 is the boundary of "finite and > 0"
    Property("LAG-13", check_saute_rejects_cost,
             st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), saute_cases(),
                       st.sampled_from([math.nan, math.inf, -math.inf]), st.integers(0, 50)),
             requires=("SauteBudget",), max_examples=8),
    Property("LAG-14", check_detached, any_lagrangian(), (dict(which="DualAscent", case=PINNED_DUAL),),
             INTERFACE[:3], max_examples=6),
    Property("LAG-15", check_scalar_hyperparameters, any_lagrangian(),
             (dict(which="OmniSafeLagrange", case=PINNED_OMNI),), INTERFACE[:3], max_examples=4),
    Property("LAG-16", check_defaults,
             st.builds(lambda w, o, s: dict(which=w, omitted=o, costs=cost_series(s, 6, "mixed", 25.0)),
                       st.sampled_from(tuple(ALL_DEFAULTS)),
                       st.one_of(st.just(frozenset(PID_DEFAULTS) | frozenset(SAUTE_DEFAULTS) | frozenset(SIMMER_DEFAULTS)
                                         | frozenset(LAGRANGE_DEFAULTS) | frozenset(DUAL_DEFAULTS)),
                                 st.frozensets(st.sampled_from(sorted({*PID_DEFAULTS, *SAUTE_DEFAULTS, *SIMMER_DEFAULTS,
                                                                      *LAGRANGE_DEFAULTS, *DUAL_DEFAULTS})), min_size=1)),
                       seeds),
             tuple(dict(which=w, omitted=frozenset(d), costs=[30.0, 0.0, 26.0, 24.0, 50.0, 0.0])
                   for w, d in ALL_DEFAULTS.items()), INTERFACE, max_examples=10),
    Property("LAG-17", check_start, any_lagrangian(), (dict(which="DualAscent", case=PINNED_DUAL),
             dict(which="PIDLagrangian", case=dict(config=PID_DEFAULTS, costs=[30.0, 40.0]))), LAGRANGIANS,
             max_examples=10),
    Property("LAG-20", check_copies, any_lagrangian(), (dict(which="DualAscent", case=PINNED_DUAL),
             dict(which="PIDLagrangian", case=dict(config=PID_DEFAULTS, costs=[30.0, 40.0]))), LAGRANGIANS,
             max_examples=10),
    Property("LAG-18", check_rejects_calls,
             st.builds(lambda w, b: dict(which=w, bad=b), st.sampled_from(("DualAscent", "OmniSafeLagrange", "SauteBudget")),
                       st.sampled_from([-1.0, 0.0, math.nan, math.inf])),
             requires=("DualAscent", "OmniSafeLagrange", "SauteBudget"), max_examples=8),
    Property("LAG-19", check_boundaries, requires=("SauteBudget", "SimmerPID")),
)

CONTRACT = Contract("lagrange", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
