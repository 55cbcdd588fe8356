"""Contract ``modulation``: the risk-quantile scale M of the Lagrange multiplier's learning rate (PPOLagSem).

Source: the PPOLagSem design §4.0.5 (formula), §4.0.5.1 (episode-count gate), §4.0.5.3 (pseudocode), §5.3, §15.

Formula (one call over the recent risk-head predictions ĝ [N], any shape, flattened)
-------------------------------------------------------------------------------------
    F     = {ĝ_i : ĝ_i finite}                  n = |F|           (NaN / ±Inf dropped, never used)
    p     = threshold_percentile / 100
    q_p   = Quantile_p(F)                         linear interpolation (``torch.quantile``)
    μ     = (1/n) Σ_{ĝ ∈ F} ĝ                     the mean over the *same* finite set (§4.0.5 "ḡ")
    s     = max(q_p / slope, ε)                   ε = 1e-6
    a     = clip((μ − q_p) / s, −20, 20)          the normalized gap
    M     = 1 / (1 + α · σ(a))                    σ(a) = 1 / (1 + e^{−a}),  α = alpha_modulation

Gates, in this order (§4.0.5.3):
    enable is False                              → None        (semantics disabled: no scale at all)
    episodes_completed < min_episodes            → 1.0         (checked before any prediction is read)
    n < 10                                       → 1.0
    q_p or μ non-finite (overflow)               → 1.0
    M non-finite                                 → 1.0

M multiplies the base λ learning rate (contract ``lagrange``); M ∈ (0, 1], damping under high relative
risk (§4.0.5: "conservative"; M = 1 + α·g would be the *accelerating* variant the seed rejects, §4.0.5.4).

Conventions
-----------
* The seed states the slope proxy two ways. §4.0.5 and the issue: s = max(q_p/slope, ε). The pseudocode
  (§4.0.5.3): s = (q_p/slope if |q_p| > tiny else 1) + 1e-6, which for q_p < 0 gives a *negative* s and
  flips the gap's sign. Risk predictions are discounted costs (≥ 0 in truth, but a regression head can
  go below 0), so the spec takes max(q_p/slope, ε): s > 0 always, and a negative q_p gives the
  largest-magnitude normalized gap, clipped to ±20.
* μ is the mean of the finite predictions (pseudocode: ``preds = preds[isfinite(preds)]`` then
  ``preds.mean()``), not of the raw buffer.
* "Non-finite statistic" can only arise from overflow (finite inputs whose sum or gap exceeds the dtype):
  an implementation may overflow or not, so the spec accepts either the formula's value or the 1.0
  fallback there, and never anything else (never NaN).

Interface and dtypes
--------------------
    modulation_scale(preds, episodes_completed, *, enable=True, min_episodes=10,
                     threshold_percentile=60.0, alpha=1.0, slope=1.0) -> Tensor | None
``preds`` is a floating tensor of any shape (flattened to [N]); the result is a 0-d floating tensor
(reference: float64 from float64 statistics; fast: float32, or float64 for float64 input, on preds'
device, with no host synchronization). The seed gives the default 10 for ``modulation_min_episodes``
and the example 60 for ``threshold_percentile``; α and slope have no seed default (1.0 here).
Bad configuration is rejected before anything is read, naming the argument: threshold_percentile
outside (0, 100), alpha < 0 or non-finite, slope <= 0 or non-finite, negative episode counts,
non-floating preds.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.modulation import CLIP, DEFAULTS, EPS, MIN_FINITE
from rlspec.spec.core import Contract, Property, by_category, expect_rejection, fail
from rlspec.spec.power import defaults_check, with_omitted
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "MOD-1": "M = 1/(1+α·σ(clip((μ−q_p)/max(q_p/slope, ε), −20, 20))) over the finite predictions "
             "(vs float64 closed form)",
    "MOD-2": "M is a finite 0-d tensor in (0, 1]",
    "MOD-3": "M is non-increasing in the normalized gap a (damping, never accelerating)",
    "MOD-4": "enable=False returns None",
    "MOD-5": "episodes_completed < min_episodes returns exactly 1.0 whatever the predictions; "
             "episodes_completed == min_episodes modulates",
    "MOD-6": "fewer than 10 finite predictions return exactly 1.0; exactly 10 modulate",
    "MOD-7": "NaN/±Inf predictions are filtered: inserting them changes nothing, M stays finite",
    "MOD-8": "overflowing statistics give the formula's value or the 1.0 fallback, never NaN",
    "MOD-9": "bad configuration (threshold_percentile outside (0, 100), alpha < 0, slope <= 0, negative "
             "episode counts, non-floating preds) is rejected naming the argument",
    "MOD-10": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "MOD-11": "the scale carries no autograd graph: predictions that require grad give a scale that does not",
    "MOD-12": "documented defaults: omitting enable, min_episodes, threshold_percentile, alpha or slope equals "
              "passing True, 10, 60.0, 1.0, 1.0 (bit for bit)",
}

CATEGORIES = by_category(
    maths=("MOD-1", "MOD-2", "MOD-3", "MOD-4", "MOD-5", "MOD-6", "MOD-7", "MOD-11", "MOD-12"),
    robustness=("MOD-8", "MOD-10"),
    validation=("MOD-9",),
)
RATIONALE = {
    "MOD-8": "The literal formula evaluated on finite predictions whose mean or quantile overflows gives an inf"
             " gap and, through (μ − q_p)/s with both infinite, NaN; the seed's gate falls back to 1.0 for a "
             "non-finite statistic. The kit accepts the formula's value or that fallback, never NaN, because M "
             "multiplies the Lagrange learning rate and a NaN there makes λ NaN for the rest of the run.",
    "MOD-10": SCALAR_RATIONALE,
}

INTERFACE = ("modulation_scale",)

def closed_form(preds: torch.Tensor, threshold_percentile: float, alpha: float, slope: float):
    """(M, a, n, tol) in float64 straight from the formula (a None when gated by n < 10).

    tol bounds an implementation's error in M, computed in the input's dtype (float32 for half types,
    eps u): the mean errs by δμ <= 2u·Σ|ĝ| (a naive sum), the quantile by δq <= 4u·max(|ĝ_(lo)|, |ĝ_(hi)|)
    (the two order statistics it interpolates), so the gap a = (μ − q)/s errs by δa = (δμ + δq)/s + 4u·|a|.
    Where the unclipped gap is beyond ±20 by more than δa both sides clip: M is exact up to 8u. Elsewhere
    |dM/da| <= α/4 gives tol = α/4·δa + 8u. (A bound from max|ĝ|·n alone was >= 1 for a fifth of float32
    cases, where any M in (0, 1] passed.)
    """
    x = preds.detach().double().reshape(-1)
    x = x[torch.isfinite(x)]  # [n]
    n = x.numel()
    u = torch.finfo(preds.dtype if preds.dtype == torch.float64 else torch.float32).eps
    if n < MIN_FINITE:
        return 1.0, None, n, 0.0
    p = threshold_percentile / 100
    q = float(torch.quantile(x, p, interpolation="linear"))
    mu = math.fsum((x / n).tolist())  # the mean without overflow
    s = max(q / slope, EPS)
    a_raw = (mu - q) / s
    a = min(max(a_raw, -CLIP), CLIP)
    order = torch.sort(x).values
    near_q = order[[math.floor(p * (n - 1)), math.ceil(p * (n - 1))]].abs().max().item()
    da = (2 * u * x.abs().sum().item() + 4 * u * near_q) / s + 4 * u * abs(a_raw)
    tol = 8 * u if abs(a_raw) - da >= CLIP else alpha / 4 * da + 8 * u
    return 1.0 / (1.0 + alpha / (1.0 + math.exp(-a))), a, n, tol


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
KINDS = ("risk", "heavy_tail", "negative", "constant", "tiny", "mixed_sign")


def make_preds(seed: int, n: int, kind: str, dtype: torch.dtype) -> torch.Tensor:
    """Risk-like predictions ĝ [n] from an explicit generator."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, generator=g, dtype=torch.float64)
    x = {
        "risk": 5.0 * z.abs(),  # discounted costs, >= 0
        "heavy_tail": torch.exp(2.0 * z),  # mean far above the median: large positive gap
        "negative": -1.0 - z.abs(),  # a regression head below 0: q_p < 0, s = ε
        "constant": torch.full((n,), 3.0, dtype=torch.float64),  # gap 0: σ(0) = 1/2
        "tiny": 1e-9 * z.abs(),  # q_p/slope below ε: the floor
        "mixed_sign": z,
    }[kind]
    return x.to(dtype)


