"""DreamerV3's functional core (Dreamer plan M3–M5; README "Layout"): one learner update and one acting step
over explicit state, the contract implementations injected through a ``Kit``; no IO, no global RNG (every
draw from the caller's ``torch.Generator``). Engines only decide where and when these run.

    state = make_state(cfg, num_actions, kit, gen)
    metrics = train_step(state, batch, gen)                           # batch: the replay's [T, B] sequences
    action, carry = policy_step(state, obs, prev_action, is_first, carry, gen)

One ``train_step``:
  1. world model: loss = recon + reward + continue + KL on the batch (contract world_model), Adam step with
     the gradient norm clipped to ``wm_clip``.
  2. imagination (contract behavior ``imagine``) of ``horizon`` steps from every posterior state (h_t, z_t)
     of the batch, detached: s_0 .. s_H, a_t ~ π(·|s_t).
  3. behaviour losses (``behavior_losses``) on the imagined features; actor and critic Adam steps (clipped
     to ``actor_clip``, ``critic_clip``); then the slow critic EMA (``update_slow_critic``, rate slow_rate).

Guards: a stop, not a skip (the PPO family's LossGuard zeroes a non-finite loss and goes on). A replay batch
holds no non-finite value (the replay refuses one at push; a reward beyond the two-hot range is clipped to its
last bin), so a non-finite loss here means the model overflowed, and skipping its step would go on imagining
with that model. The engines read the metrics (every update in the reference engine, every row in the fast
one) and stop as Diverged naming them; the last clean checkpoint is kept.

Row alignment (the two contracts state different conventions; this file joins them):
  * world_model's heads read f_t and predict the reward and continue of the transition OUT of s_t (the
    replay row t = (obs_t, action_t, reward of that step, continue of that step): the Dreamer plan §2.3).
  * behavior uses sheeprl's ARRIVAL alignment: reward[t], cont_logits[t] belong to arriving at s_t, row 0
    unused (c_0 = 1 − start_terminal), R_t = r_{t+1} + γ c_{t+1}(...).
  With ``head_input`` "next" (the default here; contracts/world_model.py) the heads are trained on
  f⁺_t = img_step(h_t, z_t, action_t), one prior step after the action, and an imagined s_t (t >= 1) is
  exactly such a step: they read s_t for the transition arriving at s_t, no shift:
      reward_b[t] = reward_head(f_t),  cont_b[t] = cont_head(f_t)           for t = 1..H   (row 0: zeros)
  "posterior" (sheeprl's heads: the posterior of the frame a step arrives at, the replay's final_obs) is
  trained on the state arrived at too; in imagination that state is the prior step, as for "next": no shift.
  With "state" (the contract's default, the golden fixtures' layout) the heads read the state a transition
  leaves, so the rows are shifted down by one:
      reward_b[t] = reward_head(f_{t−1}),  cont_b[t] = cont_head(f_{t−1})   for t = 1..H   (row 0: zeros)
  and then the reward and continue of a_{t−1} do not depend on a_{t−1} (f_{t−1} does not contain it): the
  actor cannot learn which action enters the door (the room-exit policy stayed at the random rate).
  start_terminal = 0 either way: in the transition layout a terminal observation is never a replay row, so no
  start state is terminal (its "terminal" is the continue of the transition out of it, cont_b[1]).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from rlspec import registry
from rlspec.algos.config import ENGINE_ONLY, PRECISIONS, DreamerConfig  # noqa: F401  (re-exported)
from rlspec.contracts.behavior import BehaviorConfig, sample_categorical
from rlspec.contracts.rssm import RSSMState
from rlspec.contracts.world_model import WorldModelConfig, conv_latent_shape
from rlspec.models import dreamer as nets


def world_model_config(cfg: DreamerConfig, num_actions: int) -> WorldModelConfig:
    """The world_model contract's config of ``cfg`` (the conv encoder's embedding size from its geometry)."""
    conv = cfg.encoder == "conv"
    embed = math.prod(conv_latent_shape(cfg.frame, cfg.pool, cfg.cnn_mult, cfg.cnn_stages)) if conv else cfg.embed_dim
    return WorldModelConfig(num_actions=num_actions, **{**cfg.shared(WorldModelConfig), "embed_dim": embed})


def behavior_config(cfg: DreamerConfig) -> BehaviorConfig:
    return BehaviorConfig(**cfg.shared(BehaviorConfig))


def features(h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """[..., H], [..., S, K] -> f [..., H + S·K]."""
    return torch.cat((h, z.flatten(-2)), -1)


def dense_features(h: torch.Tensor, z: torch.Tensor, classes: int) -> torch.Tensor:
    """The reference kit's ``Kit.features``: ``features(h, z)`` (z one-hot [..., S, K]; ``classes`` unused)."""
    return features(h, z)


