"""``success_set`` at runtime: the contract's shared helpers (build_pos_mask, stack_packs, defaults, the
single-process MIN agreement) and one bonus update end to end — episodes -> prototypes -> mined packs ->
queue -> step batch -> Loss A on a tiny policy -> an SGD step that widens log p⁺ − log p⁻."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.success_set import (NO_ACTION, Episode, SuccessSetConfig, agree, all_reduce_min,
                                          build_pos_mask, episode_embedding, stack_packs)
from rlspec.fast import success_set as fast
from rlspec.reference import success_set as ref

IMPLS = pytest.mark.parametrize("ss", [ref, fast], ids=["reference", "fast-torch"])
A, B, OBS = 2, 5, 3


def test_defaults_follow_seed_003():
    cfg = SuccessSetConfig()
    assert cfg.cooldown_steps == 5000
    assert cfg.resolved_min_pairs == max(32, 2 * cfg.batch_packs) == 32
    assert SuccessSetConfig(batch_packs=40).resolved_min_pairs == 80
    assert SuccessSetConfig(batch_packs=40, min_pairs=7).resolved_min_pairs == 7


def test_build_pos_mask_ignores_padding():
    succ = torch.tensor([[[1, 0], [NO_ACTION, NO_ACTION]], [[3, 0], [2, 4]]])  # [K=2, L=2, A=2]
    mask = build_pos_mask(succ, B)
    want = torch.zeros(2, A, B, dtype=torch.bool)
    want[0, 0, [1, 3]] = want[0, 1, 0] = want[1, 0, 2] = want[1, 1, 4] = True
    assert torch.equal(mask, want)
    with pytest.raises(ValueError, match="succ_actions"):
        build_pos_mask(succ + 10, B)


def test_single_process_agreement_is_local():
    assert not torch.distributed.is_initialized()
    t = torch.tensor([1, 3])
    assert all_reduce_min(t) is t and t.tolist() == [1, 3]
    assert agree(True, 0, all_reduce_min) == (True, 0)
    assert agree(False, 2, all_reduce_min) == (False, 2)


def _episodes(g: torch.Generator):
    base = torch.randn(12, OBS, generator=g, dtype=torch.float64) + 2
    succ = [Episode(i, base + 0.05 * torch.randn(12, OBS, generator=g, dtype=torch.float64),
                    torch.randint(0, B, (12, A), generator=g)) for i in range(6)]
    fails = [Episode(100 + i, torch.cat([base[:4], torch.randn(8, OBS, generator=g, dtype=torch.float64)]),
                     torch.randint(0, B, (12, A), generator=g)) for i in range(4)]
    return succ, fails


@IMPLS
def test_one_bonus_update_widens_the_ranking_margin(ss):
    g = torch.Generator().manual_seed(0)
    cfg = SuccessSetConfig(top_k=3, window=2, min_pairs=2, min_clusters=2, batch_packs=2, num_prototypes=2)
    protos, queue = ss.SuccessPrototypes(cfg.num_prototypes, cfg.prototype_ema), ss.PairedQueue(16)
    succ, fails = _episodes(g)
    pool = [ep._replace(cluster_id=protos.assign(episode_embedding(ep.states))) for ep in succ]
    for ep in fails:
        queue.push(ss.mine_pair(ep, pool, cfg))
    assert len(queue) == 4 and queue.cluster_coverage() == 2
    sched = ss.BonusScheduler(cfg)
    packs = queue.sample(cfg.batch_packs, generator=g, consume=True, diverse=True)
    decision = sched.decide(0, len(queue) + len(packs), queue.cluster_coverage(), len(packs))
    assert decision.trigger and decision.telemetry == {"bonus/triggered": 1, "bonus/ran": 1}
    states, fail_actions, pos_mask, weight = stack_packs(packs, B)
    policy = torch.nn.Linear(OBS, A * B).double()
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    before = ss.loss_a(policy(states).view(-1, A, B), fail_actions, pos_mask, weight)

    def update(i):
        out = ss.loss_a(policy(states).view(-1, A, B), fail_actions, pos_mask, weight)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        return 0.0, 1.0  # (KL, entropy) within the guards

    run = sched.run(update)
    after = ss.loss_a(policy(states).view(-1, A, B), fail_actions, pos_mask, weight)
    assert run.updates == cfg.bonus_updates and run.stop_reason == 0
    gap = lambda out: (out.logp_pos - out.logp_neg)[out.valid].mean()  # noqa: E731
    assert float(after.loss.detach()) < float(before.loss.detach()) and float(gap(after)) > float(gap(before))
