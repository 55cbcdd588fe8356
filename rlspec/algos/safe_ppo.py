"""Functional core of the PPO family on Safety-Gymnasium: PPO, PPOLag, CPPOPID, PPOSaute, PPOSimmerPID
(PPOLagSem design §2A, §5.5; the PPO review and numerics note), built from the contracts ``gae``, ``numerics`` and ``lagrange``.

No IO and no global RNG: state is explicit (``SafePPOState``), shuffling draws from the caller's
``torch.Generator``, the contract implementations come in a ``Kit`` (the reference twins here).

One update (``update``), in OmniSafe 0.5.0's order unless configured otherwise:

1. Values V_r(s_t), V_c(s_t) and V(s'_t) of every rollout step in one batch. s'_t is the real next
   observation: the final observation of an episode that ended at t (the vector env's final observation
   on autoreset), so a truncated step bootstraps γ·V(s_final) (PPO review CRITICAL-2; contract ``gae``).
2. GAE for reward (γ, λ) and cost (γ_c, λ_c) (``gae``; the rollout cut bootstraps V(s'_{T-1})).
3. Advantage processing as OmniSafe's ``VectorOnPolicyBuffer.get``: A_r ← (A_r − mean)/(std + 1e-8) with
   the population std; A_c ← A_c − mean.
4. λ update from J_c (the mean episode cost of the recent window) *before* the policy update, as
   OmniSafe's ``PPOLag._update`` does (``lambda_update="before"``, default), or after it as the PPOLagSem design
   §5.5's pseudo-code (``"after"``).
5. Combined advantage, OmniSafe's ``_compute_adv_surrogate``: A = (A_r − λ·A_c)/(1 + λ)
   (``adv_combine="omnisafe"``), or the seed's A = A_r − λ·A_c (§4.0.2, ``"seed"``).
6. ``update_iters`` epochs of shuffled minibatches; in each minibatch the KL estimate of the current
   policy against the rollout policy is checked *before* any optimizer step (PPO review HIGH-2, contract
   ``numerics`` kl_early_stop: stop when k3-KL > 1.5·target_kl); then the reward and cost critics step
   (½·max((V − R)², (V_clip − R)²) with its own ``value_clip`` range, PPO review HIGH-4, plus OmniSafe's
   critic_norm_coef·Σθ²), then the actor (clipped surrogate − entropy_coef·H, H as OmniSafe's: the mean over
   batch and action dimensions of the per-dimension entropy; the ratio through the numerics note §3 guard). Every
   loss passes a LossGuard (numerics note §5): a non-finite loss becomes 0 and is counted; guard events are
   reported as metrics.

Differences from OmniSafe, on purpose: the observation normalizer is frozen during a rollout and updated
after the update from all the rollout's raw observations (PPO review CRITICAL-1; OmniSafe updates it per
step), the KL check is by default the seed's pre-step per-minibatch k3 estimate (OmniSafe's, the exact KL
after each pass with no 1.5 factor, is ``kl_check="pass"``), the value loss has the ½ of the PPO review HIGH-4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from rlspec import registry
from rlspec.algos.config import ALGOS, KITS, AlgoSpec, PPOConfig, SafetyConfig  # noqa: F401  (re-exported)
from rlspec.algos.guards import logged_loss
from rlspec.contracts.lagrange import saute_budget
from rlspec.contracts.numerics import KL_MULTIPLIER
from rlspec.models.actor_critic import Critic, GaussianActor

ADV_STD_EPS = 1e-8  # OmniSafe VectorOnPolicyBuffer.get: (adv - mean) / (std + 1e-8)


KIT_CONTRACTS = ("gae", "lagrange", "numerics", "trust_region")  # what a safe Kit is built from (registry)


@dataclass
class Kit:
    """The contract implementations the core calls: the modules rlspec/registry.py registers for one run kit
    (reference or fast), one field per function or class the update uses."""

    gae: Callable[..., tuple[torch.Tensor, torch.Tensor]]  # contract gae: (advantages, returns)
    # contract numerics
    ratio_guard: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]
    value_loss: Callable[..., torch.Tensor]
    kl_early_stop: Callable[[torch.Tensor, float | None], tuple[torch.Tensor, torch.Tensor]]  # (stop, kl)
    ObsNormalizer: type
    RunningMeanStd: type
    LossGuard: type
    # contract lagrange
    OmniSafeLagrange: type
    PIDLagrangian: type
    SauteBudget: type
    SimmerPID: type
    # contract trust_region (rlspec/algos/trust_region.py)
    conjugate_gradient: Callable[..., torch.Tensor]
    fisher_vector_product: Callable[..., Callable[[torch.Tensor], torch.Tensor]]
    natural_step: Callable[..., torch.Tensor]
    cpo_step: Callable[..., Any]
    line_search: Callable[..., Any]
    p3o_loss: Callable[..., torch.Tensor]

    @classmethod
    def reference(cls) -> "Kit":
        return cls.named("reference")

    @classmethod
    def fast(cls) -> "Kit":
        """The fast twins (rlspec/fast: vectorized torch, no host reads in the controllers), the same contracts."""
        return cls.named("fast")

    @classmethod
    def named(cls, name: str) -> "Kit":
        """The kit a run config names: "reference" or "fast"."""
        if name not in KITS:
            raise ValueError(f"Kit.named: argument 'name' must be one of {KITS}, got {name!r}")
        return cls.of(**registry.kit_modules(name, KIT_CONTRACTS))

    @classmethod
    def of(cls, gae, lagrange, numerics, trust_region) -> "Kit":
        """A kit from one module per contract family (reference/ or fast/: the same names)."""
        return cls(gae=gae.gae, ratio_guard=numerics.ratio_guard, value_loss=numerics.value_loss,
                   kl_early_stop=numerics.kl_early_stop, ObsNormalizer=numerics.ObsNormalizer,
                   RunningMeanStd=numerics.RunningMeanStd, LossGuard=numerics.LossGuard,
                   OmniSafeLagrange=lagrange.OmniSafeLagrange, PIDLagrangian=lagrange.PIDLagrangian,
                   SauteBudget=lagrange.SauteBudget, SimmerPID=lagrange.SimmerPID,
                   conjugate_gradient=trust_region.conjugate_gradient,
                   fisher_vector_product=trust_region.fisher_vector_product,
                   natural_step=trust_region.natural_step, cpo_step=trust_region.cpo_step,
                   line_search=trust_region.line_search, p3o_loss=trust_region.p3o_loss)


class Comm:
    """Data-parallel reductions the core needs (OmniSafe ``parallel``): one process needs none of them. An
    engine running several processes passes a subclass (rlspec/engines/safe/parallel.py: torch.distributed)."""

    world_size = 1
    rank = 0

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """Σ over processes of ``t`` (a new tensor)."""
        return t.clone()

    def average_gradients(self, net: torch.nn.Module) -> None:
        """Every parameter's .grad ← its mean over processes."""


