"""Functional core of the success-set design's learner: PPO + V-trace over a fragment replay, with the success-as-a-set
bonus phase as a side path (success-set design §1.2 "minimal intrusion": the PPO + V-trace tensors are untouched).

Policy: per action dimension d a categorical over N_BINS tokens, logits [N, ACTION_DIM, N_BINS] from an MLP
(the discretized action of the success-set design §3.2: log π(a|s) = Σ_d log π_d(a_d|s)); value: an MLP critic.

Main update (``ppo_vtrace_update``), on the newest fragment plus ``replay_fragments`` older ones drawn from
the replay with the caller's generator, stacked along the env axis ([T, N_total]):
1. π_old = the policy at the start of the update; V-trace (IMPALA §4.1, contract ``vtrace``) of π_old
   against the behaviour policy that collected each fragment: log ρ_t = log π_old(a_t|s_t) − log μ(a_t|s_t),
   discount γ_t = γ·(1 − done_t), reward r_t + γ·V(s_final) on a truncated step (a timeout bootstraps the
   real final observation, PPO review CRITICAL-2; then γ_t = 0), bootstrap V(s'_{T−1}).
2. Advantages = V-trace's policy-gradient advantages ρ̄-clipped (r_t + γ_t·v_{s,t+1} − V(s_t))·min(ρ̄_pg, ρ_t),
   standardized over the batch by the kit's ``safe_standardize`` (contract numerics: (A − mean)/std with the
   sample std; a batch whose std is below STD_EPS, a constant one included, is only zero-centred, never divided
   by a tiny std); value targets v_s.
3. ``epochs`` × ``minibatches`` of PPO-clip on π/π_old with ½(V − v_s)² and an entropy bonus (Adam; the
   policy's and the critic's gradients clipped to their own norms). The numerics note's guards, counted in ``Guard/*``:
   the ratio passes the kit's ``ratio_guard`` (log-ratio clamped to ±20, ratio to [0.01, 100], a non-finite
   one replaced by 1), each loss the learner's ``LossGuard`` (a non-finite loss becomes 0, cumulative counts),
   and with ``target_kl`` the KL early stop ends the epochs. The entropy of each action dimension's head is
   logged apart (``Train/Entropy/d``).

Return scale (``ReturnScale``): the replay keeps raw rewards; each update divides its whole batch's rewards by
σ_G, the running std of the discounted return (SB3 VecNormalize's reward scale), so the critic fits values
of O(1) on any task (Meta-World's returns are in the hundreds: in raw units the critic's gradient dominated
one shared clip norm, and the policy's effective step swung with it, up to collapse). Rewards × c > 0 give
σ_G × c and the same update.

Observation scale (``ObsNorm``, with ``normalize_obs``): the replay keeps raw observations and commits each new
fragment's to the kit's ObsNormalizer; before each update the learner loads those statistics into the policy's
ObsNorm, which the critic's input passes too (LearnerState.value). SB3's anchor on Meta-World normalizes its
observations the same way (VecNormalize).

Bonus phase (``bonus_phase``, after the main update, success-set design §3.3, Part3): the scheduler decides from the
paired queue (identically on every rank: contract ``success_set`` BonusScheduler, all-reduce MIN); on a
trigger, packs are sampled (consume / diverse per config), stacked into a step batch, and up to
``bonus_updates`` Adam steps (its own optimizer and learning rate, so PPO's moments are not disturbed)
descend Loss A, each followed by the KL/entropy guard against the pre-bonus policy. Any exception in the
bonus side is counted (``bonus/errors``) and skipped: the bonus never stops the main training (§1.2).

The replay side of the bonus (``PairMiner``, success-set design Part2/Part4): every finished episode (episodes.py)
goes to it; a success joins the success pool (with a prototype cluster id when prototypes are on), a
failure is mined against the pool into a PairPack on the paired queue. Mining errors are counted and skipped.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import torch
from torch import nn

from rlspec import registry
from rlspec.algos.config import ABLATIONS, KITS, Ablation, LearnerConfig  # noqa: F401  (re-exported)
from rlspec.algos.episodes import Finished
from rlspec.algos.guards import logged_loss
from rlspec.contracts.success_set import Episode, SuccessSetConfig, episode_embedding, stack_packs
from rlspec.models.actor_critic import Critic, mlp

log = logging.getLogger(__name__)


class ObsNorm(nn.Module):
    """The networks' input with ``normalize_obs``: the kit's ObsNormalizer (contract numerics: (obs − μ)/√(σ² + ε)
    clipped to ±10, SB3 VecNormalize's observations) with frozen statistics. They are the module's extra state,
    so ``policy.state_dict()`` carries them with the weights to the rollout workers, the EMA policy, the
    checkpoints and ``rlspec eval``. The replay side commits every fragment's raw observations; the learner
    loads those statistics (``set_extra_state``) before each update."""

    def __init__(self, normalizer):
        super().__init__()
        self.normalizer = normalizer

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.normalizer.normalize(obs)

    def get_extra_state(self) -> dict:
        return self.normalizer.state_dict()

    def set_extra_state(self, state: dict) -> None:
        self.normalizer.load_state_dict(state)


class TokenPolicy(nn.Module):
    """obs [N, OBS] -> logits [N, ACTION_DIM, N_BINS]; ``norm``: the input normalization (ObsNorm), or none."""

    def __init__(self, obs_dim: int, action_dim: int, n_bins: int, hidden: tuple[int, ...], gen: torch.Generator,
                 norm: ObsNorm | None = None):
        super().__init__()
        self.action_dim, self.n_bins = action_dim, n_bins
        self.norm = norm if norm is not None else nn.Identity()
        self.net = mlp([obs_dim, *hidden, action_dim * n_bins], "tanh", gen)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(obs)).reshape(*obs.shape[:-1], self.action_dim, self.n_bins)


def token_logp(logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(a|s) = Σ_d log π_d(a_d|s) [N] and the entropy Σ_d H(π_d) [N], from logits [N, A, B], tokens [N, A]."""
    chosen, entropy = head_logp(logits, tokens)
    return chosen.sum(-1), entropy.sum(-1)


def head_logp(logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per action dimension d: log π_d(a_d|s) [N, A] and H(π_d) [N, A], from logits [N, A, B], tokens [N, A]."""
    logp = torch.log_softmax(logits, dim=-1)  # [N, A, B]
    chosen = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # [N, A]
    return chosen, -(logp.exp() * logp).sum(-1)


def sample_tokens(logits: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One token per action dimension [N, A] drawn from softmax(logits [N, A, B]) with ``gen``."""
    N, A, B = logits.shape
    probs = torch.softmax(logits.reshape(N * A, B), dim=-1)
    return torch.multinomial(probs, 1, generator=gen).reshape(N, A)


class Fragment(NamedTuple):
    """T consecutive steps of N envs, time-major, as a rollout worker sends them."""

    obs: torch.Tensor  # [T, N, OBS]
    tokens: torch.Tensor  # [T, N, A] int64
    logp: torch.Tensor  # [T, N] behaviour log μ(a_t|s_t)
    reward: torch.Tensor  # [T, N]
    terminated: torch.Tensor  # [T, N] bool
    truncated: torch.Tensor  # [T, N] bool
    next_obs: torch.Tensor  # [T, N, OBS] s'_t (the real final observation on a done step)


def stack_fragments(frags: list[Fragment]) -> Fragment:
    return Fragment(*(torch.cat(cols, dim=1) for cols in zip(*frags)))


KIT_CONTRACTS = ("vtrace", "success_set", "numerics")  # what a BonusKit is built from (registry)


@dataclass
class BonusKit:
    """The contract implementations the core calls: the modules rlspec/registry.py registers for one run kit
    (reference or fast) of ``vtrace``, ``success_set`` and ``numerics``."""

    vtrace: Callable[..., tuple[torch.Tensor, torch.Tensor]]  # contract vtrace: (vs, pg_advantages)
    # contract success_set (the stateful parts are the reference's in both kits: once per episode, not hot)
    loss_a: Callable[..., Any]
    mine_pair: Callable[..., Any]
    SuccessPrototypes: type
    PairedQueue: type
    BonusScheduler: type
    # contract numerics
    RunningMeanStd: type
    ObsNormalizer: type
    ratio_guard: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]
    LossGuard: type
    safe_standardize: Callable[[torch.Tensor], torch.Tensor]

    @classmethod
    def reference(cls) -> "BonusKit":
        return cls.named("reference")

    @classmethod
    def fast(cls) -> "BonusKit":
        return cls.named("fast")

    @classmethod
    def named(cls, name: str) -> "BonusKit":
        """The kit a run config names: one of KITS."""
        if name not in KITS:
            raise ValueError(f"BonusKit.named: argument 'name' must be one of {KITS}, got {name!r}")
        m = registry.kit_modules(name, KIT_CONTRACTS)
        vtrace, success_set, numerics = (m[c] for c in KIT_CONTRACTS)
        return cls(vtrace=vtrace.vtrace, loss_a=success_set.loss_a, mine_pair=success_set.mine_pair,
                   SuccessPrototypes=success_set.SuccessPrototypes, PairedQueue=success_set.PairedQueue,
                   BonusScheduler=success_set.BonusScheduler, RunningMeanStd=numerics.RunningMeanStd,
                   ObsNormalizer=numerics.ObsNormalizer, ratio_guard=numerics.ratio_guard,
                   LossGuard=numerics.LossGuard, safe_standardize=numerics.safe_standardize)


class ReturnScale:
    """σ_G = √(Var[G] + 1e-8) of the discounted return G_t = γ·G_{t−1}·(1 − done_{t−1}) + r_t of every env
    (module docstring; the statistics: the kit's RunningMeanStd, contract numerics, one update per fragment
    step from that step's envs, as SB3's VecNormalize and safe_ppo.RewardScaler). Envs are global indices, so
    fragments of several rollout workers feed one scale."""

    def __init__(self, total_envs: int, gamma: float, kit: BonusKit):
        self.gamma = gamma
        self.rms = kit.RunningMeanStd(())
        self.ret = torch.zeros(total_envs, dtype=torch.float64)  # [E] G of each env's episode so far

    def observe(self, reward: torch.Tensor, done: torch.Tensor, envs: torch.Tensor) -> None:
        """reward, done [T, N] of the envs ``envs`` [N] (global indices), in time order."""
        for r, d in zip(reward.double(), done):
            g = self.gamma * self.ret[envs] + r  # [N]
            self.rms.update(g)
            self.ret[envs] = torch.where(d, torch.zeros_like(g), g)

    def scale(self) -> float:
        return math.sqrt(float(self.rms.var) + 1e-8)

    def state_dict(self) -> dict:
        return {"rms": self.rms.state_dict(), "ret": self.ret.clone()}

    def load_state_dict(self, s: dict) -> None:
        self.rms.load_state_dict(s["rms"])
        self.ret = s["ret"].clone()


@dataclass
class LearnerState:
    policy: TokenPolicy
    critic: Critic  # on the policy's normalized input (value())
    opt: torch.optim.Optimizer
    bonus_opt: torch.optim.Optimizer

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) [...] of raw observations [..., OBS]."""
        return self.critic(self.policy.norm(obs))


def make_policy(cfg: LearnerConfig, obs_dim: int, action_dim: int, n_bins: int, kit: BonusKit,
                gen: torch.Generator) -> TokenPolicy:
    norm = ObsNorm(kit.ObsNormalizer((obs_dim,))) if cfg.normalize_obs else None
    return TokenPolicy(obs_dim, action_dim, n_bins, cfg.hidden, gen, norm)


def make_learner(cfg: LearnerConfig, obs_dim: int, action_dim: int, n_bins: int, kit: BonusKit,
                 gen: torch.Generator) -> LearnerState:
    policy = make_policy(cfg, obs_dim, action_dim, n_bins, kit, gen)
    critic = Critic(obs_dim, cfg.hidden, "tanh", gen)
    opt = torch.optim.Adam([*policy.parameters(), *critic.parameters()], lr=cfg.lr)
    return LearnerState(policy, critic, opt, torch.optim.Adam(policy.parameters(), lr=cfg.bonus_lr))


@torch.no_grad()
def act(policy: TokenPolicy, obs: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens [N, A] and their behaviour log-probabilities [N] for obs [N, OBS]."""
    logits = policy(obs)
    tokens = sample_tokens(logits, gen)
    return tokens, token_logp(logits, tokens)[0]


