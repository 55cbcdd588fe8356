"""The DreamerV3 engine's local execution on the project's room ROM (real PyBoy), with a tiny model: finite losses and
the files of a run; the train ratio held exactly; same seed ⇒ same run, other seed ⇒ another; a run
stopped and resumed equals the straight run bit for bit; the env checkpoint by replay; bad input."""

from __future__ import annotations

import math

import pytest
import torch

from rlspec import cli
from rlspec.engines import dreamer
from rlspec.envs.room.recorded import RecordedRoom
from rlspec.runs.rundir import load_checkpoint, read_metrics

# 2 envs × 48 env steps: 16 of prefill, then one update per env step (B·T = 2·8 = 16 = train_ratio)
TINY = ["num_envs=2", "total_steps=48", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64",
        "step_limit=10", "log_every=8", "checkpoint_every=16", "ep_window=5",
        "dreamer.deter=16", "dreamer.stoch=4", "dreamer.classes=4", "dreamer.hidden=16", "dreamer.embed_dim=16",
        "dreamer.pool=8", "dreamer.mlp_hidden=16", "dreamer.mlp_layers=1", "dreamer.horizon=4",
        "dreamer.batch_size=2", "dreamer.seq_len=8"]


def _cfg(*extra: str):
    return dreamer.build_config(overrides=[*TINY, *extra])


def _deterministic(rows):
    """The rows without the wall-clock and memory columns."""
    return [{k: v for k, v in r.items() if not k.startswith(("Time/", "Memory/"))} for r in rows]


def _same_rows(a, b) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(x[k] == y[k] or (math.isnan(x[k]) and math.isnan(y[k])) for k in x)
        for x, y in zip(a, b))