def same_latent(z: torch.Tensor) -> torch.Tensor:
    """The reference kit's ``Kit.latent``: imagination carries z [..., S, K] itself."""
    return z


KIT_CONTRACTS = ("world_model", "behavior", "twohot", "return_ema")  # what a Kit is built from (registry)
# kits whose world model is a variant of the fast twin's (same parameters, same contract; not in the registry: the
# variants compile or interpret kernels, too slow for every `rlspec check`)
WORLD_MODEL_VARIANTS = {"fast-compiled": "rlspec.fast.world_model_compiled",
                        "fast-triton": "rlspec.fast.world_model_triton"}


@dataclass(frozen=True)
class Kit:
    """The contract implementations the core calls: the modules rlspec/registry.py registers for the reference
    kit or the fast twins. ``latent``, ``features`` and ``Linear`` choose how imagination carries z and how its
    readers take f = [h; flatten(z)]: the reference kit dense (z [..., S, K], ``torch.cat``), the fast kits as
    fast/onehot.py's Features (z's class indices; every Linear over f a gather-sum of weight columns instead of a
    matmul with the one-hot)."""

    WorldModel: type  # contract world_model (its RSSM inside: contract rssm)
    imagine: Callable[..., Any]  # contract behavior
    behavior_losses: Callable[..., Any]
    update_slow_critic: Callable[..., None]
    twohot_mean: Callable[..., torch.Tensor]  # contract twohot
    ReturnEMA: type  # contract return_ema
    latent: Callable[[torch.Tensor], Any] = same_latent  # z [..., S, K] one-hot -> the latent imagination carries
    features: Callable[..., Any] = dense_features  # (h [..., H], latent, K) -> f, what the actor, critic, heads read
    Linear: type = nn.Linear  # class of the actor's and critic's first layer (reads f)

    @classmethod
    def reference(cls) -> Kit:
        return cls.named("reference")

    @classmethod
    def fast(cls, compile: bool = False, fused_gru: bool = False) -> Kit:
        """The fast twins (rlspec/registry.py "fast-torch"): the world model with the fast RSSM and two-hot
        inside, the fused behaviour losses, the fast two-hot mean and ReturnEMA. Same parameters as the
        reference kit (a state_dict loads into either), float32 parity ~1e-6 per step. One of two world-model
        variants may be chosen: ``compile``, fast/world_model_compiled.py (torch.compile of the RSSM steps,
        heads and KL; compiles on the first updates, losses within ~1e-5 relative of eager); ``fused_gru``,
        fast/world_model_triton.py (the Triton LayerNorm-GRU: CUDA, or the interpreter on CPU)."""
        if compile and fused_gru:
            raise ValueError("Kit.fast: arguments 'compile' and 'fused_gru' are both True, expected at most one "
                             "(torch.compile through the Triton GRU's autograd.Function is not supported here)")
        return cls.named("fast-compiled" if compile else "fast-triton" if fused_gru else "fast")

    @classmethod
    def named(cls, name: str) -> Kit:
        """"reference", "fast", "fast-compiled" (``Kit.fast(compile=True)``) or "fast-triton"
        (``Kit.fast(fused_gru=True)``)."""
        if name not in KITS:
            raise ValueError(f"Kit.named: argument 'name' is {name!r}, expected one of {list(KITS)}")
        m = registry.kit_modules("reference" if name == "reference" else "fast", KIT_CONTRACTS)
        variant = WORLD_MODEL_VARIANTS.get(name)
        world_model = importlib.import_module(variant) if variant else m["world_model"]
        sparse = {}
        if name in ("fast", "fast-triton"):  # with torch.compile (heads, RSSM step) the features stay dense
            from rlspec.fast import onehot

            sparse = dict(latent=onehot.indices, features=onehot.Features, Linear=onehot.FeatureLinear)
        return cls(WorldModel=world_model.WorldModel, imagine=m["behavior"].imagine,
                   behavior_losses=m["behavior"].behavior_losses, update_slow_critic=m["behavior"].update_slow_critic,
                   twohot_mean=m["twohot"].mean, ReturnEMA=m["return_ema"].ReturnEMA, **sparse)


