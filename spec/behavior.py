"""Contract ``behavior``: DreamerV3 actor-critic learning in imagination (Dreamer plan M5).

Sources: the Dreamer plan M5 (λ-returns with discounts γ·continue, mandatory ReturnEMA normalization
adv = norm(R) − norm(v), actor + critic losses + slow critic; truncation keeps bootstrapping), §2.3
(continue = 0 only for a true terminal, 1 for a timeout), §2.1 (sampling takes a torch.Generator); Hafner et
al. 2023 (DreamerV3, eqs. 10–11); sheeprl 0.8.4 ``algos/dreamer_v3/dreamer_v3.py`` (``imagine``, ``actor_loss``,
``critic_loss``, ``behaviour_learning``) and ``utils.py`` (Moments, compute_lambda_values). Golden:
fixtures/behavior/sheeprl_behavior_losses.json (tests/golden/test_behavior_golden.py).

imagine(img_step, policy, start_state, horizon, gen) -> Imagination(states, actions, logits)
    start_state: a tensor or a dict/tuple of tensors, each [B, ...] (flattened posterior states).
    For t = 0..H: logits_t = policy(sg(s_t)) [B, A]; a_t ~ Categorical(softmax(logits_t)) drawn from ``gen``
    only; for t < H: s_{t+1} = img_step(s_t, onehot(a_t)). Returns time-major [H+1, B, ...] states (s_0 is
    the start), actions [H+1, B] int64 and logits [H+1, B, A]. The policy sees stop-gradient states, so
    the actor's loss cannot reach the world model through them; states keep img_step's graph.

behavior_losses(reward, cont_logits, value_logits, slow_value_logits, actor_logits, actions,
                start_terminal, return_ema, cfg) -> dict
    Rows are states s_0..s_H: reward[t] is the reward predicted on arriving at s_t and cont_logits[t]
    the continue head's logit at s_t (sheeprl's alignment: row 0 of both is not used);
    value_logits / slow_value_logits [H+1, B, bins] the critic's and the slow critic's two-hot logits;
    actor_logits [H+1, B, A] and actions [H+1, B] from imagine; start_terminal [B] the start states'
    ``terminated`` flags; return_ema a return_ema.ReturnEMA (updated in place).

Formula (γ = cfg.gamma, λ = cfg.lam, η = cfg.entropy_coef, β = cfg.slow_reg; sg = stop-gradient)
    c_0 = 1 − start_terminal;  c_t = 1[l_t > 0] (continue_mode "mode", the default) or σ(l_t) ("prob"), t >= 1
    v_t = twohot.mean(sg value_logits_t)                                            (symlog two-hot, raw space)
    R_H = v_H,  R_t = r_{t+1} + γ·c_{t+1}·((1 − λ)·v_{t+1} + λ·R_{t+1}),  t < H       R [H, B], all inputs sg
        = lambda_return(reward[1:], c[1:], v, γ, λ) of the lambda_return contract
    w_t = Π_{k<=t} γc_k / γ = γ^t·Π_{k<=t} c_k                                      w [H+1, B], sg
    (offset, invscale) = return_ema.update(R) (EMA of the 5th/95th percentiles, invscale = max(1/max_range, hi − lo))
    adv_t = (R_t − offset)/invscale − (v_t − offset)/invscale                      adv [H, B], sg
    actor_loss  = −mean_{t<H, b}( w_t·(log π(a_t|s_t)·adv_t + η·H[π(·|s_t)]) )    (REINFORCE, discrete actions)
    critic_loss =  mean_{t<H, b}( w_t·(−log p_t(R_t) − β·log p_t(twohot.mean(sg slow_value_logits_t))) )
    with p_t the critic's two-hot distribution (twohot.log_prob: cross-entropy against twohot(symlog x)).
    Returned: actor_loss, critic_loss (0-d, with graph), returns R, values v, continues c, weights w,
    advantage, offset, invscale, entropy [H+1, B] (all without graph).

update_slow_critic(critic, slow, rate): slow ← rate·critic + (1 − rate)·slow for every parameter, in place
    (critic/slow: nn.Modules or aligned lists of tensors). rate = cfg.slow_rate = 0.02 after every critic
    step (sheeprl ``critic.tau``, update every step; sheeprl copies with rate 1 on the first step).

Conventions pinned here
    * continue mode vs probability: sheeprl (and danijar's 2023 code) use the continue head's *mode*,
      BernoulliSafeMode.mode = 1[σ(l) > 0.5] = 1[l > 0]; "prob" (the expected discount σ(l)) is an option.
      (sheeprl evaluates σ in float32, which rounds to exactly 0.5 for 0 < l < 6e-8: there it says 0.)
    * the first continue c_0 comes from the replay (1 − terminated of the start state), never from the
      head. As in sheeprl it enters the weights only (w_t = 0 for all t when the start state is terminal),
      not R (R_t uses c_{t+1..H}): every row of a terminal start is then weighted 0 in both losses.
    * A timeout is not a terminal: a truncated start has start_terminal = 0 (weight 1, bootstraps), and
      imagined continues are the head's prediction of ``continue`` (which is 1 on a timeout, §2.3).
    * The λ-returns bootstrap from the critic itself (sheeprl), not the slow critic; the slow critic only
      regularizes. The actor's logits are used as given (unimix, if any, is the caller's).
    * Scale: R and v scale with the rewards, so the normalized advantage is scale-free wherever the EMA
      range hi − lo >= 1/max_range (= 1); below it invscale = 1 and advantages are not amplified (by design).
    * dtype: all floating inputs share one dtype; outputs have it. The reference computes in float64.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import strategies as st

from rlspec.contracts.behavior import BehaviorConfig
from rlspec.reference import twohot as ref_twohot
from rlspec.reference.return_ema import ReturnEMA, percentile
from rlspec.spec.core import (
    Contract,
    Property,
    assert_close,
    assert_grads_close,
    by_category,
    expect_rejection,
    fail,
    named_grads,
    signatures_from_text,
)

CLAUSES = {
    "BEHAV-1": "imagine returns [H+1, B, ...] states of the start state's structure with s_0 = start, "
               "s_{t+1} = img_step(s_t, onehot(a_t)), logits_t = policy(s_t), actions [H+1, B] int64 in [0, A) "
               "(closed form with a linear transition)",
    "BEHAV-2": "imagine samples from the given generator only: a poisoned global RNG changes nothing, the same "
               "generator state gives the same actions, masked (−inf) actions are never drawn and action "
               "frequencies match softmax(logits) (5σ)",
    "BEHAV-3": "continues c_0 = 1 − start_terminal, c_t = 1[l_t > 0] (mode) or σ(l_t) (prob); weights "
               "w_t = γ^t·Π_{k<=t} c_k without gradient",
    "BEHAV-4": "values = twohot mean of the critic, R = λ-returns over rows 1..H, (offset, invscale) = "
               "return_ema.update(R), advantage = (R − o)/s − (v − o)/s (vs float64 closed form)",
    "BEHAV-5": "actor_loss = −mean(w·(log π(a)·adv + η·entropy)) and critic_loss = mean(w·(−log p(R) − "
               "β·log p(slow mean))), values and gradients w.r.t. actor_logits / value_logits (float64 closed form)",
    "BEHAV-6": "gradient routing: actor_loss has no gradient to reward, cont_logits, value_logits, "
               "slow_value_logits; critic_loss none to actor_logits, reward, cont_logits, slow_value_logits; "
               "the returned diagnostics (returns, values, continues, weights, advantage, entropy) carry no "
               "graph; imagine's logits none to the start state, its states img_step's whole graph (∂Σw·s_t "
               "w.r.t. the start state equals the float64 closed form's)",
    "BEHAV-7": "scaling rewards and values by c > 0 leaves the advantage and actor_loss unchanged once the EMA "
               "has converged (range >= 1/max_range at both scales)",
    "BEHAV-8": "a true terminal stops bootstrapping (c_k = 0: R_{k−1} = r_k, later rows change no earlier R, "
               "w_{>=k} = 0; start_terminal: the column's weights and loss gradients are 0), a timeout "
               "(continue 1, start not terminal) bootstraps",
    "BEHAV-9": "update_slow_critic: slow ← rate·critic + (1 − rate)·slow in place for every parameter; rate 1 "
               "copies exactly, rate 0 changes nothing",
    "BEHAV-10": "bad input is rejected naming the function and argument (shapes, dtypes, action ids, flags, "
                "config values, continue_mode, generator, horizon, callables' outputs)",
    "BEHAV-11": "an action masked by a −inf logit (p = 0, never taken) contributes 0·log 0 = 0 to the entropy and a "
                "zero gradient: actor_loss and its gradient equal the float64 closed form, not NaN",
}

CATEGORIES = by_category(
    maths=("BEHAV-1", "BEHAV-2", "BEHAV-3", "BEHAV-4", "BEHAV-5", "BEHAV-6", "BEHAV-7", "BEHAV-8", "BEHAV-9"),
    robustness=("BEHAV-11",),
    validation=("BEHAV-10",),
)
RATIONALE = {
    "BEHAV-11": "The literal entropy −Σ_a π(a)·log π(a) multiplies a masked action's zero probability by log 0 "
                "= −inf: IEEE 754 gives 0·(−inf) = NaN, and so does its gradient. The kit asks for the limit "
                "0·log 0 = 0, because masking invalid actions with −inf logits is how discrete actors are "
                "restricted, and a NaN actor loss trains every parameter to NaN.",
}

INTERFACE = ("imagine", "behavior_losses", "update_slow_critic")
SIGNATURES = """
imagine(img_step, policy, start_state: tensor | dict | tuple of [B, ...], horizon: int, gen: torch.Generator)
    -> Imagination(states [H+1, B, ...], actions [H+1, B] int64, logits [H+1, B, A])
