"""Contract ``numerics``: the robust numerics a PPO loop leans on (normalizers, guards, masks, KL stop).

Sources: seed 002 (all of it: §1 safe normalization, §2 component masking, §3 PPO ratio guards, §5 loss
guards) and seed 001 (CRITICAL-1 frozen observation normalizer, HIGH-1 batch-wise statistics, HIGH-2 KL
early stop before the step, HIGH-3 per-head causal masks, HIGH-4 separate value clip).

Formulas (x [...] flattened to n values, dtype float32/float64)
----------------------------------------------------------------
safe_standardize(x, eps=1e-8)                                                       (seed 002 §1)
    n = 0      → x (empty, same shape and dtype)
    μ = K + mean(x − K) with K = x_0 (shifted mean: exact for a constant x, no cancellation on offsets)
    σ = sqrt(Σ(x − μ)² / (n − 1)) for n ≥ 2 (unbiased, torch's ``x.std()``), σ = 0 for n = 1
    out = (x − μ) / σ  if σ ≥ eps,   else x − μ   (the tiny-variance rule: zero-centred, never divided)
    so a constant x gives exact zeros, never NaN. A NaN/Inf input is propagated (the output is not all
    finite), never masked: the caller's loss guard counts it.
safe_zero_center(x) = x − μ, same μ, empty → empty.

RunningMeanStd(shape=(), epsilon=1e-4): Chan's parallel update, Stable-Baselines3's convention
    state mean_0 = 0, var_0 = 1, count_0 = epsilon (a pseudo-sample that keeps var defined before data)
    update(x [N, *shape]) with batch moments m_b = mean(x, 0), v_b = var(x, 0, population), N:
        δ = m_b − mean, c' = count + N, mean' = mean + δ·N/c',
        var' = (var·count + v_b·N + δ²·count·N/c') / c',   count' = c'
    The update is associative, so any split of a stream x_1..x_M into batches gives the statistics of
    the pooled stream plus the pseudo-sample: count = ε + M, mean = Σx/(ε+M),
    var = (ε·1 + ε·mean² + Σ(x − mean)²) / (ε + M). State is float64 (as SB3's numpy arrays).
    HIGH-1: statistics are updated per batch (all envs of a step at once), never per element.

ObsNormalizer(shape=(), epsilon=1e-8, clip=10.0)                              (seed 001 CRITICAL-1)
    normalize(obs [..., *shape]) = clip((obs − mean) / sqrt(var + epsilon), −clip, clip)  (SB3
    VecNormalize) with the statistics as last committed; normalize NEVER updates them, so every row of
    a rollout is normalized identically. commit(batch [N, *shape]) = rms.update(batch), called after
    the PPO update with the rollout's raw observations.

ratio_guard(new_log_prob [...], old_log_prob [...]) -> (ratio [...], events)            (seed 002 §3)
    Δ = new − old;  ratio = clamp(exp(clamp(Δ, −20, 20)), 0.01, 100) for finite Δ, and 1 for a
    non-finite Δ. events (0-d int64 tensors): log_ratio_clamped = #{finite |Δ| > 20},
    nonfinite = #{non-finite Δ}, ratio_clamped = #{finite Δ ∉ [ln 0.01, ln 100]}.
    Convention: the seed clamps before its finiteness check, which maps Δ = ±Inf to ratio 100 / 0.01;
    its own Test 5 expects Inf → 1. We take "any non-finite Δ → 1, counted": an infinite log-prob is a
    bug signal, not extreme confidence. The gradient w.r.t. new_log_prob is ratio inside [0.01, 100]
    and exactly 0 where clamped or non-finite (never NaN).

LossGuard: guard(loss [], kind) -> loss if finite, else 0 (counted per kind)           (seed 002 §5)
    counts() -> {kind: number of non-finite losses}; exactly one RuntimeWarning per kind naming it,
    by the time counts() returns (the fast twin defers the warning to counts(), its one host sync).

masked_component_weights(advantages [N, C], logits [C], std_eps=1e-8) -> (weights [C], valid [C])
    valid_c = std(advantages[:, c]) > std_eps (unbiased, of the rows shifted by row 0 so that a constant
    column has std exactly 0; N = 1 gives NaN → invalid)                                  (seed 002 §2)
    weights = softmax over the valid logits only, exactly 0 (and zero gradient) on invalid components,
    all zeros when no component is valid. Seed 002 modes (C = 6): centroid_distance_only 1 active,
    simple_delete_only 3 active, normal 6 active.

kl_early_stop(log_ratio [...], target_kl) -> (stop [] bool, kl [])                    (seed 001 HIGH-2)
    kl = mean(exp(Δ) − 1 − Δ) (Schulman's k3, ≥ 0, computed as expm1(Δ) − Δ); stop = not (kl ≤
    1.5·target_kl): a NaN estimate stops (fail-safe). target_kl None never stops.
kl_guarded_updates(log_ratio_fn, step_fn, n_steps, target_kl) -> (kls, steps_taken)
    for i < n_steps: Δ_i = log_ratio_fn(i) at the current (PRE-step) parameters; stop, kl_i =
    kl_early_stop(Δ_i.detach()); if stop: return (skip step i and all later ones); step_fn(i, Δ_i).

value_loss(values [B], old_values [B], returns [B], value_clip=10.0) -> []            (seed 001 HIGH-4)
    v_c = old + clamp(v − old, −value_clip, value_clip)
    loss = 0.5·mean(max((v − R)², (v_c − R)²));   value_clip None → 0.5·mean((v − R)²).
    value_clip is its own range, never the policy clip ratio (values live on another scale).

masked_mean(x [B], mask [B] bool) = Σ_{mask} x / max(Σ mask, 1)                       (seed 001 HIGH-3)
masked_policy_loss(ratio [B], advantages [B], mask [B], clip_ratio=0.2)
    = −masked_mean(min(r·A, clamp(r, 1 − c, 1 + c)·A), mask): a head with no causally relevant sample
    contributes 0, not NaN; masked-out entries (even non-finite) never reach the result. HIGH-3 heads:
    op always, slot unless WAIT, blueprint and blend only for GERMINATE (``causal_head_masks``).
entropy_loss(entropy {head: [B]}, masks {head: [B] bool}, coef {head: c_h} | None)    (seed 001 MEDIUM-3)
    per_head_h = masked_mean(H_h, mask_h),  loss = −Σ_h c_h·per_head_h  → (loss [], {head: per_head_h})
    c_h defaults to 1.0 for heads not in ``coef``. A head is averaged over the steps where it acted, so a
    rarely active head (blueprint, blend: only on GERMINATE) is not diluted by the steps where it did
    nothing — the seed's concern, made structural rather than compensated by larger coefficients. The
    per-head means are returned for tracking. ``masks`` must name exactly the heads of ``entropy``; a
    ``coef`` for an unknown head, or a negative/non-finite coefficient, is rejected.

dtype policy: float32/float64 in, the input dtype out. The reference computes in float64 and casts;
the fast twin computes in the input dtype on the input's device. Hot functions (all but
RunningMeanStd.update / ObsNormalizer.commit, load_state_dict and LossGuard.counts) never synchronize
with the host in the fast twin: no .item(), no bool(tensor), no data-dependent Python branch. Tolerances
are stated per clause in units of eps = finfo(dtype).eps.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.numerics import (
    COMPONENTS,
    EVENTS,
    GERMINATE,
    KL_MULTIPLIER,
    LOG_RATIO_CLAMP,
    MODES,
    OBS_CLIP,
    OBS_EPSILON,
    RATIO_MAX,
    RATIO_MIN,
    RMS_EPSILON,
    STD_EPS,
    WAIT,
    causal_head_masks,
    component_std,
)
from rlspec.reference import numerics as reference  # the oracle
from rlspec.spec.core import (
    Contract,
    Property,
    assert_close,
    assert_grads_close,
    by_category,
    describe,
    expect_rejection,
    fail,
    named_grads,
    per_function,
)
from rlspec.spec.power import same_with_defaults
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "NUM-1": "safe_standardize / safe_zero_center of an empty tensor is empty (same shape and dtype)",
    "NUM-2": "safe_standardize / safe_zero_center of a constant tensor are exact zeros (never NaN)",
    "NUM-3": "safe_standardize: (x-μ)/σ if σ >= eps else x-μ, unbiased σ, shifted mean (vs float64 reference)",
    "NUM-4": "safe_zero_center == x - mean(x) (vs float64 reference)",
    "NUM-5": "a NaN/Inf input to safe_standardize / safe_zero_center is propagated, never made finite",
    "NUM-6": "RunningMeanStd starts at mean 0, var 1, count 1e-4 and follows Chan's update (closed form)",
    "NUM-7": "any split of a stream into batches gives the same RunningMeanStd statistics",
    "NUM-8": "a bad batch (empty, integer, wrong shape, NaN/Inf) is rejected naming 'x'; state unchanged",
    "NUM-9": "RunningMeanStd / ObsNormalizer state_dict round-trips: a fresh instance continues bit-identically",
    "NUM-10": "normalize == clip((obs-mean)/sqrt(var+eps), ±clip) with the committed statistics",
    "NUM-11": "normalize never changes the statistics (frozen during a rollout, CRITICAL-1)",
    "NUM-12": "commit(batch) updates exactly like RunningMeanStd.update(batch)",
    "NUM-13": "ratio_guard: clamp(exp(clamp(Δ,±20)), 0.01, 100), non-finite Δ → 1, finite gradient",
    "NUM-14": "ratio_guard counts log_ratio_clamped, nonfinite and ratio_clamped events",
    "NUM-15": "LossGuard: finite losses pass unchanged, non-finite → 0, counted per kind, one warning per kind",
    "NUM-16": "zero-variance components get weight 0 (and zero gradient) before the softmax (seed 002 §2)",
    "NUM-17": "kl_early_stop: k3 estimator, stop iff not kl <= 1.5·target_kl (NaN stops), None never stops",
    "NUM-18": "the KL that decides step i is estimated from pre-step log-probs; a stop skips step i and after",
    "NUM-19": "value_loss = 0.5·mean(max(unclipped, clipped)) with its own value_clip (None: unclipped)",
    "NUM-20": "masked_mean / masked_policy_loss divide by max(Σmask, 1): empty heads give 0, masked entries ignored",
    "NUM-22": "entropy_loss = −Σ_h c_h·masked_mean(H_h, mask_h) (c_h default 1): a head's inactive steps never "
              "dilute its mean",
    "NUM-21": "bad arguments (eps, epsilon, clip, target_kl, value_clip, clip_ratio, shapes) are rejected by name",
    "NUM-23": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "NUM-24": "documented defaults: omitting eps, std_eps, epsilon, clip, value_clip or clip_ratio equals passing "
              "1e-8, 1e-8, 1e-4 (RunningMeanStd) / 1e-8 (ObsNormalizer), 10.0, 10.0, 0.2 (bit for bit)",
    "NUM-25": "bad calls are rejected naming the argument: masked_mean of a non-floating x, masked_policy_loss with "
              "mismatched advantages or a non-bool mask, kl_guarded_updates with target_kl <= 0 (even for 0 steps)",
    "NUM-26": "guards decide exactly at their thresholds: sigma == eps standardizes, a component std == std_eps is "
              "masked, |Δ| == 20 is not a log-ratio clamp, Δ == ln 100 or ln 0.01 is not a ratio clamp, "
              "KL == 1.5·target_kl does not stop",
    "NUM-27": "returned state is a copy and estimates carry no graph: writing into state_dict() tensors changes "
              "nothing; kl_guarded_updates' KL estimates do not require grad",
    "NUM-28": "ratio_guard's gradient is finite for any finite log-ratio, also where e^Δ overflows (|Δ| ~ 800): "
              "0 wherever the ratio is clamped",
    "NUM-29": "gradient parity of the composite losses: value_loss, masked_policy_loss and entropy_loss have the "
              "float64 closed form's gradient w.r.t. every floating input (values, old_values, returns; ratio, "
              "advantages; each head's entropy); masked-out entries get exactly 0",
    "NUM-30": "a bad batch (empty, integer, wrong shape, NaN/Inf) given to ObsNormalizer.commit is rejected naming "
              "'x'; the statistics are unchanged",
    "NUM-31": "entropy_loss rejects, by name, a coefficient for an unknown head, masks for other heads than the "
              "entropies' and a negative coefficient",
    "NUM-32": "masked-out entries that hold NaN or ±inf reach neither masked_mean, masked_policy_loss, entropy_loss "
              "nor their gradients (exactly 0 there)",
}

CATEGORIES = by_category(
    maths=("NUM-1", "NUM-2", "NUM-3", "NUM-4", "NUM-6", "NUM-7", "NUM-9", "NUM-10", "NUM-11", "NUM-12", "NUM-13",
           "NUM-14", "NUM-15", "NUM-16", "NUM-17", "NUM-18", "NUM-19", "NUM-20", "NUM-22", "NUM-24", "NUM-26",
           "NUM-29"),
    robustness=("NUM-5", "NUM-23", "NUM-27", "NUM-28", "NUM-32"),
    validation=("NUM-8", "NUM-21", "NUM-25", "NUM-30", "NUM-31"),
)
RATIONALE = {
    "NUM-5": "The formula (x − μ)/σ propagates a NaN or inf by itself; the clause guards against the opposite "
             "mistake, a 'safe' normalizer that sanitizes (nan_to_num, a finite fallback) and so hides a diverged "
             "batch from the loss guard that should count it.",
    "NUM-27": "The formulas say nothing about aliasing or autograd graphs, so an implementation returning its own "
              "state tensors, or KL estimates attached to the policy, computes every value right. The kit asks for "
              "copies and detached estimates because a caller writing into state_dict() (a checkpoint loader "
              "that casts in place) would rewrite the statistics, and an attached estimate keeps the whole "
              "rollout's graph alive.",
    "NUM-28": "The literal derivative of clamp(exp(clamp(Δ, ±20)), 0.01, 100) is finite, but the common form "
              "exp(Δ).clamp(0.01, 100) differentiates to 0·inf = NaN where e^Δ overflows (|Δ| ~ 800 in float64, "
              "~90 in float32): one stale log-probability then makes every gradient NaN. The kit asks for the "
              "clamped form's finite gradient, 0 wherever the ratio is clamped.",
    "NUM-32": "The literal Σ mask·x / max(Σ mask, 1) multiplies a masked-out NaN or inf by 0, which IEEE 754 makes "
              "NaN, so a textbook masked mean is NaN as soon as an irrelevant head's sample holds garbage. The kit "
              "asks for a select (x where mask, else 0) because a head that did not act on a step must not be "
              "able to poison the loss or its gradient (seed 001 HIGH-3's causal masks).",
    "NUM-23": SCALAR_RATIONALE,
    "NUM-10": "The dtype policy returns the input's dtype, so float64 observations are compared with the "
              "formula at float64 precision. Stable-Baselines3's VecNormalize (the one adapter of "
              "ObsNormalizer) casts normalized observations to float32; the clause keeps the formula at the "
              "input's precision and the difference is declared.",
}

INTERFACE = ("safe_standardize", "safe_zero_center", "RunningMeanStd", "ObsNormalizer", "ratio_guard",
             "LossGuard", "masked_component_weights", "kl_early_stop", "kl_guarded_updates", "value_loss",
             "masked_mean", "masked_policy_loss", "entropy_loss")
"""
safe_standardize(x: Tensor, eps=1e-8) -> Tensor
safe_zero_center(x: Tensor) -> Tensor
RunningMeanStd(shape=(), epsilon=1e-4): .mean, .var, .count (float64 tensors), update(x), state_dict(),
    load_state_dict(d)
