"""Runtime half of contract ``numerics`` (the formula, clauses and properties: spec/numerics/).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import (
    require_floating,
    require_nonempty,
    require_range,
    require_shape,
)

STD_EPS = 1e-8  # safe_standardize eps and the component-masking threshold (numerics note §1, §2)


RMS_EPSILON = 1e-4  # RunningMeanStd initial count (SB3)


OBS_EPSILON, OBS_CLIP = 1e-8, 10.0  # SB3 VecNormalize defaults


LOG_RATIO_CLAMP, RATIO_MIN, RATIO_MAX = 20.0, 0.01, 100.0  # numerics note §3


KL_MULTIPLIER = 1.5  # PPO review HIGH-2 (OpenAI baselines, SB3)


EVENTS = ("log_ratio_clamped", "nonfinite", "ratio_clamped")


# numerics note §2 / usage: the six reward components and the active ones in its three modes
COMPONENTS = ("total_node_reward", "graph_reward", "delete_reward", "spawn_reward", "edge_reward",
              "node_reward")


MODES = {"centroid_distance_only_mode": 1, "simple_delete_only_mode": 3, "normal": 6}


WAIT, GERMINATE, OTHER_OP = 0, 1, 2  # PPO review HIGH-3 LifecycleOp values used by the head masks


def validate_positive(fn: str, name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{fn}: argument '{name}' must be a float > 0"
                        f"{' or None' if allow_none else ''}, got {value!r}")
    require_range(fn, name, value, 0.0, math.inf, lo_open=True, hi_open=True)


def validate_shape_arg(fn: str, shape) -> tuple[int, ...]:
    shape = tuple(shape) if isinstance(shape, (tuple, list, torch.Size)) else shape
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                               for d in shape):
        raise ValueError(f"{fn}: argument 'shape' must be a tuple of ints >= 1, got {shape!r}")
    return shape


def validate_rms_batch(fn: str, x: torch.Tensor, shape: tuple[int, ...]) -> None:
    """x [N, *shape], N >= 1, floating, finite. The finiteness check is the commit's one host sync."""
    from rlspec.contracts.validate import require_finite

    require_floating(fn, "x", x)
    if x.dim() != len(shape) + 1 or tuple(x.shape[1:]) != shape:
        raise ValueError(f"{fn}: argument 'x' must have shape [N, *{shape}], got {tuple(x.shape)}")
    require_nonempty(fn, "x", x)
    require_finite(fn, "x", x)


def read_rms_state(fn: str, state: dict, shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """(mean [*shape], var [*shape], count []) as float64 clones, rejecting anything else by name."""
    want = {"mean": shape, "var": shape, "count": ()}
    out = []
    for key, key_shape in want.items():
        if key not in state:
            raise ValueError(f"{fn}: argument 'state' needs key '{key}', got keys {sorted(state)}")
        t = torch.as_tensor(state[key]).to(torch.float64)
        require_shape(fn, f"state['{key}']", t, key_shape)
        out.append(t.clone())
    if not bool(out[2] > 0) or not bool(torch.isfinite(torch.stack([out[0].sum(), out[1].sum()])).all()):
        raise ValueError(f"{fn}: argument 'state' must have finite mean/var and count > 0, "
                         f"got count={float(out[2])!r}")
    return tuple(out)


def validate_obs(fn: str, obs: torch.Tensor, shape: tuple[int, ...]) -> None:
    require_floating(fn, "obs", obs)
    if obs.dim() < len(shape) or (shape and tuple(obs.shape[-len(shape):]) != shape):
        raise ValueError(f"{fn}: argument 'obs' must have shape [..., *{shape}], got {tuple(obs.shape)}")


def validate_same_shape(fn: str, first: str, a: torch.Tensor, **others: torch.Tensor) -> None:
    require_floating(fn, first, a)
    for name, t in others.items():
        require_floating(fn, name, t)
        require_shape(fn, name, t, a.shape, f"(= {first}.shape)")


def validate_mask(fn: str, x: torch.Tensor, mask: torch.Tensor) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{fn}: argument 'mask' must be a bool tensor, got {got}")
    require_shape(fn, "mask", mask, x.shape, "(= x.shape)")


def validate_entropy_heads(fn: str, entropy: dict, masks: dict, coef: dict | None) -> dict[str, float]:
    """The coefficient of every head (1.0 unless given), after checking heads, shapes and coefficients."""
    if not isinstance(entropy, dict) or not entropy:
        raise TypeError(f"{fn}: argument 'entropy' must be a non-empty dict head -> [B] tensor, got {entropy!r}")
    if not isinstance(masks, dict) or set(masks) != set(entropy):
        got = sorted(masks) if isinstance(masks, dict) else type(masks).__name__
        raise ValueError(f"{fn}: argument 'masks' must name the heads of 'entropy' {sorted(entropy)}, got {got}")
    for head, h in entropy.items():
        require_floating(fn, f"entropy['{head}']", h)
        validate_mask(fn, h, masks[head])
    coef = {} if coef is None else coef
    unknown = sorted(set(coef) - set(entropy))
    if unknown:
        raise ValueError(f"{fn}: argument 'coef' names unknown heads {unknown}; heads are {sorted(entropy)}")
    for head, c in coef.items():
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
            raise ValueError(f"{fn}: argument 'coef' for head '{head}' must be a finite float >= 0, got {c!r}")
    return {head: float(coef.get(head, 1.0)) for head in entropy}


def validate_loss(fn: str, loss: torch.Tensor, kind) -> None:
    require_floating(fn, "loss", loss)
    require_shape(fn, "loss", loss, (), "(a scalar loss)")
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{fn}: argument 'kind' must be a non-empty str, got {kind!r}")


def validate_components(fn: str, advantages: torch.Tensor, logits: torch.Tensor, std_eps) -> None:
    require_floating(fn, "advantages", advantages)
    require_floating(fn, "logits", logits)
    if advantages.dim() != 2 or advantages.shape[0] < 1:
        raise ValueError(f"{fn}: argument 'advantages' must have shape [N >= 1, C], got "
                         f"{tuple(advantages.shape)}")
    require_shape(fn, "logits", logits, advantages.shape[1:], "(= [C] of advantages [N, C])")
    validate_positive(fn, "std_eps", std_eps)


def validate_log_ratio(fn: str, log_ratio: torch.Tensor, target_kl) -> None:
    require_floating(fn, "log_ratio", log_ratio)
    require_nonempty(fn, "log_ratio", log_ratio)
    validate_positive(fn, "target_kl", target_kl, allow_none=True)


def component_std(advantages: torch.Tensor) -> torch.Tensor:
    """Unbiased std per component [C] of the rows shifted by row 0 (a constant column gives exactly 0,
    where torch's plain std of a float32 constant can round to ~eps·|c| > std_eps); NaN for N = 1."""
    if advantages.shape[0] < 2:
        return torch.full(advantages.shape[1:], math.nan, dtype=advantages.dtype, device=advantages.device)
    return (advantages - advantages[:1]).std(dim=0)


def causal_head_masks(op_actions: torch.Tensor) -> dict[str, torch.Tensor]:
    """PPO review HIGH-3: which samples each head is causally responsible for."""
    is_wait, is_germinate = op_actions == WAIT, op_actions == GERMINATE
    return {"op": torch.ones_like(is_wait), "slot": ~is_wait, "blueprint": is_germinate,
            "blend": is_germinate}