behavior_losses(reward [H+1, B], cont_logits [H+1, B], value_logits [H+1, B, bins], slow_value_logits
    [H+1, B, bins], actor_logits [H+1, B, A], actions [H+1, B], start_terminal [B], return_ema,
    cfg: BehaviorConfig = BehaviorConfig()) -> dict(actor_loss, critic_loss, returns, values, continues,
    weights, advantage, offset, invscale, entropy)
update_slow_critic(critic: nn.Module | [tensors], slow: nn.Module | [tensors], rate: float) -> None
"""

F64 = torch.float64
LOSS_INPUTS = ("reward", "cont_logits", "value_logits", "slow_value_logits", "actor_logits")


# --------------------------------------------------------------------------------------------------
# Problems and the float64 closed form
# --------------------------------------------------------------------------------------------------
def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def config(case: dict) -> BehaviorConfig:
    keys = ("gamma", "lam", "entropy_coef", "slow_reg", "continue_mode", "num_bins", "low", "high")
    return BehaviorConfig(horizon=case["H"], **{k: case[k] for k in keys if k in case})


def make_batch(case: dict) -> dict:
    """Inputs of behavior_losses (float64, before the cast to case['dtype']) and the EMA state."""
    g = _gen(case["seed"])
    H, B, A, n = case["H"], case["B"], case["A"], case.get("num_bins", 255)
    r = lambda *s: torch.randn(*s, generator=g, dtype=F64)  # noqa: E731
    batch = dict(reward=2 * r(H + 1, B), cont_logits=3 * r(H + 1, B), value_logits=r(H + 1, B, n),
                 slow_value_logits=r(H + 1, B, n), actor_logits=r(H + 1, B, A),
                 actions=torch.randint(0, A, (H + 1, B), generator=g),
                 start_terminal=torch.rand(B, generator=g) < case.get("p_terminal", 0.3),
                 ema_state=dict(low=r(()) - 1, high=r(()) + 1))
    if case.get("zero_cont"):  # logits exactly 0 (σ = 0.5): the mode's boundary, 1[l > 0] = 0
        batch["cont_logits"][1:, 0] = 0.0
    if case.get("masked"):  # the last action masked out (logit −inf, p = 0) and never taken: 0·log 0 = 0
        batch["actor_logits"][..., -1] = -math.inf
        batch["actions"] = batch["actions"] % (A - 1)
    return batch


def cast(batch: dict, dtype: torch.dtype, grad: bool = False) -> dict:
    return {k: (v.detach().to(dtype).clone().requires_grad_(grad) if k in LOSS_INPUTS else v)
            for k, v in batch.items()}


def ema_from(state: dict) -> ReturnEMA:
    ema = ReturnEMA()
    ema.load_state_dict(state)
    return ema


def run_losses(impl, batch: dict, cfg: BehaviorConfig) -> dict:
    args = {k: v for k, v in batch.items() if k != "ema_state"}
    return impl.behavior_losses(**args, return_ema=ema_from(batch["ema_state"]), cfg=cfg)


def closed_form(batch: dict, cfg: BehaviorConfig, dtype: torch.dtype) -> dict:
    """The spec's formula in float64 with explicit loops; losses as functions of (actor / value) logits."""
    hb = dict(num_bins=cfg.num_bins, low=cfg.low, high=cfg.high, support_dtype=dtype)
    low = lambda t: t.detach().to(dtype).to(F64)  # noqa: E731 - the values the implementation is given
    rew, lc = low(batch["reward"]), low(batch["cont_logits"])
    H = rew.shape[0] - 1
    c = (lc > 0).to(F64) if cfg.continue_mode == "mode" else torch.sigmoid(lc)
    c[0] = 1.0 - batch["start_terminal"].to(F64)
    v = ref_twohot.mean(low(batch["value_logits"]), **hb)  # [H+1, B]
    R = torch.zeros_like(rew[1:])
    nxt = v[H]
    for t in reversed(range(H)):
        R[t] = rew[t + 1] + cfg.gamma * c[t + 1] * ((1 - cfg.lam) * v[t + 1] + cfg.lam * nxt)
        nxt = R[t]
    w = torch.stack([cfg.gamma ** t * torch.prod(c[: t + 1], dim=0) for t in range(H + 1)])
    ema = ema_from(batch["ema_state"])
    offset, invscale = ema.update(R)
    adv = (R - offset) / invscale - (v[:-1] - offset) / invscale
    slow = ref_twohot.mean(low(batch["slow_value_logits"])[:-1], **hb)

    def actor_loss(logits):  # [H+1, B, A] float64
        log_p = torch.log_softmax(logits, -1)
        p = log_p.exp()
        ent = -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)  # 0·log 0 = 0 (masked actions)
        chosen = log_p.gather(-1, batch["actions"].unsqueeze(-1)).squeeze(-1)
        return -(w[:-1] * (chosen[:-1] * adv + cfg.entropy_coef * ent[:-1])).mean()

    def critic_loss(logits):  # [H+1, B, bins] float64
        lp = lambda x: ref_twohot.log_prob(logits[:-1], x, **hb)  # noqa: E731
        return (w[:-1] * (-lp(R) - cfg.slow_reg * lp(slow))).mean()

    return dict(continues=c, values=v, returns=R, weights=w, offset=offset, invscale=invscale, advantage=adv,
                actor_loss=actor_loss, critic_loss=critic_loss)


