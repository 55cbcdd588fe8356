"""Contract ``gae``: generalized advantage estimation with truncation bootstrap, time-major [T, B].

Sources: seed 001, CRITICAL-2 (bootstrap a time-limit truncation with V(s_{t+1}) of the real post-action
state, Pardo et al. 2018 "Time Limits in Reinforcement Learning"); seed 004 §2.3 (row t is the
transition out of s_t; terminated and truncated are distinct, a reset may follow either). Issue 4.

Inputs (row t = the transition s_t → s'_t; after a reset s_{t+1} ≠ s'_t belongs to the next episode)
----------------------------------------------------------------------------------------------------
    reward          r [T, B]   reward of transition t
    value           v [T, B]   V(s_t)
    terminated      [T, B]     s'_t is terminal (bool, or 0/1 in any dtype)
    truncated       [T, B]     the episode was cut after transition t (time limit); never together
                               with terminated on one step
    bootstrap_value b [T, B]   V(s'_t) of the real post-action state. Read only where truncated_t, and
                               at the rollout cut t = T−1 unless terminated_{T−1}; ignored elsewhere
                               (any finite number, e.g. 0)
    gamma, lam                 floats in [0, 1]

Formula
-------
    next_t  = 0        if terminated_t                      (nothing is bootstrapped)
            = b_t      if truncated_t or t = T−1            (time limit, or the rollout cut)
            = v_{t+1}  otherwise
    carry_t = 0        if terminated_t or truncated_t or t = T−1,   else 1
    δ_t = r_t + γ·next_t − v_t
    A_t = δ_t + γ·λ·carry_t·A_{t+1}                                      → advantages [T, B]
    returns_t = A_t + v_t                                                → returns [T, B]

The precise rule behind seed 001's "next_non_terminal = 1.0 so GAE propagates": on a truncated step the
TD error bootstraps from V(s'_t) (next_non_terminal = 1 for δ_t), but the recursion does *not* carry
A_{t+1}, which belongs to the next episode (carry_t = 0). Within the truncated episode the bootstrap
still propagates backwards: moving b_t by Δ moves A_s by γ·Δ·(γλ)^{t−s} for every s ≤ t of the same
episode (the local factor is (γλ)^{t−s}: 1 at s = t), and nothing in any other episode or env. This
equals Stable-Baselines3's time-limit bootstrapping (r_t += γ·V(terminal_obs), then an episode end).
CleanRL's convention (done = terminated or truncated, no bootstrap) violates GAE-3.

Conventions
-----------
* dtype: reward, value and bootstrap_value share one floating dtype; both outputs have it. The reference
  computes in float64. Shapes are [T, ...] (B any trailing shape); T = 0 gives empty results.
* Bad input is rejected before any work, naming the argument (and the first offending index): shape or
  dtype mismatch, γ or λ outside [0, 1], NaN/±Inf, flags other than 0/1, a step both terminated and
  truncated.
* Tolerance (vs the float64 reference): |δ| ≤ max|r| + 2·max(|v|, |b|) and |γλ·carry| ≤ 1, so
  |A − A_ref| ≤ 8·(T+1)·eps·M with M = 1 + T·(max|r| + 2·max(|v|, |b|)). What must *not* influence A
  (ignored bootstrap values, other episodes, other envs) is checked bit for bit.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from rlspec.spec.core import Contract, Property, assert_close, expect_rejection, fail
from rlspec.spec.lambda_return import (as_flags, noise_like, require_dtype, require_time_major, seeds,
                                       unit_params, validate_discounting)
from rlspec.spec.validate import require_finite, require_shape, values_look_valid

CLAUSES = {
    "GAE-1": "advantages and returns follow the formula (vs float64 reference, within 8·(T+1)·eps·M)",
    "GAE-2": "returns = advantages + value (within 2·eps·(|A| + |V|))",
    "GAE-3": "moving bootstrap_value by Δ at a truncated step (or the unterminated last row) t moves A_s by "
             "γ·Δ·(γλ)^(t−s) for s ≤ t in the same episode and nothing else",
    "GAE-4": "bootstrap_value is ignored on terminated steps and on steps neither truncated nor last "
             "(bit for bit)",
    "GAE-5": "episodes are isolated: changing one episode's rows changes nothing outside it (bit for bit)",
    "GAE-6": "envs are independent: changing one env's inputs changes nothing in the others (bit for bit)",
    "GAE-7": "shape and dtype: advantages and returns have value's shape [T, ...] and dtype; T = 0 is empty",
    "GAE-8": "a step both terminated and truncated is rejected naming both arguments and the index",
    "GAE-9": "mismatched shapes or dtypes are rejected naming the argument",
    "GAE-10": "gamma or lam outside [0, 1] is rejected naming the argument and the value",
    "GAE-11": "NaN/Inf in reward, value or bootstrap_value and non-0/1 flags are rejected naming the "
              "argument and the index",
}

INTERFACE = ("gae",)
"""
gae(reward [T, B], value [T, B], terminated [T, B], truncated [T, B], bootstrap_value [T, B],
    gamma: float, lam: float) -> (advantages [T, B], returns [T, B])
