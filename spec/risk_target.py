"""Contract ``risk_target``: the horizon-truncated, episode-masked discounted cost target, time-major [L, B].

Source: the PPOLagSem design (PPOLagSem), §5.2 "Risk Prediction" (g_t = Σ_{k=0}^{H−1} (γ_c)^k c_{t+k}, stop at
terminal or horizon), §29 "Backward Risk Target Rollout" and §29.2.1 "Episode-Aware Masking", §16.2 and
§26 (what the risk buffer holds).

Inputs (the per-step cost stream)
---------------------------------
    cost    c_t [L, B]   instantaneous cost of step t (B: any trailing shape, or none)
    done    d_t [L, B]   step t is the last step of its episode (bool, or 0/1 in any dtype)
    gamma   γ_c ∈ [0, 1],   horizon H: int >= 1

Definition
----------
    m_t = min(H, L − t, e_t − t + 1),   e_t = the first s >= t with d_s (∞ if none)
    g_t = Σ_{k=0}^{m_t − 1} γ_c^k · c_{t+k}                                              → g [L, B]

The window starts at t, holds at most H steps, stops after the last step of the episode (a done step
contributes its own cost and nothing after it) and at the end of the buffer (no bootstrap of the tail:
seed §13 "risk targets truncated"). γ_c^0 = 1, also for γ_c = 0 (then g = c). Equivalently the window
slides: g_t = c_t + γ_c·(1 − d_t)·g_{t+1} − γ_c^H·[no done in t..t+H−1]·c_{t+H} (c_{t+H} := 0 past L).

The seed's backward pass (§29.2.1) resets its accumulator whenever ``look >= H``: that cuts the buffer
into blocks of H steps and gives g_t only the costs up to the end of t's block, so it equals the
definition only for L <= H (or with a done at every block end); its "forward refinement" is not given.
The definition above is the sliding window the seed's formula states; tests/meta plants the block reset.

Reading at captured steps
-------------------------
The seed's risk buffer keeps one entry per capture (an embedding e_j taken at env step t_j, one or one
per env with spatial batching, §26), with the cost of that step. The target of entry j is g_{t_j} of the
*per-step* stream: compute g on every step's cost and done, then read it at the captured steps
(:func:`at_captures`). Applying the formula to the captured subsequence instead is the same only when
every step is captured (capture_interval 1): with an interval k > 1 it would sum H captures (k·H steps),
drop the costs between captures, and miss dones that fall between two captures.

Conventions
-----------
* dtype: cost is float32/float64 (or float16/bfloat16), g has its dtype; the reference computes in
  float64. Empty input (L = 0, or any zero-sized dim) gives an empty g of cost's shape and dtype (the
  seed returns None; an empty tensor keeps shapes uniform and the caller skips on numel() == 0).
* Bad input is rejected before any work, naming the argument: done's shape != cost's shape (the seed
  left-pads a short done deque with False: here that is the caller's explicit job), non-floating cost,
  γ_c outside [0, 1], H not an int >= 1 (the seed's H = 0 gives all zeros; configuration forbids it),
  NaN/±Inf costs (the seed sanitizes with nan_to_num and counts Risk/NanEvents: that guard belongs to the
  caller, before this function) and flags other than 0/1, with the first offending index.
* Error bound (RISK-1, RISK-7): with G_t = Σ_{k<m_t} γ_c^k·|c_{t+k}| and C_t = max_{k<m_t} |c_{t+k}|,
      |g_t − g_t^exact| <= (2H + 8)·eps·G_t + 2·(H + 1)·tiny·(1 + C_t),
  eps, tiny = finfo(cost.dtype).eps, .tiny. It depends on the window only, never on L: an implementation
  may add only the terms of t's window, with non-negative weights (a chain of at most ~3H roundings: γ_c
  rounded to the dtype, one multiply and one add per step). The tiny term covers underflow of γ_c^k. The
  difference of two prefix sums of γ^k-scaled costs violates it on long buffers (its error scales with
  everything summed before t, and γ^{−t} over/underflows); so does a running sum that subtracts the cost
  leaving the window (its error carries everything that ever entered). Clauses about what must *not*
  influence g (beyond the horizon, after a done) are bit-exact.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from rlspec.reference import risk_target as reference  # the oracle
from rlspec.spec.core import Contract, Property, by_category, fail
from rlspec.spec.returns import (
    OVERFLOW_NOTE,
    BadInput,
    assert_within,
    overflow_rationale,
    perturbation,
    seeds,
    unit_params,
    with_position,
)
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "RISK-1": "g_t = Σ_{k<m_t} γ^k·c_{t+k} (window: H steps, to the episode's last step, to the buffer's "
              "end) vs float64 reference, within (2H+8)·eps·G_t + 2(H+1)·tiny·(1+C_t)",
    "RISK-2": "horizon cap: costs and flags H or more steps ahead of t do not change g_t (bit for bit)",
    "RISK-3": "no leakage across done: if done_t, nothing after t changes g_0..g_t, and g_t = c_t exactly",
    "RISK-4": "H = 1 gives g = c exactly",
    "RISK-5": "the window slides: g_t = c_t + γ·(1−d_t)·g_{t+1} − γ^H·[no done in t..t+H−1]·c_{t+H} "
              "(no block resets)",
    "RISK-6": "empty input (L = 0 or a zero-sized batch) gives an empty g of cost's shape and dtype",
    "RISK-7": "float32 stability: on a long buffer (L = 8192, cost spikes at both ends) the RISK-1 bound "
              "holds, independent of L",
    "RISK-8": "shape and dtype: g has cost's shape [L, ...] and dtype",
    "RISK-9": "a done whose shape differs from cost's, or a non-floating cost, is rejected naming the argument",
    "RISK-10": "gamma outside [0, 1] or horizon not an int >= 1 is rejected naming the argument and the value",
    "RISK-11": "NaN/Inf costs and non-0/1 done flags are rejected naming the argument and the index",
    "RISK-12": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "RISK-13": "inputs that require grad are accepted and the target carries no gradient (it is a regression target)",
    "RISK-14": "overflow after a done stays there: with done_t and costs after t at the dtype's largest finite value "
               "(their sums overflow to inf), g_0..g_t are bit-identical, never NaN",
}

CATEGORIES = by_category(
    maths=("RISK-1", "RISK-2", "RISK-3", "RISK-4", "RISK-5", "RISK-6", "RISK-7", "RISK-8", "RISK-13"),
    robustness=("RISK-12", "RISK-14"),
    validation=("RISK-9", "RISK-10", "RISK-11"),
)
RATIONALE = {
    "RISK-12": SCALAR_RATIONALE,
    "RISK-14": overflow_rationale("RISK-3", "a done"),
}

INTERFACE = ("risk_target",)
"""
risk_target(cost [L, B], done [L, B] bool | 0/1, gamma: float, horizon: int) -> g [L, B]
"""


# --------------------------------------------------------------------------------------------------
# The error bound (see the module docstring)
# --------------------------------------------------------------------------------------------------
def _windows(x: torch.Tensor, done: torch.Tensor, gamma: float, horizon: int):
    """(Σ_k γ^k·x_{t+k}, max_k |x_{t+k}|) over each t's window, in float64, vectorized: [L, ...] each.
    O(L·H) memory: used for tolerances and the long-buffer truth, never as an implementation."""
    L = x.shape[0]
    H = min(horizon, L)
    pad = torch.zeros((H,) + tuple(x.shape[1:]), dtype=torch.float64)
    xs = torch.cat([x.double(), pad]).unfold(0, H, 1)[:L]  # [L, ..., H]: x_{t+k}
    ds = torch.cat([done.double(), pad]).unfold(0, H, 1)[:L]  # [L, ..., H]
    ended_before = torch.cumsum(ds, -1) - ds > 0  # a done at t..t+k−1: step t+k is outside t's window
    weights = torch.where(ended_before, 0.0, gamma ** torch.arange(H, dtype=torch.float64))  # [L, ..., H]
    return (weights * xs).sum(-1), torch.where(ended_before, 0.0, xs.abs()).amax(-1)


def error_bound(cost: torch.Tensor, done: torch.Tensor, gamma: float, horizon: int) -> torch.Tensor:
    """The RISK-1 bound per element [L, ...]: (2H+8)·eps·G_t + 2(H+1)·tiny·(1 + C_t)."""
    if cost.numel() == 0:
        return torch.zeros(cost.shape, dtype=torch.float64)
    info = torch.finfo(cost.dtype)
    G, C = _windows(cost.double().abs(), done, gamma, horizon)
    return (2 * horizon + 8) * info.eps * G + 2 * (horizon + 1) * info.tiny * (1 + C)



# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
@st.composite
def cases(draw, horizon: int | None = None, min_L: int = 1):
    """cost [L, B] (non-negative, signed, with spikes or all zero) and done [L, B] at a drawn rate;
    H often below L (windows cross block boundaries), sometimes above."""
    g = torch.Generator().manual_seed(draw(seeds))
    L, B = draw(st.integers(min_L, 40)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    kind = draw(st.sampled_from(["nonnegative", "signed", "spikes", "zero"]))
    u = torch.rand(L, B, generator=g, dtype=torch.float64)
    cost = {"nonnegative": u, "signed": torch.randn(L, B, generator=g, dtype=torch.float64),
            "spikes": torch.where(u < 0.1, 1e4 * u, u * 1e-2), "zero": 0 * u}[kind]
    p_done = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5]))
    H = draw(st.one_of(st.integers(1, 6), st.integers(1, 48))) if horizon is None else horizon
    return dict(cost=cost.to(dtype), done=torch.rand(L, B, generator=g) < p_done, gamma=draw(unit_params),
                horizon=H)


def _pinned(L: int, B=(2,), dtype=torch.float32, gamma=0.99, horizon=4, done_at=()) -> dict:
    g = torch.Generator().manual_seed(L)
    done = torch.zeros(L, *B, dtype=torch.bool)
    for t in done_at:
        done[t] = True
    return dict(cost=torch.rand(L, *B, generator=g).to(dtype), done=done, gamma=gamma, horizon=horizon)


EXAMPLES = (_pinned(20, (3,), horizon=4, done_at=(0, 9)),  # L > H, done at t = 0
            _pinned(10, (), torch.float64, gamma=1.0, horizon=3, done_at=(9,)),  # done at t = L−1
            _pinned(5, horizon=64),  # H > L: the window ends with the buffer
            _pinned(1, horizon=1), _pinned(12, (2, 2), gamma=0.0, horizon=5, done_at=(4,)))


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


ARGS = ("cost", "done", "gamma", "horizon")


def _call(impl, case: dict) -> torch.Tensor:
    return impl.risk_target(*(case[k] for k in ARGS))


def _inputs(case: dict) -> dict:
    return {k: case[k] for k in ARGS}


def _assert_unchanged(clause: str, what: str, got: torch.Tensor, base: torch.Tensor, rows: slice,
                      case: dict) -> None:
    if not torch.equal(got[rows], base[rows]):
        idx = [int(i) for i in (got[rows] != base[rows]).nonzero()[0].tolist()]
        idx[0] += rows.start or 0
        fail(clause, f"{what}: g{idx} = {got[tuple(idx)].item()!r}, was {base[tuple(idx)].item()!r}",
             **_inputs(case))


def _perturb_from(row: int, case: dict, seed: int, huge: bool = False) -> dict:
    """Fresh costs and flags at steps row, row+1, ...; the costs the dtype's largest if ``huge``."""
    g = torch.Generator().manual_seed(seed)
    cost, done = case["cost"].clone(), case["done"].clone()
    cost[row:] = perturbation(cost[row:], g, huge)
    done[row:] = torch.rand(done[row:].shape, generator=g) < 0.3
    return dict(case, cost=cost, done=done)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_reference(impl, **case):
    want = reference.risk_target(case["cost"].double(), case["done"], case["gamma"], case["horizon"])
    assert_within("RISK-1", "risk_target", _call(impl, case), want, error_bound(**case), **_inputs(case))


