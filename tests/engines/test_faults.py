"""Engines that fail loudly and lose nothing, one behaviour for all three (rlspec/runs/faults.py, rundir.py):
a diverged run stops with exit 3 keeping its last clean checkpoint; checkpoints at any stop step; a finished
run is left alone by --resume and extended by --resume --set total_steps=...; metrics.csv is one line ending
and a row cut mid-write is dropped on resume; a run directory has one writer (flock); a bad config is
refused by name before anything is created; Ctrl-C exits 130 with how to go on."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from rlspec import cli
from rlspec.engines.bonus import local as bonus_local  # where the update is called
from rlspec.engines.dreamer import loop as dreamer  # the loop module: its train step is patched
from rlspec.engines.safe import loop as safe  # the loop module: its update is patched
from rlspec.runs.rundir import load_checkpoint, read_metrics

SAFE = ["train", "safe", "--algo", "PPOLag", "--env", "ToyGoal-v0", "--preset", "smoke", "--quiet"]  # 4 × 1000 steps
# 2 envs × 48 env steps, 16 of prefill, then one update per env step; checkpoints at 16, 32, 48
DREAMER = ["train", "dreamer", "--quiet", *[a for kv in (
    "num_envs=2", "total_steps=48", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64", "step_limit=10",
    "log_every=8", "checkpoint_every=16", "ep_window=5", "dreamer.deter=16", "dreamer.stoch=4", "dreamer.classes=4",
    "dreamer.hidden=16", "dreamer.embed_dim=16", "dreamer.pool=8", "dreamer.mlp_hidden=16", "dreamer.mlp_layers=1",
    "dreamer.horizon=4", "dreamer.batch_size=2", "dreamer.seq_len=8") for a in ("--set", kv)]]
# 4 updates of 4 envs × 64 steps; checkpoints after updates 2 and 4
BONUS = ["train", "bonus", "--preset", "smoke", "--quiet", "--set", "total_steps=1024", "--set", "checkpoint_every=2"]
ENGINES = {"safe": SAFE, "dreamer": DREAMER, "bonus": BONUS}
STEP = {"safe": lambda c: c["step"], "dreamer": lambda c: c["env_steps"], "bonus": lambda c: c["update"] * 256}


def _train(argv, out, *extra) -> int:
    return cli.main([*argv, "--out", str(out), *extra])


def _resume(engine: str, out, *extra) -> int:
    return cli.main(["train", engine, "--quiet", "--resume", str(out), *extra])


def _files(run) -> dict:
    """Every file of a run directory: path -> bytes."""
    return {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _no_time(data: bytes) -> list[list[bytes]]:
    """metrics.csv split on \\n alone, without its Time/* and Memory/* columns (wall clock)."""
    lines = [line.split(b",") for line in data.split(b"\n")]
    keep = [i for i, k in enumerate(lines[0]) if not k.startswith((b"Time/", b"Memory/"))]
    return [[f[i] for i in keep if i < len(f)] for f in lines]


def _poison_after(monkeypatch, module, name: str, calls: int, poison):
    """``module.name`` (an update function) runs ``poison(args, result)`` on every call after ``calls``."""
    real, seen = getattr(module, name), []

    def wrapped(*args, **kwargs):
        seen.append(1)
        out = real(*args, **kwargs)
        return poison(args, out) if len(seen) > calls else out

    monkeypatch.setattr(module, name, wrapped)


# ----------------------------------------------------------------------------------------- 1. divergence
def test_safe_divergence_exits_3_keeping_the_clean_checkpoint(tmp_path):
    """The learning rates of 1e9 (the command of the report): the losses turn NaN in epoch 2; exit 3, one line."""
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "rlspec.cli", *SAFE, "--out", str(run), "--set", "ppo.actor_lr=1e9",
                           "--set", "ppo.critic_lr=1e9"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    err = proc.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert "non-finite Loss/Loss_pi" in err and "at step 2000" in err and "last clean checkpoint (step 1000)" in err
    ckpt = load_checkpoint(run / "checkpoints/last.pt")
    assert ckpt["step"] == 1000 and all(torch.isfinite(v).all() for v in ckpt["actor"].values())
    assert [r["step"] for r in read_metrics(run)] == [1000]  # nothing non-finite logged


def _nan_params(state):
    with torch.no_grad():
        next(state.wm.parameters()).fill_(math.nan)


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_divergence_stops_with_exit_3_and_keeps_the_last_clean_checkpoint(tmp_path, monkeypatch, capsys, engine):
    """A loss (safe, bonus) or a world-model weight (dreamer) turns NaN after the second checkpoint's step."""
    if engine == "safe":  # update 3 (step 3000) returns a NaN loss; checkpoints every epoch
        _poison_after(monkeypatch, safe, "update", 2, lambda a, m: {**m, "Loss/Loss_pi": math.nan})
        kept, at, what = 2000, 3000, "non-finite Loss/Loss_pi"
    elif engine == "bonus":  # update 3 of 4 returns a NaN loss; checkpoints after updates 2 and 4
        _poison_after(monkeypatch, bonus_local, "ppo_vtrace_update", 2, lambda a, m: {**m, "Loss/Loss_value": math.nan})
        kept, at, what = 512, 768, "non-finite Loss/Loss_value"
    else:  # the weights turn NaN in update 21 (env step 38); checkpoints at 16 and 32
        _poison_after(monkeypatch, dreamer, "train_step", 20, lambda a, m: (_nan_params(a[0]), m)[1])
        kept, at, what = 32, 38, "non-finite parameters of wm"
    code, err = _train(ENGINES[engine], tmp_path / "run"), capsys.readouterr().err
    assert code == 3 and what in err and f"last clean checkpoint (step {kept}) is kept" in err, err
    assert f"at step {at};" in err and "\n" not in err.strip() and "Traceback" not in err, err
    assert STEP[engine](load_checkpoint(tmp_path / "run/checkpoints/last.pt")) == kept


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_compare_stops_on_divergence_like_train(tmp_path, monkeypatch, capsys, engine):
    """`rlspec compare` runs its two runs through the same ending as `train`: the first run diverges, so the
    verb exits 3 in one line and writes no comparison."""
    if engine == "safe":
        _poison_after(monkeypatch, safe, "update", 2, lambda a, m: {**m, "Loss/Loss_pi": math.nan})
    elif engine == "bonus":
        _poison_after(monkeypatch, bonus_local, "ppo_vtrace_update", 2, lambda a, m: {**m, "Loss/Loss_value": math.nan})
    else:
        _poison_after(monkeypatch, dreamer, "train_step", 20, lambda a, m: (_nan_params(a[0]), m)[1])
    code = cli.main(["compare", engine, *ENGINES[engine][2:], "--out", str(tmp_path / "cmp")])
    err = capsys.readouterr().err
    assert code == 3 and f"rlspec compare {engine}: stopped: non-finite" in err, err
    assert "\n" not in err.strip() and "Traceback" not in err, err
    assert not (tmp_path / "cmp/compare.json").exists()
    before = _files(tmp_path / "cmp")
    assert cli.main(["compare", engine, *ENGINES[engine][2:], "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'cmp'} is not empty: rlspec compare starts both runs afresh (it has no --resume)" in err
    assert "use --resume" not in err and _files(tmp_path / "cmp") == before


def test_ray_trainers_losses_all_count_for_the_divergence_check():
    """Two data-parallel trainers: a loss that is NaN on rank 1 only reaches the row the run checks (the mean
    over ranks), so the run stops; finite losses are averaged, other metrics are rank 0's."""
    from rlspec.engines.bonus.ray import trainer_metrics
    from rlspec.runs.faults import Diverged, check_finite

    rank0 = {"Loss/Loss_value": 1.0, "Loss/Loss_pi": -0.5, "Metrics/Entropy": 2.0}
    row = trainer_metrics([rank0, {"Loss/Loss_value": 3.0, "Loss/Loss_pi": 0.5, "Metrics/Entropy": 9.0}])
    assert row == {"Loss/Loss_value": 2.0, "Loss/Loss_pi": 0.0, "Metrics/Entropy": 2.0}
    row = trainer_metrics([rank0, {"Loss/Loss_value": math.nan, "Loss/Loss_pi": 0.5, "Metrics/Entropy": 2.0}])
    with pytest.raises(Diverged, match="non-finite Loss/Loss_value at step 7"):
        check_finite(7, {k: v for k, v in row.items() if k.startswith("Loss/")}, {})


# ---------------------------------------------------------------------------------------- 2. checkpoints
def test_dreamer_stop_after_a_step_count_between_vector_steps_writes_a_checkpoint(tmp_path):
    """2 envs: 7 env steps end at 8 (the loop overshoots 7): the checkpoint is at 8, and resume goes on."""
    assert _train(DREAMER, tmp_path / "run", "--stop-after-steps", "7") == 0
    assert load_checkpoint(tmp_path / "run/checkpoints/last.pt")["env_steps"] == 8
    summary = json.loads((tmp_path / "run/summary.json").read_text())  # rows every 8 steps: the last at 8
    assert (summary["step"], summary["checkpoint_step"], summary["row_step"]) == (8, 8, 8)
    assert _resume("dreamer", tmp_path / "run", "--stop-after-steps", "4") == 0  # to 12: no row after 8
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert (summary["step"], summary["checkpoint_step"], summary["row_step"]) == (12, 12, 8)


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_resume_of_a_finished_run_changes_nothing_and_a_larger_total_extends_it(tmp_path, capsys, engine):
    run = tmp_path / "run"
    assert _train(ENGINES[engine], run) == 0
    before = _files(run)
    end = STEP[engine](load_checkpoint(run / "checkpoints/last.pt"))
    capsys.readouterr()
    assert _resume(engine, run) == 0
    assert f"already finished at step {end}" in capsys.readouterr().out
    assert _files(run) == before  # summary.json (dreamer) and metrics.csv untouched
    key = {"safe": "ppo.gamma=0.9", "dreamer": "dreamer.wm_lr=0.001", "bonus": "learner.lr=0.001"}[engine]
    assert _resume(engine, run, "--set", key) == 2
    assert f"config key {key.split('=')[0]!r} cannot change on resume" in capsys.readouterr().err
    assert _files(run) == before
    assert _resume(engine, run, "--set", f"total_steps={2 * end}") == 0
    assert STEP[engine](load_checkpoint(run / "checkpoints/last.pt")) == 2 * end
    assert read_metrics(run)[-1]["step"] == 2 * end
    assert json.loads((run / "config.json").read_text())["config"]["total_steps"] == 2 * end


def test_safe_resumed_metrics_file_is_the_straight_runs_and_a_cut_row_is_dropped(tmp_path, capsys):
    """One line ending (\\n) everywhere; a row cut mid-write (a killed process) is dropped on resume, and said."""
    assert _train(SAFE, tmp_path / "straight") == 0
    assert _train(SAFE, tmp_path / "part", "--stop-after-epochs", "2") == 0
    with open(tmp_path / "part/metrics.csv", "ab") as f:
        f.write(b"3000.0,0.5,0.1")  # the start of epoch 3's row, then the process died
    capsys.readouterr()
    assert _resume("safe", tmp_path / "part") == 0
    assert "its last row was cut mid-write" in capsys.readouterr().err
    straight, part = ((tmp_path / r / "metrics.csv").read_bytes() for r in ("straight", "part"))
    assert b"\r" not in straight and b"\r" not in part
    assert _no_time(part) == _no_time(straight) and len(_no_time(part)) == 6  # header, 4 rows, final ""


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_plots_false_draws_nothing_and_plot_draws_the_curves_later(tmp_path, engine):
    run = tmp_path / "run"
    stop = {"safe": "--stop-after-epochs", "bonus": "--stop-after-updates", "dreamer": "--stop-after-steps"}[engine]
    assert _train(ENGINES[engine], run, "--set", "plots=false", stop, "2" if engine != "dreamer" else "32") == 0
    assert not list(run.rglob("*.png"))
    assert cli.main(["plot", str(run)]) == 0 and list((run / "plots").glob("*.png"))


# ----------------------------------------------------------------------------------------------- 3. lock
_HOLD = "import sys, time; from rlspec.runs.rundir import lock; f = lock(sys.argv[1]); print('held', flush=True); " \
        "time.sleep(120)"


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holder_leaves_no_lock(tmp_path, capsys, engine):
    run = tmp_path / "run"
    assert _train(ENGINES[engine], run, *{"safe": ["--stop-after-epochs", "2"], "bonus": ["--stop-after-updates", "2"],
                                          "dreamer": ["--stop-after-steps", "16"]}[engine]) == 0
    before = _files(run)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert _resume(engine, run) == 2
        assert f"in use by process {holder.pid}" in capsys.readouterr().err
        assert _train(ENGINES[engine], run) == 2  # a fresh run into it too
        assert {k: v for k, v in _files(run).items() if k.name != ".lock"} == {
            k: v for k, v in before.items() if k.name != ".lock"}
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert _resume(engine, run) == 0  # kill -9 left no stale lock


# ------------------------------------------------------------------------------------------ 4. validation
@pytest.mark.parametrize("engine,setting", [
    ("safe", "ppo.gamma=2"), ("safe", "ppo.batch_size=0"), ("safe", "ppo.update_iters=0"),
    ("safe", "ppo.actor_lr=nan"), ("bonus", "learner.epochs=0"), ("bonus", "learner.minibatches=100000"),
    ("bonus", "learner.lr=nan")])  # (Dreamer's validate already named each bad value: no case here)
def test_a_bad_setting_is_refused_by_name_before_anything_is_created(tmp_path, capsys, engine, setting):
    key, _, value = setting.partition("=")
    assert _train(ENGINES[engine], tmp_path / "run", "--set", setting) == 2
    err = capsys.readouterr().err
    assert f"config key {key!r}: expected" in err and value in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("engine,unit,shorthand", [("safe", "epochs", ["--algo", "PPO"]),
                                                   ("dreamer", "steps", ["--execution", "device"]),
                                                   ("bonus", "updates", ["--ablation", "queue"])])
def test_the_front_end_refuses_a_zero_stop_and_shorthands_on_resume(tmp_path, capsys, engine, unit, shorthand):
    """Every engine's `rlspec train` (one front end): --stop-after-<unit> 0 is refused by name before anything is
    created; --resume with a shorthand, a preset or --out is refused naming what it takes none of."""
    assert _train(ENGINES[engine], tmp_path / "run", f"--stop-after-{unit}", "0") == 2
    err = capsys.readouterr().err
    assert f"--stop-after-{unit}: expected an int >= 1, got 0" in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()
    assert cli.main(["train", engine, "--resume", str(tmp_path / "run"), *shorthand]) == 2
    err = capsys.readouterr().err
    assert "--resume continues a run with its own config.json: give no" in err and shorthand[0] in err, err
    assert not (tmp_path / "run").exists()


def test_an_unknown_env_is_refused_by_name_before_anything_is_created(tmp_path, capsys):
    """Not 'Safety-Gymnasium is not installed' after a traceback: the key, the id, and what would provide it."""
    assert _train(SAFE, tmp_path / "run", "--env", "Nope-v0") == 2
    err = capsys.readouterr().err
    assert "config key 'env_id' (--env): 'Nope-v0' is not" in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("again", [[], ["--resume"]])
def test_a_run_stopped_before_its_first_checkpoint_can_be_run_again(tmp_path, monkeypatch, capsys, again):
    """Ctrl-C in epoch 1 leaves config.json and no checkpoint: the same command, or --resume, starts afresh."""
    real = safe.update
    monkeypatch.setattr(safe, "update", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert _train(SAFE, tmp_path / "run") == 130
    assert (tmp_path / "run/config.json").is_file() and not (tmp_path / "run/checkpoints").exists()
    monkeypatch.setattr(safe, "update", real)
    code = _resume("safe", tmp_path / "run") if again else _train(SAFE, tmp_path / "run")
    assert code == 0 and "starting afresh" in capsys.readouterr().err
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [1000, 2000, 3000, 4000]


def test_a_plugin_that_raises_stops_the_run_naming_it_and_the_same_command_runs_again(tmp_path, capsys):
    """A user's plug-in whose reward() raises on the first step: exit 3, one line naming the plug-in, the
    function and its error; no checkpoint yet, so the same command starts afresh (and stops the same way)."""
    from rlspec.envs.room import pyboy_room

    plugin = tmp_path / "raises.py"
    plugin.write_text("def reward(memory):\n    raise RuntimeError('no such address')\n\n"
                      "def done(memory):\n    return False\n")
    argv = [*DREAMER, "--env", "pyboy", "--rom", str(pyboy_room.ROM), "--plugin", str(plugin)]
    for attempt in range(2):
        assert _train(argv, tmp_path / "run") == 3
        err = capsys.readouterr().err
        assert f"plug-in {plugin}: reward() raised RuntimeError: no such address" in err, err
        assert "Traceback" not in err and "--resume" not in err.split("stopped:")[0], err


# ------------------------------------------------------------------------------------------------ 5. Ctrl-C
@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_ctrl_c_exits_130_saying_how_to_resume_and_keeps_the_checkpoint(tmp_path, monkeypatch, capsys, engine):
    """Ctrl-C in the update after the second checkpoint's step; then --resume finishes the run."""
    module, name, calls = {"safe": (safe, "update", 2), "bonus": (bonus_local, "ppo_vtrace_update", 2),
                           "dreamer": (dreamer, "train_step", 20)}[engine]
    real = getattr(module, name)
    _poison_after(monkeypatch, module, name, calls, lambda a, m: (_ for _ in ()).throw(KeyboardInterrupt))
    run = tmp_path / "run"
    code, err = _train(ENGINES[engine], run), capsys.readouterr().err
    kept = STEP[engine](load_checkpoint(run / "checkpoints/last.pt"))
    assert code == 130 and "Traceback" not in err and f"resume with --resume {run}" in err, err
    assert f"interrupted at step {kept}" in err or f"checkpoint at step {kept}" in err, err
    monkeypatch.setattr(module, name, real)
    assert _resume(engine, run) == 0


def _sigint_default() -> None:
    """In the child before exec: SIGINT as a terminal delivers it. A shell's background job starts with SIGINT
    ignored, and Python keeps an ignored SIGINT ignored, so a suite run in the background would wait forever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_a_training_process_ends_it_like_ctrl_c_without_a_traceback(tmp_path, signum):
    """SIGINT, SIGTERM (a scheduler's preemption) and SIGHUP (a closed terminal) alike: one line saying how to
    resume, exit 128 + the signal, the last checkpoint kept, no unfinished write left behind."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "rlspec.cli", *SAFE, "--out", str(run), "--set",
                             "total_steps=1000000"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_default)
    deadline = time.monotonic() + 240
    while not (run / "checkpoints/last.pt").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.kill(proc.pid, signum)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 128 + signum and "interrupted at step" in err and "Traceback" not in err, err
    assert load_checkpoint(run / "checkpoints/last.pt")["step"] >= 1000
    assert not [p for p in run.rglob("*.tmp")], sorted(run.rglob("*"))


def test_resume_removes_a_write_that_a_killed_process_left_unfinished(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(SAFE, run, "--stop-after-epochs", "2") == 0
    debris = run / "checkpoints" / ".last.pt.abc123.tmp"  # what SIGKILL during a checkpoint write leaves
    debris.write_bytes(b"half a checkpoint")
    assert _resume("safe", run) == 0
    assert not debris.exists() and f"removed {debris}" in capsys.readouterr().err


# ----------------------------------------------------------------------------- damaged files, eval input
@pytest.mark.parametrize("engine", ["safe", "bonus"])
def test_damaged_checkpoint_or_config_and_another_engine_are_clear_errors_that_change_nothing(tmp_path, capsys,
                                                                                               engine):
    run = tmp_path / "run"
    assert _train(ENGINES[engine], run, *{"safe": ["--stop-after-epochs", "1"],
                                          "bonus": ["--stop-after-updates", "2"]}[engine]) == 0
    ckpt = (run / "checkpoints/last.pt").read_bytes()
    (run / "checkpoints/last.pt").write_bytes(ckpt[:3000])  # truncated
    before = {k: v for k, v in _files(run).items() if k.name != ".lock"}
    capsys.readouterr()
    assert _resume(engine, run) == 2 and cli.main(["eval", str(run), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("is corrupted or not an rlspec checkpoint") == 2 and "nothing was changed" in err, err
    (run / "checkpoints/last.pt").write_bytes(ckpt)
    other = "bonus" if engine == "safe" else "safe"
    assert _resume(other, run) == 2
    assert f"is a run of engine {engine!r}, not {other!r}: use rlspec train {engine} --resume" in capsys.readouterr().err
    config = (run / "config.json").read_bytes()
    (run / "config.json").write_bytes(config[:20])  # cut mid-write by hand
    assert _resume(engine, run) == 2 and "config.json is damaged" in capsys.readouterr().err
    (run / "config.json").write_bytes(config)
    assert {k: v for k, v in _files(run).items() if k.name != ".lock"} == {
        **before, run.joinpath("checkpoints/last.pt").relative_to(run): ckpt}
    with pytest.raises(SystemExit) as stop:
        cli.main(["eval", str(run), "--episodes", "0"])
    assert stop.value.code == 2 and "--episodes: expected an int >= 1, got 0" in capsys.readouterr().err


def test_a_safe_run_reports_progress_from_its_first_row(tmp_path, capsys):
    argv = [a for a in SAFE if a != "--quiet"]
    assert _train(argv, tmp_path / "run") == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("started (4000 env steps in all)")
    assert lines[1].startswith("1000/4000 (25%)"), lines  # the first metrics row, not the second


@pytest.mark.parametrize("engine", ["safe"])  # every engine loads through rundir.load_checkpoint
def test_a_checkpoint_copied_in_from_another_run_is_refused(tmp_path, capsys, engine):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _train(ENGINES[engine], a) == 0 and _train(ENGINES[engine], b) == 0
    (b / "checkpoints/last.pt").write_bytes((a / "checkpoints/last.pt").read_bytes())
    before = _files(b)
    assert _resume(engine, b, "--set", "total_steps=100000") == 2
    err = capsys.readouterr().err
    assert "belongs to another run" in err and "Traceback" not in err, err
    assert {k: v for k, v in _files(b).items() if k.name != ".lock"} == {
        k: v for k, v in before.items() if k.name != ".lock"}


def test_eval_reports_each_episode(tmp_path, capsys):
    assert _train(SAFE, tmp_path / "run") == 0
    capsys.readouterr()
    assert cli.main(["eval", str(tmp_path / "run"), "--episodes", "2"]) == 0
    assert capsys.readouterr().err.splitlines()[-2:] == ["eval: 1/2 episodes", "eval: 2/2 episodes"]


@pytest.mark.parametrize("engine", ["safe", "bonus"])
def test_eval_names_its_checkpoint_and_seed_and_refuses_a_bad_seed_or_video_before_any_episode(
        tmp_path, capsys, monkeypatch, engine):
    run = tmp_path / "run"
    stop = {"safe": ["--stop-after-epochs", "1"], "bonus": ["--stop-after-updates", "2"]}[engine]
    assert _train(ENGINES[engine], run, *stop) == 0
    step = STEP[engine](load_checkpoint(run / "checkpoints/last.pt"))
    assert cli.main(["eval", str(run), "--episodes", "1", "--seed", "7"]) == 0
    result = json.loads((run / "eval/eval.json").read_text())
    assert (result["checkpoint_step"], result["seed"]) == (step, 7)
    assert cli.main(["eval", str(run), "--episodes", "1", "--seed", "7"]) == 0  # the seed decides the episodes
    assert json.loads((run / "eval/eval.json").read_text()) == result
    (run / "eval/eval.json").unlink()
    for argv, says in ((["--seed", "-5"], "--seed: expected an int in [0, 2**32), got -5"),
                       (["--seed", str(2**32)], f"--seed: expected an int in [0, 2**32), got {2**32}")):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["eval", str(run), *argv])
        assert stopped.value.code == 2 and says in capsys.readouterr().err
    if engine == "safe":  # the engine with --video here; imageio made absent: refused before an episode runs
        from rlspec.runs import shell

        real = shell.importlib.util.find_spec
        monkeypatch.setattr(shell.importlib.util, "find_spec", lambda m, *a: None if m == "imageio" else real(m, *a))
        with pytest.raises(SystemExit) as stopped:
            cli.main(["eval", str(run), "--video"])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and "--video needs imageio and imageio-ffmpeg" in err
        assert "eval: 1/" not in err
    assert not (run / "eval/eval.json").exists()


@pytest.mark.parametrize("verb", ["eval", "plot"])
def test_eval_and_plot_of_a_damaged_or_missing_run_say_so(tmp_path, capsys, verb):
    run = tmp_path / "run"
    run.mkdir()
    assert cli.main([verb, str(run)]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    (run / "config.json").write_text('{"engine": "safe", "conf')
    assert cli.main([verb, str(run)]) == 2
    err = capsys.readouterr().err
    assert "is damaged (JSONDecodeError" in err and "Traceback" not in err, err
    (run / "config.json").write_text('{"engine": "nope", "config": {}}')
    assert cli.main([verb, str(run)]) == 2
    assert "names engine 'nope'" in capsys.readouterr().err


def test_a_full_disk_stops_the_run_in_one_line_saying_what_is_kept(tmp_path, monkeypatch, capsys):
    """ENOSPC while the run writes (its third checkpoint): exit 3, one line naming the error and the file, the
    last clean checkpoint kept and resumable once there is room."""
    import errno

    from rlspec.runs import rundir

    real, calls = rundir.save_checkpoint, []

    def full(path, state):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, state)

    monkeypatch.setattr(rundir, "save_checkpoint", full)
    run = tmp_path / "run"
    code, err = _train(ENGINES["safe"], run), capsys.readouterr().err
    assert code == 3 and "No space left on device" in err and f"({run / 'checkpoints/last.pt'})" in err, err
    assert "the last clean checkpoint (step 2000) is kept" in err and "Traceback" not in err, err
    assert "\n" not in err.strip() and STEP["safe"](load_checkpoint(run / "checkpoints/last.pt")) == 2000
    monkeypatch.setattr(rundir, "save_checkpoint", real)
    assert _resume("safe", run) == 0


def test_a_full_disk_under_any_other_verb_is_one_line(tmp_path, monkeypatch, capsys):
    """`rlspec eval` (or report, plot) on a full disk: exit 3 and one line naming the file, no traceback; an
    error that is not about writing still raises."""
    import errno

    from rlspec.runs import shell

    run = tmp_path / "run"
    assert _train(ENGINES["safe"], run, "--stop-after-epochs", "1") == 0

    def full(run_dir, *args):
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir / "eval/eval.json"))

    monkeypatch.setattr(shell, "write_eval", full)
    capsys.readouterr()
    assert cli.main(["eval", str(run), "--episodes", "1"]) == 3
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (f"rlspec: could not write: No space left on device "
                                            f"({run / 'eval/eval.json'}); what was written before is kept"), err
    assert "Traceback" not in err
    monkeypatch.setattr(shell, "write_eval", lambda *a: (_ for _ in ()).throw(OSError(errno.EBADF, "bad")))
    with pytest.raises(OSError, match="bad"):
        cli.main(["eval", str(run), "--episodes", "1"])


def test_a_sigterm_a_library_re_raises_as_a_plain_keyboard_interrupt_still_ends_with_143(capsys):
    """Ray's ray.get turns a signal handler's exception into a plain KeyboardInterrupt: the run still ends as a
    SIGTERM (143, said), not as a Ctrl-C; the next run's Ctrl-C is a Ctrl-C again."""
    from rlspec.runs import faults

    def work():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
        except faults.Terminated:
            raise KeyboardInterrupt from None  # what ray.get does with it

    assert faults.outcome("rlspec train x", work) == 143
    assert capsys.readouterr().err.strip() == ("rlspec train x: interrupted before the run began; nothing was "
                                               "written (SIGTERM)")

    def ctrl_c():
        raise KeyboardInterrupt

    assert faults.outcome("rlspec train x", ctrl_c) == 130
