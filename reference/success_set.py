"""Reference ``success_set`` (spec/success_set.py; the success-set design §3.1–§3.3, Part2, Part4): float64, one row /
one candidate / one step at a time, plain Python control flow, randomness only from a caller's
torch.Generator. The fast twin (fast/success_set.py) vectorizes Loss A and the mining primitives and
shares the stateful parts (prototypes, paired queue, scheduler) with this module.
"""

from __future__ import annotations

import collections
import math
from typing import Callable, Sequence

import torch

from rlspec.contracts.success_set import (COOLDOWN, COS_EPS, LOW_COVERAGE, NO_CLUSTER, NO_PACK, NO_STOP,
                                          STOP_ENTROPY, STOP_KL, TOO_FEW_PAIRS, TRIGGERED, BonusDecision,
                                          BonusRun, Episode, LossA, PairPack, SuccessSetConfig, TopK, agree,
                                          all_reduce_min, mine_pair_with, validate_divergence, validate_loss_a,
                                          validate_top_k)
from rlspec.contracts.validate import require_floating, require_int, scalar_args

F64 = torch.float64
DEFAULT = SuccessSetConfig()


# --------------------------------------------------------------------------------------------------
# Loss A (§3.2)
# --------------------------------------------------------------------------------------------------
@scalar_args("tau", "margin")
def loss_a(logits: torch.Tensor, fail_actions: torch.Tensor, pos_mask: torch.Tensor, zone_weight: torch.Tensor,
           tau: float = DEFAULT.tau, margin: float = DEFAULT.margin, empty_positive: str = "mask") -> LossA:
    """Success-as-a-set ranking loss.

    logits [N, A, B] (π_d = softmax over the B bins of dimension d), fail_actions [N, A] (a⁻), pos_mask
    [N, A, B] (Pos_d), zone_weight [N] (w_t):
        log p⁻ = Σ_d log π_d(a⁻_d),   log p⁺ = Σ_d log Σ_{a ∈ Pos_d} π_d(a),   Δ = log p⁺ − log p⁻
        per_step = w_t · (−log σ((Δ − margin)/τ)),   loss = Σ_valid per_step / max(#valid, 1)
    A row with an empty Pos_d is masked out (valid False, per_step 0, no gradient) with
    empty_positive='mask', rejected with 'reject'. The failed token may itself be in Pos_d.
    """
    validate_loss_a(logits, fail_actions, pos_mask, zone_weight, tau, margin, empty_positive)
    n, dims, _ = logits.shape
    logp = torch.log_softmax(logits.double(), dim=-1)  # [N, A, B]
    rows_pos, rows_neg, rows_loss, valid = [], [], [], []
    for i in range(n):
        row_valid = bool(pos_mask[i].any(-1).all())
        pos_terms, neg_terms = [], []
        for d in range(dims):
            positives = pos_mask[i, d] if row_valid else torch.ones_like(pos_mask[i, d])  # masked: any finite set
            pos_terms.append(torch.logsumexp(logp[i, d][positives], dim=0))
            neg_terms.append(logp[i, d, fail_actions[i, d]])
        lp_pos, lp_neg = torch.stack(pos_terms).sum(), torch.stack(neg_terms).sum()
        step_loss = zone_weight[i].double() * -torch.nn.functional.logsigmoid(((lp_pos - lp_neg) - margin) / tau)
        rows_pos.append(lp_pos if row_valid else torch.tensor(-math.inf, dtype=F64))
        rows_neg.append(lp_neg)
        rows_loss.append(step_loss if row_valid else 0.0 * step_loss)
        valid.append(row_valid)
    dtype = logits.dtype
    if n == 0:
        empty = logits.sum((1, 2))  # [0], attached to logits
        return LossA(logits.sum() * 0.0, empty, empty.detach(), empty.detach(), torch.zeros(0, dtype=torch.bool))
    per_step = torch.stack(rows_loss)  # [N]
    loss = per_step.sum() / max(sum(valid), 1)
    return LossA(loss.to(dtype), per_step.to(dtype), torch.stack(rows_pos).detach().to(dtype),
                 torch.stack(rows_neg).detach().to(dtype), torch.tensor(valid))


# --------------------------------------------------------------------------------------------------
# Pair mining (§3.1, Part2, Part4)
# --------------------------------------------------------------------------------------------------
def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """a·b / (max(‖a‖, ε)·max(‖b‖, ε)) in float64."""
    a, b = a.double(), b.double()
    return float(a @ b) / (max(float(a.norm()), COS_EPS) * max(float(b.norm()), COS_EPS))


def _ranked(query: torch.Tensor, pool: torch.Tensor) -> list[tuple[float, int]]:
    """(similarity, row) of every pool row, most similar first, lower row first on ties."""
    return sorted(((cosine(query, pool[m]), m) for m in range(pool.shape[0])), key=lambda sm: (-sm[0], sm[1]))