KITS = ("reference", "fast", "fast-compiled", "fast-triton")


@dataclass
class DreamerState:
    cfg: DreamerConfig
    kit: Kit
    wm: nn.Module
    actor: nn.Module
    critic: nn.Module
    slow_critic: nn.Module
    wm_opt: torch.optim.Optimizer
    actor_opt: torch.optim.Optimizer
    critic_opt: torch.optim.Optimizer
    return_ema: Any
    updates: int = 0

    MODULES = ("wm", "actor", "critic", "slow_critic", "wm_opt", "actor_opt", "critic_opt", "return_ema")

    def state_dict(self) -> dict:
        return {"updates": self.updates, **{k: getattr(self, k).state_dict() for k in self.MODULES}}

    def load_state_dict(self, sd: dict) -> None:
        for k in self.MODULES:
            getattr(self, k).load_state_dict(sd[k])
        self.updates = sd["updates"]


def make_state(cfg: DreamerConfig, num_actions: int, kit: Kit, gen: torch.Generator) -> DreamerState:
    """Networks initialised from ``gen`` in a fixed order (world model, actor, critic); slow critic = critic.
    The reward head's output layer is zeroed, as sheeprl does (and the critic's, rlspec/models/dreamer.py):
    the first imagined rewards and values are 0 (uniform two-hot) instead of a random two-hot mean."""
    wm = kit.WorldModel(world_model_config(cfg, num_actions), gen)
    with torch.no_grad():
        wm.reward_head.out.weight.zero_()
        wm.reward_head.out.bias.zero_()
    feat, bins = wm.config.feature_dim, behavior_config(cfg).num_bins
    actor = nets.actor(feat, num_actions, cfg.mlp_hidden, cfg.mlp_layers, gen, kit.Linear)
    critic = nets.critic(feat, bins, cfg.mlp_hidden, cfg.mlp_layers, gen, kit.Linear)
    slow = nets.critic(feat, bins, cfg.mlp_hidden, cfg.mlp_layers, gen, kit.Linear)
    slow.load_state_dict(critic.state_dict())
    slow.requires_grad_(False)

    def adam(module: nn.Module, lr: float, eps: float) -> torch.optim.Adam:
        return torch.optim.Adam(module.parameters(), lr=lr, eps=eps, foreach=False)

    return DreamerState(cfg, kit, wm, actor, critic, slow, adam(wm, cfg.wm_lr, cfg.wm_eps),
                        adam(actor, cfg.actor_lr, cfg.ac_eps), adam(critic, cfg.critic_lr, cfg.ac_eps),
                        kit.ReturnEMA())


