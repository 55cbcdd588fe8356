"""Contract ``world_model``: DreamerV3's world model and reconstruction loss over the replay's packed2 batch.

Source: the Dreamer plan §3 M4 (packed2 encoder, decoder, symlog two-hot reward head, Bernoulli continue head;
stop-gradient KL with free bits, no KL balancing; overfit-one-batch and finite non-zero gradient tests;
``unpack_impl`` hook), §2.3 (``continue``: 0 on termination, 1 on truncation), §5. Network and batch layout
in rlspec.contracts.world_model; formulas in reference/world_model.py.

KL (per (t, b), S independent categoricals, p = softmax(post), q = softmax(prior))
-------------------------------------------------------------------------------------
    dyn = KL(sg(p) ‖ q) = Σ_{s,k} sg(p)(log sg(p) − log q)      gradient to the prior only
    rep = KL(p ‖ sg(q)) = Σ_{s,k} p(log p − log sg(q))           gradient to the posterior only
    L_kl = dyn_scale·mean_{t,b} max(fb, dyn) + rep_scale·mean_{t,b} max(fb, rep)      (clamp, then mean)
Defaults: the seed's dyn_scale = rep_scale = 1 (total = dyn + rep, no balancing), fb = 1 nat;
WorldModelConfig.with_paper_kl_scales() gives the DreamerV3 paper's / sheeprl's 0.5 / 0.1.

Loss:  L = mean_{t,b}[Σ_pixels (dec(f) − x)² − log p_twohot(reward | symlog) + BCE(cont(f), continue)] + L_kl.

Tolerances: 1e-5 absolute + 1e-5 relative for closed forms in float64; 1e-4 for the fast twin's parity
(float32 split matmuls in its RSSM, float32 two-hot).
"""

from __future__ import annotations

import dataclasses
import importlib

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from rlspec.contracts.rssm import RSSMState
from rlspec.contracts.world_model import PAPER_KL_SCALES, UNPACK_MODULES, WorldModelConfig, conv_latent_shape
from rlspec.reference import packed2, twohot
from rlspec.reference.world_model import WorldModel as Reference
from rlspec.spec.core import (
    Change,
    Contract,
    Property,
    assert_close,
    assert_grads_close,
    assert_identical,
    by_category,
    expect_rejection,
    fail,
    named_grads,
)

CLAUSES = {
    "WM-1": "kl_loss's dyn and rep [T, B] equal the float64 closed form Σ_{s,k} p (log p − log q) of S "
            "independent categoricals (p = softmax(post), q = softmax(prior))",
    "WM-2": "gradient routing: the dynamics term (dyn_scale 1, rep_scale 0) gives exactly zero gradient to "
            "post_logits and a non-zero one to prior_logits; the representation term the reverse",
    "WM-3": "free bits per (t, b) before the mean, then the scales: loss = dyn_scale·mean(max(fb, dyn)) + "
            "rep_scale·mean(max(fb, rep)) (a batch mixing KLs below and above fb)",
    "WM-4": "defaults and totals: WorldModelConfig defaults dyn_scale = rep_scale = 1, free_bits = 1, the paper "
            "preset 0.5 / 0.1; world_model_loss's loss = recon + reward + continue + kl, its kl term = kl_loss of "
            "the returned logits with the config's free bits and scales; every returned metric detached (a "
            "metric with a graph keeps the whole step's graph alive)",
    "WM-5": "continue head target: the replay's continue, 1 on a truncation (reset without termination) and 0 "
            "on a termination: continue_loss = mean BCE(cont_logits, continue)",
    "WM-6": "reward loss = −mean twohot.log_prob(reward_logits, reward): the two-hot of symlog(reward) "
            "(float64 reference twohot)",
    "WM-7": "the encoder takes packed2 uint8 natively: embed(obs) equals the float64 closed form (unpack v/3, "
            "centered crop, avg-pool, MLP or sheeprl's conv stages) and is bit-identical for every unpack_impl "
            "available",
    "WM-8": "backward: every parameter's gradient is finite and non-zero (free_bits 0, so the prior trains)",
    "WM-9": "overfit one fixed batch: 10 Adam steps (lr 1e-2) reduce the reconstruction loss at least 4×, "
            "deterministically (same loss bits on a second run), with the MLP and the conv encoder",
    "WM-10": "parity with the reference loaded with the same state_dict: loss and every metric within 1e-4",
    "WM-12": "head_input 'next' (action-conditioned heads): reward_loss and continue_loss are WM-6's and WM-5's "
             "on f⁺_t = img_step(h_t, z_t, action_t) of the posterior, its prior samples drawn from the generator "
             "after the scan; the decoder still reads f_t; changing only the last row's action changes both",
    "WM-13": "initialization from the caller's generator only: WorldModel(config, generator) built twice from "
             "the same seed has identical parameters (whatever the global RNG's state), from another seed "
             "different ones, and the global RNG is not advanced",
    "WM-14": "gradient parity at unequal KL scales: kl_loss's ∂/∂post_logits and ∂/∂prior_logits equal the float64 "
             "closed form's (stop-gradient sides, free bits per (t, b)), and world_model_loss's ∂loss/∂θ equals the "
             "reference's for every parameter (dyn_scale 0.5, rep_scale 0.1, free bits 0): a loss with the right "
             "value that routes a gradient wrongly (scales swapped between the stop-gradient sides) fails",
    "WM-15": "head_input 'posterior' (sheeprl's heads on transition rows): reward_loss and continue_loss are WM-6's "
             "and WM-5's on f°_t = [h⁺_t; z°_t], one observe step from the posterior state (h_t, z_t) with action_t "
             "taken on embed(final_obs_t), its posterior samples drawn from the generator after the scan; h⁺_t is "
             "h_{t+1} wherever row t + 1 continues the episode; the decoder and the KL still read the scan, so a "
             "batch differing only in the last row's final_obs changes nothing else (and its head losses follow "
             "the same formula); a batch without final_obs is rejected naming it",
    "WM-11": "bad inputs are rejected naming the argument, the expected and the actual value (obs dtype and "
             "shape, action dtype, shape and ids, continue values, missing keys, kl_loss shapes and free bits, a "
             "config that is not a WorldModelConfig)",
}