def check_horizon_cap(impl, pos, seed, **case):
    base = _call(impl, case)
    beyond = pos + case["horizon"]  # first step outside the windows of steps 0..pos
    if beyond >= case["cost"].shape[0]:
        return
    _assert_unchanged("RISK-2", f"costs and flags from step {beyond} = {pos} + H on changed",
                      _call(impl, _perturb_from(beyond, case, seed)), base, slice(0, pos + 1), case)


def _no_leak(clause, huge, impl, pos, seed, **case):
    case = dict(case, done=case["done"].clone())
    case["done"][pos] = True  # every env's episode ends at step pos
    base = _call(impl, case)
    if not huge and not torch.equal(base[pos], case["cost"][pos]):
        fail(clause, f"done[{pos}] set: g[{pos}] = {base[pos].tolist()!r}, expected c[{pos}] = "
                     f"{case['cost'][pos].tolist()!r} exactly", **_inputs(case))
    _assert_unchanged(clause, f"done[{pos}] set, then steps after {pos} changed{OVERFLOW_NOTE * huge}",
                      _call(impl, _perturb_from(pos + 1, case, seed, huge)), base, slice(0, pos + 1), case)


def check_no_leak(impl, **case):
    _no_leak("RISK-3", False, impl, **case)


def check_overflow_no_leak(impl, **case):
    _no_leak("RISK-14", True, impl, **case)


