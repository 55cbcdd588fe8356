"""success_set's global agreement (success-set design §3.3, §5.2) across two real processes: torch.distributed gloo,
torch.multiprocessing spawn, each rank with its own local state.

The bonus trigger and the guards' early stop go through all_reduce(MIN), so both ranks decide alike; each
bonus update does a gradient all_reduce (the DDP sync), which would hang if one rank ran more updates
than the other — hence the whole test runs under a timeout and kills its workers if it expires.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rlspec.contracts.success_set import COOLDOWN, STOP_KL, TOO_FEW_PAIRS, SuccessSetConfig
from rlspec.reference.success_set import BonusScheduler

TIMEOUT_S = 120
CONFIG = SuccessSetConfig(min_pairs=4, min_clusters=1, cooldown_steps=100, bonus_updates=5, kl_guard=0.02,
                          entropy_floor=0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        sched = BonusScheduler(CONFIG)  # reduce_min = all_reduce MIN over the default group
        local_only = BonusScheduler(CONFIG, reduce_min=lambda t: t)  # what a rank alone would decide
        pairs = 8 if rank == 0 else 2  # rank 1 has too few pairs
        result = {
            "local_only": local_only.decide(10, pairs, 2, 1).trigger,
            "first": sched.decide(10, pairs, 2, 1)._asdict(),
            "both_ready": sched.decide(20, 8, 2, 1)._asdict(),
            "cooldown": sched.decide(50, 8, 2, 1)._asdict(),  # both triggered at 20: both in cooldown
        }

        def update(i: int):
            grad = torch.full((3,), float(rank + 1))
            dist.all_reduce(grad)  # the gradient sync: every rank must run the same number of updates
            kl = 0.05 if rank == 0 and i == 1 else 0.0  # only rank 0's KL guard fires, after update 2
            return torch.tensor(kl), 1.0

        result["run"] = sched.run(update)._asdict()
        done = torch.ones(1)
        dist.all_reduce(done)  # both ranks reach the end
        result["done"] = float(done)
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def test_ranks_agree_on_trigger_and_early_stop(tmp_path):
    ctx = mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=False)
    try:
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=TIMEOUT_S)
        while not ctx.join(timeout=1):
            if datetime.datetime.now() > deadline:
                pytest.fail(f"the two ranks did not finish within {TIMEOUT_S} s (a deadlock: ranks disagreeing)")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (r0["local_only"], r1["local_only"]) == (True, False)  # alone, they would disagree
    for key in ("both_ready", "cooldown"):  # same local inputs: the same telemetry
        assert r0[key]["telemetry"] == r1[key]["telemetry"], key
    agreed = ("bonus/updates", "bonus/early_stop", "bonus/early_stop_reason")  # bonus/kl is each rank's own
    assert [r0["run"]["telemetry"][k] for k in agreed] == [r1["run"]["telemetry"][k] for k in agreed] == [2, 1, 1]
    assert r0["first"]["trigger"] is r1["first"]["trigger"] is False
    assert r0["first"]["reason"] == r1["first"]["reason"] == TOO_FEW_PAIRS
    assert r0["both_ready"]["trigger"] is r1["both_ready"]["trigger"] is True
    assert r0["cooldown"]["reason"] == r1["cooldown"]["reason"] == COOLDOWN
    assert r0["run"]["updates"] == r1["run"]["updates"] == 2
    assert r0["run"]["stop_reason"] == r1["run"]["stop_reason"] == STOP_KL
    assert r0["done"] == r1["done"] == 2.0