CATEGORIES = by_category(
    maths=("WM-1", "WM-2", "WM-3", "WM-4", "WM-5", "WM-6", "WM-7", "WM-8", "WM-9", "WM-10", "WM-12", "WM-13",
           "WM-14", "WM-15"),
    validation=("WM-11",),
)

INTERFACE = ("WorldModel", "kl_loss")
"""
WorldModel(config: WorldModelConfig, generator=None)   an nn.Module (state_dict layout of reference/world_model.py)
  .config
  .embed(obs [T, B, 1, 72, 20] uint8) -> [T, B, E]
  .heads(features [..., H + S·K]) -> (reconstruction [..., P], reward logits [..., bins], continue logit [...])
  .world_model_loss(batch: {obs, action, reward, is_first, continue[, final_obs]}, generator)
      -> (loss [], metrics {loss, recon_loss, reward_loss, continue_loss, kl_loss, dyn_kl, rep_kl}, RSSMOutput)
kl_loss(post_logits [T, B, S, K], prior_logits, free_bits=1.0, dyn_scale=1.0, rep_scale=1.0)
  -> KLTerms(loss [], dyn [T, B], rep [T, B])
"""

TOL, PARITY_TOL = 1e-5, 1e-4
OVERFIT_STEPS, OVERFIT_FACTOR = 10, 4.0
METRICS = ("loss", "recon_loss", "reward_loss", "continue_loss", "kl_loss", "dyn_kl", "rep_kl")

# --------------------------------------------------------------------------------------------------
# Strategies: tiny sizes (H <= 16, S, K <= 4, T <= 6, B <= 2); the encoder 'mlp' on the whole frame, or
# 'conv' on a small centered crop (its embed_dim derived from the geometry)
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)


def conv_fields(frame: tuple[int, int], pool: int, mult: int, stages: int) -> dict:
    c, h, w = conv_latent_shape(frame, pool, mult, stages)
    return dict(encoder="conv", frame=frame, pool=pool, cnn_mult=mult, cnn_stages=stages, embed_dim=c * h * w)


encoders = st.one_of(
    st.builds(lambda e, pool: dict(embed_dim=e, pool=pool), st.sampled_from([8, 16]), st.sampled_from([4, 8])),
    st.builds(lambda geometry, mult, stages: conv_fields(*geometry, mult, stages),  # (frame, pool): sides / 4
              st.sampled_from([((16, 16), 4), ((32, 16), 2), ((24, 40), 2)]), st.sampled_from([2, 3]),
              st.sampled_from([1, 2])))
configs = st.builds(
    lambda a, h, s, k, hid, enc, bins: dict(num_actions=a, deter=h, stoch=s, classes=k, hidden=hid,
                                            reward_bins=bins, **enc),
    st.integers(1, 3), st.sampled_from([8, 16]), st.integers(1, 4), st.integers(2, 4), st.sampled_from([8, 16]),
    encoders, st.sampled_from([15, 41, 255]))
cases = st.fixed_dictionaries(dict(config=configs, T=st.integers(1, 6), B=st.integers(1, 2), seed=seeds))
_SMALL = dict(num_actions=3, deter=16, stoch=4, classes=4, hidden=16, embed_dim=8, pool=8, reward_bins=41)
_CONV = dict(_SMALL, **conv_fields((24, 40), 2, 2, 2))  # 12 × 20 pooled -> [4, 3, 5] after 2 stages: E = 60
EXAMPLES = (
    dict(config=_SMALL, T=6, B=2, seed=1),
    dict(config=dict(_SMALL, num_actions=1, stoch=1, classes=2, pool=4, reward_bins=255), T=1, B=1, seed=2),
    dict(config=_CONV, T=4, B=2, seed=3),
)
kl_cases = st.fixed_dictionaries(dict(
    T=st.integers(1, 6), B=st.integers(1, 2), S=st.integers(1, 4), K=st.integers(2, 4), seed=seeds,
    scale=st.sampled_from([0.5, 3.0]), free_bits=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    scales=st.sampled_from([(1.0, 1.0), (0.5, 0.1), (0.0, 1.0), (2.0, 0.0)])))
