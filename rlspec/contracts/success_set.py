"""Runtime half of contract ``success_set`` (formulas: rlspec.spec.success_set; the success-set design §2.3, §3.1–§3.3,
Part1, Part2, Part4): the bonus phase's configuration and documented defaults, the PairPack and episode
records, reason codes, validators, the Top-K/divergence/window pipeline that both implementations drive
with their own primitives, and the cross-rank MIN agreement.

Imports only torch. How a learner uses it (``ss`` = rlspec.reference.success_set or rlspec.fast.success_set)::

    cfg = SuccessSetConfig(batch_packs=16)
    protos = ss.SuccessPrototypes(cfg.num_prototypes, cfg.prototype_ema)
    queue = ss.PairedQueue(capacity=4096)
    # an episode finishes (reassembled from fragments by episode_id, Part1):
    if success: ep = ep._replace(cluster_id=protos.assign(episode_embedding(ep.states))); pool.append(ep)
    else:       pack = ss.mine_pair(ep, pool, cfg); queue.push(pack) if pack is not None else None
    # after the PPO + V-trace update (every rank):
    sched = ss.BonusScheduler(cfg)                       # once
    packs = queue.sample(cfg.batch_packs, consume=cfg.consume_packs, diverse=cfg.diverse_clusters, generator=g)
    decision = sched.decide(step, len(queue), queue.cluster_coverage(), len(packs))
    if decision.trigger: run = sched.run(lambda i: one_loss_a_update(packs, i))   # -> (kl, entropy)
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Callable, NamedTuple, Sequence

import torch

from rlspec.contracts.params import SuccessSetConfig  # noqa: F401  (re-exported: the contract's config)
from rlspec.contracts.validate import require_floating, require_int, require_range

# Reason codes of bonus/not_triggered_reason_code (success-set design §2.3); checked in this order, the first
# failing condition is reported (0: triggered)
TRIGGERED, TOO_FEW_PAIRS, LOW_COVERAGE, NO_PACK, COOLDOWN = 0, 1, 2, 3, 4
REASON_NAMES = {TOO_FEW_PAIRS: "too few pairs", LOW_COVERAGE: "cluster coverage too low",
                NO_PACK: "no pack sampled", COOLDOWN: "cooldown"}
# Early-stop codes of bonus/early_stop_reason (§3.3 guards; KL checked first)
NO_STOP, STOP_KL, STOP_ENTROPY = 0, 1, 2
NO_ACTION = -1  # succ_actions padding where a success episode ends before the window does
NO_CLUSTER = -1  # cluster id of a success mined without prototypes
_NONE = 99  # "no code" in the MIN reductions: larger than every code
COS_EPS = 1e-8  # cos(a, b) = a·b / (max(‖a‖, ε)·max(‖b‖, ε)): 0 against a zero vector

# Telemetry keys (success-set design §2.3, plus the guard's)
TRIGGER_KEYS = ("bonus/triggered", "bonus/ran")
NOT_TRIGGERED_KEYS = ("bonus/not_triggered_reason_code", "bonus/not_triggered_pairs", "bonus/not_triggered_cov",
                      "bonus/not_triggered_cooldown")
RUN_KEYS = ("bonus/updates", "bonus/early_stop", "bonus/early_stop_reason", "bonus/kl", "bonus/entropy")


class Episode(NamedTuple):
    """A finished episode, reassembled from its fragments (Part1)."""

    ep_id: int
    states: torch.Tensor  # [T, OBS] floating
    actions: torch.Tensor  # [T, ACTION_DIM] int64 tokens in [0, N_BINS)
    cluster_id: int = NO_CLUSTER  # success prototype id (Part4), NO_CLUSTER otherwise


@dataclasses.dataclass
class PairPack:
    """One failure paired with its Top-K successes over the divergence window (success-set design Part2, L167)."""

    fail_ep_id: int
    succ_ep_ids: list[int]  # [K] in Top-K order (Top-1 first)
    succ_cluster_ids: list[int]  # [K] (NO_CLUSTER without prototypes)
    divergence_t: int  # t_d, found against the Top-1 success
    window_start: int  # first step of the window (inclusive)
    window_end: int  # last step of the window (inclusive)
    states: torch.Tensor  # [L, OBS] the failure's states, L = window_end − window_start + 1
    fail_actions: torch.Tensor  # [L, ACTION_DIM] int64
    succ_actions: torch.Tensor  # [K, L, ACTION_DIM] int64, NO_ACTION past a success's last step
    zone_weight: torch.Tensor  # [L] triangular, 1 at t_d


class LossA(NamedTuple):
    loss: torch.Tensor  # [] Σ_valid per_step / max(#valid, 1)
    per_step: torch.Tensor  # [N] w·softplus(−(Δ − margin)/τ), 0 on masked rows
    logp_pos: torch.Tensor  # [N] log p⁺ = Σ_d log Σ_{a ∈ Pos_d} π_d(a)  (−inf on masked rows)
    logp_neg: torch.Tensor  # [N] log p⁻ = Σ_d log π_d(a⁻_d)
    valid: torch.Tensor  # [N] bool: every dimension has a positive token


class TopK(NamedTuple):
    indices: torch.Tensor  # [Q, k'] int64 rows of the pool, k' = min(k, M); best first
    similarity: torch.Tensor  # [Q, k'] their cosine similarities


class BonusDecision(NamedTuple):
    trigger: bool  # the same on every rank
    reason: int  # TRIGGERED or the smallest failing code over all ranks
    telemetry: dict


class BonusRun(NamedTuple):
    updates: int  # bonus updates performed (<= bonus_updates), the same on every rank
    stop_reason: int  # NO_STOP, STOP_KL or STOP_ENTROPY (smallest over ranks)
    telemetry: dict


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------
def require_real(fn: str, name: str, value, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or (positive and not value > 0):
        want = "a positive finite real" if positive else "a finite real"
        raise ValueError(f"{fn}: argument '{name}' must be {want}, got {value!r} ({type(value).__name__})")


def require_tokens(fn: str, name: str, t: torch.Tensor, shape: tuple, n_bins: int | None,
                   allow_pad: bool = False) -> None:
    """int64 tokens of ``shape`` in [0, n_bins) (n_bins None: >= 0; NO_ACTION also where ``allow_pad``)."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.int64:
        got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"{fn}: argument '{name}' must be an int64 tensor, got {got}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected {tuple(shape)}")
    lo = NO_ACTION if allow_pad else 0
    bad = (t < lo) | (t >= n_bins) if n_bins is not None else t < lo
    if t.numel() and bool(bad.any()):
        first = [int(i) for i in bad.nonzero()[0]]
        span = f"[{lo}, {n_bins})" if n_bins is not None else f">= {lo}"
        raise ValueError(f"{fn}: argument '{name}' has a token outside {span} at index {first}: "
                         f"{int(t[tuple(first)])}")


