"""The DreamerV3 engine's device execution (rlspec/engines/dreamer/device.py) on CUDA (Dreamer plan M6–M7 GPU gate): the memcpy gate
on the engine's hot loop (torch.profiler: no "Memcpy HtoD"/"Memcpy DtoH" in ``iterate``), pointer stability of
the replay slots the Warp room renders into, the actor and learner on their own streams, and a CUDA smoke
run whose checkpoint the CPU tools read. The CPU gate runs the same engine code on CPU
(tests/engines/dreamer/test_dreamer_device.py), where the streams and events are no-ops."""

from __future__ import annotations

import math

import pytest
import torch
from cuda_util import write_report

from rlspec import cli
from rlspec.engines import dreamer
from rlspec.engines.dreamer.device import DeviceExecution
from rlspec.runs.rundir import load_checkpoint, read_metrics

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: the fast engine's "
                                                                       "streams, events and memcpy gate need a GPU")]

# tests/engines/dreamer/test_dreamer_engine.py's tiny model; 2 envs, one update per env step after 16 of prefill
TINY = ["num_envs=2", "total_steps=48", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64",
        "step_limit=10", "log_every=8", "checkpoint_every=16", "ep_window=5",
        "dreamer.deter=16", "dreamer.stoch=4", "dreamer.classes=4", "dreamer.hidden=16", "dreamer.embed_dim=16",
        "dreamer.pool=8", "dreamer.mlp_hidden=16", "dreamer.mlp_layers=1", "dreamer.horizon=4",
        "dreamer.batch_size=2", "dreamer.seq_len=8",
        "execution=device", "device=cuda", "commit_stride=2", "steps_per_rollout=3", "sync_every=2"]


def _engine(*extra: str) -> DeviceExecution:
    return DeviceExecution(dreamer.build_config(overrides=[*TINY, *extra]))


def _host_copies(iterations) -> tuple[list[str], list[str]]:
    """(host<->device copy events, all event names) of ``iterations()`` under the profiler."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        iterations()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    return [x for x in names if "Memcpy HtoD" in x or "Memcpy DtoH" in x], names


def test_actor_hot_loop_prefill_has_no_host_device_copies():
    """Warp step, direct write into the ring's obs slot, push, commits, episode statistics: all on the device."""
    engine = _engine("min_ready_steps=400", "total_steps=400", "log_every=400", "checkpoint_every=400")
    p = engine.setup()
    engine.iterate(p)  # warm-up: Warp modules loaded, allocations made
    copies, names = _host_copies(lambda: [engine.iterate(p) for _ in range(4)])
    assert p.loop.env_steps < 400 and p.state.updates == 0  # still the prefill
    assert not copies, f"{len(copies)} host<->device copies in the actor's loop: {sorted(set(copies))}"
    assert any("Memcpy DtoD" in x or "copy" in x.lower() for x in names), "the profiler saw no device work"
    assert int(p.ring.violations) == 0


def test_training_hot_loop_has_no_host_device_copies():
    """Policy steps, sampling, train_step and weight syncs, after warm-up, with value checks off (CUDA's
    default): the contracts' value validators skip their host reads, shapes and dtypes are still checked.
    The copies found are reported in bench-results/dreamer_fast_memcpy.json by name."""
    engine = _engine()
    p = engine.setup()
    while p.state.updates < 4:  # warm-up past the prefill: every path taken once (sync included)
        engine.iterate(p)
    copies, _ = _host_copies(lambda: [engine.iterate(p) for _ in range(2)])
    write_report("dreamer_fast_memcpy", {"iterations": 2, "host_device_copies": len(copies),
                                         "by_name": {n: copies.count(n) for n in sorted(set(copies))}})
    assert not copies, f"{len(copies)} host<->device copies in the training loop: {sorted(set(copies))}"


def test_replay_slot_pointers_are_stable_and_the_env_renders_into_them():
    cap = 14  # >= seq_len + commit_stride + steps_per_rollout = 13; 3 wraps in the prefill below
    engine = _engine(f"replay_capacity={cap}", "min_ready_steps=96", "total_steps=96", "log_every=96",
                     "checkpoint_every=96")
    p = engine.setup()
    ring = p.ring
    base = {k: v.data_ptr() for k, v in ring.storage().items()}
    obs = ring.storage()["obs"]
    row_bytes = obs[0].numel() * obs.element_size()
    for _ in range(16):
        engine.iterate(p)
        torch.cuda.synchronize()  # the actor stream's writes are done before the default stream compares
        assert {k: v.data_ptr() for k, v in ring.storage().items()} == base
        slot = ring.obs_slot(ring.t)
        assert slot.data_ptr() == base["obs"] + (ring.t % cap) * row_bytes
        fresh = torch.zeros_like(slot)
        p.envs.render(fresh)  # the current frames, rendered again elsewhere
        torch.testing.assert_close(slot, fresh, rtol=0, atol=0, msg="the slot does not hold the env's frame")
    assert ring.t > 3 * cap


def test_actor_and_learner_have_their_own_streams():
    engine = _engine()
    default = torch.cuda.default_stream()
    assert engine.actor_stream != engine.learner_stream
    assert default not in (engine.actor_stream, engine.learner_stream)


def test_cuda_smoke_run_finite_ratio_held_and_read_on_cpu(tmp_path, capsys):
    run = _engine().run(tmp_path / "run", show_progress=False)
    rows = read_metrics(run)
    trained = [r for r in rows if r["step"] > 16]
    for key in ("Loss/loss", "Loss/recon_loss", "Loss/kl_loss", "Loss/actor_loss", "Loss/critic_loss"):
        assert all(math.isfinite(r[key]) for r in trained), key
    assert [r["Train/updates"] for r in rows] == [0, 0, 8, 16, 24, 32]
    assert all(r["Train/replay_ratio"] == 16.0 for r in trained)
    ckpt = load_checkpoint(run / "checkpoints/last.pt")
    assert ckpt["execution"] == "device" and ckpt["state"]["updates"] == 32
    assert all(t.device.type == "cpu" for t in ckpt["ring"]["store"].values())
    assert cli.main(["plot", str(run)]) == 0 and (run / "plots/reconstruction.png").is_file()
    assert cli.main(["eval", str(run), "--episodes", "2"]) == 0
    capsys.readouterr()