def top_k_successes(query: torch.Tensor, pool: torch.Tensor, k: int,
                    cluster_ids: torch.Tensor | None = None) -> TopK:
    """For each query row [Q, E], the min(k, M) most similar pool rows [M, E] by cosine, best first (ties:
    lower row). With cluster_ids [M] (Part4, Top-K across clusters): first the most similar member of each
    cluster, clusters ordered by that similarity, then the remaining rows by similarity."""
    validate_top_k(query, pool, k, cluster_ids)
    kk = min(k, pool.shape[0])
    indices, sims = [], []
    for q in range(query.shape[0]):
        ranked = _ranked(query[q], pool)
        if cluster_ids is not None:
            seen, leaders, rest = set(), [], []
            for sm in ranked:
                cid = int(cluster_ids[sm[1]])
                (rest if cid in seen else leaders).append(sm)
                seen.add(cid)
            ranked = leaders + rest
        indices.append([m for _, m in ranked[:kk]])
        sims.append([s for s, _ in ranked[:kk]])
    return TopK(torch.tensor(indices, dtype=torch.int64).reshape(-1, kk),
                torch.tensor(sims, dtype=F64).reshape(-1, kk).to(query.dtype))


@scalar_args("threshold")
def divergence_step(fail_states: torch.Tensor, succ_states: torch.Tensor, threshold: float = DEFAULT.sim_threshold
                    ) -> int:
    """t_d over the common prefix T = min(T_fail, T_succ): the first t with cos(fail_t, succ_t) < threshold,
    else the t of minimum similarity (first on ties)."""
    validate_divergence(fail_states, succ_states, threshold)
    sims = [cosine(fail_states[t], succ_states[t]) for t in range(min(fail_states.shape[0], succ_states.shape[0]))]
    for t, s in enumerate(sims):
        if s < threshold:
            return t
    return min(range(len(sims)), key=lambda t: (sims[t], t))


def mine_pair(fail: Episode, successes: Sequence[Episode], config: SuccessSetConfig = DEFAULT) -> PairPack | None:
    """PairPack of a failure against the success pool (rlspec.contracts.success_set.mine_pair_with)."""
    return mine_pair_with(top_k_successes, divergence_step, fail, successes, config)


# --------------------------------------------------------------------------------------------------
# Success prototypes (Part4) and the paired queue (Part2, Part4)
# --------------------------------------------------------------------------------------------------
class SuccessPrototypes:
    """Online prototypes of success embeddings: the first ``num_prototypes`` successes fill them in order;
    afterwards each success joins the most similar prototype (cosine, lower id on ties), which moves by
    EMA: p ← (1 − ema)·p + ema·e. ``assign`` returns the cluster id."""

    @scalar_args("num_prototypes", "ema")
    def __init__(self, num_prototypes: int = DEFAULT.num_prototypes, ema: float = DEFAULT.prototype_ema):
        SuccessSetConfig(num_prototypes=num_prototypes, prototype_ema=ema)  # validates both
        self.num_prototypes, self.ema = num_prototypes, ema
        self.prototypes: torch.Tensor | None = None  # [K, E] float64 once the first success arrives
        self.counts = torch.zeros(num_prototypes, dtype=torch.int64)  # [K] successes assigned
        self.filled = 0

    def assign(self, embedding: torch.Tensor) -> int:
        require_floating("SuccessPrototypes.assign", "embedding", embedding)
        if embedding.dim() != 1 or (self.prototypes is not None and embedding.shape[0] != self.prototypes.shape[1]):
            want = self.prototypes.shape[1] if self.prototypes is not None else "E"
            raise ValueError(f"SuccessPrototypes.assign: argument 'embedding' has shape {tuple(embedding.shape)}, "
                             f"expected ({want},)")
        e = embedding.double()
        if self.prototypes is None:
            self.prototypes = torch.zeros(self.num_prototypes, e.shape[0], dtype=F64)
        if self.filled < self.num_prototypes:
            cid = self.filled
            self.prototypes[cid] = e
            self.filled += 1
        else:
            cid = max(range(self.num_prototypes), key=lambda c: (cosine(e, self.prototypes[c]), -c))
            self.prototypes[cid] = (1 - self.ema) * self.prototypes[cid] + self.ema * e
        self.counts[cid] += 1
        return cid


def pack_clusters(pack: PairPack) -> set[int]:
    return {c for c in pack.succ_cluster_ids if c != NO_CLUSTER}


