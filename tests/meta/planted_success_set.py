"""Planted bugs for contract ``success_set``: the reference with one bug each (Loss A variants are written out
vectorized, in float64, with the reference's validation)."""

from __future__ import annotations

import dataclasses
import math
import types

import torch
from planted import Planted

from rlspec.contracts.success_set import LossA, validate_loss_a, zone_weights
from rlspec.reference import success_set as ref

NAMES = ("loss_a", "top_k_successes", "divergence_step", "mine_pair", "SuccessPrototypes", "PairedQueue",
         "BonusScheduler")


def _ss(**overrides) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{**{n: getattr(ref, n) for n in NAMES}, **overrides})


def _loss_a_with(positives="logsumexp", sign=1.0, tau_outside=False, drop_failed=False, mask_empty=True):
    """Loss A with one step done differently (the defaults are the contract's formula)."""

    def loss_a(logits, fail_actions, pos_mask, zone_weight, tau=1.0, margin=0.0, empty_positive="mask"):
        validate_loss_a(logits, fail_actions, pos_mask, zone_weight, float(tau), float(margin), empty_positive)
        logp = torch.log_softmax(logits.double(), -1)  # [N, A, B]
        if drop_failed:  # "a failed token is never a positive"
            pos_mask = pos_mask & ~torch.nn.functional.one_hot(fail_actions, logits.shape[-1]).bool()
        valid = pos_mask.any(-1).all(-1) if mask_empty else torch.ones(logits.shape[0], dtype=torch.bool)
        pos = pos_mask | ~valid[:, None, None]
        if positives == "logsumexp":
            lp_pos = torch.logsumexp(logp.masked_fill(~pos, -math.inf), -1).sum(-1)
        else:  # Σ over the positives of log π: the log of a product, not of a sum
            lp_pos = torch.where(pos, logp, 0.0).sum((-2, -1))
        lp_neg = logp.gather(-1, fail_actions.unsqueeze(-1)).squeeze(-1).sum(-1)
        delta = sign * (lp_pos - lp_neg)
        ranking = -torch.nn.functional.logsigmoid(delta - margin) / tau if tau_outside \
            else -torch.nn.functional.logsigmoid((delta - margin) / tau)
        per_step = torch.where(valid, zone_weight.double() * ranking, 0.0)
        loss = per_step.sum() / valid.sum().clamp_min(1)
        dt = logits.dtype
        return LossA(loss.to(dt), per_step.to(dt), torch.where(valid, lp_pos, -math.inf).detach().to(dt),
                     lp_neg.detach().to(dt), valid)

    return loss_a


def _top_k_least_similar(query, pool, k, cluster_ids=None):
    """Sorted by distance ascending gone wrong: the smallest cosine first."""
    out = ref.top_k_successes(-query, pool, k, cluster_ids)
    return out._replace(similarity=-out.similarity)


def _top_k_ignoring_clusters(query, pool, k, cluster_ids=None):
    return ref.top_k_successes(query, pool, k)


def _divergence_argmin_only(fail_states, succ_states, threshold=0.9):
    return ref.divergence_step(fail_states, succ_states, -1.0)


def _mine_pair_unclipped(fail, successes, config=ref.DEFAULT):
    """[t_d − w, t_d + w] taken as is: negative starts and ends past an episode."""
    pack = ref.mine_pair(fail, successes, config)
    if pack is None:
        return None
    t_d, w = pack.divergence_t, config.window
    return dataclasses.replace(pack, window_start=t_d - w, window_end=t_d + w,
                               zone_weight=zone_weights(t_d - w, t_d + w, t_d, w, fail.states.dtype))


def _mine_pair_flat_zone(fail, successes, config=ref.DEFAULT):
    pack = ref.mine_pair(fail, successes, config)
    return None if pack is None else dataclasses.replace(pack, zone_weight=torch.ones_like(pack.zone_weight))


class _SwappedEma(ref.SuccessPrototypes):
    """p ← ema·p + (1 − ema)·e: the weights of the EMA swapped."""

    def __init__(self, num_prototypes=8, ema=0.05):
        super().__init__(num_prototypes, ema)
        self.ema = 1 - float(ema)


class _QueueNeverConsumes(ref.PairedQueue):
    def sample(self, n, *, generator, consume=True, diverse=True):
        return super().sample(n, generator=generator, consume=False, diverse=diverse)