configs = st.fixed_dictionaries(dict(
    threshold_percentile=st.sampled_from([60.0, 50.0, 90.0, 10.0, 99.5]),
    alpha=st.sampled_from([1.0, 0.5, 3.0, 0.0]),
    slope=st.sampled_from([1.0, 2.0, 0.25, 10.0]),
))
preds_cases = st.builds(lambda seed, n, kind, dtype: make_preds(seed, n, kind, dtype),
                        seeds, st.integers(MIN_FINITE, 48), st.sampled_from(KINDS),
                        st.sampled_from([torch.float32, torch.float64]))
cases = st.builds(lambda c, p: dict(c, preds=p), configs, preds_cases)
EXAMPLES = (
    dict(DEFAULTS, preds=torch.arange(10.0)),  # exactly 10: q_0.6 = 5.4, μ = 4.5, a = -1/6
    dict(DEFAULTS, preds=make_preds(0, 16, "heavy_tail", torch.float32)),
    dict(DEFAULTS, preds=make_preds(1, 12, "negative", torch.float64)),
    dict(DEFAULTS, preds=torch.full((10,), 3.0)),
)
_CONFIG_KEYS = ("threshold_percentile", "alpha", "slope")


def _call(impl, preds, episodes=10, **config):
    kwargs = {k: config[k] for k in _CONFIG_KEYS if k in config}
    return impl.modulation_scale(preds, episodes, enable=config.get("enable", True),
                                 min_episodes=config.get("min_episodes", 10), **kwargs)


