"""Reference ``world_model`` (spec/world_model.py): DreamerV3's world model and reconstruction loss, readable,
deterministic on CPU. Parts from the other contracts: reference/rssm.py, reference/twohot.py (symlog two-hot
reward), reference/packed2.py (the encoder unpacks the replay's uint8 frames itself, seed §3 M4).

    x_t   = flatten(avgpool_pool(crop_frame(unpack_normalized(obs_t))))  [T, B, P]   P = fh·fw / pool²
    e_t   = enc_out(silu(LN(enc_in x_t)))                                [T, B, E]   (encoder 'mlp')
          = flatten(conv_stages(x_t as [1, ph, pw]))                     [T, B, E]   (encoder 'conv')
    (prior, post, h, z) = rssm.observe(e, action, is_first, generator)
    f_t   = [h_t; flatten(z_t)]                                          [T, B, F]
    recon = Σ_pixels (dec(f_t) − x_t)²                                   (MSE summed over pixels)
    rew   = −twohot.log_prob(reward_head(f_t), reward_t)                 (two-hot of symlog(reward))
    cont  = BCE(cont_head(f_t), continue_t)                              (the replay's continue: 1 on truncation)
    head_input 'next': rew and cont read f⁺_t = [img_step(h_t, z_t, action_t)] instead of f_t
    head_input 'posterior': they read f°_t = one posterior step from (h_t, z_t, action_t) on final_obs_t
    kl    = dyn_scale·mean(max(fb, KL(sg(post) ‖ prior))) + rep_scale·mean(max(fb, KL(post ‖ sg(prior))))
    loss  = mean_{t,b}(recon + rew + cont) + kl

each head g(f) = out(silu(LN(in f))), every LayerNorm eps 1e-3 (as the RSSM). KL of S independent
categoricals: KL(p ‖ q) = Σ_{s,k} p (log p − log q) per (t, b).

encoder='conv' (geometry in rlspec/contracts/world_model.py) is sheeprl 0.8.4's ``CNNEncoder`` / ``CNNDecoder``
(``sheeprl/algos/dreamer_v3/agent.py``, built by its ``build_agent`` with ``LayerNormChannelLast`` eps 1e-3 and
SiLU), on one grayscale channel:
    conv stage i:   x ← silu(LN_channels(Conv2d_{k4 s2 p1, no bias}(x)))        C_i = cnn_mult·2^i, sides halve
    decoder:        y = unflatten(Linear(f) → [C_top, h, w]); (stages − 1) × silu(LN_channels(ConvT_{k4 s2 p1,
                    no bias}(y))) with channels C_top/2, ..., cnn_mult; then ConvT_{k4 s2 p1, bias} → 1 channel.
Weights U(−1/√fan_in, 1/√fan_in) from the caller's generator, fan_in = in_features or in_channels·4·4 (a
transposed conv's input channels), as the MLP heads; LayerNorms (1, 0).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rlspec.contracts.rssm import LN_EPS, RSSMOutput, RSSMState
from rlspec.contracts.world_model import (DYN_SCALE, FREE_BITS, REP_SCALE, KLTerms, WorldModelConfig,
                                          validate_batch, validate_kl_args, validate_obs)
from rlspec.reference import packed2, rssm, twohot


def categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) of S independent categoricals: [T, B, S, K] logits -> [T, B]."""
    log_p, log_q = p_logits.log_softmax(-1), q_logits.log_softmax(-1)
    return (log_p.exp() * (log_p - log_q)).sum((-2, -1))


def kl_loss(post_logits: torch.Tensor, prior_logits: torch.Tensor, free_bits: float = FREE_BITS,
            dyn_scale: float = DYN_SCALE, rep_scale: float = REP_SCALE) -> KLTerms:
    """Stop-gradient KL with free bits per (t, b) before the mean (seed §3 M4)."""
    validate_kl_args(post_logits, prior_logits, free_bits, dyn_scale, rep_scale)
    dyn = categorical_kl(post_logits.detach(), prior_logits)  # [T, B]: trains the prior only
    rep = categorical_kl(post_logits, prior_logits.detach())  # [T, B]: trains the posterior only
    loss = dyn_scale * dyn.clamp_min(free_bits).mean() + rep_scale * rep.clamp_min(free_bits).mean()
    return KLTerms(loss, dyn, rep)


class Head(nn.Module):
    """out(silu(LN(in x))): [..., n_in] -> [..., n_out]; ``linear`` the class of ``in`` (a twin's may read its
    own feature type; same parameters)."""

    def __init__(self, n_in: int, hidden: int, n_out: int, linear: type = nn.Linear):
        super().__init__()
        self.inp = linear(n_in, hidden, bias=False)
        self.norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.out = nn.Linear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.silu(self.norm(self.inp(x))))