LOCAL = Comm()


class RewardScaler:
    """r / √(Var[G] + 1e-8), G_t = γ·G_{t−1}·(1 − done) + r_t: SB3's VecNormalize reward scaling, with the
    running statistics updated once per vectorized step from all envs' returns (PPO review HIGH-1)."""

    def __init__(self, num_envs: int, gamma: float, kit: Kit):
        self.gamma = gamma
        self.rms = kit.RunningMeanStd(())
        self.ret = torch.zeros(num_envs, dtype=torch.float64)  # [N]

    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        self.ret = self.ret * self.gamma + reward.double()  # [N]
        self.rms.update(self.ret)  # one batch of N: every env's step sees the same statistics
        scaled = reward.double() / torch.sqrt(self.rms.var + 1e-8)
        self.ret = torch.where(done, torch.zeros_like(self.ret), self.ret)
        return scaled.to(reward.dtype)


@dataclass
class SafePPOState:
    """Everything an update changes (and a checkpoint saves)."""

    algo: str
    actor: GaussianActor
    reward_critic: Critic
    cost_critic: Critic | None
    actor_opt: torch.optim.Optimizer
    reward_opt: torch.optim.Optimizer
    cost_opt: torch.optim.Optimizer | None
    multiplier: object | None  # kit.OmniSafeLagrange | kit.PIDLagrangian
    budget: object | None  # kit.SauteBudget
    simmer: object | None  # kit.SimmerPID
    simmer_budget: torch.Tensor | None  # [1] the Simmer budget in per-step Sauté units
    obs_norm: object | None  # kit.ObsNormalizer
    reward_scaler: RewardScaler | None
    guard: object  # kit.LossGuard

    def lagrange_multiplier(self) -> float:
        return 0.0 if self.multiplier is None else float(self.multiplier.lagrangian_multiplier)

    @property
    def device(self) -> torch.device:
        """Where the networks live and the update runs (the host, or a GPU policy's device)."""
        return self.actor.log_std.device


