"""rlspec/evidence/launches.py: the launches of one call, counted by torch's profiler."""

from __future__ import annotations

import torch

from rlspec.evidence import launches


def test_each_operator_run_to_the_bottom_counts_once_and_a_cpu_has_no_kernels_or_syncs():
    a, b = torch.ones(4), torch.ones(4)

    def three_in_place_ops():
        a.add_(b)
        a.mul_(b)
        a.sub_(b)

    assert launches.count(three_in_place_ops) == dict(cpu_ops=3, cuda_kernels=0, cuda_syncs=0)
    assert launches.count(lambda: a.add_(b))["cpu_ops"] == 1


def test_an_operator_made_of_others_counts_its_leaves():
    x = torch.randn(3, 5)
    # log_softmax on a CPU is one kernel (aten::_log_softmax inside aten::log_softmax): one leaf
    assert launches.count(lambda: torch.log_softmax(x, -1))["cpu_ops"] == 1