def check_horizon_one(impl, **case):
    got = _call(impl, dict(case, horizon=1))
    if not torch.equal(got, case["cost"]):
        idx = [int(i) for i in (got != case["cost"]).nonzero()[0].tolist()]
        fail("RISK-4", f"H = 1: g{idx} = {got[tuple(idx)].item()!r}, expected c{idx} = "
                       f"{case['cost'][tuple(idx)].item()!r}", **_inputs(dict(case, horizon=1)))


def check_slides(impl, **case):
    g = _call(impl, case).double()
    c, d, gamma, H = case["cost"].double(), case["done"], case["gamma"], case["horizon"]
    L = c.shape[0]
    zero = torch.zeros((1,) + tuple(c.shape[1:]), dtype=torch.float64)
    next_g = torch.cat([g[1:], zero])  # [L, B]: g_{t+1}, 0 past the end
    leaving = torch.cat([c[H:], torch.zeros((min(H, L),) + tuple(c.shape[1:]), dtype=torch.float64)])  # c_{t+H}
    dones = torch.cat([zero, torch.cumsum(d.double(), 0)])  # [L+1, B]: dones before step t
    end = (torch.arange(L) + H).clamp(max=L)  # [L]: t + H, capped at the buffer's end
    no_done = dones[end] == dones[:L]  # [L, B]: no done in t..t+H−1
    want = c + gamma * (~d).double() * next_g - gamma ** H * no_done.double() * leaving
    bound = error_bound(**case)
    assert_within("RISK-5", "g_t vs c_t + γ·(1−d_t)·g_{t+1} − γ^H·[no done in t..t+H−1]·c_{t+H} (the window "
                            "slides)", g, want, 2 * bound + torch.cat([bound[1:], zero]) * 2, **_inputs(case))


