"""Runtime half of contract ``behavior`` (the formula, clauses and properties: spec/behavior.py).

DreamerV3 actor-critic learning in imagination (Dreamer plan M5): the configuration with its documented
defaults, the categorical sampler every implementation shares, and the validators. Imports only torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import torch

from rlspec.contracts.twohot import DEFAULT_BINS, DEFAULT_HIGH, DEFAULT_LOW, validate_support
from rlspec.contracts.validate import (
    require_finite,
    require_floating,
    require_int,
    require_range,
    require_shape,
    scalar,
    value_checks_on,
    values_look_valid,
)

CONTINUE_MODES = ("mode", "prob")


@dataclasses.dataclass(frozen=True)
class BehaviorConfig:
    """Hyper-parameters of behaviour learning; defaults are DreamerV3's (2023 paper, sheeprl's
    configs/algo/dreamer_v3.yaml). Numpy scalars and 0-d tensors are taken as the number they hold."""

    horizon: int = 15  # imagined steps H (trajectories have H+1 states)
    gamma: float = 1 - 1 / 333  # 0.996996996996997, sheeprl's ``gamma`` (a 333-step horizon)
    lam: float = 0.95  # λ of the λ-returns
    entropy_coef: float = 3e-4  # η of the actor's entropy bonus
    slow_rate: float = 0.02  # slow critic EMA: slow ← rate·critic + (1 − rate)·slow (sheeprl ``critic.tau``)
    slow_reg: float = 1.0  # weight of the slow-critic regularizer −log p(mean of slow critic)
    # the continue flag c_t (t >= 1) from the continue head's logit l_t: "mode" = 1[σ(l_t) > 0.5] (sheeprl's
    # BernoulliSafeMode.mode, danijar's 2023 ``.mode()``), "prob" = σ(l_t) (an expected discount)
    continue_mode: str = "mode"
    num_bins: int = DEFAULT_BINS  # the critic's two-hot support (twohot contract): linspace(low, high, bins)
    low: float = DEFAULT_LOW
    high: float = DEFAULT_HIGH

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, scalar(getattr(self, field.name)))
        fn = "BehaviorConfig"
        require_int(fn, "horizon", self.horizon, 1)
        require_range(fn, "gamma", self.gamma, 0.0, 1.0, lo_open=True)  # weights divide by γ (sheeprl)
        require_range(fn, "lam", self.lam, 0.0, 1.0)
        require_range(fn, "entropy_coef", self.entropy_coef, 0.0, float("inf"), hi_open=True)
        require_range(fn, "slow_rate", self.slow_rate, 0.0, 1.0)
        require_range(fn, "slow_reg", self.slow_reg, 0.0, float("inf"), hi_open=True)
        if self.continue_mode not in CONTINUE_MODES:
            raise ValueError(f"{fn}: argument 'continue_mode' must be one of {CONTINUE_MODES}, "
                             f"got {self.continue_mode!r}")
        validate_support(fn, self.num_bins, self.low, self.high)


# --------------------------------------------------------------------------------------------------
# Imagination
# --------------------------------------------------------------------------------------------------
def sample_categorical(logits: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Action ids [B] ~ Categorical(softmax(logits [B, A])) drawn from ``gen`` only (never the global RNG).
    Probabilities are formed in float32 at least, so a bf16 policy samples the same distribution."""
    probs = torch.softmax(logits.detach().to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # [B, A]
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)  # [B]


def leaves(state: Any) -> list[torch.Tensor]:
    """The tensors of a state: a tensor, or a dict / tuple / list of tensors (one level)."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return list(state.values())
    if isinstance(state, (tuple, list)):
        return list(state)
    raise TypeError(f"imagine: argument 'start_state' must be a tensor or a dict/tuple/list of tensors, "
                    f"got {type(state).__name__}")


def map_state(fn: Callable[[torch.Tensor], torch.Tensor], state: Any) -> Any:
    """``fn`` applied to every tensor of a state, keeping its structure."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: fn(v) for k, v in state.items()}
    return type(state)(fn(v) for v in state)