class _QueueNeverDiverse(ref.PairedQueue):
    def sample(self, n, *, generator, consume=True, diverse=True):
        return super().sample(n, generator=generator, consume=consume, diverse=False)


class _NoCooldown(ref.BonusScheduler):
    def cooldown_left(self, step):
        return 0


class _MinPairs32(ref.BonusScheduler):
    """BONUS_TRIGGER_MIN_PAIRS defaulting to 32 whatever the batch (the seed says max(32, 2·batch))."""

    def __init__(self, config=ref.DEFAULT, reduce_min=ref.all_reduce_min):
        if config.min_pairs is None:
            config = dataclasses.replace(config, min_pairs=32)
        super().__init__(config, reduce_min)


class _LocalTrigger(ref.BonusScheduler):
    """decide() on the local state only: no all_reduce."""

    def decide(self, step, pairs, coverage, packs):
        agreed, self.reduce_min = self.reduce_min, (lambda t: t)
        try:
            return super().decide(step, pairs, coverage, packs)
        finally:
            self.reduce_min = agreed


class _LocalEarlyStop(ref.BonusScheduler):
    def run(self, update_fn):
        agreed, self.reduce_min = self.reduce_min, (lambda t: t)
        try:
            return super().run(update_fn)
        finally:
            self.reduce_min = agreed


class _NanKlPasses(ref.BonusScheduler):
    def guard(self, kl, entropy):  # `kl > guard` is False for NaN
        return ref.STOP_KL if kl > self.config.kl_guard else super().guard(0.0, entropy)


def _loss_a_diagnostics_attached(*args, **kwargs):  # logp_pos / logp_neg handed back with their graph
    logits = args[0]
    out = ref.loss_a(*args, **kwargs)
    tie = 0.0 * logits.sum()
    return out._replace(logp_pos=out.logp_pos + tie, logp_neg=out.logp_neg + tie)


def _loss_a_mean_over_rows(*args, **kwargs):  # Σ per_step / #valid without max(·, 1): 0/0 = NaN on an empty batch
    out = ref.loss_a(*args, **kwargs)
    return out._replace(loss=out.per_step.sum() / out.valid.sum())


def _loss_a_masked_rows_zero(*args, **kwargs):  # a masked row's log p⁺ reported as 0, not −inf
    out = ref.loss_a(*args, **kwargs)
    return out._replace(logp_pos=torch.where(out.valid, out.logp_pos, 0.0))


def _divergence_at_or_below(fail_states, succ_states, threshold=0.9):  # "≤ threshold" counts as a drop
    sims = [ref.cosine(fail_states[t], succ_states[t]) for t in range(min(len(fail_states), len(succ_states)))]
    for t, sim in enumerate(sims):
        if sim <= threshold:
            return t
    return ref.divergence_step(fail_states, succ_states, threshold)


class _GuardAtEquality(ref.BonusScheduler):
    def guard(self, kl, entropy):  # stops at KL == kl_guard and entropy == floor too
        if not kl < self.config.kl_guard:
            return ref.STOP_KL
        return ref.STOP_ENTROPY if not entropy > self.config.entropy_floor else ref.NO_STOP


class _QueueDefault1024(ref.PairedQueue):
    def __init__(self, capacity=1024):
        super().__init__(capacity)


class _QueueTakesAnything(ref.PairedQueue):
    def push(self, pack):
        self.packs.append(pack)


