"""Runtime half of contract ``parity`` (the formula, clauses and properties: spec/parity.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import (
    require_finite,
    require_floating,
    require_int,
    require_range,
    require_shape,
)

DEFAULT_CONFIG = dict(obs_dim=4, n_actions=3, hidden=8, clip=0.2, epochs=2, minibatch_size=8, lr=3e-3,
                      vf_coef=0.5, cost_vf_coef=0.5, ent_coef=0.01, cost_limit=25.0, lagrangian_init=0.001,
                      lambda_lr=0.035, dtype=torch.float64)


DISABLED = {"enable": False}


ADV_EPS = 1e-8


# code that a disabled wrapper must not import (PARITY-3), besides the implementation's SEMANTIC_MODULES
FORBIDDEN_MODULES = ("transformers", "open_clip", "rlspec.reference.shaping", "rlspec.fast.shaping",
                     "rlspec.spec.shaping")


def validate_config(config: dict) -> dict:
    unknown = sorted(set(config) - set(DEFAULT_CONFIG))
    if unknown:
        raise ValueError(f"PPOLagLearner: unknown config keys {unknown}; expected a subset of {sorted(DEFAULT_CONFIG)}")
    cfg = {**DEFAULT_CONFIG, **config}
    for name in ("obs_dim", "n_actions", "hidden", "epochs", "minibatch_size"):
        require_int("PPOLagLearner", name, cfg[name], 1)
    require_range("PPOLagLearner", "clip", cfg["clip"], 0.0, 1.0, lo_open=True, hi_open=True)
    for name in ("lr", "lambda_lr"):
        require_range("PPOLagLearner", name, cfg[name], 0.0, math.inf, lo_open=True, hi_open=True)
    for name in ("vf_coef", "cost_vf_coef", "ent_coef", "cost_limit", "lagrangian_init"):
        require_range("PPOLagLearner", name, cfg[name], 0.0, math.inf, hi_open=True)
    return cfg


def validate_batch(batch: dict, cfg: dict) -> None:
    fn = "PPOLagLearner.update"
    keys = ("obs", "act", "logp_old", "adv_r", "adv_c", "target_value_r", "target_value_c", "ep_cost")
    missing = [k for k in keys if k not in batch]
    if missing:
        raise ValueError(f"{fn}: argument 'batch' lacks {missing}, got keys {sorted(batch)}")
    obs = batch["obs"]
    require_floating(fn, "obs", obs)
    if obs.dim() != 2 or obs.shape[1] != cfg["obs_dim"] or obs.shape[0] < 1:
        raise ValueError(f"{fn}: argument 'obs' has shape {tuple(obs.shape)}, expected (N >= 1, {cfg['obs_dim']})")
    n = obs.shape[0]
    act = batch["act"]
    if not isinstance(act, torch.Tensor) or act.dtype != torch.int64:
        raise TypeError(f"{fn}: argument 'act' must be an int64 tensor, got "
                        f"{act.dtype if isinstance(act, torch.Tensor) else type(act).__name__}")
    require_shape(fn, "act", act, (n,))
    if bool(((act < 0) | (act >= cfg["n_actions"])).any()):
        raise ValueError(f"{fn}: argument 'act' must lie in [0, {cfg['n_actions']}), got {act.tolist()}")
    for k in ("logp_old", "adv_r", "adv_c", "target_value_r", "target_value_c"):
        require_floating(fn, k, batch[k])
        require_shape(fn, k, batch[k], (n,))
        require_finite(fn, k, batch[k])
    if not math.isfinite(float(batch["ep_cost"])):
        raise ValueError(f"{fn}: argument 'ep_cost' must be finite, got {batch['ep_cost']!r}")