def _same_state(a: dict, b: dict) -> bool:
    """Checkpointed model/optimizer state, bit for bit."""
    def flat(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flat(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    fa, fb = dict(flat(a)), dict(flat(b))
    return fa.keys() == fb.keys() and all(
        torch.equal(fa[k], fb[k]) if isinstance(fa[k], torch.Tensor) else fa[k] == fb[k] for k in fa)


def test_smoke_run_finite_losses_ratio_held_files_written(tmp_path):
    run = dreamer.LocalExecution(_cfg()).run(tmp_path / "run", show_progress=False)
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [8, 16, 24, 32, 40, 48]
    trained = [r for r in rows if r["step"] > 16]
    for key in ("Loss/loss", "Loss/recon_loss", "Loss/kl_loss", "Loss/actor_loss", "Loss/critic_loss"):
        assert all(math.isfinite(r[key]) for r in trained), key
    # one update per env step after the prefill: updates = env steps − 16, replay ratio exactly 16
    assert [r["Train/updates"] for r in rows] == [0, 0, 8, 16, 24, 32]
    assert all(r["Train/replay_ratio"] == 16.0 for r in trained)
    ckpt = load_checkpoint(run / "checkpoints/last.pt")
    assert ckpt["env_steps"] == 48 and ckpt["state"]["updates"] == 32 and ckpt["ring"].t == 24
    plots = {p.name for p in (run / "plots").iterdir()}
    assert {"loss.png", "recon_loss.png", "return.png", "replay_ratio.png", "reconstruction.png"} <= plots
    assert (run / "versions.json").read_text().count("room_rom_sha256") == 1


def test_updates_due_is_the_train_ratio_schedule():
    cfg = dreamer.build_config(overrides=["min_ready_steps=100", "train_ratio=32", "dreamer.batch_size=4",
                                          "dreamer.seq_len=16"])  # one update per 2 env steps
    assert [dreamer.updates_due(cfg, s) for s in (0, 99, 100, 101, 102, 103, 300)] == [0, 0, 0, 0, 1, 1, 100]


def test_same_seed_same_run_other_seed_differs(tmp_path):
    runs = [dreamer.LocalExecution(_cfg(*extra)).run(tmp_path / name, stop_after_steps=24, show_progress=False)
            for name, extra in (("a", ()), ("b", ()), ("c", ("seed=1",)))]
    a, b, c = (_deterministic(read_metrics(r)) for r in runs)
    assert _same_rows(a, b) and not _same_rows(a, c)
    ca, cb = (load_checkpoint(r / "checkpoints/last.pt") for r in runs[:2])
    assert _same_state(ca["state"], cb["state"])


def test_resumed_run_equals_straight_run(tmp_path):
    cfg = _cfg("checkpoint_every=48")  # the split point (24) is no regular checkpoint: the stop writes one
    straight = dreamer.LocalExecution(cfg).run(tmp_path / "straight", show_progress=False)
    part = dreamer.LocalExecution(cfg).run(tmp_path / "resumed", stop_after_steps=24, show_progress=False)
    assert len(read_metrics(part)) == 3
    dreamer.LocalExecution(cfg).run(part, resume=True, show_progress=False)
    assert _same_rows(_deterministic(read_metrics(straight)), _deterministic(read_metrics(part)))
    ca, cb = (load_checkpoint(r / "checkpoints/last.pt") for r in (straight, part))
    assert _same_state(ca["state"], cb["state"]) and torch.equal(ca["gen"], cb["gen"])
    assert ca["envs"] == cb["envs"]
    assert all(torch.equal(v, cb["ring"].storage()[k]) for k, v in ca["ring"].storage().items())


def test_env_restored_by_replay_continues_identically():
    a = RecordedRoom(2, "room-exit", step_limit=6, seed=5, frameskip=4)
    a.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(9):  # env episodes end at 6 steps: the state holds a second episode's actions
        a.step(torch.randint(0, 5, (2,), generator=gen))
    b = RecordedRoom(2, "room-exit", step_limit=6, seed=5, frameskip=4)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.frames, b.frames) and b.env.episode == [1, 1] and b.env.steps == [3, 3]
    for _ in range(6):
        act = torch.randint(0, 5, (2,), generator=gen)
        sa, sb = a.step(act), b.step(act)
        assert all(torch.equal(x, y) for x, y in zip(sa, sb))
    a.close(), b.close()


def test_eval_and_plot_on_a_run(tmp_path, capsys):
    cfg = _cfg("task=standing-still", "total_steps=24", "checkpoint_every=24")
    run = dreamer.LocalExecution(cfg).run(tmp_path / "run", show_progress=False)
    assert cli.main(["eval", str(run), "--episodes", "2"]) == 0
    result = __import__("json").loads((run / "eval/eval.json").read_text())
    assert result["episodes"] == 2 and result["EpLen"] == 10 and result["SuccessRate"] == 0  # nothing ends
    (run / "plots/loss.png").unlink()
    assert cli.main(["plot", str(run)]) == 0 and (run / "plots/loss.png").is_file()


# ------------------------------------------------------------------------------------------ bad input
def _train(argv, capsys):
    code = cli.main(["train", "dreamer", *argv])
    return code, capsys.readouterr().err


def test_unknown_key_and_bad_value_name_the_key(tmp_path, capsys):
    code, err = _train(["--out", str(tmp_path / "r"), "--set", "dreamer.nope=1"], capsys)
    assert code == 2 and "dreamer.nope" in err
    code, err = _train(["--out", str(tmp_path / "r"), "--set", "total_steps=47", "--set", "num_envs=2"], capsys)
    assert code == 2 and "total_steps" in err and "multiple of num_envs" in err
    code, err = _train(["--out", str(tmp_path / "r"), *[a for kv in TINY for a in ("--set", kv)],
                        "--set", "min_ready_steps=4"], capsys)
    assert code == 2 and "min_ready_steps" in err and ">= num_envs · dreamer.seq_len = 16" in err
    code, err = _train(["--out", str(tmp_path / "r"), "--set", "dreamer.wm_lr=0"], capsys)
    assert code == 2 and "'dreamer.wm_lr': expected a finite float > 0, got 0.0" in err
    code, err = _train(["--out", str(tmp_path / "r"), "--set", "dreamer.pool=3"], capsys)
    assert code == 2 and "config group 'dreamer'" in err and "'pool' must divide" in err
    assert not (tmp_path / "r").exists()


def test_execution_key_is_checked(tmp_path, capsys):
    code, err = _train(["--resume", str(tmp_path), "--execution", "device"], capsys)
    assert code == 2 and "--resume continues a run with its own config.json" in err
    code, err = _train(["--out", str(tmp_path / "r"), "--set", "execution=turbo"], capsys)
    assert code == 2 and "config key 'execution': expected one of ['local', 'device'], got 'turbo'" in err
    with pytest.raises(dreamer.runconfig.ConfigError, match="LocalExecution runs execution 'local'"):
        dreamer.LocalExecution(_cfg("execution=device"))


def test_the_former_engine_key_and_flag_are_refused_by_name(tmp_path, capsys):
    """engine= and --engine (the names before execution) are errors naming what they are not, not aliases."""
    with pytest.raises(dreamer.runconfig.ConfigError, match="engine"):
        _cfg("engine=fast")
    with pytest.raises(SystemExit, match="2"):  # argparse: an unknown flag, named
        _train(["--out", str(tmp_path / "r"), "--engine", "fast"], capsys)
    assert "unrecognized arguments: --engine fast" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_missing_rom_is_a_clear_error(tmp_path, monkeypatch, capsys):
    from rlspec.envs.room import pyboy_room

    monkeypatch.setattr(pyboy_room, "ROM", tmp_path / "gone.gb")
    code, err = _train(["--out", str(tmp_path / "r"), *[a for kv in TINY for a in ("--set", kv)]], capsys)
    assert code == 2 and "gone.gb is missing" in err and "nox -s rom" in err


def test_corrupted_checkpoint_is_a_clear_error_and_loses_nothing(tmp_path, capsys):
    run = dreamer.LocalExecution(_cfg()).run(tmp_path / "run", stop_after_steps=16, show_progress=False)
    ckpt = run / "checkpoints/last.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:1000])  # truncated
    before = (run / "metrics.csv").read_bytes()
    code, err = _train(["--resume", str(run)], capsys)
    assert code == 2 and "corrupted" in err and str(ckpt) in err
    assert (run / "metrics.csv").read_bytes() == before and ckpt.stat().st_size == 1000
    assert cli.main(["plot", str(run)]) == 2 and "corrupted" in capsys.readouterr().err
    assert cli.main(["eval", str(run)]) == 2 and "corrupted" in capsys.readouterr().err


def test_room_exit_preset_is_the_benchmarks_conv_run():
    """`--preset room-exit` is the configuration with which both engines learned the room (the room-exit
    benchmark's OVERRIDES with the conv encoder): same task, env and replay settings, same model."""
    from benchmarks.dreamer import room_exit as bench

    conv = ["dreamer.encoder=conv", "dreamer.cnn_stages=3", "dreamer.cnn_mult=8"]
    ran, preset = dreamer.build_config("default", [*bench.OVERRIDES, *conv]), dreamer.build_config("room-exit")
    dreamer.validate(preset)
    assert preset.dreamer == ran.dreamer
    for key in ("task", "step_limit", "num_envs", "min_ready_steps", "train_ratio", "replay_capacity", "frameskip"):
        assert getattr(preset, key) == getattr(ran, key), key
    assert preset.total_steps >= 18_432  # where both engines first reached greedy success >= 0.9
