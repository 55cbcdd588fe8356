"""Fast ``lagrange`` (spec/lagrange.py): float32 state that follows J_c to its device, no host sync.

Every update is branch-free on tensor values: a non-finite J_c selects the old state with ``torch.where``
(and adds 1 to ``skipped``), Adam's step count is a tensor (the bias corrections need it without a sync),
and the PID's derivative delay is a ring buffer indexed by a host-side update counter (configuration, not
data). Only configuration is branched on.
"""

from __future__ import annotations

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
from rlspec.contracts.validate import require_finite, scalar_args, values_look_valid

F32 = torch.float32


def _scalar(value, device: torch.device, minus: float = 0.0) -> torch.Tensor:
    """``value - minus`` (a float or a 0-d tensor) as a float32 0-d tensor on ``device``, with no graph: the
    difference is taken before the rounding to float32 (a J_c within float32's resolution of the limit keeps
    its gap); a float is written by a fill (torch.full), never copied from the host (a blocking copy on CUDA)."""
    if isinstance(value, torch.Tensor):
        return (value.detach().to(device, torch.float64).reshape(()) - minus).to(F32)
    return torch.full((), value - minus, dtype=F32, device=device)


class _Skipping:
    """Named float32 0-d state tensors, moved together to J_c's device; ``skipped`` counts non-finite J_c."""

    STATE: tuple[str, ...] = ()

    def __init__(self, lam: float, **state: float):
        self.lagrangian_multiplier = torch.tensor(lam, dtype=F32)
        self.skipped = torch.zeros((), dtype=torch.int64)
        for name, value in state.items():
            setattr(self, name, torch.tensor(value, dtype=F32))

    def _read(self, fn: str, jc, scale=1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(jc, jc − cost_limit, M, usable) as float32 / bool 0-d tensors on the state's (= J_c's) device; not
        usable: a non-finite J_c or M, or M <= 0 (read on the device, never on the host)."""
        check_cost(fn, jc)
        check_scale(fn, scale)
        device = jc.device if isinstance(jc, torch.Tensor) else self.lagrangian_multiplier.device
        for name in ("lagrangian_multiplier", "skipped", *self.STATE):
            setattr(self, name, getattr(self, name).to(device))
        gap = _scalar(jc, device, self.cost_limit)
        jc, m = (_scalar(v, device) for v in (jc, scale))
        ok = torch.isfinite(jc) & torch.isfinite(m) & (m > 0)  # else skipped (LAG-7, LAG-12)
        self.skipped = self.skipped + (~ok).long()
        return torch.where(ok, jc, 0.0), torch.where(ok, gap, 0.0), torch.where(ok, m, 0.0), ok

    def _commit(self, ok: torch.Tensor, lam: torch.Tensor, **state: torch.Tensor) -> torch.Tensor:
        for name, value in state.items():
            setattr(self, name, torch.where(ok, value, getattr(self, name)))
        self.lagrangian_multiplier = torch.where(ok, lam, self.lagrangian_multiplier)
        return self.lagrangian_multiplier.clone()


class DualAscent(_Skipping):
    @scalar_args("cost_limit", "lr", "lambda_init")
    def __init__(self, cost_limit: float = 25.0, lr: float = 0.035, lambda_init: float = 0.0):
        validate_dual("DualAscent", cost_limit, lr, "lr", lambda_init, "lambda_init")
        super().__init__(lambda_init)
        self.cost_limit, self.lr = cost_limit, lr

    def update(self, jc, scale=1.0) -> torch.Tensor:
        _, gap, m, ok = self._read("DualAscent.update", jc, scale)
        lam = torch.clamp_min(self.lagrangian_multiplier + self.lr * m * gap, 0.0)
        return self._commit(ok, lam)


class OmniSafeLagrange(_Skipping):
    STATE = ("exp_avg", "exp_avg_sq", "steps")

    @scalar_args("cost_limit", "lagrangian_multiplier_init", "lambda_lr", "lagrangian_upper_bound")
    def __init__(self, cost_limit: float = LAGRANGE_DEFAULTS["cost_limit"],
                 lagrangian_multiplier_init: float = LAGRANGE_DEFAULTS["lagrangian_multiplier_init"],
                 lambda_lr: float = LAGRANGE_DEFAULTS["lambda_lr"],
                 lagrangian_upper_bound: float | None = LAGRANGE_DEFAULTS["lagrangian_upper_bound"]):
        validate_dual("OmniSafeLagrange", cost_limit, lambda_lr, "lambda_lr", lagrangian_multiplier_init,
                      "lagrangian_multiplier_init", lagrangian_upper_bound)
        super().__init__(lagrangian_multiplier_init, exp_avg=0.0, exp_avg_sq=0.0, steps=0.0)
        self.cost_limit, self.lambda_lr, self.upper = cost_limit, lambda_lr, lagrangian_upper_bound

    def update(self, jc, scale=1.0) -> torch.Tensor:
        _, gap, m, ok = self._read("OmniSafeLagrange.update", jc, scale)
        b1, b2 = ADAM_BETAS
        grad = -gap
        steps = self.steps + 1
        exp_avg = torch.lerp(self.exp_avg, grad, 1 - b1)
        exp_avg_sq = self.exp_avg_sq * b2 + (1 - b2) * grad * grad
        step_size = self.lambda_lr * m / (1 - torch.pow(b1, steps))
        denom = exp_avg_sq.sqrt() / (1 - torch.pow(b2, steps)).sqrt() + ADAM_EPS
        lam = torch.clamp(self.lagrangian_multiplier - step_size * exp_avg / denom, 0.0, self.upper)
        return self._commit(ok, lam, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, steps=steps)


class PIDLagrangian(_Skipping):
    STATE = ("pid_i", "delta_p", "cost_d", "cost_ds")

    @scalar_args("pid_kp", "pid_ki", "pid_kd", "pid_d_delay", "pid_delta_p_ema_alpha", "pid_delta_d_ema_alpha", "penalty_max", "lagrangian_multiplier_init", "cost_limit")
    def __init__(self, pid_kp=PID_DEFAULTS["pid_kp"], pid_ki=PID_DEFAULTS["pid_ki"], pid_kd=PID_DEFAULTS["pid_kd"],
                 pid_d_delay=PID_DEFAULTS["pid_d_delay"], pid_delta_p_ema_alpha=PID_DEFAULTS["pid_delta_p_ema_alpha"],
                 pid_delta_d_ema_alpha=PID_DEFAULTS["pid_delta_d_ema_alpha"], sum_norm=PID_DEFAULTS["sum_norm"],
                 diff_norm=PID_DEFAULTS["diff_norm"], penalty_max=PID_DEFAULTS["penalty_max"],
                 lagrangian_multiplier_init=PID_DEFAULTS["lagrangian_multiplier_init"],
                 cost_limit=PID_DEFAULTS["cost_limit"]):
        validate_pid(pid_kp, pid_ki, pid_kd, pid_d_delay, pid_delta_p_ema_alpha, pid_delta_d_ema_alpha,
                     penalty_max, lagrangian_multiplier_init, cost_limit)
        super().__init__(0.0, pid_i=lagrangian_multiplier_init, delta_p=0.0, cost_d=0.0)
        self.cost_ds = torch.zeros(pid_d_delay, dtype=F32)  # ring: C_{n-D} sits where C_n will be written
        self.kp, self.ki, self.kd, self.delay = pid_kp, pid_ki, pid_kd, pid_d_delay
        self.alpha_p, self.alpha_d = pid_delta_p_ema_alpha, pid_delta_d_ema_alpha
        self.sum_norm, self.diff_norm, self.penalty_max = sum_norm, diff_norm, penalty_max
        self.cost_limit = cost_limit
        self.slot = torch.zeros((), dtype=torch.int64)  # device counter of committed updates

    def update(self, jc) -> torch.Tensor:
        jc, delta, _, ok = self._read("PIDLagrangian.update", jc)
        self.slot = self.slot.to(jc.device)
        pid_i = torch.clamp_min(self.pid_i + delta * self.ki, 0.0)
        if self.diff_norm:
            pid_i = torch.clamp(pid_i, 0.0, 1.0)
        delta_p = self.alpha_p * self.delta_p + (1 - self.alpha_p) * delta
        cost_d = self.alpha_d * self.cost_d + (1 - self.alpha_d) * jc
        # update n = slot + 1 reads C_{n-D} (0 before it exists); [1], not 0-d: a 0-d index is read on the host
        index = ((self.slot + 1) % self.delay).reshape(1)
        cost_n_d = self.cost_ds[index].reshape(())
        pid_d = torch.clamp_min(cost_d - cost_n_d, 0.0)
        lam = torch.clamp_min(self.kp * delta_p + pid_i + self.kd * pid_d, 0.0)
        if self.diff_norm:
            lam = torch.clamp_max(lam, 1.0)
        if not (self.diff_norm or self.sum_norm):
            lam = torch.clamp_max(lam, self.penalty_max)
        cost_ds = self.cost_ds.index_put((index,), torch.where(ok, cost_d, cost_n_d).reshape(1))
        self.cost_ds = cost_ds
        self.slot = self.slot + ok.long()
        return self._commit(ok, lam, pid_i=pid_i, delta_p=delta_p, cost_d=cost_d)


class SauteBudget:
    """Sauté budget state z [B] in float32 on the observations' device (already vectorized over envs).

    ``check_values=True`` (the default) rejects a non-finite cost with one host read per step. With
    ``check_values=False`` nothing is read on the host: an env whose cost is not finite keeps its z, and the
    device counter ``violations`` counts it (read it at a synchronization point), as the replay ring does."""

    @scalar_args("num_envs", "safety_budget", "saute_gamma", "max_ep_len", "unsafe_reward")
    def __init__(self, num_envs: int, safety_budget: float = SAUTE_DEFAULTS["safety_budget"],
                 saute_gamma: float = SAUTE_DEFAULTS["saute_gamma"], max_ep_len: int = SAUTE_DEFAULTS["max_ep_len"],
                 unsafe_reward: float = SAUTE_DEFAULTS["unsafe_reward"], *, check_values: bool = True):
        validate_saute(num_envs, safety_budget, saute_gamma, max_ep_len, unsafe_reward)
        self.num_envs, self.unsafe_reward, self.check_values = num_envs, unsafe_reward, check_values
        self.violations = torch.zeros((), dtype=torch.int64)
        self.inv_gamma = 1.0 / saute_gamma
        self.inv_budget = 1.0 / saute_budget(safety_budget, saute_gamma, max_ep_len)
        self.z = torch.ones(num_envs, dtype=F32)

    def reset(self, obs: torch.Tensor) -> torch.Tensor:
        check_env_batch("SauteBudget.reset", self.num_envs, obs=obs)
        self.z = torch.ones(self.num_envs, dtype=F32, device=obs.device)
        return torch.cat([obs, self.z[:, None].to(obs.dtype)], dim=-1)

    def step(self, next_obs, reward, cost, done) -> tuple[torch.Tensor, torch.Tensor]:
        check_env_batch("SauteBudget.step", self.num_envs, next_obs=next_obs, reward=reward, cost=cost, done=done)
        if self.check_values and not values_look_valid(finite=(cost,)):  # one host read on the happy path
            require_finite("SauteBudget.step", "cost", cost)
        bad = ~torch.isfinite(cost)  # [B]: only with check_values=False
        self.violations = self.violations.to(cost.device) + bad.sum()
        cost = torch.where(bad, 0.0, cost.float())
        z = (self.z.to(cost.device) - cost * self.inv_budget) * self.inv_gamma  # [B]
        z = torch.where(bad, self.z.to(cost.device), z)
        shaped = torch.where(z > 0, reward, self.unsafe_reward)
        self.z = torch.where(done.bool(), 1.0, z)
        return torch.cat([next_obs, self.z[:, None].to(next_obs.dtype)], dim=-1), shaped


class SimmerPID:
    """OmniSafe's SimmerPIDAgent with the 10-step error window as a ring buffer [10, ...] on the device."""

    @scalar_args("kp", "ki", "kd", "polyak", "budget_bound")
    def __init__(self, kp=SIMMER_DEFAULTS["kp"], ki=SIMMER_DEFAULTS["ki"], kd=SIMMER_DEFAULTS["kd"],
                 polyak=SIMMER_DEFAULTS["polyak"], budget_bound=SIMMER_DEFAULTS["budget_bound"]):
        validate_simmer(kp, ki, kd, polyak, budget_bound)
        self.kp, self.ki, self.kd, self.polyak, self.bound = kp, ki, kd, polyak, budget_bound
        self.calls = 0  # host counter: which ring slot to overwrite
        self.window = self.prev_error = self.prev_residual = None  # allocated at the first call's shape

    def act(self, safety_budget: torch.Tensor, ep_cost) -> torch.Tensor:
        b = safety_budget.float()
        if self.window is None:
            self.window = torch.zeros(SIMMER_WINDOW, *b.shape, dtype=F32, device=b.device)
            self.prev_error = self.prev_residual = torch.zeros_like(b)
        cost = ep_cost.to(b.device, F32) if isinstance(ep_cost, torch.Tensor) else torch.full_like(b, ep_cost)
        error = self.polyak * self.prev_error + (1 - self.polyak) * (b - cost)
        self.window[self.calls % SIMMER_WINDOW] = error
        self.calls += 1
        raw = self.kp * error + self.ki * self.window.sum(0) + self.kd * self.prev_residual
        new = torch.clamp(b + torch.clamp(raw, -1.0, 1.0), min=SIMMER_BUDGET_MIN, max=self.bound)
        self.prev_residual, self.prev_error = (new - b) - raw, error
        return new
