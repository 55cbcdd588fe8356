"""The room env's Warp twin on CUDA (spec/room_env.py; the Dreamer plan M6 direct write). UNVERIFIED here: written
on a machine without a GPU; the CPU gate runs the same kernels on Warp's CPU device.

* CUDA frames, rewards and flags equal Warp's CPU device and the ROM in PyBoy bit for bit.
* The actor loop of M6 — step(render=False), push the row, render into ReplayRing.obs_slot(t+1) — makes no
  host<->device copy (profiler memcpy gate) and no synchronizing torch call, and its pointers stay put.
* Throughput at 1k and 16k envs (steps/s, and frame bytes written per second against the device copy
  bandwidth) goes to bench-results/room_env_cuda.json: reported, never asserted.
"""

from __future__ import annotations

import pytest
import torch
from cuda_util import copy_bandwidth, cuda_seconds, sync_is_an_error, write_report

from rlspec.contracts.room_env import NUM_ACTIONS, OBS_SHAPE
from rlspec.envs.room import pyboy_room, warp_room
from rlspec.fast.replay import ReplayRing
from rlspec.spec import room_env as spec

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: the room env's CUDA "
                                                             "kernels need a GPU"),
]


def _run(env, actions: torch.Tensor) -> list:
    """Every Step and final_out along actions [T, N], copied to the host (a copy also on CPU, where .cpu()
    would return the buffer the next step overwrites)."""
    n = actions.shape[1]
    out = [spec._copy(env.reset())]
    final = torch.empty(n, *OBS_SHAPE, dtype=torch.uint8, device=env.device)
    for a in actions.to(env.device):
        out.append((spec._copy(env.step(a, final_out=final)), final.to("cpu", copy=True)))
    return out


@pytest.mark.parametrize("n, against", [(64, "warp-cpu"), (3, "pyboy")])
def test_cuda_equals_cpu_and_the_rom(n, against):
    if against == "warp-cpu" and not warp_room.wp.is_cpu_available():
        pytest.skip("this Warp has no CPU kernel compiler (a CUDA-only build, e.g. the offline GPU gate's); "
                    "the ROM comparison still runs")
    case = spec._case(num_envs=n, seed=5, step_limit=20, steps=150, greed=0.7)
    _, actions, _ = spec._plan(case)
    kwargs = dict(step_limit=case["step_limit"], seed=case["seed"])
    ref_cls = warp_room.RoomVecEnv if against == "warp-cpu" else pyboy_room.RoomVecEnv
    got = _run(warp_room.RoomVecEnv(n, device="cuda", **kwargs), actions)
    want = _run(ref_cls(n, **kwargs), actions)
    assert len(got) == len(want) == actions.shape[0] + 1
    spec.compare("ROOM-1", -1, got[0], want[0], case)  # raises Violation naming the step and field
    for t, ((g, gf), (w, wf)) in enumerate(zip(got[1:], want[1:])):
        spec.compare("ROOM-1", t, g, w, case, got_final=gf, want_final=wf)


def _actor_loop(env, ring, actions, row: dict, first: int, steps: int) -> None:
    """Dreamer plan M6 on the device: obs_t is already in obs_slot(t); step, push row t, render obs_{t+1} into
    obs_slot(t+1). ``row`` carries is_first / episode_id of obs_t (device tensors)."""
    for t in range(first, first + steps):
        a = actions[t]
        s = env.step(a, render=False)
        ring.push(None, a, s.reward, row["is_first"], (~s.terminated).float(), row["episode_id"])
        env.render(ring.obs_slot(t + 1))
        row["is_first"].copy_(s.is_first)
        row["episode_id"].copy_(s.episode_id)


@pytest.mark.parametrize("n", [16, 4096])
def test_actor_loop_writes_obs_slots_without_host_copies(n):
    cap, warm, timed = 32, 40, 24
    env = warp_room.RoomVecEnv(n, step_limit=16, device="cuda", check_actions=False)
    ring = ReplayRing(cap, n, device="cuda", commit_stride=4, check_values=False)
    g = torch.Generator(device="cuda").manual_seed(0)
    actions = torch.randint(0, NUM_ACTIONS, (warm + timed, n), generator=g, device="cuda", dtype=torch.int32)
    first = env.reset(out=ring.obs_slot(0))
    row = dict(is_first=first.is_first.clone(), episode_id=first.episode_id.clone())
    _actor_loop(env, ring, actions, row, 0, warm)  # kernels loaded, allocator primed
    pointers = ({k: v.data_ptr() for k, v in ring.storage().items()}, env.reward.data_ptr(),
                env.flags["terminated"].data_ptr())
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        with sync_is_an_error():
            _actor_loop(env, ring, actions, row, warm, timed)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "Memcpy HtoD" in e.name or "Memcpy DtoH" in e.name]
    assert not copies, f"{len(copies)} host<->device copies in the actor loop: {sorted(set(copies))}"
    assert pointers == ({k: v.data_ptr() for k, v in ring.storage().items()}, env.reward.data_ptr(),
                        env.flags["terminated"].data_ptr())
    assert int(ring.violations) == 0 and int(env.violations) == 0  # read after the gate
    # the ring holds what a plain run computes for the same actions (obs_t of the last cap steps): on Warp's CPU
    # device, or, with a CUDA-only Warp, a second CUDA env stepped without the ring
    plain = warp_room.RoomVecEnv(n, step_limit=16, device="cpu" if warp_room.wp.is_cpu_available() else "cuda")
    host = lambda step: step.obs.to("cpu", copy=True)  # noqa: E731 - a copy: obs is the env's own buffer
    frames = [host(plain.reset())] + [host(plain.step(a.to(plain.device).long())) for a in actions]
    last = range(warm + timed - cap + 1, warm + timed + 1)
    assert torch.equal(ring.storage()["obs"][[t % cap for t in last]].cpu(), torch.stack([frames[t] for t in last]))


def test_throughput_report():
    report = {}
    for n in (1024, 16384):
        env = warp_room.RoomVecEnv(n, device="cuda", check_actions=False)
        out = torch.empty(n, *OBS_SHAPE, dtype=torch.uint8, device="cuda")
        g = torch.Generator(device="cuda").manual_seed(0)
        actions = torch.randint(0, NUM_ACTIONS, (n,), generator=g, device="cuda", dtype=torch.int32)
        env.reset(out)
        seconds = cuda_seconds(lambda: env.step(actions, out), iters=50)  # noqa: B023 - timed right here
        frame_bytes = out.numel()
        report[str(n)] = dict(steps_per_s=n / seconds, step_seconds=seconds,
                              frame_bytes_written_per_s=frame_bytes / seconds,
                              device_copy_bytes_per_s=copy_bandwidth(frame_bytes))
    path = write_report("room_env_cuda", dict(device=torch.cuda.get_device_name(), steps=report,
                                              note="step(actions, out): step kernel + render kernel into out"))
    print(path.read_text())
