"""Planted bugs for contract ``rssm``: the reference RSSM with one bug each (one overridden step piece)."""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from planted import Planted

from rlspec.contracts.rssm import UPDATE_BIAS, RSSMState
from rlspec.reference import rssm as ref


class _NoResetH(ref.RSSM):
    """h is carried across is_first (z and the action are reset)."""

    def _reset(self, first, state, init):
        out = super()._reset(first, state, init)
        return out._replace(h=state.h)


class _ResetKeepsAction(ref.RSSM):
    """h and z are reset, the previous action is not zeroed."""

    def _reset(self, first, state, init):
        return super()._reset(first, state, init)._replace(action=state.action)


class _GateWithoutBias(ref.RSSM):
    """update gate σ(u) (PyTorch's GRUCell convention) instead of σ(u − 1)."""

    def _gru(self, h, x):
        g = self.gru_norm(self.gru(torch.cat((h.float(), x.float()), -1)))
        reset, cand, update = g.chunk(3, -1)
        update = torch.sigmoid(update + UPDATE_BIAS + 1)
        return update * torch.tanh(torch.sigmoid(reset) * cand) + (1 - update) * h.float()


class _LayerNormDefaultEps(ref.RSSM):
    """every LayerNorm with torch's default eps 1e-5 instead of 1e-3."""

    def __init__(self, config, generator=None):
        super().__init__(config, generator)
        for m in self.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.eps = 1e-5


class _InitialStateIgnoresW(ref.RSSM):
    """initial='learned' but h0 = 0: the learned W never enters."""

    def _initial(self, batch):
        h0, z0 = super()._initial(batch)
        return torch.zeros_like(h0), z0


class _NoUnimix(ref.RSSM):
    """plain log_softmax: no uniform mixture."""

    def _latent(self, raw):
        c = self.config
        return raw.float().unflatten(-1, (c.stoch, c.classes)).log_softmax(-1)


class _SampledBeforeUnimix(ref.RSSM):
    """the sample is drawn from the unmixed probabilities (unimix applied after sampling)."""

    def _sample(self, logits, generator):
        c = self.config
        probs = logits.softmax(-1)
        raw = ((probs - c.unimix / c.classes) / (1 - c.unimix)).clamp_min(0)
        u = torch.rand(logits.shape[:-1], generator=generator)
        index = (raw.cumsum(-1)[..., :-1] < u.unsqueeze(-1)).sum(-1)
        return F.one_hot(index, c.classes).float() + (probs - probs.detach())


class _GlobalRng(ref.RSSM):
    """the uniforms come from the global RNG; the generator is ignored."""

    def _sample(self, logits, generator):
        return super()._sample(logits, torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ()))))


class _DetachedStraightThrough(ref.RSSM):
    """z = one-hot without the (p − sg(p)) term: no gradient reaches the posterior through z."""

    def _sample(self, logits, generator):
        return super()._sample(logits, generator).detach()


class _HalfStateUnderAutocast(ref.RSSM):
    """the GRU runs in float32 but h is stored in the autocast dtype."""

    def _gru(self, h, x):
        out = super()._gru(h, x)
        return out.to(torch.get_autocast_dtype("cpu")) if torch.is_autocast_enabled("cpu") else out


class _GruInAutocastDtype(ref.RSSM):
    """no float32 region: gates and state update in bf16 under autocast, h cast back to float32 after."""

    def _gru(self, h, x):
        g = self.gru_norm(self.gru(torch.cat((h.to(x.dtype), x), -1)))
        reset, cand, update = g.chunk(3, -1)
        update = torch.sigmoid(update + UPDATE_BIAS)
        out = update * torch.tanh(torch.sigmoid(reset) * cand) + (1 - update) * h.to(g.dtype)
        return out.float()


class _ActionNotShifted(ref.RSSM):
    """h_t is fed action[t] (sheeprl's row layout taken for the seed's): the previous action is skipped."""

    def observe(self, embed, action, is_first, generator, state=None):
        return super().observe(embed, torch.cat((action[1:], action[-1:])), is_first, generator, state)


class _ActionAlwaysZero(ref.RSSM):
    """the action never enters the recurrent step."""

    def _recurrent(self, h, z, a):
        return super()._recurrent(h, z, torch.zeros_like(a))