ObsNormalizer(shape=(), epsilon=1e-8, clip=10.0): .rms, normalize(obs), commit(batch), state_dict(),
    load_state_dict(d)
    (the checker reads the statistics as .mean, .var, .count of RunningMeanStd and of ObsNormalizer.rms; it treats
    state_dict() as opaque: whatever it holds must round-trip through load_state_dict)
ratio_guard(new_log_prob, old_log_prob) -> (ratio, {"log_ratio_clamped", "nonfinite", "ratio_clamped"})
LossGuard(): __call__(loss, kind) -> Tensor; counts() -> dict[str, int]
masked_component_weights(advantages, logits, std_eps=1e-8) -> (weights, valid)
kl_early_stop(log_ratio, target_kl) -> (stop, kl)
kl_guarded_updates(log_ratio_fn, step_fn, n_steps, target_kl) -> (list of kl, steps_taken)
value_loss(values, old_values, returns, value_clip=10.0) -> Tensor
masked_mean(x, mask) -> Tensor
masked_policy_loss(ratio, advantages, mask, clip_ratio=0.2) -> Tensor
entropy_loss(entropy, masks, coef=None) -> (Tensor, dict of Tensor)
"""

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


# --------------------------------------------------------------------------------------------------
# Strategies: every tensor comes from an explicit torch.Generator seeded by Hypothesis
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
dtypes = st.sampled_from([torch.float32, torch.float64])
KINDS = ("normal", "offset", "mixed_scale", "constant", "tiny_var", "single", "integers")


def _values(g: torch.Generator, kind: str, shape: tuple) -> torch.Tensor:
    """float64 values of one of KINDS (seed 002 Test 1: normal, zero/small variance, scale mixing)."""
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "offset":
        return 1e3 + 5 * x
    if kind == "mixed_scale":  # seed 002: distance penalties ~ -1 mixed with success rewards +500
        return torch.where(torch.rand(shape, generator=g) < 0.1, torch.full_like(x, 500.0), -x.abs())
    if kind == "constant":
        return torch.full(shape, float(torch.tensor([0.0, 5.0, -3.25, 0.1])[torch.randint(4, (), generator=g)]),
                          dtype=torch.float64)
    if kind == "tiny_var":
        return 2.0 + 1e-11 * x
    if kind == "integers":
        return torch.randint(-3, 4, shape, generator=g).double()
    return x


@st.composite
def standardize_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    kind = draw(st.sampled_from(KINDS))
    shape = (1,) if kind == "single" else draw(st.sampled_from([(2,), (7,), (3, 5), (64,), (4, 1, 3)]))
    return dict(x=_values(g, kind, shape).to(draw(dtypes)), eps=draw(st.sampled_from([STD_EPS, 1e-3])))


STANDARDIZE_EXAMPLES = (
    dict(x=torch.tensor([5.0, 5.0, 5.0]), eps=STD_EPS),  # seed 002: constant → zeros, not NaN
    dict(x=torch.tensor([-1.0, -0.5, 500.0]), eps=STD_EPS),  # seed 002 Test 1: scale mixing
    dict(x=torch.tensor([1.0, 1.0 + 1e-7, 1.0 - 1e-7], dtype=torch.float64), eps=1e-6),  # σ < eps
    dict(x=torch.tensor([0.1] * 7), eps=STD_EPS),  # constant whose plain mean rounds off 0.1
    dict(x=torch.tensor([3.0], dtype=torch.float64), eps=STD_EPS),  # n = 1
)


@st.composite
def streams(draw, max_rows: int = 40):
    """A stream x [M, *shape] (float64 values, float32 or float64) and a split into batch sizes."""
    g = torch.Generator().manual_seed(draw(seeds))
    shape = draw(st.sampled_from([(), (3,), (2, 2)]))
    m = draw(st.integers(1, max_rows))
    kind = draw(st.sampled_from(["normal", "offset", "mixed_scale", "constant", "integers"]))
    x = _values(g, kind, (m, *shape)).to(draw(dtypes))
    return dict(shape=shape, stream=x, splits=_split(draw, m), other=_split(draw, m))


def _split(draw, m: int) -> list[int]:
    cuts = sorted(draw(st.sets(st.integers(1, max(m - 1, 1)), max_size=6)) - {m}) if m > 1 else []
    edges = [0, *cuts, m]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


STREAM_EXAMPLES = (
    dict(shape=(), stream=torch.arange(10.0, dtype=torch.float64), splits=[10], other=[1] * 10),
    dict(shape=(3,), stream=torch.full((6, 3), 4.0), splits=[1, 5], other=[3, 3]),
    dict(shape=(), stream=torch.tensor([1e3, 1e3 + 1, 1e3 - 1], dtype=torch.float64), splits=[3], other=[2, 1]),
)


def _chunks(x: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    return list(torch.split(x, sizes))


def _tol_rms(x: torch.Tensor, n_batches: int) -> tuple[float, float]:
    """(mean tol, var tol) in units of the stream's eps (the module docstring's rule): an implementation
    may take each batch's moments in the batch dtype (Stable-Baselines3 does, then accumulates in float64),
    so every Chan update rounds at eps(x.dtype) of |mean| and of var + δ²."""
    scale = 1.0 + float(x.double().abs().max())
    k = 16 * _eps(x.dtype) * (n_batches + 2)
    return k * scale, k * scale * scale


# --------------------------------------------------------------------------------------------------
# Properties: safe_standardize / safe_zero_center
# --------------------------------------------------------------------------------------------------
def _centred(impl, fn: str, x, eps):
    return impl.safe_standardize(x, eps=eps) if fn == "safe_standardize" else impl.safe_zero_center(x)


def check_empty(impl, shape, dtype, fn):
    x = torch.zeros(shape, dtype=dtype)
    out = _centred(impl, fn, x, STD_EPS)
    if out.shape != x.shape or out.dtype != dtype:
        fail("NUM-1", f"{fn} of an empty tensor gave shape {tuple(out.shape)} {out.dtype}, expected "
                      f"{tuple(shape)} {dtype}")


def check_constant(impl, x, eps, fn):
    c = x.reshape(-1)[:1].expand(x.numel()).reshape(x.shape).clone()
    out = _centred(impl, fn, c, eps)
    if not torch.equal(out, torch.zeros_like(c)):
        fail("NUM-2", f"{fn} of a constant tensor gave {out.reshape(-1)[:4].tolist()}, expected exact zeros", x=c)


def check_standardize(impl, x, eps):
    x64 = x.double().reshape(-1)
    n = x64.numel()
    mu = x64[0] + (x64 - x64[0]).mean()
    sigma = float(((x64 - mu) ** 2).sum().div(n - 1).sqrt()) if n > 1 else 0.0
    if n > 1 and abs(sigma / eps - 1) < 1e-3:
        return  # at σ ≈ eps the branch may fall either way by rounding; both sides are checked elsewhere
    out = impl.safe_standardize(x, eps=eps)
    want = reference.safe_standardize(x.double(), eps=eps)
    e = _eps(x.dtype)
    scale = (1 + float(x64.abs().max()) / sigma) if sigma >= eps else 1 + float(x64.abs().max())
    assert_close("NUM-3", f"safe_standardize(x) (σ = {sigma:.3g}, {'divided' if sigma >= eps else 'centred only'})",
                 out, want, atol=16 * e * scale, rtol=16 * e, x=x, eps=eps)


def check_zero_center(impl, x, eps):
    out = impl.safe_zero_center(x)
    want = reference.safe_zero_center(x.double())
    e = _eps(x.dtype)
    assert_close("NUM-4", "safe_zero_center(x)", out, want, atol=8 * e * (1 + float(x.double().abs().max())),
                 x=x)


def check_propagates(impl, x, eps, bad, position, fn):
    y = x.clone().reshape(-1)
    y[position % y.numel()] = bad
    y = y.reshape(x.shape)
    out = _centred(impl, fn, y, eps)
    if bool(torch.isfinite(out).all()):
        fail("NUM-5", f"{fn} turned an input with {bad} into an all-finite output "
                      f"{out.reshape(-1)[:4].tolist()} (the event is hidden)", x=y)


# --------------------------------------------------------------------------------------------------
# Properties: RunningMeanStd and the frozen observation normalizer
# --------------------------------------------------------------------------------------------------
def _closed_form(stream: torch.Tensor, epsilon: float = RMS_EPSILON):
    """(mean, var, count) of the pooled stream plus the (mean 0, var 1, weight ε) pseudo-sample."""
    x = stream.double()
    m = x.shape[0]
    count = epsilon + m
    mean = x.sum(0) / count
    var = (epsilon * (1 + mean**2) + ((x - mean) ** 2).sum(0)) / count
    return mean, var, torch.tensor(count, dtype=torch.float64)


def _rms_state(rms) -> dict[str, torch.Tensor]:
    """The whole state (opaque: whatever state_dict() holds), to compare before and after."""
    return {k: v.detach().clone().cpu() for k, v in rms.state_dict().items()}


STATISTICS = ("mean", "var", "count")


def statistics(clause: str, obj, owner: str) -> dict[str, torch.Tensor]:
    """The running statistics as the interface names them: ``obj.mean``, ``obj.var``, ``obj.count`` (of a
    RunningMeanStd, or of an ObsNormalizer's ``.rms``), copied; a missing one is a violation naming what the
    contract reads."""
    out = {}
    for k in STATISTICS:
        if not hasattr(obj, k):
            fail(clause, f"{owner} has no attribute '{k}': the contract reads the running statistics as "
                         f"{owner}.mean, .var and .count (float64 tensors of the given shape; `rlspec list numerics`)")
        out[k] = torch.as_tensor(getattr(obj, k)).detach().clone().cpu()
    return out


def _normalizer_statistics(clause: str, norm) -> dict[str, torch.Tensor]:
    if not hasattr(norm, "rms"):
        fail(clause, "ObsNormalizer has no attribute 'rms': the contract reads its statistics as "
                     "ObsNormalizer.rms.mean, .var and .count (`rlspec list numerics`)")
    return statistics(clause, norm.rms, "ObsNormalizer.rms")


def check_chan(impl, shape, stream, splits, other):
    rms = impl.RunningMeanStd(shape=shape)
    init = statistics("NUM-6", rms, "RunningMeanStd")
    f64 = torch.float64
    initial = {"mean": torch.zeros(shape, dtype=f64), "var": torch.ones(shape, dtype=f64),
               "count": torch.tensor(RMS_EPSILON, dtype=f64)}
    for key, want in initial.items():
        assert_close("NUM-6", f"initial {key}", init[key], want, atol=0.0, shape=shape)
    for b in _chunks(stream, splits):
        rms.update(b)
    mean, var, count = _closed_form(stream)
    tol_m, tol_v = _tol_rms(stream, len(splits))
    st_ = statistics("NUM-6", rms, "RunningMeanStd")
    inputs = dict(stream=stream, splits=splits)
    assert_close("NUM-6", f"count after {len(splits)} batches", st_["count"], count, atol=1e-9, **inputs)
    assert_close("NUM-6", "mean vs the pooled closed form", st_["mean"], mean, atol=tol_m, **inputs)
    assert_close("NUM-6", "var vs the pooled closed form", st_["var"], var, atol=tol_v, rtol=tol_v, **inputs)


def check_split_invariance(impl, shape, stream, splits, other):
    a, b = impl.RunningMeanStd(shape=shape), impl.RunningMeanStd(shape=shape)
    for x in _chunks(stream, splits):
        a.update(x)
    for x in _chunks(stream, other):
        b.update(x)
    tol_m, tol_v = _tol_rms(stream, len(splits) + len(other))
    sa, sb = statistics("NUM-7", a, "RunningMeanStd"), statistics("NUM-7", b, "RunningMeanStd")
    for key, tol in (("count", 1e-9), ("mean", tol_m), ("var", tol_v)):
        assert_close("NUM-7", f"{key} for split {splits} vs split {other}", sa[key], sb[key], atol=tol,
                     rtol=tol if key == "var" else 0.0, stream=stream)


def _bad_batch(stream: torch.Tensor, shape: tuple, bad: str, position: int) -> tuple[torch.Tensor, list[str]]:
    if bad == "empty":
        return torch.zeros(0, *shape), ["empty"]
    if bad == "int":
        return torch.ones(2, *shape, dtype=torch.int64), ["int64"]
    if bad == "shape":
        return torch.zeros(2, *shape, 5), [str(shape)]
    x = stream.clone().reshape(-1)
    x[position % x.numel()] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[bad]
    return x.reshape(stream.shape), []


def check_rejects_batch(impl, shape, stream, splits, other, bad, position):
    rms = impl.RunningMeanStd(shape=shape)
    rms.update(_chunks(stream, splits)[0])
    before = _rms_state(rms)
    x, mentions = _bad_batch(stream, shape, bad, position)
    expect_rejection("NUM-8", lambda: rms.update(x), names=["x"], mentions=mentions,
                     what=f"RunningMeanStd.update with a bad batch ({bad})")
    after = _rms_state(rms)
    for k, v in before.items():
        if not torch.equal(v, after[k]):
            fail("NUM-8", f"state '{k}' changed from {describe(v)} to {describe(after[k])} by a rejected "
                          f"update ({bad})", shape=shape)


def check_roundtrip(impl, shape, stream, splits, other, fn):
    chunks = _chunks(stream, splits)
    a = getattr(impl, fn)(shape=shape)
    step = a.update if fn == "RunningMeanStd" else a.commit
    step(chunks[0])
    b = getattr(impl, fn)(shape=shape)
    b.load_state_dict(a.state_dict())
    for x in chunks[1:] + chunks[:1]:
        step(x)
        (b.update if fn == "RunningMeanStd" else b.commit)(x)
    sa, sb = a.state_dict(), b.state_dict()
    for k in sa:
        if not torch.equal(sa[k], sb[k]):
            fail("NUM-9", f"{fn} '{k}' = {describe(sb[k])} after load_state_dict, {describe(sa[k])} "
                          "in the original", stream=stream, splits=splits)
    if fn == "ObsNormalizer" and not torch.equal(a.normalize(stream), b.normalize(stream)):
        fail("NUM-9", "ObsNormalizer.normalize differs after load_state_dict", stream=stream)


def _committed_normalizer(impl, shape, stream, splits, clip=OBS_CLIP):
    norm = impl.ObsNormalizer(shape=shape, clip=clip)
    for x in _chunks(stream, splits)[:-1]:
        norm.commit(x)
    return norm


def check_normalize(impl, shape, stream, splits, other, clip):
    norm = _committed_normalizer(impl, shape, stream, splits, clip)
    st_ = _normalizer_statistics("NUM-10", norm)
    obs = 3 * stream  # observations of the next rollout, some beyond the clip
    out = norm.normalize(obs)
    mean, var = st_["mean"], st_["var"]
    want = ((obs.double() - mean) / torch.sqrt(var + OBS_EPSILON)).clamp(-clip, clip)
    e = _eps(obs.dtype)
    tol = 8 * e * (1 + float(((obs.double().abs() + mean.abs()) / torch.sqrt(var + OBS_EPSILON)).max()))
    if out.dtype != obs.dtype:
        fail("NUM-10", f"normalize returned {out.dtype} for {obs.dtype} observations")
    assert_close("NUM-10", "normalize(obs)", out, want, atol=tol, rtol=tol, obs=obs, clip=clip)


def check_frozen(impl, shape, stream, splits, other, clip):
    norm = _committed_normalizer(impl, shape, stream, splits, clip)
    before = {k: v.detach().clone() for k, v in norm.state_dict().items()}
    chunks = _chunks(stream, other)  # a rollout arriving step by step
    during = [norm.normalize(x) for x in chunks]
    after = norm.state_dict()
    for k, v in before.items():
        if not torch.equal(v, after[k]):
            fail("NUM-11", f"normalize changed statistic '{k}' during the rollout: {describe(v)} -> "
                           f"{describe(after[k])}; statistics must stay frozen until commit()",
                 stream=stream, steps=other)
    whole = norm.normalize(stream)
    if not torch.equal(torch.cat(during), whole):
        fail("NUM-11", "the rollout normalized step by step differs from normalizing it at once: rows of one "
                       "rollout saw different statistics", stream=stream, steps=other)


def check_commit(impl, shape, stream, splits, other):
    norm, rms = impl.ObsNormalizer(shape=shape), impl.RunningMeanStd(shape=shape)
    for x in _chunks(stream, splits):
        norm.commit(x)
        rms.update(x)
        s_norm, s_rms = _normalizer_statistics("NUM-12", norm), statistics("NUM-12", rms, "RunningMeanStd")
        for k in STATISTICS:
            if not torch.equal(s_norm[k], s_rms[k]):
                fail("NUM-12", f"after commit, '{k}' = {describe(s_norm[k])}, RunningMeanStd.update gives "
                               f"{describe(s_rms[k])}", batch=x)


def check_commit_rejects(impl, shape, stream, splits, other, bad, position):
    norm = impl.ObsNormalizer(shape=shape)
    for x in _chunks(stream, splits):
        norm.commit(x)
    before = _rms_state(norm)
    x, mentions = _bad_batch(stream, shape, bad, position)
    expect_rejection("NUM-30", lambda: norm.commit(x), names=["x"], mentions=mentions,
                     what=f"ObsNormalizer.commit with a bad batch ({bad})")
    for k, v in _rms_state(norm).items():
        if not torch.equal(v, before[k]):
            fail("NUM-30", f"statistic '{k}' changed by a rejected commit ({bad})")


# --------------------------------------------------------------------------------------------------
# Properties: PPO ratio guard and loss guard
# --------------------------------------------------------------------------------------------------
@st.composite
def log_prob_pairs(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    n = draw(st.integers(1, 40))
    old = -torch.rand(n, generator=g, dtype=torch.float64) * 5
    scale = draw(st.sampled_from([0.1, 3.0, 30.0]))
    new = old + scale * torch.randn(n, generator=g, dtype=torch.float64)
    if draw(st.booleans()):
        special = torch.tensor([math.nan, math.inf, -math.inf, 50.0, -50.0], dtype=torch.float64)
        idx = torch.randint(0, n, (min(n, 3),), generator=g)
        new[idx] = special[torch.randint(0, 5, idx.shape, generator=g)]
    return dict(new_log_prob=new.to(dtype), old_log_prob=old.to(dtype))


RATIO_EXAMPLES = (  # seed 002 Test 5: 0.1 normal, ±50 clamp, NaN and Inf → 1
    dict(new_log_prob=torch.tensor([0.1, 50.0, -50.0, math.nan, math.inf, -math.inf, 21.0, 4.0]),
         old_log_prob=torch.zeros(8)),
    dict(new_log_prob=torch.tensor([52.0], dtype=torch.float64),  # seed 002: 50 − (−2) = 52 → 100
         old_log_prob=torch.tensor([-2.0], dtype=torch.float64)),
)


def _ratio_want(new, old):
    d = new.double() - old.double()
    finite = torch.isfinite(d)
    r = torch.where(finite, torch.exp(d.nan_to_num(0.0).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
                    .clamp(RATIO_MIN, RATIO_MAX), torch.ones_like(d))
    inside = finite & (d >= math.log(RATIO_MIN)) & (d <= math.log(RATIO_MAX))
    return d, finite, r, inside


def check_ratio(impl, new_log_prob, old_log_prob):
    new = new_log_prob.clone().requires_grad_(True)
    ratio, _ = impl.ratio_guard(new, old_log_prob)
    d, finite, want, inside = _ratio_want(new_log_prob, old_log_prob)
    e = _eps(new_log_prob.dtype)
    tol = 4 * e * (1 + d.nan_to_num(0.0).abs().clamp(max=LOG_RATIO_CLAMP))  # exp amplifies |Δ|·eps
    inputs = dict(new_log_prob=new_log_prob, old_log_prob=old_log_prob)
    assert_close("NUM-13", "ratio", ratio.detach(), want, atol=0.0, rtol=float(tol.max()), **inputs)
    ratio.sum().backward()
    grad = new.grad if new.grad is not None else torch.zeros_like(new)
    assert_close("NUM-13", "d ratio / d new_log_prob (ratio inside [0.01, 100], else 0)", grad,
                 torch.where(inside, want, torch.zeros_like(want)), atol=0.0, rtol=float(tol.max()), **inputs)


def check_ratio_events(impl, new_log_prob, old_log_prob):
    _, events = impl.ratio_guard(new_log_prob, old_log_prob)
    d, finite, _, inside = _ratio_want(new_log_prob, old_log_prob)
    want = {"log_ratio_clamped": int((finite & (d.abs() > LOG_RATIO_CLAMP)).sum()),
            "nonfinite": int((~finite).sum()), "ratio_clamped": int((finite & ~inside).sum())}
    if sorted(events) != sorted(EVENTS):
        fail("NUM-14", f"events has keys {sorted(events)}, expected {sorted(EVENTS)}")
    for k, v in want.items():
        if not isinstance(events[k], torch.Tensor) or int(events[k]) != v:
            fail("NUM-14", f"events['{k}'] = {events[k]!r}, expected a tensor equal to {v}",
                 new_log_prob=new_log_prob, old_log_prob=old_log_prob)


@st.composite
def loss_sequences(draw):
    kinds = ["policy", "value", "entropy"]
    vals = [0.5, -1.25, 0.0, math.nan, math.inf, -math.inf, 3e38]
    seq = draw(st.lists(st.tuples(st.sampled_from(kinds), st.sampled_from(vals)), min_size=1, max_size=12))
    return dict(sequence=seq, split=draw(st.integers(0, 12)), dtype=draw(dtypes))


LOSS_EXAMPLES = (
    dict(sequence=[("policy", math.nan), ("policy", math.inf), ("value", 1.0), ("entropy", -math.inf),
                   ("value", math.nan)], split=2, dtype=torch.float32),
)


def check_loss_guard(impl, sequence, split, dtype):
    import warnings

    guard = impl.LossGuard()
    want_counts: dict[str, int] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, (kind, value) in enumerate(sequence):
            if i == split:
                guard.counts()  # a sync point in the middle must not re-warn later
            w = torch.tensor(1.0, dtype=dtype, requires_grad=True)
            loss = w * torch.tensor(value, dtype=dtype)
            out = guard(loss, kind)
            want_counts[kind] = want_counts.get(kind, 0) + (not math.isfinite(value))
            if math.isfinite(value):
                if not torch.equal(out.detach(), loss.detach()):
                    fail("NUM-15", f"a finite {kind} loss {value!r} came out as {float(out)!r}")
                out.backward()
                if w.grad is None or float(w.grad) != float(torch.tensor(value, dtype=dtype)):
                    fail("NUM-15", f"the gradient of a finite {kind} loss did not pass through the guard "
                                   f"(got {w.grad!r}, expected {value!r})")
            elif float(out) != 0.0:
                fail("NUM-15", f"a non-finite {kind} loss {value!r} came out as {float(out)!r}, expected 0")
        counts = guard.counts()
    counts = {k: int(v) for k, v in counts.items() if int(v)}
    if counts != {k: v for k, v in want_counts.items() if v}:
        fail("NUM-15", f"counts() = {counts}, expected {want_counts} non-finite losses per kind",
             sequence=sequence)
    per_kind = {}
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            kinds = [k for k in want_counts if k in str(w.message)]
            for k in kinds:
                per_kind[k] = per_kind.get(k, 0) + 1
    want_warn = {k: 1 for k, v in want_counts.items() if v}
    if per_kind != want_warn:
        fail("NUM-15", f"RuntimeWarnings per kind {per_kind}, expected exactly one per kind with a non-finite "
                       f"loss {want_warn}", sequence=sequence)


# --------------------------------------------------------------------------------------------------
# Properties: component masking, KL early stop, value clipping, masked means
# --------------------------------------------------------------------------------------------------
def mode_case(mode: str, n: int = 8, seed: int = 0) -> dict:
    """Seed 002 §2: advantages [n, 6] whose inactive components are always zero."""
    g = torch.Generator().manual_seed(seed)
    adv = torch.randn(n, len(COMPONENTS), generator=g)
    adv[:, MODES[mode]:] = 0.0
    return dict(advantages=adv, logits=torch.randn(len(COMPONENTS), generator=g), std_eps=STD_EPS,
                active=MODES[mode])


@st.composite
def component_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    n, c = draw(st.integers(1, 12)), draw(st.integers(1, 7))
    adv = torch.randn(n, c, generator=g, dtype=torch.float64)
    dead = torch.rand(c, generator=g) < 0.4
    adv[:, dead] = torch.randn(c, generator=g, dtype=torch.float64)[dead]  # constant columns
    logits = 3 * torch.randn(c, generator=g, dtype=torch.float64)
    return dict(advantages=adv.to(dtype), logits=logits.to(dtype), std_eps=STD_EPS, active=None)


def check_component_mask(impl, advantages, logits, std_eps, active):
    lg = logits.clone().requires_grad_(True)
    weights, valid = impl.masked_component_weights(advantages, lg, std_eps=std_eps)
    want_valid = component_std(advantages.double()) > std_eps
    inputs = dict(advantages=advantages, logits=logits)
    if not torch.equal(valid.cpu(), want_valid):
        fail("NUM-16", f"valid = {valid.tolist()}, expected std > {std_eps:g}: {want_valid.tolist()}", **inputs)
    if active is not None and int(valid.sum()) != active:
        fail("NUM-16", f"{int(valid.sum())} active components, seed 002 §2 expects {active}", **inputs)
    l64 = logits.double().masked_fill(~want_valid, -math.inf)
    want = torch.softmax(l64, 0).nan_to_num(0.0) if bool(want_valid.any()) else torch.zeros_like(l64)
    e = _eps(logits.dtype)
    assert_close("NUM-16", "weights (softmax over the valid components only)", weights.detach(), want,
                 atol=8 * e, **inputs)
    masked = weights[~want_valid]
    if bool((masked != 0).any()):
        fail("NUM-16", f"masked components got weights {masked.tolist()}, expected exactly 0", **inputs)
    probe = torch.arange(1.0, len(logits) + 1, dtype=weights.dtype)
    if weights.requires_grad:  # all masked: constant zeros, no graph
        (weights * probe).sum().backward()
    grad = lg.grad if lg.grad is not None else torch.zeros_like(lg)
    if not bool(torch.isfinite(grad).all()) or bool((grad[~want_valid] != 0).any()):
        fail("NUM-16", f"gradient w.r.t. the logits is {grad.tolist()}: must be finite and exactly 0 on the "
                       f"masked components {(~want_valid).tolist()}", **inputs)


@st.composite
def kl_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 50))
    lr = draw(st.sampled_from([1e-4, 0.05, 0.3, 2.0])) * torch.randn(n, generator=g, dtype=torch.float64)
    if draw(st.integers(0, 9)) == 0:
        lr[torch.randint(0, n, (), generator=g)] = draw(st.sampled_from([math.nan, math.inf]))
    return dict(log_ratio=lr.to(draw(dtypes)), target_kl=draw(st.sampled_from([None, 0.01, 0.02, 0.1])))


KL_EXAMPLES = (
    dict(log_ratio=torch.zeros(4), target_kl=0.01),  # kl = 0 exactly
    dict(log_ratio=torch.tensor([math.nan, 0.0]), target_kl=0.01),  # NaN estimate stops
    dict(log_ratio=torch.full((3,), 1e-5), target_kl=1e-12),  # tiny Δ: expm1 keeps k3 > 0
)


def check_kl(impl, log_ratio, target_kl):
    stop, kl = impl.kl_early_stop(log_ratio, target_kl)
    d = log_ratio.double()
    want = (torch.expm1(d) - d).mean()
    e = _eps(log_ratio.dtype)
    tol = 8 * e * float((torch.expm1(d).abs() + d.abs()).nan_to_num(0.0).mean()) + 1e-300
    inputs = dict(log_ratio=log_ratio, target_kl=target_kl)
    assert_close("NUM-17", "k3 estimate mean(exp(Δ) - 1 - Δ)", kl.detach(), want, atol=tol, rtol=8 * e, **inputs)
    if bool(torch.isfinite(kl)) and float(kl) < 0:
        fail("NUM-17", f"kl = {float(kl)!r} < 0: k3 is non-negative", **inputs)
    want_stop = False if target_kl is None else not (float(kl) <= KL_MULTIPLIER * target_kl)
    if not isinstance(stop, torch.Tensor) or bool(stop) != want_stop:
        fail("NUM-17", f"stop = {stop!r} for kl = {float(kl)!r}, expected {want_stop} (stop iff not kl <= "
                       f"1.5·target_kl; NaN stops; None never stops)", **inputs)


@st.composite
def update_plans(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    n_steps = draw(st.integers(1, 6))
    z = torch.randn(n_steps, 32, generator=g, dtype=torch.float64)  # per-minibatch features
    deltas = draw(st.sampled_from([0.02, 0.1, 0.3])) * (0.5 + torch.rand(n_steps, generator=g, dtype=torch.float64))
    return dict(z=z, deltas=deltas, target_kl=draw(st.sampled_from([None, 0.005, 0.02, 0.1])))


def check_kl_ordering(impl, z, deltas, target_kl):
    """A recorder: θ is the policy; log_ratio_fn(i) = θ·z_i (old log-probs 0), step_fn(i) adds deltas[i]."""
    theta = [0.0]
    log: list[tuple] = []

    def log_ratio_fn(i):
        log.append(("estimate", i, theta[0]))
        return theta[0] * z[i]

    def step_fn(i, log_ratio):
        log.append(("step", i, theta[0]))
        theta[0] += float(deltas[i])

    kls, steps_taken = impl.kl_guarded_updates(log_ratio_fn, step_fn, len(deltas), target_kl)
    inputs = dict(deltas=deltas, target_kl=target_kl)
    pre, th = [], 0.0  # the pre-step θ of step i is the sum of the earlier steps
    for i in range(len(deltas)):
        pre.append(th)
        th += float(deltas[i])

    def k3(t: float, i: int) -> float:
        return float((torch.expm1(t * z[i]) - t * z[i]).mean())

    for i, kl in enumerate(kls):
        want, got = k3(pre[i], i), float(kl)
        if abs(got - want) > 1e-9 * (1 + want):
            after = k3(pre[i] + float(deltas[i]), i)
            where = "AFTER the optimizer step" if abs(got - after) <= 1e-9 * (1 + after) else "elsewhere"
            fail("NUM-18", f"the KL deciding step {i} = {got:.6g} matches log-probs {where} ({after:.6g}); "
                           f"expected the pre-step estimate {want:.6g}", log=log, **inputs)
    stops = [i for i in range(len(deltas)) if target_kl is not None and k3(pre[i], i) > KL_MULTIPLIER * target_kl]
    want_taken = stops[0] if stops else len(deltas)
    taken = [e[1] for e in log if e[0] == "step"]
    if steps_taken != want_taken or taken != list(range(want_taken)):
        fail("NUM-18", f"steps taken {taken} (reported {steps_taken}), expected steps 0..{want_taken - 1}: the "
                       f"first estimate above 1.5·target_kl must skip its step and all later ones", log=log, **inputs)
    if len(kls) != want_taken + bool(stops):
        fail("NUM-18", f"{len(kls)} KL estimates, expected one per attempted step ({want_taken + bool(stops)})",
             log=log)


@st.composite
def value_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 30))
    old = 20 * torch.randn(n, generator=g, dtype=torch.float64)
    values = old + draw(st.sampled_from([0.1, 1.0, 15.0])) * torch.randn(n, generator=g, dtype=torch.float64)
    returns = old + 10 * torch.randn(n, generator=g, dtype=torch.float64)
    dtype = draw(dtypes)
    return dict(values=values.to(dtype), old_values=old.to(dtype), returns=returns.to(dtype),
                value_clip=draw(st.sampled_from([10.0, 0.5, 3.0, None])))


VALUE_EXAMPLES = (  # a move of 1 from old: inside value_clip = 10, outside a policy clip of 0.2
    dict(values=torch.tensor([1.0, -1.0]), old_values=torch.zeros(2), returns=torch.tensor([5.0, 5.0]),
         value_clip=10.0),
)


def check_value_loss(impl, values, old_values, returns, value_clip):
    got = impl.value_loss(values, old_values, returns, value_clip=value_clip)
    v, o, r = values.double(), old_values.double(), returns.double()
    unclipped = (v - r) ** 2
    if value_clip is None:
        want = 0.5 * unclipped.mean()
    else:
        clipped = (o + (v - o).clamp(-value_clip, value_clip) - r) ** 2
        want = 0.5 * torch.maximum(unclipped, clipped).mean()
    e = _eps(values.dtype)
    scale = float((v.abs() + o.abs() + r.abs()).max())
    assert_close("NUM-19", f"value_loss (value_clip={value_clip})", got.detach(), want,
                 atol=16 * e * scale * (1 + scale), rtol=16 * e, values=values, old_values=old_values,
                 returns=returns)


@st.composite
def masked_cases(draw, poison: bool):
    """ratio, advantages [n] for the causal head masks of op_actions [n]; with ``poison`` the masked-out entries
    are overwritten with NaN / inf by the checks (NUM-32)."""
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 30))
    op = torch.randint(0, 3, (n,), generator=g)
    if draw(st.booleans()):
        op[:] = WAIT  # blueprint/blend heads with no relevant sample
    ratio = torch.exp(0.3 * torch.randn(n, generator=g, dtype=torch.float64))
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    dtype = draw(dtypes)
    return dict(op_actions=op, ratio=ratio.to(dtype), advantages=adv.to(dtype),
                clip_ratio=draw(st.sampled_from([0.2, 0.1, 0.5])), poison=poison)


def _masked_examples(poison: bool) -> tuple[dict, ...]:
    return (dict(op_actions=torch.tensor([WAIT] * 4), ratio=torch.ones(4), advantages=torch.ones(4), clip_ratio=0.2,
                 poison=poison),)


def check_masked(impl, op_actions, ratio, advantages, clip_ratio, poison, fn):
    clause = "NUM-32" if poison else "NUM-20"
    for head, mask in causal_head_masks(op_actions).items():
        r, a = ratio.clone(), advantages.clone()
        if poison:  # masked-out samples carry garbage: a head with no causal effect must not see it
            r[~mask], a[~mask] = math.nan, math.inf
        r64, a64 = r.double(), a.double()
        surr = torch.where(mask, torch.minimum(r64 * a64, r64.clamp(1 - clip_ratio, 1 + clip_ratio) * a64), 0.0)
        a64 = torch.where(mask, a64, 0.0)
        n = mask.sum().clamp(min=1)
        e = _eps(ratio.dtype)
        inputs = dict(head=head, mask=mask, ratio=r, advantages=a, clip_ratio=clip_ratio)
        relevant = f"for head '{head}' ({int(mask.sum())} relevant)"
        if fn == "masked_mean":
            assert_close(clause, f"masked_mean(advantages) {relevant}", impl.masked_mean(a, mask).detach(),
                         a64.sum() / n, atol=8 * e * (1 + float(a64.abs().sum())), **inputs)
        else:
            assert_close(clause, f"masked_policy_loss {relevant}",
                         impl.masked_policy_loss(r, a, mask, clip_ratio=clip_ratio).detach(), -surr.sum() / n,
                         atol=16 * e * (1 + float(surr.abs().sum())), **inputs)


@st.composite
def entropy_cases(draw, poison: bool):
    g = torch.Generator().manual_seed(draw(seeds))
    n = draw(st.integers(1, 30))
    op = torch.randint(0, 3, (n,), generator=g)
    op[: draw(st.integers(0, n))] = WAIT  # rarely germinating: blueprint/blend act on few steps, maybe none
    dtype = draw(dtypes)
    entropy = {head: torch.rand(n, generator=g, dtype=torch.float64).mul(2).to(dtype)
               for head in ("op", "slot", "blueprint", "blend")}
    coef = draw(st.sampled_from([None, {}, {"blueprint": 1.5, "blend": 2.0}, {"op": 0.0, "slot": 0.5}]))
    return dict(op_actions=op, entropy=entropy, coef=coef, poison=poison)


def check_entropy(impl, op_actions, entropy, coef, poison):
    clause = "NUM-32" if poison else "NUM-22"
    masks = causal_head_masks(op_actions)
    if poison:  # steps where a head did nothing carry garbage: they must never reach its mean
        entropy = {h: torch.where(masks[h], e, torch.full_like(e, math.nan)) for h, e in entropy.items()}
    loss, per_head = impl.entropy_loss(entropy, masks, coef)
    want_total = 0.0
    e = _eps(next(iter(entropy.values())).dtype)
    for head, h in entropy.items():
        m = masks[head]
        want = torch.where(m, h.double(), 0.0).sum() / m.sum().clamp(min=1)
        want_total = want_total - (coef or {}).get(head, 1.0) * want
        assert_close(clause, f"entropy of head '{head}' ({int(m.sum())} active steps)", per_head[head].detach(),
                     want, atol=8 * e * (1 + float(want.abs())), head=head, mask=m, entropy=h)
    assert_close(clause, "entropy_loss", loss.detach(), want_total, atol=32 * e * (1 + abs(float(want_total))),
                 coef=coef, op_actions=op_actions)


def check_entropy_rejects(impl, op_actions, entropy, coef, poison):
    masks = causal_head_masks(op_actions)
    some = next(iter(entropy.values()))
    expect_rejection("NUM-31", lambda: impl.entropy_loss(entropy, masks, {"nonexistent_head": 1.0}),
                     names=["coef"], mentions=["nonexistent_head"], what="entropy_loss with a coef for an unknown head")
    expect_rejection("NUM-31", lambda: impl.entropy_loss(entropy, {"op": masks["op"]}, None), names=["masks"],
                     what="entropy_loss with masks for one head of four")
    expect_rejection("NUM-31", lambda: impl.entropy_loss({"op": some}, {"op": masks["op"]}, {"op": -1.0}),
                     names=["coef", "op"], mentions=["-1.0"], what="entropy_loss with a negative coefficient")


def _leaves(tensors: dict, dtype=None) -> dict:
    """Fresh leaves requiring grad (in ``dtype`` if given) of the floating tensors of ``tensors``."""
    return {k: v.detach().to(dtype or v.dtype).clone().requires_grad_(True) for k, v in tensors.items()}


def _value_loss64(values, old_values, returns, value_clip):
    unclipped = (values - returns) ** 2
    if value_clip is None:
        return 0.5 * unclipped.mean()
    clipped = (old_values + (values - old_values).clamp(-value_clip, value_clip) - returns) ** 2
    return 0.5 * torch.maximum(unclipped, clipped).mean()


def _policy_loss64(ratio, advantages, mask, clip_ratio):
    r, a = ratio[mask], advantages[mask]
    return -torch.minimum(r * a, r.clamp(1 - clip_ratio, 1 + clip_ratio) * a).sum() / mask.sum().clamp(min=1)


def _entropy_loss64(entropy, masks, coef):
    return -sum((coef or {}).get(h, 1.0) * e[masks[h]].sum() / masks[h].sum().clamp(min=1) for h, e in entropy.items())


def _tol(dtype: torch.dtype) -> dict:
    return dict(atol=64 * _eps(dtype), rtol=64 * _eps(dtype))


def check_value_loss_gradient(impl, values, old_values, returns, value_clip):
    got_in = _leaves(dict(values=values, old_values=old_values, returns=returns))
    want_in = _leaves(got_in, torch.float64)
    got = named_grads(impl.value_loss(*got_in.values(), value_clip=value_clip), got_in)
    want = named_grads(_value_loss64(*want_in.values(), value_clip), want_in)
    assert_grads_close("NUM-29", f"value_loss (value_clip={value_clip})", got, want, **_tol(values.dtype),
                       values=values, old_values=old_values, returns=returns)


def check_policy_loss_gradient(impl, op_actions, ratio, advantages, clip_ratio, poison):
    clause = "NUM-32" if poison else "NUM-29"
    for head, mask in causal_head_masks(op_actions).items():
        r, a = ratio.clone(), advantages.clone()
        if poison:  # garbage where the head did nothing: its gradient there must be 0, not NaN
            r[~mask], a[~mask] = math.nan, math.inf
        got_in = _leaves(dict(ratio=r, advantages=a))
        want_in = _leaves(got_in, torch.float64)
        got = named_grads(impl.masked_policy_loss(*got_in.values(), mask, clip_ratio=clip_ratio), got_in)
        want = named_grads(_policy_loss64(*want_in.values(), mask, clip_ratio), want_in)
        assert_grads_close(clause, f"masked_policy_loss for head '{head}' ({int(mask.sum())} relevant)", got, want,
                           **_tol(ratio.dtype), mask=mask, ratio=r, advantages=a, clip_ratio=clip_ratio)


def check_entropy_gradient(impl, op_actions, entropy, coef, poison):
    masks = causal_head_masks(op_actions)
    if poison:
        entropy = {h: torch.where(masks[h], e, torch.full_like(e, math.nan)) for h, e in entropy.items()}
    got_in = _leaves(entropy)
    want_in = _leaves(entropy, torch.float64)
    got = named_grads(impl.entropy_loss(got_in, masks, coef)[0], got_in)
    want = named_grads(_entropy_loss64(want_in, masks, coef), want_in)
    assert_grads_close("NUM-32" if poison else "NUM-29", f"entropy_loss (coef {coef})", got, want, **_tol(next(iter(entropy.values())).dtype),
                       op_actions=op_actions)


def _entropy_examples(poison: bool) -> tuple[dict, ...]:
    return (dict(op_actions=torch.tensor([WAIT] * 5 + [GERMINATE]), coef=None, poison=poison,
                 entropy={h: torch.linspace(0.1, 1.0, 6) for h in ("op", "slot", "blueprint", "blend")}),)


# --------------------------------------------------------------------------------------------------
# Properties: bad arguments
# --------------------------------------------------------------------------------------------------
def _bad_calls() -> list[tuple[str, list[str], list[str]]]:
    """(call as source, names the error must mention, values it must mention)."""
    return [
        ("impl.safe_standardize(torch.ones(3), eps=0.0)", ["eps"], ["0.0"]),
        ("impl.safe_standardize(torch.ones(3, dtype=torch.int64))", ["x"], ["int64"]),
        ("impl.safe_zero_center(torch.ones(3, dtype=torch.int64))", ["x"], ["int64"]),
        ("impl.RunningMeanStd(shape=(3,), epsilon=-1e-4)", ["epsilon"], ["-0.0001"]),
        ("impl.RunningMeanStd(shape=(0,))", ["shape"], ["(0,)"]),
        ("impl.ObsNormalizer(shape=(3,), clip=0.0)", ["clip"], ["0.0"]),
        ("impl.ObsNormalizer(shape=(3,), epsilon=0.0)", ["epsilon"], ["0.0"]),
        ("impl.ObsNormalizer(shape=(3,)).normalize(torch.zeros(2, 4))", ["obs"], ["(2, 4)"]),
        ("impl.ObsNormalizer(shape=(3,)).load_state_dict({'mean': torch.zeros(3)})", ["state"], ["var"]),
        ("impl.ratio_guard(torch.zeros(3), torch.zeros(4))", ["old_log_prob"], ["(4,)"]),
        ("impl.LossGuard()(torch.zeros(2), 'policy')", ["loss"], ["(2,)"]),
        ("impl.masked_component_weights(torch.zeros(4, 3), torch.zeros(2))", ["logits"], ["(2,)"]),
        ("impl.kl_early_stop(torch.zeros(3), -0.01)", ["target_kl"], ["-0.01"]),
        ("impl.kl_early_stop(torch.zeros(0), 0.01)", ["log_ratio"], ["empty"]),
        ("impl.kl_guarded_updates(lambda i: torch.zeros(2), lambda i, lr: None, 2, 0.0)", ["target_kl"], ["0.0"]),
        ("impl.value_loss(torch.zeros(3), torch.zeros(3), torch.zeros(3), value_clip=0.0)", ["value_clip"], ["0.0"]),
        ("impl.value_loss(torch.zeros(3), torch.zeros(2), torch.zeros(3))", ["old_values"], ["(2,)"]),
        ("impl.masked_mean(torch.zeros(3), torch.ones(3))", ["mask"], ["float32"]),
        ("impl.masked_mean(torch.zeros(3), torch.ones(2, dtype=torch.bool))", ["mask"], ["(2,)"]),
        ("impl.masked_policy_loss(torch.ones(3), torch.ones(3), torch.ones(3, dtype=torch.bool), clip_ratio=-0.2)",
         ["clip_ratio"], ["-0.2"]),
    ]


def _called(call: str) -> str:
    """The interface name a bad call (source text 'impl.NAME(...)...') exercises."""
    return call.removeprefix("impl.").split("(", 1)[0]


def check_rejects_args(impl, fn):
    for call, names, mentions in _bad_calls():
        if _called(call) == fn:
            expect_rejection("NUM-21", lambda call=call: eval(call, {"impl": impl, "torch": torch}),
                             names=names, mentions=mentions, what=call)


def check_empty_case_strategy():
    return st.fixed_dictionaries(dict(shape=st.sampled_from([(0,), (0, 3), (2, 0)]), dtype=dtypes))


stream_cases = streams()
clip_cases = st.builds(lambda c, clip: dict(c, clip=clip), stream_cases, st.sampled_from([OBS_CLIP, 1.0]))
bad_cases = st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), stream_cases,
                      st.sampled_from(["nan", "inf", "-inf", "empty", "int", "shape"]), st.integers(0, 10**6))
propagate_cases = st.builds(lambda c, bad, p: dict(c, bad=bad, position=p), standardize_cases(),
                            st.sampled_from([math.nan, math.inf, -math.inf]), st.integers(0, 10**6))
_STD = ("safe_standardize", "safe_zero_center")

SCALAR_FUNCTIONS = ("safe_standardize", "RunningMeanStd", "ObsNormalizer", "value_loss", "masked_policy_loss",
                    "kl_early_stop")


def check_scalar_hyperparameters(impl, x, eps, fn):
    flat = x.reshape(-1)
    rows = flat.reshape(-1, 1)  # [N, 1]
    g = torch.Generator().manual_seed(flat.numel())
    old = (flat + 0.1 * torch.randn(flat.shape, generator=g, dtype=torch.float64).to(x.dtype))

    def statistics_after(obj, step):
        step(obj)(rows)
        return obj.state_dict()

    runs = {  # fn -> (its hyper-parameters, the call returning what to compare)
        "safe_standardize": (dict(eps=eps), lambda eps: impl.safe_standardize(x, eps)),
        "RunningMeanStd": (dict(epsilon=RMS_EPSILON), lambda epsilon: statistics_after(
            impl.RunningMeanStd(shape=(1,), epsilon=epsilon), lambda o: o.update)),
        "ObsNormalizer": (dict(epsilon=eps, clip=OBS_CLIP), lambda epsilon, clip: (lambda n: (
            statistics_after(n, lambda o: o.commit), n.normalize(rows)))(
            impl.ObsNormalizer(shape=(1,), epsilon=epsilon, clip=clip))),
        "value_loss": (dict(value_clip=0.2), lambda value_clip: impl.value_loss(flat, old, flat.flip(0), value_clip)),
        "masked_policy_loss": (dict(clip_ratio=0.2), lambda clip_ratio: impl.masked_policy_loss(
            (flat - old).clamp(-5, 5).exp(), flat, torch.ones_like(flat, dtype=torch.bool), clip_ratio)),
        "kl_early_stop": (dict(target_kl=0.01), lambda target_kl: impl.kl_early_stop((flat - old).clamp(-5, 5),
                                                                                     target_kl)),
    }
    params, call = runs[fn]
    check_scalar_types("NUM-23", call, params, x=x)


DEFAULT_FUNCTIONS = ("safe_standardize", "RunningMeanStd", "ObsNormalizer", "value_loss", "masked_policy_loss",
                     "masked_component_weights")


def check_defaults(impl, x, eps, fn):
    flat = x.reshape(-1)
    rows = flat.reshape(-1, 1)  # [N, 1]
    old = flat - 12.5  # |v - old| beyond the value clip
    ratio = (flat - flat.flip(0)).clamp(-3, 3).exp()
    ones = torch.ones_like(flat, dtype=torch.bool)
    if fn == "masked_component_weights" and flat.numel() < 2:
        return  # a component's std needs two rows
    adv = torch.stack([flat, flat.flip(0), torch.zeros_like(flat)], -1)

    def normalizer(**kw):
        norm = impl.ObsNormalizer(shape=(1,), **kw)
        norm.commit(rows)
        return norm.normalize(100 * rows)

    def running(**kw):
        rms = impl.RunningMeanStd(shape=(1,), **kw)
        rms.update(rows)
        return rms.state_dict()

    runs = {  # fn -> (its documented defaults, the call with some of them given)
        "safe_standardize": (dict(eps=STD_EPS), lambda kw: impl.safe_standardize(x, **kw)),
        "RunningMeanStd": (dict(epsilon=RMS_EPSILON), lambda kw: running(**kw)),
        "ObsNormalizer": (dict(epsilon=OBS_EPSILON, clip=OBS_CLIP), lambda kw: normalizer(**kw)),
        "value_loss": (dict(value_clip=10.0), lambda kw: impl.value_loss(flat, old, 3 * flat.flip(0), **kw)),
        "masked_policy_loss": (dict(clip_ratio=0.2), lambda kw: impl.masked_policy_loss(ratio, flat, ones, **kw)),
        "masked_component_weights": (dict(std_eps=STD_EPS), lambda kw: impl.masked_component_weights(
            adv, torch.zeros(3, dtype=x.dtype), **kw)),
    }
    defaults, run = runs[fn]
    same_with_defaults("NUM-24", fn, run, defaults, x=x)


def check_rejects_more(impl, fn):
    mask = torch.ones(3, dtype=torch.bool)
    calls = (
        (lambda: impl.masked_mean(torch.zeros(3, dtype=torch.int64), mask), ["x"], "masked_mean with int64 x"),
        (lambda: impl.masked_policy_loss(torch.ones(3), torch.ones(2), mask), ["advantages"],
         "masked_policy_loss with advantages (2,) for ratio (3,)"),
        (lambda: impl.masked_policy_loss(torch.ones(3), torch.ones(3), torch.ones(3)), ["mask"],
         "masked_policy_loss with a float mask"),
        (lambda: impl.kl_guarded_updates(lambda i: torch.zeros(2), lambda i, lr: None, 0, -1.0), ["target_kl"],
         "kl_guarded_updates(n_steps=0, target_kl=-1.0)"),
    )
    for call, names, what in calls:
        if what.split(" ", 1)[0].split("(", 1)[0] == fn:
            expect_rejection("NUM-25", call, names=names, what=what)


def check_thresholds(impl, fn):
    {"safe_standardize": _threshold_standardize, "masked_component_weights": _threshold_components,
     "ratio_guard": _threshold_ratio, "kl_early_stop": _threshold_kl}[fn](impl)


def _threshold_standardize(impl):
    x = torch.tensor([-2.0, 0.0, 2.0], dtype=torch.float64)  # sigma = 2 exactly
    got = impl.safe_standardize(x, eps=2.0)
    if got.tolist() != [-1.0, 0.0, 1.0]:
        fail("NUM-26", f"safe_standardize([-2, 0, 2], eps=2.0) = {got.tolist()}, expected [-1, 0, 1]: sigma = 2 == eps "
                       "standardizes (zero-centring is for sigma < eps)")


def _threshold_components(impl):
    adv = torch.tensor([[-2.0, -2.0], [0.0, 0.0], [2.0, 20.0]], dtype=torch.float64)  # component stds 2, 11.01...
    _, valid = impl.masked_component_weights(adv, torch.zeros(2, dtype=torch.float64), std_eps=2.0)
    if valid.tolist() != [False, True]:
        fail("NUM-26", f"masked_component_weights with component stds [2, ~11] and std_eps = 2 gives valid = "
                       f"{valid.tolist()}, expected [False, True]: a std equal to std_eps is masked")


def _threshold_ratio(impl):
    d = torch.tensor([LOG_RATIO_CLAMP, -LOG_RATIO_CLAMP, math.log(RATIO_MAX), math.log(RATIO_MIN)], dtype=torch.float64)
    _, events = impl.ratio_guard(d, torch.zeros(4, dtype=torch.float64))
    counts = {k: int(v) for k, v in events.items()}
    if counts.get("log_ratio_clamped") != 0 or counts.get("ratio_clamped") != 2:
        fail("NUM-26", f"ratio_guard events {counts} for Δ = [20, -20, ln 100, ln 0.01]: expected log_ratio_clamped 0 "
                       "(|Δ| == 20 is not beyond the clamp) and ratio_clamped 2 (only ±20 lie outside [ln 0.01, ln 100])")


def _threshold_kl(impl):
    for k in range(1, 200):  # a Δ whose k3 estimate k is exactly KL_MULTIPLIER times a float target
        lr = torch.tensor([0.01 * k, -0.005 * k], dtype=torch.float64)
        _, kl = impl.kl_early_stop(lr, None)
        target = float(kl) / KL_MULTIPLIER
        if target > 0 and KL_MULTIPLIER * target == float(kl):
            stop, _ = impl.kl_early_stop(lr, target)
            if bool(stop):
                fail("NUM-26", f"kl_early_stop stops with KL = {float(kl)!r} == {KL_MULTIPLIER} * target_kl "
                               f"({target!r}): only KL > {KL_MULTIPLIER}·target_kl stops")
            return


def check_copies_detached(impl, x, eps, fn):
    if fn == "kl_guarded_updates":
        return _detached_kl(impl)
    rows = x.reshape(-1, 1)
    obj, twin = getattr(impl, fn)(shape=(1,)), getattr(impl, fn)(shape=(1,))
    obj.update(rows) if fn == "RunningMeanStd" else obj.commit(rows)
    twin.update(rows) if fn == "RunningMeanStd" else twin.commit(rows)
    for v in obj.state_dict().values():
        v.fill_(-3.0)
    for (k, got), (_, want) in zip(obj.state_dict().items(), twin.state_dict().items()):
        if not torch.equal(got, want):
            fail("NUM-27", f"{fn}.state_dict()['{k}'] = {got.tolist()} after the caller wrote into a state_dict(),"
                           f" expected {want.tolist()}: return copies", x=x)


def _detached_kl(impl):
    w = torch.zeros((), dtype=torch.float64, requires_grad=True)
    kls, _ = impl.kl_guarded_updates(lambda i: w * torch.tensor([0.1, -0.2], dtype=torch.float64),
                                     lambda i, lr: None, 2, 0.01)
    attached = [i for i, k in enumerate(kls) if isinstance(k, torch.Tensor) and (k.requires_grad or k.grad_fn)]
    if attached:
        fail("NUM-27", f"kl_guarded_updates' KL estimates {attached} require grad: the estimate is a statistic of the "
                       "pre-step policy, computed on the detached log-ratio")


def check_ratio_gradient(impl, dtype):
    new = torch.tensor([800.0, -800.0, 30.0, -30.0, 0.5], dtype=dtype, requires_grad=True)
    ratio, _ = impl.ratio_guard(new, torch.zeros(5, dtype=dtype))
    (grad,) = torch.autograd.grad(ratio.sum(), new)
    want = torch.tensor([0.0, 0.0, 0.0, 0.0, math.exp(0.5)], dtype=torch.float64)
    if not bool(torch.isfinite(grad).all()) or not torch.allclose(grad.double(), want, rtol=1e-5, atol=0.0):
        fail("NUM-28", f"d ratio / d new_log_prob = {grad.tolist()} for Δ = [800, -800, 30, -30, 0.5] ({dtype}), "
                       f"expected {want.tolist()}: finite, 0 where clamped")


PROPERTIES = (
    *per_function("NUM-1", check_empty, _STD, check_empty_case_strategy(), max_examples=6),
    *per_function("NUM-2", check_constant, _STD, standardize_cases(), STANDARDIZE_EXAMPLES),
    Property("NUM-3", check_standardize, standardize_cases(), STANDARDIZE_EXAMPLES, ("safe_standardize",)),
    Property("NUM-4", check_zero_center, standardize_cases(), STANDARDIZE_EXAMPLES, ("safe_zero_center",)),
    *per_function("NUM-5", check_propagates, _STD, propagate_cases),
    Property("NUM-6", check_chan, stream_cases, STREAM_EXAMPLES, ("RunningMeanStd",)),
    Property("NUM-7", check_split_invariance, stream_cases, STREAM_EXAMPLES, ("RunningMeanStd",)),
    Property("NUM-8", check_rejects_batch, bad_cases, requires=("RunningMeanStd",)),
    *per_function("NUM-9", check_roundtrip, ("RunningMeanStd", "ObsNormalizer"), stream_cases, STREAM_EXAMPLES),
    Property("NUM-10", check_normalize, clip_cases, requires=("ObsNormalizer",)),
    Property("NUM-11", check_frozen, clip_cases, requires=("ObsNormalizer",)),
    Property("NUM-12", check_commit, stream_cases, STREAM_EXAMPLES, ("ObsNormalizer", "RunningMeanStd")),
    Property("NUM-13", check_ratio, log_prob_pairs(), RATIO_EXAMPLES, ("ratio_guard",)),
    Property("NUM-14", check_ratio_events, log_prob_pairs(), RATIO_EXAMPLES, ("ratio_guard",)),
    Property("NUM-15", check_loss_guard, loss_sequences(), LOSS_EXAMPLES, ("LossGuard",)),
    Property("NUM-16", check_component_mask, component_cases(),
             tuple(mode_case(m) for m in MODES), ("masked_component_weights",)),
    Property("NUM-17", check_kl, kl_cases(), KL_EXAMPLES, ("kl_early_stop",)),
    Property("NUM-18", check_kl_ordering, update_plans(), requires=("kl_guarded_updates",)),
    Property("NUM-19", check_value_loss, value_cases(), VALUE_EXAMPLES, ("value_loss",)),
    *per_function("NUM-20", check_masked, ("masked_mean", "masked_policy_loss"), masked_cases(False),
                  _masked_examples(False)),
    *per_function("NUM-21", check_rejects_args, tuple(dict.fromkeys(_called(c) for c, _, _ in _bad_calls()))),
    Property("NUM-22", check_entropy, entropy_cases(False), _entropy_examples(False), ("entropy_loss",)),
    *per_function("NUM-23", check_scalar_hyperparameters, SCALAR_FUNCTIONS, standardize_cases(),
                  STANDARDIZE_EXAMPLES[:1], max_examples=4),
    *per_function("NUM-24", check_defaults, DEFAULT_FUNCTIONS, standardize_cases(), STANDARDIZE_EXAMPLES,
                  max_examples=10),
    *per_function("NUM-25", check_rejects_more, ("masked_mean", "masked_policy_loss", "kl_guarded_updates")),
    *per_function("NUM-26", check_thresholds, ("safe_standardize", "masked_component_weights", "ratio_guard",
                                               "kl_early_stop")),
    *per_function("NUM-27", check_copies_detached, ("RunningMeanStd", "ObsNormalizer", "kl_guarded_updates"),
                  standardize_cases(), STANDARDIZE_EXAMPLES[:1], max_examples=5),
    Property("NUM-28", check_ratio_gradient, st.builds(lambda d: dict(dtype=d), dtypes),
             (dict(dtype=torch.float64), dict(dtype=torch.float32)), ("ratio_guard",), max_examples=2),
    Property("NUM-29", check_value_loss_gradient, value_cases(), VALUE_EXAMPLES, ("value_loss",)),
    Property("NUM-29", check_policy_loss_gradient, masked_cases(False), _masked_examples(False),
             ("masked_policy_loss",)),
    Property("NUM-29", check_entropy_gradient, entropy_cases(False), _entropy_examples(False), ("entropy_loss",)),
    Property("NUM-30", check_commit_rejects, bad_cases, requires=("ObsNormalizer",)),
    Property("NUM-31", check_entropy_rejects, entropy_cases(False), _entropy_examples(False), ("entropy_loss",),
             max_examples=3),
    *per_function("NUM-32", check_masked, ("masked_mean", "masked_policy_loss"), masked_cases(True),
                  _masked_examples(True)),
    Property("NUM-32", check_entropy, entropy_cases(True), _entropy_examples(True), ("entropy_loss",)),
    Property("NUM-32", check_policy_loss_gradient, masked_cases(True), _masked_examples(True),
             ("masked_policy_loss",)),
    Property("NUM-32", check_entropy_gradient, entropy_cases(True), _entropy_examples(True), ("entropy_loss",)),
)

CONTRACT = Contract("numerics", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
