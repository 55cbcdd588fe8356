"""The DreamerV3 engine's device execution (rlspec/engines/dreamer/device.py) on CPU with the Warp room and a tiny model:
a smoke run with finite losses and the replay ratio held; the starvation guard; the replay window's old end
(an actor that keeps pushing never overwrites a row of an in-flight gather); non-finite losses stop the
run with a clear error; `rlspec compare dreamer` agrees with the reference engine in its deterministic
mode; a stopped and resumed fast run equals the straight run (CPU: one thread, one generator)."""

from __future__ import annotations

import collections
import json
import math
import traceback
from pathlib import Path

import pytest
import torch
from test_dreamer_engine import TINY, _deterministic, _same_rows, _same_state

from rlspec import cli
from rlspec.engines import dreamer
from rlspec.engines.dreamer import device as dreamer_device
from rlspec.fast.replay import ReplayRing
from rlspec.runs.rundir import load_checkpoint, read_metrics
from rlspec.spec import replay as spec
from rlspec.spec.core import HOST_READS, no_host_sync

# the asynchronous settings: commits every 2 vector steps, rollouts of 3, weights synced every 2 updates
ASYNC = ["execution=device", "commit_stride=2", "steps_per_rollout=3", "sync_every=2", "device=cpu"]
DETERMINISTIC = ["execution=device", "commit_stride=1", "steps_per_rollout=1", "sync_every=1", "device=cpu"]


def _cfg(*extra: str):
    return dreamer.build_config(overrides=[*TINY, *extra])


def test_fast_smoke_run_finite_losses_ratio_held(tmp_path, capsys):
    assert cli.main(["train", "dreamer", "--execution", "device", "--quiet", "--out", str(tmp_path / "run"),
                     *[a for kv in TINY + ASYNC[1:] for a in ("--set", kv)]]) == 0
    run = tmp_path / "run"
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [8, 16, 24, 32, 40, 48]
    trained = [r for r in rows if r["step"] > 16]
    for key in ("Loss/loss", "Loss/recon_loss", "Loss/kl_loss", "Loss/actor_loss", "Loss/critic_loss",
                "Grad/world_model"):
        assert all(math.isfinite(r[key]) for r in trained), key
    # the scheduler's updates are all taken by each row (rollouts stop at row boundaries): ratio exactly 16
    assert [r["Train/updates"] for r in rows] == [0, 0, 8, 16, 24, 32]
    assert all(r["Train/replay_ratio"] == 16.0 for r in trained)
    assert all(r["Train/starved"] == 0 for r in rows)
    ckpt = load_checkpoint(run / "checkpoints/last.pt")
    assert ckpt["execution"] == "device" and ckpt["state"]["updates"] == 32 and ckpt["ring"]["t"] == 24
    assert ckpt["ring"]["committed_t"] == 24  # 24 pushes, a commit every 2
    assert json.loads((run / "config.json").read_text())["config"]["execution"] == "device"
    assert "warp" in json.loads((run / "versions.json").read_text())
    assert {"loss.png", "replay_ratio.png", "reconstruction.png"} <= {p.name for p in (run / "plots").iterdir()}
    (run / "plots/reconstruction.png").unlink()
    assert cli.main(["plot", str(run)]) == 0 and (run / "plots/reconstruction.png").is_file()  # the ring's state
    assert cli.main(["eval", str(run), "--episodes", "2"]) == 0  # the reference eval reads a fast run
    assert json.loads((run / "eval/eval.json").read_text())["episodes"] == 2


def test_starved_learner_catches_up_and_holds_the_ratio(tmp_path):
    """commit_stride 6 > the 8 ring steps of the prefill minus seq_len: at the first due update only 6 steps
    are committed (< seq_len 8): the learner waits, then takes every due update once 12 are committed."""
    cfg = _cfg(*ASYNC, "commit_stride=6", "steps_per_rollout=1", "log_every=4")
    run = dreamer_device.DeviceExecution(cfg).run(tmp_path / "run", show_progress=False)
    rows = {int(r["step"]): r for r in read_metrics(run)}
    assert rows[16]["Train/updates"] == 0 and rows[16]["Train/starved"] == 0  # none due yet
    assert rows[20]["Train/updates"] == 0 and rows[20]["Train/starved"] == 2  # steps 18, 20: 6 committed
    assert rows[24]["Train/updates"] == 8 and rows[24]["Train/starved"] == 3  # 12 committed: 8 taken at once
    assert rows[48]["Train/updates"] == 32 and rows[48]["Train/replay_ratio"] == 16.0


