"""Reference ``rssm`` (spec/rssm.py): DreamerV3's RSSM as one readable step at a time, deterministic on CPU.

One observe step t (Dreamer plan §3 M3; parameter names in rlspec/contracts/rssm.py)::

    first = is_first[t]
    h, z, a = (h0, z0, 0) where first else (h_{t−1}, z_{t−1}, onehot(action[t−1]))    # reset, action zeroed
    x       = silu(LN(img_in [z; a]))                                                  # model dtype
    r, c, u = chunks of LN(gru [h; x])                                                 # float32 (precision policy)
    h_t     = σ(u − 1)·tanh(σ(r)·c) + (1 − σ(u − 1))·h                                 # float32 state
    prior_t = unimix(prior_out(silu(LN(prior_hidden h_t))))                            # [B, S, K] log-probs
    post_t  = unimix(post_out(silu(LN(post_hidden [h_t; e_t]))))
    z_t     = straight-through one-hot sample of post_t with u_t = rand((B, S), generator)

unimix(l) = log((1 − m)·softmax(l) + m/K); sample index = #{k < K−1 : cdf_k < u} (inverse CDF).
h0 = tanh(initial_h); z0 = one-hot mode of the prior at h0 ('learned') or 0 ('zeros'); both in float32.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from rlspec.contracts.rssm import (UPDATE_BIAS, RSSMConfig, RSSMOutput, RSSMParameters, RSSMState,
                                   validate_img_step, validate_observe)


def float32_region(t: torch.Tensor):
    """Autocast off on ``t``'s device: the GRU and the state run and are kept in float32 (seed §3 M3)."""
    return torch.autocast(device_type=t.device.type, enabled=False) if torch.is_autocast_enabled(t.device.type) \
        else contextlib.nullcontext()


class RSSM(RSSMParameters):
    def __init__(self, config: RSSMConfig, generator: torch.Generator | None = None):
        super().__init__(config, generator)

    # ---- the pieces of one step -----------------------------------------------------------------
    def _latent(self, raw: torch.Tensor) -> torch.Tensor:
        """[..., S·K] raw logits -> [..., S, K] unimix-ed normalized log-probabilities (float32)."""
        c = self.config
        raw = raw.float().unflatten(-1, (c.stoch, c.classes))
        if c.unimix == 0:
            return raw.log_softmax(-1)
        return torch.log((1 - c.unimix) * raw.softmax(-1) + c.unimix / c.classes)

    def _prior(self, h: torch.Tensor) -> torch.Tensor:  # [B, H] -> [B, S, K]
        return self._latent(self.prior_out(F.silu(self.prior_norm(self.prior_hidden(h)))))

    def _posterior(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:  # [B, H], [B, E] -> [B, S, K]
        return self._latent(self.post_out(F.silu(self.post_norm(self.post_hidden(torch.cat((h, e.to(h.dtype)), -1))))))

    def _gru(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """LayerNorm GRU (sheeprl LayerNormGRUCell), in float32 whatever the autocast: [B, H], [B, hidden]."""
        with float32_region(h):
            g = self.gru_norm(self.gru(torch.cat((h.float(), x.float()), -1)))  # [B, 3H]
            reset, cand, update = g.chunk(3, -1)
            reset = torch.sigmoid(reset)
            cand = torch.tanh(reset * cand)
            update = torch.sigmoid(update + UPDATE_BIAS)
            return update * cand + (1 - update) * h.float()

    def _recurrent(self, h: torch.Tensor, z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.img_in_norm(self.img_in(torch.cat((z.flatten(-2), a), -1))))  # [B, hidden]
        return self._gru(h, x)

    def _sample(self, logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Straight-through one-hot sample [B, S, K]: forward one-hot, gradient of the probabilities."""
        u = torch.rand(logits.shape[:-1], generator=generator, device=logits.device)  # [B, S]
        probs = logits.softmax(-1)  # [B, S, K]
        index = (probs.cumsum(-1)[..., :-1] < u.unsqueeze(-1)).sum(-1)  # [B, S]
        one_hot = F.one_hot(index, self.config.classes).to(probs.dtype)
        return one_hot + (probs - probs.detach())  # exactly one-hot forward: (p − p) = 0

    def _initial(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(h0 [B, H], z0 [B, S, K]) in float32."""
        c = self.config
        with float32_region(self.initial_h):
            h0 = torch.tanh(self.initial_h.float()).expand(batch, c.deter)
            if c.initial == "zeros":
                return h0, h0.new_zeros(batch, c.stoch, c.classes)
            mode = self._prior(h0).argmax(-1)  # [B, S]
            return h0, F.one_hot(mode, c.classes).float()

    def _reset(self, first: torch.Tensor, state: RSSMState, init: tuple[torch.Tensor, torch.Tensor]) -> RSSMState:
        """h ← h0, z ← z0, previous action ← 0 where ``first`` [B] (a select: nothing before leaks)."""
        f = first.unsqueeze(-1)
        h0, z0 = init
        return RSSMState(torch.where(f, h0, state.h), torch.where(f.unsqueeze(-1), z0, state.z),
                         torch.where(f, torch.zeros_like(state.action), state.action))

    # ---- the interface --------------------------------------------------------------------------
    def initial_state(self, batch_size: int) -> RSSMState:
        h0, z0 = self._initial(batch_size)
        return RSSMState(h0, z0, h0.new_zeros(batch_size, self.config.num_actions))

    def observe(self, embed: torch.Tensor, action: torch.Tensor, is_first: torch.Tensor,
                generator: torch.Generator, state: RSSMState | None = None) -> RSSMOutput:
        """Posterior scan over embed [T, B, E], action [T, B] ids (taken at obs t), is_first [T, B] bool;
        ``state`` None starts from the initial state."""
        validate_observe(self.config, embed, action, is_first, generator, state)
        T, B = is_first.shape
        state = self.initial_state(B) if state is None else state
        init = self._initial(B)
        priors, posts, hs, zs = [], [], [], []
        for t in range(T):
            prev = self._reset(is_first[t], state, init)
            h = self._recurrent(prev.h, prev.z, prev.action)
            post = self._posterior(h, embed[t])
            z = self._sample(post, generator)
            state = RSSMState(h, z, F.one_hot(action[t].long(), self.config.num_actions).float())
            priors.append(self._prior(h))
            posts.append(post)
            hs.append(h)
            zs.append(z)
        return RSSMOutput(torch.stack(priors), torch.stack(posts), torch.stack(hs), torch.stack(zs), state)

    def img_step(self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One imagined step from (h [B, H], z [B, S, K]) taking action [B] ids: (prior_logits, h', z')."""
        validate_img_step(self.config, h, z, action, generator)
        a = F.one_hot(action.long(), self.config.num_actions).float()
        h = self._recurrent(h, z, a)
        prior = self._prior(h)
        return prior, h, self._sample(prior, generator)