def validate_loss_a(logits: torch.Tensor, fail_actions: torch.Tensor, pos_mask: torch.Tensor,
                    zone_weight: torch.Tensor, tau, margin, empty_positive: str) -> None:
    fn = "loss_a"
    require_floating(fn, "logits", logits)
    if logits.dim() != 3 or logits.shape[-1] < 1 or logits.shape[1] < 1:
        raise ValueError(f"{fn}: argument 'logits' has shape {tuple(logits.shape)}, expected [N, ACTION_DIM, N_BINS]")
    n, dims, bins = logits.shape
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(f"{fn}: argument 'logits' has non-finite values, expected finite logits")
    require_tokens(fn, "fail_actions", fail_actions, (n, dims), bins)
    if not isinstance(pos_mask, torch.Tensor) or pos_mask.dtype != torch.bool or pos_mask.shape != logits.shape:
        got = (pos_mask.dtype, tuple(pos_mask.shape)) if isinstance(pos_mask, torch.Tensor) else type(pos_mask)
        raise ValueError(f"{fn}: argument 'pos_mask' must be a bool tensor of shape {tuple(logits.shape)}, got {got}")
    require_floating(fn, "zone_weight", zone_weight)
    if tuple(zone_weight.shape) != (n,):
        raise ValueError(f"{fn}: argument 'zone_weight' has shape {tuple(zone_weight.shape)}, expected ({n},)")
    if n and not bool((torch.isfinite(zone_weight) & (zone_weight >= 0)).all()):
        raise ValueError(f"{fn}: argument 'zone_weight' must be finite and >= 0, got min "
                         f"{float(zone_weight.min())}, max {float(zone_weight.max())}")
    require_real(fn, "tau", tau, positive=True)
    require_real(fn, "margin", margin)
    if empty_positive not in ("mask", "reject"):
        raise ValueError(f"{fn}: argument 'empty_positive' must be 'mask' or 'reject', got {empty_positive!r}")
    if empty_positive == "reject":
        empty = ~pos_mask.any(-1)  # [N, ACTION_DIM]
        if bool(empty.any()):
            row, dim = (int(i) for i in empty.nonzero()[0])
            raise ValueError(f"{fn}: argument 'pos_mask' has an empty positive set at row {row}, action dimension "
                             f"{dim} (expected at least one positive token per dimension with "
                             "empty_positive='reject'; 'mask' drops such rows)")