def check_empty(impl, shape, dtype):
    case = dict(cost=torch.zeros(shape, dtype=dtype), done=torch.zeros(shape, dtype=torch.bool), gamma=0.99,
                horizon=8)
    got = _call(impl, case)
    if not isinstance(got, torch.Tensor) or got.shape != case["cost"].shape or got.dtype != dtype:
        fail("RISK-6", f"empty input {list(shape)} {dtype}: got {got!r}, expected an empty tensor of shape "
                       f"{tuple(shape)} and dtype {dtype}")


def long_buffer(gamma: float, L: int = 8192, horizon: int = 64) -> dict:
    """float32 costs ~U(0, 1) with stretches of 1e4 at both ends, and rare dones away from them."""
    g = torch.Generator().manual_seed(8192)
    cost = torch.rand(L, generator=g, dtype=torch.float64)
    cost[:256] *= 1e4  # large early: breaks differences of prefix sums
    cost[-256:] *= 1e4  # large late: breaks a backward running sum that subtracts the leaving cost
    done = torch.rand(L, generator=g) < 1e-3
    done[:512] = done[-512:] = False  # no reset clears the error a spike leaves behind in a running sum
    return dict(cost=cost.float(), done=done, gamma=gamma, horizon=horizon)


def check_long_buffer(impl):
    for gamma in (1.0, 0.99):
        case = long_buffer(gamma)
        want, _ = _windows(case["cost"].double(), case["done"], gamma, case["horizon"])
        assert_within("RISK-7", f"risk_target over L = {case['cost'].shape[0]} float32 steps, γ = {gamma}, "
                                f"H = {case['horizon']}", _call(impl, case), want, error_bound(**case),
                      gamma=gamma, horizon=case["horizon"])


