"""Kernel launches of one call, counted by torch's profiler: the figure beside a learner update's time that says
whether launch overhead bounds it (TorchRL's DreamerV3 with a CUDA-graph scan reported ~7,500 launches per
update against ~15 ms of kernel time before its graphs).

``count(fn)`` runs ``fn()`` once under torch.profiler and returns:
* ``cpu_ops``: the operators the dispatcher ran to the bottom, the aten ops without an aten op inside them (on
  a CPU each is one kernel call; on CUDA each launches one or more kernels);
* ``cuda_kernels``: the kernels the GPU ran (0 without CUDA);
* ``cuda_syncs``: the calls that made the host wait for the device (cudaStreamSynchronize,
  cudaDeviceSynchronize, cudaEventSynchronize and synchronous cudaMemcpy), 0 without CUDA.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def _leaf(event) -> bool:
    return event.name.startswith("aten::") and not any(c.name.startswith("aten::") for c in event.cpu_children)


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
    return dict(cpu_ops=sum(map(_leaf, events)), cuda_kernels=kernels, cuda_syncs=max(syncs, 0))
