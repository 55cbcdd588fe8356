"""Contract ``gae``: generalized advantage estimation with truncation bootstrap, time-major [T, B].

Sources: the PPO review, CRITICAL-2 (bootstrap a time-limit truncation with V(s_{t+1}) of the real post-action
state, Pardo et al. 2018 "Time Limits in Reinforcement Learning"); the Dreamer plan §2.3 (row t is the
transition out of s_t; terminated and truncated are distinct, a reset may follow either).

Inputs (row t = the transition s_t → s'_t; after a reset s_{t+1} ≠ s'_t belongs to the next episode)
----------------------------------------------------------------------------------------------------
    reward          r [T, B]   reward of transition t
    value           v [T, B]   V(s_t)
    terminated      [T, B]     s'_t is terminal (bool, or 0/1 in any dtype)
    truncated       [T, B]     the episode was cut after transition t (time limit). A step flagged both
                               is terminal (gymnasium 1.x's TimeLimit flags a terminal step reached at
                               the limit both ways; SB3, CleanRL, rlax and TorchRL treat it as terminal)
    next_value      b [T, B]   V(s'_t) of the real post-action state. Read only where truncated_t and
                               not terminated_t, and at the rollout cut t = T−1 unless terminated_{T−1};
                               ignored elsewhere (any finite number, e.g. 0)
    gamma, lam                 floats in [0, 1]

(``next_value`` was called ``bootstrap_value`` before 0.2; vtrace's ``bootstrap_value`` is V(x_T) [B].)

Formula
-------
    next_t  = 0        if terminated_t                      (nothing is bootstrapped)
            = b_t      if truncated_t or t = T−1            (time limit, or the rollout cut)
            = v_{t+1}  otherwise
    carry_t = 0        if terminated_t or truncated_t or t = T−1,   else 1
    δ_t = r_t + γ·next_t − v_t
    A_t = δ_t + γ·λ·carry_t·A_{t+1}                                      → advantages [T, B]
    returns_t = A_t + v_t                                                → returns [T, B]

The precise rule behind the PPO review's "next_non_terminal = 1.0 so GAE propagates": on a truncated step the
TD error bootstraps from V(s'_t) (next_non_terminal = 1 for δ_t), but the recursion does *not* carry
A_{t+1}, which belongs to the next episode (carry_t = 0). Within the truncated episode the bootstrap
still propagates backwards: moving b_t by Δ moves A_s by γ·Δ·(γλ)^{t−s} for every s ≤ t of the same
episode (the local factor is (γλ)^{t−s}: 1 at s = t), and nothing in any other episode or env. This
equals Stable-Baselines3's time-limit bootstrapping (r_t += γ·V(terminal_obs), then an episode end).
CleanRL's convention (done = terminated or truncated, no bootstrap) violates GAE-3.

Conventions
-----------
* dtype: reward, value and next_value share one floating dtype; both outputs have it. The reference
  computes in float64. Shapes are [T, ...] (B any trailing shape); T = 0 gives empty results.
* Bad input is rejected before any work, naming the argument (and the first offending index): shape or
  dtype mismatch, γ or λ outside [0, 1], NaN/±Inf, flags other than 0/1.
* Tolerance (vs the float64 reference): |δ| ≤ max|r| + 2·max(|v|, |b|) and |γλ·carry| ≤ 1, so
  |A − A_ref| ≤ 8·(T+1)·eps·M with M = 1 + T·(max|r| + 2·max(|v|, |b|)). What must *not* influence A
  (ignored bootstrap values, other episodes, other envs) is checked bit for bit. With the dtype's largest
  finite values in one episode the literal recursion gives 0·inf = NaN across the cut: that case is the
  robustness clause GAE-13, which asks for select semantics (see its rationale).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from rlspec.reference import gae as reference  # the oracle
from rlspec.spec.core import Change, Contract, Property, assert_close, by_category, fail
from rlspec.spec.returns import (
    OVERFLOW_NOTE,
    TERMINAL,
    TRUNCATED,
    BadInput,
    assert_concatenation,
    bad_discounting,
    noise_like,
    overflow_rationale,
    perturbation,
    pinned_ends,
    seeds,
    unit_params,
    with_ends,
)
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "GAE-1": "advantages and returns follow the formula (vs float64 reference, within 8·(T+1)·eps·M)",
    "GAE-2": "returns = advantages + value (within 2·eps·(|A| + |V|))",
    "GAE-3": "moving next_value by Δ at a truncated step (or the unterminated last row) t moves A_s by "
             "γ·Δ·(γλ)^(t−s) for s ≤ t in the same episode and nothing else",
    "GAE-4": "next_value is ignored on terminated steps and on steps neither truncated nor last "
             "(bit for bit)",
    "GAE-5": "episodes are isolated: changing one episode's rows changes nothing outside it (bit for bit)",
    "GAE-6": "envs are independent: changing one env's inputs changes nothing in the others (bit for bit)",
    "GAE-7": "shape and dtype: advantages and returns have value's shape [T, ...] and dtype; T = 0 is empty",
    "GAE-8": "a step both terminated and truncated is terminal: the result equals the one with truncated "
             "cleared there (bit for bit)",
    "GAE-9": "mismatched shapes or dtypes are rejected naming the argument",
    "GAE-10": "gamma or lam outside [0, 1] is rejected naming the argument and the value",
    "GAE-11": "NaN/Inf in reward, value or next_value and non-0/1 flags are rejected naming the "
              "argument and the index",
    "GAE-12": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "GAE-13": "overflow stays inside its episode: one episode's rows set to the dtype's largest finite values (its "
              "advantages overflow to inf) change nothing outside it (bit for bit), never NaN",
    "GAE-14": "concatenated trajectories: a batch whose episodes end anywhere (terminated or truncated; at t = 0 and "
              "T − 1 too; in several envs) gives each trajectory the advantages and returns it gets alone",
}

CATEGORIES = by_category(
    maths=("GAE-1", "GAE-2", "GAE-3", "GAE-4", "GAE-5", "GAE-6", "GAE-7", "GAE-8", "GAE-14"),
    robustness=("GAE-12", "GAE-13"),
    validation=("GAE-9", "GAE-10", "GAE-11"),
)
RATIONALE = {
    "GAE-12": SCALAR_RATIONALE,
    "GAE-13": overflow_rationale("GAE-5", "an episode end"),
}

INTERFACE = ("gae",)
"""
gae(reward [T, B], value [T, B], terminated [T, B], truncated [T, B], next_value [T, B],
    gamma: float, lam: float) -> (advantages [T, B], returns [T, B])
