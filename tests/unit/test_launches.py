"""rlspec/evidence/launches.py: the launches of one call, counted by torch's profiler."""

from __future__ import annotations

import torch

from rlspec.evidence import launches


def test_each_kernel_counts_once_and_a_cpu_has_no_cuda_kernels_or_syncs():
    a, b = torch.ones(4), torch.ones(4)

    def three_in_place_ops():
        a.add_(b)
        a.mul_(b)
        a.sub_(b)

    assert launches.count(three_in_place_ops) == dict(kernel_ops=3, scalar_reads=0, cuda_kernels=0, cuda_syncs=0)
    assert launches.count(lambda: a.add_(b))["kernel_ops"] == 1


def test_an_operator_made_of_others_counts_the_ones_that_run_kernels():
    x, w = torch.randn(3, 5), torch.randn(4, 5)
    # log_softmax on a CPU is one kernel (aten::_log_softmax inside aten::log_softmax)
    assert launches.count(lambda: torch.log_softmax(x, -1))["kernel_ops"] == 1
    # linear: a transpose (a view) and one matrix product, whose own views inside do not hide it
    assert launches.count(lambda: torch.nn.functional.linear(x, w))["kernel_ops"] == 1
    # a dtype conversion is one copy kernel under aten::to / aten::_to_copy
    assert launches.count(lambda: x.to(torch.float64))["kernel_ops"] == 1


def test_views_and_allocations_launch_nothing_and_item_is_a_scalar_read():
    x = torch.randn(3, 5)
    assert launches.count(lambda: (x.view(15), x.t(), x[1:], x.unsqueeze(0), torch.empty(8)))["kernel_ops"] == 0
    counted = launches.count(lambda: (x.sum().item(), float(x[0, 0])))
    assert counted["scalar_reads"] == 2 and counted["kernel_ops"] == 1  # the sum; indexing is a view