KL_EXAMPLES = (dict(T=6, B=2, S=4, K=4, seed=1, scale=3.0, free_bits=1.0, scales=(1.0, 1.0)),
               dict(T=1, B=1, S=1, K=2, seed=2, scale=0.5, free_bits=0.0, scales=(0.5, 0.1)))


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def build(impl, config: dict, seed: int, **overrides):
    """impl.WorldModel with the reference's parameters drawn from ``seed`` (LayerNorm affine ≠ (1, 0))."""
    cfg = WorldModelConfig(**{**config, **overrides})
    g = gen(seed)
    sd = Reference(cfg, g).state_dict()
    for name, p in sd.items():
        if "norm.weight" in name:
            p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
        elif "norm.bias" in name or name == "rssm.initial_h":
            p.copy_(0.2 * torch.randn(p.shape, generator=g))
    model = impl.WorldModel(cfg)
    model.load_state_dict(sd)
    return model


def make_batch(cfg: WorldModelConfig, T: int, B: int, seed: int) -> dict[str, torch.Tensor]:
    """Replay-like batch: random frames and actions, rewards of magnitude up to ~50 (symlog ≠ raw), random
    episode ends; a termination (continue 0) or truncation (continue 1) is followed by is_first."""
    g = gen(seed + 1)
    end = torch.rand(T, B, generator=g) < 0.3  # the transition out of obs t ends the episode
    terminated = end & (torch.rand(T, B, generator=g) < 0.5)
    if T >= 3:  # at least one termination and one truncation inside the window (t = 0, 1: both followed by a row)
        end[:2, 0], terminated[:2, 0] = True, torch.tensor([True, False])
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0] = torch.rand(B, generator=g) < 0.5
    is_first[1:] = end[:-1]
    values = torch.randint(0, 4, (T, B, 1, 72, 80), generator=g, dtype=torch.uint8)
    obs = packed2.pack(values)
    return dict(obs=obs, action=torch.randint(0, cfg.num_actions, (T, B), generator=g, dtype=torch.int32),
                reward=(torch.randn(T, B, generator=g) * 2).sinh().mul(5),
                is_first=is_first, **{"continue": (~terminated).float()}, final_obs=final_frames(obs, is_first, seed))


def final_frames(obs: torch.Tensor, is_first: torch.Tensor, seed: int) -> torch.Tensor:
    """The replay's final_obs [T, B, 1, 72, 20]: the next row's frame where it continues the episode, else a
    frame of its own (an episode's last frame, or the one after the window), from its own generator (the other
    keys' draws stay as they were)."""
    final = packed2.pack(torch.randint(0, 4, (*obs.shape[:3], 72, 80), generator=gen(seed + 3), dtype=torch.uint8))
    same = torch.zeros_like(is_first)
    same[:-1] = ~is_first[1:]  # row t + 1 continues row t's episode
    final[:-1][same[:-1]] = obs[1:][same[:-1]]
    return final


def features(out) -> torch.Tensor:
    return torch.cat((out.h, out.z.flatten(-2)), -1)  # [T, B, F]


# --------------------------------------------------------------------------------------------------
# KL
# --------------------------------------------------------------------------------------------------
def kl_inputs(T, B, S, K, seed, scale, **_):
    g = gen(seed)
    post = (torch.randn(T, B, S, K, generator=g) * scale).log_softmax(-1)
    prior = (torch.randn(T, B, S, K, generator=g) * scale).log_softmax(-1)
    return post, prior


