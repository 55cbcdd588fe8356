"""Planted bugs for the classes of gaps automated mutants of reference/ slipped through: each is
one surviving mutant of its class, kept so that the clause added to kill it stays."""

from __future__ import annotations

import functools
import types

import torch
from planted import Planted

from rlspec.contracts.replay import readable_range
from rlspec.contracts.twohot import odd_extension
from rlspec.reference import lagrange as ref_lag
from rlspec.reference import modulation as ref_mod
from rlspec.reference import numerics as ref_num
from rlspec.reference import parity as ref_parity
from rlspec.reference import replay as ref_replay
from rlspec.reference import return_ema as ref_ema
from rlspec.reference import shaping as ref_shaping
from rlspec.reference import trust_region as ref_tr
from rlspec.reference import twohot as ref_twohot
from rlspec.reference import vtrace as ref_vtrace


def _twohot(**overrides) -> types.SimpleNamespace:
    base = {n: getattr(ref_twohot, n) for n in ("symlog", "symexp", "twohot_encode", "log_prob", "mean")}
    return types.SimpleNamespace(**{**base, **overrides})


# --- documented defaults -----------------------------------------------------------------------------
def _vtrace_default_rho_bar(log_rho, discount, reward, value, bootstrap_value, rho_bar=2.0, c_bar=1.0, lam=1.0,
                            pg_rho_bar=None):
    return ref_vtrace.vtrace(log_rho, discount, reward, value, bootstrap_value, rho_bar, c_bar, lam, pg_rho_bar)


def _twohot_default_high(fn):
    """``fn`` with the documented high=20.0 default changed to 10.0."""
    @functools.wraps(fn)
    def wrapped(*args, high=10.0, **kwargs):
        return fn(*args, high=high, **kwargs)
    return wrapped


# --- lists of bad calls ------------------------------------------------------------------------------
def _symlog_unchecked(x):  # no dtype check: an int tensor comes back as ints, silently
    return odd_extension(torch.log1p, x.double()).to(x.dtype)


PLANTED_POWER = (
    Planted("vtrace default rho_bar 2.0", "vtrace", types.SimpleNamespace(vtrace=_vtrace_default_rho_bar),
            "VTRACE-14", "omitted vs passed explicitly", ("VTRACE-1", "VTRACE-2", "VTRACE-4")),
    Planted("twohot default high 10.0", "twohot",
            _twohot(**{n: _twohot_default_high(getattr(ref_twohot, n)) for n in ("twohot_encode", "log_prob", "mean")}),
            "TWOHOT-26", "omitted vs passed explicitly", ("TWOHOT-11", "TWOHOT-12", "TWOHOT-14")),
    Planted("symlog accepts int tensors", "twohot", _twohot(symlog=_symlog_unchecked), "TWOHOT-25",
            "symlog with torch.int64 x: accepted silently", ("TWOHOT-1", "TWOHOT-4")),
)


# --- replay: exact decoding, initial counters, defaults, bad calls, copies ---------------------------
class _DecodeModulo(ref_replay.ReplayRing):
    """env = u mod N instead of u // S: still uniform over (env, start), but not the documented decoding."""

    def sample_sequences(self, B, T, generator):
        out = super().sample_sequences(B, T, generator)
        lo, hi = readable_range(self.t, self.committed_t, self.capacity, self.safety_margin)
        S = hi - lo - T + 1
        u = out["env"] * S + out["step"][0] - lo  # the u the reference drew
        env, first = u % self.num_envs, lo + u // self.num_envs
        step = first + torch.arange(T)[:, None]
        store = {k: v[step % self.capacity, env] for k, v in self._store.items()}
        return {**store, "env": env, "step": step}


class _CommittedFromOne(ref_replay.ReplayRing):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.committed_t = 1


class _StrideTwoByDefault(ref_replay.ReplayRing):
    def __init__(self, capacity, num_envs, obs_shape=ref_replay.OBS_SHAPE, obs_dtype=torch.uint8, *,
                 store_flags=False, store_final=False, commit_stride=2, safety_margin=0):
        super().__init__(capacity, num_envs, obs_shape, obs_dtype, store_flags=store_flags, store_final=store_final,
                         commit_stride=commit_stride, safety_margin=safety_margin)


