"""Contract ``shaping``: PPOLagSem's semantic margin, β schedule, margin normalization, additive and
potential-based reward shaping, and per-env temporal pooling of embeddings.

Source: the PPOLagSem design (PPOLagSem) §5.1 "Semantic Margin & Shaping", §4.0.3 "Semantic Reward Shaping
(Additive vs Potential-Based)", §5.4 / §33 "Temporal Pooling", §26.4 "Reward Shaping (Vectorized)",
§28.2 (``ClampFrac``), §8 (config names).

Formulas (B parallel envs, D the embedding width; every function is vectorized over the envs)
------------------------------------------------------------------------------------------
    normalize(x) = x / max(‖x‖₂, 1e-12)                   (torch.nn.functional.normalize)
    centroid     μ = normalize( mean_p normalize(prompt_p) )          prompts [P, D] → μ [D]
    margin       m_b = ⟨normalize(e_b), μ_safe⟩ − ⟨normalize(e_b), μ_unsafe⟩      e [B, D] → m [B]
                 (= cos(e, μ_safe) − cos(e, μ_unsafe) ∈ [−2, 2])

    β schedule   β_t = β_0 · ½ · (1 + cos(π · min(1, t / (α·T))))      (§4.0.3; α = beta_end_step_fraction ∈ (0, 1],
                 T = total_steps). β_0 at t = 0, β_0/2 at t = αT/2, exactly 0 for every t ≥ αT.

    normalizer   (MarginNormalizer, §5.1/§4.0.3, ``norm_window``, ``margin_scale``, ``margin_norm_enable``)
                 one call takes the margins m [N] of one capture step (all envs: §26.4, statistics shared
                 globally). W = the last ``norm_window`` margins of the stream *after* appending the batch:
                     enabled:  y = (m − mean(W)) / (std(W) + 1e-8) · margin_scale   (population std)
                     disabled: y = m · margin_scale
                     m̄ = clamp(y, −2, 2);  clamp_count += #{|y| > 2};  count += N
                 ``clamp_fraction`` = clamp_count / count (0 before any margin): ``Semantics/ClampFrac``.

    additive     r'_b = r_b + β_t · m̄_b on captured envs, r'_b = r_b (bit for bit) on skipped ones.

    potential    (PotentialShaper, §4.0.3, φ = m̄): each env keeps the potential of its last captured
                 observation in the current episode, φ_last. A call with potentials φ [B] of the newly
                 arrived observations and a capture mask returns, per env,
                     captured and φ_last set:  F = β_t · (γ·φ − φ_last),  φ_last ← φ
                     captured, first capture of the episode:  F = 0,  φ_last ← φ   (no transition into s_0)
                     skipped:  F = 0 exactly, φ_last kept  ("reuse the last potential, zero increment")
                 ``reset(mask)`` (an episode boundary) forgets φ_last of the masked envs.

    pooling      (TemporalPool, §5.4/§33, ``temporal_window`` = k): each env keeps its last k captured
                 embeddings of the current episode; a call appends the captured rows and returns
                 e_eff [B, D] = the mean of each env's window (a partial mean while it holds < k; zeros while
                 empty). ``reset(mask)`` clears the masked envs' windows (§33.2: the episode boundary clears it).

Telescoping (which sum, and the terminal potential)
---------------------------------------------------
Let φ_0, φ_1, …, φ_K be the potentials of the captured calls of one env within one episode (between two
resets) and F^(k) the shaping returned by the k-th of them. With β constant over the episode,
F^(k) = β(γ·φ_k − φ_{k−1}) for k ≥ 1, F^(0) = 0, and

    Σ_{k=1..K} γ^{k−1} F^(k) = β · (Σ_{k=1..K} γ^k φ_k − Σ_{k=0..K−1} γ^k φ_k) = β · (γ^K φ_K − φ_0).

When every step is captured, k − 1 = t is the transition index and this is Σ_{t=0}^{T−1} γ^t F_t =
β(γ^T φ_T − φ_0), the seed's "potential differences telescope". It is the *discounted* sum that
telescopes; the plain sum is Σ_t F_t = β(γφ_T − φ_0 + (γ − 1)·Σ_{t=1}^{T−1} φ_t), which does not unless γ = 1.
φ_T is the potential of the terminal observation itself: the shaper knows nothing of termination, and the
caller passes the terminal observation's potential on the episode's last call before ``reset``. Ng et al.'s
convention φ(terminal) = 0 is obtained by passing φ_T = 0 (the identity then reads −β·φ_0); nothing is
ever carried across ``reset`` (its first capture returns 0), so no shaping term spans two episodes.
With skipped captures the identity holds with k counting captured calls (skips contribute exactly 0 and
leave φ_last in place); with a varying β_t nothing telescopes, but β_t → 0 (SHAPE-16) removes the term.

Arguments and dtypes
--------------------
``e [B, D]`` embeddings, ``prompts [P, D]``, ``mu_safe [D]``, ``mu_unsafe [D]``, ``m [N]``, ``reward [B]``,
``phi [B]``, ``captured [B]`` and reset ``mask [B]`` (torch.bool). Floating inputs are float32/float64
(float16/bfloat16 accepted); outputs keep the input dtype. The reference computes in float64; the fast
twin keeps state on the input's device (margins window in float64, embeddings and potentials in the
input dtype), so tolerances are stated in units of that dtype's eps.

Conventions vs the seed: §5.1 writes the potential as the unclamped ṁ·margin_scale "clamped only inside the
shaping term", §4.0.3 as φ = m̄ (post normalization, scaling and clipping); this contract takes φ = m̄ (the
value that is bounded), and the potential shaper takes φ as given, so either choice composes with it.
The z-normalization window includes the current batch (a first margin normalizes to 0, never NaN).
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rlspec.contracts.shaping import CLAMP, NORM_EPS, NORMALIZER_DEFAULTS, UNIT_EPS
from rlspec.reference import shaping as reference  # the oracle
from rlspec.spec.core import Contract, Property, assert_close, by_category, expect_rejection, fail
from rlspec.spec.power import same_with_defaults
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "SHAPE-1": "centroids are unit normalize(mean(normalize(prompts))) and the margin is "
               "cos(e, mu_safe) - cos(e, mu_unsafe) (vs float64 reference)",
    "SHAPE-2": "swapping the safe and unsafe prompt sets flips the margin's sign exactly",
    "SHAPE-3": "the margin is invariant to positive rescaling of embeddings and prompts (norms above the "
               "normalization eps 1e-12) and lies in [-2, 2]",
    "SHAPE-4": "beta endpoints: beta(0) = beta_0, beta(t) = 0 exactly for t >= fraction*total, "
               "non-increasing and within [0, beta_0]",
    "SHAPE-5": "beta_t = beta_0 * (1 + cos(pi * min(1, t / (fraction*total)))) / 2",
    "SHAPE-6": "beta schedule arguments outside their domain (fraction outside (0, 1], ...) are rejected "
               "naming the argument",
    "SHAPE-7": "normalized margins: clamp((m - mean W)/(std W + 1e-8) * scale, -2, 2) over the last "
               "norm_window margins, clamp(m * scale) when disabled (vs float64 reference)",
    "SHAPE-8": "the clamp counter counts every margin with |y| > 2 and clamp_fraction = clamp_count / count",
    "SHAPE-9": "additive shaping: r + beta * m_bar on captured envs, r bit for bit on skipped envs",
    "SHAPE-10": "potential shaping telescopes: sum_k gamma^(k-1) F_k = beta (gamma^K phi_K - phi_0) per "
                "env and episode (constant beta)",
    "SHAPE-11": "potential shaping follows F = beta (gamma phi - phi_last) per env (vs float64 reference)",
    "SHAPE-12": "skipped captures add exactly 0 and leave no trace: inserting skipped steps changes no "
                "other output; a first capture after reset adds 0",
    "SHAPE-13": "temporal pooling is the per-env mean of the last k captured embeddings, partial during "
                "warm-up (vs float64 reference)",
    "SHAPE-14": "pooling never mixes episodes: after reset an env's pool holds only the new episode",
    "SHAPE-15": "per-env vectorized: permuting the envs permutes every output bit for bit (no cross-env leak)",
    "SHAPE-16": "the shaping contribution is exactly 0 once beta reaches 0 (t >= fraction*total)",
    "SHAPE-17": "bad input (dimension mismatch, wrong batch, non-bool masks, NaN margins, bad config) is "
                "rejected naming the argument, and stored state is unchanged",
    "SHAPE-18": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "SHAPE-19": "documented defaults: MarginNormalizer() with norm_window, margin_scale or margin_norm_enable omitted "
                "equals passing 1000, 1.0, True (outputs and clamp counts, bit for bit)",
    "SHAPE-20": "more bad calls are rejected naming the argument: additive_shaping with a margin of another batch, a "
                "float capture mask or beta < 0; PotentialShaper/TemporalPool with num_envs < 1 or dim < 1; captured "
                "and reset masks that are not bool [num_envs]",
    "SHAPE-21": "the clamp counter counts |y| > 2 strictly: margins of exactly ±2 are not clamps",
    "SHAPE-22": "TemporalPool keeps copies: writing into an embedding tensor after pooling it changes no later pool",
}

CATEGORIES = by_category(
    maths=("SHAPE-1", "SHAPE-2", "SHAPE-3", "SHAPE-4", "SHAPE-5", "SHAPE-7", "SHAPE-8", "SHAPE-9", "SHAPE-10",
           "SHAPE-11", "SHAPE-12", "SHAPE-13", "SHAPE-14", "SHAPE-15", "SHAPE-16", "SHAPE-19", "SHAPE-21"),
    robustness=("SHAPE-18", "SHAPE-22"),
    validation=("SHAPE-6", "SHAPE-17", "SHAPE-20"),
)
RATIONALE = {
    "SHAPE-22": "Temporal pooling's formula says nothing about aliasing, so a pool that keeps references to the"
                " caller's embeddings pools right at the time. The kit asks for copies because an encoder "
                "writing its next batch into the same buffer would rewrite the pool's past entries silently.",
    "SHAPE-18": SCALAR_RATIONALE,
}

INTERFACE = ("prompt_centroid", "semantic_margin", "beta_schedule", "additive_shaping",
             "MarginNormalizer", "PotentialShaper", "TemporalPool")
"""
prompt_centroid(prompts [P, D]) -> [D]
semantic_margin(e [B, D], mu_safe [D], mu_unsafe [D]) -> m [B]
beta_schedule(step: int, total_steps: int, beta_start: float, beta_end_step_fraction: float) -> float
additive_shaping(reward [B], beta: float, margin [B], captured [B] bool) -> reward' [B]
MarginNormalizer(norm_window=1000, margin_scale=1.0, margin_norm_enable=True)
    __call__(m [N]) -> m_bar [N];  clamp_count, count (ints or 0-d tensors);  clamp_fraction
