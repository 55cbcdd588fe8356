"""Reference ``lagrange`` (spec/lagrange.py): float64 state, written like the formulas and OmniSafe's code."""

from __future__ import annotations

import math
from collections import deque

import torch

from rlspec.contracts.lagrange import (
    ADAM_BETAS,
    ADAM_EPS,
    LAGRANGE_DEFAULTS,
    PID_DEFAULTS,
    SAUTE_DEFAULTS,
    SIMMER_BUDGET_MIN,
    SIMMER_DEFAULTS,
    SIMMER_WINDOW,
    check_cost,
    check_env_batch,
    check_scale,
    saute_budget,
    validate_dual,
    validate_pid,
    validate_saute,
    validate_simmer,
)
from rlspec.contracts.validate import require_finite, scalar_args

F64 = torch.float64


def _read(fn: str, jc, scale) -> tuple[float, float, bool]:
    """(J_c, M, usable). Not usable (a skipped update, LAG-7 / LAG-12): a non-finite J_c, or a 0-d tensor M
    that is not finite and > 0 (a float M is validated at the call: check_scale)."""
    check_cost(fn, jc)
    check_scale(fn, scale)
    jc, m = (float(v.detach()) if isinstance(v, torch.Tensor) else float(v) for v in (jc, scale))
    return jc, m, math.isfinite(jc) and math.isfinite(m) and m > 0


class _Skipping:
    """λ as a float64 0-d tensor plus the count of skipped (non-finite J_c) updates."""

    def __init__(self, lam: float):
        self.lagrangian_multiplier = torch.tensor(lam, dtype=F64)
        self.skipped = torch.zeros((), dtype=torch.int64)

    def _skip(self) -> torch.Tensor:
        self.skipped += 1
        return self.lagrangian_multiplier.clone()


class DualAscent(_Skipping):
    """λ ← max(0, λ + η·M·(J_c − d))  (PPOLagSem design §5.5 step 4)."""

    @scalar_args("cost_limit", "lr", "lambda_init")
    def __init__(self, cost_limit: float = 25.0, lr: float = 0.035, lambda_init: float = 0.0):
        validate_dual("DualAscent", cost_limit, lr, "lr", lambda_init, "lambda_init")
        super().__init__(lambda_init)
        self.cost_limit, self.lr = cost_limit, lr

    def update(self, jc, scale=1.0) -> torch.Tensor:
        jc, m, usable = _read("DualAscent.update", jc, scale)
        if not usable:
            return self._skip()
        lam = float(self.lagrangian_multiplier) + self.lr * m * (jc - self.cost_limit)
        self.lagrangian_multiplier = torch.tensor(max(0.0, lam), dtype=F64)
        return self.lagrangian_multiplier.clone()


class OmniSafeLagrange(_Skipping):
    """OmniSafe's ``Lagrange`` with Adam, the optimizer written out (torch.optim.Adam's single-tensor path)."""

    @scalar_args("cost_limit", "lagrangian_multiplier_init", "lambda_lr", "lagrangian_upper_bound")
    def __init__(self, cost_limit: float = LAGRANGE_DEFAULTS["cost_limit"],
                 lagrangian_multiplier_init: float = LAGRANGE_DEFAULTS["lagrangian_multiplier_init"],
                 lambda_lr: float = LAGRANGE_DEFAULTS["lambda_lr"],
                 lagrangian_upper_bound: float | None = LAGRANGE_DEFAULTS["lagrangian_upper_bound"]):
        validate_dual("OmniSafeLagrange", cost_limit, lambda_lr, "lambda_lr", lagrangian_multiplier_init,
                      "lagrangian_multiplier_init", lagrangian_upper_bound)
        super().__init__(lagrangian_multiplier_init)
        self.cost_limit, self.lambda_lr, self.upper = cost_limit, lambda_lr, lagrangian_upper_bound
        self.exp_avg, self.exp_avg_sq, self.steps = 0.0, 0.0, 0

    def update(self, jc, scale=1.0) -> torch.Tensor:
        jc, m, usable = _read("OmniSafeLagrange.update", jc, scale)
        if not usable:
            return self._skip()
        b1, b2 = ADAM_BETAS
        grad = -(jc - self.cost_limit)  # d/dλ of the loss −λ·(J_c − d)
        self.steps += 1
        self.exp_avg += (grad - self.exp_avg) * (1 - b1)
        self.exp_avg_sq = self.exp_avg_sq * b2 + (1 - b2) * grad * grad
        step_size = self.lambda_lr * m / (1 - b1**self.steps)
        denom = math.sqrt(self.exp_avg_sq) / math.sqrt(1 - b2**self.steps) + ADAM_EPS
        lam = float(self.lagrangian_multiplier) - step_size * self.exp_avg / denom
        lam = max(0.0, lam if self.upper is None else min(lam, self.upper))
        self.lagrangian_multiplier = torch.tensor(lam, dtype=F64)
        return self.lagrangian_multiplier.clone()