class _FinalStateWithoutAction(ref.RSSM):
    """the returned state forgets the last action: a continued sequence starts with action 0."""

    def observe(self, embed, action, is_first, generator, state=None):
        out = super().observe(embed, action, is_first, generator, state)
        return out._replace(state=RSSMState(out.state.h, out.state.z, torch.zeros_like(out.state.action)))


class _EmbedDetached(ref.RSSM):
    """the posterior reads sg(embed): the same values, but the encoder would never learn from the KL."""

    def _posterior(self, h, e):
        return super()._posterior(h, e.detach())


class _TruncatedRecurrence(ref.RSSM):
    """h enters each GRU step detached (backprop through one step only): the same values, a shorter gradient."""

    def _gru(self, h, x):
        return super()._gru(h.detach(), x)


def _rssm(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(RSSM=cls)


PLANTED_RSSM = (
    Planted("posterior reads a detached embed", "rssm", _rssm(_EmbedDetached), "RSSM-15", "∂/∂embed",
            ("RSSM-2", "RSSM-4")),
    Planted("recurrence detached between steps", "rssm", _rssm(_TruncatedRecurrence), "RSSM-15", "∂/∂",
            ("RSSM-2", "RSSM-4")),
    Planted("h not reset at is_first", "rssm", _rssm(_NoResetH), "RSSM-3", "history before it replaced",
            ("RSSM-7", "RSSM-8")),
    Planted("reset without zeroing the action", "rssm", _rssm(_ResetKeepsAction), "RSSM-6", "only action",
            ("RSSM-7", "RSSM-8")),
    Planted("update gate sigma(u) instead of sigma(u - 1)", "rssm", _rssm(_GateWithoutBias), "RSSM-4", "h[",
            ("RSSM-3", "RSSM-5")),
    Planted("LayerNorm eps 1e-5", "rssm", _rssm(_LayerNormDefaultEps), "RSSM-4", "h[", ("RSSM-3", "RSSM-8")),
    Planted("learned initial state ignored", "rssm", _rssm(_InitialStateIgnoresW), "RSSM-4", "tanh(initial_h)",
            ("RSSM-3", "RSSM-6")),
    Planted("unimix missing", "rssm", _rssm(_NoUnimix), "RSSM-8", "below unimix/K", ("RSSM-3", "RSSM-6")),
    Planted("unimix applied after sampling", "rssm", _rssm(_SampledBeforeUnimix), "RSSM-10", "expected class",
            ("RSSM-3", "RSSM-8")),
    Planted("global RNG used for sampling", "rssm", _rssm(_GlobalRng), "RSSM-11", "two global seeds",
            ("RSSM-4", "RSSM-8")),
    Planted("straight-through gradient detached", "rssm", _rssm(_DetachedStraightThrough), "RSSM-9", "∂Σw·z",
            ("RSSM-3", "RSSM-4")),
    Planted("bf16 state under autocast", "rssm", _rssm(_HalfStateUnderAutocast), "RSSM-12", "expected float32",
            ("RSSM-3", "RSSM-4")),
    Planted("GRU update in bf16 under autocast", "rssm", _rssm(_GruInAutocastDtype), "RSSM-12",
            "exactly representable in bfloat16", ("RSSM-3", "RSSM-4")),
    Planted("h_t fed action[t] instead of action[t-1]", "rssm", _rssm(_ActionNotShifted), "RSSM-7",
            "must not see", ("RSSM-8", "RSSM-10")),
    Planted("action never enters the step", "rssm", _rssm(_ActionAlwaysZero), "RSSM-7", "does not enter",
            ("RSSM-3", "RSSM-5")),
    Planted("final state forgets the last action", "rssm", _rssm(_FinalStateWithoutAction), "RSSM-13",
            "split at", ("RSSM-3", "RSSM-4")),
)


class _ResetByMultiplication(ref.RSSM):
    """sheeprl's reset (1 − f)·x + f·x0: the same values for a finite history, but 0·NaN = NaN leaks."""

    def _reset(self, first, state, init):
        f = first.unsqueeze(-1).float()
        h0, z0 = init
        return RSSMState((1 - f) * state.h + f * h0, (1 - f.unsqueeze(-1)) * state.z + f.unsqueeze(-1) * z0,
                         (1 - f) * state.action)


PLANTED_RSSM_NONFINITE = (
    Planted("reset by multiplication (NaN before a reset leaks)", "rssm", _rssm(_ResetByMultiplication), "RSSM-16",
            "not finite", ("RSSM-3", "RSSM-5", "RSSM-6")),
)