def channel_norm(norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the channels of [N, C, h, w] (sheeprl LayerNormChannelLast)."""
    return norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def norm_silu(norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """silu(LN_channels(x)) [N, C, h, w]: the activation of every conv stage but the decoder's last."""
    return F.silu(channel_norm(norm, x))


class ConvEncoder(nn.Module):
    """sheeprl CNNEncoder on the flattened pooled frame: [..., ph·pw] -> [..., C·h·w] (module docstring)."""

    memory_format = torch.contiguous_format  # of the activations (a twin may use channels_last)
    norm_silu = staticmethod(norm_silu)  # a twin may fuse it (fast/channel_norm.py)

    def __init__(self, config: WorldModelConfig):
        super().__init__()
        self.shape = config.pooled_shape
        channels = (1, *config.cnn_channels)
        self.convs = nn.ModuleList(nn.Conv2d(c_in, c_out, 4, 2, 1, bias=False)
                                   for c_in, c_out in zip(channels[:-1], channels[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(c, eps=LN_EPS) for c in channels[1:])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = x.reshape(-1, 1, *self.shape).contiguous(memory_format=self.memory_format)  # [N, 1, ph, pw]
        for conv, norm in zip(self.convs, self.norms):
            y = self.norm_silu(norm, conv(y))  # [N, C_i, ph/2^(i+1), pw/2^(i+1)]
        return y.reshape(*lead, -1)


class ConvDecoder(nn.Module):
    """sheeprl CNNDecoder: features [..., F] -> reconstruction [..., ph·pw] (module docstring)."""

    memory_format = torch.contiguous_format
    norm_silu = staticmethod(norm_silu)

    def __init__(self, config: WorldModelConfig):
        super().__init__()
        self.latent = config.conv_latent_shape  # (C_top, h, w)
        self.inp = nn.Linear(config.feature_dim, config.conv_embed_dim)
        channels = (*reversed(config.cnn_channels), 1)
        self.deconvs = nn.ModuleList(nn.ConvTranspose2d(c_in, c_out, 4, 2, 1, bias=c_out == 1)
                                     for c_in, c_out in zip(channels[:-1], channels[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(c, eps=LN_EPS) for c in channels[1:-1])

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        lead = f.shape[:-1]
        y = self.inp(f).reshape(-1, *self.latent).contiguous(memory_format=self.memory_format)  # [N, C_top, h, w]
        for deconv, norm in zip(self.deconvs[:-1], self.norms):
            y = self.norm_silu(norm, deconv(y))  # sides double, channels halve
        return self.deconvs[-1](y).reshape(*lead, -1)  # [..., ph·pw]


def _uniform_(module: nn.Module, fan_in: int, g: torch.Generator) -> None:
    """Every parameter of ``module`` (weight and bias) U(−1/√fan_in, 1/√fan_in) from ``g``."""
    bound = 1 / math.sqrt(fan_in)
    for p in module.parameters():
        p.copy_(torch.rand(p.shape, generator=g) * 2 * bound - bound)


def init_weights(model: nn.Module, g: torch.Generator) -> None:
    """Linear and (transposed) conv weights drawn from ``g`` in module order (LayerNorms keep (1, 0))."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                _uniform_(m, m.in_features, g)
            elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                _uniform_(m, m.in_channels * math.prod(m.kernel_size), g)


class WorldModel(nn.Module):
    RSSM = rssm.RSSM  # the parts a twin swaps (same parameters)
    twohot = twohot
    FeatureLinear = nn.Linear  # the first layer of the reward and continue heads

    def __init__(self, config: WorldModelConfig, generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(config, WorldModelConfig):
            raise TypeError(f"{type(self).__name__}: argument 'config' must be a WorldModelConfig, "
                            f"got {type(config).__name__}")
        self.config = c = config
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        pixels = math.prod(c.pooled_shape)
        self.rssm = self.RSSM(c.rssm_config(), g)
        conv = c.encoder == "conv"
        with torch.random.fork_rng(devices=[]):  # torch's own init draws from the global RNG: undone
            self.encoder = ConvEncoder(c) if conv else Head(pixels, c.hidden, c.embed_dim)
            self.decoder = ConvDecoder(c) if conv else Head(c.feature_dim, c.hidden, pixels)
            self.reward_head = Head(c.feature_dim, c.hidden, c.reward_bins, self.FeatureLinear)
            self.continue_head = Head(c.feature_dim, c.hidden, 1, self.FeatureLinear)
        for part in (self.encoder, self.decoder, self.reward_head, self.continue_head):
            init_weights(part, g)

    # ---- pieces ---------------------------------------------------------------------------------
    def unpack(self, obs: torch.Tensor) -> torch.Tensor:
        """[..., 1, 72, 20] uint8 -> [..., 1, 72, 80] float32 in {0, 1/3, 2/3, 1}."""
        return packed2.unpack_normalized(obs, torch.float32)

    def frames(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [T, B, 1, 72, 20] uint8 -> pooled pixels [T, B, P] (encoder input, reconstruction target)."""
        T, B = validate_obs("WorldModel.frames", obs)
        c = self.config
        (top, left), (fh, fw) = c.crop_offset, c.frame
        x = self.unpack(obs).flatten(0, 1)[..., top:top + fh, left:left + fw]  # [T·B, 1, fh, fw]
        return (F.avg_pool2d(x, c.pool) if c.pool > 1 else x).reshape(T, B, -1)

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [T, B, 1, 72, 20] uint8 -> e [T, B, E]."""
        return self.encoder(self.frames(obs))

    def heads(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """f [..., F] -> (reconstruction [..., P], reward logits [..., bins], continue logit [...])."""
        return self.decode(features), *self.reward_continue(features)

    def decode(self, features: torch.Tensor) -> torch.Tensor:
        """f [..., F] -> reconstruction [..., P]."""
        return self.decoder(features)

    def reward_continue(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """f [..., F] -> (reward logits [..., bins], continue logit [...]): the heads imagination needs (no
        decoder: with the conv decoder it would cost more than the rest of the behaviour update)."""
        return self.reward_head(features), self.continue_head(features).squeeze(-1)

    def next_features(self, out: RSSMOutput, action: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """f⁺ [T, B, F]: one prior step from every posterior state (h_t, z_t) taking action_t (head_input
        'next', contracts/world_model.py); the prior samples drawn from ``generator`` for all T·B at once."""
        T, B = action.shape
        _, h, z = self.rssm.img_step(out.h.flatten(0, 1), out.z.flatten(0, 1), action.flatten(), generator)
        return torch.cat((h, z.flatten(-2)), -1).reshape(T, B, -1)

    def arrival_features(self, out: RSSMOutput, batch, generator: torch.Generator) -> torch.Tensor:
        """f° [T, B, F]: the posterior of the frame each step arrives at (head_input 'posterior',
        contracts/world_model.py): one observe step from every posterior state (h_t, z_t) with action_t taken,
        on embed(final_obs_t); its samples drawn from ``generator`` for all T·B at once."""
        T, B = batch["action"].shape
        taken = F.one_hot(batch["action"].long().flatten(), self.config.num_actions).to(out.h.dtype)  # [T·B, A]
        state = RSSMState(out.h.flatten(0, 1), out.z.flatten(0, 1), taken)
        embed = self.embed(batch["final_obs"].flatten(0, 1).unsqueeze(0))  # [1, T·B, E]
        none = torch.zeros(1, T * B, dtype=torch.bool, device=embed.device)
        step = self.rssm.observe(embed, none.long(), none, generator, state=state)
        return torch.cat((step.h[0], step.z[0].flatten(-2)), -1).reshape(T, B, -1)

    def outcome_features(self, features: torch.Tensor, out: RSSMOutput, batch, generator: torch.Generator
                         ) -> torch.Tensor:
        """What the reward and continue heads read, per head_input: f_t, f⁺_t or f°_t [T, B, F]."""
        layout = self.config.head_input
        if layout == "state":
            return features
        if layout == "next":
            return self.next_features(out, batch["action"], generator)
        return self.arrival_features(out, batch, generator)

    def reward_nll(self, logits: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
        """−log p(reward) under the symlog two-hot head: [T, B, bins], [T, B] -> [T, B]."""
        c = self.config
        return -self.twohot.log_prob(logits, reward.to(logits.dtype), c.reward_bins, c.reward_low, c.reward_high)

    def continue_target(self, batch) -> torch.Tensor:
        """[T, B]: the replay's continue (0 on termination, 1 on truncation and normal steps, seed §2.3)."""
        return batch["continue"].float()

    def kl(self, out: RSSMOutput) -> KLTerms:
        c = self.config
        return kl_loss(out.post_logits, out.prior_logits, c.free_bits, c.dyn_scale, c.rep_scale)

    # ---- the loss -------------------------------------------------------------------------------
    def world_model_loss(self, batch, generator: torch.Generator) -> tuple[torch.Tensor, dict, RSSMOutput]:
        """(loss [], metrics {name: [] detached}, the RSSM output: posterior h [T, B, H], z [T, B, S, K])."""
        validate_batch(self.config, batch)
        x = self.frames(batch["obs"])  # [T, B, P]
        out = self.rssm.observe(self.encoder(x), batch["action"], batch["is_first"], generator)
        features = torch.cat((out.h, out.z.flatten(-2)), -1)  # [T, B, F]
        recon = self.decode(features)
        outcome = self.outcome_features(features, out, batch, generator)
        reward_logits, cont_logits = self.reward_continue(outcome)
        recon_loss = (recon - x).square().sum(-1).mean()
        reward_loss = self.reward_nll(reward_logits, batch["reward"]).mean()
        cont_loss = F.binary_cross_entropy_with_logits(cont_logits, self.continue_target(batch))
        kl = self.kl(out)
        loss = recon_loss + reward_loss + cont_loss + kl.loss
        metrics = dict(loss=loss, recon_loss=recon_loss, reward_loss=reward_loss, continue_loss=cont_loss,
                       kl_loss=kl.loss, dyn_kl=kl.dyn.mean(), rep_kl=kl.rep.mean())
        return loss, {k: v.detach() for k, v in metrics.items()}, out