"""


def validate_gae(fn: str, reward: torch.Tensor, value: torch.Tensor, terminated: torch.Tensor,
                 truncated: torch.Tensor, bootstrap_value: torch.Tensor, gamma: float,
                 lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Reject bad input (see the module docstring); returns (terminated, truncated) as bool [T, ...]."""
    require_time_major(fn, "value", value)
    for name, t in (("reward", reward), ("bootstrap_value", bootstrap_value)):
        require_dtype(fn, name, t, value.dtype, "value")
        require_shape(fn, name, t, value.shape, "(= value.shape [T, B])")
    term = as_flags(fn, "terminated", terminated, tuple(value.shape), "(= value.shape [T, B])")
    trunc = as_flags(fn, "truncated", truncated, tuple(value.shape), "(= value.shape [T, B])")
    validate_discounting(fn, gamma, lam)
    if not values_look_valid(finite=(reward, value, bootstrap_value)):
        for name, t in (("reward", reward), ("value", value), ("bootstrap_value", bootstrap_value)):
            require_finite(fn, name, t)
    both = term & trunc
    if bool(both.any()):
        idx = [int(i) for i in both.nonzero()[0].tolist()]
        raise ValueError(f"{fn}: arguments 'terminated' and 'truncated' are both set at index {idx} "
                         f"({int(both.sum())} steps); a step ends by termination or by truncation, not both")
    return term, trunc


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
@st.composite
def cases(draw, min_T: int = 1):
    """reward, value, bootstrap_value [T, B]; exclusive terminated/truncated flags at drawn rates."""
    g = torch.Generator().manual_seed(draw(seeds))
    T, B = draw(st.integers(min_T, 16)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    r_scale, v_scale = draw(st.sampled_from([0.0, 1.0, 10.0, 1e3])), draw(st.sampled_from([0.0, 1.0, 100.0]))
    p_term, p_trunc = draw(st.sampled_from([0.0, 0.1, 0.3])), draw(st.sampled_from([0.0, 0.1, 0.3]))
    u = torch.rand(T, B, generator=g)

    def randn(scale):
        return (scale * torch.randn(T, B, generator=g, dtype=torch.float64)).to(dtype)

    return dict(reward=randn(r_scale), value=randn(v_scale), terminated=u < p_term,
                truncated=(u >= p_term) & (u < p_term + p_trunc), bootstrap_value=randn(v_scale),
                gamma=draw(unit_params), lam=draw(unit_params))


@st.composite
def with_place(draw, case_strategy, last_row: bool = True, later: bool = False):
    """A case plus a place (pos, col), a perturbation ``seed`` and, if asked, a boolean ``later``;
    pos < T-1 unless ``last_row``."""
    case = draw(case_strategy)
    T, B = case["value"].shape[:2]
    case = dict(case, pos=draw(st.integers(0, T - 1 if last_row else T - 2)), col=draw(st.integers(0, B - 1)),
                seed=draw(seeds))
    return dict(case, later=draw(st.booleans())) if later else case


def _pinned(T: int, B=(3,), dtype=torch.float32, gamma=0.99, lam=0.95) -> dict:
    g = torch.Generator().manual_seed(T)
    u = torch.rand(T, *B, generator=g)
    reward, value, boot = (torch.randn(T, *B, generator=g).to(dtype) for _ in range(3))
    return dict(reward=reward, value=value, terminated=u < 0.15, truncated=(u >= 0.15) & (u < 0.3),
                bootstrap_value=boot, gamma=gamma, lam=lam)


EXAMPLES = (_pinned(16, (4,)), _pinned(1), _pinned(7, (), torch.float64),
            _pinned(5, (2, 2), gamma=1.0, lam=1.0))


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def _reference():
    from rlspec.reference import gae  # the oracle; imported lazily to keep spec import-light

    return gae


ARGS = ("reward", "value", "terminated", "truncated", "bootstrap_value", "gamma", "lam")


def _call(impl, case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    return impl.gae(*(case[k] for k in ARGS))


def _tol(case: dict) -> float:
    r, v, b = (case[k].double().abs() for k in ("reward", "value", "bootstrap_value"))
    T = r.shape[0]
    scale = 1.0 + T * ((r.max().item() + 2 * max(v.max().item(), b.max().item())) if T else 0.0)
    return 8 * (T + 1) * torch.finfo(case["value"].dtype).eps * scale


def _inputs(case: dict) -> dict:
    return {k: case[k] for k in ARGS}


def _assert_unchanged(clause: str, what: str, got, base, keep: torch.Tensor, case: dict) -> None:
    """``got`` equals ``base`` bit for bit wherever ``keep`` [T, B] is set, for both outputs."""
    for name, g, b in (("advantages", got[0], base[0]), ("returns", got[1], base[1])):
        if not torch.equal(g[keep], b[keep]):
            idx = [int(i) for i in (keep & (g != b)).nonzero()[0].tolist()]
            fail(clause, f"{what}: {name}{idx} = {g[tuple(idx)].item()!r}, was {b[tuple(idx)].item()!r}",
                 **_inputs(case))


def _episode(done: torch.Tensor, t: int) -> int:
    """First row of the episode that row t [of a [T] done column] belongs to."""
    start = t
    while start > 0 and not bool(done[start - 1]):
        start -= 1
    return start


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_reference(impl, **case):
    adv, ret = _call(impl, case)
    ref = dict(case, **{k: case[k].double() for k in ("reward", "value", "bootstrap_value")})
    want_adv, want_ret = _call(_reference(), ref)
    tol = _tol(case)
    assert_close("GAE-1", "advantages", adv, want_adv, atol=tol, **_inputs(case))
    assert_close("GAE-1", "returns", ret, want_ret, atol=tol, **_inputs(case))


def check_returns(impl, **case):
    adv, ret = _call(impl, case)
    a, v = adv.double(), case["value"].double()
    tol = 2 * torch.finfo(adv.dtype).eps * ((a.abs() + v.abs()).max().item() if a.numel() else 0.0)
    assert_close("GAE-2", "returns - (advantages + value)", ret.double() - (a + v), torch.zeros_like(a),
                 atol=tol, **_inputs(case))


def check_truncation_bootstrap(impl, pos, col, seed, **case):
    T = case["value"].shape[0]
    at_cut = pos == T - 1  # the rollout cut, else a time-limit truncation
    case = dict(case, terminated=case["terminated"].clone(), truncated=case["truncated"].clone())
    case["terminated"][pos, col] = False
    case["truncated"][pos, col] = not at_cut
    base = _call(impl, case)
    boot = case["bootstrap_value"].clone()
    boot[pos, col] += noise_like(boot[pos, col], torch.Generator().manual_seed(seed))
    delta = boot[pos, col].item() - case["bootstrap_value"][pos, col].item()
    moved = dict(case, bootstrap_value=boot)
    got = _call(impl, moved)
    gamma, lam = case["gamma"], case["lam"]
    start = _episode(case["terminated"][:, col] | case["truncated"][:, col], pos)
    want = torch.zeros(got[0].shape, dtype=torch.float64)  # [T, B]
    for s in range(start, pos + 1):
        want[s, col] = gamma * delta * (gamma * lam) ** (pos - s)
    kind = "the unterminated last row" if at_cut else "a truncated step"
    assert_close("GAE-3", f"change of advantages when bootstrap_value[{pos}, {col}] ({kind}) moves by "
                          f"Δ = {delta:.6g}, expected γ·Δ·(γλ)^(t−s) for s = {start}..{pos}",
                 got[0].double() - base[0].double(), want, atol=2 * _tol(moved), **_inputs(case))
    outside = torch.ones(want.shape, dtype=torch.bool)
    outside[start:pos + 1, col] = False
    _assert_unchanged("GAE-3", f"bootstrap_value[{pos}, {col}] moved; outside its episode", got, base,
                      outside, case)


def check_ignored_bootstrap(impl, pos, col, seed, **case):
    case = dict(case, terminated=case["terminated"].clone(), truncated=case["truncated"].clone())
    case["terminated"][pos, col], case["truncated"][pos, col] = True, False
    T = case["value"].shape[0]
    last = torch.zeros(case["value"].shape, dtype=torch.bool)
    last[T - 1] = True
    ignored = case["terminated"] | ~(case["truncated"] | last)  # [T, B]
    boot = case["bootstrap_value"].clone()
    boot[ignored] = noise_like(boot[ignored], torch.Generator().manual_seed(seed))
    _assert_unchanged("GAE-4", "bootstrap_value changed on terminated steps and steps neither truncated nor "
                               "last", _call(impl, dict(case, bootstrap_value=boot)), _call(impl, case),
                      torch.ones_like(ignored), case)


def check_episodes_isolated(impl, pos, col, seed, later, **case):
    case = dict(case, terminated=case["terminated"].clone(), truncated=case["truncated"].clone())
    case["terminated"][pos, col], case["truncated"][pos, col] = False, True  # an episode ends at pos
    done = case["terminated"][:, col] | case["truncated"][:, col]  # [T]
    if later:  # the episode that starts at pos + 1
        first, end = pos + 1, pos + 1
        while end < done.shape[0] - 1 and not bool(done[end]):
            end += 1
    else:  # the episode that ends at pos
        first, end = _episode(done, pos), pos
    g = torch.Generator().manual_seed(seed)
    changed = dict(case)
    for k in ("reward", "value", "bootstrap_value"):
        changed[k] = case[k].clone()
        changed[k][first:end + 1, col] = noise_like(changed[k][first:end + 1, col], g)
    outside = torch.ones(case["value"].shape, dtype=torch.bool)
    outside[first:end + 1, col] = False
    _assert_unchanged("GAE-5", f"rows {first}..{end} of env {col} (one episode) changed; outside that "
                               "episode", _call(impl, changed), _call(impl, case), outside, case)


def check_envs_independent(impl, pos, col, seed, **case):
    g = torch.Generator().manual_seed(seed)
    changed = dict(case)
    for k in ("reward", "value", "bootstrap_value"):
        changed[k] = case[k].clone()
        changed[k][:, col] = noise_like(changed[k][:, col], g)
    u = torch.rand(case["value"].shape[0], generator=g)
    changed["terminated"], changed["truncated"] = case["terminated"].clone(), case["truncated"].clone()
    changed["terminated"][:, col], changed["truncated"][:, col] = u < 0.3, u > 0.7
    others = torch.ones(case["value"].shape, dtype=torch.bool)
    others[:, col] = False
    _assert_unchanged("GAE-6", f"every input of env {col} changed; in the other envs", _call(impl, changed),
                      _call(impl, case), others, case)


def check_shape(impl, **case):
    value = case["value"]
    for name, out in zip(("advantages", "returns"), _call(impl, case)):
        if out.shape != value.shape or out.dtype != value.dtype:
            fail("GAE-7", f"{name} has shape {tuple(out.shape)} dtype {out.dtype}, expected "
                          f"{tuple(value.shape)} {value.dtype}")


def _bad_input_case() -> dict:
    flags = torch.zeros(5, 3, dtype=torch.bool)
    return dict(reward=torch.zeros(5, 3), value=torch.zeros(5, 3), terminated=flags, truncated=flags.clone(),
                bootstrap_value=torch.zeros(5, 3), gamma=0.99, lam=0.95)


def check_rejects_both(impl, t, b):
    case = _bad_input_case()
    case["terminated"][t, b] = case["truncated"][t, b] = True
    expect_rejection("GAE-8", lambda: _call(impl, case), names=["'terminated'", "'truncated'"],
                     mentions=[f"[{t}, {b}]"], what=f"terminated[{t}, {b}] and truncated[{t}, {b}] both set")


def check_rejects_shape(impl, name, shape, dtype):
    case = _bad_input_case()
    case[name] = torch.zeros(shape, dtype=dtype)
    mentions = [str(tuple(shape))] if dtype in (torch.float32, torch.bool) else [str(dtype)]
    expect_rejection("GAE-9", lambda: _call(impl, case), names=[f"'{name}'"], mentions=mentions,
                     what=f"{name} {list(shape)} {dtype}")


def check_rejects_param(impl, name, value):
    case = dict(_bad_input_case(), **{name: value})
    expect_rejection("GAE-10", lambda: _call(impl, case), names=[f"'{name}'"], mentions=[repr(value)],
                     what=f"gae({name}={value!r})")


def check_rejects_value(impl, name, bad, t, b):
    case = _bad_input_case()
    case[name] = case[name].float()
    case[name][t, b] = bad
    expect_rejection("GAE-11", lambda: _call(impl, case), names=[f"'{name}'"], mentions=[f"[{t}, {b}]"],
                     what=f"{name}[{t}, {b}] = {bad}")


PROPERTIES = (
    Property("GAE-1", check_reference, cases(), EXAMPLES, INTERFACE),
    Property("GAE-2", check_returns, cases(), EXAMPLES, INTERFACE),
    Property("GAE-3", check_truncation_bootstrap, with_place(cases()), requires=INTERFACE),
    Property("GAE-4", check_ignored_bootstrap, with_place(cases()), requires=INTERFACE),
    Property("GAE-5", check_episodes_isolated, with_place(cases(min_T=2), last_row=False, later=True),
             requires=INTERFACE),
    Property("GAE-6", check_envs_independent, with_place(cases()), requires=INTERFACE),
    Property("GAE-7", check_shape, cases(), EXAMPLES + (_pinned(0),), INTERFACE),
    Property("GAE-8", check_rejects_both, st.builds(lambda t, b: dict(t=t, b=b), st.integers(0, 4),
                                                    st.integers(0, 2)),
             (dict(t=4, b=2),), INTERFACE, max_examples=5),
    Property("GAE-9", check_rejects_shape,
             st.sampled_from([dict(name="reward", shape=(5, 2), dtype=torch.float32),
                              dict(name="reward", shape=(5, 3), dtype=torch.float64),
                              dict(name="bootstrap_value", shape=(6, 3), dtype=torch.float32),
                              dict(name="bootstrap_value", shape=(3,), dtype=torch.float32),
                              dict(name="terminated", shape=(5,), dtype=torch.bool),
                              dict(name="truncated", shape=(4, 3), dtype=torch.bool)]),
             requires=INTERFACE, max_examples=6),
    Property("GAE-10", check_rejects_param,
             st.sampled_from([dict(name="gamma", value=1.5), dict(name="gamma", value=-0.1),
                              dict(name="lam", value=1.01), dict(name="lam", value=float("nan"))]),
             requires=INTERFACE, max_examples=4),
    Property("GAE-11", check_rejects_value,
             st.builds(lambda nb, t, b: dict(name=nb[0], bad=nb[1], t=t, b=b),
                       st.sampled_from([("reward", float("nan")), ("value", float("nan")),
                                        ("bootstrap_value", float("nan")), ("bootstrap_value", float("-inf")),
                                        ("terminated", 0.5), ("truncated", float("nan"))]),
                       st.integers(0, 4), st.integers(0, 2)),
             (dict(name="value", bad=float("nan"), t=4, b=2),), INTERFACE, max_examples=10),
)

CONTRACT = Contract("gae", CLAUSES, INTERFACE, PROPERTIES)