@pytest.mark.parametrize("reserve,safe", [(3, True), (0, False)])
def test_reserved_old_end_is_never_overwritten_by_the_next_rollout(reserve, safe):
    """The overwrite rule (module docstring of rlspec/engines/dreamer/device.py): a gather drawn at write head t, then a rollout
    of ``reserve`` pushes (and the next obs slot's direct write) by the actor: every row the gather read still
    holds what it read. Without the reserve the actor overwrites some of them (the rule is needed)."""
    cap, n, R, T = 12, 2, 3, 4
    ring = ReplayRing(cap, n, device="cpu", reserve=reserve)
    stream = spec.make_stream(4 * cap, n, (1, 72, 20), torch.uint8, seed=0, p_end=0.2)
    for s in range(2 * cap):  # wrapped twice
        ring.push(**spec.step_args(stream, s, "cpu"))
    batch = ring.sample_sequences(256, T, torch.Generator().manual_seed(0))
    for s in range(2 * cap, 2 * cap + R):  # the actor's next rollout
        ring.push(**spec.step_args(stream, s, "cpu"))
    ring.obs_slot(ring.t).fill_(255)  # the next frame's direct write
    rows = batch["step"] % cap  # [T, B]
    now = ring.storage()["reward"][rows, batch["env"]]
    still = bool(torch.equal(now, batch["reward"])) and bool(
        torch.equal(ring.storage()["obs"][rows, batch["env"]], batch["obs"]))
    assert still == safe
    assert int(batch["step"].min()) >= 2 * cap + 1 - cap + reserve


def test_engine_ring_reserves_one_rollout():
    ring = dreamer_device.make_fast_ring(_cfg(*ASYNC), torch.device("cpu"))
    assert ring.reserve == 3 and ring.commit_stride == 2


def _train_fast(tmp_path, *extra):
    return cli.main(["train", "dreamer", "--execution", "device", "--quiet", "--out", str(tmp_path / "run"),
                     *[a for kv in TINY + DETERMINISTIC[1:] + list(extra) for a in ("--set", kv)]])


def test_non_finite_metric_stops_the_run_at_the_next_row(tmp_path, monkeypatch, capsys):
    """Update 5 reports an infinite gradient norm: the next metrics row (step 24) stops the run (exit 3) with
    the count and the update range; the last checkpoint is the clean one before (step 16)."""
    real = dreamer_device.train_step

    def inf_norm(state, batch, gen):
        metrics = real(state, batch, gen)
        if state.updates == 5:
            metrics["Grad/world_model"] = torch.tensor(math.inf)
        return metrics

    monkeypatch.setattr(dreamer_device, "train_step", inf_norm)
    code, err = _train_fast(tmp_path), capsys.readouterr().err
    assert code == 3 and "non-finite metric values (1) in updates 1..8" in err and "Grad/world_model" in err, err
    assert "last clean checkpoint (step 16) is kept" in err, err
    assert load_checkpoint(tmp_path / "run/checkpoints/last.pt")["state"]["updates"] == 0
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [8, 16]


def test_non_finite_weights_stop_the_run_naming_the_network(tmp_path, monkeypatch, capsys):
    """A world-model weight turned to NaN before update 5: the NaN reaches imagination in the same update and
    a validator or the sampler raises; the engine reports it as non-finite parameters (exit 3)."""
    real = dreamer_device.train_step

    def poisoned(state, batch, gen):
        if state.updates == 4:
            with torch.no_grad():
                next(state.wm.parameters()).fill_(math.nan)
        return real(state, batch, gen)

    monkeypatch.setattr(dreamer_device, "train_step", poisoned)
    code, err = _train_fast(tmp_path), capsys.readouterr().err
    assert code == 3 and "non-finite parameters of wm (update 5: " in err, err
    assert load_checkpoint(tmp_path / "run/checkpoints/last.pt")["state"]["updates"] == 0


