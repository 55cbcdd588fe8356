"""Contract ``success_set``: the success-as-a-set bonus phase of the success-set design (PPO + V-trace + replay).

Source: the success-set design §2.3 (trigger parameters, reason codes, telemetry), §3.1 (paired queue), §3.2 (Loss A),
§3.3 (bonus time, guards, all-reduce MIN), Part2 (PairPack, _mine_pairs_for_failure), Part4 (prototypes,
cross-cluster Top-K, coverage, diverse sampling). Runtime half, defaults and the PairPack fields:
rlspec.contracts.success_set.

loss_a(logits [N, A, B], fail_actions [N, A] int64, pos_mask [N, A, B] bool, zone_weight [N], tau=1, margin=0,
       empty_positive='mask') -> LossA(loss, per_step [N], logp_pos [N], logp_neg [N], valid [N])
    π_d = softmax(logits[n, d]) over the B bins of action dimension d (A = ACTION_DIM, B = N_BINS).
        log p⁻ = Σ_d log π_d(a⁻_d)                      log p⁺ = Σ_d log Σ_{a ∈ Pos_d} π_d(a)  (logsumexp)
        Δ = log p⁺ − log p⁻,   per_step = w_t · (−log σ((Δ − margin)/τ)) = w_t · softplus(−(Δ − margin)/τ)
        loss = Σ_{valid n} per_step_n / max(#valid, 1)
    logp_pos and logp_neg are diagnostics, returned without a graph; loss and per_step carry it. An empty
    batch (N = 0) gives loss 0 attached to logits (zero gradient) and outputs of shape [0].
    Gradient (the softmax normalizers cancel in Δ): with c_n = w_n σ(−(Δ_n − m)/τ) / (τ·#valid) >= 0,
        ∂loss/∂logits[n, d, b] = −c_n · ([b ∈ Pos_d] π_d(b)/π_d(Pos_d) − [b = a⁻_d])
    so a descent step raises the positive tokens (by their share of the set), lowers the failed token, and
    leaves every other token alone; along it log p⁻ falls and (with a⁻_d ∉ Pos_d) log p⁺ rises.
    The failed token may be in Pos_d (a success took the same token): it counts as a positive like any
    other, so dimension d contributes log(π_d(Pos_d)/π_d(a⁻_d)) >= 0; with Pos_d = {a⁻_d} for every d,
    Δ = 0, per_step = w·softplus(m/τ) and the gradient is zero (nothing separates success from failure).
    Empty positive set (some Pos_d = ∅, e.g. every success ended before t): 'mask' (default) drops the row:
    valid = False, per_step = 0, logp_pos = −inf, zero gradient, the mean runs over the other rows (all
    masked: loss = 0, finite, zero gradient); 'reject' raises ValueError naming 'pos_mask'.
    −log σ(y) is computed exactly (logsigmoid): torch's softplus switches to the identity above 20, a 2e-9
    relative error in the gradient that the float64 clause sees.
    dtype: outputs in the logits' dtype; the reference computes in float64. Tolerance: 64·eps·(1 + A·max|z|)/τ.

top_k_successes(query [Q, E], pool [M, E], k, cluster_ids [M] int64 | None) -> TopK(indices [Q, k'], similarity)
    cos(a, b) = a·b / (max(‖a‖, 1e-8)·max(‖b‖, 1e-8)); k' = min(k, M); rows by decreasing cosine, lower row
    first on ties. With cluster_ids (Part4 "prefer Top-K across clusters"): the most similar member of each
    cluster first (clusters ordered by that similarity), then the remaining rows by similarity — so the
    first min(k, #clusters) picks come from distinct clusters.

divergence_step(fail_states [T_f, O], succ_states [T_s, O], threshold=0.9) -> int
    Over the common prefix T = min(T_f, T_s), s_t = cos(fail_t, succ_t); t_d = the first t with s_t <
    threshold ("first drop below the threshold", the default rule), else argmin_t s_t (first on ties).
    threshold = −1 gives the pure argmin rule. The check accepts any answer the rule gives for similarities
    moved by <= 1e-12 (identical states have cosines 1 ± 1e-16: their argmin is rounding).

mine_pair(fail: Episode, successes: [Episode], config) -> PairPack | None      (Part2)
    Episode embedding = mean state (seed §6). Top-K over the pool (across clusters when config.use_clusters
    and some success has a cluster id); t_d against the Top-1; window [t_d − w, t_d + w] clipped to both the
    failure and the Top-1: start = max(0, t_d − w), end = min(t_d + w, T_f − 1, T_top1 − 1); zone weights
    w_t = 1 − |t − t_d|/(w + 1) (triangular, 1 at t_d); states / fail_actions = the failure's steps
    start..end; succ_actions [K, L, A] = each success's actions at the same steps, −1 past its end
    (build_pos_mask ignores −1). An empty pool gives None (mining skips; it never stops training).

SuccessPrototypes(num_prototypes=8, ema=0.05).assign(embedding [E]) -> cluster id        (Part4)
    The first num_prototypes successes fill the prototypes in order (ids 0, 1, ...); afterwards the most
    similar prototype by cosine (lower id on ties) takes the success and moves: p ← (1 − ema)·p + ema·e.
    ``prototypes`` [K, E], ``counts`` [K] (successes per cluster), ``filled``.

PairedQueue(capacity=4096).push(pack) / len / cluster_coverage() / sample(n, generator=, consume=, diverse=)
    FIFO (the oldest pack leaves when full); coverage = distinct cluster ids (−1 excluded) over the queue;
    sample: min(n, len) distinct packs, candidates visited in a randperm(generator) order, plain = the first
    n, diverse = greedily the pack adding the most uncovered clusters; consume removes the sampled packs.

BonusScheduler(config, reduce_min=all_reduce_min)          (§2.3, §3.3)
    decide(step, pairs, coverage, packs) -> BonusDecision(trigger, reason, telemetry). Local reason, the
    first failing in code order: 1 pairs < min_pairs (default max(32, 2·batch_packs)), 2 coverage <
    min_clusters, 3 packs = 0, 4 step − last_bonus_step < cooldown_steps (5000); 0 = ready. Every rank
    takes trigger = MIN over ranks of (reason == 0) and reason = MIN over ranks of the nonzero codes, from
    reduce_min (torch.distributed all_reduce MIN; a no-op in one process). On trigger last_bonus_step =
    step. Telemetry: bonus/triggered = bonus/ran = trigger; when not triggered also
    bonus/not_triggered_reason_code (the agreed reason), bonus/not_triggered_pairs, _cov (local values) and
    bonus/not_triggered_cooldown (local steps of cooldown left, 0 if none).
    run(update_fn) -> BonusRun(updates, stop_reason, telemetry): update_fn(i) -> (kl, entropy) for i = 0 ..
    bonus_updates − 1; after each update the local guard is 1 (KL > kl_guard or KL not finite), else 2
    (entropy < entropy_floor or NaN), else 0, agreed like the trigger; every rank stops after the same
    update. Telemetry bonus/updates, bonus/early_stop, bonus/early_stop_reason, bonus/kl, bonus/entropy.
    Multi-rank agreement is checked here by simulated ranks (a reduce_min that mins each rank's tensor with
    the other ranks' at the same call); tests/unit/test_success_set_dist.py runs two gloo processes.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.success_set import (
    COOLDOWN,
    LOW_COVERAGE,
    NO_ACTION,
    NO_CLUSTER,
    NO_PACK,
    NO_STOP,
    RUN_KEYS,
    STOP_ENTROPY,
    STOP_KL,
    TOO_FEW_PAIRS,
    Episode,
    PairPack,
    SuccessSetConfig,
    episode_embedding,
)
from rlspec.spec.core import Contract, Property, assert_close, assert_identical, by_category, expect_rejection, fail
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "SUCC-1": "loss_a = float64 closed form in value (loss, per_step, logp_pos, logp_neg, valid) and gradient "
              "∂loss/∂logits = −c_n([b ∈ Pos_d]π_b/π(Pos_d) − [b = a⁻_d]), τ inside σ, margin subtracted from Δ",
    "SUCC-2": "a descent step along −∂loss/∂logits lowers log p⁻ and does not lower log p⁺ (rows with a⁻ ∉ Pos)",
    "SUCC-3": "a failed token inside Pos_d counts as a positive: Pos_d = {a⁻_d} ∀d gives Δ = 0, "
              "per_step = w·softplus(margin/τ), zero gradient; a⁻_d ∈ Pos_d ∀d gives log p⁺ >= log p⁻",
    "SUCC-4": "empty positive sets: 'mask' drops those rows (valid False, per_step 0, zero finite gradient, mean "
              "over the rest; all masked: loss 0)",
    "SUCC-5": "top_k_successes returns the min(k, M) most cosine-similar pool rows, best first (brute-force "
              "float64 oracle)",
    "SUCC-6": "with cluster_ids, Top-K prefers clusters: each cluster's best member first (by similarity), then "
              "the rest; the first min(k, #clusters) picks are distinct clusters",
    "SUCC-7": "divergence_step = first t with cos(fail_t, succ_t) < threshold over the common prefix, else the "
              "argmin of the similarity",
    "SUCC-8": "mine_pair's window is [t_d − w, t_d + w] clipped to the failure and the Top-1 at both ends, t_d "
              "against the Top-1, zone weights 1 − |t − t_d|/(w + 1)",
    "SUCC-9": "mine_pair's PairPack: ids and cluster ids in Top-K order, the failure's states and actions over the "
              "window, succ_actions [K, L, A] padded with −1 past a success's end; empty pool -> None",
    "SUCC-10": "SuccessPrototypes: the first K successes fill the prototypes, then nearest by cosine + EMA "
               "update; cluster ids and counts (float64 replay)",
    "SUCC-11": "PairedQueue: FIFO capacity, cluster coverage, sample size, consume on/off, diverse sampling "
               "covers min(n, C) clusters of single-cluster packs, reproducible from the generator",
    "SUCC-12": "BonusScheduler.decide: reason codes in priority order (1 pairs < max(32, 2·batch) by default, "
               "2 coverage, 3 no pack, 4 cooldown), last_bonus_step on trigger, bonus/* telemetry",
    "SUCC-13": "BonusScheduler.run: exactly bonus_updates updates unless the KL guard (code 1, also non-finite KL) "
               "or the entropy floor (code 2) stops it after the offending update; telemetry",
    "SUCC-14": "ranks with different local states agree: trigger = every rank ready, reason = the smallest code, "
               "early stop after the same update on every rank (simulated ranks through reduce_min)",
    "SUCC-15": "bad input is rejected naming the argument (shapes, dtypes, tokens out of range, τ <= 0, negative "
               "zone weights, bad config fields, bad k / threshold)",
    "SUCC-16": "hyper-parameters (tau, margin, threshold, num_prototypes, ema) given as numpy scalars or 0-d "
               "tensors are used exactly like the Python number they hold",
    "SUCC-17": "loss_a's diagnostics logp_pos and logp_neg carry no graph; an empty batch (N = 0) gives loss 0 "
               "attached to logits (zero gradient), per_step, logp_pos, logp_neg [0] in the logits' dtype and "
               "valid [0] bool",
    "SUCC-18": "with empty_positive='reject' an empty positive set is rejected naming pos_mask",
}

CATEGORIES = by_category(
    maths=("SUCC-1", "SUCC-2", "SUCC-3", "SUCC-4", "SUCC-5", "SUCC-6", "SUCC-7", "SUCC-8", "SUCC-9", "SUCC-10",
           "SUCC-11", "SUCC-12", "SUCC-13", "SUCC-14", "SUCC-17"),
    robustness=("SUCC-16",),
    validation=("SUCC-15", "SUCC-18"),
)
RATIONALE = {
    "SUCC-16": SCALAR_RATIONALE,
}

INTERFACE = ("loss_a", "top_k_successes", "divergence_step", "mine_pair", "SuccessPrototypes", "PairedQueue",
             "BonusScheduler")
F64 = torch.float64
COS_EPS = 1e-8


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------------------------------
# Float64 oracles
# --------------------------------------------------------------------------------------------------
def softplus64(y: torch.Tensor) -> torch.Tensor:
    """log(1 + e^y) = max(y, 0) + log1p(e^−|y|), exact (torch's softplus is the identity above 20)."""
    return y.clamp_min(0) + torch.log1p(torch.exp(-y.abs()))


def closed_form_loss(z, a, mask, w, tau, margin):
    """Vectorized float64 Loss A: (loss, per_step, logp_pos, logp_neg, valid, grad [N, A, B])."""
    z, w = z.double(), w.double()
    logp = torch.log_softmax(z, -1)  # [N, A, B]
    pi = logp.exp()
    valid = mask.any(-1).all(-1)  # [N]
    lp_neg = logp.gather(-1, a.unsqueeze(-1)).squeeze(-1).sum(-1)  # [N]
    lp_pos = torch.logsumexp(logp.masked_fill(~mask, -math.inf), -1).sum(-1)  # [N], -inf where invalid
    x = (lp_pos - lp_neg - margin) / tau
    per = torch.where(valid, w * softplus64(-x.where(valid, 0.0)), 0.0)
    n_valid = max(int(valid.sum()), 1)
    c = torch.where(valid, w * torch.sigmoid(-x.where(valid, 0.0)) / (tau * n_valid), 0.0)  # [N]
    share = torch.where(mask, pi, 0.0) / torch.where(mask, pi, 0.0).sum(-1, keepdim=True).clamp_min(1e-300)
    failed = torch.nn.functional.one_hot(a, z.shape[-1]).double()
    grad = -c[:, None, None] * (share - failed)
    return per.sum() / n_valid, per, lp_pos, lp_neg, valid, grad


def cos64(a, b) -> torch.Tensor:
    """Pairwise float64 cosine [P, E] x [R, E] -> [P, R], one pair at a time."""
    a, b = a.double(), b.double()
    out = torch.empty(a.shape[0], b.shape[0], dtype=F64)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            out[i, j] = (a[i] @ b[j]) / (a[i].norm().clamp_min(COS_EPS) * b[j].norm().clamp_min(COS_EPS))
    return out


def oracle_top_k(query, pool, k, cluster_ids=None) -> list[list[int]]:
    sims = cos64(query, pool)
    out = []
    for q in range(query.shape[0]):
        order = sorted(range(pool.shape[0]), key=lambda m: (-float(sims[q, m]), m))
        if cluster_ids is not None:
            leaders = {}
            for m in order:
                leaders.setdefault(int(cluster_ids[m]), m)
            first = list(leaders.values())
            order = first + [m for m in order if m not in first]
        out.append(order[:min(k, pool.shape[0])])
    return out


def oracle_divergence(fail_states, succ_states, threshold) -> int:
    t_max = min(fail_states.shape[0], succ_states.shape[0])
    sims = [float(cos64(fail_states[t:t + 1], succ_states[t:t + 1])) for t in range(t_max)]
    below = [t for t, s in enumerate(sims) if s < threshold]
    return below[0] if below else min(range(t_max), key=lambda t: (sims[t], t))


def oracle_pack(fail: Episode, successes, cfg: SuccessSetConfig):
    if not successes:
        return None
    pool = torch.stack([episode_embedding(ep.states.double()) for ep in successes])
    clusters = torch.tensor([ep.cluster_id for ep in successes])
    use = cfg.use_clusters and bool((clusters != NO_CLUSTER).any())
    chosen = oracle_top_k(episode_embedding(fail.states.double())[None], pool, cfg.top_k,
                          clusters if use else None)[0]
    top1 = successes[chosen[0]]
    t_d = oracle_divergence(fail.states, top1.states, cfg.sim_threshold)
    start, end = max(0, t_d - cfg.window), min(t_d + cfg.window, fail.states.shape[0] - 1, top1.states.shape[0] - 1)
    succ = torch.full((len(chosen), end - start + 1, fail.actions.shape[1]), NO_ACTION, dtype=torch.int64)
    for k, m in enumerate(chosen):
        for t in range(start, min(end, successes[m].states.shape[0] - 1) + 1):
            succ[k, t - start] = successes[m].actions[t]
    weights = torch.tensor([1 - abs(t - t_d) / (cfg.window + 1) for t in range(start, end + 1)], dtype=F64)
    return dict(succ_ep_ids=[successes[m].ep_id for m in chosen],
                succ_cluster_ids=[successes[m].cluster_id for m in chosen], divergence_t=t_d, window_start=start,
                window_end=end, states=fail.states[start:end + 1], fail_actions=fail.actions[start:end + 1],
                succ_actions=succ, zone_weight=weights)


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
float_dtypes = st.sampled_from([F64, F64, torch.float32])
loss_cases = st.fixed_dictionaries(dict(
    seed=seeds, n=st.integers(1, 6), dims=st.integers(1, 4), bins=st.integers(1, 8),
    tau=st.sampled_from([1.0, 0.5, 2.0, 0.1]), margin=st.sampled_from([0.0, 0.0, 0.5, -0.3]),
    scale=st.sampled_from([0.5, 3.0, 10.0]), density=st.sampled_from([0.3, 0.6, 1.0]),
    empty_rows=st.sampled_from([0.0, 0.0, 0.3]), dtype=float_dtypes))
LOSS_EXAMPLES = (
    dict(seed=0, n=4, dims=2, bins=4, tau=0.5, margin=0.0, scale=3.0, density=0.6, empty_rows=0.0, dtype=F64),
    dict(seed=1, n=5, dims=3, bins=8, tau=2.0, margin=0.5, scale=0.5, density=0.3, empty_rows=0.3, dtype=F64),
    dict(seed=2, n=3, dims=4, bins=5, tau=0.1, margin=-0.3, scale=10.0, density=0.6, empty_rows=0.0,
         dtype=torch.float32),
)


def loss_inputs(seed, n, dims, bins, scale, density, empty_rows, dtype, failed_in="random", **_):
    g = _gen(seed)
    z = (scale * torch.randn(n, dims, bins, generator=g, dtype=F64)).to(dtype)
    a = torch.randint(0, bins, (n, dims), generator=g)
    mask = torch.rand(n, dims, bins, generator=g, dtype=F64) < density
    hot = torch.nn.functional.one_hot(a, bins).bool()
    if failed_in == "random":  # at least one positive per dimension, then empty some rows' first dimension
        mask |= torch.nn.functional.one_hot(torch.randint(0, bins, (n, dims), generator=g), bins).bool()
        mask[torch.rand(n, generator=g, dtype=F64) < empty_rows, 0] = False
    elif failed_in == "excluded":  # a⁻ ∉ Pos_d, Pos_d non-empty (needs bins >= 2)
        alt = (a + 1 + torch.randint(0, max(bins - 1, 1), (n, dims), generator=g)) % bins
        mask = (mask | torch.nn.functional.one_hot(alt, bins).bool()) & ~hot
    elif failed_in == "only":
        mask = hot
    else:  # "included"
        mask |= hot
    w = torch.rand(n, generator=g, dtype=F64).to(dtype) + (0.1 if failed_in != "random" else 0.0)
    return z, a, mask, w


def _loss_tol(z, dims, tau, dtype) -> float:
    eps = torch.finfo(dtype).eps
    return 64 * eps * (1 + dims * float(z.abs().max())) / tau


def _run_loss(impl, case, **kwargs):
    z, a, mask, w = loss_inputs(**{**case, **kwargs})
    zg = z.clone().requires_grad_(True)
    out = impl.loss_a(zg, a, mask, w, tau=case["tau"], margin=case["margin"],
                      empty_positive=kwargs.get("empty_positive", "mask"))
    (grad,) = torch.autograd.grad(out.loss, zg, allow_unused=True)
    grad = torch.zeros_like(z) if grad is None else grad
    return out, grad, (z, a, mask, w)


def check_loss_closed_form(impl, **case):
    out, grad, (z, a, mask, w) = _run_loss(impl, case)
    loss, per, lp_pos, lp_neg, valid, want_grad = closed_form_loss(z, a, mask, w, case["tau"], case["margin"])
    tol = _loss_tol(z, case["dims"], case["tau"], case["dtype"])
    assert_identical("SUCC-1", "valid (every dimension has a positive)", out.valid, valid, **case)
    for name, got, want in (("logp_pos", out.logp_pos, lp_pos), ("logp_neg", out.logp_neg, lp_neg),
                            ("per_step", out.per_step, per), ("loss", out.loss, loss)):
        if got.dtype != case["dtype"]:
            fail("SUCC-1", f"{name} dtype {got.dtype}, expected {case['dtype']}", **case)
        assert_close("SUCC-1", name, got, want, atol=tol * (1 + float(w.abs().max())), rtol=tol, **case)
    assert_close("SUCC-1", "∂loss/∂logits vs −c_n([b ∈ Pos]π_b/π(Pos) − [b = a⁻])", grad, want_grad,
                 atol=tol, rtol=tol, **case)


def check_gradient_direction(impl, **case):
    out, grad, (z, a, mask, w) = _run_loss(impl, case, failed_in="excluded")
    logp = torch.log_softmax(z.double(), -1)
    pi = logp.exp()
    share = torch.where(mask, pi, 0.0) / torch.where(mask, pi, 0.0).sum(-1, keepdim=True)
    step = -grad.double()  # [N, A, B] the descent direction
    d_neg = ((torch.nn.functional.one_hot(a, z.shape[-1]) - pi) * step).sum((1, 2))  # [N] d log p⁻
    d_pos = ((share - pi) * step).sum((1, 2))  # [N] d log p⁺
    _, _, _, _, _, want = closed_form_loss(z, a, mask, w, case["tau"], case["margin"])
    want_neg = ((torch.nn.functional.one_hot(a, z.shape[-1]) - pi) * -want).sum((1, 2))
    scale = float(step.abs().max()) + float(want.abs().max())
    resolvable = 1e-3 * scale + torch.finfo(case["dtype"]).tiny ** 0.5  # below it the dtype's gradient underflows
    for n in range(a.shape[0]):
        if float(want_neg[n]) < -resolvable and not float(d_neg[n]) < 0:
            fail("SUCC-2", f"row {n}: a descent step raises log p⁻ (d log p⁻ = {float(d_neg[n]):.3g}, expected < 0; "
                           f"closed form {float(want_neg[n]):.3g})", **case)
        if float(d_pos[n]) < -1e-6 * scale - 1e-12:
            fail("SUCC-2", f"row {n}: a descent step lowers log p⁺ (d log p⁺ = {float(d_pos[n]):.3g}, expected >= 0)",
                 **case)


def check_failed_in_positive(impl, **case):
    tol = _loss_tol(torch.tensor(10.0 * case["scale"]), case["dims"], case["tau"], case["dtype"])
    out, grad, (z, a, mask, w) = _run_loss(impl, case, failed_in="only")
    want = w.double() * softplus64(torch.tensor(case["margin"] / case["tau"], dtype=F64))
    assert_close("SUCC-3", "log p⁺ − log p⁻ with Pos_d = {a⁻_d}", out.logp_pos - out.logp_neg,
                 torch.zeros(a.shape[0], dtype=F64), atol=tol, **case)
    assert_close("SUCC-3", "per_step with Pos_d = {a⁻_d} (w·softplus(margin/τ))", out.per_step, want,
                 atol=tol, rtol=tol, **case)
    assert_close("SUCC-3", "∂loss/∂logits with Pos_d = {a⁻_d}", grad, torch.zeros_like(grad, dtype=F64), atol=tol,
                 **case)
    out, _, _ = _run_loss(impl, case, failed_in="included")
    gap = (out.logp_pos - out.logp_neg).double()
    if not bool((gap >= -tol).all()):
        fail("SUCC-3", f"log p⁺ − log p⁻ = {gap.tolist()} with a⁻_d ∈ Pos_d for every d, expected >= 0", **case)


def check_empty_positive(impl, **case):
    case = {**case, "empty_rows": 0.5}
    out, grad, (z, a, mask, w) = _run_loss(impl, case)
    loss, per, _, _, valid, _ = closed_form_loss(z, a, mask, w, case["tau"], case["margin"])
    tol = _loss_tol(z, case["dims"], case["tau"], case["dtype"]) * (1 + float(w.abs().max()))
    assert_identical("SUCC-4", "valid", out.valid, valid, **case)
    if not bool(torch.isfinite(grad).all()):
        fail("SUCC-4", "non-finite gradient with empty positive sets masked", **case)
    assert_close("SUCC-4", "per_step on masked rows", out.per_step[~valid], torch.zeros(int((~valid).sum())),
                 atol=0.0, **case)
    if not bool((out.logp_pos[~valid] == -math.inf).all()):
        fail("SUCC-4", f"logp_pos on masked rows {out.logp_pos[~valid].tolist()}, expected -inf", **case)
    assert_close("SUCC-4", "gradient on masked rows", grad[~valid], torch.zeros_like(grad[~valid]), atol=0.0, **case)
    assert_close("SUCC-4", "loss = mean over the valid rows", out.loss, loss, atol=tol, rtol=tol, **case)
    none = impl.loss_a(z.clone().requires_grad_(True), a, torch.zeros_like(mask), w, tau=case["tau"],
                       margin=case["margin"])
    if float(none.loss.detach()) != 0.0:
        fail("SUCC-4", f"loss {float(none.loss.detach())} with every row masked, expected 0", **case)


def check_empty_positive_rejected(impl, **case):
    case = {**case, "empty_rows": 0.5}
    _, _, (z, a, mask, w) = _run_loss(impl, case)
    valid = closed_form_loss(z, a, mask, w, case["tau"], case["margin"])[4]
    if bool((~valid).any()):
        expect_rejection("SUCC-18", lambda: impl.loss_a(z, a, mask, w, tau=case["tau"], margin=case["margin"],
                                                        empty_positive="reject"),
                         names=("pos_mask",), what="an empty positive set with empty_positive='reject'")


topk_cases = st.fixed_dictionaries(dict(
    seed=seeds, q=st.integers(1, 3), m=st.integers(1, 8), emb=st.integers(1, 4), k=st.integers(1, 6),
    duplicates=st.booleans(), zero_row=st.sampled_from([False, False, True]), clusters=st.integers(1, 4),
    dtype=float_dtypes))
TOPK_EXAMPLES = (dict(seed=0, q=2, m=8, emb=3, k=4, duplicates=True, zero_row=True, clusters=3, dtype=F64),
                 dict(seed=1, q=1, m=3, emb=2, k=6, duplicates=False, zero_row=False, clusters=1,
                      dtype=torch.float32))


def topk_inputs(seed, q, m, emb, duplicates, zero_row, clusters, dtype, **_):
    g = _gen(seed)
    pool = torch.randn(m, emb, generator=g, dtype=F64)
    if duplicates and m > 1:
        pool[-1] = pool[0]
    if zero_row:
        pool[m // 2] = 0.0
    query = torch.randn(q, emb, generator=g, dtype=F64)
    cluster_ids = torch.randint(0, clusters, (m,), generator=g)
    return query.to(dtype), pool.to(dtype), cluster_ids


def _check_ranking(clause, got, query, pool, want_rows, case):
    k = len(want_rows[0])
    if tuple(got.indices.shape) != (query.shape[0], k):
        fail(clause, f"indices shape {tuple(got.indices.shape)}, expected {(query.shape[0], k)} (k' = min(k, M))",
             **case)
    sims = cos64(query, pool)
    tol = 1e-12 if query.dtype == F64 else 1e-5
    for q, want in enumerate(want_rows):
        idx = got.indices[q].tolist()
        if len(set(idx)) != len(idx) or min(idx) < 0 or max(idx) >= pool.shape[0]:
            fail(clause, f"query {q}: indices {idx} are not distinct pool rows", **case)
        assert_close(clause, f"query {q}: cosine of the picks in order (got rows {idx}, expected {want})",
                     sims[q, idx], sims[q, want], atol=tol, **case)
        assert_close(clause, f"query {q}: returned similarity", got.similarity[q], sims[q, idx], atol=tol, **case)


def check_top_k(impl, **case):
    query, pool, _ = topk_inputs(**case)
    got = impl.top_k_successes(query, pool, case["k"])
    _check_ranking("SUCC-5", got, query, pool, oracle_top_k(query, pool, case["k"]), case)


def check_top_k_clusters(impl, **case):
    query, pool, cluster_ids = topk_inputs(**case)
    got = impl.top_k_successes(query, pool, case["k"], cluster_ids)
    _check_ranking("SUCC-6", got, query, pool, oracle_top_k(query, pool, case["k"], cluster_ids), case)
    n_first = min(case["k"], len(set(cluster_ids.tolist())))
    for q in range(query.shape[0]):
        first = [int(cluster_ids[i]) for i in got.indices[q, :n_first]]
        if len(set(first)) != n_first:
            fail("SUCC-6", f"query {q}: the first {n_first} picks come from clusters {first}, expected distinct",
                 cluster_ids=cluster_ids, **case)


def _similar_episode(g, base_states, length, t0, noise):
    """States equal to ``base_states`` (+ small noise) before t0, independent after; padded with fresh states."""
    obs = base_states.shape[1]
    states = torch.randn(length, obs, generator=g, dtype=F64)
    keep = min(t0, length, base_states.shape[0])
    states[:keep] = base_states[:keep] + noise * torch.randn(keep, obs, generator=g, dtype=F64)
    return states


divergence_cases = st.fixed_dictionaries(dict(
    seed=seeds, t_fail=st.integers(1, 12), t_succ=st.integers(1, 12), obs=st.integers(1, 3), t0=st.integers(0, 12),
    noise=st.sampled_from([0.0, 0.01, 0.3]), threshold=st.sampled_from([0.9, 0.9, 0.5, 0.99, -1.0])))
DIVERGENCE_EXAMPLES = (
    dict(seed=0, t_fail=10, t_succ=8, obs=3, t0=4, noise=0.01, threshold=0.9),  # drop at 4
    dict(seed=1, t_fail=6, t_succ=9, obs=2, t0=12, noise=0.01, threshold=0.9),  # no drop: argmin
    dict(seed=2, t_fail=5, t_succ=5, obs=1, t0=0, noise=0.0, threshold=-1.0),  # pure argmin, 1-d ties
    dict(seed=0, t_fail=3, t_succ=3, obs=2, t0=0, noise=0.0, threshold=0.0, exact=True),  # s_1 = 0 exactly
)
# cosines 1, 0, −1 exactly in any order of float operations: at threshold 0, s_1 = 0 is not a drop (strict <)
EXACT_FAIL = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=F64)
EXACT_SUCC = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=F64)