def _config(case: dict) -> dict:
    return {k: case[k] for k in _CONFIG_KEYS}


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_formula(impl, preds, **config):
    got = _call(impl, preds, **config)
    want, a, n, tol = closed_form(preds, **_config(config))
    if not isinstance(got, torch.Tensor) or abs(float(got) - want) > tol:
        fail("MOD-1", f"M = {got!r}, expected {want!r} ± {tol:.3g} (normalized gap a = {a!r}, n = {n})",
             preds=preds, **_config(config))


def check_range(impl, preds, **config):
    got = _call(impl, preds, **config)
    if not (isinstance(got, torch.Tensor) and got.dim() == 0 and got.dtype.is_floating_point):
        fail("MOD-2", f"M = {got!r}, expected a 0-d floating tensor", preds=preds, **_config(config))
    if not (math.isfinite(float(got)) and 0.0 < float(got) <= 1.0):
        fail("MOD-2", f"M = {float(got)!r}, expected in (0, 1]", preds=preds, **_config(config))


def check_monotone(impl, preds, spread_seed, **config):
    """Five prediction sets with growing tail weight; sorted by their closed-form gap a, M must not rise."""
    g = torch.Generator().manual_seed(spread_seed)
    base = preds.double()
    sets = [base] + [base + k * torch.rand(base.shape, generator=g, dtype=torch.float64) ** 4 * base.abs().max()
                     for k in (0.5, 1.0, 2.0, 4.0)]
    points = []
    for x in sets:
        x = x.to(preds.dtype)
        _, a, _, tol = closed_form(x, **_config(config))
        points.append((a, float(_call(impl, x, **config)), x, tol))
    points.sort(key=lambda p: p[0])
    tol = max(p[3] for p in points)
    for (a0, m0, _, _), (a1, m1, x1, _) in zip(points, points[1:]):
        if a1 > a0 and m1 > m0 + 2 * tol:
            fail("MOD-3", f"M rose from {m0!r} at gap a = {a0!r} to {m1!r} at the larger gap a = {a1!r}",
                 preds=x1, **_config(config))