class Imagination(NamedTuple):
    states: Any  # the start state's structure, each tensor [H+1, B, ...]: s_0 (the start), s_1..s_H
    actions: torch.Tensor  # [H+1, B] int64: a_t ~ π(·|s_t) (a_H is drawn too, as sheeprl does, and unused)
    logits: torch.Tensor  # [H+1, B, A]: π's logits at s_t (graph to the policy's parameters only)


def stack_states(states: list[Any]) -> Any:
    """[H+1] states of one structure -> one state of that structure whose tensors are [H+1, B, ...]."""
    first = states[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(states)
    if isinstance(first, dict):
        return {k: torch.stack([s[k] for s in states]) for k in first}
    return type(first)(torch.stack(parts) for parts in zip(*states))


def validate_imagine(img_step: Callable, policy: Callable, start_state: Any, horizon: int,
                     gen: Any) -> int:
    """Reject bad arguments of ``imagine``; returns the batch size B."""
    fn = "imagine"
    for name, f in (("img_step", img_step), ("policy", policy)):
        if not callable(f):
            raise TypeError(f"{fn}: argument '{name}' must be callable, got {type(f).__name__}")
    require_int(fn, "horizon", horizon, 1)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"{fn}: argument 'gen' must be a torch.Generator (the global RNG is never used), "
                        f"got {type(gen).__name__}")
    parts = leaves(start_state)
    if not parts or not all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in parts):
        raise TypeError(f"{fn}: argument 'start_state' must hold tensors with a leading batch dimension [B, ...], "
                        f"got {[tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in parts]}")
    sizes = {t.shape[0] for t in parts}
    if len(sizes) != 1:
        raise ValueError(f"{fn}: argument 'start_state' tensors must share the batch size B, got leading sizes "
                         f"{[t.shape[0] for t in parts]}")
    return sizes.pop()


def check_policy_out(logits: Any, batch: int, actions: int | None, t: int) -> int:
    """The policy's logits at step t must be floating [B, A] (A fixed over the rollout); returns A."""
    fn = "imagine"
    require_floating(fn, f"policy(state_{t})", logits)
    if logits.dim() != 2 or logits.shape[0] != batch or (actions is not None and logits.shape[1] != actions):
        raise ValueError(f"{fn}: argument 'policy' returned shape {tuple(logits.shape)} at step {t}, expected "
                         f"[B={batch}, A{'=' + str(actions) if actions is not None else ''}]")
    return logits.shape[1]


def check_step_out(state: Any, like: Any, t: int) -> None:
    """img_step must return a state with the structure and shapes of the one it was given."""
    got, want = leaves(state), leaves(like)
    if type(state) is not type(like) or [tuple(g.shape) for g in got] != [tuple(w.shape) for w in want]:
        raise ValueError(f"imagine: argument 'img_step' returned {type(state).__name__} of shapes "
                         f"{[tuple(g.shape) for g in got]} at step {t}, expected {type(like).__name__} of shapes "
                         f"{[tuple(w.shape) for w in want]} (the structure it was given)")