def check_divergence(impl, seed, t_fail, t_succ, obs, t0, noise, threshold, exact=False):
    g = _gen(seed)
    fail_states = torch.randn(t_fail, obs, generator=g, dtype=F64) + 2.0  # away from the origin: sims near 1
    succ_states = _similar_episode(g, fail_states, t_succ, t0, noise)
    if exact:  # similarities with no rounding at all: no tie is excused
        fail_states, succ_states = EXACT_FAIL, EXACT_SUCC
    got = int(impl.divergence_step(fail_states, succ_states, threshold))
    want = oracle_divergence(fail_states, succ_states, threshold)
    if got != want and (exact or not _rounding_tie(fail_states, succ_states, threshold, got)):
        sims = [round(float(cos64(fail_states[t:t + 1], succ_states[t:t + 1])), 6) for t in range(min(t_fail, t_succ))]
        fail("SUCC-7", f"t_d = {got}, expected {want}; similarities {sims}, threshold {threshold}",
             t_fail=t_fail, t_succ=t_succ, t0=t0, noise=noise, seed=seed)


def _rounding_tie(fail_states, succ_states, threshold, got: int, delta: float = 1e-12) -> bool:
    """``got`` is the rule's answer for similarities moved by <= delta (identical states give cosines of
    1 ± 1e-16, whose argmin is rounding): no earlier drop, and a drop at ``got`` or no drop and ``got`` at the
    minimum."""
    t_max = min(fail_states.shape[0], succ_states.shape[0])
    if not 0 <= got < t_max:
        return False
    sims = [float(cos64(fail_states[t:t + 1], succ_states[t:t + 1])) for t in range(t_max)]
    no_earlier_drop = all(s >= threshold - delta for s in sims[:got])
    no_drop = all(s >= threshold - delta for s in sims)
    return no_earlier_drop and (sims[got] < threshold + delta or (no_drop and sims[got] <= min(sims) + 2 * delta))