class PairedQueue:
    """FIFO of PairPacks (the oldest leaves when full)."""

    def __init__(self, capacity: int = 4096):
        require_int("PairedQueue", "capacity", capacity, 1)
        self.packs: collections.deque[PairPack] = collections.deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self.packs)

    def push(self, pack: PairPack) -> None:
        if not isinstance(pack, PairPack):
            raise TypeError(f"PairedQueue.push: argument 'pack' must be a PairPack, got {type(pack).__name__}")
        self.packs.append(pack)

    def cluster_coverage(self) -> int:
        """Distinct success clusters over every queued pack's succ_cluster_ids (NO_CLUSTER not counted)."""
        return len(set().union(*(pack_clusters(p) for p in self.packs)))

    def sample(self, n: int, *, generator: torch.Generator, consume: bool = DEFAULT.consume_packs,
               diverse: bool = DEFAULT.diverse_clusters) -> list[PairPack]:
        """min(n, len) distinct packs. Candidates are visited in a random order (randperm from ``generator``);
        plain: the first n; diverse: greedily the pack adding the most clusters not yet covered (earliest in
        that order on ties). consume: the sampled packs leave the queue."""
        require_int("PairedQueue.sample", "n", n, 0)
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"PairedQueue.sample: argument 'generator' must be a torch.Generator, "
                            f"got {type(generator).__name__}")
        order = torch.randperm(len(self.packs), generator=generator).tolist()
        if not diverse:
            chosen = order[:n]
        else:
            chosen, covered, left = [], set(), list(order)
            while len(chosen) < min(n, len(order)):
                gains = [len(pack_clusters(self.packs[i]) - covered) for i in left]
                best = left.pop(gains.index(max(gains)))  # the earliest in `order` among the best
                chosen.append(best)
                covered |= pack_clusters(self.packs[best])
        picked = [self.packs[i] for i in chosen]
        if consume:
            taken = set(chosen)
            keep = [p for i, p in enumerate(self.packs) if i not in taken]
            self.packs.clear()
            self.packs.extend(keep)
        return picked


# --------------------------------------------------------------------------------------------------
# Bonus time (§2.3, §3.3): trigger with reason codes and cooldown, guarded fixed-count updates
# --------------------------------------------------------------------------------------------------
class BonusScheduler:
    """Decides, identically on every rank, whether bonus time runs (``decide``) and runs it (``run``).

    ``reduce_min(tensor) -> tensor``: the elementwise MIN over ranks (default: torch.distributed all_reduce
    MIN, a no-op in a single process)."""

    def __init__(self, config: SuccessSetConfig = DEFAULT,
                 reduce_min: Callable[[torch.Tensor], torch.Tensor] = all_reduce_min):
        if not isinstance(config, SuccessSetConfig):
            raise TypeError(f"BonusScheduler: argument 'config' must be a SuccessSetConfig, got "
                            f"{type(config).__name__}")
        self.config, self.reduce_min = config, reduce_min
        self.last_bonus_step: int | None = None

    def local_reason(self, step: int, pairs: int, coverage: int, packs: int) -> int:
        """The first failing condition in code order: pairs, coverage, packs, cooldown (0: ready)."""
        cfg = self.config
        if pairs < cfg.resolved_min_pairs:
            return TOO_FEW_PAIRS
        if coverage < cfg.min_clusters:
            return LOW_COVERAGE
        if packs == 0:
            return NO_PACK
        if self.cooldown_left(step) > 0:
            return COOLDOWN
        return TRIGGERED

    def cooldown_left(self, step: int) -> int:
        if self.last_bonus_step is None:
            return 0
        return max(0, self.config.cooldown_steps - (step - self.last_bonus_step))

    def decide(self, step: int, pairs: int, coverage: int, packs: int) -> BonusDecision:
        for name, value in (("step", step), ("pairs", pairs), ("coverage", coverage), ("packs", packs)):
            require_int("BonusScheduler.decide", name, value, 0)
        code = self.local_reason(step, pairs, coverage, packs)
        trigger, reason = agree(code == TRIGGERED, code, self.reduce_min)
        telemetry = {"bonus/triggered": int(trigger), "bonus/ran": int(trigger)}
        if trigger:
            self.last_bonus_step = step
        else:
            telemetry.update({"bonus/not_triggered_reason_code": reason, "bonus/not_triggered_pairs": pairs,
                              "bonus/not_triggered_cov": coverage,
                              "bonus/not_triggered_cooldown": self.cooldown_left(step)})
        return BonusDecision(trigger, reason, telemetry)

    def guard(self, kl: float, entropy: float) -> int:
        """STOP_KL if KL > kl_guard (or not finite), else STOP_ENTROPY if entropy < floor (or NaN), else 0."""
        if not kl <= self.config.kl_guard:
            return STOP_KL
        if not entropy >= self.config.entropy_floor:
            return STOP_ENTROPY
        return NO_STOP

    def run(self, update_fn: Callable[[int], tuple]) -> BonusRun:
        """Up to bonus_updates calls update_fn(i) -> (kl, entropy) (floats or 0-d tensors: KL of the policy
        against the one before bonus time, mean entropy); after each, every rank stops if any rank's guard
        fired."""
        updates, stop, kl, entropy = 0, NO_STOP, math.nan, math.nan
        for i in range(self.config.bonus_updates):
            kl, entropy = (float(v) for v in update_fn(i))
            updates = i + 1
            local = self.guard(kl, entropy)
            go_on, stop = agree(local == NO_STOP, local, self.reduce_min)
            if not go_on:
                break
        return BonusRun(updates, stop, {"bonus/updates": updates, "bonus/early_stop": int(stop != NO_STOP),
                                        "bonus/early_stop_reason": stop, "bonus/kl": kl, "bonus/entropy": entropy})