class PIDLagrangian(_Skipping):
    """OmniSafe's ``PIDLagrangian.pid_update``, line for line."""

    @scalar_args("pid_kp", "pid_ki", "pid_kd", "pid_d_delay", "pid_delta_p_ema_alpha", "pid_delta_d_ema_alpha", "penalty_max", "lagrangian_multiplier_init", "cost_limit")
    def __init__(self, pid_kp=PID_DEFAULTS["pid_kp"], pid_ki=PID_DEFAULTS["pid_ki"], pid_kd=PID_DEFAULTS["pid_kd"],
                 pid_d_delay=PID_DEFAULTS["pid_d_delay"], pid_delta_p_ema_alpha=PID_DEFAULTS["pid_delta_p_ema_alpha"],
                 pid_delta_d_ema_alpha=PID_DEFAULTS["pid_delta_d_ema_alpha"], sum_norm=PID_DEFAULTS["sum_norm"],
                 diff_norm=PID_DEFAULTS["diff_norm"], penalty_max=PID_DEFAULTS["penalty_max"],
                 lagrangian_multiplier_init=PID_DEFAULTS["lagrangian_multiplier_init"],
                 cost_limit=PID_DEFAULTS["cost_limit"]):
        validate_pid(pid_kp, pid_ki, pid_kd, pid_d_delay, pid_delta_p_ema_alpha, pid_delta_d_ema_alpha,
                     penalty_max, lagrangian_multiplier_init, cost_limit)
        super().__init__(0.0)  # OmniSafe reports 0 until the first update; I starts at λ_0
        self.kp, self.ki, self.kd = pid_kp, pid_ki, pid_kd
        self.alpha_p, self.alpha_d = pid_delta_p_ema_alpha, pid_delta_d_ema_alpha
        self.sum_norm, self.diff_norm, self.penalty_max = sum_norm, diff_norm, penalty_max
        self.cost_limit = cost_limit
        self.pid_i, self.delta_p, self.cost_d = float(lagrangian_multiplier_init), 0.0, 0.0
        self.cost_ds = deque([0.0], maxlen=pid_d_delay)

    def update(self, jc) -> torch.Tensor:
        jc, _, usable = _read("PIDLagrangian.update", jc, 1.0)
        if not usable:
            return self._skip()
        delta = jc - self.cost_limit
        self.pid_i = max(0.0, self.pid_i + delta * self.ki)
        if self.diff_norm:
            self.pid_i = max(0.0, min(1.0, self.pid_i))
        self.delta_p = self.alpha_p * self.delta_p + (1 - self.alpha_p) * delta
        self.cost_d = self.alpha_d * self.cost_d + (1 - self.alpha_d) * jc
        pid_d = max(0.0, self.cost_d - self.cost_ds[0])
        lam = max(0.0, self.kp * self.delta_p + self.pid_i + self.kd * pid_d)
        if self.diff_norm:
            lam = min(1.0, lam)
        if not (self.diff_norm or self.sum_norm):
            lam = min(lam, self.penalty_max)
        self.cost_ds.append(self.cost_d)
        self.lagrangian_multiplier = torch.tensor(lam, dtype=F64)
        return self.lagrangian_multiplier.clone()


