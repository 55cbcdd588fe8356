"""rlspec/evidence/keep_runs.py: of every run under a folder (rlspec's metrics.csv, OmniSafe's and SB3's
progress.csv) only the files the summaries read are copied, at the same relative path, and the copy reads as
the original."""

from __future__ import annotations

from pathlib import Path

from rlspec.evidence import keep_runs as kr


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_only_the_summaries_files_are_kept_at_their_relative_paths(tmp_path):
    src, dst = tmp_path / "runs", tmp_path / "kept"
    ours = src / "PPOLag-s0"
    write(ours / "metrics.csv", "step,Metrics/EpRet\n4000,1.5\n")
    write(ours / "config.json", '{"engine": "safe"}')
    write(ours / "eval/eval.json", '{"EpRet": 2.0}')
    write(ours / "checkpoints/last.pt", "weights")
    write(ours / "tb/events.out.tfevents.1", "events")
    theirs = src / "PPOLag-{SafetyPointGoal1-v0}/seed-000-2026-11-28"
    write(theirs / "progress.csv", "TotalEnvSteps,Metrics/EpRet\n4000,1.0\n")
    write(theirs / "config.json", '{"algo": "PPOLag"}')
    write(theirs / "torch_save/epoch-50.pt", "weights")
    write(src / "notes.txt", "not a run")
    assert kr.main([str(src), str(dst)]) == 0
    kept = sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
    assert kept == ["PPOLag-s0/config.json", "PPOLag-s0/eval/eval.json", "PPOLag-s0/metrics.csv",
                    "PPOLag-{SafetyPointGoal1-v0}/seed-000-2026-11-28/config.json",
                    "PPOLag-{SafetyPointGoal1-v0}/seed-000-2026-11-28/progress.csv"]
    from rlspec.evidence.evaluation import read_run

    for run in ("PPOLag-s0", "PPOLag-{SafetyPointGoal1-v0}/seed-000-2026-11-28"):
        a, b = read_run(src / run), read_run(dst / run)
        assert (a.group, a.source, a.steps.tolist(), a.values["return"].tolist()) == (
            b.group, b.source, b.steps.tolist(), b.values["return"].tolist())
    write(ours / "metrics.csv", "step,Metrics/EpRet\n4000,1.5\n8000,2.5\n")  # the run went on: kept again
    assert kr.main([str(src), str(dst)]) == 0
    assert (dst / "PPOLag-s0/metrics.csv").read_text().endswith("8000,2.5\n")
    assert kr.main([str(tmp_path / "missing"), str(dst)]) == 2
    # an empty src (a shell variable that was never set) is not the current folder; nor is dst inside src
    assert kr.main(["", str(dst)]) == 2 and kr.main([str(tmp_path), str(tmp_path / "inside")]) == 2
    assert not (tmp_path / "inside").exists()
    assert kr.main([str(tmp_path / "kept/PPOLag-s0/eval"), str(tmp_path / "none")]) == 1  # no run there


def test_finished_at_keeps_only_runs_that_reached_the_steps(tmp_path, capsys):
    src, dst = tmp_path / "runs", tmp_path / "kept"
    for seed, last in ((0, 8000), (1, 4000)):
        write(src / f"PPOLag-s{seed}" / "metrics.csv", f"step,Metrics/EpRet\n4000,1.0\n{last},2.0\n")
        write(src / f"PPOLag-s{seed}" / "config.json", '{"engine": "safe", "config": {"algo": "PPOLag"}}')
    write(src / "PPO-s0" / "progress.csv", "foo,bar\n8000,1.0\n")  # no reader knows its columns
    assert kr.main([str(src), str(dst), "--finished-at", "8000"]) == 0
    assert sorted(p.name for p in dst.iterdir()) == ["PPOLag-s0"]
    out = capsys.readouterr().out
    assert f"not kept (short of 8000 env steps): {src / 'PPOLag-s1'}" in out and str(src / "PPO-s0") in out


