"""Planted bugs for contract ``world_model``: the reference kl_loss or WorldModel with one bug each."""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.contracts.world_model import FREE_BITS, WorldModelConfig
from rlspec.reference import packed2, twohot
from rlspec.reference import world_model as ref
from rlspec.reference.world_model import categorical_kl


def _kl_with(dyn_fn, rep_fn, after_mean: bool = False):
    """kl_loss with dyn = dyn_fn(post, prior), rep = rep_fn(post, prior); free bits clamped before or after
    the mean."""

    def kl_loss(post_logits, prior_logits, free_bits=FREE_BITS, dyn_scale=1.0, rep_scale=1.0):
        ref.validate_kl_args(post_logits, prior_logits, free_bits, dyn_scale, rep_scale)
        dyn, rep = dyn_fn(post_logits, prior_logits), rep_fn(post_logits, prior_logits)
        if after_mean:
            loss = dyn_scale * dyn.mean().clamp_min(free_bits) + rep_scale * rep.mean().clamp_min(free_bits)
        else:
            loss = dyn_scale * dyn.clamp_min(free_bits).mean() + rep_scale * rep.clamp_min(free_bits).mean()
        return ref.KLTerms(loss, dyn, rep)

    return kl_loss


def _dyn(post, prior):
    return categorical_kl(post.detach(), prior)


def _rep(post, prior):
    return categorical_kl(post, prior.detach())


class _ContinueFromResets(ref.WorldModel):
    """continue target 0 wherever the next row is is_first: a truncation (time-limit reset) counted as a
    termination."""

    def continue_target(self, batch):
        ends = torch.zeros_like(batch["is_first"])
        ends[:-1] = batch["is_first"][1:]
        return batch["continue"].float() * (~ends).float()


class _RewardTwohotRaw(ref.WorldModel):
    """the reward's two-hot built from the raw reward, not symlog(reward)."""

    def reward_nll(self, logits, reward):
        c = self.config
        target = twohot.twohot_encode(reward.double(), c.reward_bins, c.reward_low, c.reward_high, torch.float32)
        return -(target * logits.double().log_softmax(-1)).sum(-1).to(logits.dtype)


class _UnpackNotNormalized(ref.WorldModel):
    """the encoder sees the 2-bit codes 0..3, not v/3."""

    def unpack(self, obs):
        return packed2.unpack(obs).float()


class _NextHeadsReadTheState(ref.WorldModel):
    """head_input 'next' but the reward and continue heads read the posterior f_t (the room-exit bug:
    a transition's reward and termination predicted without its action)."""

    def next_features(self, out, action, generator):
        return torch.cat((out.h, out.z.flatten(-2)), -1)


class _PosteriorHeadsReadThePrior(ref.WorldModel):
    """head_input 'posterior' but the heads read the prior step after the action (z⁺ sampled from the prior,
    the arrival frame never seen): 'next' under another name."""

    def arrival_features(self, out, batch, generator):
        return self.next_features(out, batch["action"], generator)


class _PosteriorHeadsReadTheRowsFrame(ref.WorldModel):
    """head_input 'posterior' on the row's own frame obs_t instead of the frame the step arrives at."""

    def arrival_features(self, out, batch, generator):
        return super().arrival_features(out, dict(batch, final_obs=batch["obs"]), generator)


class _PosteriorHeadsWithoutTheAction(ref.WorldModel):
    """head_input 'posterior' with the recurrent step fed the previous action instead of action_t (the batch's
    action column read as sheeprl's, shifted by one)."""

    def arrival_features(self, out, batch, generator):
        shifted = torch.cat((torch.zeros_like(batch["action"][:1]), batch["action"][:-1]))
        return super().arrival_features(out, dict(batch, action=shifted), generator)


class _MetricsWithGraph(ref.WorldModel):
    """the loss metric returned with its graph (a logger holding it keeps the whole step alive)."""

    def world_model_loss(self, batch, generator):
        loss, metrics, out = super().world_model_loss(batch, generator)
        return loss, dict(metrics, loss=loss), out


class _InitIgnoresGenerator(ref.WorldModel):
    """the initialization drawn from a fixed seed whatever generator the caller passes."""

    def __init__(self, config, generator=None):
        super().__init__(config, torch.Generator().manual_seed(0))


