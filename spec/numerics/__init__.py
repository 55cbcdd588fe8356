"""Contract ``numerics``: the robust numerics a PPO loop leans on (normalizers, guards, masks, KL stop).

Sources: the numerics note (all of it: §1 safe normalization, §2 component masking, §3 PPO ratio guards, §5 loss
guards) and the PPO review (CRITICAL-1 frozen observation normalizer, HIGH-1 batch-wise statistics, HIGH-2 KL
early stop before the step, HIGH-3 per-head causal masks, HIGH-4 separate value clip).

Formulas (x [...] flattened to n values, dtype float32/float64)
----------------------------------------------------------------
safe_standardize(x, eps=1e-8)                                                       (numerics note §1)
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

ObsNormalizer(shape=(), epsilon=1e-8, clip=10.0)                              (PPO review CRITICAL-1)
    normalize(obs [..., *shape]) = clip((obs − mean) / sqrt(var + epsilon), −clip, clip)  (SB3
    VecNormalize) with the statistics as last committed; normalize NEVER updates them, so every row of
    a rollout is normalized identically. commit(batch [N, *shape]) = rms.update(batch), called after
    the PPO update with the rollout's raw observations.

ratio_guard(new_log_prob [...], old_log_prob [...]) -> (ratio [...], events)            (numerics note §3)
    Δ = new − old;  ratio = clamp(exp(clamp(Δ, −20, 20)), 0.01, 100) for finite Δ, and 1 for a
    non-finite Δ. events (0-d int64 tensors): log_ratio_clamped = #{finite |Δ| > 20},
    nonfinite = #{non-finite Δ}, ratio_clamped = #{finite Δ ∉ [ln 0.01, ln 100]}.
    Convention: the seed clamps before its finiteness check, which maps Δ = ±Inf to ratio 100 / 0.01;
    its own Test 5 expects Inf → 1. We take "any non-finite Δ → 1, counted": an infinite log-prob is a
    bug signal, not extreme confidence. The gradient w.r.t. new_log_prob is ratio inside [0.01, 100]
    and exactly 0 where clamped or non-finite (never NaN).

LossGuard: guard(loss [], kind) -> loss if finite, else 0 (counted per kind)           (numerics note §5)
    counts() -> {kind: number of non-finite losses}; exactly one RuntimeWarning per kind naming it,
    by the time counts() returns (the fast twin defers the warning to counts(), its one host sync).

masked_component_weights(advantages [N, C], logits [C], std_eps=1e-8) -> (weights [C], valid [C])
    valid_c = std(advantages[:, c]) > std_eps (unbiased, of the rows shifted by row 0 so that a constant
    column has std exactly 0; N = 1 gives NaN → invalid)                                  (numerics note §2)
    weights = softmax over the valid logits only, exactly 0 (and zero gradient) on invalid components,
    all zeros when no component is valid. The numerics note modes (C = 6): centroid_distance_only 1 active,
    simple_delete_only 3 active, normal 6 active.

kl_early_stop(log_ratio [...], target_kl) -> (stop [] bool, kl [])                    (PPO review HIGH-2)
    kl = mean(exp(Δ) − 1 − Δ) (Schulman's k3, ≥ 0, computed as expm1(Δ) − Δ); stop = not (kl ≤
    1.5·target_kl): a NaN estimate stops (fail-safe). target_kl None never stops.
kl_guarded_updates(log_ratio_fn, step_fn, n_steps, target_kl) -> (kls, steps_taken)
    for i < n_steps: Δ_i = log_ratio_fn(i) at the current (PRE-step) parameters; stop, kl_i =
    kl_early_stop(Δ_i.detach()); if stop: return (skip step i and all later ones); step_fn(i, Δ_i).

value_loss(values [B], old_values [B], returns [B], value_clip=10.0) -> []            (PPO review HIGH-4)
    v_c = old + clamp(v − old, −value_clip, value_clip)
    loss = 0.5·mean(max((v − R)², (v_c − R)²));   value_clip None → 0.5·mean((v − R)²).
    value_clip is its own range, never the policy clip ratio (values live on another scale).

masked_mean(x [B], mask [B] bool) = Σ_{mask} x / max(Σ mask, 1)                       (PPO review HIGH-3)
masked_policy_loss(ratio [B], advantages [B], mask [B], clip_ratio=0.2)
    = −masked_mean(min(r·A, clamp(r, 1 − c, 1 + c)·A), mask): a head with no causally relevant sample
    contributes 0, not NaN; masked-out entries (even non-finite) never reach the result. HIGH-3 heads:
    op always, slot unless WAIT, blueprint and blend only for GERMINATE (``causal_head_masks``).
entropy_loss(entropy {head: [B]}, masks {head: [B] bool}, coef {head: c_h} | None)    (PPO review MEDIUM-3)
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

import torch
from hypothesis import strategies as st

from rlspec.contracts.numerics import MODES
from rlspec.spec.core import Contract, Property, by_category, per_function
from rlspec.spec.numerics._common import STANDARDIZE_EXAMPLES, STREAM_EXAMPLES, dtypes, standardize_cases
from rlspec.spec.numerics.arguments import (
    _STD,
    DEFAULT_FUNCTIONS,
    SCALAR_FUNCTIONS,
    _bad_calls,
    _called,
    bad_cases,
    check_copies_detached,
    check_defaults,
    check_empty_case_strategy,
    check_ratio_gradient,
    check_rejects_args,
    check_rejects_more,
    check_scalar_hyperparameters,
    check_thresholds,
    clip_cases,
    propagate_cases,
    stream_cases,
)
from rlspec.spec.numerics.guards import (
    LOSS_EXAMPLES,
    RATIO_EXAMPLES,
    check_loss_guard,
    check_ratio,
    check_ratio_events,
    log_prob_pairs,
    loss_sequences,
)
from rlspec.spec.numerics.losses import (
    KL_EXAMPLES,
    VALUE_EXAMPLES,
    _entropy_examples,
    _masked_examples,
    check_component_mask,
    check_entropy,
    check_entropy_gradient,
    check_entropy_rejects,
    check_kl,
    check_kl_ordering,
    check_masked,
    check_policy_loss_gradient,
    check_value_loss,
    check_value_loss_gradient,
    component_cases,
    entropy_cases,
    kl_cases,
    masked_cases,
    mode_case,
    update_plans,
    value_cases,
)
from rlspec.spec.numerics.normalizers import (
    check_chan,
    check_commit,
    check_commit_rejects,
    check_constant,
    check_empty,
    check_frozen,
    check_normalize,
    check_propagates,
    check_rejects_batch,
    check_roundtrip,
    check_split_invariance,
    check_standardize,
    check_zero_center,
)
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE

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
              "able to poison the loss or its gradient (PPO review HIGH-3's causal masks).",
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
