"""Nothing a user owns is overwritten (rlspec/runs/rundir.py): a new run starts only in a new or empty folder or
in a run directory with nothing to lose (or a folder a process was killed in before its config); --resume
without a checkpoint starts again from step 0 and writes the same rows; a config.json
edited by hand since the checkpoint is refused by key; a resumed run whose history files are gone says so. Every
refusal is exit 2 with the folder byte for byte as it was."""

from __future__ import annotations

import json

from rlspec import cli

SAFE = ["train", "safe", "--algo", "PPOLag", "--env", "ToyGoal-v0", "--preset", "smoke", "--quiet"]  # 4 × 1000 steps


def _files(folder) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _train(out, *extra) -> int:
    return cli.main([*SAFE, "--out", str(out), *extra])


def _resume(out, *extra) -> int:
    return cli.main(["train", "safe", "--quiet", "--resume", str(out), *extra])


def test_a_new_run_never_overwrites_a_folder_that_is_not_an_empty_run_of_its_own(tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "config.json").write_text('{"learning_rate": 3e-4}')  # someone else's config.json
    (theirs / "tb").mkdir()
    (theirs / "tb" / "events.out").write_bytes(b"their events")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for folder, says in ((theirs, "holds no run of rlspec's"), (notes, "holds no run of rlspec's"),
                         (a_file, "is a file, not a folder")):
        before = _files(folder) if folder.is_dir() else folder.read_bytes()
        assert _train(folder) == 2
        assert says in capsys.readouterr().err
        assert (_files(folder) if folder.is_dir() else folder.read_bytes()) == before  # not even a .lock


def test_a_run_that_lost_its_config_keeps_its_checkpoint_and_resume_without_checkpoint_keeps_its_rows(tmp_path,
                                                                                                     capsys):
    run = tmp_path / "run"
    assert _train(run, "--stop-after-epochs", "2") == 0
    (run / "config.json").unlink()
    before = _files(run)
    assert _train(run) == 2 and "holds no run of rlspec's" in capsys.readouterr().err
    assert _files(run) == before  # the checkpoint was not overwritten

    other = tmp_path / "other"
    assert _train(other, "--stop-after-epochs", "2") == 0
    (other / "checkpoints" / "last.pt").unlink()
    before = _files(other)
    assert _train(other) == 2  # a new run there would lose the rows
    assert "2 metric rows and no checkpoint" in capsys.readouterr().err
    assert _files(other) == before
    rows = (other / "metrics.csv").read_bytes()
    assert _resume(other, "--stop-after-epochs", "2") == 0  # --resume: from step 0, the same rows again
    assert "no checkpoint" in capsys.readouterr().err and (other / "checkpoints" / "last.pt").is_file()
    assert _no_time(other / "metrics.csv") == _no_time_bytes(rows)


def _no_time_bytes(data: bytes) -> list[list[bytes]]:
    """metrics.csv's rows without the wall-clock columns (Time/*, Memory/*)."""
    lines = [line.split(b",") for line in data.split(b"\n")]
    keep = [i for i, k in enumerate(lines[0]) if not k.startswith((b"Time/", b"Memory/"))]
    return [[f[i] for i in keep if i < len(f)] for f in lines]


def _no_time(file) -> list[list[bytes]]:
    return _no_time_bytes(file.read_bytes())


def test_a_folder_a_process_was_killed_in_before_its_config_holds_nothing_to_lose(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text("12345\n")  # killed between taking the lock and writing config.json
    (run / ".config.json.12345.tmp").write_bytes(b'{"eng')
    assert _train(run, "--stop-after-epochs", "1") == 0
    assert not (run / ".config.json.12345.tmp").exists() and (run / "checkpoints" / "last.pt").is_file()


def test_a_hand_edited_config_is_refused_by_key_and_lost_history_is_said(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(run, "--stop-after-epochs", "2") == 0
    config = json.loads((run / "config.json").read_text())
    edited = json.loads(json.dumps(config))
    edited["config"]["ppo"]["entropy_coef"] = 0.5
    (run / "config.json").write_text(json.dumps(edited))
    before = _files(run)
    assert _resume(run) == 2
    err = capsys.readouterr().err
    assert "config key 'ppo.entropy_coef' is 0.5, but the run's checkpoint was made with 0.0" in err, err
    assert _files(run) == before
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.csv").unlink()
    assert _resume(run) == 0
    assert "metrics.csv missing: the history before step 2000 is lost" in capsys.readouterr().err