class _AnySlot(ref_replay.ReplayRing):
    def obs_slot(self, t):
        self._slot_step = self.t
        return self._store["obs"][self.t % self.capacity]


class _AliasesEpisodeId(ref_replay.ReplayRing):
    def push(self, *args, **kwargs):
        super().push(*args, **kwargs)
        self._prev_episode_id = kwargs["episode_id"]  # the caller's tensor, not a copy


def _ring(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(ReplayRing=cls)


REPLAY_SPARED = ("REPLAY-2", "REPLAY-3", "REPLAY-10")
PLANTED_POWER_REPLAY = (
    Planted("replay decodes env = u mod N", "replay", _ring(_DecodeModulo), "REPLAY-19", "sample['env']",
            ("REPLAY-2", "REPLAY-9", "REPLAY-10")),
    Planted("replay committed_t starts at 1", "replay", _ring(_CommittedFromOne), "REPLAY-20", "committed_t = 1",
            REPLAY_SPARED),
    Planted("replay commit_stride 2 by default", "replay", _ring(_StrideTwoByDefault), "REPLAY-21",
            "omitted", REPLAY_SPARED),
    Planted("replay obs_slot takes any t", "replay", _ring(_AnySlot), "REPLAY-22", "obs_slot", REPLAY_SPARED),
    Planted("replay keeps the caller's episode_id", "replay", _ring(_AliasesEpisodeId), "REPLAY-23",
            "kept a reference", ("REPLAY-1", "REPLAY-9")),
)


# --- parity: the caller's RNG, the probe's critic losses and entropy ---------------------------------
class _GlobalInit(ref_parity.PPOLagLearner):
    """Also initializes an extra layer the nn.Linear way (global torch RNG), then discards it."""

    def __init__(self, *args):
        super().__init__(*args)
        torch.nn.Linear(2, 2)


class _GlobalInitSemantic(_GlobalInit, ref_parity.SemanticPPOLag):
    pass


class _HalfCriticLoss(ref_parity.PPOLagLearner):
    """Logs 0.5·mean((V − target)²) for the reward critic (the optimized loss is unchanged)."""

    def update(self, batch):
        logs = super().update(batch)
        logs["Loss/Loss_reward_critic"] *= 0.5
        return logs


class _HalfCriticSemantic(_HalfCriticLoss, ref_parity.SemanticPPOLag):
    pass


def _parity(learner, wrapper) -> types.SimpleNamespace:
    return types.SimpleNamespace(make_learner=lambda config, seed: learner(config, seed),
                                 make_semantic_learner=lambda config, sc, seed: wrapper(config, sc, seed),
                                 SEMANTIC_MODULES=ref_parity.SEMANTIC_MODULES)


PLANTED_POWER_PARITY = (
    Planted("learner draws from the global torch RNG", "parity", _parity(_GlobalInit, _GlobalInitSemantic),
            "PARITY-7", "global RNG", ("PARITY-1", "PARITY-6")),
    Planted("reward critic loss logged halved", "parity", _parity(_HalfCriticLoss, _HalfCriticSemantic),
            "PARITY-8", "second difference", ("PARITY-1", "PARITY-6")),
)


# --- lagrange: defaults, start values, copies, bad calls, boundaries --------------------------------
class _DualLimit20(ref_lag.DualAscent):
    def __init__(self, cost_limit=20.0, lr=0.035, lambda_init=0.0):
        super().__init__(cost_limit, lr, lambda_init)


class _PidStartsAtInit(ref_lag.PIDLagrangian):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lagrangian_multiplier = torch.tensor(self.pid_i, dtype=torch.float64)  # OmniSafe reports 0 here


class _DualReturnsState(ref_lag.DualAscent):
    def update(self, jc, scale=1.0):
        super().update(jc, scale)
        return self.lagrangian_multiplier  # the state itself


class _SauteUnchecked(ref_lag.SauteBudget):
    def reset(self, obs):
        self.z = torch.ones(self.num_envs, dtype=torch.float64)
        return torch.cat([obs, self.z[: obs.shape[0], None].to(obs.dtype)], dim=-1)


class _SauteZeroSafe(ref_lag.SauteBudget):
    def step(self, next_obs, reward, cost, done):
        z = (self.z - cost.double() / self.budget) / self.gamma
        shaped = torch.where(z >= 0, reward.double(), torch.full_like(z, self.unsafe_reward))
        self.z = torch.where(done.bool(), torch.ones_like(z), z)
        return self._augment(next_obs), shaped.to(reward.dtype)


def _lag(**overrides) -> types.SimpleNamespace:
    base = {n: getattr(ref_lag, n) for n in ("DualAscent", "OmniSafeLagrange", "PIDLagrangian", "SauteBudget",
                                             "SimmerPID")}
    return types.SimpleNamespace(**{**base, **overrides})


LAG_SPARED = ("LAG-1", "LAG-3", "LAG-9")
PLANTED_POWER_LAGRANGE = (
    Planted("DualAscent default cost_limit 20", "lagrange", _lag(DualAscent=_DualLimit20), "LAG-16",
            "omitted vs passed explicitly", LAG_SPARED),
    Planted("PIDLagrangian reports λ_0 before its first update", "lagrange", _lag(PIDLagrangian=_PidStartsAtInit),
            "LAG-17", "before any update", ("LAG-1", "LAG-3")),
    Planted("DualAscent returns its state tensor", "lagrange", _lag(DualAscent=_DualReturnsState), "LAG-20",
            "return a copy", LAG_SPARED + ("LAG-17",)),
    Planted("Sauté reset takes any batch", "lagrange", _lag(SauteBudget=_SauteUnchecked), "LAG-18",
            "SauteBudget(3).reset", ("LAG-3", "LAG-9", "LAG-10")),
    Planted("Sauté z = 0 counted as safe", "lagrange", _lag(SauteBudget=_SauteZeroSafe), "LAG-19", "z = 0 is unsafe",
            ("LAG-9", "LAG-10")),
)


# --- return_ema: defaults, detached state, copies ---------------------------------------------------
class _EmaDecay09(ref_ema.ReturnEMA):
    def __init__(self, decay=0.9, **kwargs):
        super().__init__(decay, **kwargs)


class _EmaKeepsGraph(ref_ema.ReturnEMA):
    def update(self, x):
        d = self.decay
        self.low = d * self.low + (1 - d) * ref_ema.percentile(x, self.percentile_low)
        self.high = d * self.high + (1 - d) * ref_ema.percentile(x, self.percentile_high)
        return self.low.clone(), torch.clamp(self.high - self.low, min=1 / self.max_range)


class _EmaReturnsState(ref_ema.ReturnEMA):
    def update(self, x):
        _, invscale = super().update(x)
        return self.low, invscale

    def state_dict(self):
        return {"low": self.low, "high": self.high}


def _ema(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(ReturnEMA=cls)


PLANTED_POWER_EMA = (
    Planted("ReturnEMA default decay 0.9", "return_ema", _ema(_EmaDecay09), "REMA-10", "omitted vs passed explicitly",
            ("REMA-1", "REMA-2")),
    Planted("ReturnEMA state keeps the graph", "return_ema", _ema(_EmaKeepsGraph), "REMA-11", "autograd graph",
            ("REMA-1", "REMA-2")),
    Planted("ReturnEMA returns its state tensors", "return_ema", _ema(_EmaReturnsState), "REMA-12", "return copies",
            ("REMA-1", "REMA-2")),
)


# --- modulation: detached scale, defaults -----------------------------------------------------------
def _modulation_keeps_graph(preds, episodes_completed, **kwargs):
    m = ref_mod.modulation_scale(preds, episodes_completed, **kwargs)
    return m + 0 * preds.sum() if isinstance(m, torch.Tensor) and preds.requires_grad else m


def _modulation_p50(preds, episodes_completed, *, threshold_percentile=50.0, **kwargs):
    return ref_mod.modulation_scale(preds, episodes_completed, threshold_percentile=threshold_percentile, **kwargs)


PLANTED_POWER_MODULATION = (
    Planted("modulation scale keeps the graph", "modulation",
            types.SimpleNamespace(modulation_scale=_modulation_keeps_graph), "MOD-11", "requires grad",
            ("MOD-1", "MOD-2")),
    Planted("modulation default percentile 50", "modulation", types.SimpleNamespace(modulation_scale=_modulation_p50),
            "MOD-12", "omitted vs passed explicitly", ("MOD-1", "MOD-2")),
)


# --- numerics: defaults, bad calls, thresholds, copies -----------------------------------------------
def _numerics(**overrides) -> types.SimpleNamespace:
    names = ("safe_standardize", "safe_zero_center", "RunningMeanStd", "ObsNormalizer", "ratio_guard", "LossGuard",
             "masked_component_weights", "kl_early_stop", "kl_guarded_updates", "value_loss", "masked_mean",
             "masked_policy_loss", "entropy_loss")
    return types.SimpleNamespace(**{**{n: getattr(ref_num, n) for n in names}, **overrides})


def _value_loss_clip_11(values, old_values, returns, value_clip=11.0):
    return ref_num.value_loss(values, old_values, returns, value_clip)


def _masked_mean_any_dtype(x, mask):
    return ref_num.masked_mean(x.double(), mask).to(x.dtype)


def _standardize_strict(x, eps=ref_num.STD_EPS):  # sigma == eps zero-centres instead of standardizing
    if x.numel() > 1:
        c = x.double() - x.double().mean()
        if float(c.pow(2).sum() / (x.numel() - 1)) ** 0.5 == eps:
            return c.to(x.dtype)
    return ref_num.safe_standardize(x, eps)


class _RmsSharesState(ref_num.RunningMeanStd):
    def state_dict(self):
        return {"mean": self.mean, "var": self.var, "count": self.count}


NUM_SPARED = ("NUM-3", "NUM-6", "NUM-19", "NUM-20")
PLANTED_POWER_NUMERICS = (
    Planted("value_loss default clip 11", "numerics", _numerics(value_loss=_value_loss_clip_11), "NUM-24",
            "omitted vs passed explicitly", NUM_SPARED),
    Planted("masked_mean takes int x", "numerics", _numerics(masked_mean=_masked_mean_any_dtype), "NUM-25",
            "masked_mean with int64 x", ("NUM-20",)),
    Planted("safe_standardize zero-centres at sigma == eps", "numerics", _numerics(safe_standardize=_standardize_strict),
            "NUM-26", "sigma = 2 == eps", ("NUM-2", "NUM-3")),
    Planted("RunningMeanStd.state_dict shares its tensors", "numerics", _numerics(RunningMeanStd=_RmsSharesState),
            "NUM-27", "return copies", ("NUM-6", "NUM-7", "NUM-9")),
)


# --- shaping: defaults, bad calls, the clamp counter, pool copies -------------------------------------
class _NormScale2(ref_shaping.MarginNormalizer):
    def __init__(self, norm_window=1000, margin_scale=2.0, margin_norm_enable=True):
        super().__init__(norm_window, margin_scale, margin_norm_enable)


def _additive_unchecked(reward, beta, margin, captured):
    return torch.where(captured.bool(), (reward.double() + beta * margin.double()).to(reward.dtype), reward)


class _CountsAtTwo(ref_shaping.MarginNormalizer):
    def __call__(self, m):
        before = self.clamp_count
        out = super().__call__(m)
        y = m.double() * self.margin_scale if not self.margin_norm_enable else None
        if y is not None:
            self.clamp_count = before + int((y.abs() >= 2.0).sum())
        return out


class _PoolAliases(ref_shaping.TemporalPool):
    def __call__(self, e, captured):
        out = torch.zeros(self.num_envs, self.dim, dtype=torch.float64)
        for b, window in enumerate(self.windows):
            if bool(captured[b]):
                window.append(e[b].double())  # a view of the caller's tensor when e is float64
            if window:
                out[b] = torch.stack(list(window)).mean(0)
        return out.to(e.dtype)


def _shaping(**overrides) -> types.SimpleNamespace:
    names = ("prompt_centroid", "semantic_margin", "beta_schedule", "additive_shaping", "MarginNormalizer",
             "PotentialShaper", "TemporalPool")
    return types.SimpleNamespace(**{**{n: getattr(ref_shaping, n) for n in names}, **overrides})


PLANTED_POWER_SHAPING = (
    Planted("MarginNormalizer default scale 2", "shaping", _shaping(MarginNormalizer=_NormScale2), "SHAPE-19",
            "omitted vs passed explicitly", ("SHAPE-1",)),
    Planted("additive_shaping unvalidated", "shaping", _shaping(additive_shaping=_additive_unchecked), "SHAPE-20",
            "additive_shaping with margin (2,)", ("SHAPE-1",)),
    Planted("clamp counter counts |y| == 2", "shaping", _shaping(MarginNormalizer=_CountsAtTwo), "SHAPE-21",
            "1 clamp", ("SHAPE-1",)),
    Planted("TemporalPool keeps views", "shaping", _shaping(TemporalPool=_PoolAliases), "SHAPE-22", "keep copies",
            ("SHAPE-1",)),
)


def _ratio_guard_no_log_clamp(new_log_prob, old_log_prob):
    """e^Δ clamped only after the exp: Δ = 800 gives exp = inf and a NaN gradient (0·inf)."""
    d = new_log_prob.double() - old_log_prob.double()
    finite = torch.isfinite(d)
    ratio = torch.exp(torch.where(finite, d, torch.zeros_like(d))).clamp(ref_num.RATIO_MIN, ref_num.RATIO_MAX)
    _, events = ref_num.ratio_guard(new_log_prob.detach(), old_log_prob.detach())
    return torch.where(finite, ratio, torch.ones_like(ratio)).to(new_log_prob.dtype), events


PLANTED_POWER_NUMERICS_GRAD = (
    Planted("ratio_guard exp before the log-ratio clamp", "numerics", _numerics(ratio_guard=_ratio_guard_no_log_clamp),
            "NUM-28", "finite, 0 where clamped", ("NUM-13", "NUM-14")),
)


class _CriticAscent(ref_parity.PPOLagLearner):
    """The cost critic's term enters L with the wrong sign: the Adam step ascends its loss."""

    def __init__(self, *args):
        super().__init__(*args)
        self.cfg = dict(self.cfg, cost_vf_coef=-self.cfg["cost_vf_coef"])


class _CriticAscentSemantic(_CriticAscent, ref_parity.SemanticPPOLag):
    pass


PLANTED_POWER_PARITY_DESCENT = (
    Planted("cost critic ascended", "parity", _parity(_CriticAscent, _CriticAscentSemantic), "PARITY-9",
            "Loss/Loss_cost_critic", ("PARITY-1", "PARITY-6")),
)


# --- trust_region: the multipliers cpo_step reports ----------------------------------------------------
def _cpo_lambda_doubled(*args, **kwargs):
    out = ref_tr.cpo_step(*args, **kwargs)
    return out._replace(lam=2 * out.lam) if int(out.case) in (3, 4) else out


PLANTED_POWER_TRUST_REGION = (
    Planted("cpo_step reports 2/α as λ for a TRPO step", "trust_region",
            types.SimpleNamespace(**{**{n: getattr(ref_tr, n) for n in ("conjugate_gradient", "fisher_vector_product",
                                                                        "natural_step", "line_search", "p3o_loss")},
                                     "cpo_step": _cpo_lambda_doubled}),
            "TR-15", "lam", ("TR-10", "TR-11")),
)


class _SampleTwice(ref_parity.PPOLagLearner):
    """Each epoch sees the first sample twice (an overlapping minibatch): the logged means are skewed."""

    def update(self, batch):
        twice = {k: (torch.cat([v, v[:1]]) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
        return super().update(twice)


class _SampleTwiceSemantic(_SampleTwice, ref_parity.SemanticPPOLag):
    pass


PLANTED_POWER_PARITY_PARTITION = (
    Planted("a sample counted twice per epoch", "parity", _parity(_SampleTwice, _SampleTwiceSemantic), "PARITY-10",
            "do not partition the batch", ("PARITY-1", "PARITY-7")),
)


def _p3o_cost_clip_default(ratio, adv_r, adv_c, cost_violation, kappa=ref_tr.P3O_KAPPA, clip_ratio=ref_tr.P3O_CLIP,
                           cost_clip=True):
    return ref_tr.p3o_loss(ratio, adv_r, adv_c, cost_violation, kappa, clip_ratio, cost_clip)


PLANTED_POWER_TRUST_REGION_DEFAULTS = (
    Planted("p3o_loss clips the cost surrogate by default", "trust_region",
            types.SimpleNamespace(**{**{n: getattr(ref_tr, n) for n in ("conjugate_gradient", "fisher_vector_product",
                                                                        "natural_step", "line_search", "cpo_step")},
                                     "p3o_loss": _p3o_cost_clip_default}),
            "TR-16", "omitted vs passed explicitly", ("TR-10", "TR-11")),
)


class _NoBatchCheck(ref_parity.PPOLagLearner):
    """Skips validate_batch: a missing key surfaces as a KeyError from deep inside the update."""

    def update(self, batch):
        saved = ref_parity.validate_batch
        ref_parity.validate_batch = lambda *a: None
        try:
            return super().update(batch)
        finally:
            ref_parity.validate_batch = saved


class _NoBatchCheckSemantic(_NoBatchCheck, ref_parity.SemanticPPOLag):
    pass


PLANTED_POWER_PARITY_BATCH = (
    Planted("update does not validate its batch", "parity", _parity(_NoBatchCheck, _NoBatchCheckSemantic),
            "PARITY-11", "bad batch", ("PARITY-1", "PARITY-6")),
)


class _NoEpisodeReset(ref_parity.SemanticPPOLag):
    """The enabled hook ignores is_first: pooled embeddings and potentials leak across episodes."""

    def process_rewards(self, reward, step, embeddings=None, captured=None, is_first=None):
        return super().process_rewards(reward, step, embeddings, captured, None)


PLANTED_POWER_PARITY_SEMANTIC = (
    Planted("enabled hook ignores episode starts", "parity", _parity(ref_parity.PPOLagLearner, _NoEpisodeReset),
            "PARITY-12", "shaped reward", ("PARITY-1", "PARITY-4")),
)


def _fvp_marks_params(kl_fn, params, damping=ref_tr.CG_DAMPING):
    """Differentiates the caller's params tensor itself (no detach): it is left requiring grad."""
    def fvp(v):
        theta = params.requires_grad_(True)
        (grad,) = torch.autograd.grad(kl_fn(theta), theta, create_graph=True)
        (hv,) = torch.autograd.grad(grad @ v.to(grad.dtype), theta)
        return hv + damping * v
    return fvp


PLANTED_POWER_TRUST_REGION_HYGIENE = (
    Planted("fvp marks the caller's params as requiring grad", "trust_region",
            types.SimpleNamespace(**{**{n: getattr(ref_tr, n) for n in ("conjugate_gradient", "natural_step",
                                                                        "line_search", "cpo_step", "p3o_loss")},
                                     "fisher_vector_product": _fvp_marks_params}),
            "TR-18", "requires_grad", ("TR-5", "TR-6", "TR-17")),
)


class _NoZeroGrad(ref_parity.PPOLagLearner):
    """Never clears the gradients: each Adam step sees the sum of every minibatch gradient so far."""

    def __init__(self, *args):
        super().__init__(*args)
        self.optimizer.zero_grad = lambda set_to_none=True: None


class _NoZeroGradSemantic(_NoZeroGrad, ref_parity.SemanticPPOLag):
    pass


PLANTED_POWER_PARITY_FRESH_GRAD = (
    Planted("gradients accumulate across minibatches", "parity", _parity(_NoZeroGrad, _NoZeroGradSemantic),
            "PARITY-13", "zero_grad", ("PARITY-1", "PARITY-6")),
)