@torch.no_grad()
def load_policy(policy: TokenPolicy, weights: dict, perturb_std: float, gen: torch.Generator) -> None:
    """``policy`` ← ``weights`` plus N(0, perturb_std²) noise on every parameter drawn from ``gen`` (success-set design
    §2.3 perturbed_best; 0: none, and nothing drawn)."""
    policy.load_state_dict(weights)
    if perturb_std:
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * perturb_std)


Clipped = list[tuple[list[nn.Parameter], float]]  # parameter groups, each with its own gradient norm clip


def _step(opt: torch.optim.Optimizer, loss: torch.Tensor, groups: Clipped, average_gradients) -> list[float]:
    """One optimizer step; each group's gradient is clipped to its own norm (after the average over ranks).
    Returns the groups' gradient norms before the clip."""
    opt.zero_grad()
    loss.backward()
    if average_gradients is not None:
        average_gradients([p for params, _ in groups for p in params])
    norms = [float(nn.utils.clip_grad_norm_(params, max_norm)) for params, max_norm in groups]
    opt.step()
    return norms


@torch.no_grad()
def vtrace_targets(state: LearnerState, batch: Fragment, cfg: LearnerConfig, vtrace) -> tuple[torch.Tensor, ...]:
    """(logp_old [T, N], v_s [T, N], pg advantages [T, N], ρ [T, N]) of the update-start policy (step 1)."""
    logp_old = token_logp(state.policy(batch.obs), batch.tokens)[0]  # [T, N]
    v, nv = state.value(batch.obs), state.value(batch.next_obs)  # [T, N] each
    done = batch.terminated | batch.truncated
    timeout = batch.truncated & ~batch.terminated  # a terminal at the time limit is a terminal
    reward = batch.reward + cfg.gamma * timeout * nv  # a timeout bootstraps V(s_final)
    discount = cfg.gamma * (~done).to(v.dtype)
    log_rho = logp_old - batch.logp
    vs, pg = vtrace(log_rho, discount, reward, v, nv[-1], rho_bar=cfg.rho_bar, c_bar=cfg.c_bar)
    return logp_old, vs.to(v.dtype), pg.to(v.dtype), log_rho.exp()