@st.composite
def mining_cases(draw):
    return dict(seed=draw(seeds), t_fail=draw(st.integers(1, 12)), m=draw(st.integers(0, 5)),
                obs=draw(st.integers(1, 3)), dims=draw(st.integers(1, 3)), bins=draw(st.integers(2, 6)),
                top_k=draw(st.integers(1, 4)), window=draw(st.integers(0, 5)),
                threshold=draw(st.sampled_from([0.9, 0.5, -1.0])), clusters=draw(st.sampled_from([0, 1, 2, 3])),
                use_clusters=draw(st.booleans()))


MINING_EXAMPLES = (
    dict(seed=0, t_fail=12, m=4, obs=2, dims=2, bins=4, top_k=3, window=3, threshold=0.9, clusters=2,
         use_clusters=True),
    dict(seed=1, t_fail=3, m=3, obs=1, dims=1, bins=3, top_k=2, window=5, threshold=0.9, clusters=0,
         use_clusters=False),  # the window overruns both ends
    dict(seed=2, t_fail=5, m=0, obs=2, dims=2, bins=3, top_k=2, window=2, threshold=0.9, clusters=0,
         use_clusters=True),  # empty pool
)


def mining_inputs(seed, t_fail, m, obs, dims, bins, top_k, window, threshold, clusters, use_clusters):
    g = _gen(seed)
    fail_states = torch.randn(t_fail, obs, generator=g, dtype=F64) + 1.5
    fail_ep = Episode(1000, fail_states, torch.randint(0, bins, (t_fail, dims), generator=g))
    successes = []
    for i in range(m):
        length = int(torch.randint(1, 13, (), generator=g))
        t0 = int(torch.randint(0, 13, (), generator=g))
        states = _similar_episode(g, fail_states, length, t0, 0.05) + 0.0
        cid = int(torch.randint(0, clusters, (), generator=g)) if clusters else NO_CLUSTER
        successes.append(Episode(i, states, torch.randint(0, bins, (length, dims), generator=g), cid))
    cfg = SuccessSetConfig(top_k=top_k, window=window, sim_threshold=threshold, use_clusters=use_clusters)
    return fail_ep, successes, cfg