class SauteBudget:
    """OmniSafe's SauteAdapter budget state z [B] (float64)."""

    @scalar_args("num_envs", "safety_budget", "saute_gamma", "max_ep_len", "unsafe_reward")
    def __init__(self, num_envs: int, safety_budget: float = SAUTE_DEFAULTS["safety_budget"],
                 saute_gamma: float = SAUTE_DEFAULTS["saute_gamma"], max_ep_len: int = SAUTE_DEFAULTS["max_ep_len"],
                 unsafe_reward: float = SAUTE_DEFAULTS["unsafe_reward"]):
        validate_saute(num_envs, safety_budget, saute_gamma, max_ep_len, unsafe_reward)
        self.num_envs, self.gamma, self.unsafe_reward = num_envs, saute_gamma, unsafe_reward
        self.budget = saute_budget(safety_budget, saute_gamma, max_ep_len)  # d̃
        self.z = torch.ones(num_envs, dtype=F64)

    def _augment(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.cat([obs, self.z[:, None].to(obs.dtype)], dim=-1)  # [B, D+1]

    def reset(self, obs: torch.Tensor) -> torch.Tensor:
        check_env_batch("SauteBudget.reset", self.num_envs, obs=obs)
        self.z = torch.ones(self.num_envs, dtype=F64)
        return self._augment(obs)

    def step(self, next_obs, reward, cost, done) -> tuple[torch.Tensor, torch.Tensor]:
        check_env_batch("SauteBudget.step", self.num_envs, next_obs=next_obs, reward=reward, cost=cost, done=done)
        require_finite("SauteBudget.step", "cost", cost)  # before z is touched: a rejected step changes nothing
        z = (self.z - cost.double() / self.budget) / self.gamma  # [B]
        shaped = torch.where(z > 0, reward.double(), torch.full_like(z, self.unsafe_reward))  # [B]
        self.z = torch.where(done.bool(), torch.ones_like(z), z)  # auto-reset: a new episode, full budget
        return self._augment(next_obs), shaped.to(reward.dtype)


class SimmerPID:
    """OmniSafe's SimmerPIDAgent.get_greedy_action on a budget tensor [...] (float64)."""

    @scalar_args("kp", "ki", "kd", "polyak", "budget_bound")
    def __init__(self, kp=SIMMER_DEFAULTS["kp"], ki=SIMMER_DEFAULTS["ki"], kd=SIMMER_DEFAULTS["kd"],
                 polyak=SIMMER_DEFAULTS["polyak"], budget_bound=SIMMER_DEFAULTS["budget_bound"]):
        validate_simmer(kp, ki, kd, polyak, budget_bound)
        self.kp, self.ki, self.kd, self.polyak, self.bound = kp, ki, kd, polyak, budget_bound
        self.prev_error = self.prev_action = self.prev_raw_action = torch.zeros(1, dtype=F64)
        self.errors: deque[torch.Tensor] = deque([], maxlen=SIMMER_WINDOW)

    def act(self, safety_budget: torch.Tensor, ep_cost) -> torch.Tensor:
        b = torch.as_tensor(safety_budget).double()
        error = self.polyak * self.prev_error + (1 - self.polyak) * (b - torch.as_tensor(ep_cost).double())
        self.errors.append(error)
        raw = self.kp * error + self.ki * sum(self.errors) + self.kd * (self.prev_action - self.prev_raw_action)
        new = torch.clamp(b + torch.clamp(raw, -1.0, 1.0), min=SIMMER_BUDGET_MIN, max=self.bound)
        self.prev_action, self.prev_raw_action, self.prev_error = new - b, raw, error
        return new
