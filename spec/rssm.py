"""Contract ``rssm``: DreamerV3's recurrent state-space model, time-major, with is_first resets inside the scan.

Source: the Dreamer plan §3 M3 (RSSM + scan loop with is_first reset masking, GRU float32 internals under AMP,
ST one-hot sampling with an explicit generator), §2.3 (replay layout), §5 risks 1 and 4. Network and
conventions of sheeprl 0.8.4 (``algos/dreamer_v3/agent.py`` RSSM; ``models/models.py`` LayerNormGRUCell,
read in the 0.8.4 wheel): parameter layout, sizes and defaults in rlspec.contracts.rssm.

One observe step t, with (h_{−1}, z_{−1}, a_{−1}) the state passed in (default: the initial state)
------------------------------------------------------------------------------------------------------
    (h, z, a) = (h0, z0, 0)                          if is_first[t]       (reset; previous action zeroed)
              = (h_{t−1}, z_{t−1}, onehot(action[t−1]))  otherwise         (action[t]: taken at obs t, §2.3)
    x   = silu(LN(W_in [z; a]))                                                    [B, hidden]
    g   = LN(W_gru [h; x]) = (r, c, u)                                             [B, 3H]  (float32)
    h_t = σ(u − 1)·tanh(σ(r)·c) + (1 − σ(u − 1))·h                                 [B, H]   (float32)
    prior_t = unimix(W_po silu(LN(W_ph h_t)) + b_po)                               [B, S, K]
    post_t  = unimix(W_qo silu(LN(W_qh [h_t; e_t])) + b_qo)                         [B, S, K]
    z_t = onehot(#{k < K−1 : cdf_k(softmax(post_t)) < u_t}) + (p − sg(p)),  u_t = rand((B, S), generator)
with unimix(l) = log((1 − m)·softmax(l) + m/K), every LayerNorm eps 1e-3, h0 = tanh(initial_h), and
z0 = onehot(argmax prior(h0)) ('learned', sheeprl) or 0 ('zeros', danijar 2025, where also W = 0).
img_step(h, z, action, generator) is the same step without reset or posterior: the prior is sampled
(one more rand((B, S)) from the generator). Priors are not sampled inside observe.

Differences from sheeprl (the spec's choice, converted explicitly by a golden bridge): sheeprl's batch
carries the *previous* action at row t (its replay shifts actions by one and inserts a zero at t = 0); the
spec takes the seed's layout (the action taken at obs t) and shifts inside. sheeprl resets with
``(1 − f)·x + f·x0`` (a NaN before a reset survives as 0·NaN); the spec requires a select: nothing before
a reset reaches the rows after it, not even a NaN or an inf (RSSM-16). sheeprl samples from the global
RNG; the spec pins the inverse-CDF sampler to the caller's generator.

Precision policy (seed §3 M3, mandatory): under torch.autocast (bf16 on CPU, bf16/fp16 on CUDA) the GRU
gates and the state update run in float32 and h, z and the returned state are float32; logits come back
float32. Tolerance vs the float32 run (stated for these tiny sizes, bf16 eps 2^-8): h within 0.05 and the
latent probabilities softmax(logits) within 0.1, compared per row up to the first sample that differs (a
discrete sample may flip). Measured worst cases over 40 seeds at H 32, hidden 16, S = K = 4, T 8, B 3: h
0.009, probabilities 0.019 with the latent heads at scale 1–8, 0.087 at scale 50 (raw logits ~±50 rounded
to bf16 in the heads, which autocast runs in bf16 by design).

Tolerances of parity and closed form: 1e-5 absolute + 1e-5 relative (float32 rounding of split matmuls).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from rlspec.contracts.rssm import RSSMConfig, RSSMState
from rlspec.reference.rssm import RSSM as Reference  # the oracle of RSSM-2
from rlspec.spec.core import (
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
    "RSSM-1": "observe returns prior/post logits [T, B, S, K], h [T, B, H], z [T, B, S, K] (float32) and the "
              "final state (h [B, H], z [B, S, K], action [B, A]); img_step returns [B, S, K], [B, H], [B, S, K]",
    "RSSM-2": "parity with the reference loaded with the same state_dict: observe and img_step logits, h and z "
              "within 1e-5 (each row compared up to its first differing sample)",
    "RSSM-3": "episodes isolated: in a row, everything from a reset on (every reset of the window, t = 0 "
              "included) is bit-identical whatever came before it (embeddings, actions, resets, carried state)",
    "RSSM-4": "every step follows the seed formula in float64 from the state_dict (LayerNorm GRU with update "
              "gate σ(u − 1), LN eps, unimix; reset to h0 = tanh(W), z0, action 0 at is_first)",
    "RSSM-5": "reset at t = 0: from any carried state, is_first[0] set everywhere gives the run from the "
              "initial state (state=None), bit for bit",
    "RSSM-6": "the previous action is zeroed at a reset: changing only action[t−1] leaves every row from a "
              "reset at t on bit-identical",
    "RSSM-7": "action alignment (seed §2.3, action[t] taken at obs t): without resets, h_t does not depend on "
              "action[t] and does depend on action[t−1]",
    "RSSM-8": "unimix: every class probability softmax(logits) of priors and posteriors (observe, img_step) "
              "is >= unimix/K",
    "RSSM-9": "straight-through sample: z is exactly one-hot forward, and ∂Σw·z equals ∂Σw·softmax(post_logits) "
              "(w.r.t. embed and every parameter)",
    "RSSM-10": "samples come from the generator: z_t = onehot(#{k < K−1: cdf_k < u_t}) of softmax(post_t), "
               "u_t = rand((B, S), generator) once per observe step, then once per img_step for its prior",
    "RSSM-11": "no global RNG: the same generator state gives bit-identical outputs however the global RNG "
               "was seeded",
    "RSSM-12": "precision policy: under autocast(cpu, bfloat16) h, z and the state are float32, h carries "
               "float32 precision (the GRU update is not rounded to bf16), outputs are finite and within "
               "0.05 (h) / 0.1 (probabilities softmax(logits)) of the float32 run",
    "RSSM-13": "carried state: observe over [0, T) equals observe over [0, t) then [t, T) from the returned "
               "state with the same generator (1e-5)",
    "RSSM-14": "bad inputs are rejected naming the argument, the expected and the actual value (shapes, "
               "dtypes, action ids outside [0, A), a missing generator, a state of the wrong shape)",
    "RSSM-15": "gradients match the reference's: ∂ of a fixed weighted sum of observe's prior/post logits, h and z "
               "(straight-through) with respect to embed and every parameter (by state_dict name), up to the first "
               "step where the samples differ (a backward that drops a path is caught, not only wrong values)",
    "RSSM-16": "non-finite history: NaN/±inf embeddings before a reset and a NaN/±inf carried state (h, z, action) "
               "leave every row from the reset on finite and bit-identical to the run with a finite history (a "
               "reset by multiplication, (1 − f)·x + f·x0, lets 0·NaN through)",
}

CATEGORIES = by_category(
    maths=("RSSM-1", "RSSM-2", "RSSM-3", "RSSM-4", "RSSM-5", "RSSM-6", "RSSM-7", "RSSM-8", "RSSM-9", "RSSM-10",
           "RSSM-11", "RSSM-13", "RSSM-15"),
    robustness=("RSSM-12", "RSSM-16"),
    validation=("RSSM-14",),
)
RATIONALE = {
    "RSSM-12": "The recurrence is precision-free. Under bf16 autocast a GRU state stored in bf16 keeps ~3 "
               "significant digits, and the rounding compounds over a sequence until the state drifts; the kit "
               "asks for the state (h, z) in float32 with the update computed at float32 precision, as "
               "DreamerV3 implementations do.",
    "RSSM-16": "The literal reset (1 − f)·x + f·x0 multiplies the pre-reset state by 0: IEEE 754 gives 0·NaN = "
               "NaN and 0·inf = NaN, so a diverged step before an episode start poisons every row after it. The"
               " kit asks for a select at the reset, so that an episode never depends on what came before it, "
               "even a NaN.",
}

INTERFACE = ("RSSM",)
"""
RSSM(config: RSSMConfig)        an nn.Module whose state_dict has the layout of contracts.rssm.RSSMParameters
  .config
  .initial_state(batch_size) -> RSSMState(h [B, H], z [B, S, K], action [B, A])
  .observe(embed [T, B, E], action [T, B] int ids, is_first [T, B] bool, generator, state=None)
      -> RSSMOutput(prior_logits [T, B, S, K], post_logits [T, B, S, K], h [T, B, H], z [T, B, S, K], state)
  .img_step(h [B, H], z [B, S, K], action [B] int ids, generator) -> (prior_logits [B, S, K], h, z)