def tol(dtype: torch.dtype) -> float:
    return 1e-9 if dtype == F64 else 2e-4


def scaled(expected: torch.Tensor) -> float:
    return 1.0 + float(expected.abs().max()) if expected.numel() else 1.0


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)
dtypes = st.sampled_from((torch.float32, torch.float64))


@st.composite
def loss_cases(draw, mode: str | None = None, masked: bool | None = None):
    """A behaviour-loss case; ``masked`` (drawn when None) masks the last action with a −inf logit."""
    n, (lo, hi) = draw(st.sampled_from([(255, (-20.0, 20.0)), (21, (-5.0, 5.0)), (5, (-3.0, 3.0))]))
    A = draw(st.integers(2 if masked else 1, 4))
    return dict(seed=draw(seeds), H=draw(st.integers(1, 6)), B=draw(st.integers(1, 4)), A=A,
                masked=A >= 2 and (draw(st.booleans()) if masked is None else masked), num_bins=n, low=lo, high=hi, dtype=draw(dtypes),
                continue_mode=mode or draw(st.sampled_from(["mode", "prob"])),
                gamma=draw(st.sampled_from([1 - 1 / 333, 0.9])), lam=draw(st.sampled_from([0.95, 0.5, 1.0])),
                entropy_coef=draw(st.sampled_from([3e-4, 0.1])), slow_reg=draw(st.sampled_from([1.0, 0.5])))


