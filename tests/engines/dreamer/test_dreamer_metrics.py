"""Memory, replay-ratio and timing metrics of both Dreamer engines: peak RSS in every row and in
RUN/summary.json (peak VRAM on CUDA only); the achieved replay ratio (replayed / collected steps after the
prefill) held within ±5% of train_ratio once the scheduler's one-update rounding is below 5%; the fast
engine's part times (actor, learner, starved) add up within the wall time and count starvation."""

from __future__ import annotations

import json
import math
import resource

import pytest
import torch
from test_dreamer_engine import TINY

from rlspec.engines import dreamer
from rlspec.engines.dreamer import device as dreamer_device
from rlspec.runs.rundir import peak_memory, read_metrics

EXECUTION = {"local": ["execution=local"],
             "device": ["execution=device", "commit_stride=2", "steps_per_rollout=3", "sync_every=2", "device=cpu"]}
RATIO = 7.0  # not a divisor of B·T = 16: the scheduler rounds down (7/16 update per env step)


def _run(tmp_path, *extra):
    cfg = dreamer.build_config(overrides=[*TINY, *extra])
    return dreamer.execution(cfg).run(tmp_path / "run", show_progress=False)


@pytest.mark.parametrize("execution", sorted(EXECUTION))
def test_replay_ratio_held_and_peak_memory_reported(tmp_path, execution):
    run = _run(tmp_path, *EXECUTION[execution], f"train_ratio={RATIO}", "total_steps=112", "checkpoint_every=56")
    rows = read_metrics(run)
    after = [r for r in rows if r["Train/collected_steps"] > 0]
    assert len(after) >= 10 and rows[-1]["Train/updates"] == math.floor((112 - 16) * RATIO / 16)
    for r in after:
        replayed, collected = r["Train/replayed_steps"], r["Train/collected_steps"]
        assert replayed == r["Train/updates"] * 16 and collected == r["step"] - 16
        assert r["Train/replay_ratio"] == replayed / collected
        assert abs(replayed - RATIO * collected) <= 16, r  # within one update (B·T replayed steps) of the target
        if r["Train/updates"] >= 20:  # one update is <= 5% of the replayed steps
            assert abs(r["Train/replay_ratio"] / RATIO - 1) <= 0.05, r
    assert sum(r["Train/updates"] >= 20 for r in after) >= 3
    # peak RSS: in every row, never decreasing, at most this process's peak now, more than torch alone takes
    rss = [r["Memory/peak_rss_mib"] for r in rows]
    assert rss == sorted(rss) and 100 < rss[-1] <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert all("Memory/peak_vram_mib" not in r for r in rows)  # CPU run
    summary = json.loads((run / "summary.json").read_text())
    assert summary["execution"] == execution and summary["step"] == 112 and summary["train_ratio"] == RATIO
    assert summary["Train/replay_ratio"] == rows[-1]["Train/replay_ratio"]
    assert summary["Memory/peak_rss_mib"] >= rss[-1] and summary["wall_s"] > 0


def test_peak_vram_only_on_a_cuda_device():
    assert set(peak_memory()) == {"Memory/peak_rss_mib"}
    if torch.cuda.is_available():
        x = torch.ones(2**20, device="cuda")  # 4 MiB
        assert peak_memory(x.device)["Memory/peak_vram_mib"] >= 4
    else:
        assert "Memory/peak_vram_mib" not in peak_memory(torch.device("cuda"))


def test_fast_part_times_add_up_and_count_starvation(tmp_path):
    """The starvation setting of test_dreamer_device: commit_stride 6 leaves the learner without a full window
    at env steps 18 and 20 (rows 20 and 24 see it), then it catches up."""
    run = _run(tmp_path, *EXECUTION["device"], "commit_stride=6", "steps_per_rollout=1", "log_every=4")
    rows = {int(r["step"]): r for r in read_metrics(run)}
    for step, r in rows.items():
        wall = 4 / r["Time/env_steps_per_s"]  # the row's interval: log_every env steps
        assert r["Time/actor_s"] > 0 and r["Time/actor_s"] + r["Time/learner_s"] <= wall * 1.001 + 1e-4, step
        starved_here = r["Train/starved"] - rows.get(step - 4, {"Train/starved": 0})["Train/starved"]
        assert (r["Time/starved_s"] > 0) == (starved_here > 0), step
        assert r["Time/starved_s"] <= r["Time/actor_s"] * 1.0001 + 1e-9
    assert rows[20]["Time/starved_s"] > 0 and rows[24]["Train/updates"] == 8
    assert set(dreamer_device.PartTimes(torch.device("cpu")).take()) == {"Time/actor_s", "Time/learner_s",
                                                                      "Time/starved_s"}