"""

TOL = 1e-5
AUTOCAST_TOL_H, AUTOCAST_TOL_PROBS = 0.05, 0.1


# --------------------------------------------------------------------------------------------------
# Strategies: tiny sizes (H <= 32, S, K <= 4, T <= 8, B <= 3); parameters drawn from a seed
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
configs = st.builds(
    lambda e, a, h, s, k, hid, m, init: dict(embed_dim=e, num_actions=a, deter=h, stoch=s, classes=k, hidden=hid,
                                             unimix=m, initial=init),
    st.integers(1, 6), st.integers(1, 4), st.sampled_from([8, 16, 32]), st.integers(1, 4), st.integers(2, 4),
    st.sampled_from([4, 8, 16]), st.sampled_from([0.01, 0.01, 0.1, 0.0]), st.sampled_from(["learned", "zeros"]))
cases = st.fixed_dictionaries(dict(
    config=configs, T=st.integers(1, 8), B=st.integers(1, 3), seed=seeds,
    scale=st.sampled_from([1.0, 8.0]),  # 8: peaked latent distributions (where unimix matters)
    resets=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2)), max_size=4),
))
_SMALL = dict(embed_dim=3, num_actions=3, deter=16, stoch=4, classes=4, hidden=8, unimix=0.01, initial="learned")
EXAMPLES = (
    dict(config=_SMALL, T=8, B=3, seed=1, scale=1.0, resets=[(1, 0), (7, 1), (3, 2), (5, 2)]),  # t=1, T−1, two in a row
    dict(config=dict(_SMALL, initial="zeros"), T=6, B=2, seed=2, scale=8.0, resets=[(0, 0), (2, 1), (4, 1)]),
    dict(config=dict(_SMALL, unimix=0.1), T=8, B=3, seed=3, scale=50.0, resets=[]),  # nearly one-hot raw probs
    dict(config=dict(_SMALL, num_actions=1, stoch=1, classes=2), T=1, B=1, seed=4, scale=1.0, resets=[(0, 0)]),
    dict(config=dict(_SMALL, unimix=0.0), T=5, B=3, seed=5, scale=8.0, resets=[(2, 1)]),  # no mixture: log_softmax
)


def make_config(config: dict) -> RSSMConfig:
    return RSSMConfig(**config)


def random_state_dict(cfg: RSSMConfig, seed: int, scale: float) -> dict[str, torch.Tensor]:
    """Parameters of the shared layout drawn from ``seed``: LayerNorm affine ≠ (1, 0), a non-zero learned W
    of h0 and the latent heads scaled by ``scale``."""
    g = torch.Generator().manual_seed(seed)
    sd = Reference(cfg, g).state_dict()
    for name, p in sd.items():
        if "norm.weight" in name:
            p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
        elif "norm.bias" in name:
            p.copy_(0.2 * torch.randn(p.shape, generator=g))
        elif name.endswith("_out.weight"):
            p.mul_(scale)
    if cfg.initial == "learned":
        sd["initial_h"].copy_(torch.randn(cfg.deter, generator=g))
    return sd


def build(cls, cfg: RSSMConfig, sd: dict) -> torch.nn.Module:
    model = cls(cfg)
    model.load_state_dict(sd)
    return model


def make_inputs(cfg: RSSMConfig, T: int, B: int, seed: int, resets) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """embed [T, B, E] float32, action [T, B] int64, is_first [T, B] bool (True at the (t mod T, b mod B))."""
    g = torch.Generator().manual_seed(seed + 1)
    embed = torch.randn(T, B, cfg.embed_dim, generator=g)
    action = torch.randint(0, cfg.num_actions, (T, B), generator=g)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    for t, b in resets:
        is_first[t % T, b % B] = True
    return embed, action, is_first


def random_state(cfg: RSSMConfig, B: int, seed: int) -> RSSMState:
    g = torch.Generator().manual_seed(seed + 2)
    z = F.one_hot(torch.randint(0, cfg.classes, (B, cfg.stoch), generator=g), cfg.classes).float()
    a = F.one_hot(torch.randint(0, cfg.num_actions, (B,), generator=g), cfg.num_actions).float()
    return RSSMState(torch.randn(B, cfg.deter, generator=g).tanh(), z, a)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed + 3)


class Setup:
    """A case made concrete: config, parameters, inputs, and the implementation's model."""

    def __init__(self, impl, config, T, B, seed, scale, resets):
        self.cfg = make_config(config)
        self.sd = random_state_dict(self.cfg, seed, scale)
        self.model = build(impl.RSSM, self.cfg, self.sd)
        self.embed, self.action, self.is_first = make_inputs(self.cfg, T, B, seed, resets)
        self.T, self.B, self.seed = T, B, seed

    def observe(self, embed=None, action=None, is_first=None, state=None, generator=None, model=None):
        with torch.no_grad():
            return (model or self.model).observe(
                self.embed if embed is None else embed, self.action if action is None else action,
                self.is_first if is_first is None else is_first,
                gen(self.seed) if generator is None else generator, state)

    def inputs(self, **kw):
        return dict(config=self.cfg, T=self.T, B=self.B, is_first=self.is_first, **kw)