LOSS_EXAMPLES = (
    dict(seed=0, H=6, B=4, A=4, num_bins=255, low=-20.0, high=20.0, dtype=torch.float32, continue_mode="mode",
         gamma=1 - 1 / 333, lam=0.95, entropy_coef=3e-4, slow_reg=1.0),
    dict(seed=1, H=3, B=2, A=3, num_bins=21, low=-5.0, high=5.0, dtype=F64, continue_mode="prob",
         gamma=0.9, lam=0.5, entropy_coef=0.1, slow_reg=0.5),
    dict(seed=2, H=4, B=2, A=2, num_bins=21, low=-5.0, high=5.0, dtype=torch.float32, continue_mode="mode",
         gamma=0.9, lam=0.95, entropy_coef=3e-4, slow_reg=1.0, zero_cont=True),
    dict(seed=3, H=3, B=2, A=3, num_bins=21, low=-5.0, high=5.0, dtype=torch.float32, continue_mode="prob",
         gamma=0.9, lam=0.95, entropy_coef=0.1, slow_reg=1.0, masked=True),
)


@st.composite
def imagine_cases(draw):
    return dict(seed=draw(seeds), H=draw(st.integers(1, 6)), B=draw(st.integers(1, 4)), A=draw(st.integers(1, 4)),
                D=draw(st.integers(1, 4)), structure=draw(st.sampled_from(["tensor", "dict", "tuple"])),
                dtype=draw(dtypes))


IMAGINE_EXAMPLES = (dict(seed=0, H=6, B=4, A=4, D=3, structure="dict", dtype=torch.float32),
                    dict(seed=1, H=1, B=1, A=1, D=1, structure="tensor", dtype=F64))


# --------------------------------------------------------------------------------------------------
# Imagination
# --------------------------------------------------------------------------------------------------
class LinearWorld:
    """s_{t+1} = s_t·M + onehot(a)·N (split over the structure's parts), policy logits = s·P."""

    def __init__(self, case: dict):
        g, (A, D, dtype) = _gen(case["seed"]), (case["A"], case["D"], case["dtype"])
        self.structure = case["structure"]
        self.M = (0.5 * torch.randn(2 * D, 2 * D, generator=g, dtype=F64)).to(dtype)
        self.N = torch.randn(A, 2 * D, generator=g, dtype=F64).to(dtype)
        self.P = torch.randn(2 * D, A, generator=g, dtype=F64).to(dtype)
        self.start = self.pack(torch.randn(case["B"], 2 * D, generator=g, dtype=F64).to(dtype))
        self.calls = 0

    def pack(self, x: torch.Tensor):  # [..., 2D] -> the structure
        a, b = x.chunk(2, dim=-1)
        return {"tensor": lambda: x, "dict": lambda: {"h": a, "z": b}, "tuple": lambda: (a, b)}[self.structure]()

    def flat(self, s) -> torch.Tensor:
        return {"tensor": lambda: s, "dict": lambda: torch.cat([s["h"], s["z"]], -1),
                "tuple": lambda: torch.cat(s, -1)}[self.structure]()

    def img_step(self, s, onehot):
        self.calls += 1
        return self.pack(self.flat(s) @ self.M + onehot @ self.N)

    def policy(self, s):
        return self.flat(s) @ self.P


def check_imagine_closed_form(impl, **case):
    """BEHAV-1."""
    world, H, B, A = LinearWorld(case), case["H"], case["B"], case["A"]
    out = impl.imagine(world.img_step, world.policy, world.start, H, _gen(case["seed"] + 1))
    states, actions, logits = out
    if type(states) is not type(world.start):
        fail("BEHAV-1", f"states: {type(states).__name__}, expected {type(world.start).__name__}", **case)
    x = world.flat(states)
    if tuple(x.shape) != (H + 1, B, 2 * case["D"]) or tuple(logits.shape) != (H + 1, B, A) \
            or tuple(actions.shape) != (H + 1, B) or actions.dtype != torch.int64:
        fail("BEHAV-1", f"shapes: states {tuple(x.shape)}, actions {tuple(actions.shape)} {actions.dtype}, logits "
                        f"{tuple(logits.shape)}; expected [H+1={H + 1}, B={B}, ...], int64 ids", **case)
    if bool(((actions < 0) | (actions >= A)).any()):
        fail("BEHAV-1", f"action ids outside [0, {A})", actions=actions, **case)
    want = [world.flat(world.start).to(F64)]
    for t in range(H):
        onehot = torch.nn.functional.one_hot(actions[t], A).to(F64)
        want.append(want[-1] @ world.M.to(F64) + onehot @ world.N.to(F64))
    want = torch.stack(want)  # [H+1, B, 2D]
    eps = tol(case["dtype"])
    assert_close("BEHAV-1", "states vs s_{t+1} = s_t·M + onehot(a_t)·N", x, want, atol=eps * scaled(want), **case)
    assert_close("BEHAV-1", "logits vs policy(s_t)", logits, want @ world.P.to(F64),
                 atol=eps * scaled(want @ world.P.to(F64)), **case)
    if world.calls != H:
        fail("BEHAV-1", f"img_step called {world.calls} times, expected H = {H}", **case)