def _mine(impl, case):
    fail_ep, successes, cfg = mining_inputs(**case)
    return impl.mine_pair(fail_ep, successes, cfg), oracle_pack(fail_ep, successes, cfg)


def check_window(impl, **case):
    pack, want = _mine(impl, case)
    if want is None:
        return
    if pack is None:
        fail("SUCC-8", "mine_pair returned None for a non-empty success pool", **case)
    for name in ("divergence_t", "window_start", "window_end"):
        if getattr(pack, name) != want[name]:
            fail("SUCC-8", f"{name} = {getattr(pack, name)}, expected {want[name]} (t_d = {want['divergence_t']}, "
                           f"w = {case['window']}, window clipped to both episodes)", **case)
    assert_close("SUCC-8", "zone_weight (1 − |t − t_d|/(w + 1))", pack.zone_weight, want["zone_weight"], atol=1e-12,
                 **case)


def check_pack(impl, **case):
    pack, want = _mine(impl, case)
    if want is None or pack is None:
        if (want is None) != (pack is None):
            fail("SUCC-9", f"mine_pair returned {type(pack).__name__}, expected "
                           f"{'None (empty pool)' if want is None else 'a PairPack'}", **case)
        return
    if not isinstance(pack, PairPack):
        fail("SUCC-9", f"mine_pair returned {type(pack).__name__}, expected a PairPack", **case)
    if pack.fail_ep_id != 1000:
        fail("SUCC-9", f"fail_ep_id = {pack.fail_ep_id}, expected 1000", **case)
    for name in ("succ_ep_ids", "succ_cluster_ids"):
        if list(getattr(pack, name)) != want[name]:
            fail("SUCC-9", f"{name} = {list(getattr(pack, name))}, expected {want[name]} (Top-K order)", **case)
    if (pack.window_start, pack.window_end) != (want["window_start"], want["window_end"]):
        return  # SUCC-8's business
    for name in ("states", "fail_actions", "succ_actions"):
        assert_identical("SUCC-9", name, getattr(pack, name), want[name], **case)