def _flips(z_got: torch.Tensor, z_want: torch.Tensor) -> torch.Tensor:
    """[B]: first t where the samples differ (T if never)."""
    T = z_got.shape[0]
    differ = (z_got.detach().argmax(-1) != z_want.detach().argmax(-1)).flatten(2).any(-1)  # [T, B]
    t = torch.arange(T, device=differ.device).unsqueeze(-1).expand_as(differ)
    return torch.where(differ, t, T).min(0).values


def _rows_kept(keep: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """[T, B] mask broadcast over the trailing dims of ``like``."""
    return keep.reshape(*keep.shape, *([1] * (like.dim() - 2)))


def close_until_flip(clause: str, what: str, got, want, *, atol: float, rtol: float, **inputs) -> None:
    """Compare observe outputs row by row up to the first sample that differs (logits and h of that step
    included; z and everything after it not)."""
    first = _flips(got.z, want.z)  # [B]
    t = torch.arange(got.h.shape[0], device=first.device).unsqueeze(-1)  # [T, 1]
    for name, tol in (("prior_logits", atol), ("post_logits", atol), ("h", atol)):
        g, w = getattr(got, name).detach().double(), getattr(want, name).detach().double()
        keep = _rows_kept(t <= first, g)
        assert_close(clause, f"{what} {name}", torch.where(keep, g, w), w, atol=tol, rtol=rtol, **inputs)
    g, w = got.z.detach(), want.z.detach()
    assert_close(clause, f"{what} z", torch.where(_rows_kept(t < first, g), g, w), w, atol=0.0, **inputs)


def _identical_from(clause: str, what: str, got, want, t0: int, b: int, **inputs) -> None:
    for name in ("prior_logits", "post_logits", "h", "z"):
        assert_identical(clause, f"{what}: {name}[{t0}:, {b}]", getattr(got, name)[t0:, b],
                         getattr(want, name)[t0:, b], **inputs)


# --------------------------------------------------------------------------------------------------
# Closed form (float64, from the state_dict): the oracle of RSSM-4
# --------------------------------------------------------------------------------------------------
def _ln(x, sd, name, eps):
    return F.layer_norm(x, x.shape[-1:], sd[f"{name}.weight"].double(), sd[f"{name}.bias"].double(), eps)


def _latent64(raw, cfg):
    probs = raw.unflatten(-1, (cfg.stoch, cfg.classes)).softmax(-1)
    return torch.log((1 - cfg.unimix) * probs + cfg.unimix / cfg.classes)


def closed_form_step(sd, cfg: RSSMConfig, h, z, a, e):
    """One step in float64: (h_t [B, H], prior [B, S, K], post [B, S, K]) from (h, z, a) and e_t."""
    sd = {k: v.double() for k, v in sd.items()}
    eps = cfg.ln_eps
    x = F.silu(_ln(torch.cat((z.flatten(-2), a), -1) @ sd["img_in.weight"].T, sd, "img_in_norm", eps))
    r, c, u = _ln(torch.cat((h, x), -1) @ sd["gru.weight"].T, sd, "gru_norm", eps).chunk(3, -1)
    upd = torch.sigmoid(u - 1)
    h_t = upd * torch.tanh(torch.sigmoid(r) * c) + (1 - upd) * h
    prior = _latent64(F.silu(_ln(h_t @ sd["prior_hidden.weight"].T, sd, "prior_norm", eps)) @ sd["prior_out.weight"].T
                      + sd["prior_out.bias"], cfg)
    post_in = torch.cat((h_t, e), -1) @ sd["post_hidden.weight"].T
    post = _latent64(F.silu(_ln(post_in, sd, "post_norm", eps)) @ sd["post_out.weight"].T + sd["post_out.bias"], cfg)
    return h_t, prior, post


def closed_form_initial(sd, cfg: RSSMConfig, B: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(h0 [B, H], the prior logits at h0 [B, S, K], and z0 [B, S, K]) in float64."""
    sd64 = {k: v.double() for k, v in sd.items()}
    h0 = torch.tanh(sd64["initial_h"]).expand(B, cfg.deter)
    eps = cfg.ln_eps
    prior0 = _latent64(F.silu(_ln(h0 @ sd64["prior_hidden.weight"].T, sd64, "prior_norm", eps))
                       @ sd64["prior_out.weight"].T + sd64["prior_out.bias"], cfg)
    z0 = torch.zeros_like(prior0) if cfg.initial == "zeros" else F.one_hot(prior0.argmax(-1), cfg.classes).double()
    return h0, prior0, z0


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def check_shapes(impl, **case):
    s = Setup(impl, **case)
    c, T, B = s.cfg, s.T, s.B
    out = s.observe()
    S, K, H, A = c.stoch, c.classes, c.deter, c.num_actions
    expected = dict(prior_logits=(T, B, S, K), post_logits=(T, B, S, K), h=(T, B, H), z=(T, B, S, K))
    for name, shape in expected.items():
        t = getattr(out, name, None)
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != torch.float32:
            got = (tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__
            fail("RSSM-1", f"observe(...).{name} is {got}, expected {shape} float32", **s.inputs())
    state = out.state
    for name, shape in dict(h=(B, H), z=(B, S, K), action=(B, A)).items():
        t = getattr(state, name, None)
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            fail("RSSM-1", f"observe(...).state.{name} is {getattr(t, 'shape', type(t).__name__)}, expected {shape}")
    init = s.model.initial_state(B)
    for name, shape in dict(h=(B, H), z=(B, S, K), action=(B, A)).items():
        t = getattr(init, name, None)
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            fail("RSSM-1", f"initial_state({B}).{name} is {getattr(t, 'shape', type(t).__name__)}, expected {shape}")
    with torch.no_grad():
        prior, h, z = s.model.img_step(state.h, state.z, s.action[-1], gen(s.seed + 7))
    for name, t, shape in (("prior_logits", prior, (B, S, K)), ("h", h, (B, H)), ("z", z, (B, S, K))):
        if tuple(t.shape) != shape or t.dtype != torch.float32:
            fail("RSSM-1", f"img_step(...) {name} is {tuple(t.shape)} {t.dtype}, expected {shape} float32")


def check_parity(impl, **case):
    s = Setup(impl, **case)
    ref = build(Reference, s.cfg, s.sd)
    got, want = s.observe(), s.observe(model=ref)
    close_until_flip("RSSM-2", "observe", got, want, atol=TOL, rtol=TOL, **s.inputs())
    if bool((_flips(got.z, want.z) < s.T).any()):
        return  # the final states differ by a sample: img_step cannot be compared
    with torch.no_grad():
        g_img = s.model.img_step(want.state.h, want.state.z, s.action[-1], gen(s.seed + 7))
        w_img = ref.img_step(want.state.h, want.state.z, s.action[-1], gen(s.seed + 7))
    for name, g, w in zip(("prior_logits", "h"), g_img, w_img):
        assert_close("RSSM-2", f"img_step {name}", g, w, atol=TOL, rtol=TOL, **s.inputs())
    if torch.equal(g_img[2].argmax(-1), w_img[2].argmax(-1)):
        assert_close("RSSM-2", "img_step z", g_img[2], w_img[2], atol=0.0, **s.inputs())


def _resets(s: Setup) -> list[tuple[int, int]]:
    return [tuple(x) for x in s.is_first.nonzero().tolist()][:4]


def check_isolation(impl, **case):
    s = Setup(impl, **case)
    base = s.observe()
    g = torch.Generator().manual_seed(s.seed + 11)
    for t0, b in _resets(s):
        embed, action, is_first = s.embed.clone(), s.action.clone(), s.is_first.clone()
        embed[:t0, b] = 10 * torch.randn(t0, s.cfg.embed_dim, generator=g)
        action[:t0, b] = torch.randint(0, s.cfg.num_actions, (t0,), generator=g)
        is_first[:t0, b] = torch.rand(t0, generator=g) < 0.5
        carried = random_state(s.cfg, s.B, s.seed + 13)
        other = s.observe(embed, action, is_first, state=carried)
        _identical_from("RSSM-3", f"reset at t={t0}, row {b}, history before it replaced", other, base, t0, b,
                        **s.inputs(reset=(t0, b)))


def _poison(x: torch.Tensor) -> torch.Tensor:
    """x's shape filled with NaN, +inf, −inf in turn."""
    values = torch.tensor([float("nan"), float("inf"), float("-inf")], dtype=x.dtype)
    return values[torch.arange(x.numel()) % 3].reshape(x.shape)


def check_nonfinite_history(impl, **case):
    """One run: every row with a reset gets NaN/±inf embeddings before its first reset and a NaN/±inf carried
    state; its rows from that reset on (later resets included) must equal the finite run's."""
    s = Setup(impl, **case)
    s.is_first[s.seed % s.T, s.seed % s.B] = True  # at least one reset
    carried = random_state(s.cfg, s.B, s.seed + 13)
    base = s.observe(state=carried)
    has_reset = s.is_first.any(0)  # [B]
    first = s.is_first.int().argmax(0)  # [B]: the first reset of each row that has one
    before = (torch.arange(s.T).unsqueeze(-1) < first) & has_reset  # [T, B]
    embed = torch.where(before.unsqueeze(-1), _poison(s.embed), s.embed)
    poisoned = RSSMState(*(torch.where(has_reset.reshape(-1, *[1] * (x.dim() - 1)), _poison(x), x) for x in carried))
    other = s.observe(embed, state=poisoned)
    for b in has_reset.nonzero().flatten().tolist():
        t0 = int(first[b])
        for name in ("prior_logits", "post_logits", "h", "z"):
            if not bool(getattr(other, name)[t0:, b].isfinite().all()):
                fail("RSSM-16", f"{name}[{t0}:, {b}] is not finite after a reset at t={t0}: NaN/inf embeddings "
                                f"before it and a NaN/inf carried state leaked through the reset",
                     **s.inputs(reset=(t0, b), got=getattr(other, name)[t0:, b]))
        _identical_from("RSSM-16", f"reset at t={t0}, row {b}, NaN/inf history before it", other, base, t0, b,
                        **s.inputs(reset=(t0, b)))


def check_closed_form(impl, **case):
    s = Setup(impl, **case)
    cfg, B = s.cfg, s.B
    h0, prior0, z0 = closed_form_initial(s.sd, cfg, B)
    init = s.model.initial_state(B)
    assert_close("RSSM-4", "initial_state h = tanh(initial_h)", init.h, h0, atol=TOL, rtol=TOL, config=cfg)
    top2 = prior0.topk(min(2, cfg.classes), -1).values
    clear = (top2[..., 0] - top2[..., -1]) > 1e-4  # [B, S] modes not decided by rounding
    if cfg.initial == "learned" and not torch.equal(init.z.argmax(-1)[clear], z0.argmax(-1)[clear]):
        fail("RSSM-4", f"initial_state z = one-hot {init.z.argmax(-1).tolist()}, expected the prior's mode "
                       f"{z0.argmax(-1).tolist()} at h0", config=cfg)
    if cfg.initial == "zeros":
        assert_close("RSSM-4", "initial_state z ('zeros')", init.z, z0, atol=0.0, config=cfg)
    assert_close("RSSM-4", "initial_state action", init.action, torch.zeros(B, cfg.num_actions), atol=0.0)
    out = s.observe()
    z0 = init.z.detach().double()
    h, z, a = h0, z0, torch.zeros(B, cfg.num_actions, dtype=torch.float64)
    for t in range(s.T):
        f = s.is_first[t].unsqueeze(-1)
        h_in = torch.where(f, h0, h)
        z_in = torch.where(f.unsqueeze(-1), z0, z)
        a_in = torch.where(f, 0.0, a)
        h_t, prior, post = closed_form_step(s.sd, cfg, h_in, z_in, a_in, s.embed[t].double())
        inputs = s.inputs(t=t)
        assert_close("RSSM-4", f"h[{t}]", out.h[t], h_t, atol=TOL, rtol=TOL, **inputs)
        assert_close("RSSM-4", f"prior_logits[{t}]", out.prior_logits[t], prior, atol=10 * TOL, rtol=TOL, **inputs)
        assert_close("RSSM-4", f"post_logits[{t}]", out.post_logits[t], post, atol=10 * TOL, rtol=TOL, **inputs)
        # continue from the implementation's own state (its samples are checked by RSSM-10)
        h, z = out.h[t].double(), out.z[t].double()
        a = F.one_hot(s.action[t], cfg.num_actions).double()


def check_reset_at_zero(impl, **case):
    s = Setup(impl, **case)
    is_first = s.is_first.clone()
    is_first[0] = True
    fresh = s.observe(is_first=is_first)
    carried = s.observe(is_first=is_first, state=random_state(s.cfg, s.B, s.seed))
    for b in range(s.B):
        _identical_from("RSSM-5", "is_first[0] everywhere, a carried state vs state=None", carried, fresh, 0, b,
                        **s.inputs())


def check_action_zeroed(impl, T, config, **case):
    config = dict(config, num_actions=max(config["num_actions"], 2))
    s = Setup(impl, config=config, T=max(T, 2), **case)
    g = torch.Generator().manual_seed(s.seed + 17)
    t0 = int(torch.randint(1, s.T, (), generator=g))
    b = int(torch.randint(0, s.B, (), generator=g))
    s.is_first[t0, b] = True
    base = s.observe()
    action = s.action.clone()
    action[t0 - 1, b] = (action[t0 - 1, b] + 1) % s.cfg.num_actions
    other = s.observe(action=action)
    _identical_from("RSSM-6", f"reset at t={t0}, row {b}, only action[{t0 - 1}, {b}] changed", other, base, t0, b,
                    **s.inputs(reset=(t0, b)))


def check_action_alignment(impl, T, config, resets, **case):
    config = dict(config, num_actions=max(config["num_actions"], 2))
    s = Setup(impl, config=config, T=max(T, 2), resets=[], **case)
    g = torch.Generator().manual_seed(s.seed + 19)
    t1 = int(torch.randint(0, s.T - 1, (), generator=g))
    b = int(torch.randint(0, s.B, (), generator=g))
    base = s.observe()
    action = s.action.clone()
    action[t1, b] = (action[t1, b] + 1) % s.cfg.num_actions
    other = s.observe(action=action)
    assert_identical("RSSM-7", f"h[:{t1 + 1}, {b}] after changing action[{t1}, {b}] (h_t must not see "
                               f"action[t])", other.h[: t1 + 1, b], base.h[: t1 + 1, b], **s.inputs(changed=(t1, b)))
    if torch.equal(other.h[t1 + 1, b], base.h[t1 + 1, b]):
        fail("RSSM-7", f"h[{t1 + 1}, {b}] unchanged after changing action[{t1}, {b}]: the previous action does "
                       "not enter the step", **s.inputs(changed=(t1, b)))


def check_unimix_floor(impl, **case):
    s = Setup(impl, **case)
    out = s.observe()
    with torch.no_grad():
        prior, _, _ = s.model.img_step(out.state.h, out.state.z, s.action[-1], gen(s.seed + 7))
    floor = s.cfg.unimix / s.cfg.classes
    for name, logits in (("prior_logits", out.prior_logits), ("post_logits", out.post_logits),
                         ("img_step prior_logits", prior)):
        p = logits.double().softmax(-1)
        if bool((p < floor * (1 - 1e-4)).any()):
            idx = tuple((p < floor * (1 - 1e-4)).nonzero()[0].tolist())
            fail("RSSM-8", f"{name}: probability {float(p[idx]):.3g} at {list(idx)} below unimix/K = {floor:.3g}",
                 **s.inputs(unimix=s.cfg.unimix))


def check_straight_through(impl, **case):
    s = Setup(impl, **case)
    z_vals = s.observe().z
    ok = ((z_vals == 0) | (z_vals == 1)).all() and bool((z_vals.sum(-1) == 1).all())
    if not ok:
        fail("RSSM-9", "z is not exactly one-hot in the forward pass", z=z_vals, **s.inputs())
    embed = s.embed.clone().requires_grad_(True)
    out = s.model.observe(embed, s.action, s.is_first, gen(s.seed))
    w = torch.randn(out.z.shape, generator=torch.Generator().manual_seed(s.seed + 23))
    params = [p for p in s.model.parameters() if p.requires_grad]
    wrt = [embed, *params]
    loss_z = (w * out.z).sum()
    got = torch.autograd.grad(loss_z, wrt, retain_graph=True, allow_unused=True) if loss_z.requires_grad \
        else [None] * len(wrt)  # z carries no graph at all: its gradient is zero
    want = torch.autograd.grad((w * out.post_logits.softmax(-1)).sum(), wrt, allow_unused=True)
    flat = lambda gs: torch.cat([(torch.zeros_like(x) if g is None else g).reshape(-1)  # noqa: E731
                                 for g, x in zip(gs, wrt)])
    expected = flat(want)
    if not bool(expected.abs().max() > 0):
        return  # nothing to compare (cannot happen with these parameters)
    assert_close("RSSM-9", "∂Σw·z vs ∂Σw·softmax(post_logits)", flat(got), expected,
                 atol=1e-5 * float(expected.abs().max()), rtol=1e-4, **s.inputs())


def _expected_index(logits: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(index [B, S] by the inverse CDF, ambiguous [B, S]: u within 1e-5 of a boundary)."""
    cdf = logits.detach().double().softmax(-1).cumsum(-1)[..., :-1]  # [B, S, K−1]
    u = u.double().unsqueeze(-1)
    return (cdf < u).sum(-1), ((cdf - u).abs() < 1e-5).any(-1)


def _check_samples(what: str, logits: torch.Tensor, z: torch.Tensor, u: torch.Tensor, inputs: dict) -> None:
    index, ambiguous = _expected_index(logits, u)
    got = z.detach().argmax(-1)
    bad = (got != index) & ~ambiguous
    if bool(bad.any()):
        b, v = bad.nonzero()[0].tolist()
        fail("RSSM-10", f"{what}[{b}, {v}] is class {int(got[b, v])}, expected class {int(index[b, v])} "
                        f"(u = {float(u[b, v]):.6f}, probs = {logits[b, v].detach().double().softmax(-1).tolist()})",
             **inputs)


def check_sampling(impl, **case):
    s = Setup(impl, **case)
    g = gen(s.seed)
    out = s.observe(generator=g)
    with torch.no_grad():
        prior, _, z = s.model.img_step(out.state.h, out.state.z, s.action[-1], g)
    replay = gen(s.seed)  # the same stream: T draws in observe, then one in img_step
    for t in range(s.T):
        u = torch.rand((s.B, s.cfg.stoch), generator=replay)
        _check_samples(f"z[{t}]", out.post_logits[t], out.z[t], u, s.inputs())
    _check_samples("img_step z", prior, z, torch.rand((s.B, s.cfg.stoch), generator=replay), s.inputs())


def check_no_global_rng(impl, **case):
    s = Setup(impl, **case)
    saved = torch.random.get_rng_state()
    runs = []
    try:
        for global_seed in (0, 987654321):
            torch.manual_seed(global_seed)
            g = gen(s.seed)
            out = s.observe(generator=g)
            with torch.no_grad():
                img = s.model.img_step(out.state.h, out.state.z, s.action[-1], g)
            runs.append((out, img))
    finally:
        torch.random.set_rng_state(saved)
    (a, img_a), (b, img_b) = runs
    for name in ("prior_logits", "post_logits", "h", "z"):
        assert_identical("RSSM-11", f"observe {name} under two global seeds", getattr(b, name), getattr(a, name),
                         **s.inputs())
    for name, x, y in zip(("prior_logits", "h", "z"), img_b, img_a):
        assert_identical("RSSM-11", f"img_step {name} under two global seeds", x, y, **s.inputs())


def check_autocast(impl, **case):
    s = Setup(impl, **case)
    want = s.observe()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = s.observe()
        with torch.no_grad():
            img = s.model.img_step(got.state.h, got.state.z, s.action[-1], gen(s.seed + 7))
    for name, t in (("h", got.h), ("z", got.z), ("state.h", got.state.h), ("state.z", got.state.z),
                    ("img_step h", img[1]), ("img_step z", img[2])):
        if t.dtype != torch.float32:
            fail("RSSM-12", f"under autocast(bfloat16) {name} is {t.dtype}, expected float32 (state kept in "
                            "float32)", **s.inputs())
    for name in ("prior_logits", "post_logits", "h"):
        if not bool(torch.isfinite(getattr(got, name)).all()):
            fail("RSSM-12", f"under autocast(bfloat16) {name} is not finite", **s.inputs())
    h = got.h.detach()
    bf16_exact = (h.to(torch.bfloat16).float() == h).double().mean()
    if float(bf16_exact) >= 0.9 and h.numel() >= 8:
        fail("RSSM-12", f"under autocast {float(bf16_exact):.0%} of h are exactly representable in bfloat16: the "
                        "GRU update ran in bf16 (expected float32 gates and state update)", **s.inputs())
    first = _flips(got.z, want.z)
    t = torch.arange(s.T).unsqueeze(-1)
    for name, tol in (("h", AUTOCAST_TOL_H), ("prior_logits", AUTOCAST_TOL_PROBS),
                      ("post_logits", AUTOCAST_TOL_PROBS)):
        g, w = getattr(got, name).detach().double(), getattr(want, name).detach().double()
        if name != "h":
            g, w, name = g.softmax(-1), w.softmax(-1), f"softmax({name})"
        keep = _rows_kept(t <= first, g)
        assert_close("RSSM-12", f"autocast(bfloat16) {name} vs float32", torch.where(keep, g, w), w, atol=tol,
                     **s.inputs())


def check_carry(impl, T, **case):
    s = Setup(impl, T=max(T, 2), **case)
    t1 = 1 + case["seed"] % (s.T - 1)
    full = s.observe()
    g = gen(s.seed)
    first = s.observe(s.embed[:t1], s.action[:t1], s.is_first[:t1], generator=g)
    second = s.observe(s.embed[t1:], s.action[t1:], s.is_first[t1:], state=first.state, generator=g)
    joined = type(full)(*(torch.cat((x, y)) for x, y in zip(first[:4], second[:4])), second.state)
    close_until_flip("RSSM-13", f"split at t={t1}", joined, full, atol=TOL, rtol=TOL, **s.inputs(split=t1))


def _observe_grads(model, s: Setup, T: int) -> dict[str, torch.Tensor]:
    """{"embed" or a parameter name: ∂L} for L = Σ w·(prior_logits, post_logits, h, z) of observe over [0, T);
    the weights are drawn from the case's seed (the same for every model). Zeros where no path exists."""
    embed = s.embed[:T].clone().requires_grad_(True)
    out = model.observe(embed, s.action[:T], s.is_first[:T], gen(s.seed))
    g = torch.Generator().manual_seed(s.seed + 29)
    loss = sum((torch.randn(t.shape, generator=g) * t).sum() for t in (out.prior_logits, out.post_logits, out.h, out.z))
    return named_grads(loss, {"embed": embed, **dict(model.named_parameters())})


def check_gradients(impl, **case):
    s = Setup(impl, **case)
    ref = build(Reference, s.cfg, s.sd)
    T = int(_flips(s.observe().z, s.observe(model=ref).z).min())  # rows before the first differing sample
    if T == 0:
        return  # the very first samples differ: no shared trajectory to differentiate
    assert_grads_close("RSSM-15", f"L over t < {T}", _observe_grads(s.model, s, T), _observe_grads(ref, s, T),
                       **s.inputs())


def _bad_inputs(s: Setup, bad: str):
    """(call, names, mentions) for one kind of bad input."""
    c, T, B = s.cfg, s.T, s.B
    m = s.model
    e, a, f, g = s.embed, s.action, s.is_first, gen(s.seed)
    state = m.initial_state(B)
    A = c.num_actions
    table = {
        "embed_dim": (lambda: m.observe(torch.zeros(T, B, c.embed_dim + 1), a, f, g), ["embed"],
                      [str((T, B, c.embed_dim + 1)), str(c.embed_dim)]),
        "embed_2d": (lambda: m.observe(e[0], a, f, g), ["embed"], [str(tuple(e[0].shape))]),
        "embed_int": (lambda: m.observe(e.long(), a, f, g), ["embed"], ["int64"]),
        "action_float": (lambda: m.observe(e, a.float(), f, g), ["action"], ["float32"]),
        "action_shape": (lambda: m.observe(e, a[:, :1].expand(T, B + 1).contiguous(), f, g), ["action"],
                         [str((T, B + 1)), str((T, B))]),
        "action_high": (lambda: m.observe(e, torch.full_like(a, A), f, g), ["action"], [str(A)]),
        "action_negative": (lambda: m.observe(e, torch.full_like(a, -1), f, g), ["action"], ["-1"]),
        "is_first_float": (lambda: m.observe(e, a, f.float(), g), ["is_first"], ["float32"]),
        "is_first_shape": (lambda: m.observe(e, a, f[:1].expand(T + 1, B).contiguous(), g), ["is_first"],
                           [str((T + 1, B))]),
        "no_generator": (lambda: m.observe(e, a, f, None), ["generator"], ["NoneType"]),
        "state_h": (lambda: m.observe(e, a, f, g, state._replace(h=torch.zeros(B, c.deter + 1))), ["state.h"],
                    [str((B, c.deter + 1))]),
        "img_h": (lambda: m.img_step(torch.zeros(B, c.deter + 1), state.z, a[0], g), ["h"], [str((B, c.deter + 1))]),
        "img_z": (lambda: m.img_step(state.h, state.z[:, :, :1], a[0], g), ["z"], [str((B, c.stoch, 1))]),
        "img_action_high": (lambda: m.img_step(state.h, state.z, torch.full((B,), A), g), ["action"], [str(A)]),
        "img_no_generator": (lambda: m.img_step(state.h, state.z, a[0], 7), ["generator"], ["int"]),
    }
    return table[bad]


BAD_INPUTS = ("embed_dim", "embed_2d", "embed_int", "action_float", "action_shape", "action_high", "action_negative",
              "is_first_float", "is_first_shape", "no_generator", "state_h", "img_h", "img_z", "img_action_high",
              "img_no_generator")


def check_rejects(impl, bad, **case):
    s = Setup(impl, **case)
    call, names, mentions = _bad_inputs(s, bad)
    expect_rejection("RSSM-14", call, names=names, mentions=mentions, what=f"bad input ({bad})")


PROPERTIES = (
    Property("RSSM-1", check_shapes, cases, EXAMPLES, INTERFACE, max_examples=10),
    Property("RSSM-2", check_parity, cases, EXAMPLES, INTERFACE),
    Property("RSSM-3", check_isolation, cases, EXAMPLES, INTERFACE),
    Property("RSSM-4", check_closed_form, cases, EXAMPLES, INTERFACE),
    Property("RSSM-5", check_reset_at_zero, cases, EXAMPLES, INTERFACE),
    Property("RSSM-6", check_action_zeroed, cases, EXAMPLES, INTERFACE),
    Property("RSSM-7", check_action_alignment, cases, EXAMPLES, INTERFACE),
    Property("RSSM-8", check_unimix_floor, cases, EXAMPLES, INTERFACE),
    Property("RSSM-9", check_straight_through, cases, EXAMPLES, INTERFACE, max_examples=10),
    Property("RSSM-10", check_sampling, cases, EXAMPLES, INTERFACE),
    Property("RSSM-11", check_no_global_rng, cases, EXAMPLES, INTERFACE, max_examples=10),
    Property("RSSM-12", check_autocast, cases, EXAMPLES, INTERFACE, max_examples=10),
    Property("RSSM-13", check_carry, cases, EXAMPLES, INTERFACE),
    Property("RSSM-14", check_rejects,
             st.builds(lambda c, bad: dict(c, bad=bad), cases, st.sampled_from(BAD_INPUTS)),
             tuple(dict(EXAMPLES[0], bad=b) for b in BAD_INPUTS), INTERFACE),
    Property("RSSM-15", check_gradients, cases, EXAMPLES, INTERFACE, max_examples=10),
    Property("RSSM-16", check_nonfinite_history, cases, EXAMPLES, INTERFACE, max_examples=10),
)

CONTRACT = Contract("rssm", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE)