@dataclass
class Rollout:
    """One rollout, time-major. ``obs``/``next_obs`` are policy inputs (normalized with the frozen
    statistics, Sauté budget appended); ``next_obs[t]`` is s'_t, the final observation where an episode
    ended at t. ``raw_obs`` feeds the observation normalizer after the update."""

    obs: torch.Tensor  # [T, N, D]
    act: torch.Tensor  # [T, N, A]
    logp: torch.Tensor  # [T, N]
    reward: torch.Tensor  # [T, N] as trained on (scaled, Sauté-shaped)
    cost: torch.Tensor  # [T, N]
    terminated: torch.Tensor  # [T, N] bool
    truncated: torch.Tensor  # [T, N] bool
    next_obs: torch.Tensor  # [T, N, D]
    raw_obs: torch.Tensor  # [T, N, D_env]

    def to(self, device: torch.device) -> "Rollout":
        """The training fields on ``device`` (the networks' device: a GPU policy); ``raw_obs`` stays where the
        observation normalizer lives, on the host. The same object when nothing moves."""
        moved = {f: getattr(self, f).to(device) for f in ("obs", "act", "logp", "reward", "cost", "terminated",
                                                          "truncated", "next_obs")}
        if all(moved[f] is getattr(self, f) for f in moved):
            return self
        return Rollout(**moved, raw_obs=self.raw_obs)


def make_state(algo: str, ppo: PPOConfig, safety: SafetyConfig, obs_dim: int, act_dim: int, num_envs: int,
               kit: Kit, gen: torch.Generator, device: str | torch.device = "cpu") -> SafePPOState:
    """Networks (drawn from ``gen`` on the host, then moved to ``device``: the same initial weights anywhere),
    optimizers and the algorithm's controllers (on the host, where the env feedback is)."""
    if algo not in ALGOS:
        raise ValueError(f"make_state: argument 'algo' must be one of {sorted(ALGOS)}, got {algo!r}")
    spec = ALGOS[algo]
    policy_dim = obs_dim + (spec.budget != "none")  # Sauté/Simmer append the budget z
    actor = GaussianActor(policy_dim, act_dim, ppo.hidden, ppo.activation, gen)
    reward_critic = Critic(policy_dim, ppo.hidden, ppo.activation, gen)
    cost_critic = Critic(policy_dim, ppo.hidden, ppo.activation, gen) if spec.use_cost else None
    for net in (actor, reward_critic, cost_critic):
        if net is not None:
            net.to(device)
    multiplier = budget = simmer = simmer_budget = None
    if spec.multiplier == "lagrange":
        multiplier = kit.OmniSafeLagrange(cost_limit=safety.cost_limit, lambda_lr=safety.lambda_lr,
                                          lagrangian_multiplier_init=safety.lagrangian_multiplier_init)
    elif spec.multiplier == "pid":
        multiplier = kit.PIDLagrangian(pid_kp=safety.pid_kp, pid_ki=safety.pid_ki, pid_kd=safety.pid_kd,
                                       pid_d_delay=safety.pid_d_delay, cost_limit=safety.cost_limit,
                                       lagrangian_multiplier_init=safety.lagrangian_multiplier_init)
    if spec.budget != "none":
        budget = kit.SauteBudget(num_envs, safety_budget=safety.cost_limit, saute_gamma=safety.saute_gamma,
                                 max_ep_len=safety.max_ep_len, unsafe_reward=safety.unsafe_reward)
    if spec.budget == "simmer":
        upper = _saute_units(safety.simmer_upper_budget, safety)
        simmer = kit.SimmerPID(kp=safety.simmer_kp, ki=safety.simmer_ki, kd=safety.simmer_kd,
                               polyak=safety.simmer_polyak, budget_bound=upper)
        simmer_budget = torch.tensor([_saute_units(safety.cost_limit, safety)], dtype=torch.float64)
    return SafePPOState(
        algo=algo, actor=actor, reward_critic=reward_critic, cost_critic=cost_critic,
        actor_opt=torch.optim.Adam(actor.parameters(), lr=ppo.actor_lr),
        reward_opt=torch.optim.Adam(reward_critic.parameters(), lr=ppo.critic_lr),
        cost_opt=torch.optim.Adam(cost_critic.parameters(), lr=ppo.critic_lr) if cost_critic else None,
        multiplier=multiplier, budget=budget, simmer=simmer, simmer_budget=simmer_budget,
        obs_norm=kit.ObsNormalizer((obs_dim,)) if ppo.obs_normalize else None,
        reward_scaler=RewardScaler(num_envs, ppo.gamma, kit) if ppo.reward_normalize else None,
        guard=kit.LossGuard())


