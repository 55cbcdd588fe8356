"""Contract ``lambda_return``: TD(λ) returns with ``gamma * continue`` discounts, time-major [T, B].

Source: the Dreamer plan (Master Plan v2), milestone M5 ("lambda-return computation uses discounts = gamma *
continue[t]") and §2.3 (transition-aligned replay: row t stores the transition out of obs[t];
``continue = 0`` for a true terminal, ``1`` for a timeout or a normal step; ``is_first[t]`` marks obs[t]
as the first of an episode and may appear inside a sampled window).

Inputs (row t = the transition s_t → s_{t+1})
--------------------------------------------
    reward   r [T, B]     reward of the transition out of s_t
    cont     c [T, B]     continue of that transition: 0 if s_{t+1} is terminal, else 1; probabilities in
                          [0, 1] (a learned continue head) are allowed
    value    v [T+1, B]   V(s_0), ..., V(s_T); v_0 is not used by any return (it is the caller's baseline)
    gamma, lam            floats in [0, 1]
    is_first f [T+1, B]   optional; f_t marks s_t (the row of v_t) as the first state of an episode
    truncated  [T, B]     optional, with next_value: the episode was cut after transition t (time limit);
                          s_{t+1}, if in the window, belongs to the next episode (a collector's reset)
    next_value b [T, B]   V(s'_t) of the real post-action state of transition t; read only where
                          truncated_t (any finite number elsewhere)

Formula
-------
    R_T = v_T                                                         (bootstrap from the last value)
    R_t = r_t + γ·c_t·(1 − f_{t+1})·((1 − λ)·v_{t+1} + λ·R_{t+1}),   t = T−1, ..., 0      → R [T, B]

Without ``is_first`` take f ≡ 0. λ = 1 gives the discounted return plus bootstrap
Σ_{k=t}^{T−1} (Π_{j=t}^{k−1} γc_j)·r_k + (Π_{j=t}^{T−1} γc_j)·v_T; λ = 0 gives the one-step TD target
r_t + γ·c_t·v_{t+1}.

``is_first`` rule (a replay window that crosses an episode start). If f_{t+1} = 1 the environment was
reset after transition t: s_{t+1} belongs to the next episode and the real post-action state of
transition t is not in the window. The return at t then uses nothing from row t+1 on (no r, c, v or
R of later rows) and, the final state's value being unavailable, the cut counts as a terminal:
R_t = r_t, whatever c_t says. This is the safe choice (no value of another episode leaks in); it drops
the bootstrap of a time-limit reset, so callers that need truncation-correct targets there must carry
V(final state) themselves (see the ``gae`` contract) or mask those rows. f_0 changes nothing.

Truncation (the collector layout, as ``gae`` takes it)
-----------------------------------------------------
    R_t = r_t + γ·c_t·b_t                      where truncated_t, whatever f_{t+1} and v_{t+1} say

A truncated step bootstraps from the value of the state it really reached and takes nothing from row t+1
on, exactly as a window that ends at t with v_T = b_t. A step with c_t = 0 and truncated_t is terminal
(R_t = r_t). Hence the concatenation clause: a batch holding several trajectories back to back gives each
of them the returns it gets alone. A collector that resets inside ``step`` passes truncated with
V(final observation) here; without the pair, ``is_first`` still cuts a reset as a terminal.

Conversion to sheeprl 0.8.4 ``compute_lambda_values(rewards, values, continues, lmbda)``
---------------------------------------------------------------------------------------
sheeprl computes, for arrays of length L, out_L = values[L−1] and
out_k = rewards[k] + continues[k]·((1 − λ)·values[k] + λ·out_{k+1}), returning out_0..out_{L−1}. Its
index k is the step *arriving at* s_{k+1} (reward on arrival): rewards[k] is received on arriving at
s_{k+1}, values[k] = V(s_{k+1}) and continues[k] = γ·(continue flag of s_{k+1}), γ already folded in.
(DreamerV3's call site holds imagination arrays indexed by state s_0..s_H, reward and continue predicted
at arrival, and passes them sliced ``[1:]``.) Hence, with L = T and out_t = R_t (targets for s_0..s_{T−1}):

    to_sheeprl:    rewards = r,    values = v[1:],    continues = γ·c
    from_sheeprl:  r = rewards,    v = cat(v_0, values),    c = continues / γ     (needs γ > 0 and v_0)

The round trip is exact for r, v and for c ∈ {0, 1}; a probability c comes back within one rounding.

Conventions
-----------
* dtype: reward, cont and value share one floating dtype; R has that dtype. The reference computes in
  float64. Shapes are [T, ...] (B may be any trailing shape, or none); T = 0 gives an empty result.
* Bad input is rejected before any work: mismatched shapes or dtypes naming the argument and both
  shapes, γ or λ outside [0, 1], NaN/±Inf in reward or value, c outside [0, 1] (NaN included) and flags
  that are not 0/1, each naming the argument and the first offending index.
* Tolerance (vs the float64 reference): each backward step rounds a handful of times on numbers bounded
  by M = 1 + max|v| + T·max|r| and is damped by |γcλ| ≤ 1, so |R − R_ref| ≤ 8·(T+1)·eps·M with
  eps = finfo(dtype).eps. Clauses about what must *not* influence R (cuts, is_first) are bit-exact: a
  zero discount multiplies a finite number, which is exactly zero in any evaluation order. With the
  dtype's largest finite values after a cut the literal recursion gives 0·inf = NaN instead: that case is
  the robustness clauses LAMBDA-13 and LAMBDA-14, which ask for select semantics (see their rationale).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from rlspec.reference import lambda_return as reference  # the oracle
from rlspec.spec.core import Change, Contract, Property, assert_close, by_category, fail
from rlspec.spec.returns import (
    OVERFLOW_NOTE,
    TERMINAL,
    TRUNCATED,
    TRUNCATION_ERRORS,
    BadInput,
    assert_concatenation,
    bad_discounting,
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
    "LAMBDA-1": "R follows R_t = r_t + γ·c_t·(1-f_{t+1})·((1-λ)·v_{t+1} + λ·R_{t+1}), R_T = v_T "
                "(vs float64 reference, within 8·(T+1)·eps·M)",
    "LAMBDA-2": "R is linear in rewards: R(r + α·Δ; v) = R(r; v) + α·R(Δ; v=0)",
    "LAMBDA-3": "c_t = 0 cuts the future: nothing in rows after t (r, c, v, is_first) changes R_0..R_t "
                "(bit for bit)",
    "LAMBDA-4": "λ = 1 gives the discounted return plus bootstrap: "
                "Σ_k (Π_{j<k} γc_j)·r_k + (Π_j γc_j)·v_T",
    "LAMBDA-5": "λ = 0 gives the one-step TD target r_t + γ·c_t·v_{t+1}",
    "LAMBDA-6": "nothing at or after an episode start (is_first[t+1]) changes R_0..R_t (bit for bit)",
    "LAMBDA-7": "at a cut (is_first[t+1]) R_t = r_t exactly, whatever c_t; is_first[0] changes nothing",
    "LAMBDA-8": "shape and dtype: R has reward's shape [T, ...] and dtype; T = 0 gives an empty result",
    "LAMBDA-9": "mismatched shapes or dtypes of cont/value/is_first are rejected naming the argument",
    "LAMBDA-10": "gamma or lam outside [0, 1] is rejected naming the argument and the value",
    "LAMBDA-11": "NaN/Inf in reward or value, cont outside [0, 1] and non-0/1 flags are rejected naming "
                 "the argument and the index",
    "LAMBDA-12": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "LAMBDA-13": "overflow after a cut stays there: with c_t = 0 and the dtype's largest finite r and v in rows after "
                 "t (R overflows to inf there), R_0..R_t are bit-identical, never NaN",
    "LAMBDA-14": "overflow after an episode start stays there: with is_first[t+1] set and the dtype's largest finite "
                 "r and v from row t+1 on, R_0..R_t are bit-identical, never NaN",
    "LAMBDA-15": "with truncated steps R follows the formula, R_t = r_t + γ·c_t·next_value_t at a truncated step "
                 "whatever is_first[t+1] says (vs float64 reference, within 8·(T+1)·eps·M)",
    "LAMBDA-16": "a truncated step ends its episode: nothing after row t (r, c, v_{t+1} on, is_first[t+1] on, "
                 "truncated, next_value) changes R_0..R_t (bit for bit)",
    "LAMBDA-17": "a step both terminal (c_t = 0) and truncated is terminal: R equals the one with truncated cleared "
                 "there (bit for bit)",
    "LAMBDA-18": "next_value is ignored where truncated is not set or c_t = 0 (bit for bit)",
    "LAMBDA-19": "concatenated trajectories: a batch whose episodes end anywhere (c_t = 0, truncated or is_first; at "
                 "t = 0 and T − 1 too; in several envs) gives each trajectory the returns it gets alone",
    "LAMBDA-20": "truncated without next_value (or the reverse), either in another shape or dtype than reward, "
                 "non-0/1 flags and NaN/Inf in next_value are rejected naming the argument",
}

CATEGORIES = by_category(
    maths=("LAMBDA-1", "LAMBDA-2", "LAMBDA-3", "LAMBDA-4", "LAMBDA-5", "LAMBDA-6", "LAMBDA-7", "LAMBDA-8",
           "LAMBDA-15", "LAMBDA-16", "LAMBDA-17", "LAMBDA-18", "LAMBDA-19"),
    robustness=("LAMBDA-12", "LAMBDA-13", "LAMBDA-14"),
    validation=("LAMBDA-9", "LAMBDA-10", "LAMBDA-11", "LAMBDA-20"),
)
RATIONALE = {
    "LAMBDA-13": overflow_rationale("LAMBDA-3", "a zero continue"),
    "LAMBDA-14": overflow_rationale("LAMBDA-6", "an episode start"),
    "LAMBDA-12": SCALAR_RATIONALE,
    "LAMBDA-8": "The recursion gives the empty return for an empty horizon (T = 0); sheeprl and rlax both crash"
                " there because their scans start from the last value. The clause asks the formula's value "
                "because a window cut at a reset can be empty.",
}

INTERFACE = ("lambda_return",)
"""
lambda_return(reward [T, B], cont [T, B], value [T+1, B], gamma: float, lam: float,
              is_first: [T+1, B] bool | None = None, truncated: [T, B] bool | None = None,
              next_value: [T, B] | None = None) -> R [T, B]