PLANTED_SUCCESS_SET = (
    Planted("Loss A ranking sign flipped", "success_set", _ss(loss_a=_loss_a_with(sign=-1.0)),
            "SUCC-2", "raises log p⁻", ("SUCC-5", "SUCC-12")),
    Planted("Loss A positives as a sum of log-probabilities (no logsumexp)", "success_set",
            _ss(loss_a=_loss_a_with(positives="sum-log")), "SUCC-1", "logp_pos", ("SUCC-5", "SUCC-7")),
    Planted("Loss A temperature outside the sigmoid", "success_set", _ss(loss_a=_loss_a_with(tau_outside=True)),
            "SUCC-1", "per_step", ("SUCC-5",)),
    Planted("Loss A drops the failed token from the positive set", "success_set",
            _ss(loss_a=_loss_a_with(drop_failed=True)), "SUCC-3", "Pos_d = {a⁻_d}", ("SUCC-2", "SUCC-5")),
    Planted("Loss A without masking empty positive sets", "success_set", _ss(loss_a=_loss_a_with(mask_empty=False)),
            "SUCC-4", "valid", ("SUCC-2", "SUCC-3")),
    Planted("Top-K by distance ascending (least similar first)", "success_set",
            _ss(top_k_successes=_top_k_least_similar), "SUCC-5", "cosine of the picks", ("SUCC-1", "SUCC-7")),
    Planted("Top-K ignores the clusters", "success_set", _ss(top_k_successes=_top_k_ignoring_clusters),
            "SUCC-6", "cosine of the picks", ("SUCC-5", "SUCC-7")),
    Planted("divergence always at the minimum similarity", "success_set",
            _ss(divergence_step=_divergence_argmin_only), "SUCC-7", "t_d =", ("SUCC-5", "SUCC-6")),
    Planted("divergence window not clipped", "success_set", _ss(mine_pair=_mine_pair_unclipped),
            "SUCC-8", "clipped to both episodes", ("SUCC-7", "SUCC-9")),
    Planted("flat zone weights", "success_set", _ss(mine_pair=_mine_pair_flat_zone),
            "SUCC-8", "zone_weight", ("SUCC-9",)),
    Planted("prototype EMA weights swapped", "success_set", _ss(SuccessPrototypes=_SwappedEma),
            "SUCC-10", "prototypes", ("SUCC-11",)),
    Planted("paired queue never consumes", "success_set", _ss(PairedQueue=_QueueNeverConsumes),
            "SUCC-11", "consume=True", ("SUCC-10",)),
    Planted("paired queue samples without cluster diversity", "success_set", _ss(PairedQueue=_QueueNeverDiverse),
            "SUCC-11", "diverse sample", ("SUCC-10",)),
    Planted("trigger ignores the cooldown", "success_set", _ss(BonusScheduler=_NoCooldown),
            "SUCC-12", "reason=4", ("SUCC-13", "SUCC-14")),
    Planted("min pairs default 32 regardless of the batch", "success_set", _ss(BonusScheduler=_MinPairs32),
            "SUCC-12", "min_pairs 60", ("SUCC-13", "SUCC-14")),
    Planted("trigger decided on the local state only", "success_set", _ss(BonusScheduler=_LocalTrigger),
            "SUCC-14", "(trigger, reason)", ("SUCC-12", "SUCC-13")),
    Planted("early stop decided on the local state only", "success_set", _ss(BonusScheduler=_LocalEarlyStop),
            "SUCC-14", "(updates, stop_reason)", ("SUCC-12", "SUCC-13")),
    Planted("KL guard lets a NaN KL through", "success_set", _ss(BonusScheduler=_NanKlPasses),
            "SUCC-13", "stop_reason", ("SUCC-12", "SUCC-14")),
    Planted("Loss A diagnostics returned with their graph", "success_set",
            _ss(loss_a=_loss_a_diagnostics_attached), "SUCC-17", "carries a graph", ("SUCC-1", "SUCC-4")),
    Planted("Loss A mean over all rows: NaN on an empty batch", "success_set", _ss(loss_a=_loss_a_mean_over_rows),
            "SUCC-17", "empty batch", ("SUCC-5",)),
    Planted("Loss A masked rows report log p+ = 0", "success_set", _ss(loss_a=_loss_a_masked_rows_zero),
            "SUCC-4", "logp_pos on masked rows", ("SUCC-3", "SUCC-17")),
    Planted("divergence at a similarity equal to the threshold", "success_set",
            _ss(divergence_step=_divergence_at_or_below), "SUCC-7", "t_d =", ("SUCC-5",)),
    Planted("bonus guards fire at equality", "success_set", _ss(BonusScheduler=_GuardAtEquality),
            "SUCC-13", "stop_reason", ("SUCC-12",)),
    Planted("paired queue default capacity 1024", "success_set", _ss(PairedQueue=_QueueDefault1024),
            "SUCC-11", "capacity None", ("SUCC-15",)),
    Planted("paired queue accepts anything", "success_set", _ss(PairedQueue=_QueueTakesAnything),
            "SUCC-15", "pack", ("SUCC-11",)),
)