def test_the_manifest_records_each_kept_folder_with_its_command_commit_and_hashes(tmp_path, capsys):
    src, kept = tmp_path / "runs", tmp_path / "benchmarks/runs"
    write(src / "PPO-s0/progress.csv", "TotalEnvSteps,Metrics/EpRet\n4000,1.0\n")
    write(src / "PPOLag-s1/metrics.csv", "step,Metrics/EpRet\n4000,1.5\n")
    write(src / "PPOLag-s1/eval/eval.json", '{"EpRet": 2.0}')
    write(src / "PPOLag-s1/versions.json", '{"rlspec_commit": "' + "a" * 40 + '"}')
    write(src / "sb3_safe.json", '{"shared": {}}')
    manifest = kept / "MANIFEST.json"
    write(manifest, '{"entries": [{"path": "other/PPO-s9", "command": "c", "commit": "x", "commit_from": "y", '
                    '"files": {"progress.csv": "0"}}]}')  # an earlier entry: left as it was
    argv = [str(src), str(kept / "cmp"), "--manifest", str(manifest), "--command", "nox -s bench_sb3_safe"]
    assert kr.main(argv) == 0
    entries = kr.read_manifest(manifest)
    assert sorted(entries) == ["cmp", "cmp/PPO-s0", "cmp/PPOLag-s1", "other/PPO-s9"]
    ours = entries["cmp/PPOLag-s1"]
    assert ours["commit"] == "a" * 40 and ours["commit_from"] == "versions.json"
    assert ours["files"] == {"eval/eval.json": kr.sha256(kept / "cmp/PPOLag-s1/eval/eval.json"),
                             "metrics.csv": kr.sha256(kept / "cmp/PPOLag-s1/metrics.csv")} | {
                                 "versions.json": kr.sha256(kept / "cmp/PPOLag-s1/versions.json")}
    assert entries["cmp"]["files"] == {"sb3_safe.json": kr.sha256(src / "sb3_safe.json")}
    assert entries["cmp/PPO-s0"]["commit_from"] == "HEAD when kept" and entries["cmp/PPO-s0"]["command"] == (
        "nox -s bench_sb3_safe")
    assert entries["other/PPO-s9"]["commit"] == "x"
    capsys.readouterr()
    assert kr.main([str(src), str(kept), "--manifest", str(manifest)]) == 2  # no --command: nothing copied
    assert "--manifest and --command go together" in capsys.readouterr().out
    assert kr.main([str(src), str(tmp_path / "elsewhere"), "--manifest", str(manifest), "--command", "c"]) == 2
    assert "is not under the manifest's folder" in capsys.readouterr().out and not (tmp_path / "elsewhere").exists()


def test_a_sheeprl_seed_keeps_its_evaluations_and_every_chunks_events(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from rlspec.evidence.evaluation import read_run

    src, dst, manifest = tmp_path / "runs", tmp_path / "kept", tmp_path / "MANIFEST.json"
    seed = src / "room" / "s0"
    for chunk, steps in enumerate(((256, 512), (768, 1024))):  # two resumed chunks: version_0, version_1
        writer = SummaryWriter(str(seed / f"version_{chunk}"))
        for step in steps:
            writer.add_scalar("Rewards/rew_avg", step / 1024, step)
        writer.close()
        write(seed / f"version_{chunk}" / "checkpoint" / f"ckpt_{steps[-1]}_0.ckpt", "weights")
    write(seed / "greedy_cells.json", '[{"env_steps": 1024, "success": 1.0}]')
    write(seed / "chunks.json", '[{"env_steps": 1024, "wall_s": 1.0}]')
    write(src / "sheeprl_room.json", '{"what": "settings"}')
    assert kr.main([str(src), str(dst), "--finished-at", "1024", "--manifest", str(manifest), "--command", "c"]) == 0
    kept = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file())
    events = [k for k in kept if "tfevents" in k]
    assert [k.split("/")[2] for k in events] == ["version_0", "version_1"] and "checkpoint" not in " ".join(kept)
    assert set(kept) - set(events) == {"room/s0/chunks.json", "room/s0/greedy_cells.json", "sheeprl_room.json"}
    a, b = read_run(seed), read_run(dst / "room" / "s0")
    assert a.steps.tolist() == b.steps.tolist() == [256, 512, 768, 1024]
    assert b.values["return"].tolist() == [0.25, 0.5, 0.75, 1.0]
    folders = sorted(e["path"] for e in kr.read_manifest(manifest).values())
    assert folders == ["kept", "kept/room/s0"]  # the seed is one entry, its chunks' events in it
    assert len(kr.read_manifest(manifest)["kept/room/s0"]["files"]) == 4