"""


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
dtypes = st.sampled_from((torch.float32, torch.float64))


@st.composite
def cases(draw, masked: bool | None = None, lam: float | None = None):
    """reward [T, B], cont [T, B] (0/1 flags, probabilities or all ones), value [T+1, B], is_first."""
    g = torch.Generator().manual_seed(draw(seeds))
    T, B = draw(st.integers(1, 16)), draw(st.integers(1, 4))
    dtype = draw(dtypes)
    r_scale, v_scale = draw(st.sampled_from([0.0, 1.0, 10.0, 1e3])), draw(st.sampled_from([0.0, 1.0, 100.0]))
    kind = draw(st.sampled_from(["flags", "probabilities", "ones"]))
    u = torch.rand(T, B, generator=g, dtype=torch.float64)
    cont = {"flags": (u > 0.2).double(), "probabilities": u, "ones": torch.ones_like(u)}[kind]
    if masked is None:
        masked = draw(st.booleans())
    return dict(reward=(r_scale * torch.randn(T, B, generator=g, dtype=torch.float64)).to(dtype),
                cont=cont.to(dtype),
                value=(v_scale * torch.randn(T + 1, B, generator=g, dtype=torch.float64)).to(dtype),
                gamma=draw(unit_params), lam=draw(unit_params) if lam is None else lam,
                is_first=torch.rand(T + 1, B, generator=g) < 0.15 if masked else None)


@st.composite
def with_alpha(draw, case_strategy):
    """A case plus a reward scale ``alpha`` and ``seed`` (for the reward increment)."""
    return dict(draw(case_strategy), alpha=draw(st.sampled_from([1.0, -2.5, 0.1])), seed=draw(seeds))


def _pinned(T: int, B=(2,), dtype=torch.float32, gamma=0.99, lam=0.95, masked=False) -> dict:
    g = torch.Generator().manual_seed(T)
    cont = (torch.rand(T, *B, generator=g) > 0.3).to(dtype)
    is_first = torch.zeros(T + 1, *B, dtype=torch.bool)
    if masked and T >= 2:
        is_first[T // 2] = True
    return dict(reward=torch.randn(T, *B, generator=g).to(dtype), cont=cont,
                value=torch.randn(T + 1, *B, generator=g).to(dtype), gamma=gamma, lam=lam,
                is_first=is_first if masked else None)


EXAMPLES = (_pinned(15, (4,)), _pinned(15, (4,), masked=True), _pinned(1), _pinned(6, (), torch.float64),
            _pinned(5, (2, 3), gamma=1.0, lam=1.0, masked=True))


@st.composite
def truncation_cases(draw, masked: bool | None = None):
    """A case plus ``truncated`` [T, B] (at a drawn rate, every step at 1.0) and ``next_value`` [T, B]."""
    case = draw(cases(masked=masked))
    g = torch.Generator().manual_seed(draw(seeds))
    T, B = case["reward"].shape
    scale = draw(st.sampled_from([0.0, 1.0, 100.0]))
    return dict(case, truncated=torch.rand(T, B, generator=g) < draw(st.sampled_from([0.1, 0.3, 1.0])),
                next_value=(scale * torch.randn(T, B, generator=g, dtype=torch.float64)).to(case["reward"].dtype))


def _pinned_truncated(T: int, B=(3,), dtype=torch.float32) -> dict:
    """Truncations at rows 0, T//2 and T−1 of env 0 with is_first set after them, and one in env 1."""
    case = _pinned(T, B, dtype, masked=True)
    truncated = torch.zeros(T, *B, dtype=torch.bool)
    truncated[[0, T // 2, T - 1], 0] = True
    truncated[T // 3, 1] = True
    case["is_first"][[1, T // 2 + 1], 0] = True
    g = torch.Generator().manual_seed(T + 1)
    return dict(case, truncated=truncated, next_value=torch.randn(T, *B, generator=g).to(dtype))


TRUNCATED_EXAMPLES = (_pinned_truncated(12), _pinned_truncated(6, (2,), torch.float64))


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _call(impl, reward, cont, value, gamma, lam, is_first=None, truncated=None, next_value=None) -> torch.Tensor:
    kwargs = {} if is_first is None else dict(is_first=is_first)
    if truncated is not None or next_value is not None:  # the collector layout's pair
        kwargs.update(truncated=truncated, next_value=next_value)
    return impl.lambda_return(reward, cont, value, gamma, lam, **kwargs)


def tolerance(reward: torch.Tensor, value: torch.Tensor) -> float:
    """The float tolerance of LAMBDA-1 (see the module docstring): 8·(T+1)·eps·M."""
    T = reward.shape[0]
    scale = 1.0 + value.double().abs().max().item() + T * (reward.double().abs().max().item() if T else 0.0)
    return 8 * (T + 1) * torch.finfo(reward.dtype).eps * scale


def _assert_unchanged(clause: str, what: str, got: torch.Tensor, base: torch.Tensor, **inputs) -> None:
    if not torch.equal(got, base):
        idx = [int(i) for i in (got != base).nonzero()[0].tolist()]
        fail(clause, f"{what}: R{idx} = {got[tuple(idx)].item()!r}, was {base[tuple(idx)].item()!r}",
             **inputs)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_reference(impl, reward, cont, value, gamma, lam, is_first):
    got = _call(impl, reward, cont, value, gamma, lam, is_first)
    want = reference.lambda_return(reward.double(), cont.double(), value.double(), gamma, lam, is_first)
    assert_close("LAMBDA-1", "lambda_return", got, want, atol=tolerance(reward, value), reward=reward,
                 cont=cont, value=value, gamma=gamma, lam=lam, is_first=is_first)


def check_linear(impl, reward, cont, value, gamma, lam, is_first, alpha, seed):
    delta = noise_like(reward, torch.Generator().manual_seed(seed))
    shifted = (reward.double() + alpha * delta.double()).to(reward.dtype)
    got = _call(impl, shifted, cont, value, gamma, lam, is_first).double()
    want = (_call(impl, reward, cont, value, gamma, lam, is_first).double()
            + alpha * _call(impl, delta, cont, torch.zeros_like(value), gamma, lam, is_first).double())
    tol = 3 * tolerance(shifted.abs() + reward.abs() + abs(alpha) * delta.abs(), value)
    assert_close("LAMBDA-2", "R(r + α·Δ) vs R(r) + α·R(Δ; v=0)", got, want, atol=tol, reward=reward,
                 delta=delta, alpha=alpha, cont=cont, value=value, gamma=gamma, lam=lam)


def _perturb_after(row: int, reward, cont, value, is_first, seed, huge: bool):
    """Fresh values in every row after ``row`` (values and flags of s_{row+1} on); rewards and values the
    dtype's largest if ``huge``."""
    g = torch.Generator().manual_seed(seed)
    r, c, v = reward.clone(), cont.clone(), value.clone()
    r[row + 1:] = perturbation(r[row + 1:], g, huge)
    c[row + 1:] = torch.rand(c[row + 1:].shape, generator=g).to(c.dtype)
    v[row + 1:] = perturbation(v[row + 1:], g, huge)
    f = None if is_first is None else is_first.clone()
    if f is not None:
        f[row + 2:] = torch.rand(f[row + 2:].shape, generator=g) < 0.5
    return r, c, v, f


def _cut(clause, huge, impl, reward, cont, value, gamma, lam, is_first, pos, seed):
    cont = cont.clone()
    cont[pos] = 0  # s_{pos+1} is terminal in every env
    base = _call(impl, reward, cont, value, gamma, lam, is_first)
    r, c, v, f = _perturb_after(pos, reward, cont, value, is_first, seed, huge)
    if f is not None:
        f[pos + 1] = torch.rand(f[pos + 1].shape, generator=torch.Generator().manual_seed(seed)) < 0.5
    got = _call(impl, r, c, v, gamma, lam, f)
    _assert_unchanged(clause, f"cont[{pos}] = 0, then rows after {pos} changed{OVERFLOW_NOTE * huge}",
                      got[: pos + 1], base[: pos + 1], reward=reward, cont=cont, value=value, gamma=gamma, lam=lam)


def check_cut(impl, **case):
    _cut("LAMBDA-3", False, impl, **case)


def check_cut_overflow(impl, **case):
    _cut("LAMBDA-13", True, impl, **case)


def check_lambda_one(impl, reward, cont, value, gamma, lam, is_first):
    r, c, v = reward.double(), cont.double(), value.double()
    T = r.shape[0]
    want = torch.empty_like(r)  # [T, B]
    for t in range(T):
        discount, total = torch.ones_like(r[0]), torch.zeros_like(r[0])  # [B]
        for k in range(t, T):
            total += discount * r[k]
            discount = discount * gamma * c[k]
        want[t] = total + discount * v[T]
    got = _call(impl, reward, cont, value, gamma, 1.0)
    assert_close("LAMBDA-4", "lambda_return with λ = 1 vs the discounted return plus bootstrap", got, want,
                 atol=tolerance(reward, value), reward=reward, cont=cont, value=value, gamma=gamma)


def check_lambda_zero(impl, reward, cont, value, gamma, lam, is_first):
    want = reward.double() + gamma * cont.double() * value[1:].double()  # [T, B]
    tol = 8 * torch.finfo(reward.dtype).eps * (1 + reward.double().abs().max().item()
                                               + value.double().abs().max().item())
    assert_close("LAMBDA-5", "lambda_return with λ = 0 vs r_t + γ·c_t·v_{t+1}",
                 _call(impl, reward, cont, value, gamma, 0.0), want, atol=tol, reward=reward, cont=cont,
                 value=value, gamma=gamma)


def _episode_start(clause, huge, impl, reward, cont, value, gamma, lam, is_first, pos, seed):
    is_first = is_first.clone()
    is_first[pos + 1] = True  # every env resets after transition pos
    base = _call(impl, reward, cont, value, gamma, lam, is_first)
    r, c, v, f = _perturb_after(pos, reward, cont, value, is_first, seed, huge)
    got = _call(impl, r, c, v, gamma, lam, f)
    _assert_unchanged(clause, f"is_first[{pos + 1}] set, then rows from {pos + 1} on changed{OVERFLOW_NOTE * huge}",
                      got[: pos + 1], base[: pos + 1], reward=reward, cont=cont, value=value, gamma=gamma,
                      lam=lam, is_first=is_first)


def check_is_first_isolates(impl, **case):
    _episode_start("LAMBDA-6", False, impl, **case)


def check_is_first_overflow(impl, **case):
    _episode_start("LAMBDA-14", True, impl, **case)


def check_is_first_rule(impl, reward, cont, value, gamma, lam, is_first):
    got = _call(impl, reward, cont, value, gamma, lam, is_first)
    cut = is_first[1:]  # [T, B]: transition t crosses a reset
    if not torch.equal(got[cut], reward[cut]):
        idx = [int(i) for i in (cut & (got != reward)).nonzero()[0].tolist()]
        fail("LAMBDA-7", f"is_first[{idx[0] + 1}] set: R{idx} = {got[tuple(idx)].item()!r}, expected "
                         f"r{idx} = {reward[tuple(idx)].item()!r}", cont=cont, value=value, gamma=gamma,
             lam=lam, is_first=is_first)
    flipped = is_first.clone()
    flipped[0] = ~flipped[0]
    _assert_unchanged("LAMBDA-7", "is_first[0] flipped", _call(impl, reward, cont, value, gamma, lam,
                                                               flipped), got, is_first=is_first)


def check_shape(impl, reward, cont, value, gamma, lam, is_first):
    out = _call(impl, reward, cont, value, gamma, lam, is_first)
    if out.shape != reward.shape or out.dtype != reward.dtype:
        fail("LAMBDA-8", f"R has shape {tuple(out.shape)} dtype {out.dtype}, expected "
                         f"{tuple(reward.shape)} {reward.dtype}", value_shape=tuple(value.shape))


def _truncated_tolerance(case: dict) -> float:
    return tolerance(case["reward"], torch.cat([case["value"], case["next_value"]]))


def check_truncation_reference(impl, **case):
    got = _call(impl, **case)
    floats = ("reward", "cont", "value", "next_value")
    want = reference.lambda_return(**{k: v.double() if k in floats else v for k, v in case.items()})
    assert_close("LAMBDA-15", "lambda_return with truncated steps", got, want, atol=_truncated_tolerance(case),
                 **case)


def check_truncation_isolates(impl, pos, seed, **case):
    truncated = case["truncated"].clone()
    truncated[pos] = True  # every env's episode is cut after transition pos
    case = dict(case, truncated=truncated)
    base = _call(impl, **case)
    r, c, v, f = _perturb_after(pos, case["reward"], case["cont"], case["value"], case["is_first"], seed, False)
    g = torch.Generator().manual_seed(seed + 1)
    if f is not None:
        f[pos + 1] = torch.rand(f[pos + 1].shape, generator=g) < 0.5
    t2, b2 = truncated.clone(), case["next_value"].clone()
    t2[pos + 1:] = torch.rand(t2[pos + 1:].shape, generator=g) < 0.5
    b2[pos + 1:] = noise_like(b2[pos + 1:], g)
    got = _call(impl, r, c, v, case["gamma"], case["lam"], f, t2, b2)
    _assert_unchanged("LAMBDA-16", f"truncated[{pos}] set, then rows after {pos} changed (v and is_first from row "
                                   f"{pos + 1} on)", got[: pos + 1], base[: pos + 1], **case)


def check_truncated_terminal(impl, pos, seed, **case):
    cont, truncated = case["cont"].clone(), case["truncated"].clone()
    cont[pos], truncated[pos] = 0, True
    both = dict(case, cont=cont, truncated=truncated)
    cleared = dict(both, truncated=truncated & (cont != 0))
    _assert_unchanged("LAMBDA-17", f"cont[{pos}] = 0 and truncated[{pos}] set (and wherever the case has both), vs "
                                   "truncated cleared there", _call(impl, **both), _call(impl, **cleared), **both)


def check_next_value_ignored(impl, seed, **case):
    ignored = ~case["truncated"] | (case["cont"] == 0)  # [T, B]
    moved = case["next_value"].clone()
    moved[ignored] = noise_like(moved[ignored], torch.Generator().manual_seed(seed))
    _assert_unchanged("LAMBDA-18", "next_value changed where truncated is not set or cont is 0",
                      _call(impl, **dict(case, next_value=moved)), _call(impl, **case), **case)


def check_concatenation(impl, ends, seed, **case):
    g = torch.Generator().manual_seed(seed)
    T, B = case["reward"].shape
    cont = case["cont"].clone()
    cont[ends == TERMINAL] = 0
    truncated = ends == TRUNCATED
    first = torch.zeros(T + 1, B, dtype=torch.bool) if case["is_first"] is None else case["is_first"].clone()
    first[1:] |= (ends != 0) & (torch.rand(T, B, generator=g) < 0.5)  # a reset after an end, flagged or not
    batch = dict(case, cont=cont, is_first=first, truncated=truncated,
                 next_value=noise_like(case["reward"], g))
    nxt = torch.where(truncated, batch["next_value"], case["value"][1:])  # [T, B]: what row t bootstraps from

    def alone(col, a, z):
        value = torch.cat([case["value"][a:z + 1, col], nxt[z:z + 1, col]]).unsqueeze(1)  # [L+1, 1]
        f = first[a:z + 2, col].clone()
        f[-1] &= ~truncated[z, col]  # the truncation's bootstrap, not the reset's cut
        return (_call(impl, case["reward"][a:z + 1, col:col + 1], cont[a:z + 1, col:col + 1], value,
                      case["gamma"], case["lam"], f.unsqueeze(1)),)

    tol = 2 * _truncated_tolerance(batch)
    done = (cont == 0) | truncated | first[1:]
    assert_concatenation("LAMBDA-19", ("R",), (_call(impl, **batch),), alone, done, lambda *_: (tol,), **batch)


def _bad_input_case() -> dict:
    return dict(reward=torch.zeros(5, 3), cont=torch.ones(5, 3), value=torch.zeros(6, 3),
                is_first=torch.zeros(6, 3, dtype=torch.bool), gamma=0.99, lam=0.95)


def _call_case(impl, case: dict) -> torch.Tensor:
    return impl.lambda_return(case["reward"], case["cont"], case["value"], case["gamma"], case["lam"],
                              is_first=case["is_first"])


BAD = BadInput("lambda_return", "LAMBDA-9", "LAMBDA-10", "LAMBDA-11", _bad_input_case, _call_case)


def _bad_truncation_case() -> dict:
    return dict(_bad_input_case(), truncated=torch.zeros(5, 3, dtype=torch.bool), next_value=torch.zeros(5, 3))


def check_rejects_truncation(impl, problem, name):
    rejects_truncation("LAMBDA-20", "lambda_return", lambda case: _call(impl, **case), _bad_truncation_case,
                       problem, name)


def check_scalar_hyperparameters(impl, reward, cont, value, gamma, lam, is_first):
    case = dict(reward=reward, cont=cont, value=value, is_first=is_first)
    check_scalar_types("LAMBDA-12", lambda **p: _call_case(impl, dict(case, **p)), dict(gamma=gamma, lam=lam),
                       reward=reward, cont=cont, value=value)


PROPERTIES = (
    Property("LAMBDA-1", check_reference, cases(), EXAMPLES, INTERFACE),
    Property("LAMBDA-2", check_linear, with_alpha(cases()), requires=INTERFACE),
    Property("LAMBDA-3", check_cut, with_position(cases(), "reward"), requires=INTERFACE),
    Property("LAMBDA-4", check_lambda_one, cases(masked=False, lam=1.0), requires=INTERFACE),
    Property("LAMBDA-5", check_lambda_zero, cases(masked=False, lam=0.0), requires=INTERFACE),
    Property("LAMBDA-6", check_is_first_isolates, with_position(cases(masked=True), "reward"), requires=INTERFACE),
    Property("LAMBDA-7", check_is_first_rule, cases(masked=True),
             tuple(e for e in EXAMPLES if e["is_first"] is not None), INTERFACE),
    Property("LAMBDA-8", check_shape, cases(), EXAMPLES + (_pinned(0),), INTERFACE),
    Property("LAMBDA-9", BAD.rejects_shape,
             st.sampled_from([dict(name="cont", shape=(5, 2), dtype=torch.float32),
                              dict(name="cont", shape=(5, 3), dtype=torch.float64),
                              dict(name="value", shape=(5, 3), dtype=torch.float32),
                              dict(name="value", shape=(6,), dtype=torch.float32),
                              dict(name="is_first", shape=(5, 3), dtype=torch.bool)]),
             requires=INTERFACE, max_examples=5),
    Property("LAMBDA-10", BAD.rejects_param, bad_discounting("gamma", "lam"), requires=INTERFACE,
             max_examples=4),
    Property("LAMBDA-11", BAD.rejects_value,
             st.builds(lambda nb, t, b: dict(name=nb[0], bad=nb[1], t=t, b=b),
                       st.sampled_from([("reward", float("nan")), ("value", float("nan")),
                                        ("value", float("inf")), ("cont", float("nan")), ("cont", 1.5),
                                        ("cont", -0.5), ("is_first", 0.5)]),
                       st.integers(0, 4), st.integers(0, 2)),
             (dict(name="cont", bad=float("nan"), t=4, b=2),), INTERFACE, max_examples=10),
    Property("LAMBDA-12", check_scalar_hyperparameters, cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("LAMBDA-13", check_cut_overflow, with_position(cases(), "reward"), requires=INTERFACE),
    Property("LAMBDA-14", check_is_first_overflow, with_position(cases(masked=True), "reward"), requires=INTERFACE),
    Property("LAMBDA-15", check_truncation_reference, truncation_cases(), TRUNCATED_EXAMPLES, INTERFACE),
    Property("LAMBDA-16", check_truncation_isolates, with_position(truncation_cases(), "reward"), requires=INTERFACE),
    Property("LAMBDA-17", check_truncated_terminal, with_position(truncation_cases(), "reward"), requires=INTERFACE),
    Property("LAMBDA-18", check_next_value_ignored, st.builds(lambda c, s: dict(c, seed=s), truncation_cases(), seeds),
             (dict(TRUNCATED_EXAMPLES[0], seed=0),), INTERFACE),
    Property("LAMBDA-19", check_concatenation, with_ends(cases(), "reward"),
             (dict(_pinned(9, (3,)), ends=pinned_ends(9), seed=9),), INTERFACE),
    Property("LAMBDA-20", check_rejects_truncation, TRUNCATION_ERRORS, requires=INTERFACE, max_examples=7),
)

CHANGES = (
    Change("1.0", "first versioned release"),
    Change("1.1", "the collector layout: optional truncated and next_value (a truncated step bootstraps from V(s'_t) "
                  "and ends its episode), and the concatenation clause",
           added=("LAMBDA-15", "LAMBDA-16", "LAMBDA-17", "LAMBDA-18", "LAMBDA-19", "LAMBDA-20")),
)

CONTRACT = Contract("lambda_return", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE,
                    changes=CHANGES)
