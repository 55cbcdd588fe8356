"""rlspec.runs.rundir: run directory files, atomic checkpoints, resume truncation, plots."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from rlspec.runs import rundir
from rlspec.runs.plots import Panel, draw
from rlspec.runs.rundir import RunDir, load_checkpoint, read_metrics, save_checkpoint


def test_run_directory_files(tmp_path):
    run = RunDir(tmp_path / "r", "toy", {"seed": 1}, extra_versions={"env": "1.0"})
    run.log(10, {"Metrics/EpRet": 1.0})
    run.log(20, {"Metrics/EpRet": 2.0, "Metrics/EpCost": 3.0})  # a new key rewrites the header
    run.save(20, {"v": 1}, {})
    run.close()
    written = json.loads((tmp_path / "r/config.json").read_text())
    assert written == {"engine": "toy", "run_id": written["run_id"], "config": {"seed": 1}}
    assert len(written["run_id"]) == 32 and int(written["run_id"], 16) >= 0  # a fresh id per run
    v = json.loads((tmp_path / "r/versions.json").read_text())
    assert v["torch"] == torch.__version__ and v["env"] == "1.0" and v["rlspec_commit"]
    rows = read_metrics(tmp_path / "r")
    assert rows[0]["Metrics/EpRet"] == 1.0 and math.isnan(rows[0]["Metrics/EpCost"])
    assert rows[1]["Metrics/EpCost"] == 3.0
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "r/tb").iterdir())
    with pytest.raises(FileExistsError, match="--resume"):
        RunDir(tmp_path / "r", "toy", {})


def test_resume_truncates_metrics_after_the_checkpoint(tmp_path):
    run = RunDir(tmp_path, "toy", {})
    for step in (1, 2, 3):
        run.log(step, {"x": float(step)})
    run.close()
    again = RunDir(tmp_path, "toy", {}, resume_step=2)
    again.log(3, {"x": 30.0})
    again.close()
    assert [(r["step"], r["x"]) for r in read_metrics(tmp_path)] == [(1, 1), (2, 2), (3, 30)]


def test_checkpoint_round_trip_keeps_rng_and_objects(tmp_path):
    gen = torch.Generator().manual_seed(3)
    net = torch.nn.Linear(2, 2)
    state = {"net": net.state_dict(), "gen": gen.get_state(), "obj": {"deque": [1, 2]}}
    save_checkpoint(tmp_path / "c/last.pt", state)
    back = load_checkpoint(tmp_path / "c/last.pt")
    g2 = torch.Generator()
    g2.set_state(back["gen"])
    assert torch.equal(torch.rand(3, generator=g2), torch.rand(3, generator=gen))
    assert torch.equal(back["net"]["weight"], net.weight.detach()) and back["obj"] == {"deque": [1, 2]}
    assert os.listdir(tmp_path / "c") == ["last.pt"]  # no temporary file left behind


def test_checkpoint_is_atomic_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"v": 1})

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(rundir.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"v": 2})
    assert load_checkpoint(path) == {"v": 1}  # the old checkpoint, whole
    assert os.listdir(tmp_path) == ["last.pt"]
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_plots_draw_limit_line(tmp_path):
    run = RunDir(tmp_path, "toy", {})
    for step in range(3):
        run.log(step, {"Metrics/EpCost": float(step)})
    run.close()
    files = draw(tmp_path, [Panel("Metrics/EpCost", "cost.png", hlines={"cost limit": 25.0}),
                            Panel("Metrics/Missing", "none.png")])
    assert [f.name for f in files] == ["cost.png"] and files[0].stat().st_size > 1000


def test_progress_speaks_at_the_start_and_at_the_first_row():
    """No silent first epoch: a line when the run starts and one for its first metrics row at once (steps/s
    from the second row on), then at most one a second unless forced."""
    import io

    from rlspec.runs.rundir import Progress

    out = io.StringIO()
    bar = Progress(4000, stream=out, every_s=3600)
    assert out.getvalue() == "started (4000 env steps in all); a line per metrics row from the first one on\n"
    bar.update(1000, {"EpRet": 1.5})
    assert out.getvalue().splitlines()[1] == "1000/4000 (25%)  … steps/s  EpRet 1.5"
    bar.update(2000, {"EpRet": 2.0})  # within every_s: nothing
    assert len(out.getvalue().splitlines()) == 2
    bar.update(3000, {"EpRet": 2.5}, force=True)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("3000/4000 (75%)  ") and last.endswith(" steps/s  EpRet 2.5") and "…" not in last


def test_progress_shows_its_keys_by_their_last_name_and_nothing_when_off():
    import io

    from rlspec.runs.rundir import Progress

    out = io.StringIO()
    bar = Progress(100, ("Metrics/EpRet", "pairs/queue", "Metrics/EpCost"), stream=out)
    bar.update(50, {"Metrics/EpCost": 3.0, "Loss/loss": 9.0, "Metrics/EpRet": 1.5})  # queue missing: left out
    assert out.getvalue().splitlines()[-1] == "50/100 (50%)  … steps/s  EpRet 1.5  EpCost 3"
    quiet = io.StringIO()
    off = Progress(100, ("Metrics/EpRet",), on=False, stream=quiet)
    off.update(50, {"Metrics/EpRet": 1.5}, force=True)
    off.close()
    assert quiet.getvalue() == ""