def check_shape(impl, **case):
    out = _call(impl, case)
    if out.shape != case["cost"].shape or out.dtype != case["cost"].dtype:
        fail("RISK-8", f"g has shape {tuple(out.shape)} dtype {out.dtype}, expected "
                       f"{tuple(case['cost'].shape)} {case['cost'].dtype}")


def _bad_input_case() -> dict:
    return dict(cost=torch.zeros(6, 3), done=torch.zeros(6, 3, dtype=torch.bool), gamma=0.99, horizon=4)


BAD = BadInput("risk_target", "RISK-9", "RISK-10", "RISK-11", _bad_input_case, _call)


def check_scalar_hyperparameters(impl, **case):
    check_scalar_types("RISK-12", lambda **p: _call(impl, dict(case, **p)),
                       dict(gamma=case["gamma"], horizon=case["horizon"]), **_inputs(case))


def check_no_grad(impl, **case):
    cost = case["cost"].detach().clone().requires_grad_()
    got = _call(impl, dict(case, cost=cost))
    if got.requires_grad or got.grad_fn is not None:
        fail("RISK-13", "the target requires grad: a regression target must be detached", **_inputs(case))
    assert_within("RISK-13", "target for a cost that requires grad", got, reference.risk_target(
        case["cost"].double(), case["done"], case["gamma"], case["horizon"]),
        error_bound(case["cost"], case["done"], case["gamma"], case["horizon"]), **_inputs(case))


PROPERTIES = (
    Property("RISK-1", check_reference, cases(), EXAMPLES, INTERFACE),
    Property("RISK-2", check_horizon_cap, with_position(cases(), "cost"), requires=INTERFACE),
    Property("RISK-3", check_no_leak, with_position(cases(), "cost"), requires=INTERFACE),
    Property("RISK-4", check_horizon_one, cases(), EXAMPLES, INTERFACE),
    Property("RISK-5", check_slides, cases(), EXAMPLES, INTERFACE),
    Property("RISK-6", check_empty,
             st.sampled_from([dict(shape=(0,), dtype=torch.float32), dict(shape=(0, 4), dtype=torch.float64),
                              dict(shape=(5, 0), dtype=torch.float32)]),
             requires=INTERFACE, max_examples=3),
    Property("RISK-7", check_long_buffer, requires=INTERFACE),
    Property("RISK-8", check_shape, cases(), EXAMPLES, INTERFACE),
    Property("RISK-9", BAD.rejects_shape,
             st.sampled_from([dict(name="done", shape=(5, 3), dtype=torch.bool),
                              dict(name="done", shape=(6,), dtype=torch.bool),
                              dict(name="cost", shape=(6, 3), dtype=torch.int64)]),
             requires=INTERFACE, max_examples=3),
    Property("RISK-10", BAD.rejects_param,
             st.sampled_from([dict(name="gamma", value=1.5), dict(name="gamma", value=-0.1),
                              dict(name="gamma", value=float("nan")), dict(name="horizon", value=0),
                              dict(name="horizon", value=2.5), dict(name="horizon", value=True)]),
             requires=INTERFACE, max_examples=6),
    Property("RISK-11", BAD.rejects_value,
             st.builds(lambda nb, t, b: dict(name=nb[0], bad=nb[1], t=t, b=b),
                       st.sampled_from([("cost", float("nan")), ("cost", float("inf")), ("cost", float("-inf")),
                                        ("done", 0.5), ("done", float("nan")), ("done", 2.0)]),
                       st.integers(0, 5), st.integers(0, 2)),
             (dict(name="cost", bad=float("nan"), t=5, b=2),), INTERFACE, max_examples=8),
    Property("RISK-12", check_scalar_hyperparameters, cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("RISK-13", check_no_grad, cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("RISK-14", check_overflow_no_leak, with_position(cases(), "cost"), requires=INTERFACE),
)

CONTRACT = Contract("risk_target", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