PotentialShaper(num_envs, gamma);  __call__(phi [B], captured [B], beta) -> F [B];  reset(mask [B])
TemporalPool(num_envs, dim, window);  __call__(e [B, D], captured [B]) -> e_eff [B, D];  reset(mask [B])
"""

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def _closed_form_beta(t: int, total: int, beta_0: float, fraction: float) -> float:
    return beta_0 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, t / (fraction * total))))


def _as_int(x) -> int:
    return int(x.item()) if isinstance(x, torch.Tensor) else int(x)


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
dtypes = st.sampled_from([torch.float32, torch.float64])


@st.composite
def margin_cases(draw):
    """Embeddings e [B, D] and prompt sets [P_s, D], [P_u, D] at several scales."""
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    B, D = draw(st.integers(1, 4)), draw(st.integers(2, 8))
    # extreme scales too: ‖e‖² overflows float32 from |e| ≈ 1.8e19 on (cosines must not)
    scale, p_scale = (draw(st.sampled_from([1e-3, 1.0, 1e3, 1e20, 1e-20])) for _ in range(2))
    e = (scale * torch.randn(B, D, generator=g, dtype=torch.float64)).to(dtype)
    safe = (p_scale * torch.randn(draw(st.integers(1, 4)), D, generator=g, dtype=torch.float64)).to(dtype)
    unsafe = (p_scale * torch.randn(draw(st.integers(1, 4)), D, generator=g, dtype=torch.float64)).to(dtype)
    return dict(e=e, safe=safe, unsafe=unsafe)


MARGIN_EXAMPLES = (
    # orthogonal prompts, e on the safe one, on the unsafe one, halfway and zero: m = 1, -1, 0, 0
    dict(e=torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0]]),
         safe=torch.tensor([[1.0, 0.0]]), unsafe=torch.tensor([[0.0, 5.0]])),
    # two safe prompts of different norms: the centroid averages directions, not raw vectors
    dict(e=torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64),
         safe=torch.tensor([[10.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64),
         unsafe=torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)),
    # |e| ≈ 1e20 in float32 (‖e‖² = inf): m = 1, not 0
    dict(e=torch.tensor([[1e20, 0.0]]), safe=torch.tensor([[1e20, 0.0]]), unsafe=torch.tensor([[0.0, 1e20]])),
)


@st.composite
def beta_cases(draw):
    total = draw(st.sampled_from([1, 2, 7, 100, 1000, 10**6]))
    fraction = draw(st.sampled_from([1.0, 0.5, 0.3, 0.01, 1e-6]))
    beta_0 = draw(st.sampled_from([0.0, 0.05, 1.0, 3.7]))
    return dict(total_steps=total, beta_start=beta_0, beta_end_step_fraction=fraction)


BETA_EXAMPLES = (dict(total_steps=1000, beta_start=0.05, beta_end_step_fraction=0.3),
                 dict(total_steps=1, beta_start=1.0, beta_end_step_fraction=1.0))


@st.composite
def normalizer_cases(draw):
    """A normalizer config and a stream of margin batches [N] (shifted, spread, repeated values)."""
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    config = dict(norm_window=draw(st.sampled_from([1, 2, 3, 8, 1000])),
                  margin_scale=draw(st.sampled_from([1.0, 0.5, 3.0])),
                  margin_norm_enable=draw(st.booleans()))
    shift, spread = draw(st.sampled_from([0.0, 0.3, -1.2])), draw(st.sampled_from([0.01, 0.2, 1.0]))
    batches = [(shift + spread * torch.randn(draw(st.integers(1, 6)), generator=g, dtype=torch.float64)).to(dtype)
               for _ in range(draw(st.integers(1, 5)))]
    return dict(config=config, batches=batches)


NORMALIZER_EXAMPLES = (
    dict(config=dict(norm_window=4, margin_scale=1.0, margin_norm_enable=True),
         batches=[torch.full((3,), 0.1), torch.full((2,), 0.1)]),  # constant margins: 0, never NaN
    dict(config=dict(norm_window=1000, margin_scale=3.0, margin_norm_enable=False),
         batches=[torch.tensor([0.9, -0.5, 0.1, 0.7, -0.67, 0.6])]),  # raw scaled: 3 of 6 clamp
    # the window's decisive cases: distinct margins in a small window (the population std, not the unbiased
    # one) and a window that overflows (the oldest margins evicted, exactly norm_window kept)
    dict(config=dict(norm_window=3, margin_scale=1.0, margin_norm_enable=True),
         batches=[torch.tensor([0.0, 1.0]), torch.tensor([2.0]), torch.tensor([-1.0, 5.0]), torch.tensor([0.5])]),
    dict(config=dict(norm_window=2, margin_scale=0.5, margin_norm_enable=True),
         batches=[torch.tensor([0.3]), torch.tensor([0.9]), torch.tensor([-0.6]), torch.tensor([0.2, 0.4])]),
)


@st.composite
def rollouts(draw):
    """One rollout of B envs over T steps: potentials phi [T, B] in [-2, 2], embeddings e [T, B, D],
    captured [T, B] (with skips), resets [T, B] (applied before the step), rewards [T, B]."""
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    T, B, D = draw(st.integers(1, 12)), draw(st.integers(1, 4)), draw(st.integers(1, 5))
    p_skip, p_reset = draw(st.sampled_from([0.0, 0.3, 0.7])), draw(st.sampled_from([0.0, 0.15, 0.4]))
    return dict(
        phi=(4 * torch.rand(T, B, generator=g, dtype=torch.float64) - 2).to(dtype),
        e=torch.randn(T, B, D, generator=g, dtype=torch.float64).to(dtype),
        captured=torch.rand(T, B, generator=g) >= p_skip,
        resets=torch.rand(T, B, generator=g) < p_reset,
        reward=torch.randn(T, B, generator=g, dtype=torch.float64).to(dtype),
        gamma=draw(st.sampled_from([0.99, 0.9, 0.5, 0.0, 1.0])),
        beta=draw(st.sampled_from([0.05, 1.0, 2.5])),
        window=draw(st.sampled_from([1, 2, 3, 5])),
    )


def _pinned_rollout(T: int, B: int, skips=(), resets=(), gamma=0.5, dtype=torch.float64) -> dict:
    g = torch.Generator().manual_seed(T * 31 + B)
    captured = torch.ones(T, B, dtype=torch.bool)
    reset = torch.zeros(T, B, dtype=torch.bool)
    for t, b in skips:
        captured[t, b] = False
    for t, b in resets:
        reset[t, b] = True
    return dict(phi=(4 * torch.rand(T, B, generator=g, dtype=torch.float64) - 2).to(dtype),
                e=torch.randn(T, B, 3, generator=g, dtype=torch.float64).to(dtype),
                captured=captured, resets=reset,
                reward=torch.randn(T, B, generator=g, dtype=torch.float64).to(dtype),
                gamma=gamma, beta=1.0, window=3)


ROLLOUT_EXAMPLES = (
    _pinned_rollout(6, 1),  # every step captured, one episode: the seed's Σ γ^t F_t = β(γ^T φ_T − φ_0)
    _pinned_rollout(8, 2, skips=[(2, 0), (3, 0), (5, 1)], resets=[(4, 0), (6, 1)], dtype=torch.float32),
    _pinned_rollout(5, 3, resets=[(0, 0), (1, 1), (4, 2)], gamma=0.99),  # boundaries at t=0 and t=T-1
)


# --------------------------------------------------------------------------------------------------
# Helpers that drive an implementation over a rollout
# --------------------------------------------------------------------------------------------------
def _run_potential(mod, phi, captured, resets, beta, gamma) -> torch.Tensor:
    """F [T, B] from a fresh ``mod.PotentialShaper``; ``beta`` a float or a list of T floats."""
    T, B = phi.shape
    shaper = mod.PotentialShaper(B, gamma)
    out = []
    for t in range(T):
        shaper.reset(resets[t])
        out.append(shaper(phi[t], captured[t], beta[t] if isinstance(beta, list) else beta))
    return torch.stack(out)


def _run_pool(mod, e, captured, resets, window) -> torch.Tensor:
    T, B, D = e.shape
    pool = mod.TemporalPool(B, D, window)
    out = []
    for t in range(T):
        pool.reset(resets[t])
        out.append(pool(e[t], captured[t]))
    return torch.stack(out)


def _episodes(captured: torch.Tensor, resets: torch.Tensor, b: int) -> list[list[int]]:
    """Per episode of env b: the steps at which it captured."""
    episodes, current = [], []
    for t in range(captured.shape[0]):
        if bool(resets[t, b]):
            episodes.append(current)
            current = []
        if bool(captured[t, b]):
            current.append(t)
    return [ep for ep in episodes + [current] if ep]


# --------------------------------------------------------------------------------------------------
# Properties: margin and centroids
# --------------------------------------------------------------------------------------------------
def check_margin_reference(impl, e, safe, unsafe):
    ref = reference
    eps = _eps(e.dtype)
    D = e.shape[1]
    for name, prompts in (("safe", safe), ("unsafe", unsafe)):
        got = impl.prompt_centroid(prompts)
        assert_close("SHAPE-1", f"prompt_centroid({name} prompts)", got, ref.prompt_centroid(prompts.double()),
                     atol=8 * (prompts.shape[0] + D) * eps, prompts=prompts)
    mu_s, mu_u = impl.prompt_centroid(safe), impl.prompt_centroid(unsafe)
    assert_close("SHAPE-1", "semantic_margin(e, mu_safe, mu_unsafe)", impl.semantic_margin(e, mu_s, mu_u),
                 ref.semantic_margin(e.double(), mu_s.double(), mu_u.double()), atol=8 * D * eps,
                 e=e, mu_safe=mu_s, mu_unsafe=mu_u)


def check_swap_flips_sign(impl, e, safe, unsafe):
    mu_s, mu_u = impl.prompt_centroid(safe), impl.prompt_centroid(unsafe)
    m, swapped = impl.semantic_margin(e, mu_s, mu_u), impl.semantic_margin(e, mu_u, mu_s)
    if not torch.equal(swapped, -m):
        i = int((swapped != -m).nonzero()[0])
        fail("SHAPE-2", f"margin with the prompt sets swapped = {swapped[i].item()!r}, expected exactly "
                        f"-{m[i].item()!r}", e=e[i], safe=safe, unsafe=unsafe)


def check_scale_invariance(impl, e, safe, unsafe):
    base = impl.semantic_margin(e, impl.prompt_centroid(safe), impl.prompt_centroid(unsafe))
    if bool((base.abs() > CLAMP).any()):
        fail("SHAPE-3", f"|margin| exceeds 2: {base.tolist()}", e=e)
    eps = _eps(e.dtype)
    # below ‖x‖ = 1e-12 normalize divides by 1e-12 instead (UNIT_EPS): scale invariance starts above it
    def above(x, k):
        return x.double().norm(dim=-1) * k > 10 * UNIT_EPS

    for a, b in ((0.25, 8.0), (1024.0, 0.125)):
        rows = above(e, min(a, 1.0))
        if not (above(safe, min(b, 1.0)).all() and above(unsafe, min(b, 1.0)).all()) or not rows.any():
            continue
        scaled = impl.semantic_margin(a * e, impl.prompt_centroid(b * safe), impl.prompt_centroid(b * unsafe))
        assert_close("SHAPE-3", f"margin with e*{a:g} and prompts*{b:g} (cosines ignore scale)", scaled[rows],
                     base[rows], atol=16 * e.shape[1] * eps, e=e, safe=safe, unsafe=unsafe)


# --------------------------------------------------------------------------------------------------
# Properties: β schedule
# --------------------------------------------------------------------------------------------------
def check_beta_endpoints(impl, total_steps, beta_start, beta_end_step_fraction):
    sched = lambda t: float(impl.beta_schedule(t, total_steps, beta_start, beta_end_step_fraction))  # noqa: E731
    args = dict(total_steps=total_steps, beta_start=beta_start, beta_end_step_fraction=beta_end_step_fraction)
    if sched(0) != beta_start:
        fail("SHAPE-4", f"beta(0) = {sched(0)!r}, expected beta_start = {beta_start!r}", **args)
    end = math.ceil(beta_end_step_fraction * total_steps)
    for t in sorted({end, end + 1, total_steps, 2 * total_steps + 3}):
        if sched(t) != 0.0:
            fail("SHAPE-4", f"beta({t}) = {sched(t)!r}, expected exactly 0 at and after the end step "
                            f"ceil(fraction*total) = {end}", **args)
    grid = sorted({min(end, round(end * i / 40)) for i in range(41)} | {total_steps})
    values = [sched(t) for t in grid]
    for (t0, v0), (t1, v1) in zip(zip(grid, values), zip(grid[1:], values[1:])):
        if v1 > v0:
            fail("SHAPE-4", f"beta increases: beta({t0}) = {v0!r} < beta({t1}) = {v1!r}", **args)
    if min(values) < 0.0 or max(values) > beta_start:
        fail("SHAPE-4", f"beta leaves [0, beta_start]: min {min(values)!r}, max {max(values)!r}", **args)


def check_beta_formula(impl, total_steps, beta_start, beta_end_step_fraction, position):
    t = round(position * 1.2 * beta_end_step_fraction * total_steps)
    got = float(impl.beta_schedule(t, total_steps, beta_start, beta_end_step_fraction))
    want = _closed_form_beta(t, total_steps, beta_start, beta_end_step_fraction)
    assert_close("SHAPE-5", f"beta({t})", torch.tensor(got, dtype=torch.float64),
                 torch.tensor(want, dtype=torch.float64), atol=8 * _eps(torch.float64) * max(beta_start, 1.0),
                 total_steps=total_steps, beta_start=beta_start, beta_end_step_fraction=beta_end_step_fraction)


BAD_BETA = (dict(name="beta_end_step_fraction", value=0.0), dict(name="beta_end_step_fraction", value=1.5),
            dict(name="beta_end_step_fraction", value=-0.2), dict(name="beta_end_step_fraction", value=math.nan),
            dict(name="total_steps", value=0), dict(name="step", value=-1), dict(name="beta_start", value=-0.1))


def check_beta_rejects(impl, name, value):
    args = dict(step=3, total_steps=100, beta_start=0.1, beta_end_step_fraction=0.5)
    args[name] = value
    expect_rejection("SHAPE-6", lambda: impl.beta_schedule(**args), names=[name], mentions=[repr(value)],
                     what=f"beta_schedule({name}={value!r})")


# --------------------------------------------------------------------------------------------------
# Properties: margin normalization and the clamp counter
# --------------------------------------------------------------------------------------------------
def check_normalizer_reference(impl, config, batches):
    ref = reference
    got_norm, ref_norm = impl.MarginNormalizer(**config), ref.MarginNormalizer(**config)
    scale = config["margin_scale"]
    for i, m in enumerate(batches):
        got, want = got_norm(m), ref_norm(m.double())
        tol = 4 * CLAMP * _eps(m.dtype)
        if config["margin_norm_enable"]:  # window statistics summed in any order: rounding amplified by 1/std
            w = torch.tensor(list(ref_norm.window), dtype=torch.float64)
            tol += (scale + CLAMP) * 64 * len(w) * _eps(torch.float64) * float(w.abs().max()) / (
                float(w.std(unbiased=False)) + NORM_EPS)
        assert_close("SHAPE-7", f"normalized margins of batch {i}", got, want, atol=tol, m=m, **config)
        if bool((got.abs() > CLAMP).any()):
            fail("SHAPE-7", f"normalized margins leave [-2, 2]: {got.tolist()}", m=m, **config)


def check_clamp_counter(impl, config, batches):
    ref = reference
    got_norm, ref_norm = impl.MarginNormalizer(**config), ref.MarginNormalizer(**config)
    if float(got_norm.clamp_fraction) != 0.0:
        fail("SHAPE-8", f"clamp_fraction = {float(got_norm.clamp_fraction)!r} before any margin, expected 0")
    for m in batches:
        got_norm(m)
        ref_norm(m.double())
    got_c, got_n = _as_int(got_norm.clamp_count), _as_int(got_norm.count)
    want_c, want_n = ref_norm.clamp_count, ref_norm.count
    if (got_c, got_n) != (want_c, want_n):
        fail("SHAPE-8", f"clamp_count, count = {got_c}, {got_n}; expected {want_c}, {want_n} "
                        "(margins with |y| > 2, margins seen)", batches=torch.cat(batches), **config)
    frac = float(got_norm.clamp_fraction)
    if abs(frac - want_c / want_n) > 1e-12:
        fail("SHAPE-8", f"clamp_fraction = {frac!r}, expected clamp_count / count = {want_c}/{want_n}", **config)


# --------------------------------------------------------------------------------------------------
# Properties: additive and potential shaping
# --------------------------------------------------------------------------------------------------
def check_additive(impl, phi, e, captured, resets, reward, gamma, beta, window):
    eps = _eps(reward.dtype)
    for t in range(reward.shape[0]):
        r, m, c = reward[t], phi[t], captured[t]
        got = impl.additive_shaping(r, beta, m, c)
        want = torch.where(c, r.double() + beta * m.double(), r.double())
        assert_close("SHAPE-9", f"r + beta*m_bar at step {t}", got, want,
                     atol=4 * eps * (float(r.abs().max()) + beta * CLAMP), reward=r, margin=m, captured=c, beta=beta)
        if not torch.equal(got[~c], r[~c]):
            fail("SHAPE-9", f"skipped envs' rewards changed: {got[~c].tolist()} != {r[~c].tolist()}",
                 reward=r, captured=c, beta=beta)


def check_telescoping(impl, phi, e, captured, resets, reward, gamma, beta, window):
    F = _run_potential(impl, phi, captured, resets, beta, gamma).double()
    p = phi.double()
    for b in range(phi.shape[1]):
        for steps in _episodes(captured, resets, b):
            K = len(steps) - 1
            discounted = sum(gamma ** (k - 1) * F[t, b] for k, t in enumerate(steps) if k >= 1)
            want = beta * (gamma ** K * p[steps[-1], b] - p[steps[0], b])
            tol = 16 * (K + 1) * _eps(phi.dtype) * beta * (1 + CLAMP)
            if abs(float(discounted) - float(want)) > tol:
                fail("SHAPE-10", f"env {b}, episode captured at steps {steps}: sum_k gamma^(k-1) F_k = "
                                 f"{float(discounted):.9g}, expected beta (gamma^K phi_K - phi_0) = {float(want):.9g} "
                                 f"(K={K}, gamma={gamma}, beta={beta}, tol {tol:.3g})",
                     phi=phi[steps, b], F=F[steps, b])


def check_potential_reference(impl, phi, e, captured, resets, reward, gamma, beta, window):
    got = _run_potential(impl, phi, captured, resets, beta, gamma)
    want = _run_potential(reference, phi.double(), captured, resets, beta, gamma)
    assert_close("SHAPE-11", "potential shaping F [T, B]", got, want, atol=8 * _eps(phi.dtype) * beta * (1 + CLAMP),
                 phi=phi, captured=captured, resets=resets, gamma=gamma, beta=beta)


def check_skips_add_zero(impl, phi, e, captured, resets, reward, gamma, beta, window, insert_seed):
    F = _run_potential(impl, phi, captured, resets, beta, gamma)
    zero_at = ~captured.clone()
    for b in range(phi.shape[1]):
        for steps in _episodes(captured, resets, b):
            zero_at[steps[0], b] = True
    if bool((F[zero_at] != 0).any()):
        t, b = (zero_at & (F != 0)).nonzero()[0].tolist()
        kind = "a skipped capture" if not bool(captured[t, b]) else "the first capture of an episode"
        fail("SHAPE-12", f"F[{t}, {b}] = {F[t, b].item()!r} at {kind}, expected exactly 0",
             phi=phi[:, b], captured=captured[:, b], resets=resets[:, b])
    # insert skipped steps carrying garbage potentials: every original output must be unchanged
    g = torch.Generator().manual_seed(insert_seed)
    T, B = phi.shape
    keep, rows_phi, rows_cap, rows_reset = [], [], [], []
    for t in range(T):
        for _ in range(int(torch.randint(0, 3, (1,), generator=g))):
            rows_phi.append(torch.full((B,), 1e6, dtype=phi.dtype))
            rows_cap.append(torch.zeros(B, dtype=torch.bool))
            rows_reset.append(torch.zeros(B, dtype=torch.bool))
        keep.append(len(rows_phi))
        rows_phi.append(phi[t])
        rows_cap.append(captured[t])
        rows_reset.append(resets[t])
    padded = _run_potential(impl, torch.stack(rows_phi), torch.stack(rows_cap), torch.stack(rows_reset), beta, gamma)
    inserted = torch.ones(len(rows_phi), dtype=torch.bool)
    inserted[keep] = False
    if bool((padded[inserted] != 0).any()):
        fail("SHAPE-12", f"an inserted skipped step returned {padded[inserted].abs().max().item()!r}, expected 0")
    if not torch.equal(padded[keep], F):
        t, b = (padded[keep] != F).nonzero()[0].tolist()
        fail("SHAPE-12", f"inserting skipped steps changed F[{t}, {b}] from {F[t, b].item()!r} to "
                         f"{padded[keep][t, b].item()!r}: a skipped capture left a trace",
             phi=phi[:, b], captured=captured[:, b])


# --------------------------------------------------------------------------------------------------
# Properties: temporal pooling
# --------------------------------------------------------------------------------------------------
def check_pool_reference(impl, phi, e, captured, resets, reward, gamma, beta, window):
    got = _run_pool(impl, e, captured, resets, window)
    want = _run_pool(reference, e.double(), captured, resets, window)
    assert_close("SHAPE-13", "pooled embeddings e_eff [T, B, D]", got, want,
                 atol=4 * window * _eps(e.dtype) * float(e.abs().max()),
                 e=e, captured=captured, resets=resets, window=window)


def check_pool_episodes(impl, phi, e, captured, resets, reward, gamma, beta, window):
    got = _run_pool(impl, e, captured, resets, window)
    T, B = captured.shape
    for b in range(B):
        in_episode = []
        for t in range(T):
            if bool(resets[t, b]):
                in_episode = []
            if bool(captured[t, b]):
                in_episode.append(t)
            if not in_episode:
                if bool((got[t, b] != 0).any()):
                    fail("SHAPE-14", f"env {b} step {t}, no capture since the episode began: pooled embedding "
                                     f"{got[t, b].tolist()}, expected zeros", resets=resets[:, b])
                continue
            if len(in_episode) == 1 and not torch.equal(got[t, b], e[in_episode[0], b]):
                fail("SHAPE-14", f"env {b} step {t}, one capture since the episode began: pooled embedding "
                                 f"{got[t, b].tolist()}, expected exactly that embedding "
                                 f"{e[in_episode[0], b].tolist()} (the window mixes episodes)",
                     resets=resets[:, b], captured=captured[:, b])
            want = e[in_episode[-window:], b].double().mean(0)
            assert_close("SHAPE-14", f"env {b} step {t}, {len(in_episode)} captures since the episode began: "
                                     f"mean of the last {window}",
                         got[t, b], want, atol=4 * window * _eps(e.dtype) * float(e.abs().max()),
                         episode_steps=in_episode)


# --------------------------------------------------------------------------------------------------
# Properties: vectorization, β = 0, bad input
# --------------------------------------------------------------------------------------------------
def check_env_permutation(impl, phi, e, captured, resets, reward, gamma, beta, window, perm_seed):
    perm = torch.randperm(phi.shape[1], generator=torch.Generator().manual_seed(perm_seed))
    outputs = (
        ("potential F", lambda p, c, r: _run_potential(impl, p, c, r, beta, gamma), phi),
        ("pooled e_eff", lambda x, c, r: _run_pool(impl, x, c, r, window), e),
        ("additive r'", lambda x, c, r: torch.stack([impl.additive_shaping(x[t], beta, phi[t].to(x.dtype), c[t])
                                                     for t in range(x.shape[0])]), reward),
    )
    for what, run, x in outputs:
        base = run(x, captured, resets)
        if what == "additive r'":
            permuted = torch.stack([impl.additive_shaping(x[t][perm], beta, phi[t][perm], captured[t][perm])
                                    for t in range(x.shape[0])])
        else:
            permuted = run(x[:, perm], captured[:, perm], resets[:, perm])
        if not torch.equal(permuted, base[:, perm]):
            fail("SHAPE-15", f"{what}: permuting the envs by {perm.tolist()} does not permute the output "
                             f"(max |diff| {float((permuted.double() - base[:, perm].double()).abs().max()):.3g})",
                 captured=captured, resets=resets)


def check_zero_after_end(impl, phi, e, captured, resets, reward, gamma, beta, window, total_steps, fraction):
    T = phi.shape[0]
    end = math.ceil(fraction * total_steps)
    steps = [end - T // 2 + t for t in range(T)]
    betas = [float(impl.beta_schedule(max(s, 0), total_steps, beta, fraction)) for s in steps]
    F = _run_potential(impl, phi, captured, resets, betas, gamma)
    for t, s in enumerate(steps):
        if s < end:
            continue
        r = impl.additive_shaping(reward[t], betas[t], phi[t], captured[t])
        if not torch.equal(r, reward[t]):
            fail("SHAPE-16", f"additive shaping at step {s} >= end step {end} changed rewards by "
                             f"{float((r - reward[t]).abs().max())!r} (beta = {betas[t]!r})", beta_start=beta)
        if bool((F[t] != 0).any()):
            fail("SHAPE-16", f"potential shaping at step {s} >= end step {end} is {F[t].tolist()}, expected 0 "
                             f"(beta = {betas[t]!r})", beta_start=beta, fraction=fraction, total_steps=total_steps)


def _bad_calls(impl, kind: str):
    """(call, argument name, mentions, what, before, after): a rejected call and a state probe."""
    x = torch.tensor([0.3, -0.2, 0.9], dtype=torch.float64)
    if kind == "mu_safe":
        return (lambda: impl.semantic_margin(torch.ones(2, 4), torch.ones(5), torch.ones(4)),
                ["mu_safe"], ["(5,)", "4"], "mu_safe of dimension 5 for 4-dim embeddings")
    if kind == "mu_unsafe":
        return (lambda: impl.semantic_margin(torch.ones(2, 4), torch.ones(4), torch.ones(3)),
                ["mu_unsafe"], ["(3,)", "4"], "mu_unsafe of dimension 3 for 4-dim embeddings")
    if kind == "prompts":
        return (lambda: impl.prompt_centroid(torch.ones(2, 3, dtype=torch.int64)), ["prompts"], ["int64"],
                "integer prompt embeddings")
    if kind == "norm_window":
        return (lambda: impl.MarginNormalizer(norm_window=0), ["norm_window"], ["0"], "norm_window=0")
    if kind == "margin_scale":
        return (lambda: impl.MarginNormalizer(margin_scale=-1.0), ["margin_scale"], ["-1.0"], "margin_scale=-1")
    if kind == "gamma":
        return (lambda: impl.PotentialShaper(2, 1.5), ["gamma"], ["1.5"], "gamma=1.5")
    if kind == "window":
        return (lambda: impl.TemporalPool(2, 3, 0), ["window"], ["0"], "window=0")
    if kind == "m":
        norm = impl.MarginNormalizer(norm_window=4, margin_scale=3.0)
        norm(x)
        bad = torch.tensor([0.1, math.nan])
        return (lambda: norm(bad), ["m"], ["non-finite"], "a NaN margin",
                lambda: (norm(x), _as_int(norm.clamp_count), _as_int(norm.count)),
                lambda: _replay_normalizer(impl, x))
    if kind == "phi":
        shaper = impl.PotentialShaper(3, 0.9)
        shaper(x, torch.ones(3, dtype=torch.bool), 1.0)
        return (lambda: shaper(torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.bool), 1.0),
                ["phi"], ["(2,)", "(3,)"], "phi for 2 envs on a 3-env shaper",
                lambda: shaper(x.flip(0), torch.ones(3, dtype=torch.bool), 1.0),
                lambda: _replay_shaper(impl, x))
    if kind == "captured":
        shaper = impl.PotentialShaper(3, 0.9)
        return (lambda: shaper(x, torch.ones(3), 1.0), ["captured"], ["bool"], "a float capture mask")
    if kind == "e":
        pool = impl.TemporalPool(3, 2, 2)
        pool(torch.ones(3, 2, dtype=torch.float64), torch.ones(3, dtype=torch.bool))
        return (lambda: pool(torch.zeros(3, 4, dtype=torch.float64), torch.ones(3, dtype=torch.bool)),
                ["e"], ["(3, 4)", "(3, 2)"], "4-dim embeddings on a 2-dim pool",
                lambda: pool(torch.zeros(3, 2, dtype=torch.float64), torch.ones(3, dtype=torch.bool)),
                lambda: _replay_pool(impl))
    raise AssertionError(kind)


def _replay_normalizer(impl, x):
    norm = impl.MarginNormalizer(norm_window=4, margin_scale=3.0)
    norm(x)
    return norm(x), _as_int(norm.clamp_count), _as_int(norm.count)


def _replay_shaper(impl, x):
    shaper = impl.PotentialShaper(3, 0.9)
    shaper(x, torch.ones(3, dtype=torch.bool), 1.0)
    return shaper(x.flip(0), torch.ones(3, dtype=torch.bool), 1.0)


def _replay_pool(impl):
    pool = impl.TemporalPool(3, 2, 2)
    pool(torch.ones(3, 2, dtype=torch.float64), torch.ones(3, dtype=torch.bool))
    return pool(torch.zeros(3, 2, dtype=torch.float64), torch.ones(3, dtype=torch.bool))


BAD_KINDS = ("mu_safe", "mu_unsafe", "prompts", "norm_window", "margin_scale", "gamma", "window", "m", "phi",
             "captured", "e")


def check_rejects_bad_input(impl, kind):
    call, names, mentions, what, *probe = _bad_calls(impl, kind)
    expect_rejection("SHAPE-17", call, names=names, mentions=mentions, what=what)
    if probe:
        after, untouched = probe[0](), probe[1]()
        same = all(torch.equal(torch.as_tensor(a), torch.as_tensor(u)) for a, u in
                   zip(after if isinstance(after, tuple) else (after,),
                       untouched if isinstance(untouched, tuple) else (untouched,)))
        if not same:
            fail("SHAPE-17", f"after the rejected call ({what}) the next output is {after!r}, expected "
                             f"{untouched!r} as if the call never happened: stored state was changed")


# --------------------------------------------------------------------------------------------------
def check_scalar_hyperparameters(impl, phi, e, captured, resets, reward, gamma, beta, window):
    T, B, D = e.shape

    def run(gamma, beta, window, total_steps, beta_start, beta_end_step_fraction):
        return (_run_potential(impl, phi, captured, resets, beta, gamma), _run_pool(impl, e, captured, resets, window),
                impl.additive_shaping(reward[0], beta, phi[0], captured[0]),
                impl.beta_schedule(T, total_steps, beta_start, beta_end_step_fraction))

    check_scalar_types("SHAPE-18", run, dict(gamma=gamma, beta=beta, window=window, total_steps=2 * T + 1,
                                             beta_start=0.05, beta_end_step_fraction=0.5), phi=phi)


def check_normalizer_defaults(impl, omitted, seed):
    g = torch.Generator().manual_seed(seed)
    batches = [3 * torch.randn(n, generator=g, dtype=torch.float64) for n in (5, 1, 7, 1200)]
    explicit = dict(norm_window=16, margin_scale=2.5, margin_norm_enable=False)
    kept = {k: v for k, v in explicit.items() if k not in omitted}

    def run(extra):
        norm = impl.MarginNormalizer(**kept, **extra)
        return [norm(b) for b in batches] + [_as_int(norm.clamp_count), _as_int(norm.count)]

    same_with_defaults("SHAPE-19", f"MarginNormalizer ({', '.join(sorted(omitted))} omitted)", run,
                       {k: NORMALIZER_DEFAULTS[k] for k in sorted(omitted)}, seed=seed)


def check_more_bad_calls(impl):
    r, m, cap = torch.zeros(3), torch.zeros(3), torch.ones(3, dtype=torch.bool)
    pool, shaper = impl.TemporalPool(3, 2, 2), impl.PotentialShaper(3, 0.9)
    e = torch.zeros(3, 2)
    calls = (
        (lambda: impl.additive_shaping(r, 0.5, torch.zeros(2), cap), ["margin"], "additive_shaping with margin (2,)"),
        (lambda: impl.additive_shaping(r, 0.5, m, torch.ones(3)), ["captured"], "additive_shaping with a float mask"),
        (lambda: impl.additive_shaping(r, -0.5, m, cap), ["beta"], "additive_shaping with beta = -0.5"),
        (lambda: impl.PotentialShaper(0, 0.9), ["num_envs"], "PotentialShaper(num_envs=0)"),
        (lambda: shaper.reset(torch.ones(2, dtype=torch.bool)), ["mask"], "PotentialShaper(3).reset(mask (2,))"),
        (lambda: impl.TemporalPool(0, 2, 2), ["num_envs"], "TemporalPool(num_envs=0)"),
        (lambda: impl.TemporalPool(3, 0, 2), ["dim"], "TemporalPool(dim=0)"),
        (lambda: pool(e, torch.ones(3)), ["captured"], "TemporalPool with a float capture mask"),
        (lambda: pool.reset(torch.ones(3)), ["mask"], "TemporalPool.reset with a float mask"),
    )
    for call, names, what in calls:
        expect_rejection("SHAPE-20", call, names=names, what=what)


def check_clamp_boundary(impl):
    norm = impl.MarginNormalizer(norm_window=8, margin_scale=1.0, margin_norm_enable=False)
    out = norm(torch.tensor([2.0, -2.0, 1.0, 2.5], dtype=torch.float64))
    if _as_int(norm.clamp_count) != 1 or out.tolist() != [2.0, -2.0, 1.0, 2.0]:
        fail("SHAPE-21", f"margins [2, -2, 1, 2.5] gave {out.tolist()} with clamp_count {_as_int(norm.clamp_count)}, "
                         "expected [2, -2, 1, 2] and 1 clamp (only |y| > 2 is clamped)")


def check_pool_copies(impl):
    pool, twin = impl.TemporalPool(2, 3, 3), impl.TemporalPool(2, 3, 3)
    cap = torch.ones(2, dtype=torch.bool)
    for t in range(3):
        e = torch.full((2, 3), float(t), dtype=torch.float64)
        got, want = pool(e, cap), twin(e.clone(), cap)
        e.fill_(100.0)  # the caller reuses its buffer
        if not torch.equal(got, want):
            fail("SHAPE-22", f"pool output {got.tolist()} at step {t}, expected {want.tolist()}: writing into "
                             "embeddings pooled earlier changed it (the pool must keep copies)")
    e = torch.zeros(2, 3, dtype=torch.float64)
    got, want = pool(e, ~cap), twin(e, ~cap)
    if not torch.equal(got, want):
        fail("SHAPE-22", f"after the caller wrote into embeddings it had pooled, the pool gives {got.tolist()}, "
                         f"expected {want.tolist()}: the pool must keep copies")


PROPERTIES = (
    Property("SHAPE-1", check_margin_reference, margin_cases(), MARGIN_EXAMPLES,
             ("prompt_centroid", "semantic_margin")),
    Property("SHAPE-2", check_swap_flips_sign, margin_cases(), MARGIN_EXAMPLES,
             ("prompt_centroid", "semantic_margin")),
    Property("SHAPE-3", check_scale_invariance, margin_cases(), MARGIN_EXAMPLES,
             ("prompt_centroid", "semantic_margin")),
    Property("SHAPE-4", check_beta_endpoints, beta_cases(), BETA_EXAMPLES, ("beta_schedule",)),
    Property("SHAPE-5", check_beta_formula,
             st.builds(lambda c, p: dict(c, position=p), beta_cases(), st.floats(0.0, 1.0)),
             (dict(BETA_EXAMPLES[0], position=0.5 / 1.2),), ("beta_schedule",)),
    Property("SHAPE-6", check_beta_rejects, st.sampled_from(BAD_BETA), requires=("beta_schedule",),
             max_examples=len(BAD_BETA)),
    Property("SHAPE-7", check_normalizer_reference, normalizer_cases(), NORMALIZER_EXAMPLES, ("MarginNormalizer",)),
    Property("SHAPE-8", check_clamp_counter, normalizer_cases(), NORMALIZER_EXAMPLES, ("MarginNormalizer",)),
    Property("SHAPE-9", check_additive, rollouts(), ROLLOUT_EXAMPLES, ("additive_shaping",)),
    Property("SHAPE-10", check_telescoping, rollouts(), ROLLOUT_EXAMPLES, ("PotentialShaper",)),
    Property("SHAPE-11", check_potential_reference, rollouts(), ROLLOUT_EXAMPLES, ("PotentialShaper",)),
    Property("SHAPE-12", check_skips_add_zero, st.builds(lambda c, s: dict(c, insert_seed=s), rollouts(), seeds),
             tuple(dict(c, insert_seed=1) for c in ROLLOUT_EXAMPLES), ("PotentialShaper",)),
    Property("SHAPE-13", check_pool_reference, rollouts(), ROLLOUT_EXAMPLES, ("TemporalPool",)),
    Property("SHAPE-14", check_pool_episodes, rollouts(), ROLLOUT_EXAMPLES, ("TemporalPool",)),
    Property("SHAPE-15", check_env_permutation, st.builds(lambda c, s: dict(c, perm_seed=s), rollouts(), seeds),
             tuple(dict(c, perm_seed=3) for c in ROLLOUT_EXAMPLES), ("PotentialShaper", "TemporalPool",
                                                                     "additive_shaping")),
    Property("SHAPE-16", check_zero_after_end,
             st.builds(lambda c, n, f: dict(c, total_steps=n, fraction=f), rollouts(),
                       st.sampled_from([10, 100, 1000]), st.sampled_from([1.0, 0.5, 0.25])),
             tuple(dict(c, total_steps=10, fraction=0.5) for c in ROLLOUT_EXAMPLES),
             ("beta_schedule", "PotentialShaper", "additive_shaping")),
    Property("SHAPE-17", check_rejects_bad_input, st.builds(lambda k: dict(kind=k), st.sampled_from(BAD_KINDS)),
             tuple(dict(kind=k) for k in BAD_KINDS), INTERFACE, max_examples=1),
    Property("SHAPE-18", check_scalar_hyperparameters, rollouts(), ROLLOUT_EXAMPLES[:1], INTERFACE, max_examples=4),
    Property("SHAPE-19", check_normalizer_defaults,
             st.builds(lambda o, s: dict(omitted=o, seed=s),
                       st.one_of(st.just(frozenset(NORMALIZER_DEFAULTS)),
                                 st.frozensets(st.sampled_from(tuple(NORMALIZER_DEFAULTS)), min_size=1)),
                       st.integers(0, 2**31 - 1)),
             (dict(omitted=frozenset(NORMALIZER_DEFAULTS), seed=0),), ("MarginNormalizer",), max_examples=8),
    Property("SHAPE-20", check_more_bad_calls, requires=("additive_shaping", "PotentialShaper", "TemporalPool")),
    Property("SHAPE-21", check_clamp_boundary, requires=("MarginNormalizer",)),
    Property("SHAPE-22", check_pool_copies, requires=("TemporalPool",)),
)

CONTRACT = Contract("shaping", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