def kl64(post: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    log_p, log_q = post.double().log_softmax(-1), prior.double().log_softmax(-1)
    return (log_p.exp() * (log_p - log_q)).sum((-2, -1))  # [T, B]


def total64(kl: torch.Tensor, free_bits: float, dyn_scale: float, rep_scale: float) -> torch.Tensor:
    return (dyn_scale + rep_scale) * kl.clamp_min(free_bits).mean()


def check_kl_closed_form(impl, free_bits, scales, **case):
    post, prior = kl_inputs(**case)
    out = impl.kl_loss(post, prior, free_bits, *scales)
    want = kl64(post, prior)
    inputs = dict(case=case, free_bits=free_bits, scales=scales)
    assert_close("WM-1", "dyn = KL(sg(post) ‖ prior) [T, B]", out.dyn, want, atol=TOL, rtol=TOL, **inputs)
    assert_close("WM-1", "rep = KL(post ‖ sg(prior)) [T, B]", out.rep, want, atol=TOL, rtol=TOL, **inputs)


def _grads(impl, post, prior, dyn_scale, rep_scale):
    post, prior = post.clone().requires_grad_(True), prior.clone().requires_grad_(True)
    impl.kl_loss(post, prior, 0.0, dyn_scale, rep_scale).loss.backward()
    zero = torch.zeros_like(post)
    return (zero if post.grad is None else post.grad), (zero if prior.grad is None else prior.grad)


def check_gradient_routing(impl, free_bits, scales, **case):
    post, prior = kl_inputs(**case)
    inputs = dict(case=case)
    for term, (ds, rs), trained, frozen in (("dynamics", (1.0, 0.0), "prior", "post"),
                                            ("representation", (0.0, 1.0), "post", "prior")):
        g_post, g_prior = _grads(impl, post, prior, ds, rs)
        grads = dict(post=g_post, prior=g_prior)
        if bool(grads[frozen].ne(0).any()):
            fail("WM-2", f"the {term} term (dyn_scale={ds}, rep_scale={rs}, free_bits 0) sends gradient to "
                         f"{frozen}_logits (max |∂| {grads[frozen].abs().max().item():.3g}); the seed stops it there",
                 **inputs)
        if (post - prior).abs().max() > 1e-3 and not bool(grads[trained].ne(0).any()):
            fail("WM-2", f"the {term} term gives no gradient to {trained}_logits, which it must train", **inputs)


def kl_loss64(post: torch.Tensor, prior: torch.Tensor, free_bits: float, dyn_scale: float,
               rep_scale: float) -> torch.Tensor:
    """The module docstring's L_kl in float64: dyn trains the prior only, rep the posterior only."""
    log_p, log_q = post.log_softmax(-1), prior.log_softmax(-1)
    kl = lambda lp, lq: (lp.exp() * (lp - lq)).sum((-2, -1))  # noqa: E731 - [T, B]
    dyn, rep = kl(log_p.detach(), log_q), kl(log_p, log_q.detach())
    return dyn_scale * dyn.clamp_min(free_bits).mean() + rep_scale * rep.clamp_min(free_bits).mean()


def check_kl_gradients(impl, free_bits, scales, **case):
    post, prior = kl_inputs(**case)
    scales = (scales[0] + 0.25, scales[1] + 0.5)  # unequal and non-zero: swapped sides differ
    got_in = dict(post_logits=post.clone().requires_grad_(True), prior_logits=prior.clone().requires_grad_(True))
    want_in = {k: v.detach().double().requires_grad_(True) for k, v in got_in.items()}
    got = named_grads(impl.kl_loss(*got_in.values(), free_bits, *scales).loss, got_in)
    want = named_grads(kl_loss64(*want_in.values(), free_bits, *scales), want_in)
    assert_grads_close("WM-14", f"kl_loss (free_bits={free_bits}, dyn_scale={scales[0]}, rep_scale={scales[1]}) vs "
                                "the float64 closed form", got, want, case=case)


def mixed_kl_inputs(T, B, S, K, seed, scale, free_bits, **_):
    """post/prior whose KL per (t, b) alternates: 0 (equal logits) on even rows, > free_bits on odd ones."""
    post, prior = kl_inputs(T, B, S, K, seed, scale)
    far = (torch.arange(T * B).reshape(T, B) % 2 == 1)[..., None, None]  # [T, B, 1, 1]
    peaked = torch.zeros(T, B, S, K)
    peaked[..., 0] = 4 * (free_bits + 1)  # the posterior sure of class 0, the prior not
    post = torch.where(far, peaked.log_softmax(-1), post)
    prior = torch.where(far, (-peaked).log_softmax(-1), post)
    return post, prior


def check_free_bits(impl, free_bits, scales, **case):
    post, prior = mixed_kl_inputs(free_bits=free_bits, **case)
    kl = kl64(post, prior)
    got = impl.kl_loss(post, prior, free_bits, *scales).loss
    want = total64(kl, free_bits, *scales)
    wrong_order = (scales[0] + scales[1]) * kl.mean().clamp_min(free_bits)
    inputs = dict(case=case, free_bits=free_bits, scales=scales, kl=kl)
    if not torch.isclose(want, wrong_order, rtol=1e-4) and torch.isclose(got.double(), wrong_order, rtol=1e-5):
        fail("WM-3", f"loss {got.item():.6g} = scales·max(fb, mean(KL)) = {wrong_order.item():.6g}: free bits "
                     f"clamped after the mean; expected scales·mean(max(fb, KL)) = {want.item():.6g}", **inputs)
    assert_close("WM-3", "loss = dyn_scale·mean(max(fb, dyn)) + rep_scale·mean(max(fb, rep))", got, want,
                 atol=TOL, rtol=TOL, **inputs)


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------
def run_loss(impl, config, T, B, seed, **overrides):
    model = build(impl, config, seed, **overrides)
    batch = make_batch(model.config, T, B, seed)
    loss, metrics, out = model.world_model_loss(batch, gen(seed + 2))
    return model, batch, loss, metrics, out


def check_totals(impl, **case):
    d = WorldModelConfig(num_actions=1)
    defaults = dict(dyn_scale=d.dyn_scale, rep_scale=d.rep_scale, free_bits=d.free_bits)
    if defaults != dict(dyn_scale=1.0, rep_scale=1.0, free_bits=1.0) or PAPER_KL_SCALES != dict(dyn_scale=0.5,
                                                                                                rep_scale=0.1):
        fail("WM-4", f"defaults {defaults}, paper preset {PAPER_KL_SCALES}: expected the seed's 1, 1, free bits 1 "
                     "and the preset 0.5 / 0.1")
    model, batch, loss, metrics, out = run_loss(impl, **case, **PAPER_KL_SCALES, free_bits=0.5)
    c = model.config
    parts = sum(metrics[k].double() for k in ("recon_loss", "reward_loss", "continue_loss", "kl_loss"))
    assert_close("WM-4", "loss vs recon + reward + continue + kl metrics", loss.detach(), parts, atol=TOL,
                 rtol=TOL, case=case)
    graphs = [k for k, v in metrics.items() if isinstance(v, torch.Tensor) and v.requires_grad]
    if graphs:
        fail("WM-4", f"metrics {graphs} carry a graph (expected every metric detached)", case=case)
    kl = kl64(out.post_logits.detach(), out.prior_logits.detach())
    assert_close("WM-4", f"kl_loss metric vs 0.5·mean(max(0.5, dyn)) + 0.1·mean(max(0.5, rep)) (config "
                         f"dyn_scale={c.dyn_scale}, rep_scale={c.rep_scale})", metrics["kl_loss"],
                 total64(kl, 0.5, c.dyn_scale, c.rep_scale), atol=TOL, rtol=TOL, case=case)


def check_init(impl, config, T, B, seed):
    """WM-13."""
    cfg = WorldModelConfig(**config)
    torch.manual_seed(seed)
    rng = torch.random.get_rng_state()
    first = impl.WorldModel(cfg, gen(seed)).state_dict()
    if not torch.equal(torch.random.get_rng_state(), rng):
        fail("WM-13", "building WorldModel advanced the global RNG (expected only the generator drawn from)",
             config=config, seed=seed)
    torch.manual_seed(seed + 1)  # another global state: an init that reads it changes now
    again = impl.WorldModel(cfg, gen(seed)).state_dict()
    other = impl.WorldModel(cfg, gen(seed + 1)).state_dict()
    changed = [k for k in first if not torch.equal(first[k], again[k])]
    if changed:
        fail("WM-13", f"the same generator seed gave different parameters {changed[:3]} (the global RNG's state "
                      f"leaks into the initialization)", config=config, seed=seed)
    if all(torch.equal(first[k], other[k]) for k in first):
        fail("WM-13", "generators of seeds s and s + 1 gave identical parameters (the generator is ignored)",
             config=config, seed=seed)


def check_continue_target(impl, **case):
    model, batch, loss, metrics, out = run_loss(impl, **case)
    with torch.no_grad():
        _, _, cont_logits = model.heads(features(out))
    # the seed's target: 1 unless the transition terminated; a truncation (reset, continue 1) keeps 1
    target = batch["continue"].double()
    want = F.binary_cross_entropy_with_logits(cont_logits.double(), target)
    truncated = batch["is_first"][1:] & (batch["continue"][:-1] == 1)
    assert_close("WM-5", "continue_loss vs mean BCE(cont_logits, continue) (continue 1 on truncation, 0 on "
                         "termination)", metrics["continue_loss"], want, atol=TOL, rtol=TOL, case=case,
                 continue_=batch["continue"], truncated_rows=truncated)


def check_reward_loss(impl, **case):
    model, batch, loss, metrics, out = run_loss(impl, **case)
    with torch.no_grad():
        _, reward_logits, _ = model.heads(features(out))
    c = model.config
    want = -twohot.log_prob(reward_logits.double(), batch["reward"].double(), c.reward_bins, c.reward_low,
                            c.reward_high, torch.float32).mean()
    assert_close("WM-6", "reward_loss vs −mean log_prob of the two-hot of symlog(reward)", metrics["reward_loss"],
                 want, atol=TOL, rtol=TOL, case=case, reward=batch["reward"])


def check_next_heads(impl, **case):
    model, batch, loss, metrics, out = run_loss(impl, **case, head_input="next")
    c, action = model.config, batch["action"]
    g = gen(case["seed"] + 2)  # world_model_loss's generator: the scan's draws, then the prior step's
    with torch.no_grad():
        post = model.rssm.observe(model.embed(batch["obs"]), action, batch["is_first"], g)
        f_next = model.next_features(post, action, g)  # [T, B, F]
        reward_logits, cont_logits = model.reward_head(f_next), model.continue_head(f_next).squeeze(-1)
    T, B = action.shape
    _, h, z = model.rssm.img_step(post.h.flatten(0, 1), post.z.flatten(0, 1), action.flatten(), gen(0))
    if f_next.shape != (T, B, c.feature_dim) or not torch.equal(f_next[..., :c.deter], h.reshape(T, B, -1)):
        fail("WM-12", f"next_features: h⁺ is not img_step's h from (h_t, z_t, action_t) (case {case})")
    want_reward = -twohot.log_prob(reward_logits.double(), batch["reward"].double(), c.reward_bins, c.reward_low,
                                   c.reward_high, torch.float32).mean()
    want_cont = F.binary_cross_entropy_with_logits(cont_logits.double(), batch["continue"].double())
    assert_close("WM-12", "reward_loss vs −mean log_prob(reward_head(f⁺))", metrics["reward_loss"], want_reward,
                 atol=TOL, rtol=TOL, case=case)
    assert_close("WM-12", "continue_loss vs mean BCE(cont_head(f⁺), continue)", metrics["continue_loss"], want_cont,
                 atol=TOL, rtol=TOL, case=case)
    recon = (model.decoder(features(out)) - model.frames(batch["obs"])).square().sum(-1).mean()
    assert_close("WM-12", "recon_loss vs the decoder on f_t", metrics["recon_loss"], recon.detach(), atol=TOL,
                 rtol=TOL, case=case)
    if c.num_actions > 1:
        other = dict(batch, action=action.clone())
        other["action"][-1] = (action[-1] + 1) % c.num_actions
        _, m2, _ = model.world_model_loss(other, gen(case["seed"] + 2))
        for key in ("reward_loss", "continue_loss"):
            if torch.equal(m2[key], metrics[key]):
                fail("WM-12", f"{key} did not change with the last row's action: the heads do not see the "
                              f"transition's action (case {case})")


def posterior_head_losses(model, batch: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reward_loss, continue_loss) in float64 on f° rebuilt from the model's RSSM and encoder with
    world_model_loss's generator draws (the scan's, then the arrival step's), and h⁺ [T, B, H]."""
    c, action = model.config, batch["action"]
    T, B = action.shape
    g = gen(seed + 2)
    with torch.no_grad():
        post = model.rssm.observe(model.embed(batch["obs"]), action, batch["is_first"], g)
        taken = F.one_hot(action.long().flatten(), c.num_actions).float()  # [T·B, A]
        none = torch.zeros(1, T * B, dtype=torch.bool)
        step = model.rssm.observe(model.embed(batch["final_obs"].flatten(0, 1).unsqueeze(0)), none.long(), none, g,
                                  state=RSSMState(post.h.flatten(0, 1), post.z.flatten(0, 1), taken))
        f = torch.cat((step.h[0], step.z[0].flatten(-2)), -1).reshape(T, B, -1)  # f° [T, B, F]
        reward_logits, cont_logits = model.reward_head(f), model.continue_head(f).squeeze(-1)
    reward = -twohot.log_prob(reward_logits.double(), batch["reward"].double(), c.reward_bins, c.reward_low,
                              c.reward_high, torch.float32).mean()
    return reward, F.binary_cross_entropy_with_logits(cont_logits.double(), batch["continue"].double()), f[..., :c.deter]


def check_posterior_heads(impl, **case):
    model, batch, loss, metrics, out = run_loss(impl, **case, head_input="posterior")
    other = dict(batch, final_obs=batch["final_obs"].clone())
    other["final_obs"][-1] = ~other["final_obs"][-1]  # another last arrival frame (every 2-bit code changes)
    _, m2, _ = model.world_model_loss(other, gen(case["seed"] + 2))
    for which, (b, m) in {"": (batch, metrics), " (the last row's final_obs changed)": (other, m2)}.items():
        want_reward, want_cont, h_next = posterior_head_losses(model, b, case["seed"])
        assert_close("WM-15", f"reward_loss vs −mean log_prob(reward_head(f°)){which}", m["reward_loss"], want_reward,
                     atol=TOL, rtol=TOL, case=case)
        assert_close("WM-15", f"continue_loss vs mean BCE(cont_head(f°), continue){which}", m["continue_loss"],
                     want_cont, atol=TOL, rtol=TOL, case=case)
    continues = ~batch["is_first"][1:]  # [T − 1, B]: row t + 1 continues row t's episode
    assert_close("WM-15", "h⁺_t vs h_(t+1) where row t + 1 continues the episode (another batch size: float32 "
                 "rounding)", h_next[:-1][continues], out.h[1:][continues].detach(), atol=TOL, rtol=TOL, case=case)
    for key in ("recon_loss", "kl_loss", "dyn_kl", "rep_kl"):
        if not torch.equal(m2[key], metrics[key]):
            fail("WM-15", f"{key} changed with only the last row's final_obs changed: only the heads read the frame "
                          f"a step arrives at (case {case})")
    expect_rejection("WM-15", lambda: model.world_model_loss(_bad(batch, "final_obs", None), gen(0)),
                     names=["final_obs"], mentions=[], what="a batch without final_obs (head_input 'posterior')")


def _ln64(x, sd, name, eps=1e-3):
    return F.layer_norm(x, x.shape[-1:], sd[f"{name}.weight"].double(), sd[f"{name}.bias"].double(), eps)


def embed64(sd: dict, cfg: WorldModelConfig, obs: torch.Tensor) -> torch.Tensor:
    values = packed2.unpack(obs).double() / 3  # [T, B, 1, 72, 80]
    T, B = obs.shape[:2]
    (top, left), (fh, fw), (h, w) = cfg.crop_offset, cfg.frame, cfg.pooled_shape
    crop = values[..., 0, top:top + fh, left:left + fw]  # [T, B, fh, fw]
    x = crop.reshape(T, B, h, cfg.pool, w, cfg.pool).mean((3, 5))  # [T, B, h, w]
    if cfg.encoder == "conv":
        return conv64(sd, cfg, x.reshape(T * B, 1, h, w)).reshape(T, B, -1)
    y = F.silu(_ln64(x.reshape(T, B, h * w) @ sd["encoder.inp.weight"].double().T, sd, "encoder.norm"))
    return y @ sd["encoder.out.weight"].double().T + sd["encoder.out.bias"].double()


def conv64(sd: dict, cfg: WorldModelConfig, x: torch.Tensor) -> torch.Tensor:
    """sheeprl CNNEncoder in float64: stages × silu(LN over channels(conv k4 s2 p1 without bias)), flattened."""
    for i in range(cfg.cnn_stages):
        y = F.conv2d(x, sd[f"encoder.convs.{i}.weight"].double(), stride=2, padding=1)  # [N, C_i, h/2, w/2]
        x = F.silu(_ln64(y.movedim(1, -1), sd, f"encoder.norms.{i}").movedim(-1, 1))
    return x.flatten(1)


def _unpack_impls_available() -> list[str]:
    names = []
    for name, module in UNPACK_MODULES.items():
        try:
            importlib.import_module(module)
        except ImportError:  # Triton without CUDA nor interpreter, Warp not installed: not available here
            continue
        names.append(name)
    return names


def check_encoder(impl, config, T, B, seed):
    model = build(impl, config, seed)
    obs = make_batch(model.config, T, B, seed)["obs"]
    got = model.embed(obs)
    assert_close("WM-7", f"embed(obs) vs float64 closed form (unpack v/3, crop, avg-pool, {model.config.encoder})", got,
                 embed64(model.state_dict(), model.config, obs), atol=TOL, rtol=TOL, T=T, B=B, seed=seed)
    for name in _unpack_impls_available():
        other = impl.WorldModel(dataclasses.replace(model.config, unpack_impl=name))
        other.load_state_dict(model.state_dict())
        assert_identical("WM-7", f"embed(obs) with unpack_impl={name!r} vs {model.config.unpack_impl!r}",
                         other.embed(obs), got, T=T, B=B, seed=seed)


def check_gradients(impl, **case):
    model, batch, loss, metrics, out = run_loss(impl, **case, free_bits=0.0)
    loss.backward()
    for name, p in model.named_parameters():
        problem = ("None" if p.grad is None else "non-finite" if not bool(p.grad.isfinite().all())
                   else "all zero" if not bool(p.grad.ne(0).any()) else "")
        if problem:
            fail("WM-8", f"parameter {name} {tuple(p.shape)} has gradient {problem}", case=case)


OVERFIT_CASES = (dict(config=_SMALL, T=4, B=2, seed=3), dict(config=_CONV, T=4, B=2, seed=3))


def _overfit(impl, case: dict) -> list[torch.Tensor]:
    model, batch, *_ = run_loss(impl, **case)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(OVERFIT_STEPS + 1):
        opt.zero_grad()
        loss, metrics, _ = model.world_model_loss(batch, gen(7))
        losses.append(metrics["recon_loss"])
        loss.backward()
        opt.step()
    return losses


def check_overfit(impl):
    for case in OVERFIT_CASES:
        first, second = _overfit(impl, case), _overfit(impl, case)
        start, end = first[0].item(), first[-1].item()
        if not end * OVERFIT_FACTOR <= start:
            fail("WM-9", f"reconstruction loss {start:.4g} -> {end:.4g} after {OVERFIT_STEPS} Adam steps: fell "
                         f"{start / end:.3g}×, expected >= {OVERFIT_FACTOR}×", case=case)
        assert_identical("WM-9", "recon losses of a second identical run", torch.stack(second),
                         torch.stack(first), case=case)


def check_parity(impl, **case):
    _, _, loss, metrics, _ = run_loss(impl, **case)
    _, _, ref_loss, ref_metrics, _ = run_loss(_REFERENCE, **case)
    for name in METRICS:
        assert_close("WM-10", f"metric {name} vs the reference", metrics[name], ref_metrics[name], atol=PARITY_TOL,
                     rtol=PARITY_TOL, case=case)


def _loss_grads(impl, case: dict) -> dict[str, torch.Tensor]:
    model, _, loss, _, _ = run_loss(impl, **case, **PAPER_KL_SCALES, free_bits=0.0)
    return named_grads(loss, dict(model.named_parameters()))


def check_loss_gradients(impl, **case):
    assert_grads_close("WM-14", "world_model_loss (dyn_scale 0.5, rep_scale 0.1, free bits 0) vs the reference",
                       _loss_grads(impl, case), _loss_grads(_REFERENCE, case), atol=PARITY_TOL, rtol=PARITY_TOL,
                       case=case)


class _ReferenceImpl:
    WorldModel = Reference


_REFERENCE = _ReferenceImpl()


# --------------------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------------------
def _bad(batch: dict, key: str, value) -> dict:
    out = dict(batch)
    if value is None:
        del out[key]
    else:
        out[key] = value
    return out


BAD_INPUTS = ("obs float", "obs unpacked width", "action float", "action shape", "action id", "continue 0.5",
              "missing continue", "kl shapes", "kl free_bits", "config dict")


def check_rejects(impl, bad, **case):
    model = build(impl, case["config"], case["seed"])
    T, B = case["T"], case["B"]
    batch = make_batch(model.config, T, B, case["seed"])
    g = gen(0)
    post = torch.zeros(T, B, 2, 3)
    loss = lambda b: lambda: model.world_model_loss(b, g)  # noqa: E731
    table = {
        "obs float": (loss(_bad(batch, "obs", batch["obs"].float())), ["obs"], ["torch.uint8", "float32"]),
        "obs unpacked width": (loss(_bad(batch, "obs", torch.zeros(T, B, 1, 72, 80, dtype=torch.uint8))),
                               ["obs"], ["72, 20", "80"]),
        "action float": (loss(_bad(batch, "action", batch["action"].float())), ["action"], ["float32"]),
        "action shape": (loss(_bad(batch, "action", batch["action"][:, :1].repeat(1, B + 1))), ["action"],
                         [str((T, B)), str((T, B + 1))]),
        "action id": (loss(_bad(batch, "action", batch["action"] + model.config.num_actions)), ["action"],
                      [f"[0, {model.config.num_actions})"]),
        "continue 0.5": (loss(_bad(batch, "continue", torch.full((T, B), 0.5))), ["continue"], ["0.5"]),
        "missing continue": (loss(_bad(batch, "continue", None)), ["batch", "continue"], []),
        "kl shapes": (lambda: impl.kl_loss(post, torch.zeros(T, B, 2, 4)), ["prior_logits"],
                      [str((T, B, 2, 4)), str((T, B, 2, 3))]),
        "kl free_bits": (lambda: impl.kl_loss(post, post, -1.0), ["free_bits"], ["-1.0"]),
        "config dict": (lambda: impl.WorldModel(dataclasses.asdict(model.config), gen(0)), ["config"],
                        ["WorldModelConfig", "dict"]),
    }
    call, names, mentions = table[bad]
    expect_rejection("WM-11", call, names=names, mentions=mentions, what=f"bad input ({bad})")


PROPERTIES = (
    Property("WM-1", check_kl_closed_form, kl_cases, KL_EXAMPLES, ("kl_loss",)),
    Property("WM-2", check_gradient_routing, kl_cases, KL_EXAMPLES, ("kl_loss",)),
    Property("WM-3", check_free_bits, kl_cases, KL_EXAMPLES, ("kl_loss",)),
    Property("WM-4", check_totals, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-5", check_continue_target, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-6", check_reward_loss, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-7", check_encoder, cases, EXAMPLES, ("WorldModel",), max_examples=3),
    Property("WM-8", check_gradients, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-9", check_overfit, None, (), ("WorldModel",)),
    Property("WM-10", check_parity, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-12", check_next_heads, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-13", check_init, cases, EXAMPLES, ("WorldModel",), max_examples=3),
    Property("WM-15", check_posterior_heads, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-14", check_kl_gradients, kl_cases, KL_EXAMPLES, ("kl_loss",)),
    Property("WM-14", check_loss_gradients, cases, EXAMPLES, ("WorldModel",), max_examples=5),
    Property("WM-11", check_rejects,
             st.builds(lambda c, bad: dict(c, bad=bad), cases, st.sampled_from(BAD_INPUTS)),
             tuple(dict(EXAMPLES[0], bad=b) for b in BAD_INPUTS), INTERFACE, max_examples=len(BAD_INPUTS)),
)

CHANGES = (
    Change("1.0", "first versioned release"),
    Change("1.1", "head_input 'posterior': the heads read the posterior of the frame a step arrives at",
           added=("WM-15",)),
)

CONTRACT = Contract("world_model", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, changes=CHANGES)