def _compare(tmp_path, capsys, *extra):
    code = cli.main(["compare", "dreamer", "--quiet", "--out", str(tmp_path / "cmp"), "--updates", "32",
                     *[a for kv in TINY + DETERMINISTIC[1:] + list(extra) for a in ("--set", kv)]])
    result = json.loads((tmp_path / "cmp/compare.json").read_text())
    said = capsys.readouterr().out
    assert (f"agree within {result['rtol']:g}: yes" in said) == (result["deterministic"] and result["agree"]), said
    assert ("no agreement is checked" in said) == (not result["deterministic"]), said
    return code, result


def test_compare_deterministic_mode_same_kit_is_the_reference_run(tmp_path, capsys):
    code, result = _compare(tmp_path, capsys, "kit=reference")
    assert code == 0 and result["deterministic"] and result["agree"] and result["rows"] == [6, 6]
    assert result["rows_compared"] == 6 and all(v == 0.0 for v in result["max_rel_diff_all"].values())
    assert (tmp_path / "cmp/compare.png").is_file()


def test_compare_deterministic_mode_fast_kit_within_float32_drift(tmp_path, capsys):
    """The fast kit rounds differently (~1e-7 per update); over 32 updates the rows stay within 1e-3 (not
    bit-identical: the difference is measured, not zero)."""
    code, result = _compare(tmp_path, capsys, "kit=fast")
    assert code == 0 and result["agree"] and result["rtol"] == 1e-3
    assert 0 < result["worst_first"][1] <= 1e-3


def test_fast_resumed_run_equals_straight_run(tmp_path):
    cfg = _cfg(*ASYNC)
    straight = dreamer_device.DeviceExecution(cfg).run(tmp_path / "a", show_progress=False)
    engine = dreamer_device.DeviceExecution(cfg)
    engine.run(tmp_path / "b", stop_after_steps=20, show_progress=False)  # the next rollout boundary: 24
    assert load_checkpoint(tmp_path / "b/checkpoints/last.pt")["env_steps"] == 24
    dreamer_device.DeviceExecution(cfg).run(tmp_path / "b", resume=True, show_progress=False)
    assert _same_rows(_deterministic(read_metrics(straight)), _deterministic(read_metrics(tmp_path / "b")))
    a, b = (load_checkpoint(tmp_path / f"{x}/checkpoints/last.pt") for x in "ab")
    assert _same_state(a["state"], b["state"]) and _same_state(a["policy"], b["policy"])
    assert torch.equal(a["gen"], b["gen"]) and all(torch.equal(a["ring"]["store"][k], b["ring"]["store"][k])
                                                   for k in a["ring"]["store"])


@pytest.mark.parametrize("override,key", [("commit_stride=9", "commit_stride"), ("kit=other", "kit"),
                                          ("device=cuda:7", "device"), ("steps_per_rollout=0", "steps_per_rollout"),
                                          ("replay_capacity=12", "replay_capacity"), ("ep_window=1", "ep_window"),
                                          ("value_checks=maybe", "value_checks")])
def test_bad_fast_keys_name_the_key(tmp_path, capsys, override, key):
    code = cli.main(["train", "dreamer", "--execution", "device", "--quiet", "--out", str(tmp_path / "run"),
                     *[a for kv in TINY + [override] for a in ("--set", kv)]])
    err = capsys.readouterr().err
    assert code == 2 and f"config key {key!r}" in err, err
    assert not (tmp_path / "run").exists()


def test_actor_loop_reads_nothing_back_to_the_host():
    """The CPU stand-in for the GPU memcpy gate (spec.core.no_host_sync: .item(), bool(t), .tolist(), .cpu(),
    ... raise). With the input checks off, as on CUDA, the prefill's iterations (Warp step, direct write into
    the obs slot, push, commits, episode statistics, the learner's empty phases) read nothing back."""
    engine = dreamer_device.DeviceExecution(_cfg(*ASYNC, "min_ready_steps=40"))
    engine.checks = False
    p = engine.setup()
    engine.iterate(p)
    with no_host_sync():
        for _ in range(3):
            engine.iterate(p)
    assert p.loop.env_steps == 16 and p.state.updates == 0 and p.ring.t == 8 and p.ring.committed_t == 8  # 6, 8, 12, 16
    assert int(p.ring.violations) == 0