def _step(opt: torch.optim.Optimizer, loss: torch.Tensor, module: nn.Module, clip: float) -> torch.Tensor:
    """One clipped Adam step on ``loss``; returns the gradient norm before clipping."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = nn.utils.clip_grad_norm_(module.parameters(), clip, foreach=False)
    opt.step()
    return norm.detach()


def arrival_rows(reward: torch.Tensor, cont: torch.Tensor, head_input: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The heads' outputs on the imagined states s_0..s_H, reward [H+1, N] and continue logits [H+1, N], as
    behavior's arrival rows (module docstring): row t >= 1 belongs to the transition arriving at s_t, row 0
    is zero (unused)."""
    if head_input in ("next", "posterior"):  # trained on the state a step arrives at: they read s_t itself
        return F.pad(reward[1:], (0, 0, 1, 0)), F.pad(cont[1:], (0, 0, 1, 0))
    return F.pad(reward[:-1], (0, 0, 1, 0)), F.pad(cont[:-1], (0, 0, 1, 0))  # read s_{t−1}: shifted


def train_step(state: DreamerState, batch: dict[str, torch.Tensor], gen: torch.Generator
               ) -> dict[str, torch.Tensor]:
    """One update of world model, actor and critic on ``batch`` (the replay's sample_sequences dict, [T, B]);
    returns scalar metrics as 0-d tensors on the batch's device (read them when the engine chooses: reading
    one is a host synchronization on CUDA)."""
    s, cfg, kit = state, state.cfg, state.kit
    # 1. world model; 2.-3. imagination and behaviour (_behavior); each forward under cfg.precision
    with mixed(cfg, batch["obs"].device):
        wm_loss, wm_metrics, post = s.wm.world_model_loss(batch, gen)
    wm_norm = _step(s.wm_opt, wm_loss, s.wm, cfg.wm_clip)
    with mixed(cfg, batch["obs"].device):
        out, reward_out = _behavior(s, post, gen)
    actor_norm = _step(s.actor_opt, out["actor_loss"], s.actor, cfg.actor_clip)
    critic_norm = _step(s.critic_opt, out["critic_loss"], s.critic, cfg.critic_clip)
    kit.update_slow_critic(s.critic, s.slow_critic, cfg.slow_rate)
    s.updates += 1
    metrics = {f"Loss/{k}": v for k, v in wm_metrics.items()}
    metrics.update({"Loss/actor_loss": out["actor_loss"].detach(), "Loss/critic_loss": out["critic_loss"].detach(),
                    "Behavior/entropy": out["entropy"][:-1].mean(), "Behavior/returns": out["returns"].mean(),
                    "Behavior/values": out["values"].mean(), "Behavior/imagined_reward": reward_out.mean(),
                    "Grad/world_model": wm_norm, "Grad/actor": actor_norm, "Grad/critic": critic_norm})
    return {k: _full(torch.as_tensor(v).detach()) for k, v in metrics.items()}


def _full(t: torch.Tensor) -> torch.Tensor:
    """A metric in float32 when autocast left it in a half type (the logs and finiteness checks read floats)."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


def mixed(cfg: DreamerConfig, device: torch.device):
    """The forward passes' autocast: bfloat16 under cfg.precision 'bf16-mixed', off under 'fp32'."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16-mixed")