def ppo_vtrace_update(state: LearnerState, batch: Fragment, cfg: LearnerConfig, kit: BonusKit, gen: torch.Generator,
                      average_gradients: Callable[[list[nn.Parameter]], None] | None = None,
                      return_scale: float = 1.0,
                      standardize: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
    """The main update (module docstring, steps 1–3) on rewards / ``return_scale`` (ReturnScale.scale());
    returns the logged metrics. ``kit``: vtrace, safe_standardize, ratio_guard and LossGuard.
    ``average_gradients``: data parallel trainers average every gradient over ranks before the clip (each rank
    the same number of minibatches: equal batches per rank); ``standardize``: theirs of the advantages over every
    rank's batch (default: the kit's safe_standardize over this batch)."""
    batch = batch._replace(reward=batch.reward / return_scale)
    logp_old, vs, adv, rho = vtrace_targets(state, batch, cfg, kit.vtrace)
    T, N = logp_old.shape
    flat = lambda x: x.reshape(T * N, *x.shape[2:])  # noqa: E731  [T, N, ...] -> [M, ...]
    obs, tokens, logp_old, vs, adv = flat(batch.obs), flat(batch.tokens), flat(logp_old), flat(vs), flat(adv)
    adv = (standardize or kit.safe_standardize)(adv)  # contract numerics: zero-centred where std < STD_EPS
    M = T * N
    size = math.ceil(M / cfg.minibatches)
    guard = kit.LossGuard()  # this update's non-finite losses
    means = {k: 0.0 for k in ("Loss/Loss_pi", "Loss/Loss_value", "Train/Entropy", "Train/KL", "Train/GradNormPi",
                              "Train/GradNormV", *(f"Train/Entropy/{d}" for d in range(state.policy.action_dim)))}
    counts = {"Guard/RatioClamped": 0, "Guard/LogRatioClamped": 0, "Guard/RatioNonFinite": 0}
    n = epochs_run = 0
    groups = [(list(state.policy.parameters()), cfg.max_grad_norm),
              (list(state.critic.parameters()), cfg.value_max_grad_norm)]
    for _ in range(cfg.epochs):
        perm = torch.randperm(M, generator=gen)
        for start in range(0, M, size):
            idx = perm[start:start + size]
            chosen, head_entropy = head_logp(state.policy(obs[idx]), tokens[idx])  # [b, A] each
            logp, entropy = chosen.sum(-1), head_entropy.sum(-1)  # [b] each
            ratio, events = kit.ratio_guard(logp, logp_old[idx])
            clipped = ratio.clamp(1 - cfg.clip, 1 + cfg.clip)
            loss_pi = guard(-torch.min(ratio * adv[idx], clipped * adv[idx]).mean(), "policy")
            loss_v = guard(0.5 * (state.value(obs[idx]) - vs[idx]).pow(2).mean(), "value")
            loss = loss_pi + cfg.value_coef * loss_v - cfg.entropy_coef * entropy.mean()
            norms = _step(state.opt, loss, groups, average_gradients)
            with torch.no_grad():
                values = (loss_pi, loss_v, entropy.mean(), (logp_old[idx] - logp).mean(), *norms,
                          *head_entropy.mean(0))
                for key, val in zip(means, values):
                    means[key] += float(val)
                for key, event in zip(counts, ("ratio_clamped", "log_ratio_clamped", "nonfinite")):
                    counts[key] += int(events[event])
            n += 1
        epochs_run += 1
        if cfg.target_kl is not None and approx_kl(state.policy, obs, tokens, logp_old) > cfg.target_kl:
            break
    losses = guard.counts()
    logged = {"Loss/Loss_pi": "policy", "Loss/Loss_value": "value"}  # key -> its guard kind
    return {**{k: logged_loss(v, n, losses.get(logged[k], 0)) if k in logged else v / n for k, v in means.items()},
            **counts,
            "Guard/LossNonFinite/policy": losses.get("policy", 0), "Guard/LossNonFinite/value": losses.get("value", 0),
            "Guard/KLEarlyStop": int(epochs_run < cfg.epochs), "Train/StopIter": epochs_run,
            "Train/RhoClipFrac": float((rho > cfg.rho_bar).double().mean()), "Train/ReturnScale": return_scale}


@torch.no_grad()
def approx_kl(policy: TokenPolicy, obs: torch.Tensor, tokens: torch.Tensor, logp_old: torch.Tensor) -> float:
    """mean(log π_old(a|s) − log π(a|s)) over the whole batch [M]: Train/KL's estimator, for the early stop."""
    return float((logp_old - token_logp(policy(obs), tokens)[0]).mean())


# ------------------------------------------------------------------------------------- the bonus side
@dataclass(frozen=True)
class BonusSetup:
    """What an ablation (success-set design §7) turns on."""

    mine: bool  # keep a success pool and a paired queue
    loss_a: bool  # run bonus time
    top_k: int | None  # None: the config's top_k
    prototypes: bool  # success prototypes, Top-K across clusters, diverse sampling
    placebo: bool = False  # each bonus batch's positive sets shuffled across its rows (bonus_phase)


def bonus_setup(ablation: str) -> BonusSetup:
    setups = {"baseline": BonusSetup(False, False, None, False), "queue": BonusSetup(True, False, None, False),
              "top1": BonusSetup(True, True, 1, False), "topk": BonusSetup(True, True, None, False),
              "prototypes": BonusSetup(True, True, None, True), "placebo": BonusSetup(True, True, None, False, True)}
    if ablation not in setups:
        raise ValueError(f"bonus_setup: argument 'ablation' must be one of {ABLATIONS}, got {ablation!r}")
    return setups[ablation]


def effective_config(cfg: SuccessSetConfig, setup: BonusSetup) -> SuccessSetConfig:
    """The bonus config an ablation runs with: Top-1 forces top_k = 1; without prototypes there are no
    clusters to cover or sample across."""
    return dataclasses.replace(cfg, top_k=setup.top_k or cfg.top_k, use_clusters=setup.prototypes,
                               diverse_clusters=setup.prototypes and cfg.diverse_clusters,
                               min_clusters=cfg.min_clusters if setup.prototypes else 0)


class PairMiner:
    """Success pool, prototypes and the paired queue (success-set design Part2, Part4), fed finished episodes."""

    def __init__(self, cfg: SuccessSetConfig, setup: BonusSetup, kit, pool_size: int, queue_size: int):
        self.cfg, self.setup, self.kit = cfg, setup, kit
        self.successes: deque[Episode] = deque(maxlen=pool_size)
        self.prototypes = kit.SuccessPrototypes(cfg.num_prototypes, cfg.prototype_ema) if setup.prototypes else None
        self.queue = kit.PairedQueue(queue_size)
        self.counts = {"mined": 0, "no_pool": 0, "errors": 0}

    def add(self, done: Finished) -> None:
        try:
            self._add(done)
        except Exception as err:  # the bonus is a side path: mining never stops training (§1.2)
            if not self.counts["errors"]:
                log.warning("pair mining failed (counted in pairs/errors, training goes on): %r", err)
            self.counts["errors"] += 1

    def _add(self, done: Finished) -> None:
        ep = done.episode
        if done.success:
            cluster = (self.prototypes.assign(episode_embedding(ep.states)) if self.prototypes is not None
                       else ep.cluster_id)
            self.successes.append(ep._replace(cluster_id=cluster))
            return
        pack = self.kit.mine_pair(ep, list(self.successes), self.cfg)
        if pack is None:
            self.counts["no_pool"] += 1
            return
        self.queue.push(pack)
        self.counts["mined"] += 1

    def stats(self) -> tuple[int, int]:
        """(pairs in the queue, their cluster coverage): what the bonus trigger reads."""
        return len(self.queue), self.queue.cluster_coverage()

    def reserve(self, n: int, gen: torch.Generator) -> list:
        """Up to n packs sampled (diverse per config) and left in the queue until ``consume``."""
        if not len(self.queue):
            return []
        return self.queue.sample(n, generator=gen, consume=False, diverse=self.cfg.diverse_clusters)

    def consume(self, fail_ep_ids: list[int]) -> None:
        """Remove the packs of these failures (one pack per failure; ids absent already are ignored)."""
        gone = set(fail_ep_ids)
        kept = [p for p in self.queue.packs if p.fail_ep_id not in gone]
        self.queue.packs.clear()
        self.queue.packs.extend(kept)

    def metrics(self) -> dict[str, float]:
        return {"pairs/queue": float(len(self.queue)), "pairs/coverage": float(self.queue.cluster_coverage()),
                "pairs/success_pool": float(len(self.successes)), **{f"pairs/{k}": float(v)
                                                                    for k, v in self.counts.items()}}


def _bonus_step(state: LearnerState, batch: tuple[torch.Tensor, ...], before: torch.Tensor, cfg: SuccessSetConfig,
                max_grad_norm: float, loss_a, average_gradients=None) -> tuple[float, float]:
    """One Loss A step; returns (mean KL(π_before ‖ π) summed over dimensions, mean entropy) after it."""
    states, fail_actions, pos_mask, zone_w = batch
    out = loss_a(state.policy(states), fail_actions, pos_mask, zone_w, tau=cfg.tau, margin=cfg.margin)
    _step(state.bonus_opt, out.loss, [(list(state.policy.parameters()), max_grad_norm)], average_gradients)
    with torch.no_grad():
        after = torch.log_softmax(state.policy(states), dim=-1)  # [N, A, B]
        kl = (before.exp() * (before - after)).sum(-1).sum(-1).mean()
        entropy = -(after.exp() * after).sum(-1).sum(-1).mean()
    return float(kl), float(entropy)


def bonus_phase(state: LearnerState, miner, scheduler, step: int, n_bins: int, max_grad_norm: float,
                kit, gen: torch.Generator, average_gradients=None, placebo: bool = False,
                heldout: int = 0) -> dict[str, float]:
    """Bonus time after a main update (success-set design §3.3); returns its telemetry (bonus/* keys).

    ``placebo`` (the "placebo" ablation): the batch's positive sets are permuted across its rows (a generator
    draw), so Loss A runs with the same dose, steps and guard but teaches positives of other states: what the
    bonus does without the success sets' information. ``heldout``: that many more packs are reserved, never
    trained on nor consumed, and bonus/heldout_margin_change is their mean log p⁺ − log p⁻ after the phase minus
    before (NaN when the queue cannot spare them).

    ``miner``: a PairMiner or a proxy of one in another process (stats, reserve, consume, cfg). The packs
    are reserved and stacked *before* the decision, so a rank that has none (or fails to build its batch)
    reports NO_PACK into the agreement instead of failing after it; an exception inside an update zeroes
    that rank's gradient (it still takes part in the gradient average) and reports KL = inf, so the guard
    stops every rank after the same update. Errors are counted in ``bonus/error``: the bonus never stops
    the main training (§1.2) and never leaves a rank waiting in a collective."""
    cfg, errors = miner.cfg, [0]

    def failed(err: Exception) -> None:
        if not errors[0]:
            log.warning("bonus phase failed at step %d (counted in bonus/errors): %r", step, err)
        errors[0] += 1

    packs, batch, held = [], None, None
    try:
        packs = miner.reserve(cfg.batch_packs + heldout, gen)
        if heldout and len(packs) > heldout:
            held = _float_batch(stack_packs(packs[-heldout:], n_bins))
            packs = packs[:-heldout]
        elif heldout:
            packs = packs[:cfg.batch_packs]
        if packs:
            states, fail_actions, pos_mask, zone_w = stack_packs(packs, n_bins)
            if placebo:
                pos_mask = pos_mask[torch.randperm(pos_mask.shape[0], generator=gen).to(pos_mask.device)]
            batch = _float_batch((states, fail_actions, pos_mask, zone_w))
    except Exception as err:
        failed(err)
    pairs, coverage = miner.stats()
    decision = scheduler.decide(step, pairs, coverage, 0 if batch is None else len(packs))
    if not decision.trigger:
        return {**decision.telemetry, "bonus/error": float(errors[0])}
    if cfg.consume_packs:
        miner.consume([p.fail_ep_id for p in packs])
    params = list(state.policy.parameters())
    with torch.no_grad():
        before = torch.log_softmax(state.policy(batch[0]), dim=-1)  # [N, A, B]

    def update(i: int) -> tuple[float, float]:
        try:
            return _bonus_step(state, batch, before, cfg, max_grad_norm, kit.loss_a, average_gradients)
        except Exception as err:
            failed(err)
            for p in params:
                p.grad = torch.zeros_like(p)
            if average_gradients is not None:
                average_gradients(params)
            return math.inf, math.nan

    margin_before = _margin(state, held, cfg, kit)
    run = scheduler.run(update)
    extra = {"bonus/heldout_margin_change": _margin(state, held, cfg, kit) - margin_before} if heldout else {}
    return {**decision.telemetry, **run.telemetry, "bonus/steps": float(batch[0].shape[0]),
            "bonus/error": float(errors[0]), **extra}


def _float_batch(stacked: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    states, fail_actions, pos_mask, zone_w = stacked
    return states.float(), fail_actions, pos_mask, zone_w.float()  # [N, OBS], [N, A], [N, A, B], [N]


@torch.no_grad()
def _margin(state: LearnerState, batch: tuple[torch.Tensor, ...] | None, cfg: SuccessSetConfig, kit) -> float:
    """Mean log p⁺ − log p⁻ of Loss A's terms on ``batch`` under the current policy (NaN without one)."""
    if batch is None:
        return math.nan
    states, fail_actions, pos_mask, zone_w = batch
    out = kit.loss_a(state.policy(states), fail_actions, pos_mask, zone_w, tau=cfg.tau, margin=cfg.margin)
    return float((out.logp_pos - out.logp_neg).mean())