RLSPEC = Path(dreamer_device.__file__).resolve().parents[2]  # rlspec/engines/dreamer/device.py -> rlspec/


def _host_reads(fn) -> collections.Counter:
    """(innermost rlspec file, innermost file) of every tensor -> host read inside fn()."""
    seen, saved = collections.Counter(), {n: getattr(torch.Tensor, n) for n in HOST_READS}

    def recording(name):
        def read(self, *args, **kwargs):
            stack = traceback.extract_stack()[:-1]
            ours = [f.filename for f in stack if Path(f.filename).resolve().is_relative_to(RLSPEC)]
            seen[(Path(ours[-1]).resolve().relative_to(RLSPEC).as_posix() if ours else None,
                  Path(stack[-1].filename).parent.name)] += 1
            return saved[name](self, *args, **kwargs)
        return read

    try:
        for name in HOST_READS:
            setattr(torch.Tensor, name, recording(name))
        fn()
    finally:
        for name, f in saved.items():
            setattr(torch.Tensor, name, f)
    return seen


@pytest.mark.parametrize("checks", ["off", "on"])
def test_training_loop_reads_back_only_adam_step_counters_without_value_checks(checks):
    """Policy steps, sampling, train_step and weight syncs with ``value_checks=off`` (CUDA's default): the only
    tensor -> host reads are Adam's step counters (host tensors on CUDA too). With the checks on, the
    contracts' value validators read too: the CPU stand-in for the GPU memcpy gate can fail."""
    engine = dreamer_device.DeviceExecution(_cfg(*ASYNC, f"value_checks={checks}"))
    p = engine.setup()
    while p.state.updates < 4:
        engine.iterate(p)
    updates = p.state.updates
    reads = _host_reads(lambda: [engine.iterate(p) for _ in range(2)])
    assert p.state.updates > updates  # trained inside
    elsewhere = {k: n for k, n in reads.items() if k[1] != "optim"}
    if checks == "off":
        assert not elsewhere, elsewhere
    else:
        assert elsewhere and all(k[0].startswith("contracts/") for k in elsewhere), elsewhere


def test_replay_ends_store_the_same_final_frames_and_flags_in_both_executions(tmp_path):
    """replay_ends=true: the local execution (PyBoy, reference ring) and the device one (Warp, fast ring) fill
    their replays with the same rows, flags and final frames included; a truncation's final frame is the
    room before its reset, not the next row's first frame."""
    ends = ("replay_ends=true", "plots=false")
    local = dreamer.LocalExecution(_cfg(*ends)).run(tmp_path / "local", show_progress=False)
    device = dreamer_device.DeviceExecution(_cfg(*DETERMINISTIC, *ends, "kit=reference")).run(tmp_path / "device",
                                                                                           show_progress=False)
    want = load_checkpoint(local / "checkpoints/last.pt")["ring"].storage()
    got = load_checkpoint(device / "checkpoints/last.pt")["ring"]["store"]
    rows = int(load_checkpoint(local / "checkpoints/last.pt")["env_steps"]) // 2  # 2 envs, no wrap (capacity 64)
    assert got.keys() == want.keys() and {"final_obs", "terminated", "truncated"} <= want.keys()
    differ = [k for k in want if not torch.equal(got[k][:rows], want[k][:rows])]  # row `rows`: the device's next
    assert not differ, differ  # frame, already rendered into its obs_slot
    cut = want["truncated"][:rows - 1]  # [rows - 1, N]: truncations with a next row
    assert int(cut.sum()) >= 2 and bool(want["is_first"][1:rows][cut].all())
    differs = (want["final_obs"][:rows - 1] != want["obs"][1:rows]).flatten(2).any(2)  # [rows - 1, N]
    assert bool(differs[cut].all()) and not bool(differs[~want["is_first"][1:rows]].any())