def _behavior(s: DreamerState, post, gen: torch.Generator) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Imagination from every posterior state and the behaviour losses: (behavior_losses' output, the imagined
    reward [H+1, T·B])."""
    cfg, kit = s.cfg, s.kit
    bcfg = behavior_config(cfg)
    # 2. imagination from every posterior state, detached: [T·B] starts; the state (h, latent of z) (Kit)
    classes = cfg.classes
    # [T·B, H], and [T·B, S, K] one-hot (reference kit) or [T·B, S] indices (fast kits)
    start = (post.h.detach().flatten(0, 1), kit.latent(post.z.detach().flatten(0, 1)))

    def img_step(st: tuple, onehot: torch.Tensor) -> tuple:
        with torch.no_grad():  # the world model is not trained through imagination
            _, h, z = s.wm.rssm.img_step(st[0], st[1], onehot.argmax(-1), gen)
        return h, z  # z in the form it was given (the fast RSSM takes and returns indices)

    def policy(st: tuple) -> torch.Tensor:
        return s.actor(kit.features(*st, classes))

    imag = kit.imagine(img_step, policy, start, cfg.horizon, gen)
    f = kit.features(*imag.states, classes)  # [H+1, T·B, F] (or Features of that leading shape)
    # 3. behaviour: heads predict out of s_t; behavior wants arrival at s_t (module docstring)
    with torch.no_grad():
        reward_logits, cont_logits = s.wm.reward_continue(f)  # [H+1, T·B, bins], [H+1, T·B]
        c = s.wm.config
        reward_out = kit.twohot_mean(reward_logits, c.reward_bins, c.reward_low, c.reward_high)  # [H+1, T·B]
        reward, cont = arrival_rows(reward_out, cont_logits, cfg.head_input)  # [H+1, T·B] each, row 0 unused
        slow_logits = s.slow_critic(f)
    value_logits = s.critic(f.detach())  # [H+1, T·B, bins]
    start_terminal = torch.zeros(imag.actions.shape[1], dtype=torch.bool, device=imag.actions.device)
    out = kit.behavior_losses(reward, cont, value_logits, slow_logits, imag.logits, imag.actions, start_terminal,
                              s.return_ema, bcfg)
    return out, reward_out


@torch.no_grad()
def policy_step(state: DreamerState, obs: torch.Tensor, prev_action: torch.Tensor, is_first: torch.Tensor,
                carry: tuple | None, gen: torch.Generator, greedy: bool = False
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """obs [N, 1, 72, 20] uint8, prev_action [N] (the action taken at the previous obs; any value where
    is_first), is_first [N] bool, carry (h [N, H], z [N, S, K]) or None at the start -> (action [N] int64,
    carry). The RSSM resets where is_first; the action is sampled from π (argmax where ``greedy``)."""
    wm = state.wm
    n = obs.shape[0]
    if carry is None:
        init = wm.rssm.initial_state(n)
        carry = (init.h, init.z)
    prev = RSSMState(carry[0], carry[1], F.one_hot(prev_action.long(), wm.config.num_actions).float())
    dummy = torch.zeros(1, n, dtype=torch.int64, device=obs.device)  # action[t] only fills the returned state's action
    out = wm.rssm.observe(wm.embed(obs.unsqueeze(0)), dummy, is_first.unsqueeze(0), gen, state=prev)
    h, z = out.h[0], out.z[0]  # [N, H], [N, S, K]
    logits = state.actor(features(h, z))  # [N, A]
    if greedy:
        action = logits.argmax(-1)
    else:
        action = sample_categorical(logits, gen)
    return action, (h, z)


@torch.no_grad()
def reconstruct(state: DreamerState, batch: dict[str, torch.Tensor], gen: torch.Generator, context: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(real, reconstructed, imagined) pooled frames [T, B, 72/pool, 80/pool] of a replay batch: the posterior
    decoded at every step, and an open-loop prediction that sees the first ``context`` frames only, then
    rolls the prior with the replay's actions (s_{t+1} = img_step(s_t, action_t); its first ``context``
    frames are the posterior's; episode starts after the context are not reset)."""
    wm = state.wm
    x = wm.frames(batch["obs"])  # [T, B, P]
    post = wm.rssm.observe(wm.encoder(x), batch["action"], batch["is_first"], gen)
    f = features(post.h, post.z)  # [T, B, F]
    h, z, imagined = post.h[context - 1], post.z[context - 1], list(f[:context])
    for t in range(context, x.shape[0]):
        _, h, z = wm.rssm.img_step(h, z, batch["action"][t - 1], gen)
        imagined.append(features(h, z))
    shape = (*x.shape[:2], *wm.config.pooled_shape)
    return (x.reshape(shape), wm.decoder(f).reshape(shape),
            wm.decoder(torch.stack(imagined)).reshape(shape))