"""


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
@st.composite
def cases(draw, min_T: int = 1):
    """reward, value, next_value [T, B]; terminated/truncated flags at drawn rates, both on some steps."""
    g = torch.Generator().manual_seed(draw(seeds))
    T, B = draw(st.integers(min_T, 16)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    r_scale, v_scale = draw(st.sampled_from([0.0, 1.0, 10.0, 1e3])), draw(st.sampled_from([0.0, 1.0, 100.0]))
    p_term, p_trunc = draw(st.sampled_from([0.0, 0.1, 0.3])), draw(st.sampled_from([0.0, 0.1, 0.3]))
    p_both = draw(st.sampled_from([0.0, 0.0, 0.1]))
    u, w = torch.rand(T, B, generator=g), torch.rand(T, B, generator=g)

    def randn(scale):
        return (scale * torch.randn(T, B, generator=g, dtype=torch.float64)).to(dtype)

    terminated = u < p_term
    truncated = ((u >= p_term) & (u < p_term + p_trunc)) | (terminated & (w < p_both / max(p_term, 1e-9)))
    return dict(reward=randn(r_scale), value=randn(v_scale), terminated=terminated, truncated=truncated,
                next_value=randn(v_scale),
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
                next_value=boot, gamma=gamma, lam=lam)


EXAMPLES = (_pinned(16, (4,)), _pinned(1), _pinned(7, (), torch.float64),
            _pinned(5, (2, 2), gamma=1.0, lam=1.0))


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


ARGS = ("reward", "value", "terminated", "truncated", "next_value", "gamma", "lam")


def _call(impl, case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    return impl.gae(*(case[k] for k in ARGS))


def _tol(case: dict) -> float:
    r, v, b = (case[k].double().abs() for k in ("reward", "value", "next_value"))
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
    ref = dict(case, **{k: case[k].double() for k in ("reward", "value", "next_value")})
    want_adv, want_ret = _call(reference, ref)
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
    boot = case["next_value"].clone()
    boot[pos, col] += noise_like(boot[pos, col], torch.Generator().manual_seed(seed))
    delta = boot[pos, col].item() - case["next_value"][pos, col].item()
    moved = dict(case, next_value=boot)
    got = _call(impl, moved)
    gamma, lam = case["gamma"], case["lam"]
    start = _episode(case["terminated"][:, col] | case["truncated"][:, col], pos)
    want = torch.zeros(got[0].shape, dtype=torch.float64)  # [T, B]
    for s in range(start, pos + 1):
        want[s, col] = gamma * delta * (gamma * lam) ** (pos - s)
    kind = "the unterminated last row" if at_cut else "a truncated step"
    assert_close("GAE-3", f"change of advantages when next_value[{pos}, {col}] ({kind}) moves by "
                          f"Δ = {delta:.6g}, expected γ·Δ·(γλ)^(t−s) for s = {start}..{pos}",
                 got[0].double() - base[0].double(), want, atol=2 * _tol(moved), **_inputs(case))
    outside = torch.ones(want.shape, dtype=torch.bool)
    outside[start:pos + 1, col] = False
    _assert_unchanged("GAE-3", f"next_value[{pos}, {col}] moved; outside its episode", got, base,
                      outside, case)


def check_ignored_bootstrap(impl, pos, col, seed, **case):
    case = dict(case, terminated=case["terminated"].clone(), truncated=case["truncated"].clone())
    case["terminated"][pos, col], case["truncated"][pos, col] = True, False
    T = case["value"].shape[0]
    last = torch.zeros(case["value"].shape, dtype=torch.bool)
    last[T - 1] = True
    ignored = case["terminated"] | ~(case["truncated"] | last)  # [T, B]
    boot = case["next_value"].clone()
    boot[ignored] = noise_like(boot[ignored], torch.Generator().manual_seed(seed))
    _assert_unchanged("GAE-4", "next_value changed on terminated steps and steps neither truncated nor "
                               "last", _call(impl, dict(case, next_value=boot)), _call(impl, case),
                      torch.ones_like(ignored), case)


def _episodes_isolated(clause, huge, impl, pos, col, seed, later, **case):
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
    outside = torch.ones(case["value"].shape, dtype=torch.bool)
    outside[first:end + 1, col] = False
    base = _call(impl, case)
    changed = dict(case)
    for k in ("reward", "value", "next_value"):
        changed[k] = case[k].clone()
        changed[k][first:end + 1, col] = perturbation(changed[k][first:end + 1, col], g, huge)
    _assert_unchanged(clause, f"rows {first}..{end} of env {col} (one episode) changed{OVERFLOW_NOTE * huge}; "
                              "outside that episode", _call(impl, changed), base, outside, case)


def check_episodes_isolated(impl, **case):
    _episodes_isolated("GAE-5", False, impl, **case)


def check_overflow_isolated(impl, **case):
    _episodes_isolated("GAE-13", True, impl, **case)


def check_envs_independent(impl, pos, col, seed, **case):
    g = torch.Generator().manual_seed(seed)
    changed = dict(case)
    for k in ("reward", "value", "next_value"):
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


def check_both_is_terminal(impl, pos, col, seed, **case):
    both = dict(case, terminated=case["terminated"].clone(), truncated=case["truncated"].clone())
    both["terminated"][pos, col] = both["truncated"][pos, col] = True
    only_terminal = dict(both, truncated=both["truncated"] & ~both["terminated"])
    got, want = _call(impl, both), _call(impl, only_terminal)
    everywhere = torch.ones(case["value"].shape, dtype=torch.bool)
    _assert_unchanged("GAE-8", f"terminated and truncated both set at [{pos}, {col}] (and wherever the case "
                               "has both), vs truncated cleared there", got, want, everywhere, both)


def check_concatenation(impl, ends, seed, **case):
    batch = dict(case, terminated=case["terminated"] | (ends == TERMINAL),
                 truncated=case["truncated"] | (ends == TRUNCATED))

    def alone(col, a, z):  # the trajectory's own rows: its last row bootstraps as the batch's row z does
        return _call(impl, {k: batch[k][a:z + 1, col:col + 1] if isinstance(batch[k], torch.Tensor) else batch[k]
                            for k in ARGS})

    tol = 2 * _tol(batch)
    assert_concatenation("GAE-14", ("advantages", "returns"), _call(impl, batch), alone,
                         batch["terminated"] | batch["truncated"], lambda *_: (tol, tol), **_inputs(batch))


def _bad_input_case() -> dict:
    flags = torch.zeros(5, 3, dtype=torch.bool)
    return dict(reward=torch.zeros(5, 3), value=torch.zeros(5, 3), terminated=flags, truncated=flags.clone(),
                next_value=torch.zeros(5, 3), gamma=0.99, lam=0.95)


BAD = BadInput("gae", "GAE-9", "GAE-10", "GAE-11", _bad_input_case, _call)


def check_scalar_hyperparameters(impl, **case):
    check_scalar_types("GAE-12", lambda **p: _call(impl, dict(case, **p)),
                       dict(gamma=case["gamma"], lam=case["lam"]), **_inputs(case))


PROPERTIES = (
    Property("GAE-1", check_reference, cases(), EXAMPLES, INTERFACE),
    Property("GAE-2", check_returns, cases(), EXAMPLES, INTERFACE),
    Property("GAE-3", check_truncation_bootstrap, with_place(cases()), requires=INTERFACE),
    Property("GAE-4", check_ignored_bootstrap, with_place(cases()), requires=INTERFACE),
    Property("GAE-5", check_episodes_isolated, with_place(cases(min_T=2), last_row=False, later=True),
             requires=INTERFACE),
    Property("GAE-6", check_envs_independent, with_place(cases()), requires=INTERFACE),
    Property("GAE-7", check_shape, cases(), EXAMPLES + (_pinned(0),), INTERFACE),
    Property("GAE-8", check_both_is_terminal, with_place(cases()), requires=INTERFACE),
    Property("GAE-9", BAD.rejects_shape,
             st.sampled_from([dict(name="reward", shape=(5, 2), dtype=torch.float32),
                              dict(name="reward", shape=(5, 3), dtype=torch.float64),
                              dict(name="next_value", shape=(6, 3), dtype=torch.float32),
                              dict(name="next_value", shape=(3,), dtype=torch.float32),
                              dict(name="terminated", shape=(5,), dtype=torch.bool),
                              dict(name="truncated", shape=(4, 3), dtype=torch.bool)]),
             requires=INTERFACE, max_examples=6),
    Property("GAE-10", BAD.rejects_param, bad_discounting("gamma", "lam"), requires=INTERFACE, max_examples=4),
    Property("GAE-11", BAD.rejects_value,
             st.builds(lambda nb, t, b: dict(name=nb[0], bad=nb[1], t=t, b=b),
                       st.sampled_from([("reward", float("nan")), ("value", float("nan")),
                                        ("next_value", float("nan")), ("next_value", float("-inf")),
                                        ("terminated", 0.5), ("truncated", float("nan"))]),
                       st.integers(0, 4), st.integers(0, 2)),
             (dict(name="value", bad=float("nan"), t=4, b=2),), INTERFACE, max_examples=10),
    Property("GAE-12", check_scalar_hyperparameters, cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("GAE-13", check_overflow_isolated, with_place(cases(min_T=2), last_row=False, later=True),
             requires=INTERFACE),
    Property("GAE-14", check_concatenation, with_ends(cases(), "value"),
             (dict(_pinned(9, (3,)), ends=pinned_ends(9), seed=9),), INTERFACE),
)

CHANGES = (
    Change("1.0", "first versioned release"),
    Change("1.1", "the concatenation clause, shared with lambda_return and vtrace", added=("GAE-14",)),
)

CONTRACT = Contract("gae", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE,
                    changes=CHANGES)
