"""Runtime half of contract ``lagrange`` (the formula, clauses and properties: spec/lagrange.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import math

import torch

from rlspec.contracts.validate import require_floating, require_int, require_range

DUAL_DEFAULTS = dict(cost_limit=25.0, lr=0.035, lambda_init=0.0)


LAGRANGE_DEFAULTS = dict(cost_limit=25.0, lagrangian_multiplier_init=0.001, lambda_lr=0.035,
                         lagrangian_upper_bound=None)


PID_DEFAULTS = dict(pid_kp=0.1, pid_ki=0.01, pid_kd=0.01, pid_d_delay=10, pid_delta_p_ema_alpha=0.95,
                    pid_delta_d_ema_alpha=0.95, sum_norm=True, diff_norm=False, penalty_max=100.0,
                    lagrangian_multiplier_init=0.001, cost_limit=25.0)


SAUTE_DEFAULTS = dict(safety_budget=25.0, saute_gamma=0.999, max_ep_len=1000, unsafe_reward=-1.0)


SIMMER_DEFAULTS = dict(kp=0.0005, ki=0.00001, kd=0.0, polyak=0.995, budget_bound=25.0)


_INF = math.inf


def _nonneg(fn: str, name: str, value: float) -> None:
    require_range(fn, name, value, 0.0, _INF, hi_open=True)


def validate_dual(fn: str, cost_limit: float, lr: float, lr_name: str, init: float, init_name: str,
                  upper_bound: float | None = None) -> None:
    _nonneg(fn, "cost_limit", cost_limit)
    require_range(fn, lr_name, lr, 0.0, _INF, lo_open=True, hi_open=True)
    _nonneg(fn, init_name, init)
    if upper_bound is not None:
        require_range(fn, "lagrangian_upper_bound", upper_bound, init, _INF, hi_open=True)


def validate_pid(pid_kp, pid_ki, pid_kd, pid_d_delay, pid_delta_p_ema_alpha, pid_delta_d_ema_alpha,
                 penalty_max, lagrangian_multiplier_init, cost_limit) -> None:
    fn = "PIDLagrangian"
    for name, value in (("pid_kp", pid_kp), ("pid_ki", pid_ki), ("pid_kd", pid_kd),
                        ("penalty_max", penalty_max), ("lagrangian_multiplier_init", lagrangian_multiplier_init),
                        ("cost_limit", cost_limit)):
        _nonneg(fn, name, value)
    require_int(fn, "pid_d_delay", pid_d_delay, 1)
    require_range(fn, "pid_delta_p_ema_alpha", pid_delta_p_ema_alpha, 0.0, 1.0)
    require_range(fn, "pid_delta_d_ema_alpha", pid_delta_d_ema_alpha, 0.0, 1.0)


def validate_saute(num_envs, safety_budget, saute_gamma, max_ep_len, unsafe_reward) -> None:
    fn = "SauteBudget"
    require_int(fn, "num_envs", num_envs, 1)
    require_range(fn, "safety_budget", safety_budget, 0.0, _INF, lo_open=True, hi_open=True)
    require_range(fn, "saute_gamma", saute_gamma, 0.0, 1.0, lo_open=True, hi_open=True)
    require_int(fn, "max_ep_len", max_ep_len, 1)
    require_range(fn, "unsafe_reward", unsafe_reward, -_INF, _INF, lo_open=True, hi_open=True)


def validate_simmer(kp, ki, kd, polyak, budget_bound) -> None:
    fn = "SimmerPID"
    for name, value in (("kp", kp), ("ki", ki), ("kd", kd)):
        _nonneg(fn, name, value)
    require_range(fn, "polyak", polyak, 0.0, 1.0)
    require_range(fn, "budget_bound", budget_bound, SIMMER_BUDGET_MIN, _INF, hi_open=True)


def saute_budget(safety_budget: float, saute_gamma: float, max_ep_len: int) -> float:
    """d̃ = d_s·(1 − γ_s^T)/((1 − γ_s)·T): the per-step budget of OmniSafe's SauteAdapter."""
    return safety_budget * (1 - saute_gamma**max_ep_len) / (1 - saute_gamma) / max_ep_len


def check_cost(fn: str, jc) -> None:
    """J_c: a real number or a 0-d floating tensor (its value is not read here)."""
    if isinstance(jc, torch.Tensor):
        require_floating(fn, "jc", jc)
        if jc.numel() != 1:
            raise ValueError(f"{fn}: argument 'jc' must be a scalar (0-d tensor), got shape {tuple(jc.shape)}")
    elif isinstance(jc, bool) or not isinstance(jc, (int, float)):
        raise TypeError(f"{fn}: argument 'jc' must be a float or a 0-d tensor, got {type(jc).__name__}")


def check_scale(fn: str, scale) -> None:
    """M: a positive real number, or a 0-d floating tensor (on the device; its value is not read)."""
    if isinstance(scale, torch.Tensor):
        require_floating(fn, "scale", scale)
        if scale.numel() != 1:
            raise ValueError(f"{fn}: argument 'scale' must be a scalar, got shape {tuple(scale.shape)}")
    else:
        require_range(fn, "scale", scale, 0.0, _INF, lo_open=True, hi_open=True)


def check_env_batch(fn: str, num_envs: int, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: argument '{name}' must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() == 0 or t.shape[0] != num_envs:
            raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected a leading "
                             f"num_envs = {num_envs} dimension")


SIMMER_WINDOW, SIMMER_BUDGET_MIN = 10, 1e-6  # OmniSafe SimmerPIDAgent: deque(maxlen=10), eps = 1e-6


ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam defaults, as OmniSafe constructs it
