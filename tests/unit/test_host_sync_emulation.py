"""spec.core.no_host_sync, the CPU stand-in for torch.cuda.set_sync_debug_mode("error"): each pattern that a
CUDA run of the GPU gate caught as a synchronization (a 0-d tensor index in the fast modulation scale and the
PID Lagrangian's delay ring, a float turned into a device tensor in the fast dual updates) raises on CPU too,
and what does not synchronize on CUDA passes."""

from __future__ import annotations

import pytest
import torch

from rlspec.spec.core import HostSync, no_host_sync

V = torch.arange(6.0)


@pytest.mark.parametrize("name, call", [
    ("0-d index", lambda: V[torch.tensor(2)]),
    ("0-d index in a tuple", lambda: V.reshape(2, 3)[0, torch.tensor(1)]),
    ("0-d index assignment", lambda: V.clone().__setitem__(torch.tensor(1), 0.0)),
    ("boolean mask", lambda: V[V > 2]),
    ("nonzero", lambda: (V > 2).nonzero()),
    ("item", lambda: V.sum().item()),
    ("float", lambda: float(V.sum())),
    ("tensor from a float for a device", lambda: torch.tensor(1.0, device=V.device)),
    ("as_tensor from a float for a device", lambda: torch.as_tensor(0.5, dtype=torch.float32, device=V.device)),
    ("as_tensor from a list for a device", lambda: torch.as_tensor([1, 2], device=V.device)),
])
def test_synchronizing_patterns_raise(name, call):
    with pytest.raises(HostSync), no_host_sync():
        call()


@pytest.mark.parametrize("name, call, want", [
    ("1-d index (a gather)", lambda: V[torch.tensor([2])], torch.tensor([2.0])),
    ("gather", lambda: V.gather(0, torch.tensor([1, 4])), torch.tensor([1.0, 4.0])),
    ("int and slice", lambda: V[1:3], torch.tensor([1.0, 2.0])),
    ("full from a float", lambda: torch.full((), 0.5, device=V.device), torch.tensor(0.5)),
    ("where with a float", lambda: torch.where(V > 2, V, -1.0), torch.tensor([-1.0, -1, -1, 3, 4, 5])),
    ("as_tensor of a tensor", lambda: torch.as_tensor(V, device=V.device), V),
    ("a host tensor without a device", lambda: torch.tensor([1.0]), torch.tensor([1.0])),
])
def test_device_side_patterns_pass(name, call, want):
    with no_host_sync():
        got = call()
    assert torch.equal(got, want)


def test_patches_are_undone_even_after_a_failure():
    with pytest.raises(HostSync), no_host_sync():
        V[torch.tensor(0)]
    assert V[torch.tensor(3)] == 3.0 and torch.tensor(1.0, device="cpu") == 1.0 and V.sum().item() == 15.0