proto_cases = st.fixed_dictionaries(dict(
    seed=seeds, n=st.integers(1, 12), emb=st.integers(1, 3), k=st.integers(1, 4),
    ema=st.sampled_from([0.05, 0.5, 1.0, 0.0]), duplicates=st.booleans()))


def check_prototypes(impl, seed, n, emb, k, ema, duplicates):
    g = _gen(seed)
    embs = torch.randn(n, emb, generator=g, dtype=F64)
    if duplicates and n > 2:
        embs[n // 2] = embs[0]
    protos, counts, want_ids = torch.zeros(k, emb, dtype=F64), [0] * k, []
    for i in range(n):
        if i < k:
            cid = i
            protos[cid] = embs[i]
        else:
            sims = cos64(embs[i:i + 1], protos)[0]
            cid = min(range(k), key=lambda c: (-float(sims[c]), c))
            protos[cid] = (1 - ema) * protos[cid] + ema * embs[i]
        counts[cid] += 1
        want_ids.append(cid)
    obj = impl.SuccessPrototypes(k, ema)
    got_ids = [int(obj.assign(e)) for e in embs]
    inputs = dict(seed=seed, n=n, emb=emb, k=k, ema=ema)
    if got_ids != want_ids:
        fail("SUCC-10", f"cluster ids {got_ids}, expected {want_ids}", **inputs)
    assert_close("SUCC-10", "prototypes", obj.prototypes[:min(n, k)], protos[:min(n, k)], atol=1e-12, **inputs)
    if [int(c) for c in obj.counts] != counts:
        fail("SUCC-10", f"counts {[int(c) for c in obj.counts]}, expected {counts}", **inputs)


queue_cases = st.fixed_dictionaries(dict(
    seed=seeds, packs=st.integers(0, 10), capacity=st.integers(1, 12), n=st.integers(0, 6), clusters=st.integers(1, 5),
    consume=st.booleans(), diverse=st.booleans()))


def _toy_pack(i: int, cluster_ids: list[int]) -> PairPack:
    one = torch.zeros(1, 1, dtype=torch.int64)
    return PairPack(i, list(range(len(cluster_ids))), cluster_ids, 0, 0, 0, torch.zeros(1, 1, dtype=F64), one[0],
                    one.expand(len(cluster_ids), 1, 1).clone(), torch.ones(1, dtype=F64))


QUEUE_CAPACITY = 4096  # PairedQueue's documented default


def check_queue(impl, seed, packs, capacity, n, clusters, consume, diverse):
    """capacity None: the documented default (PairedQueue() with no argument)."""
    g = _gen(seed)
    inputs = dict(seed=seed, packs=packs, capacity=capacity, n=n, clusters=clusters, consume=consume, diverse=diverse)
    cids = [int(torch.randint(0, clusters, (), generator=g)) for _ in range(packs)]  # one cluster per pack
    queue = impl.PairedQueue(capacity) if capacity is not None else impl.PairedQueue()
    for i, c in enumerate(cids):
        queue.push(_toy_pack(i, [c, NO_CLUSTER]))
    kept = list(range(packs))[-(capacity or QUEUE_CAPACITY):] if packs else []
    if len(queue) != len(kept):
        fail("SUCC-11", f"len = {len(queue)} after {packs} pushes into capacity {capacity}, expected {len(kept)}",
             **inputs)
    in_queue = {cids[i] for i in kept}
    if queue.cluster_coverage() != len(in_queue):
        fail("SUCC-11", f"cluster_coverage = {queue.cluster_coverage()}, expected {len(in_queue)}", **inputs)
    sample = queue.sample(n, generator=_gen(seed + 1), consume=False, diverse=diverse)
    again = queue.sample(n, generator=_gen(seed + 1), consume=consume, diverse=diverse)
    ids = [p.fail_ep_id for p in again]
    if [p.fail_ep_id for p in sample] != ids:
        fail("SUCC-11", "two samples from the same generator seed differ", **inputs)
    if len(set(ids)) != len(ids) or len(ids) != min(n, len(kept)) or not set(ids) <= set(kept):
        fail("SUCC-11", f"sampled packs {ids}, expected {min(n, len(kept))} distinct packs of {kept}", **inputs)
    if diverse and len({cids[i] for i in ids}) != min(len(ids), len(in_queue)):
        fail("SUCC-11", f"diverse sample {ids} covers clusters {sorted({cids[i] for i in ids})}, expected "
                        f"{min(len(ids), len(in_queue))} distinct", **inputs)
    left = len(kept) - len(ids) if consume else len(kept)
    if len(queue) != left:
        fail("SUCC-11", f"len = {len(queue)} after sampling {len(ids)} (consume={consume}), expected {left}", **inputs)


@st.composite
def trigger_cases(draw):
    calls = draw(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 80), st.integers(0, 4), st.integers(0, 3)),
                          min_size=1, max_size=8))
    return dict(min_pairs=draw(st.sampled_from([None, None, 1, 40])), batch_packs=draw(st.sampled_from([4, 16, 30])),
                min_clusters=draw(st.integers(0, 3)), cooldown=draw(st.sampled_from([5000, 1000, 0, 2500])),
                calls=calls)


