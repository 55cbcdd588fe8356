"""Launches per DreamerV3 learner update (benchmarks/dreamer/train_step.py): the fast kit's count within its
budget and below the reference's, and the train-step table showing the counts its JSON holds."""

from __future__ import annotations

import torch

from benchmarks.dreamer import train_step
from rlspec.evidence import launches


def _counted(kit: str, T: int = 64, B: int = 2) -> dict[str, int]:
    batch, _ = train_step.make_batches(T, B, seed=0)
    step, *_ = train_step.ours(kit, train_step.CONFIGS["1m"], T, B, batch, torch.device("cpu"))
    step()  # first use builds the fast kit's C++ kernels
    return launches.count(step)


def test_the_fast_update_stays_within_its_launch_budget_and_below_the_reference():
    fast, reference = _counted("fast"), _counted("reference")
    assert fast["kernel_ops"] <= train_step.LAUNCH_BUDGET, (fast, train_step.LAUNCH_BUDGET)
    assert fast["kernel_ops"] < reference["kernel_ops"], (fast, reference)  # what the fused kernels save
    assert fast["scalar_reads"] <= reference["scalar_reads"], (fast, reference)


def test_the_table_shows_the_launches_its_json_holds():
    def impl(wall, ops, kernels=0):
        return dict(params=1.1e6, wall_s_per_step=wall, system_s_per_step=0.01,
                    launches=dict(kernel_ops=ops, scalar_reads=0, cuda_kernels=kernels, cuda_syncs=0))

    report = dict(device="CPU", cpu="a CPU", torch_threads=1, steps=5, warmup=2, sheeprl="0.8.4", results={"1m": dict(
        implementations=dict(sheeprl=impl(0.6, 12_345), reference=impl(0.5, 10_622), fast=impl(0.3, 9_503)),
        ratios_vs_sheeprl=dict(reference=dict(wall=1.2), fast=dict(wall=2.0)))})
    table = train_step.markdown(report)
    assert "| 1m | 12,345 ops | 10,622 ops | 9,503 ops |" in table
    del report["results"]["1m"]["implementations"]["fast"]["launches"]  # an older JSON: no launch table
    assert "Launches per update" not in train_step.markdown(report)