def check_disabled(impl, preds, **config):
    got = impl.modulation_scale(preds, 1000, enable=False, min_episodes=0, **_config(config))
    if got is not None:
        fail("MOD-4", f"enable=False returned {got!r}, expected None", preds=preds, **_config(config))


def check_episode_gate(impl, preds, min_episodes, **config):
    below = _call(impl, preds, min_episodes - 1, min_episodes=min_episodes, **config)
    if not (isinstance(below, torch.Tensor) and float(below) == 1.0):
        fail("MOD-5", f"M = {below!r} with episodes_completed = {min_episodes - 1} < min_episodes = "
                      f"{min_episodes}, expected exactly 1.0 (gate before any statistic)",
             preds=preds, **_config(config))
    want, _, _, tol = closed_form(preds, **_config(config))
    at = _call(impl, preds, min_episodes, min_episodes=min_episodes, **config)
    if abs(float(at) - want) > tol:
        fail("MOD-5", f"M = {float(at)!r} with episodes_completed == min_episodes = {min_episodes}, "
                      f"expected the modulated {want!r} (gate is >=)", preds=preds, **_config(config))


def check_min_finite(impl, preds, **config):
    x = preds[:MIN_FINITE].clone()
    nine = torch.cat([x[: MIN_FINITE - 1], torch.full((5,), math.nan, dtype=x.dtype)])
    got = _call(impl, nine, **config)
    if float(got) != 1.0:
        fail("MOD-6", f"M = {float(got)!r} with 9 finite predictions, expected exactly 1.0",
             preds=nine, **_config(config))
    want, _, _, tol = closed_form(x, **_config(config))
    got = _call(impl, x, **config)
    if abs(float(got) - want) > tol:
        fail("MOD-6", f"M = {float(got)!r} with exactly 10 finite predictions, expected {want!r}",
             preds=x, **_config(config))


def check_filtered(impl, preds, insert_seed, **config):
    g = torch.Generator().manual_seed(insert_seed)
    n_bad = int(torch.randint(1, 6, (), generator=g))
    bad = torch.tensor([math.nan, math.inf, -math.inf], dtype=preds.dtype)[torch.randint(0, 3, (n_bad,), generator=g)]
    dirty = torch.cat([preds, bad])[torch.randperm(preds.numel() + n_bad, generator=g)]
    clean_m, dirty_m = _call(impl, preds, **config), _call(impl, dirty, **config)
    tol = closed_form(preds, **_config(config))[3]
    if not (math.isfinite(float(dirty_m)) and abs(float(dirty_m) - float(clean_m)) <= tol):
        fail("MOD-7", f"M = {float(dirty_m)!r} with {n_bad} non-finite predictions inserted, "
                      f"{float(clean_m)!r} without them", dirty=dirty, **_config(config))


def check_overflow(impl, magnitude, dtype, **config):
    preds = torch.cat([torch.full((8,), magnitude, dtype=dtype),
                       torch.full((4,), -magnitude if config["alpha"] else magnitude, dtype=dtype)])
    got = _call(impl, preds, **config)
    want, _, _, _ = closed_form(preds, **_config(config))
    tol = config["alpha"] / 4 * 16 * torch.finfo(dtype).eps * 4 * CLIP + 8 * torch.finfo(dtype).eps
    if not (math.isfinite(float(got)) and (float(got) == 1.0 or abs(float(got) - want) <= tol)):
        fail("MOD-8", f"M = {float(got)!r} on overflowing statistics, expected the formula's {want!r} or the "
                      "1.0 fallback", preds=preds, **_config(config))


BAD_CONFIGS = (
    dict(name="threshold_percentile", value=0.0), dict(name="threshold_percentile", value=100.0),
    dict(name="threshold_percentile", value=-5.0), dict(name="threshold_percentile", value=150.0),
    dict(name="threshold_percentile", value=math.nan), dict(name="alpha", value=-0.5),
    dict(name="slope", value=0.0), dict(name="slope", value=-1.0), dict(name="min_episodes", value=-1),
    dict(name="episodes_completed", value=-3), dict(name="preds", value="int64"),
)