def validate_top_k(query: torch.Tensor, pool: torch.Tensor, k, cluster_ids) -> None:
    fn = "top_k_successes"
    for name, t in (("query", query), ("pool", pool)):
        require_floating(fn, name, t)
        if t.dim() != 2:
            raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected a 2-d [rows, EMB]")
    if pool.shape[1] != query.shape[1]:
        raise ValueError(f"{fn}: argument 'pool' has embedding size {pool.shape[1]}, expected {query.shape[1]} "
                         "(query's)")
    require_int(fn, "k", k, 1)
    if cluster_ids is not None:
        if not isinstance(cluster_ids, torch.Tensor) or cluster_ids.dtype != torch.int64 \
                or tuple(cluster_ids.shape) != (pool.shape[0],):
            got = (cluster_ids.dtype, tuple(cluster_ids.shape)) if isinstance(cluster_ids, torch.Tensor) \
                else type(cluster_ids).__name__
            raise ValueError(f"{fn}: argument 'cluster_ids' must be an int64 tensor of shape ({pool.shape[0]},), "
                             f"got {got}")


def validate_divergence(fail_states: torch.Tensor, succ_states: torch.Tensor, threshold) -> None:
    fn = "divergence_step"
    for name, t in (("fail_states", fail_states), ("succ_states", succ_states)):
        require_floating(fn, name, t)
        if t.dim() != 2 or t.shape[0] < 1:
            raise ValueError(f"{fn}: argument '{name}' has shape {tuple(t.shape)}, expected [T >= 1, OBS]")
    if succ_states.shape[1] != fail_states.shape[1]:
        raise ValueError(f"{fn}: argument 'succ_states' has {succ_states.shape[1]} features, expected "
                         f"{fail_states.shape[1]} (fail_states')")
    require_range(fn, "threshold", threshold, -1.0, 1.0)


def validate_window(t_d, w, len_fail, len_succ) -> None:
    fn = "divergence_window"
    require_int(fn, "len_fail", len_fail, 1)
    require_int(fn, "len_succ", len_succ, 1)
    require_int(fn, "w", w, 0)
    require_int(fn, "t_d", t_d, 0)
    if t_d >= min(len_fail, len_succ):
        raise ValueError(f"{fn}: argument 't_d' must be < min(len_fail, len_succ) = {min(len_fail, len_succ)}, "
                         f"got {t_d}")


def validate_episode(fn: str, name: str, ep: Episode, obs_dim: int | None = None, action_dim: int | None = None):
    if not isinstance(ep, Episode):
        raise TypeError(f"{fn}: argument '{name}' must be an Episode, got {type(ep).__name__}")
    require_floating(fn, f"{name}.states", ep.states)
    if ep.states.dim() != 2 or ep.states.shape[0] < 1 or (obs_dim is not None and ep.states.shape[1] != obs_dim):
        raise ValueError(f"{fn}: argument '{name}.states' has shape {tuple(ep.states.shape)}, expected "
                         f"[T >= 1, {obs_dim if obs_dim is not None else 'OBS'}]")
    dims = action_dim if action_dim is not None else (ep.actions.shape[-1] if isinstance(ep.actions, torch.Tensor)
                                                      and ep.actions.dim() == 2 else 1)
    require_tokens(fn, f"{name}.actions", ep.actions, (ep.states.shape[0], dims), None)


def episode_embedding(states: torch.Tensor) -> torch.Tensor:
    """The episode embedding of the success-set design (§6 "mean(obs)"): the mean state [OBS] of states [T, OBS]."""
    return states.mean(0)


def divergence_window(t_d: int, w: int, len_fail: int, len_succ: int) -> tuple[int, int]:
    """[t_d − w, t_d + w] clipped to both episodes: (max(0, t_d − w), min(t_d + w, len_fail − 1, len_succ − 1))."""
    validate_window(t_d, w, len_fail, len_succ)
    return max(0, t_d - w), min(t_d + w, len_fail - 1, len_succ - 1)


