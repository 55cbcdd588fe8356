"""Copy the small files the benchmark summaries read out of run folders into a folder that is committed, so a
machine reset costs no finished seed of a long benchmark (a safe-RL seed is ~40 min of CPU here):

    python -m rlspec.evidence.keep_runs runs/safe-cmp50 benchmarks/runs/safe-cmp50 [--finished-at 200000]
    python -m rlspec.evidence.keep_runs runs/omnisafe benchmarks/runs/safe_vs_omnisafe/omnisafe --finished-at 200000 \
        --manifest benchmarks/runs/MANIFEST.json --command "nox -s bench_omnisafe -- --algos PPOLag --seeds 0"

A run is any folder holding metrics.csv (rlspec) or progress.csv (OmniSafe, SB3), or a sheeprl seed: a folder
holding greedy.json or greedy_cells.json with TensorBoard events below it (its chunks' version_N/ folders). Its
relative path is kept, and of it only KEEP: the metrics, the config, the evaluations and the timing files, and
a sheeprl seed's event files at their relative paths. Checkpoints, TensorBoard events
and plots stay behind. An unfinished run is copied as far as it got (the summaries leave unfinished runs out)
and overwritten when it is kept again; with ``--finished-at STEPS`` only runs whose last logged env step
reached STEPS are copied (read as the summaries read them, rlspec.evidence.evaluation.read_run), and the
others are named. An anchor runner's settings file at the top of SRC (SETTINGS) is kept beside the runs.
The summaries (benchmarks.safe.vs_omnisafe, benchmarks.bonus.vs_sb3, ...) read the kept folder as they read
the original.

``--manifest FILE --command TEXT`` records each kept run (and settings file) in FILE, the kept runs' manifest:
per entry the folder (relative to FILE's), each file's sha256, the command that made it and the rlspec commit
it ran at (the run's versions.json ``rlspec_commit`` where it has one, else the checkout's HEAD when kept,
``commit_from`` says which). tests/benchmarks/test_kept_runs.py checks the committed manifest against the
files as tests/golden checks fixtures/MANIFEST.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

MARKERS = ("metrics.csv", "progress.csv")
GREEDY = ("greedy.json", "greedy_cells.json")  # a sheeprl seed's evaluations (with events below them)
EVENTS = "events.out.tfevents.*"  # TensorBoard's event files: a sheeprl seed's curve
KEEP = (*MARKERS, *GREEDY, "config.json", "eval/eval.json", "bench_time.json", "chunks.json", "versions.json")
SETTINGS = ("omnisafe_safe.json", "sb3_safe.json", "sb3_metaworld.json", "sheeprl_room.json")  # the anchors' runners'


def runs_under(src: Path) -> list[Path]:
    """The run folders under ``src`` (module docstring)."""
    marked = {p.parent for name in MARKERS for p in src.rglob(name)}
    seeds = {p.parent for name in GREEDY for p in src.rglob(name)
             if p.parent not in marked and next(p.parent.rglob(EVENTS), None) is not None}
    return sorted(marked | seeds)


def files_of(run: Path) -> list[str]:
    """What is kept of ``run``: KEEP where it exists, and its event files where it has no metrics of its own."""
    names = [n for n in KEEP if (run / n).is_file()]
    if not any((run / m).is_file() for m in MARKERS):
        names += sorted(p.relative_to(run).as_posix() for p in run.rglob(EVENTS))
    return names


def finished(run: Path, steps: int) -> bool:
    """Whether ``run``'s last logged env step reached ``steps`` (False for a run the readers cannot read)."""
    from rlspec.evidence.evaluation import EvaluationError, read_run

    try:
        curve = read_run(run)
    except EvaluationError:
        return False
    return bool(curve.steps.size) and curve.steps[-1] >= steps


