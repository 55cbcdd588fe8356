"""Copy the small files the benchmark summaries read out of run folders into a folder that is committed, so a
machine reset costs no finished seed of a long benchmark (a safe-RL seed is ~40 min of CPU here):

    python tests/bench/keep_runs.py runs/safe-cmp50 docs/bench/runs/safe-cmp50 [--finished-at 200000]
    python tests/bench/keep_runs.py runs/omnisafe docs/bench/runs/omnisafe --finished-at 200000

A run is any folder holding metrics.csv (rlspec) or progress.csv (OmniSafe, SB3); its relative path is kept, and
of it only KEEP: the metrics, the config, the evaluations and the timing files. Checkpoints, TensorBoard events
and plots stay behind. An unfinished run is copied as far as it got (the summaries leave unfinished runs out)
and overwritten when it is kept again; with ``--finished-at STEPS`` only runs whose last logged env step
reached STEPS are copied (read as the summaries read them, rlspec.evidence.evaluation.read_run), and the
others are named. The summaries (safe_vs_omnisafe.py, bonus_vs_sb3.py, ...) read the kept
folder as they read the original.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

MARKERS = ("metrics.csv", "progress.csv")
KEEP = (*MARKERS, "config.json", "eval/eval.json", "greedy.json", "bench_time.json", "versions.json")


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
    runs = sorted({p.parent for name in MARKERS for p in src.rglob(name)})
    if finished_at is not None:
        for run in [r for r in runs if not finished(r, finished_at)]:
            print(f"not kept (short of {finished_at} env steps): {run}")
            runs.remove(run)
    copied = []
    for run in runs:
        for name in KEEP:
            if (run / name).is_file():
                target = dst / run.relative_to(src) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(run / name, target)
                copied.append(target)
    return copied


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", type=Path, help="a folder of runs (searched recursively)")
    p.add_argument("dst", type=Path, help="where the kept files go (committed)")
    p.add_argument("--finished-at", type=int, metavar="STEPS", help="keep only runs that logged this many env steps")
    args = p.parse_args(argv)
    if not args.src.is_dir():
        print(f"keep_runs: {args.src} is not a folder")
        return 2
    copied = keep(args.src, args.dst, args.finished_at)
    runs = {c.parent if c.parent.name != "eval" else c.parent.parent for c in copied}
    print(f"kept {len(copied)} files of {len(runs)} runs under {args.dst}")
    return 0 if copied else 1


if __name__ == "__main__":
    raise SystemExit(main())
