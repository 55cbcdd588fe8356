"""The fast replay ring (fast/replay.py) on CUDA: pointer stability of obs slots, event fencing between an
actor stream and a learner stream, and the memcpy gate (no "Memcpy HtoD"/"Memcpy DtoH" in a loop of
push + sample with device-resident inputs). The CPU gate runs the same ring logic with events as no-ops."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts import replay as contract
from rlspec.fast.replay import ReplayRing
from rlspec.spec import replay as spec

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: the ring's events and "
                                                             "the memcpy gate need a GPU"),
]


def _stream(steps, n, seed=0, p_end=0.2):
    """A valid stream [steps, n, ...] already on the GPU (so that pushes copy device to device only)."""
    return {k: v.cuda() for k, v in spec.make_stream(steps, n, contract.OBS_SHAPE, torch.uint8, seed, p_end).items()}


def test_obs_slot_pointers_are_stable_over_many_pushes():
    cap, n = 16, 8
    ring = ReplayRing(cap, n, device="cuda")
    stream = _stream(5 * cap, n)
    base = {k: v.data_ptr() for k, v in ring.storage().items()}
    first = {}
    for s in range(5 * cap):
        slot = ring.obs_slot(s)
        assert slot.is_contiguous() and slot.shape == (n, *contract.OBS_SHAPE)
        assert first.setdefault(s % cap, slot.data_ptr()) == slot.data_ptr(), f"slot of step {s} moved"
        slot.copy_(stream["obs"][s])  # the env kernel's direct write
        ring.push(**spec.step_args(stream, s, "cuda", obs=False))
    assert {k: v.data_ptr() for k, v in ring.storage().items()} == base
    torch.testing.assert_close(ring.storage()["obs"].cpu()[torch.arange(4 * cap, 5 * cap) % cap],
                               stream["obs"][4 * cap:].cpu(), rtol=0, atol=0)


def test_learner_waits_for_the_commit_event():
    """The actor's last step is written after a long GPU sleep; the learner, on another stream, samples right
    away. Without the stream wait on the commit event, its gather would read the row before the write."""
    cap, n = 8, 2
    ring = ReplayRing(cap, n, device="cuda", commit_stride=1, check_values=False)  # no host sync in push
    stream = _stream(cap, n, p_end=0.0)
    for s in range(cap - 1):
        ring.push(**spec.step_args(stream, s, "cuda"))
    torch.cuda.synchronize()
    actor, learner = torch.cuda.Stream(), torch.cuda.Stream()
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.cuda.stream(actor):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before the write of step cap-1
        ring.push(**spec.step_args(stream, cap - 1, "cuda"))  # commit records the event on `actor`
    with torch.cuda.stream(learner):
        out = ring.sample_sequences(16, cap - 1, g)  # readable steps [1, cap): every window holds step cap-1
    torch.cuda.synchronize()
    assert out["step"][-1].eq(cap - 1).all()
    want = stream["reward"][cap - 1][out["env"]]
    torch.testing.assert_close(out["reward"][-1], want, rtol=0, atol=0,
                               msg="the learner read step cap-1 before its commit event")


def test_commit_stride_hides_uncommitted_rows_on_cuda():
    ring = ReplayRing(32, 4, device="cuda", commit_stride=8, safety_margin=2)
    stream = _stream(20, 4)
    for s in range(20):
        ring.push(**spec.step_args(stream, s, "cuda"))
    assert ring.committed_t == 16
    out = ring.sample_sequences(256, 3, torch.Generator(device="cuda").manual_seed(1))
    assert int(out["step"].max()) < 16 - 2


@pytest.mark.parametrize("n", [4, 4096])
def test_no_host_device_copies_in_push_and_sample(n):
    """Memcpy gate (seed M6): pushes with device-resident inputs and samples with a device generator."""
    cap, steps = 80, 72
    ring = ReplayRing(cap, n, device="cuda", commit_stride=4, check_values=False)
    stream = _stream(steps, n)
    g = torch.Generator(device="cuda").manual_seed(0)
    for s in range(66):  # warm-up outside the profiled loop (allocations, kernels loaded)
        ring.push(**spec.step_args(stream, s, "cuda"))
    ring.sample_sequences(16, 64 if n > 4 else 8, g)
    args = [spec.step_args(stream, s, "cuda") for s in range(66, steps)]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for a in args:
            ring.push(**a)
            ring.sample_sequences(16, 8, g)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    copies = [x for x in names if "Memcpy HtoD" in x or "Memcpy DtoH" in x]
    assert not copies, f"{len(copies)} host<->device copies in push + sample: {sorted(set(copies))}"
    assert any("Memcpy DtoD" in x or "copy" in x.lower() for x in names), "the profiler saw no device work"
    assert int(ring.violations) == 0  # read after the gate: the stream held valid steps