def zone_weights(start: int, end: int, t_d: int, w: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Triangular window weights [end − start + 1]: w_t = 1 − |t − t_d| / (w + 1) (1 at t_d, 1/(w+1) at ±w)."""
    t = torch.arange(start, end + 1, dtype=torch.float64)
    return (1 - (t - t_d).abs() / (w + 1)).to(dtype)


def build_pos_mask(succ_actions: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Pos_d(s_t) (§3.2): the tokens the K successes took at each window step, [K, L, A] -> [L, A, n_bins]
    bool; NO_ACTION padding contributes nothing."""
    if succ_actions.dim() != 3:
        raise ValueError(f"build_pos_mask: argument 'succ_actions' has shape {tuple(succ_actions.shape)}, "
                         "expected [K, L, ACTION_DIM]")
    require_int("build_pos_mask", "n_bins", n_bins, 1)
    require_tokens("build_pos_mask", "succ_actions", succ_actions, tuple(succ_actions.shape), n_bins, allow_pad=True)
    k, length, dims = succ_actions.shape
    hot = torch.zeros(k, length, dims, n_bins + 1, dtype=torch.bool)
    hot.scatter_(-1, (succ_actions % (n_bins + 1)).unsqueeze(-1), True)  # NO_ACTION lands in the extra bin
    return hot[..., :n_bins].any(0)


def stack_packs(packs: Sequence[PairPack], n_bins: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packs -> one step batch for Loss A (success-set design _build_bonus_batch): states [N, OBS], fail_actions
    [N, A], pos_mask [N, A, n_bins], zone_weight [N], N = Σ window lengths."""
    if not packs:
        raise ValueError("stack_packs: argument 'packs' is empty, expected at least one PairPack")
    return (torch.cat([p.states for p in packs]), torch.cat([p.fail_actions for p in packs]),
            torch.cat([build_pos_mask(p.succ_actions, n_bins) for p in packs]),
            torch.cat([p.zone_weight for p in packs]))


# --------------------------------------------------------------------------------------------------
# Pair mining pipeline (Part2 _mine_pairs_for_failure), driven by an implementation's primitives
# --------------------------------------------------------------------------------------------------
def mine_pair_with(top_k_successes: Callable, divergence_step: Callable, fail: Episode,
                   successes: Sequence[Episode], config: SuccessSetConfig) -> PairPack | None:
    """failure -> Top-K successes by cosine of episode embeddings (across clusters when config.use_clusters
    and the successes carry cluster ids) -> t_d against the Top-1 -> window clipped to the failure and the
    Top-1 -> PairPack. None when the success pool is empty (mining skips, it never raises on data)."""
    fn = "mine_pair"
    validate_episode(fn, "fail", fail)
    if not isinstance(config, SuccessSetConfig):
        raise TypeError(f"{fn}: argument 'config' must be a SuccessSetConfig, got {type(config).__name__}")
    obs_dim, dims = fail.states.shape[1], fail.actions.shape[1]
    for i, ep in enumerate(successes):
        validate_episode(fn, f"successes[{i}]", ep, obs_dim, dims)
    if not successes:
        return None
    pool = torch.stack([episode_embedding(ep.states.to(fail.states.dtype)) for ep in successes])  # [M, OBS]
    clusters = torch.tensor([ep.cluster_id for ep in successes], dtype=torch.int64)
    use = config.use_clusters and bool((clusters != NO_CLUSTER).any())
    chosen = top_k_successes(episode_embedding(fail.states)[None], pool, config.top_k,
                             clusters if use else None).indices[0].tolist()
    picked = [successes[i] for i in chosen]
    top1 = picked[0]
    t_d = int(divergence_step(fail.states, top1.states.to(fail.states.dtype), config.sim_threshold))
    start, end = divergence_window(t_d, config.window, fail.states.shape[0], top1.states.shape[0])
    length = end - start + 1
    succ_actions = torch.full((len(picked), length, dims), NO_ACTION, dtype=torch.int64, device=fail.actions.device)
    for k, ep in enumerate(picked):
        part = ep.actions[start:end + 1]
        succ_actions[k, :part.shape[0]] = part
    return PairPack(fail.ep_id, [ep.ep_id for ep in picked], [ep.cluster_id for ep in picked], t_d, start, end,
                    fail.states[start:end + 1], fail.actions[start:end + 1], succ_actions,
                    zone_weights(start, end, t_d, config.window, fail.states.dtype).to(fail.states.device))


# --------------------------------------------------------------------------------------------------
# Cross-rank agreement (§3.3, §5.2): all_reduce(MIN), a no-op without an initialized process group
# --------------------------------------------------------------------------------------------------
def all_reduce_min(values: torch.Tensor) -> torch.Tensor:
    """Elementwise MIN of ``values`` over every rank of the default process group (in place, returned);
    unchanged when torch.distributed is unavailable or not initialized (a single process)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(values, op=dist.ReduceOp.MIN)
    return values


def agree(ok: bool, code: int, reduce_min: Callable[[torch.Tensor], torch.Tensor]) -> tuple[bool, int]:
    """(every rank ok, the smallest nonzero code over ranks or 0), from one MIN reduction of [ok, code]."""
    out = reduce_min(torch.tensor([int(ok), code if code else _NONE], dtype=torch.int64))
    smallest = int(out[1])
    return bool(out[0]), 0 if smallest == _NONE else smallest