# --------------------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------------------
def validate_behavior(reward: torch.Tensor, cont_logits: torch.Tensor, value_logits: torch.Tensor,
                      slow_value_logits: torch.Tensor, actor_logits: torch.Tensor, actions: torch.Tensor,
                      start_terminal: torch.Tensor, return_ema: Any, cfg: Any) -> torch.Tensor:
    """Reject bad input of ``behavior_losses`` naming the argument; returns start_terminal as bool [B]."""
    fn = "behavior_losses"
    if not isinstance(cfg, BehaviorConfig):
        raise TypeError(f"{fn}: argument 'cfg' must be a BehaviorConfig, got {type(cfg).__name__}")
    require_floating(fn, "reward", reward)
    if reward.dim() != 2 or reward.shape[0] < 2:
        raise ValueError(f"{fn}: argument 'reward' must be [H+1, B] with H >= 1, got shape {tuple(reward.shape)}")
    rows, batch = reward.shape
    if rows != cfg.horizon + 1:
        raise ValueError(f"{fn}: argument 'reward' has {rows} rows, expected cfg.horizon + 1 = {cfg.horizon + 1} "
                         "(states s_0..s_H)")
    for name, t, shape, why in (
            ("cont_logits", cont_logits, (rows, batch), "(= reward.shape [H+1, B])"),
            ("value_logits", value_logits, (rows, batch, cfg.num_bins), "([H+1, B, cfg.num_bins])"),
            ("slow_value_logits", slow_value_logits, (rows, batch, cfg.num_bins), "([H+1, B, cfg.num_bins])")):
        require_floating(fn, name, t)
        if t.dtype != reward.dtype:
            raise TypeError(f"{fn}: argument '{name}' has dtype {t.dtype}, expected {reward.dtype} (= reward.dtype)")
        require_shape(fn, name, t, shape, why)
    require_floating(fn, "actor_logits", actor_logits)
    if actor_logits.dim() != 3 or tuple(actor_logits.shape[:2]) != (rows, batch) or actor_logits.shape[2] < 1:
        raise ValueError(f"{fn}: argument 'actor_logits' must be [H+1={rows}, B={batch}, A], got shape "
                         f"{tuple(actor_logits.shape)}")
    if not isinstance(actions, torch.Tensor) or actions.dtype.is_floating_point or actions.dtype == torch.bool:
        raise TypeError(f"{fn}: argument 'actions' must be an integer tensor of action ids, got "
                        f"{actions.dtype if isinstance(actions, torch.Tensor) else type(actions).__name__}")
    require_shape(fn, "actions", actions, (rows, batch), "([H+1, B] action ids)")
    n_act = actor_logits.shape[2]
    if value_checks_on() and bool(((actions < 0) | (actions >= n_act)).any()):
        raise ValueError(f"{fn}: argument 'actions' must hold ids in [0, A={n_act}), got min "
                         f"{int(actions.min())}, max {int(actions.max())}")
    if not isinstance(start_terminal, torch.Tensor):
        raise TypeError(f"{fn}: argument 'start_terminal' must be a torch.Tensor, got {type(start_terminal).__name__}")
    require_shape(fn, "start_terminal", start_terminal, (batch,), "([B]: the start states' terminal flags)")
    if start_terminal.dtype != torch.bool and value_checks_on() and \
            bool(((start_terminal != 0) & (start_terminal != 1)).any()):
        raise ValueError(f"{fn}: argument 'start_terminal' must hold 0/1 flags, got values "
                         f"{sorted(set(start_terminal.flatten().tolist()))[:4]}")
    floats = (("reward", reward), ("cont_logits", cont_logits), ("value_logits", value_logits),
              ("slow_value_logits", slow_value_logits))
    if not values_look_valid(finite=tuple(t for _, t in floats)):  # one host read on the happy path
        for name, t in floats:
            require_finite(fn, name, t)
    if value_checks_on() and bool(torch.isnan(actor_logits).any()):
        raise ValueError(f"{fn}: argument 'actor_logits' has NaN values, expected no NaN (−inf masks are allowed)")
    if not callable(getattr(return_ema, "update", None)):
        raise TypeError(f"{fn}: argument 'return_ema' must have an update(x) -> (offset, invscale) method "
                        f"(a return_ema.ReturnEMA), got {type(return_ema).__name__}")
    return start_terminal.bool()


def validate_slow_update(critic: Any, slow: Any, rate: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(critic params, slow params) as aligned lists, after checking the rate and shapes."""
    fn = "update_slow_critic"
    require_range(fn, "rate", rate, 0.0, 1.0)
    src, dst = [list(m.parameters()) if isinstance(m, torch.nn.Module) else list(m) for m in (critic, slow)]
    if len(src) != len(dst):
        raise ValueError(f"{fn}: arguments 'critic' and 'slow' must have the same parameters, got "
                         f"{len(src)} and {len(dst)} tensors")
    for i, (a, b) in enumerate(zip(src, dst)):
        if a.shape != b.shape:
            raise ValueError(f"{fn}: argument 'slow' parameter {i} has shape {tuple(b.shape)}, expected "
                             f"{tuple(a.shape)} (= critic's)")
    return src, dst
