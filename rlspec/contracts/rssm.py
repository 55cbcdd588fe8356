"""Runtime half of contract ``rssm`` (formulas and clauses: rlspec.spec.rssm): the configuration with its
defaults, the state and output types, the parameter layout every implementation shares, the validators.

Imports only torch. Source: the Dreamer plan §3 M3 (RSSM scan with is_first reset masking, GRU float32
internals) and §2.3 (replay layout: ``action[t]`` is the action taken at obs t). The network is
sheeprl 0.8.4's DreamerV3 RSSM (``sheeprl/algos/dreamer_v3/agent.py`` RSSM, RecurrentModel,
RepresentationModel; ``sheeprl/models/models.py`` LayerNormGRUCell), with the names below.

Parameter layout (``RSSMParameters``: reference and fast twins subclass it, so one ``state_dict`` loads into
both; ``SK = stoch·classes``)::

    initial_h        [H]                 W of h0 = tanh(W) (initial="learned"; zeros buffer for "zeros")
    img_in.weight    [hidden, SK + A]    x = silu(LN(W [z; a]))        (no bias, as sheeprl)
    img_in_norm      [hidden]            LayerNorm weight, bias
    gru.weight       [3H, H + hidden]    g = LN(W [h; x]) -> reset, cand, update   (no bias, cat(h, x))
    gru_norm         [3H]
    prior_hidden.weight [hidden, H]      prior = unimix(out(silu(LN(W h))))
    prior_norm       [hidden]
    prior_out        [SK, hidden] + bias [SK]
    post_hidden.weight  [hidden, H + E]  post = unimix(out(silu(LN(W [h; e]))))
    post_norm        [hidden]
    post_out         [SK, hidden] + bias [SK]
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import torch
from torch import nn

from rlspec.contracts.validate import require_floating, require_int, require_range, value_checks_on

# Defaults: sheeprl 0.8.4 DreamerV3-XS (configs/algo/dreamer_v3_XS.yaml), the size of the train-step benchmark's anchor
DETER = 256  # H: recurrent_state_size
STOCH = 32  # S: stochastic_size (number of categorical variables)
CLASSES = 32  # K: discrete_size (classes per variable)
HIDDEN = 256  # dense_units / hidden_size of the input, prior and posterior MLPs
UNIMIX = 0.01  # probs <- (1 − unimix)·softmax(logits) + unimix/K
LN_EPS = 1e-3  # LayerNorm eps of every norm (sheeprl layer_norm.kw.eps)
UPDATE_BIAS = -1.0  # update gate σ(u − 1) (DreamerV3 2023, sheeprl LayerNormGRUCell)
INITIALS = ("learned", "zeros")  # h0 = tanh(W) (DreamerV3 2023, sheeprl) or 0 (danijar 2025)


@dataclasses.dataclass(frozen=True)
class RSSMConfig:
    embed_dim: int
    """E: size of the observation embedding fed to the posterior."""
    num_actions: int
    """A: number of discrete actions; actions are ids in [0, A), one-hot inside."""
    deter: int = DETER
    """H: size of the deterministic (recurrent) state h."""
    stoch: int = STOCH
    """S: number of categorical latent variables."""
    classes: int = CLASSES
    """K: classes per categorical variable."""
    hidden: int = HIDDEN
    """Width of the input MLP (z, a -> GRU input) and of the prior and posterior MLPs."""
    unimix: float = UNIMIX
    """Uniform mixture of every latent distribution, in [0, 1): each class probability >= unimix/K."""
    ln_eps: float = LN_EPS
    """eps of every LayerNorm."""
    initial: str = "learned"
    """'learned': h0 = tanh(W), z0 = one-hot mode of the prior at h0 (sheeprl); 'zeros': h0 = 0, z0 = 0."""

    def __post_init__(self) -> None:
        fn = "RSSMConfig"
        for name in ("embed_dim", "num_actions", "deter", "stoch", "classes", "hidden"):
            require_int(fn, name, getattr(self, name), 1)
        require_range(fn, "unimix", self.unimix, 0.0, 1.0, hi_open=True)
        require_range(fn, "ln_eps", self.ln_eps, 0.0, math.inf, lo_open=True, hi_open=True)
        if self.initial not in INITIALS:
            raise ValueError(f"{fn}: argument 'initial' must be one of {INITIALS}, got {self.initial!r}")


class RSSMState(NamedTuple):
    """The latent state after a step (time index dropped)."""

    h: torch.Tensor  # [B, H] float32: deterministic state
    z: torch.Tensor  # [B, S, K]: one-hot stochastic sample (straight-through)
    action: torch.Tensor  # [B, A] float32: one-hot of the action taken at this state (zeros: none yet)


class RSSMOutput(NamedTuple):
    prior_logits: torch.Tensor  # [T, B, S, K] normalized log-probabilities (unimix applied)
    post_logits: torch.Tensor  # [T, B, S, K]
    h: torch.Tensor  # [T, B, H] float32
    z: torch.Tensor  # [T, B, S, K] posterior samples
    state: RSSMState  # after the last step: continue a sequence with observe(..., state=state)


class RSSMParameters(nn.Module):
    """The parameters (layout in the module docstring), initialized from ``generator`` (never the global
    RNG): weights U(−1/√fan_in, 1/√fan_in) as torch's Linear, LayerNorm weight 1 bias 0, initial_h 0."""

    def __init__(self, config: RSSMConfig, generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(config, RSSMConfig):
            raise TypeError(f"{type(self).__name__}: argument 'config' must be an RSSMConfig, "
                            f"got {type(config).__name__}")
        self.config = c = config
        sk = c.stoch * c.classes
        with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws from the global RNG: undone
            self.img_in = nn.Linear(sk + c.num_actions, c.hidden, bias=False)
            self.img_in_norm = nn.LayerNorm(c.hidden, eps=c.ln_eps)
            self.gru = nn.Linear(c.deter + c.hidden, 3 * c.deter, bias=False)
            self.gru_norm = nn.LayerNorm(3 * c.deter, eps=c.ln_eps)
            self.prior_hidden = nn.Linear(c.deter, c.hidden, bias=False)
            self.prior_norm = nn.LayerNorm(c.hidden, eps=c.ln_eps)
            self.prior_out = nn.Linear(c.hidden, sk)
            self.post_hidden = nn.Linear(c.deter + c.embed_dim, c.hidden, bias=False)
            self.post_norm = nn.LayerNorm(c.hidden, eps=c.ln_eps)
            self.post_out = nn.Linear(c.hidden, sk)
        if c.initial == "learned":
            self.initial_h = nn.Parameter(torch.zeros(c.deter))
        else:
            self.register_buffer("initial_h", torch.zeros(c.deter))
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        with torch.no_grad():
            for lin in (self.img_in, self.gru, self.prior_hidden, self.prior_out, self.post_hidden, self.post_out):
                bound = 1 / math.sqrt(lin.in_features)
                lin.weight.copy_(torch.rand(lin.weight.shape, generator=g) * 2 * bound - bound)
                if lin.bias is not None:
                    lin.bias.copy_(torch.rand(lin.bias.shape, generator=g) * 2 * bound - bound)


# --------------------------------------------------------------------------------------------------
# Validation (shapes, dtypes and one host read for the action ids; no state is touched before it)
# --------------------------------------------------------------------------------------------------
def _shape(t: torch.Tensor) -> tuple:
    return tuple(t.shape)


def require_tensor(fn: str, name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}' must be a torch.Tensor, got {type(t).__name__}")


def require_generator(fn: str, generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"{fn}: argument 'generator' must be a torch.Generator (the global RNG is not used), "
                        f"got {type(generator).__name__}")


def require_action_ids(fn: str, name: str, action, shape: tuple, num_actions: int) -> None:
    """Integer ids of shape ``shape`` in [0, num_actions) (one host read, skipped without value checks)."""
    require_tensor(fn, name, action)
    if action.dtype == torch.bool or action.dtype.is_floating_point or action.dtype.is_complex:
        raise TypeError(f"{fn}: argument '{name}' must hold integer action ids (int32/int64), got {action.dtype}")
    if _shape(action) != shape:
        raise ValueError(f"{fn}: argument '{name}' has shape {_shape(action)}, expected {shape}")
    if action.numel() and value_checks_on():
        lo, hi = (int(v) for v in torch.aminmax(action))
        if lo < 0 or hi >= num_actions:
            raise ValueError(f"{fn}: argument '{name}' holds ids in [{lo}, {hi}], expected ids in "
                             f"[0, {num_actions}) (num_actions={num_actions})")


def validate_state(fn: str, config: RSSMConfig, state, batch: int) -> None:
    if not isinstance(state, RSSMState):
        raise TypeError(f"{fn}: argument 'state' must be an RSSMState (h, z, action) or None, "
                        f"got {type(state).__name__}")
    expected = dict(h=(batch, config.deter), z=(batch, config.stoch, config.classes),
                    action=(batch, config.num_actions))
    for name, shape in expected.items():
        t = getattr(state, name)
        require_floating(fn, f"state.{name}", t)
        if _shape(t) != shape:
            raise ValueError(f"{fn}: argument 'state.{name}' has shape {_shape(t)}, expected {shape}")


def validate_observe(config: RSSMConfig, embed, action, is_first, generator, state) -> None:
    fn = "observe"
    require_floating(fn, "embed", embed)
    if embed.dim() != 3 or embed.shape[0] < 1 or embed.shape[1] < 1 or embed.shape[2] != config.embed_dim:
        raise ValueError(f"{fn}: argument 'embed' has shape {_shape(embed)}, expected [T, B, {config.embed_dim}] "
                         f"with T, B >= 1 (embed_dim={config.embed_dim})")
    tb = _shape(embed)[:2]
    require_tensor(fn, "is_first", is_first)
    if is_first.dtype != torch.bool:
        raise TypeError(f"{fn}: argument 'is_first' must be a bool tensor, got {is_first.dtype}")
    if _shape(is_first) != tb:
        raise ValueError(f"{fn}: argument 'is_first' has shape {_shape(is_first)}, expected {tb} (embed's [T, B])")
    require_generator(fn, generator)
    if state is not None:
        validate_state(fn, config, state, tb[1])
    require_action_ids(fn, "action", action, tb, config.num_actions)


def validate_img_step(config: RSSMConfig, h, z, action, generator) -> None:
    fn = "img_step"
    require_floating(fn, "h", h)
    if h.dim() != 2 or h.shape[0] < 1 or h.shape[1] != config.deter:
        raise ValueError(f"{fn}: argument 'h' has shape {_shape(h)}, expected [B, {config.deter}] (deter)")
    batch = h.shape[0]
    require_floating(fn, "z", z)
    if _shape(z) != (batch, config.stoch, config.classes):
        raise ValueError(f"{fn}: argument 'z' has shape {_shape(z)}, expected {(batch, config.stoch, config.classes)}")
    require_generator(fn, generator)
    require_action_ids(fn, "action", action, (batch,), config.num_actions)