def check_imagine_generator(impl, **case):
    """BEHAV-2."""
    world, H = LinearWorld(case), case["H"]
    runs, saved = [], torch.get_rng_state()
    try:
        for poison in (0, 12345):
            torch.manual_seed(poison)
            runs.append(impl.imagine(world.img_step, world.policy, world.start, H, _gen(case["seed"])).actions)
    finally:
        torch.set_rng_state(saved)
    if not torch.equal(runs[0], runs[1]):
        fail("BEHAV-2", "actions changed with the global RNG's seed (the global RNG was used)",
             first=runs[0], second=runs[1], **case)
    g = _gen(case["seed"])
    impl.imagine(world.img_step, world.policy, world.start, H, g)
    if torch.equal(g.get_state(), _gen(case["seed"]).get_state()) and case["A"] > 1:
        fail("BEHAV-2", "the generator's state did not advance: actions were not drawn from it", **case)
    # distribution: fixed logits (one masked), many rows
    A, rows = max(case["A"], 2), 4000
    base = torch.randn(A, generator=_gen(case["seed"] + 2), dtype=F64)
    base[case["seed"] % A] = -math.inf
    start = torch.zeros(rows, 1, dtype=case["dtype"])
    out = impl.imagine(lambda s, a: s, lambda s: base.to(case["dtype"]).expand(s.shape[0], A).clone(), start, 1,
                       _gen(case["seed"] + 3))
    counts = torch.bincount(out.actions.reshape(-1), minlength=A).to(F64)  # [A]
    p, n = torch.softmax(base, -1), 2 * rows
    if counts[case["seed"] % A] > 0:
        fail("BEHAV-2", f"a masked (−inf) action was drawn {int(counts[case['seed'] % A])} times", **case)
    sigma = torch.sqrt(n * p * (1 - p)).clamp_min(1.0)
    if bool(((counts - n * p).abs() > 5 * sigma).any()):
        fail("BEHAV-2", "action frequencies differ from softmax(logits) by more than 5σ", counts=counts,
             expected=n * p, **case)


# --------------------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------------------
def check_continues_weights(impl, **case):
    """BEHAV-3."""
    batch, cfg = make_batch(case), config(case)
    got = run_losses(impl, cast(batch, case["dtype"], grad=True), cfg)
    want = closed_form(batch, cfg, case["dtype"])
    eps = tol(case["dtype"])
    assert_close("BEHAV-3", f"continues (continue_mode={cfg.continue_mode!r})", got["continues"], want["continues"],
                 atol=eps, **case)
    assert_close("BEHAV-3", "weights vs γ^t·Π c", got["weights"], want["weights"], atol=eps, **case)
    if got["weights"].requires_grad:
        fail("BEHAV-3", "weights carry a gradient (expected stop-gradient)", **case)


def check_returns_advantage(impl, **case):
    """BEHAV-4."""
    batch, cfg = make_batch(case), config(case)
    got = run_losses(impl, cast(batch, case["dtype"]), cfg)
    want = closed_form(batch, cfg, case["dtype"])
    eps = tol(case["dtype"])
    for key in ("values", "returns"):
        assert_close("BEHAV-4", key, got[key], want[key], atol=eps * scaled(want[key]), rtol=eps, **case)
    for key in ("offset", "invscale"):
        assert_close("BEHAV-4", f"{key} of return_ema.update(R)", torch.as_tensor(got[key]).reshape(()),
                     want[key], atol=eps * scaled(want["returns"]), **case)
    assert_close("BEHAV-4", "advantage = (R − o)/s − (v − o)/s", got["advantage"], want["advantage"],
                 atol=eps * scaled(want["returns"]) / float(want["invscale"]), **case)


def _grad(loss: torch.Tensor, inputs: dict, names) -> dict:
    leaves = [inputs[n] for n in names]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True, retain_graph=True) if loss.requires_grad \
        else [None] * len(leaves)
    return {n: (torch.zeros_like(t) if g is None else g) for n, g, t in zip(names, grads, leaves)}


def check_losses(impl, **case):
    """BEHAV-5 (BEHAV-11 with a masked action)."""
    clause = "BEHAV-11" if case.get("masked") else "BEHAV-5"
    batch, cfg, dtype = make_batch(case), config(case), case["dtype"]
    inputs = cast(batch, dtype, grad=True)
    got = run_losses(impl, inputs, cfg)
    want = closed_form(batch, cfg, dtype)
    eps = tol(dtype)
    for key, arg in (("actor_loss", "actor_logits"), ("critic_loss", "value_logits")):
        x = inputs[arg].detach().to(F64).requires_grad_(True)
        value = want[key](x)
        (grad,) = torch.autograd.grad(value, x)
        assert_close(clause, key, got[key], value, atol=eps * (1 + float(value.detach().abs())), **case)
        assert_close(clause, f"d {key} / d {arg}", _grad(got[key], inputs, (arg,))[arg], grad,
                     atol=eps * (1e-3 + float(grad.abs().max())), **case)