TRIGGER_EXAMPLES = (
    dict(min_pairs=None, batch_packs=16, min_clusters=2, cooldown=5000,  # default min_pairs = 32
         calls=[(0, 31, 2, 1), (0, 32, 1, 1), (0, 32, 2, 0), (0, 32, 2, 1), (100, 64, 3, 2), (5000, 64, 3, 2),
                (5001, 0, 0, 0)]),
    dict(min_pairs=None, batch_packs=30, min_clusters=0, cooldown=1000,  # 2·batch = 60 > 32
         calls=[(0, 59, 0, 1), (0, 60, 0, 1), (999, 60, 0, 1), (1000, 60, 0, 1)]),
)


def _expected_decisions(cfg: SuccessSetConfig, calls):
    last, out = None, []
    for step, pairs, cov, packs in calls:
        left = 0 if last is None else max(0, cfg.cooldown_steps - (step - last))
        code = (TOO_FEW_PAIRS if pairs < cfg.resolved_min_pairs else LOW_COVERAGE if cov < cfg.min_clusters
                else NO_PACK if packs == 0 else COOLDOWN if left > 0 else 0)
        if code == 0:
            last = step
        out.append((code, left, last))
    return out


def _config(case) -> SuccessSetConfig:
    return SuccessSetConfig(min_pairs=case["min_pairs"], batch_packs=case["batch_packs"],
                            min_clusters=case["min_clusters"], cooldown_steps=case["cooldown"])


def check_trigger(impl, **case):
    cfg = _config(case)
    calls = sorted(case["calls"])  # steps move forward
    sched = impl.BonusScheduler(cfg)
    for (step, pairs, cov, packs), (code, left, last) in zip(calls, _expected_decisions(cfg, calls)):
        got = sched.decide(step, pairs, cov, packs)
        where = f"decide(step={step}, pairs={pairs}, coverage={cov}, packs={packs})"
        if bool(got.trigger) != (code == 0) or int(got.reason) != code:
            fail("SUCC-12", f"{where}: trigger={bool(got.trigger)}, reason={int(got.reason)}; expected "
                            f"trigger={code == 0}, reason={code} (min_pairs {cfg.resolved_min_pairs})", **case)
        want = {"bonus/triggered": int(code == 0), "bonus/ran": int(code == 0)}
        if code:
            want.update({"bonus/not_triggered_reason_code": code, "bonus/not_triggered_pairs": pairs,
                         "bonus/not_triggered_cov": cov, "bonus/not_triggered_cooldown": left})
        if dict(got.telemetry) != want:
            fail("SUCC-12", f"{where}: telemetry {dict(got.telemetry)}, expected {want}", **case)
        if sched.last_bonus_step != last:
            fail("SUCC-12", f"{where}: last_bonus_step = {sched.last_bonus_step}, expected {last}", **case)


run_cases = st.fixed_dictionaries(dict(
    updates=st.integers(1, 6), kl_guard=st.sampled_from([0.02, 0.5]), floor=st.sampled_from([0.1, -1.0]),
    kls=st.lists(st.sampled_from([0.0, 0.01, 0.02, 0.03, 0.5, 1.0, math.nan, math.inf]), min_size=6, max_size=6),
    ents=st.lists(st.sampled_from([1.0, 0.5, 0.1, 0.05, math.nan]), min_size=6, max_size=6)))  # guards' values too


def _expected_run(updates, kl_guard, floor, kls, ents):
    for i in range(updates):
        code = STOP_KL if not kls[i] <= kl_guard else STOP_ENTROPY if not ents[i] >= floor else NO_STOP
        if code:
            return i + 1, code
    return updates, NO_STOP