def _saute_units(episode_cost: float, safety: SafetyConfig) -> float:
    """Episode cost → the per-step Sauté budget unit d·(1 − γ_s^T)/((1 − γ_s)·T) (OmniSafe SimmerAdapter)."""
    return saute_budget(episode_cost, safety.saute_gamma, safety.max_ep_len)


# ----------------------------------------------------------------------------------------- rollout side
def policy_input(state: SafePPOState, raw_obs: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
    """raw obs [N, D_env] -> the policy's input [N, D]: normalized with the frozen statistics, then the
    budget z [N] appended for Sauté/Simmer (``z`` defaults to the budget state's current z)."""
    obs = state.obs_norm.normalize(raw_obs) if state.obs_norm is not None else raw_obs
    if state.budget is None:
        return obs
    z = state.budget.z if z is None else z
    return torch.cat([obs, z[:, None].to(obs.dtype)], dim=-1)


@torch.no_grad()
def sample(state: SafePPOState, obs: torch.Tensor,
           gen: torch.Generator) -> tuple[torch.Tensor, torch.distributions.Normal]:
    """(a ~ π(·|s) [N, A], π(·|s)) on the networks' device, the noise drawn from ``gen`` (a host generator: a
    GPU policy draws the same noise as a CPU one); obs [N, D] is moved to the networks' device."""
    dist = state.actor(obs.to(state.device))
    noise = torch.randn(dist.mean.shape, generator=gen, dtype=dist.mean.dtype).to(state.device)  # [N, A]
    return dist.mean + dist.stddev * noise, dist


@torch.no_grad()
def log_prob(dist: torch.distributions.Normal, action: torch.Tensor) -> torch.Tensor:
    """log π(a|s) [N] on the host, for ``sample``'s action [N, A] and distribution."""
    return dist.log_prob(action).sum(-1).cpu()


def act(state: SafePPOState, obs: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(a ~ π(·|s) [N, A], log π(a|s) [N]) on the host: ``sample`` then ``log_prob``."""
    action, dist = sample(state, obs, gen)
    return action.cpu(), log_prob(dist, action)


def env_feedback(state: SafePPOState, reward: torch.Tensor, cost: torch.Tensor,
                 done: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(reward as trained on [N], z of the final observations [N] or None) after one vectorized step.

    Sauté/Simmer: the contract's budget step (z ← (z − c/d̃)/γ_s, reward → unsafe_reward once z ≤ 0),
    taken with done = False so that z still describes s'_t (the final observation when the episode ended);
    envs that are done then restart with z = 1. Then the reward scaler, if any (one batch of N).
    """
    z_final = None
    if state.budget is not None:
        no_done = torch.zeros_like(done)
        _, reward = state.budget.step(reward.new_zeros(reward.shape[0], 0), reward, cost, no_done)
        z_final = state.budget.z.clone()
        state.budget.z = torch.where(done, torch.ones_like(z_final), z_final)
    if state.reward_scaler is not None:
        reward = state.reward_scaler(reward, done)
    return reward, z_final


# ------------------------------------------------------------------------------------------ update side
def process_advantages(adv_r: torch.Tensor, adv_c: torch.Tensor, ppo: PPOConfig,
                       comm: Comm = LOCAL) -> tuple[torch.Tensor, torch.Tensor]:
    """OmniSafe's buffer get(): A_r standardized with the population std + 1e-8, A_c centered, the statistics
    over every process's samples (OmniSafe dist_statistics_scalar), the mean by ``centred``'s shifted form (the
    same values to rounding; exact zeros for a constant batch). [M] each."""
    n = comm.sum(torch.tensor(float(adv_r.numel()), dtype=adv_r.dtype, device=adv_r.device))
    if ppo.standardize_reward_adv:
        adv_r = centred(adv_r, n, comm)
        std = (comm.sum(adv_r.square().sum()) / n).sqrt()
        adv_r = adv_r / (std + ADV_STD_EPS)
    if ppo.center_cost_adv:
        adv_c = centred(adv_c, n, comm)
    return adv_r, adv_c


def centred(x: torch.Tensor, n: torch.Tensor, comm: Comm = LOCAL) -> torch.Tensor:
    """x − μ over every process's samples, μ = K + Σ(x − K)/n with K rank 0's first sample (contract numerics'
    shifted mean, reference/numerics.py): a constant batch centres to exact zeros. x − Σx/n leaves there a
    rounding error e, the same in every sample, that (x − μ)/(std + 1e-8) turns into +1 or −1 everywhere.
    [M] -> [M]; an empty x stays empty."""
    first = x[:1].sum()  # x[0]; 0 for an empty x
    k = comm.sum(first if comm.rank == 0 else torch.zeros_like(first))
    return x - (k + comm.sum((x - k).sum()) / n)


def combine_advantages(adv_r: torch.Tensor, adv_c: torch.Tensor, multiplier: float, mode: str) -> torch.Tensor:
    """With the Lagrange multiplier λ: OmniSafe (A_r − λ·A_c)/(1 + λ); the PPOLagSem design §4.0.2 A_r − λ·A_c. [M]"""
    if mode == "omnisafe":
        return (adv_r - multiplier * adv_c) / (1 + multiplier)
    if mode == "seed":
        return adv_r - multiplier * adv_c
    raise ValueError(f"combine_advantages: argument 'mode' must be 'omnisafe' or 'seed', got {mode!r}")


def update_safety(state: SafePPOState, jc: float, safety: SafetyConfig, lambda_scale: float = 1.0) -> None:
    """λ ← multiplier(J_c) (PPOLag, CPPOPID; a non-finite J_c — no finished episode yet — is skipped by the
    contract), or the Simmer PID's new Sauté budget from J_c (PPOSimmerPID, OmniSafe control_budget).
    ``lambda_scale``: M multiplying the Lagrange learning rate (PPOLagSem's modulation, PPOLagSem design §4.0.5;
    contract ``lagrange`` update(J_c, scale=M)); 1.0 calls update(J_c) as PPOLag does."""
    if state.multiplier is not None and lambda_scale == 1.0:
        state.multiplier.update(jc)
    elif state.multiplier is not None:
        state.multiplier.update(jc, scale=lambda_scale)
    if state.simmer is not None and math.isfinite(jc):
        state.simmer_budget = state.simmer.act(state.simmer_budget, torch.tensor([_saute_units(jc, safety)],
                                                                                 dtype=torch.float64))
        state.budget.budget = float(state.simmer_budget[0])  # reference SauteBudget: the per-step budget d̃


def policy_loss(logp: torch.Tensor, entropy: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor,
                ppo: PPOConfig, kit: Kit) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """−mean(min(ρ·A, clip(ρ, 1 ± ε)·A)) − α·mean(H) (OmniSafe PPO._loss_pi), ρ through the numerics note §3 ratio
    guard; returns the loss and the guard's event counts. All [B] but the scalar loss."""
    ratio, events = kit.ratio_guard(logp, logp_old)  # [B]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - ppo.clip, 1 + ppo.clip) * adv)
    return -surrogate.mean() - ppo.entropy_coef * entropy.mean(), events


# (guarded loss [], the network it trains, that network's optimizer): one optimizer step of ``optimize``
Step = tuple[torch.Tensor, torch.nn.Module, torch.optim.Optimizer]


def critic_steps(state: SafePPOState, obs, v_r, ret_r, v_c, ret_c, ppo: PPOConfig, kit: Kit) -> list[Step]:
    """The critics' steps on a minibatch ([B] each but obs): the reward critic's and, with a cost critic, the
    cost critic's (clipped) value loss plus its L2 norm, through the loss guard (the PPO family's and the
    natural-gradient updates' critic step)."""
    def step(critic: Critic, opt: torch.optim.Optimizer, old_value, target, kind: str) -> Step:
        loss = kit.value_loss(critic(obs), old_value, target, ppo.value_clip)
        loss = loss + ppo.critic_norm_coef * sum(p.square().sum() for p in critic.parameters())
        return state.guard(loss, kind), critic, opt

    steps = [step(state.reward_critic, state.reward_opt, v_r, ret_r, "reward_critic")]
    if state.cost_critic is not None:
        steps.append(step(state.cost_critic, state.cost_opt, v_c, ret_c, "cost_critic"))
    return steps


def optimize(steps: list[Step], ppo: PPOConfig, comm: Comm) -> None:
    """One optimizer step per (loss, network, optimizer) of disjoint networks, in order: grad-norm clip, then the
    gradients averaged over processes (OmniSafe's order), then the step. The gradients come from one backward
    of the losses' sum: a sum passes its gradient to each addend unchanged and no loss reaches another's
    network, so they are those of one backward per loss, bit for bit, at one autograd pass's cost. A loss the
    guard replaced by a detached 0 skips its step (one process) or contributes zero gradients to the average
    (several: every process must join it)."""
    steps = [s for s in steps if s[0].requires_grad or comm.world_size > 1]
    for _, _, opt in steps:
        opt.zero_grad()
    live = [loss for loss, _, _ in steps if loss.requires_grad]
    if live:
        sum(live[1:], live[0]).backward()
    for loss, net, opt in steps:
        if not loss.requires_grad:  # every process must join the gradient average: a zero gradient from this one
            for p in net.parameters():
                p.grad = torch.zeros_like(p)
        if ppo.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(net.parameters(), ppo.max_grad_norm)
        comm.average_gradients(net)
        opt.step()


@torch.no_grad()
def advantages(state: SafePPOState, batch: Rollout, ppo: PPOConfig, kit: Kit) -> tuple[tuple[torch.Tensor, ...], ...]:
    """((A_r, R_r, V_r), (A_c, R_c, V_c)), each [T, N]: values of s_t and s'_t in one batch, then GAE
    (contract ``gae``: a truncated step and the rollout cut bootstrap V(s'_t)). Zeros for the cost
    without a cost critic."""
    v_r, nv_r = state.reward_critic(batch.obs), state.reward_critic(batch.next_obs)  # [T, N] each
    adv_r, ret_r = kit.gae(batch.reward, v_r, batch.terminated, batch.truncated, nv_r, ppo.gamma, ppo.lam)
    if state.cost_critic is None:
        zero = torch.zeros_like(v_r)
        return (adv_r, ret_r, v_r), (zero, zero, zero)
    v_c, nv_c = state.cost_critic(batch.obs), state.cost_critic(batch.next_obs)  # [T, N] each
    adv_c, ret_c = kit.gae(batch.cost, v_c, batch.terminated, batch.truncated, nv_c, ppo.cost_gamma, ppo.lam_c)
    return (adv_r, ret_r, v_r), (adv_c, ret_c, v_c)


def pass_kl(actor: GaussianActor, obs: torch.Tensor, old: torch.distributions.Normal, comm: Comm = LOCAL) -> float:
    """KL(π_old‖π) after a pass, as OmniSafe 0.5.0's PolicyGradient._update: summed over action dimensions,
    averaged over the rollout's obs [M, D] (and over processes)."""
    with torch.no_grad():
        kl = torch.distributions.kl.kl_divergence(old, actor(obs)).sum(-1).mean()
    return float(comm.sum(kl) / comm.world_size if comm.world_size > 1 else kl)


# (logp [B], entropy [B], logp_old [B], A [B] combined, A_c [B]) -> (actor loss [], ratio-guard event counts)
ActorLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
                     tuple[torch.Tensor, dict[str, torch.Tensor]]]


@dataclass
class Samples:
    """The rollout as M = T·N samples (all [M] but obs [M, D] and actions [M, A]), with its advantages: A_r
    processed (step 3), A the combined advantage the actor trains on (step 5)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logp_old: torch.Tensor
    adv: torch.Tensor
    adv_r: torch.Tensor
    adv_c: torch.Tensor
    ret_r: torch.Tensor
    ret_c: torch.Tensor
    v_r: torch.Tensor
    v_c: torch.Tensor


@dataclass
class Tally:
    """What the epochs log: the minibatch losses, the ratio guard's events, the last KL and where it stopped."""

    stop_iter: int
    losses: dict[str, list[float]]
    events: dict[str, int]
    kl: float = 0.0
    stopped: bool = False


def update(state: SafePPOState, batch: Rollout, jc: float, ppo: PPOConfig, safety: SafetyConfig, kit: Kit,
           gen: torch.Generator, progress: float = 0.0, comm: Comm = LOCAL,
           lambda_scale: float = 1.0, actor_loss: ActorLoss | None = None) -> dict[str, float]:
    """One PPO-family update from a rollout (module docstring, steps 1–6); returns OmniSafe-named metrics.
    ``jc``: mean episode cost of the recent window (NaN if none finished; the same on every process);
    ``progress`` ∈ [0, 1): fraction of the run done, for the linear actor learning-rate decay; ``comm``:
    data-parallel reductions (advantage statistics, gradients, the KL decision) when several processes
    each hold part of the rollout; ``lambda_scale``: M for this update's λ step (``update_safety``);
    ``actor_loss``: the minibatch actor loss in place of ``policy_loss`` (P3O, rlspec/algos/trust_region.py)."""
    before = state.guard.counts()  # the guard's counts are the run's: this update's are the difference
    if ALGOS[state.algo].family != "ppo" and actor_loss is None:
        raise ValueError(f"update: algo {state.algo!r} is trained by rlspec.algos.safe_update.update, not the "
                         f"PPO family's update")
    if actor_loss is None:
        def actor_loss(logp, ent, logp_old, adv, adv_c):
            return policy_loss(logp, ent, logp_old, adv, ppo, kit)
    samples = _samples(state, batch, jc, ppo, safety, kit, comm, lambda_scale)  # 1) .. 5)
    if ppo.linear_lr_decay:
        for g in state.actor_opt.param_groups:
            g["lr"] = ppo.actor_lr * (1.0 - progress)
    tally = _epochs(state, samples, ppo, kit, gen, comm, actor_loss)  # 6)
    if ppo.lambda_update == "after":  # 4') λ after the policy update (PPOLagSem design §5.5)
        update_safety(state, jc, safety, lambda_scale)
    if state.obs_norm is not None and ppo.obs_norm_update == "rollout":  # it learns from the whole rollout only
        state.obs_norm.commit(batch.raw_obs.reshape(samples.adv.shape[0], -1))  # now (PPO review CRITICAL-1)
    return _update_metrics(state, samples, tally, before)


def _samples(state: SafePPOState, batch: Rollout, jc: float, ppo: PPOConfig, safety: SafetyConfig, kit: Kit,
             comm: Comm, lambda_scale: float) -> Samples:
    """Steps 1–5: values and GAE, the advantages processed over the whole rollout, λ before the policy
    update (OmniSafe; ``lambda_update="before"``), the combined advantage with this update's λ."""
    T, N = batch.reward.shape
    (adv_r, ret_r, v_r), (adv_c, ret_c, v_c) = advantages(state, batch, ppo, kit)  # [T, N] each
    flat = lambda x: x.reshape(T * N, *x.shape[2:])  # noqa: E731  [T, N, ...] -> [M, ...]
    adv_r, adv_c = process_advantages(flat(adv_r), flat(adv_c), ppo, comm)
    if ppo.lambda_update == "before":
        update_safety(state, jc, safety, lambda_scale)
    multiplier = state.lagrange_multiplier()
    adv = combine_advantages(adv_r, adv_c, multiplier, ppo.adv_combine) if state.cost_critic is not None else adv_r
    return Samples(flat(batch.obs), flat(batch.act), flat(batch.logp), adv, adv_r, adv_c, flat(ret_r), flat(ret_c),
                   flat(v_r), flat(v_c))


def _epochs(state: SafePPOState, s: Samples, ppo: PPOConfig, kit: Kit, gen: torch.Generator, comm: Comm,
            actor_loss: ActorLoss) -> Tally:
    """Step 6: ``update_iters`` epochs of shuffled minibatches until the KL check stops them: before every
    optimizer step (``kl_check="minibatch"``, ``minibatch_kl``) or after every pass (``"pass"``, ``pass_kl``)."""
    tally = Tally(ppo.update_iters, {"pi": [], "reward_critic": [], "cost_critic": [], "entropy": []},
                  dict.fromkeys(("log_ratio_clamped", "nonfinite", "ratio_clamped"), 0))
    M = s.adv.shape[0]
    if ppo.kl_check == "pass":
        with torch.no_grad():
            old = state.actor(s.obs)  # π_old over the rollout, batch shape [M, A]
    for epoch in range(ppo.update_iters):
        perm = torch.randperm(M, generator=gen)
        for start in range(0, M, ppo.batch_size):
            idx = perm[start:start + ppo.batch_size]  # [B]
            logp, entropy = state.actor.log_prob(s.obs[idx], s.actions[idx])  # [B] each
            if ppo.kl_check == "minibatch":
                tally.stopped, tally.kl = minibatch_kl(logp, s.logp_old[idx], ppo, kit, comm)
                if tally.stopped:
                    tally.stop_iter = epoch + 1
                    break
            _minibatch_step(state, s, idx, logp, entropy, ppo, kit, comm, actor_loss, tally)
        if ppo.kl_check == "pass":
            tally.kl = pass_kl(state.actor, s.obs, old, comm)
            tally.stopped = ppo.target_kl is not None and not tally.kl <= ppo.target_kl
            tally.stop_iter = epoch + 1 if tally.stopped else tally.stop_iter
        if tally.stopped:
            break
    return tally


def minibatch_kl(logp: torch.Tensor, logp_old: torch.Tensor, ppo: PPOConfig, kit: Kit,
                 comm: Comm = LOCAL) -> tuple[bool, float]:
    """(stop, KL) of the pre-step check on a minibatch ([B] each): contract ``numerics`` kl_early_stop (k3-KL >
    1.5·target_kl); with several processes one decision for all, the mean KL against the same threshold."""
    stop, kl = kit.kl_early_stop((logp - logp_old).detach(), ppo.target_kl)
    if comm.world_size > 1:
        kl = comm.sum(kl.detach()) / comm.world_size
        stop = ppo.target_kl is not None and not float(kl) <= KL_MULTIPLIER * ppo.target_kl
    return bool(stop), float(kl)


def _minibatch_step(state: SafePPOState, s: Samples, idx: torch.Tensor, logp: torch.Tensor, entropy: torch.Tensor,
                    ppo: PPOConfig, kit: Kit, comm: Comm, actor_loss: ActorLoss, tally: Tally) -> None:
    """The critics' and the actor's optimizer steps on minibatch ``idx`` [B], their losses tallied."""
    critics = critic_steps(state, s.obs[idx], s.v_r[idx], s.ret_r[idx], s.v_c[idx], s.ret_c[idx], ppo, kit)
    loss_pi, ev = actor_loss(logp, entropy, s.logp_old[idx], s.adv[idx], s.adv_c[idx])
    for k, v in ev.items():
        tally.events[k] += int(v)
    loss_pi = state.guard(loss_pi, "pi")
    optimize([*critics, (loss_pi, state.actor, state.actor_opt)], ppo, comm)
    for (loss, _, _), kind in zip(critics, ("reward_critic", "cost_critic")):
        tally.losses[kind].append(float(loss.detach()))
    tally.losses["pi"].append(float(loss_pi.detach()))
    tally.losses["entropy"].append(float(entropy.mean().detach()))


def _update_metrics(state: SafePPOState, s: Samples, tally: Tally, before: dict[str, int]) -> dict[str, float]:
    """The update's OmniSafe-named metrics; a loss's mean leaves out the steps the guard replaced."""
    counts = state.guard.counts()
    losses = tally.losses
    mean = lambda xs: sum(xs) / len(xs) if xs else math.nan  # noqa: E731
    loss = lambda k: logged_loss(sum(losses[k]), len(losses[k]), counts.get(k, 0) - before.get(k, 0))  # noqa: E731
    metrics = {
        "Loss/Loss_pi": loss("pi"), "Loss/Loss_reward_critic": loss("reward_critic"),
        # StopIter: the epoch in which the KL check stopped the update (update_iters if it never did)
        "Train/Entropy": mean(losses["entropy"]), "Train/KL": tally.kl, "Train/StopIter": float(tally.stop_iter),
        "Train/LR": state.actor_opt.param_groups[0]["lr"], "Value/Adv": float(s.adv_r.mean()),
        "Metrics/LagrangeMultiplier": state.lagrange_multiplier(),
        **{f"Guard/ratio_{k}": float(v) for k, v in tally.events.items()},
        **{f"Guard/nonfinite_{k}": float(counts.get(k, 0)) for k in ("pi", "reward_critic", "cost_critic")},
    }
    if state.cost_critic is not None:
        metrics["Loss/Loss_cost_critic"] = loss("cost_critic")
    if state.simmer_budget is not None:
        metrics["Metrics/SafetyBudget"] = float(state.simmer_budget[0])
    return metrics