def check_rejects_config(impl, name, value):
    kwargs = dict(DEFAULTS)
    preds, episodes = torch.arange(12.0), 20
    if name == "preds":
        preds = torch.arange(12)
    elif name == "episodes_completed":
        episodes = value
    else:
        kwargs[name] = value
    mentions = ["int64"] if name == "preds" else [repr(value)]
    expect_rejection("MOD-9", lambda: impl.modulation_scale(preds, episodes, **kwargs), names=[name],
                     mentions=mentions, what=f"modulation_scale({name}={value!r})")


_gate_cases = st.builds(lambda c, m: dict(c, min_episodes=m), cases, st.integers(1, 50))
def check_scalar_hyperparameters(impl, preds, **config):
    def run(episodes_completed, min_episodes, **kw):
        return impl.modulation_scale(preds, episodes_completed, enable=True, min_episodes=min_episodes, **kw)

    check_scalar_types("MOD-10", run, dict(_config(config), episodes_completed=12, min_episodes=10), preds=preds)


def check_detached(impl, preds, **config):
    m = impl.modulation_scale(preds.clone().requires_grad_(), 12, enable=True, min_episodes=10, **_config(config))
    if isinstance(m, torch.Tensor) and (m.requires_grad or m.grad_fn is not None):
        fail("MOD-11", "the scale requires grad for predictions that do: a loss multiplied by it would "
                       "backpropagate into the risk head", preds=preds, **config)


def _scale_with(impl, case, kw):
    return impl.modulation_scale(case["preds"], case["episodes"], **kw)


PROPERTIES = (
    Property("MOD-1", check_formula, cases, EXAMPLES, INTERFACE),
    Property("MOD-2", check_range, cases, EXAMPLES, INTERFACE),
    Property("MOD-3", check_monotone, st.builds(lambda c, s: dict(c, spread_seed=s), cases, seeds),
             requires=INTERFACE),
    Property("MOD-4", check_disabled, cases, EXAMPLES, INTERFACE),
    Property("MOD-5", check_episode_gate, _gate_cases, tuple(dict(e, min_episodes=10) for e in EXAMPLES),
             INTERFACE),
    Property("MOD-6", check_min_finite, cases, EXAMPLES, INTERFACE),
    Property("MOD-7", check_filtered, st.builds(lambda c, s: dict(c, insert_seed=s), cases, seeds),
             requires=INTERFACE),
    Property("MOD-8", check_overflow,
             st.builds(lambda c, m, d: dict(c, magnitude=m, dtype=d), configs,
                       st.sampled_from([1.7e308, 3.0e38, 1e30]), st.sampled_from([torch.float32, torch.float64]))
             .filter(lambda c: c["magnitude"] < torch.finfo(c["dtype"]).max),
             requires=INTERFACE, max_examples=12),
    Property("MOD-9", check_rejects_config, st.sampled_from(BAD_CONFIGS), requires=INTERFACE,
             max_examples=len(BAD_CONFIGS)),
    Property("MOD-10", check_scalar_hyperparameters, cases, EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("MOD-11", check_detached, cases, EXAMPLES, INTERFACE, max_examples=10),
    Property("MOD-12", defaults_check("MOD-12", "modulation_scale", _scale_with, tuple(DEFAULTS), DEFAULTS),
             with_omitted(st.builds(lambda c, e, en, m: dict(c, episodes=e, enable=en, min_episodes=m), cases,
                                    st.sampled_from([0, 9, 10, 40]), st.booleans(), st.sampled_from([1, 10, 20])),
                          tuple(DEFAULTS)),
             (dict(EXAMPLES[0], episodes=10, enable=True, min_episodes=5, omitted=frozenset(DEFAULTS)),),
             INTERFACE, max_examples=10),
)

CONTRACT = Contract("modulation", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