def check_routing(impl, **case):
    """BEHAV-6."""
    batch, cfg = make_batch(case), config(case)
    inputs = cast(batch, case["dtype"], grad=True)
    got = run_losses(impl, inputs, cfg)
    allowed = {"actor_loss": "actor_logits", "critic_loss": "value_logits"}
    for loss, arg in allowed.items():
        others = [n for n in LOSS_INPUTS if n != arg]
        for name, g in _grad(got[loss], inputs, others).items():
            if bool((g != 0).any()):
                fail("BEHAV-6", f"{loss} has a gradient to '{name}' (max |grad| {float(g.abs().max()):.3g}), "
                                "expected none", **case)
    for key in ("returns", "values", "continues", "weights", "advantage", "entropy"):
        if isinstance(got[key], torch.Tensor) and got[key].requires_grad:
            fail("BEHAV-6", f"the returned {key!r} carries a graph (grad_fn {type(got[key].grad_fn).__name__}), "
                            "expected a stop-gradient diagnostic", **case)
    world = LinearWorld(dict(case, D=2, structure="dict"))
    start = {k: v.detach().requires_grad_(True) for k, v in world.start.items()}
    out = impl.imagine(world.img_step, world.policy, start, case["H"], _gen(case["seed"]))
    if out.logits.requires_grad:
        grads = torch.autograd.grad(out.logits.sum(), list(start.values()), allow_unused=True)
        if any(g is not None and bool((g != 0).any()) for g in grads):
            fail("BEHAV-6", "imagine's logits have a gradient to the start state (policy must see sg(s_t))", **case)
    _check_states_graph(impl, world, case)


def _check_states_graph(impl, world: LinearWorld, case: dict) -> None:
    """Σw·states of imagine differentiated w.r.t. the start state vs the float64 unroll with its actions."""
    start = {k: v.detach().requires_grad_(True) for k, v in world.start.items()}
    out = impl.imagine(world.img_step, world.policy, start, case["H"], _gen(case["seed"]))
    x = world.flat(out.states)  # [H+1, B, 2D]
    w = torch.randn(x.shape, generator=_gen(case["seed"] + 3), dtype=F64)
    got = named_grads((w.to(x.dtype) * x).sum(), start)
    start64 = {k: v.detach().to(F64).requires_grad_(True) for k, v in start.items()}
    rows = [world.flat(start64)]
    for a in out.actions[:-1]:
        rows.append(rows[-1] @ world.M.to(F64) + torch.nn.functional.one_hot(a, case["A"]).to(F64) @ world.N.to(F64))
    want = named_grads((w * torch.stack(rows)).sum(), start64)
    eps = tol(case["dtype"])
    assert_grads_close("BEHAV-6", "Σw·states of imagine w.r.t. the start state (img_step's graph kept)", got, want,
                       atol=eps, rtol=eps, **case)


@st.composite
def scale_cases(draw):
    return dict(seed=draw(seeds), H=draw(st.integers(1, 6)), B=draw(st.integers(2, 4)), A=draw(st.integers(1, 4)),
                continue_mode=draw(st.sampled_from(["mode", "prob"])), scale=10 ** draw(st.floats(0.0, 2.0)),
                dtype=F64, num_bins=255, low=-20.0, high=20.0)


def _scaled_batch(case: dict, scale: float) -> dict:
    """Rewards × scale and critic logits that put all mass on two-hot(symlog(scale·v0)): values = scale·v0."""
    batch, g = make_batch(case), _gen(case["seed"] + 7)
    v0 = 3 * torch.randn(case["H"] + 1, case["B"], generator=g, dtype=F64)
    hb = dict(num_bins=255, low=-20.0, high=20.0)
    twohot = ref_twohot.twohot_encode(ref_twohot.symlog(scale * v0), **hb)
    batch["value_logits"] = torch.log(twohot.clamp_min(1e-300))
    batch["slow_value_logits"] = batch["value_logits"].clone()
    batch["reward"] = scale * batch["reward"]
    return batch


def _converged(impl, batch: dict, cfg: BehaviorConfig) -> dict:
    """The EMA at its fixed point for the returns R the implementation computes on this batch:
    (low, high) = R's 5th/95th percentiles, which one more update leaves unchanged."""
    R = run_losses(impl, batch, cfg)["returns"].detach().to(F64)
    return dict(batch, ema_state=dict(low=percentile(R, 0.05), high=percentile(R, 0.95)))


def check_scale(impl, **case):
    """BEHAV-7."""
    cfg = config(case)
    base = _converged(impl, _scaled_batch(case, 1.0), cfg)
    spread = float(base["ema_state"]["high"] - base["ema_state"]["low"])
    if spread < 0.05:  # (almost) constant returns: no scale to compare at within the support
        return
    k = max(1.0, 1.0 / spread)  # smallest scale with a range >= 1 (= 1/max_range)
    results = [run_losses(impl, _converged(impl, _scaled_batch(case, s), cfg), cfg) for s in (k, k * case["scale"])]
    a, b = results
    assert_close("BEHAV-7", f"advantage at scale {k * case['scale']:.4g} vs at {k:.4g}", b["advantage"],
                 a["advantage"], atol=1e-6 * scaled(a["advantage"]), **case)
    assert_close("BEHAV-7", "actor_loss across scales", b["actor_loss"], a["actor_loss"],
                 atol=1e-6 * (1 + float(a["actor_loss"].abs())), **case)


@st.composite
def terminal_cases(draw):
    H = draw(st.integers(1, 6))
    return dict(seed=draw(seeds), H=H, B=draw(st.integers(1, 4)), A=draw(st.integers(1, 4)), k=draw(st.integers(1, H)),
                dtype=draw(dtypes), num_bins=21, low=-5.0, high=5.0, lam=draw(st.sampled_from([0.95, 0.5])),
                continue_mode=draw(st.sampled_from(["mode", "prob"])))


