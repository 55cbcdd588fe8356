"""replay: ``push`` of one step for N = 4096 envs (packed2 obs [1, 72, 20]) and ``sample_sequences(B=16,
T=64)``, reference vs fast-torch (CPU, and CUDA where available). Rows/s = N / push time and
B·T / sample time are attached as extra_info.

The fast ring runs with ``check_values=False`` on CUDA (its hot-loop setting: no host synchronization);
the memcpy gate at this size is tests/gpu/test_replay_cuda.py::test_no_host_device_copies_in_push_and_sample.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rlspec.contracts import replay as contract
from rlspec.registry import IMPLEMENTATIONS
from rlspec.spec import replay as spec

pytestmark = pytest.mark.bench

N, B, T = 4096, 16, 64
IMPLS = ["reference", "fast-torch"]


def _ring(impl: str, device: str, capacity: int):
    module = importlib.import_module(IMPLEMENTATIONS["replay"][impl])
    if impl == "reference":
        return module.ReplayRing(capacity, N)
    return module.ReplayRing(capacity, N, device=device, check_values=device == "cpu")


def _stream(steps: int, device: str) -> dict:
    return {k: v.to(device) for k, v in spec.make_stream(steps, N, contract.OBS_SHAPE, torch.uint8, 0, 0.0).items()}


def _time(benchmark, op, impl, device, fn, rows):
    benchmark.group = op if device == "cpu" else f"{op}@{device}"
    benchmark.extra_info.update(op=op, impl=impl, device=device)
    benchmark(fn if device == "cpu" else lambda: (fn(), torch.cuda.synchronize()))
    if benchmark.stats is not None:  # None under --benchmark-disable (the default outside the bench session)
        benchmark.extra_info["rows_per_s"] = rows / benchmark.stats.stats.median


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_push(benchmark, device, impl):
    ring = _ring(impl, device, capacity=4)
    stream = _stream(1, device)
    ring.push(**spec.step_args(stream, 0, device))
    args = spec.step_args(stream, 0, device)
    args["is_first"] = torch.zeros_like(args["is_first"])  # the same episode continues
    ring.push(**args)
    assert torch.equal(ring.storage()["obs"][1].cpu(), stream["obs"][0].cpu())
    _time(benchmark, "replay.push", impl, device, lambda: ring.push(**args), N)


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_sample(benchmark, device, impl):
    ring = _ring(impl, device, capacity=T + 8)
    stream = _stream(T + 8, device)
    for s in range(T + 8):
        ring.push(**spec.step_args(stream, s, device))
    g = torch.Generator(device=device).manual_seed(0)
    out = ring.sample_sequences(B, T, g)
    assert torch.equal(out["obs"][:, 0].cpu(), stream["obs"][out["step"][:, 0].cpu(), int(out["env"][0])].cpu())
    _time(benchmark, "replay.sample_sequences", impl, device, lambda: ring.sample_sequences(B, T, g), B * T)