def _run(sched, kls, ents, calls):
    def update(i):
        calls.append(i)
        return torch.tensor(kls[i], dtype=F64), ents[i]
    return sched.run(update)


def check_run(impl, updates, kl_guard, floor, kls, ents):
    inputs = dict(updates=updates, kl_guard=kl_guard, floor=floor, kls=kls, ents=ents)
    cfg = SuccessSetConfig(bonus_updates=updates, kl_guard=kl_guard, entropy_floor=floor)
    calls = []
    out = _run(impl.BonusScheduler(cfg), kls, ents, calls)
    n, code = _expected_run(updates, kl_guard, floor, kls, ents)
    if calls != list(range(n)) or int(out.updates) != n or int(out.stop_reason) != code:
        fail("SUCC-13", f"update_fn called for {calls}, updates={int(out.updates)}, stop_reason="
                        f"{int(out.stop_reason)}; expected {list(range(n))}, {n}, {code}", **inputs)
    agreed = [out.telemetry.get(k) for k in ("bonus/updates", "bonus/early_stop", "bonus/early_stop_reason")]
    if set(out.telemetry) != set(RUN_KEYS) or agreed != [n, int(code != NO_STOP), code]:
        fail("SUCC-13", f"telemetry {out.telemetry}, expected keys {RUN_KEYS} with updates {n}, early_stop "
                        f"{int(code != NO_STOP)}, reason {code}", **inputs)


class SimulatedRanks:
    """Ranks run one after the other: a first pass records each rank's reduce_min inputs (local only), a
    second pass gives each rank the elementwise MIN with the other ranks' inputs at the same call."""

    def __init__(self, n_ranks: int):
        self.n, self.recorded = n_ranks, [[] for _ in range(n_ranks)]

    def recorder(self, rank: int):
        def reduce_min(t):
            self.recorded[rank].append(t.clone())
            return t
        return reduce_min

    def reducer(self, rank: int):
        calls = iter(range(10**6))

        def reduce_min(t):
            j = next(calls)
            for other in range(self.n):
                if other != rank and j < len(self.recorded[other]):
                    t.copy_(torch.minimum(t, self.recorded[other][j]))
            return t
        return reduce_min

    def run(self, make_and_call):
        """make_and_call(rank, reduce_min) -> result, for every rank: [results of the second pass]."""
        for r in range(self.n):
            make_and_call(r, self.recorder(r))
        return [make_and_call(r, self.reducer(r)) for r in range(self.n)]


agree_cases = st.fixed_dictionaries(dict(
    ranks=st.integers(2, 3),
    local=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 3), st.integers(0, 2)), min_size=3, max_size=3),
    kls=st.lists(st.lists(st.sampled_from([0.0, 0.01, 0.05]), min_size=4, max_size=4), min_size=3, max_size=3),
    ents=st.lists(st.lists(st.sampled_from([1.0, 1.0, 0.01]), min_size=4, max_size=4), min_size=3, max_size=3)))
AGREE_EXAMPLES = (dict(ranks=2, local=[(64, 3, 2), (10, 3, 2), (0, 0, 0)],
                       kls=[[0.0, 0.05, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0] * 4],
                       ents=[[1.0] * 4, [1.0, 1.0, 0.01, 1.0], [1.0] * 4]),)


def check_agreement(impl, ranks, local, kls, ents):
    inputs = dict(ranks=ranks, local=local[:ranks], kls=kls[:ranks], ents=ents[:ranks])
    cfg = SuccessSetConfig(min_pairs=32, min_clusters=2, bonus_updates=4, kl_guard=0.02, entropy_floor=0.1)
    decisions = SimulatedRanks(ranks).run(lambda r, red: impl.BonusScheduler(cfg, red).decide(100, *local[r]))
    codes = [_expected_decisions(cfg, [(100, *local[r])])[0][0] for r in range(ranks)]
    want = (all(c == 0 for c in codes), min([c for c in codes if c] or [0]))
    got = [(bool(d.trigger), int(d.reason)) for d in decisions]
    if any(g != want for g in got):
        fail("SUCC-14", f"per-rank (trigger, reason) {got}; local codes {codes}, expected every rank {want}", **inputs)
    runs = SimulatedRanks(ranks).run(lambda r, red: _run(impl.BonusScheduler(cfg, red), kls[r], ents[r], []))
    local_stops = [_expected_run(4, 0.02, 0.1, kls[r], ents[r]) for r in range(ranks)]
    first = min(n for n, _ in local_stops)
    codes = [c for n, c in local_stops if n == first and c]
    want = (first, min(codes) if codes else NO_STOP)
    got = [(int(o.updates), int(o.stop_reason)) for o in runs]
    if any(g != want for g in got):
        fail("SUCC-14", f"per-rank (updates, stop_reason) {got}; local stops {local_stops}, expected every rank "
                        f"{want}", **inputs)


def check_rejections(impl):
    z = torch.zeros(2, 2, 3, dtype=F64)
    a = torch.zeros(2, 2, dtype=torch.int64)
    mask = torch.ones(2, 2, 3, dtype=torch.bool)
    w = torch.ones(2, dtype=F64)
    ep = Episode(0, torch.ones(4, 2, dtype=F64), torch.zeros(4, 1, dtype=torch.int64))
    pool = torch.ones(3, 2, dtype=F64)
    cases = [
        ("logits", lambda: impl.loss_a(z[0], a, mask, w)),
        ("logits", lambda: impl.loss_a(torch.full_like(z, math.nan), a, mask, w)),
        ("fail_actions", lambda: impl.loss_a(z, a + 3, mask, w)),
        ("fail_actions", lambda: impl.loss_a(z, a.float(), mask, w)),
        ("pos_mask", lambda: impl.loss_a(z, a, mask.float(), w)),
        ("zone_weight", lambda: impl.loss_a(z, a, mask, -w)),
        ("zone_weight", lambda: impl.loss_a(z, a, mask, w[:1])),
        ("tau", lambda: impl.loss_a(z, a, mask, w, tau=0.0)),
        ("margin", lambda: impl.loss_a(z, a, mask, w, margin=math.inf)),
        ("empty_positive", lambda: impl.loss_a(z, a, mask, w, empty_positive="drop")),
        ("k", lambda: impl.top_k_successes(pool, pool, 0)),
        ("pool", lambda: impl.top_k_successes(pool, torch.ones(3, 4, dtype=F64), 2)),
        ("cluster_ids", lambda: impl.top_k_successes(pool, pool, 2, torch.zeros(2, dtype=torch.int64))),
        ("threshold", lambda: impl.divergence_step(pool, pool, 1.5)),
        ("succ_states", lambda: impl.divergence_step(pool, torch.ones(3, 5, dtype=F64), 0.9)),
        ("fail_states", lambda: impl.divergence_step(torch.ones(0, 2, dtype=F64), pool, 0.9)),
        ("successes[0].states", lambda: impl.mine_pair(ep, [ep._replace(states=torch.ones(4, 3, dtype=F64))])),
        ("fail.actions", lambda: impl.mine_pair(ep._replace(actions=torch.zeros(3, 1, dtype=torch.int64)), [ep])),
        ("config", lambda: impl.mine_pair(ep, [ep], {"top_k": 2})),
        ("ema", lambda: impl.SuccessPrototypes(4, 1.5)),
        ("num_prototypes", lambda: impl.SuccessPrototypes(0, 0.1)),
        ("capacity", lambda: impl.PairedQueue(0)),
        ("generator", lambda: impl.PairedQueue(4).sample(1, generator=None)),
        ("n", lambda: impl.PairedQueue(4).sample(-1, generator=torch.Generator())),
        ("pack", lambda: impl.PairedQueue(4).push("a pack")),
        ("embedding", lambda: impl.SuccessPrototypes(2, 0.1).assign(torch.ones(3, dtype=torch.int64))),
        ("config", lambda: impl.BonusScheduler({"cooldown_steps": 5})),
        ("pairs", lambda: impl.BonusScheduler().decide(0, -1, 0, 0)),
    ]
    for name, call in cases:
        expect_rejection("SUCC-15", call, names=(name,), what=f"bad '{name}'")
    for field, value in (("tau", -1.0), ("top_k", 0), ("window", -1), ("cooldown_steps", 2.5), ("min_pairs", 0),
                         ("sim_threshold", 2.0), ("prototype_ema", -0.1), ("kl_guard", 0.0), ("bonus_updates", 0)):
        expect_rejection("SUCC-15", lambda: SuccessSetConfig(**{field: value}), names=("SuccessSetConfig", field),
                         mentions=(repr(value),), what=f"SuccessSetConfig({field}={value!r})")
    protos = impl.SuccessPrototypes(2, 0.1)
    protos.assign(torch.ones(3, dtype=F64))
    expect_rejection("SUCC-15", lambda: protos.assign(torch.ones(4, dtype=F64)), names=("embedding",),
                     mentions=("(4,)", "(3,)"), what="an embedding of another size")