def check_terminal(impl, **case):
    """BEHAV-8."""
    cfg, dtype, k = config(case), case["dtype"], case["k"]
    batch = make_batch(dict(case, p_terminal=0.0))
    cut = 30.0 if cfg.continue_mode == "prob" else 3.0  # σ(−30) is not 0: the prob-mode cut is approximate
    batch["cont_logits"][1:, 0] = cut
    batch["cont_logits"][k, 0] = -cut
    got = run_losses(impl, cast(batch, dtype), cfg)
    exact = cfg.continue_mode == "mode"
    r_k = batch["reward"][k, 0].to(dtype)
    assert_close("BEHAV-8", f"R_{k - 1} at a terminal c_{k} = 0 (expected r_{k}: no bootstrap)",
                 got["returns"][k - 1, 0], r_k, atol=0.0 if exact else 1e-9 * scaled(got["returns"]), **case)
    if exact and bool((got["weights"][k:, 0] != 0).any()):
        fail("BEHAV-8", f"weights after the terminal row {k} are not 0", weights=got["weights"][:, 0], **case)
    later = {n: batch[n].clone() for n in ("reward", "cont_logits", "value_logits")}
    g = _gen(case["seed"] + 5)
    for n, t in later.items():
        t[k + 1:, 0] += torch.randn(t[k + 1:, 0].shape, generator=g, dtype=F64)
    moved = run_losses(impl, cast({**batch, **later}, dtype), cfg)
    if exact and not torch.equal(moved["returns"][:k, 0], got["returns"][:k, 0]):
        fail("BEHAV-8", f"rows after the terminal row {k} changed R_0..R_{k - 1}",
             before=got["returns"][:k, 0], after=moved["returns"][:k, 0], **case)
    # a timeout: the same column with continue 1 at row k bootstraps from v_k and R_k
    batch["cont_logits"][k, 0] = cut
    out = run_losses(impl, cast(batch, dtype), cfg)
    v, R = out["values"][:, 0].to(F64), torch.cat([out["returns"][:, 0], out["values"][-1:, 0]]).to(F64)
    c_k = 1.0 if exact else torch.sigmoid(torch.tensor(cut, dtype=F64))
    want = batch["reward"][k, 0].to(dtype).to(F64) + cfg.gamma * c_k * ((1 - cfg.lam) * v[k] + cfg.lam * R[k])
    assert_close("BEHAV-8", f"R_{k - 1} at a timeout (continue 1: r_k + γ((1 − λ)v_k + λR_k))", R[k - 1], want,
                 atol=tol(dtype) * scaled(R), **case)
    if float(out["weights"][0, 0]) != 1.0:
        fail("BEHAV-8", "a start state that is not terminal (a timeout) has weight w_0 != 1", **case)
    # a terminal start: its whole column is weighted 0, so no loss gradient reaches it
    term = dict(batch, start_terminal=torch.zeros(case["B"], dtype=torch.bool))
    term["start_terminal"][0] = True
    inputs = cast(term, dtype, grad=True)
    res = run_losses(impl, inputs, cfg)
    if bool((res["weights"][:, 0] != 0).any()):
        fail("BEHAV-8", "a terminal start state's column has non-zero weights", weights=res["weights"][:, 0], **case)
    for loss, arg in (("actor_loss", "actor_logits"), ("critic_loss", "value_logits")):
        grad = _grad(res[loss], inputs, (arg,))[arg][:, 0]
        if bool((grad != 0).any()):
            fail("BEHAV-8", f"{loss} has a gradient to {arg} of a terminal start state's column", **case)


# --------------------------------------------------------------------------------------------------
# Slow critic, bad input
# --------------------------------------------------------------------------------------------------
@st.composite
def slow_cases(draw):
    return dict(seed=draw(seeds), rate=draw(st.sampled_from([0.02, 0.5, 1.0, 0.0])), dtype=draw(dtypes),
                module=draw(st.booleans()))


def check_slow_update(impl, **case):
    """BEHAV-9."""
    g, dtype = _gen(case["seed"]), case["dtype"]
    shapes = [(3, 2), (2,), (1, 4, 2)]
    critic = [torch.randn(s, generator=g, dtype=F64).to(dtype) for s in shapes]
    slow = [torch.randn(s, generator=g, dtype=F64).to(dtype) for s in shapes]
    before = [s.clone() for s in slow]
    if case["module"]:
        mod = lambda ps: torch.nn.ParameterList([torch.nn.Parameter(p) for p in ps])  # noqa: E731
        critic_arg, slow_arg = mod(critic), mod(slow)
        slow = list(slow_arg.parameters())
    else:
        critic_arg, slow_arg = critic, slow
    ptrs = [s.data_ptr() for s in slow]
    impl.update_slow_critic(critic_arg, slow_arg, case["rate"])
    if [s.data_ptr() for s in slow] != ptrs:
        fail("BEHAV-9", "slow parameters were replaced, expected an in-place update", **case)
    for i, (c, s, b) in enumerate(zip(critic, slow, before)):
        want = case["rate"] * c.to(F64) + (1 - case["rate"]) * b.to(F64)
        if case["rate"] in (0.0, 1.0):
            if not torch.equal(s.detach(), (c if case["rate"] == 1.0 else b).detach()):
                fail("BEHAV-9", f"parameter {i}: rate {case['rate']} must {'copy' if case['rate'] else 'keep'} "
                                "exactly", got=s, expected=want, **case)
        assert_close("BEHAV-9", f"parameter {i} = rate·critic + (1 − rate)·slow", s.detach(), want,
                     atol=4 * torch.finfo(dtype).eps * scaled(want), **case)