def _kl_free_bits_straight_through(post_logits, prior_logits, free_bits=FREE_BITS, dyn_scale=1.0, rep_scale=1.0):
    """free bits as x + sg(max(fb, x) − x): the right value, but a KL below the floor still trains."""
    ref.validate_kl_args(post_logits, prior_logits, free_bits, dyn_scale, rep_scale)
    dyn, rep = _dyn(post_logits, prior_logits), _rep(post_logits, prior_logits)
    floor = lambda x: x + (x.clamp_min(free_bits) - x).detach()  # noqa: E731
    return ref.KLTerms(dyn_scale * floor(dyn).mean() + rep_scale * floor(rep).mean(), dyn, rep)


class _KLScalesSwapped(ref.WorldModel):
    """the model passes rep_scale as dyn_scale and back: the same loss value (dyn = rep in value), but the
    prior is trained with the representation scale and the posterior with the dynamics one."""

    def kl(self, out):
        c = self.config
        return ref.kl_loss(out.post_logits, out.prior_logits, c.free_bits, c.rep_scale, c.dyn_scale)


class _ConfigFromAnything(ref.WorldModel):  # a dict of fields is taken for a config, silently
    def __init__(self, config, generator=None):
        super().__init__(WorldModelConfig(**config) if isinstance(config, dict) else config, generator)


def _wm(kl_loss=ref.kl_loss, cls=ref.WorldModel) -> types.SimpleNamespace:
    return types.SimpleNamespace(kl_loss=kl_loss, WorldModel=cls)


PLANTED_WORLD_MODEL = (
    Planted("free bits clamped after the mean", "world_model", _wm(_kl_with(_dyn, _rep, after_mean=True)), "WM-3",
            "clamped after the mean", ("WM-1", "WM-2")),
    Planted("KL without stop-gradient", "world_model", _wm(_kl_with(categorical_kl, categorical_kl)), "WM-2",
            "sends gradient to post_logits", ("WM-1", "WM-3")),
    Planted("dynamics and representation stop-gradients swapped", "world_model", _wm(_kl_with(_rep, _dyn)), "WM-2",
            "sends gradient to post_logits", ("WM-1", "WM-3")),
    Planted("continue 0 on truncation", "world_model", _wm(cls=_ContinueFromResets), "WM-5", "continue_loss",
            ("WM-4", "WM-6")),
    Planted("reward two-hot in raw space", "world_model", _wm(cls=_RewardTwohotRaw), "WM-6", "symlog(reward)",
            ("WM-4", "WM-5")),
    Planted("encoder input not normalized (codes 0..3)", "world_model", _wm(cls=_UnpackNotNormalized), "WM-7",
            "closed form", ("WM-5", "WM-6")),
    Planted("action-conditioned heads read the state before the action", "world_model",
            _wm(cls=_NextHeadsReadTheState), "WM-12", "img_step", ("WM-5", "WM-6")),
    Planted("posterior heads read the prior step (the arrival frame unseen)", "world_model",
            _wm(cls=_PosteriorHeadsReadThePrior), "WM-15", "reward_loss", ("WM-12", "WM-6")),
    Planted("posterior heads on the row's own frame", "world_model", _wm(cls=_PosteriorHeadsReadTheRowsFrame),
            "WM-15", "_loss", ("WM-12", "WM-6")),
    Planted("posterior heads' recurrent step without the step's action", "world_model",
            _wm(cls=_PosteriorHeadsWithoutTheAction), "WM-15", "WM-15", ("WM-12", "WM-6")),
    Planted("a metric returned with its graph", "world_model", _wm(cls=_MetricsWithGraph), "WM-4", "carry a graph",
            ("WM-5", "WM-6")),
    Planted("initialization ignores the caller's generator", "world_model", _wm(cls=_InitIgnoresGenerator), "WM-13",
            "generator is ignored", ("WM-4", "WM-10")),
    Planted("free bits by straight-through (a KL below the floor still trains)", "world_model",
            _wm(_kl_free_bits_straight_through), "WM-14", "∂/∂", ("WM-1", "WM-2", "WM-3")),
    Planted("KL scales swapped between the stop-gradient sides", "world_model", _wm(cls=_KLScalesSwapped), "WM-14",
            "∂/∂", ("WM-4", "WM-8", "WM-10")),
    Planted("a dict taken for the config", "world_model", _wm(cls=_ConfigFromAnything), "WM-11", "config dict",
            ("WM-4", "WM-8")),
)