def check_diagnostics_and_empty_batch(impl, dtype):
    z, a, mask, w = loss_inputs(0, 3, 2, 4, 2.0, 0.6, 0.0, dtype)
    out = impl.loss_a(z.clone().requires_grad_(True), a, mask, w)
    for name in ("logp_pos", "logp_neg"):
        if getattr(out, name).requires_grad:
            fail("SUCC-17", f"{name} carries a graph (requires_grad True): a diagnostic must be detached", dtype=dtype)
    zg = torch.zeros(0, 2, 4, dtype=dtype, requires_grad=True)
    empty = impl.loss_a(zg, torch.zeros(0, 2, dtype=torch.int64), torch.zeros(0, 2, 4, dtype=torch.bool),
                        torch.zeros(0, dtype=dtype))
    if not empty.loss.requires_grad or float(empty.loss.detach()) != 0.0:
        fail("SUCC-17", f"empty batch: loss {empty.loss!r}, expected 0 attached to logits", dtype=dtype)
    (grad,) = torch.autograd.grad(empty.loss, zg)
    if tuple(grad.shape) != (0, 2, 4):
        fail("SUCC-17", f"empty batch: gradient of shape {tuple(grad.shape)}, expected (0, 2, 4)", dtype=dtype)
    for name in ("per_step", "logp_pos", "logp_neg", "valid"):
        t, want = getattr(empty, name), torch.bool if name == "valid" else dtype
        if tuple(t.shape) != (0,) or t.dtype != want:
            fail("SUCC-17", f"empty batch: {name} has shape {tuple(t.shape)} dtype {t.dtype}, expected (0,) {want}",
                 dtype=dtype)
    for name in ("logp_pos", "logp_neg"):
        if getattr(empty, name).requires_grad:
            fail("SUCC-17", f"empty batch: {name} carries a graph", dtype=dtype)


def check_hyperparameter_types(impl):
    z, a, mask, w = loss_inputs(0, 4, 2, 5, 2.0, 0.5, 0.0, F64)
    x = torch.randn(6, 2, generator=_gen(1), dtype=F64) + 1
    y = x + 0.3 * torch.randn(6, 2, generator=_gen(2), dtype=F64)
    embs = torch.randn(5, 2, generator=_gen(3), dtype=F64)

    def prototypes(**hp):
        obj = impl.SuccessPrototypes(**hp)
        return [obj.assign(e) for e in embs], obj.prototypes

    calls = {
        "loss_a": (lambda **hp: tuple(impl.loss_a(z, a, mask, w, **hp)), dict(tau=0.7, margin=0.2)),
        "divergence_step": (lambda **hp: int(impl.divergence_step(x, y, **hp)), dict(threshold=0.95)),
        "SuccessPrototypes": (prototypes, dict(num_prototypes=2, ema=0.3)),
    }
    for name, (call, hyper) in calls.items():
        check_scalar_types("SUCC-16", call, hyper, function=name)


LOSS = ("loss_a",)
PROPERTIES = (
    Property("SUCC-1", check_loss_closed_form, loss_cases, LOSS_EXAMPLES, LOSS),
    Property("SUCC-2", check_gradient_direction, loss_cases.filter(lambda c: c["bins"] >= 2),
             tuple(e for e in LOSS_EXAMPLES if e["bins"] >= 2), LOSS),
    Property("SUCC-3", check_failed_in_positive, loss_cases, LOSS_EXAMPLES, LOSS),
    Property("SUCC-4", check_empty_positive, loss_cases, LOSS_EXAMPLES, LOSS),
    Property("SUCC-18", check_empty_positive_rejected, loss_cases, LOSS_EXAMPLES, LOSS, max_examples=5),
    Property("SUCC-5", check_top_k, topk_cases, TOPK_EXAMPLES, ("top_k_successes",)),
    Property("SUCC-6", check_top_k_clusters, topk_cases, TOPK_EXAMPLES, ("top_k_successes",)),
    Property("SUCC-7", check_divergence, divergence_cases, DIVERGENCE_EXAMPLES, ("divergence_step",)),
    Property("SUCC-8", check_window, mining_cases(), MINING_EXAMPLES, ("mine_pair",)),
    Property("SUCC-9", check_pack, mining_cases(), MINING_EXAMPLES, ("mine_pair",)),
    Property("SUCC-10", check_prototypes, proto_cases,
             (dict(seed=0, n=10, emb=2, k=3, ema=0.5, duplicates=True),), ("SuccessPrototypes",)),
    Property("SUCC-11", check_queue, queue_cases,
             (dict(seed=0, packs=10, capacity=8, n=4, clusters=3, consume=True, diverse=True),
              dict(seed=2, packs=QUEUE_CAPACITY + 1, capacity=None, n=3, clusters=4, consume=True, diverse=False),
              dict(seed=1, packs=5, capacity=12, n=6, clusters=2, consume=False, diverse=False)), ("PairedQueue",)),
    Property("SUCC-12", check_trigger, trigger_cases(), TRIGGER_EXAMPLES, ("BonusScheduler",)),
    Property("SUCC-13", check_run, run_cases,
             (dict(updates=4, kl_guard=0.02, floor=0.1, kls=[0.0, 0.01, 0.03, 0.0, 0.0, 0.0], ents=[1.0] * 6),
              dict(updates=3, kl_guard=0.02, floor=0.1, kls=[0.0] * 6, ents=[1.0, 0.05, 1.0, 1.0, 1.0, 1.0]),
              dict(updates=2, kl_guard=0.02, floor=0.1, kls=[math.nan] + [0.0] * 5, ents=[1.0] * 6),
              dict(updates=3, kl_guard=0.5, floor=0.1, kls=[0.5] * 6, ents=[0.1] * 6)),  # at the guards: no stop
             ("BonusScheduler",)),
    Property("SUCC-14", check_agreement, agree_cases, AGREE_EXAMPLES, ("BonusScheduler",)),
    Property("SUCC-15", check_rejections, requires=INTERFACE),
    Property("SUCC-16", check_hyperparameter_types, requires=("loss_a", "divergence_step", "SuccessPrototypes")),
    Property("SUCC-17", check_diagnostics_and_empty_batch, st.fixed_dictionaries(dict(dtype=float_dtypes)),
             (dict(dtype=F64), dict(dtype=torch.float32)), LOSS, max_examples=2),
)

CONTRACT = Contract("success_set", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