def keep(src: Path, dst: Path, finished_at: int | None = None) -> list[Path]:
    """Copy KEEP of every run under ``src`` (of those that reached ``finished_at`` env steps, if given; the others
    are named on stdout) to the same relative path under ``dst``; returns the copies."""
    runs = runs_under(src)
    if finished_at is not None:
        for run in [r for r in runs if not finished(r, finished_at)]:
            print(f"not kept (short of {finished_at} env steps): {run}")
            runs.remove(run)
    copied = []
    for run, names in [*((r, files_of(r)) for r in runs), (src, SETTINGS if runs else ())]:
        for name in names:
            if (run / name).is_file():
                target = dst / run.relative_to(src) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(run / name, target)
                copied.append(target)
    return copied


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kept_folder(copy: Path) -> Path:
    """The run (or settings) folder a kept file belongs to: the nearest folder above it holding a run's marker,
    its evaluations or a settings file (eval/eval.json and a sheeprl chunk's version_N/ events belong to the
    run above them)."""
    for folder in copy.parents:
        if any((folder / n).is_file() for n in (*MARKERS, *GREEDY, *SETTINGS)):
            return folder
    return copy.parent


def read_manifest(path: Path) -> dict[str, dict]:
    """The manifest's entries by folder (relative to the manifest's); {} where there is none yet."""
    return {e["path"]: e for e in json.loads(path.read_text())["entries"]} if path.is_file() else {}


def _commit(folder: Path) -> tuple[str, str]:
    versions = folder / "versions.json"
    if versions.is_file() and json.loads(versions.read_text()).get("rlspec_commit"):
        return json.loads(versions.read_text())["rlspec_commit"], "versions.json"
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=folder)
    return (head.stdout.strip() or "unknown"), "HEAD when kept"


def record(manifest: Path, copied: list[Path], command: str) -> None:
    """Enter each kept folder of ``copied`` in ``manifest`` (replacing its earlier entry), files and hashes
    as they are now; the other entries are kept as they were."""
    root = manifest.parent.resolve()
    entries = read_manifest(manifest)
    for folder in sorted({kept_folder(c) for c in copied}):
        files = sorted(c for c in copied if kept_folder(c) == folder)
        commit, source = _commit(folder)
        entries[folder.resolve().relative_to(root).as_posix()] = {
            "path": folder.resolve().relative_to(root).as_posix(), "command": command, "commit": commit,
            "commit_from": source, "files": {c.relative_to(folder).as_posix(): sha256(c) for c in files}}
    manifest.write_text(json.dumps({"entries": [entries[k] for k in sorted(entries)]}, indent=1,
                                   ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="a folder of runs (searched recursively)")
    p.add_argument("dst", type=Path, help="where the kept files go (committed)")
    p.add_argument("--finished-at", type=int, metavar="STEPS", help="keep only runs that logged this many env steps")
    p.add_argument("--manifest", type=Path, help="the kept runs' manifest to record each kept run in (with --command)")
    p.add_argument("--command", help="the command that made the runs, as the manifest records it")
    args = p.parse_args(argv)
    if not args.src.strip() or not Path(args.src).is_dir():  # Path("") would be the current folder
        print(f"keep_runs: src {args.src!r} is not a folder")
        return 2
    args.src = Path(args.src)
    if args.dst.resolve().is_relative_to(args.src.resolve()):
        print(f"keep_runs: dst {args.dst} is inside src {args.src}: the runs (the kept ones too) would be copied "
              f"into themselves")
        return 2
    if (args.manifest is None) != (args.command is None):
        print("keep_runs: --manifest and --command go together: the manifest records the command of each run")
        return 2
    if args.manifest and not args.dst.resolve().is_relative_to(args.manifest.parent.resolve()):
        print(f"keep_runs: dst {args.dst} is not under the manifest's folder {args.manifest.parent}")
        return 2
    copied = keep(args.src, args.dst, args.finished_at)
    print(f"kept {len(copied)} files of {len({kept_folder(c) for c in copied})} folders under {args.dst}")
    if copied and args.manifest:
        record(args.manifest, copied, args.command)
        print(f"recorded them in {args.manifest}")
    return 0 if copied else 1


if __name__ == "__main__":
    raise SystemExit(main())