def check_rejections(impl):
    """BEHAV-10."""
    case = dict(seed=0, H=3, B=2, A=3, num_bins=21, low=-5.0, high=5.0)
    batch, cfg = make_batch(case), config(case)
    f32 = cast(batch, torch.float32)
    ema = ema_from(batch["ema_state"])

    def losses(**over):
        args = {**{k: v for k, v in f32.items() if k != "ema_state"}, "return_ema": ema, "cfg": cfg, **over}
        return lambda: impl.behavior_losses(**args)

    cases = [
        ("cont_logits", losses(cont_logits=f32["cont_logits"][:-1])),
        ("value_logits", losses(value_logits=f32["value_logits"][..., :-1])),
        ("slow_value_logits", losses(slow_value_logits=f32["slow_value_logits"].double())),
        ("actor_logits", losses(actor_logits=f32["actor_logits"][:, :1])),
        ("actions", losses(actions=f32["actions"].float())),
        ("actions", losses(actions=f32["actions"] + 3)),
        ("start_terminal", losses(start_terminal=torch.tensor([0, 2]))),
        ("reward", losses(reward=f32["reward"][:1])),
        ("reward", losses(reward=f32["reward"].masked_fill(torch.eye(4, 2, dtype=torch.bool), math.nan))),
        ("return_ema", losses(return_ema=object())),
        ("cfg", losses(cfg=dict(gamma=0.9))),
        ("horizon", losses(cfg=BehaviorConfig(horizon=5, num_bins=21, low=-5.0, high=5.0))),
        ("gamma", lambda: BehaviorConfig(gamma=1.5)),
        ("lam", lambda: BehaviorConfig(lam=-0.1)),
        ("continue_mode", lambda: BehaviorConfig(continue_mode="sample")),
        ("horizon", lambda: BehaviorConfig(horizon=0)),
        ("entropy_coef", lambda: BehaviorConfig(entropy_coef=-1.0)),
        ("rate", lambda: impl.update_slow_critic([torch.ones(2)], [torch.ones(2)], 1.5)),
        ("slow", lambda: impl.update_slow_critic([torch.ones(2)], [torch.ones(3)], 0.02)),
    ]
    world = LinearWorld(dict(seed=0, A=2, D=1, B=2, structure="tensor", dtype=torch.float32))
    good = (world.img_step, world.policy, world.start, 2, _gen(0))
    cases += [
        ("gen", lambda: impl.imagine(*good[:4], 0)),
        ("horizon", lambda: impl.imagine(*good[:3], 0, _gen(0))),
        ("img_step", lambda: impl.imagine(lambda s, a: s[:1], *good[1:])),
        ("policy", lambda: impl.imagine(good[0], lambda s: s[:1], *good[2:])),
        ("start_state", lambda: impl.imagine(*good[:2], {"a": torch.ones(2, 1), "b": torch.ones(3, 1)}, 2, _gen(0))),
    ]
    for name, call in cases:
        expect_rejection("BEHAV-10", call, names=(name,), what=f"bad '{name}'")
    if BehaviorConfig(gamma=np.float32(0.9)).gamma != float(np.float32(0.9)):
        fail("BEHAV-10", "BehaviorConfig does not take a numpy scalar as the number it holds")


PROPERTIES = (
    Property("BEHAV-1", check_imagine_closed_form, imagine_cases(), IMAGINE_EXAMPLES, ("imagine",)),
    Property("BEHAV-2", check_imagine_generator, imagine_cases(), IMAGINE_EXAMPLES, ("imagine",), max_examples=10),
    Property("BEHAV-3", check_continues_weights, loss_cases(), LOSS_EXAMPLES, ("behavior_losses",)),
    Property("BEHAV-4", check_returns_advantage, loss_cases(), LOSS_EXAMPLES, ("behavior_losses",)),
    Property("BEHAV-5", check_losses, loss_cases(masked=False), tuple(e for e in LOSS_EXAMPLES if not e.get("masked")),
             ("behavior_losses",)),
    Property("BEHAV-6", check_routing, loss_cases(), LOSS_EXAMPLES, ("behavior_losses", "imagine")),
    Property("BEHAV-7", check_scale, scale_cases(),
             (dict(seed=0, H=6, B=4, A=3, continue_mode="mode", scale=100.0, dtype=F64, num_bins=255, low=-20.0,
                   high=20.0),), ("behavior_losses",)),
    Property("BEHAV-8", check_terminal, terminal_cases(),
             (dict(seed=0, H=4, B=3, A=2, k=2, dtype=torch.float32, num_bins=21, low=-5.0, high=5.0, lam=0.95,
                   continue_mode="mode"),), ("behavior_losses",)),
    Property("BEHAV-9", check_slow_update, slow_cases(),
             (dict(seed=0, rate=1.0, dtype=torch.float32, module=True),), ("update_slow_critic",)),
    Property("BEHAV-10", check_rejections, requires=INTERFACE),
    Property("BEHAV-11", check_losses, loss_cases(masked=True), tuple(e for e in LOSS_EXAMPLES if e.get("masked")),
             ("behavior_losses",)),
)

CONTRACT = Contract("behavior", CLAUSES, INTERFACE, PROPERTIES, signatures_from_text(SIGNATURES), categories=CATEGORIES,
                    rationale=RATIONALE, writes={"update_slow_critic": ("slow",)})
