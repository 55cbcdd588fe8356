"""Fast ``rssm`` twin: the reference's step pieces (float32 GRU, unimix, sampler) with the work that does not
depend on the recurrence taken out of the time loop, as sheeprl 0.8.4 does (``project_observations``,
``prior_logits`` of a whole sequence):

* the posterior's first layer is split, W [h; e] = W_h h + W_e e: W_e e is one matmul over [T·B, E];
* the input layer is split likewise, W [z; a] = W_z z + W_a a: the previous actions (shifted, zeroed at
  is_first) are projected for the whole window at once;
* the priors do not feed the recurrence: one pass over h [T, B, H] after the loop.

Per step the loop keeps W_z z, the GRU, W_h h and the posterior head (``_observe_step``, the piece that
fast/world_model_compiled.py compiles), then the sample. The sample is the reference's inverse CDF, the same
comparisons as a binary search (``torch.searchsorted``: the count of cumsum entries below u), and without the
straight-through terms where no gradient is recorded (imagination): the same one-hot either way. Same
parameters (state_dict) and interface as the reference; the sums of split matmuls round differently (float32
parity ~1e-6).

``img_step`` also takes z as its class indices [B, S] int64 (z exactly one-hot: the imagination of the fast
kit, rlspec/algos/dreamer.py) and then returns z' as indices too: W_z z is a gather-sum of W_z's columns
(fast/onehot.py), not a matmul with the [B, S·K] one-hot, and the sample's index is returned, no one-hot
built. No gradient reaches z that way; observe keeps the dense path (its z carries the straight-through
gradient).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlspec.contracts.rssm import RSSMOutput, RSSMState, validate_img_step, validate_observe
from rlspec.fast import onehot
from rlspec.reference import rssm as ref

BACKEND_NOTE = "split projections hoisted out of the scan"


class RSSM(ref.RSSM):
    def _draw(self, logits: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference's draw from the same uniforms: (probs [B, S, K], index [B, S] = #{k < K−1: cumsum_k < u})."""
        u = torch.rand(logits.shape[:-1], generator=generator, device=logits.device)  # [B, S]
        probs = logits.softmax(-1)  # [B, S, K]
        cdf = probs.cumsum(-1)[..., :-1].contiguous()  # [B, S, K−1] non-decreasing
        return probs, torch.searchsorted(cdf, u.unsqueeze(-1)).squeeze(-1)  # [B, S]: entries < u (side left)

    def _sample(self, logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The reference's sample [B, S, K] (``_draw``)."""
        probs, index = self._draw(logits, generator)
        one_hot = F.one_hot(index, self.config.classes).to(probs.dtype)
        if not (torch.is_grad_enabled() and probs.requires_grad):
            return one_hot
        return one_hot + (probs - probs.detach())  # straight-through: forward one-hot, gradient of probs

    def _sample_index(self, logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The class indices [B, S] int64 of ``_sample`` (the same draw, no one-hot built)."""
        return self._draw(logits, generator)[1]

    def _observe_step(self, h, z, first, h0, z0, action_proj, embed_proj, w_z, w_h):
        """One posterior step up to the sample: reset where ``first`` [B, 1], then (h_t [B, H], post_t [B, S, K])
        from the carried h [B, H], z [B, S, K] and the hoisted projections [B, hidden] of this step."""
        h = torch.where(first, h0, h)
        z = torch.where(first.unsqueeze(-1), z0, z)
        x = F.silu(self.img_in_norm(F.linear(z.flatten(-2), w_z) + action_proj))  # [B, hidden]
        h = self._gru(h, x)
        return h, self._latent(self.post_out(F.silu(self.post_norm(F.linear(h, w_h) + embed_proj))))

    def observe(self, embed: torch.Tensor, action: torch.Tensor, is_first: torch.Tensor,
                generator: torch.Generator, state: RSSMState | None = None) -> RSSMOutput:
        validate_observe(self.config, embed, action, is_first, generator, state)
        c = self.config
        T, B = is_first.shape
        sk = c.stoch * c.classes
        state = self.initial_state(B) if state is None else state
        h0, z0 = self._initial(B)
        w_z, w_a = self.img_in.weight[:, :sk], self.img_in.weight[:, sk:]
        w_h, w_e = self.post_hidden.weight[:, : c.deter], self.post_hidden.weight[:, c.deter:]
        taken = F.one_hot(action.long(), c.num_actions).to(state.action.dtype)  # [T, B, A]
        prev_action = torch.cat((state.action.unsqueeze(0), taken[:-1]))  # [T, B, A]: a_{t−1}
        action_proj = F.linear(prev_action.masked_fill(is_first.unsqueeze(-1), 0), w_a)  # [T, B, hidden]
        embed_proj = F.linear(embed.to(w_e.dtype), w_e)  # [T, B, hidden]
        first = is_first.unsqueeze(-1)  # [T, B, 1]
        h, z = state.h, state.z
        posts, hs, zs = [], [], []
        for t in range(T):
            h, post = self._observe_step(h, z, first[t], h0, z0, action_proj[t], embed_proj[t], w_z, w_h)
            z = self._sample(post, generator)
            posts.append(post)
            hs.append(h)
            zs.append(z)
        hs = torch.stack(hs)  # [T, B, H]
        last = RSSMState(h, z, taken[-1].float())
        return RSSMOutput(self._prior(hs), torch.stack(posts), hs, torch.stack(zs), last)

    def img_step(self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The reference's img_step; z one-hot [B, S, K] or its class indices [B, S] int64, and z' in the form of
        z (module docstring)."""
        if z.dtype != torch.int64:
            return super().img_step(h, z, action, generator)
        c = self.config
        if z.dim() != 2 or z.shape[0] != h.shape[0] or z.shape[1] != c.stoch:
            raise ValueError(f"img_step: argument 'z' (class indices, int64) has shape {list(z.shape)}, expected "
                             f"[{h.shape[0]}, {c.stoch}] (B of h, stoch)")
        # h, action and generator checked as the reference does; z stands in as a zero-cost expanded [B, S, K]
        validate_img_step(c, h, h.new_zeros(()).expand(h.shape[0], c.stoch, c.classes), action, generator)
        sk = c.stoch * c.classes
        w = self.img_in.weight  # [hidden, S·K + A]
        a = F.one_hot(action.long(), c.num_actions).to(w.dtype)  # [B, A]
        x = onehot.onehot_matmul(z, w[:, :sk], c.classes) + F.linear(a, w[:, sk:])  # W [z; a]: [B, hidden]
        h = self._gru(h, F.silu(self.img_in_norm(x)))
        prior = self._prior(h)
        return prior, h, self._sample_index(prior, generator)
