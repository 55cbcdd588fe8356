"""Kernel launches of one call, counted by torch's profiler: the figure beside a learner update's time that says
whether launch overhead bounds it (TorchRL's DreamerV3 with a CUDA-graph scan reported ~7,500 launches per
update against ~15 ms of kernel time before its graphs).

``count(fn)`` runs ``fn()`` once under torch.profiler and returns:
* ``kernel_ops``: the operators that run a kernel themselves: aten ops that are not ``NO_KERNEL`` (views,
  allocations, type queries: no kernel on any device) and have no kernel op inside them. On a CPU each is
  one kernel call; on CUDA each launches one kernel or a few, so it is the CPU's estimate of the launches;
* ``scalar_reads``: ``aten::_local_scalar_dense`` calls (``.item()``, ``float(t)``, a tensor in an ``if``):
  each is a host synchronization where the tensor is on CUDA;
* ``cuda_kernels``: the kernels the GPU ran (0 without CUDA);
* ``cuda_syncs``: the calls that made the host wait for the device (cudaStreamSynchronize,
  cudaDeviceSynchronize, cudaEventSynchronize and synchronous cudaMemcpy), 0 without CUDA.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
SCALAR_READ = "aten::_local_scalar_dense"
NO_KERNEL = frozenset(f"aten::{name}" for name in (  # views, allocations, type queries, dispatch wrappers
    "alias", "as_strided", "as_strided_", "chunk", "contiguous", "detach", "detach_", "empty", "empty_like",
    "empty_strided", "expand", "expand_as", "flatten", "item", "lift_fresh", "movedim", "narrow", "permute",
    "promote_types", "real", "reshape", "_reshape_alias", "resize_", "resolve_conj", "resolve_neg", "result_type",
    "select", "slice", "split", "split_with_sizes", "squeeze", "t", "to", "transpose", "unbind", "unflatten",
    "unsqueeze", "_unsafe_view", "view", "view_as"))


def _runs_kernel(event) -> bool:
    """An aten op, not metadata nor a scalar read, with no op inside it that runs a kernel itself."""
    if not event.name.startswith("aten::") or event.name in NO_KERNEL or event.name == SCALAR_READ:
        return False
    return not _kernel_inside(event)


def _kernel_inside(event) -> bool:
    return any(_runs_kernel(c) or _kernel_inside(c) for c in event.cpu_children)


def count(fn: Callable[[], object]) -> dict[str, int]:
    """Launches of one ``fn()`` (module docstring)."""
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    kernels = sum(e.device_type == torch.autograd.DeviceType.CUDA for e in events) if cuda else 0
    syncs = sum(e.name in SYNCS for e in events) - (1 if cuda else 0)  # less this function's own synchronize
    return dict(kernel_ops=sum(map(_runs_kernel, events)), scalar_reads=sum(e.name == SCALAR_READ for e in events),
                cuda_kernels=kernels, cuda_syncs=max(syncs, 0))
