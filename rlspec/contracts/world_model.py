"""Runtime half of contract ``world_model`` (formulas and clauses: rlspec.spec.world_model): the configuration
with its defaults and presets, the KL result type, the batch and input validators.

Imports only torch. Source: the Dreamer plan §3 M4 (packed2 encoder, decoder, reward head, continue head;
reconstruction loss with stop-gradient KL and free bits, no KL balancing; ``unpack_impl`` contingency hook),
§2.3 (replay layout and ``continue`` semantics), §5. Network shapes follow sheeprl 0.8.4's DreamerV3
(``sheeprl/algos/dreamer_v3/agent.py``, ``loss.py`` ``reconstruction_loss``): MLP encoder and decoder by default,
or sheeprl's convolutional ones (``encoder="conv"``, below).

Input geometry (one place: ``WorldModelConfig.frame`` and ``pool``): the packed2 frame unpacks to 72 × 80; the
encoder sees its centered ``frame`` crop (rows (72 − fh)//2 on, columns (80 − fw)//2 on), average-pooled by
``pool``: x of ``pooled_shape`` = (fh/pool, fw/pool); the decoder reconstructs that x. The default crop is the
whole frame. The conv encoder (sheeprl ``CNNEncoder``: ``cnn_stages`` × Conv2d k4 s2 p1 without bias →
LayerNorm over channels eps 1e-3 → SiLU, channels cnn_mult·[1, 2, 4, 8, ...]) halves x exactly at every stage,
so both sides of ``pooled_shape`` must be multiples of 2^cnn_stages; its output, flattened, is the embedding:
embed_dim = 2^(stages−1)·cnn_mult·(ph/2^stages)·(pw/2^stages). ``frame=(64, 64), pool=1, cnn_stages=4`` is
sheeprl's 64 × 64 geometry (4 × 4 after the last stage), grayscale: ``CONV_64``.

The batch is the replay's ``sample_sequences`` dict, time-major (seed §2.3)::

    obs        [T, B, 1, 72, 20] uint8   packed2 frames (4 pixels per byte: 72 × 80 at 2 bits)
    action     [T, B] int                action taken at obs t
    reward     [T, B] float              reward of the transition out of obs t
    is_first   [T, B] bool               obs t starts an episode (the RSSM resets there)
    continue   [T, B] float in {0, 1}    0: the transition out of obs t terminated; 1: otherwise, a
                                         truncation (time limit) included (bootstrapping, not reset)
(other keys, e.g. episode_id, are ignored).

Row alignment (a stated choice): the heads read the features f_t = [h_t; z_t] of row t and predict that
row's reward[t] and continue[t] (the transition out of obs t) — the seed's layout, in which the terminal
observation is not a row, so a state-conditioned continue head must predict "this transition ends the
episode" from the state it leaves. sheeprl stores the reward and terminal flag of *arriving* at obs t at
row t; a golden bridge shifts by one row.

``head_input`` chooses what the reward and continue heads read for row t (the decoder always reads f_t):
  'state'      f_t = [h_t; z_t]: the seed's layout above, and sheeprl's computation on its arrival rows (the
               golden fixtures); on transition rows it predicts a step's outcome without its action
  'next'       f⁺_t = [h⁺_t; z⁺_t], (·, h⁺_t, z⁺_t) = img_step(h_t, z_t, action_t): one prior step after the
               action, the state imagination produces
  'posterior'  f°_t = [h⁺_t; z°_t], z°_t sampled from the posterior of (h⁺_t, embed(final_obs_t)): the
               observation the step arrives at, as sheeprl's heads read it, on transition rows. The batch then
               also holds ``final_obs`` [T, B, 1, 72, 20] uint8 (the replay's frame after each step, before any
               reset: contract replay's store_final), so a terminal step's frame is seen too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import NamedTuple

import torch

from rlspec.contracts.packed2 import FRAME_SHAPE, PIXELS_PER_BYTE
from rlspec.contracts.rssm import RSSMConfig, require_action_ids, require_tensor
from rlspec.contracts.twohot import DEFAULT_BINS, DEFAULT_HIGH, DEFAULT_LOW
from rlspec.contracts.validate import require_int, require_range, value_checks_on

FREE_BITS = 1.0  # free nats per (t, b) before the mean (seed §3 M4: ">= 1.0 default"; sheeprl kl_free_nats)
DYN_SCALE, REP_SCALE = 1.0, 1.0  # seed §3 M4: total KL = dynamics + representation, no balancing
PAPER_KL_SCALES = dict(dyn_scale=0.5, rep_scale=0.1)  # DreamerV3 paper, sheeprl kl_dynamic / kl_representation
# seed §3 M4 contingency hook: unpack_impl -> the packed2 backend the fast twin imports (on use)
UNPACK_MODULES = {"lut": "rlspec.fast.packed2", "triton": "rlspec.fast.packed2_triton",
                  "warp": "rlspec.fast.packed2_warp"}
UNPACK_IMPLS = tuple(UNPACK_MODULES)
FRAME_HEIGHT, FRAME_WIDTH = FRAME_SHAPE[1], FRAME_SHAPE[2] * PIXELS_PER_BYTE  # 72 × 80 unpacked pixels
ENCODERS = ("mlp", "conv")
CONV_64 = dict(encoder="conv", frame=(64, 64), pool=1, cnn_stages=4)  # sheeprl's 64 × 64 geometry, grayscale
KEYS = ("obs", "action", "reward", "is_first", "continue")
HEAD_INPUTS = ("state", "next", "posterior")  # WorldModelConfig.head_input (module docstring)


def crop_offset(frame: tuple[int, int]) -> tuple[int, int]:
    """(top, left) of the centered (fh, fw) crop of the 72 × 80 unpacked frame."""
    return (FRAME_HEIGHT - frame[0]) // 2, (FRAME_WIDTH - frame[1]) // 2


@dataclasses.dataclass(frozen=True)
class WorldModelConfig:
    num_actions: int
    """A: discrete actions (ids in [0, A))."""
    deter: int = 256
    """H of the RSSM (sheeprl DreamerV3-XS recurrent_state_size)."""
    stoch: int = 32
    """S: categorical latents."""
    classes: int = 32
    """K: classes per latent."""
    hidden: int = 256
    """Width of the RSSM MLPs, the encoder, decoder and heads (sheeprl dense_units)."""
    embed_dim: int = 256
    """E: encoder output. With encoder='conv' it must equal the flattened conv output (``conv_embed_dim``)."""
    pool: int = 4
    """Average-pooling factor on the (cropped) frame inside the encoder; the decoder reconstructs the pooled
    frame (``pooled_shape``: frame/pool pixels). Must divide both sides of ``frame``."""
    frame: tuple[int, int] = (FRAME_HEIGHT, FRAME_WIDTH)
    """(fh, fw): the centered crop of the unpacked 72 × 80 frame that the encoder sees (module docstring)."""
    encoder: str = "mlp"
    """'mlp': encoder and decoder are MLP heads on the flattened pooled frame; 'conv': sheeprl 0.8.4's
    CNNEncoder / CNNDecoder (module docstring)."""
    cnn_mult: int = 8
    """Channel multiplier of the conv encoder and decoder (sheeprl cnn_channels_multiplier; XS: 24); >= 2."""
    cnn_stages: int = 4
    """Stride-2 stages of the conv encoder and decoder (sheeprl: log2(screen_size) − 2, 4 at 64 × 64)."""
    reward_bins: int = DEFAULT_BINS
    """Bins of the reward head's symlog two-hot (twohot contract support [low, high])."""
    reward_low: float = DEFAULT_LOW
    reward_high: float = DEFAULT_HIGH
    free_bits: float = FREE_BITS
    """Free nats: each KL term is max(free_bits, KL) per (t, b) before the mean (>= 0)."""
    dyn_scale: float = DYN_SCALE
    """Scale of the dynamics term KL(sg(post) ‖ prior); the seed's default 1 (no balancing)."""
    rep_scale: float = REP_SCALE
    """Scale of the representation term KL(post ‖ sg(prior)); the seed's default 1. Paper: PAPER_KL_SCALES."""
    unimix: float = 0.01
    """Uniform mixture of the RSSM latents (rssm contract)."""
    unpack_impl: str = "lut"
    """packed2 backend of the encoder in the fast twin: 'lut' (torch table), 'triton', 'warp'. The reference
    always unpacks with reference/packed2.py (the oracle); every backend gives the same bits."""
    head_input: str = "state"
    """What the reward and continue heads read (module docstring "Row alignment"): 'state' f_t (the golden
    fixtures' layout), 'next' f⁺_t, one prior step after action_t (action-conditioned), or 'posterior' f°_t, the
    posterior of the frame the step arrives at (sheeprl's heads; the batch holds final_obs)."""

    def __post_init__(self) -> None:
        fn = "WorldModelConfig"
        for name in ("num_actions", "deter", "stoch", "classes", "hidden", "embed_dim", "pool", "cnn_stages"):
            require_int(fn, name, getattr(self, name), 1)
        require_int(fn, "cnn_mult", self.cnn_mult, 2)  # LayerNorm over 1 channel is constant: its conv learns nothing
        self._validate_geometry(fn)
        require_int(fn, "reward_bins", self.reward_bins, 2)
        for name in ("reward_low", "reward_high"):
            require_range(fn, name, getattr(self, name), -math.inf, math.inf, lo_open=True, hi_open=True)
        if not self.reward_low < self.reward_high:
            raise ValueError(f"{fn}: arguments 'reward_low' < 'reward_high' expected, got {self.reward_low!r}, "
                             f"{self.reward_high!r}")
        for name in ("free_bits", "dyn_scale", "rep_scale"):
            require_range(fn, name, getattr(self, name), 0.0, math.inf, hi_open=True)
        if self.unpack_impl not in UNPACK_IMPLS:
            raise ValueError(f"{fn}: argument 'unpack_impl' must be one of {UNPACK_IMPLS}, got {self.unpack_impl!r}")
        if self.head_input not in HEAD_INPUTS:
            raise ValueError(f"{fn}: argument 'head_input' must be one of {HEAD_INPUTS}, got {self.head_input!r}")
        self.rssm_config()  # validates classes >= 1, unimix in [0, 1)

    def _validate_geometry(self, fn: str) -> None:
        frame = tuple(self.frame) if isinstance(self.frame, (tuple, list)) else self.frame
        if (not isinstance(frame, tuple) or len(frame) != 2 or not all(type(v) is int for v in frame)
                or not (1 <= frame[0] <= FRAME_HEIGHT and 1 <= frame[1] <= FRAME_WIDTH)):
            raise ValueError(f"{fn}: argument 'frame' must be a pair of ints (fh, fw) within 1..{FRAME_HEIGHT} × "
                             f"1..{FRAME_WIDTH}, got {self.frame!r}")
        object.__setattr__(self, "frame", frame)
        if frame[0] % self.pool or frame[1] % self.pool:
            raise ValueError(f"{fn}: argument 'pool' must divide the frame {frame[0]} × {frame[1]}, got {self.pool}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"{fn}: argument 'encoder' must be one of {ENCODERS}, got {self.encoder!r}")
        if self.encoder == "conv":
            step = 2 ** self.cnn_stages
            ph, pw = self.pooled_shape
            if ph % step or pw % step:
                raise ValueError(f"{fn}: argument 'cnn_stages' = {self.cnn_stages} needs the pooled frame's sides "
                                 f"to be multiples of 2^{self.cnn_stages} = {step}, got {ph} × {pw} (frame / pool)")
            if self.embed_dim != self.conv_embed_dim:
                raise ValueError(f"{fn}: argument 'embed_dim' must equal the conv encoder's flattened output "
                                 f"{self.conv_embed_dim} (2^(stages−1)·cnn_mult·{ph // step}·{pw // step}), "
                                 f"got {self.embed_dim}")

    def rssm_config(self) -> RSSMConfig:
        return RSSMConfig(embed_dim=self.embed_dim, num_actions=self.num_actions, deter=self.deter,
                          stoch=self.stoch, classes=self.classes, hidden=self.hidden, unimix=self.unimix)

    def with_paper_kl_scales(self) -> WorldModelConfig:
        """The DreamerV3 paper's / sheeprl's dyn 0.5, rep 0.1 (a preset; the default is the seed's 1, 1)."""
        return dataclasses.replace(self, **PAPER_KL_SCALES)

    @property
    def pooled_shape(self) -> tuple[int, int]:
        """(fh/pool, fw/pool): the encoder's input and the decoder's output."""
        return self.frame[0] // self.pool, self.frame[1] // self.pool

    @property
    def crop_offset(self) -> tuple[int, int]:
        """(top, left) of the centered ``frame`` crop in the 72 × 80 unpacked frame."""
        return crop_offset(self.frame)

    @property
    def cnn_channels(self) -> tuple[int, ...]:
        """Output channels of the conv encoder's stages: cnn_mult·2^i, i < cnn_stages (sheeprl CNNEncoder)."""
        return tuple(self.cnn_mult * 2**i for i in range(self.cnn_stages))

    @property
    def conv_latent_shape(self) -> tuple[int, int, int]:
        """(C, h, w) after the conv encoder's last stage: C = cnn_mult·2^(stages−1), h, w = pooled / 2^stages
        (the decoder starts from it)."""
        return conv_latent_shape(self.frame, self.pool, self.cnn_mult, self.cnn_stages)

    @property
    def conv_embed_dim(self) -> int:
        """The conv encoder's flattened output C·h·w (must be embed_dim with encoder='conv')."""
        return math.prod(self.conv_latent_shape)

    @property
    def feature_dim(self) -> int:
        """F = H + S·K: the heads' input [h; flatten(z)]."""
        return self.deter + self.stoch * self.classes

    @classmethod
    def conv(cls, num_actions: int, **fields) -> WorldModelConfig:
        """encoder='conv' at sheeprl's 64 × 64 geometry (``CONV_64``; ``fields`` override), embed_dim derived."""
        fields = dict(CONV_64, **fields)
        shape = conv_latent_shape(fields["frame"], fields["pool"], fields.get("cnn_mult", cls.cnn_mult),
                                  fields["cnn_stages"])
        return cls(num_actions, **fields, embed_dim=math.prod(shape))


def conv_latent_shape(frame: tuple[int, int], pool: int, cnn_mult: int, cnn_stages: int) -> tuple[int, int, int]:
    """(C, h, w) of the conv encoder's last stage (WorldModelConfig.conv_latent_shape)."""
    step = 2**cnn_stages
    return cnn_mult * 2 ** (cnn_stages - 1), frame[0] // pool // step, frame[1] // pool // step


class KLTerms(NamedTuple):
    loss: torch.Tensor  # [] dyn_scale·mean(max(fb, dyn)) + rep_scale·mean(max(fb, rep))
    dyn: torch.Tensor  # [T, B] KL(sg(post) ‖ prior) before free bits (gradient to the prior only)
    rep: torch.Tensor  # [T, B] KL(post ‖ sg(prior)) before free bits (gradient to the posterior only)


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------
def validate_kl_args(post_logits, prior_logits, free_bits, dyn_scale, rep_scale) -> None:
    fn = "kl_loss"
    for name, t in (("post_logits", post_logits), ("prior_logits", prior_logits)):
        require_tensor(fn, name, t)
        if not t.dtype.is_floating_point:
            raise TypeError(f"{fn}: argument '{name}' must be floating point, got {t.dtype}")
        if t.dim() != 4:
            raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected [T, B, S, K]")
    if prior_logits.shape != post_logits.shape:
        raise ValueError(f"{fn}: argument 'prior_logits' has shape {tuple(prior_logits.shape)}, expected "
                         f"post_logits' {tuple(post_logits.shape)}")
    for name, v in (("free_bits", free_bits), ("dyn_scale", dyn_scale), ("rep_scale", rep_scale)):
        require_range(fn, name, v, 0.0, math.inf, hi_open=True)


def validate_batch(config: WorldModelConfig, batch) -> tuple[int, int]:
    """The replay batch (module docstring); returns (T, B)."""
    fn = "world_model_loss"
    if not isinstance(batch, Mapping):
        raise TypeError(f"{fn}: argument 'batch' must be a mapping with keys {KEYS}, got {type(batch).__name__}")
    missing = [k for k in KEYS if k not in batch]
    if missing:
        raise ValueError(f"{fn}: argument 'batch' lacks keys {missing} (expected {KEYS})")
    T, B = validate_obs(fn, batch["obs"])
    for key in ("reward", "continue"):
        t = batch[key]
        require_tensor(fn, f"batch['{key}']", t)
        if not t.dtype.is_floating_point:
            raise TypeError(f"{fn}: argument 'batch['{key}']' must be floating point, got {t.dtype}")
        if tuple(t.shape) != (T, B):
            raise ValueError(f"{fn}: argument 'batch['{key}']' has shape {tuple(t.shape)}, expected {(T, B)}")
    cont = batch["continue"]
    if value_checks_on() and bool(((cont != 0) & (cont != 1)).any()):
        raise ValueError(f"{fn}: argument 'batch['continue']' must hold 0.0 or 1.0, got values "
                         f"{sorted(set(cont[(cont != 0) & (cont != 1)].tolist()))[:4]}")
    first = batch["is_first"]
    require_tensor(fn, "batch['is_first']", first)
    if first.dtype != torch.bool or tuple(first.shape) != (T, B):
        raise ValueError(f"{fn}: argument 'batch['is_first']' must be bool [T, B] = {(T, B)}, "
                         f"got {first.dtype} {tuple(first.shape)}")
    require_action_ids(fn, "batch['action']", batch["action"], (T, B), config.num_actions)
    if config.head_input == "posterior":
        if "final_obs" not in batch:
            raise ValueError(f"{fn}: argument 'batch' lacks key 'final_obs' (head_input 'posterior' reads the frame "
                             f"each step arrives at; a replay with store_final gives it)")
        if validate_obs(fn, batch["final_obs"], "final_obs") != (T, B):
            raise ValueError(f"{fn}: argument 'batch['final_obs']' has shape {tuple(batch['final_obs'].shape)}, "
                             f"expected {(T, B, *FRAME_SHAPE)}")
    return T, B


def validate_obs(fn: str, obs, name: str = "obs") -> tuple[int, int]:
    """obs [T, B, 1, 72, 20] uint8 (packed2); returns (T, B)."""
    require_tensor(fn, name, obs)
    if obs.dtype != torch.uint8:
        raise TypeError(f"{fn}: argument '{name}' must be packed2 frames of dtype torch.uint8, got {obs.dtype}")
    if obs.dim() != 5 or tuple(obs.shape[2:]) != FRAME_SHAPE or obs.shape[0] < 1 or obs.shape[1] < 1:
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(obs.shape)}, expected [T, B, "
                         f"{', '.join(map(str, FRAME_SHAPE))}] with T, B >= 1 (packed2 frames)")
    return obs.shape[0], obs.shape[1]
