"""A run directory and what is written into it.

```
RUN/config.json      {"engine": ..., "config": {...}}: enough to resume or evaluate the run
RUN/versions.json    python, torch, numpy, rlspec commit, plus what the engine adds (env package versions)
RUN/metrics.csv      one row per logged step; columns are the metric keys (OmniSafe names where they exist)
RUN/tb/              TensorBoard events of the same scalars
RUN/plots/*.png      rlspec.runs.plots
RUN/checkpoints/last.pt   written to a temporary file in the same folder, then renamed (atomic); never with
                          non-finite parameters
RUN/.lock            flock'ed by the process writing the run (released when it ends, however it ends)
```
Resuming truncates metrics.csv (and TensorBoard, through ``purge_step``) after the checkpoint's step, so
a resumed run's files are those of a straight run; a row cut mid-write (a killed process) is dropped, and
said so. Every checkpoint carries the run's config: a config.json edited by hand since is refused by key on
resume (only the RESUMABLE keys may change).

Nothing a user owns is overwritten. A new run starts only in a new or empty folder (or one holding only what a
process killed before writing config.json leaves: the lock and unfinished writes), or in a run directory
(config.json written by rlspec) with nothing to lose: no checkpoint and no metric rows (a run stopped before
its first row starts afresh when run again). Anything else is refused, with nothing changed. A --resume of a run
without a checkpoint starts it again from step 0: a resume drops the rows after its checkpoint, and without one
that is all of them (the restarted run writes them again).
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from rlspec.runs import config as runconfig
from rlspec.runs.faults import (
    AlreadyFinished,
    Diverged,
    Interrupted,
    RunLocked,
    WriteFailed,
    nonfinite_tensors,
    signal_of,
)

CHECKPOINT = "checkpoints/last.pt"
LOCK = ".lock"
RUN_ID = "run_id"  # in config.json and every checkpoint: a checkpoint resumes only the run that wrote it
RUN_CONFIG = "run_config"  # in every checkpoint: the config it was made with
CHECKPOINT_STEP = "checkpoint_step"  # in every checkpoint: the env step it was written at
RESUMABLE = ("total_steps",)  # the config keys --resume may change (to extend a finished run)


def versions(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The versions a result depends on: interpreter, torch, numpy, this checkout's commit, the engine's."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "unknown", ""
    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "rlspec_commit": commit + ("+dirty" if dirty else ""), **(extra or {})}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``: a reader (or a
    crash) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save of ``state`` (models, optimizers, RNG states, algorithm state), atomically."""
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_run(run_dir: Path, cls: type, keys: tuple[str, ...] = ()) -> tuple[Any, dict[str, Any]]:
    """RUN's config (config.json as ``cls``) and last checkpoint (with ``keys``: ``load_checkpoint``)."""
    cfg = runconfig.from_dict(cls, RunDir.read_config(run_dir)["config"])
    return cfg, load_checkpoint(Path(run_dir) / "checkpoints/last.pt", keys)


def load_checkpoint(path: Path, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A checkpoint this package wrote (it holds plain Python objects too: only load your own runs), with
    ``keys``; a ConfigError when it is truncated, foreign or lacks one of them."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch.load's errors on a truncated or foreign file vary (pickle, zip, EOF)
        raise runconfig.ConfigError(f"checkpoint {path} is corrupted or not an rlspec checkpoint "
                                    f"({type(err).__name__}: {err}); nothing was changed") from None
    missing = [k for k in keys if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise runconfig.ConfigError(f"checkpoint {path} is not this engine's checkpoint (lacks {missing}); "
                                    "nothing was changed")
    written_by = ckpt.pop(RUN_ID, None) if isinstance(ckpt, dict) else None  # the state alone goes back
    made_with = ckpt.pop(RUN_CONFIG, None) if isinstance(ckpt, dict) else None
    run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
    owner = _run_id(run_dir) if run_dir is not None else None
    if owner is not None and written_by != owner:
        raise runconfig.ConfigError(f"checkpoint {path} belongs to another run (run id {written_by}; "
                                    f"{run_dir / 'config.json'} says {owner}): a checkpoint copied in "
                                    "from elsewhere is never resumed; nothing was changed")
    if made_with is not None and run_dir is not None:
        _same_config(run_dir, made_with)
    return ckpt


def _same_config(run_dir: Path, made_with: dict[str, Any]) -> None:
    """A ConfigError naming the first key of RUN/config.json, other than the RESUMABLE ones, that differs from the
    config the checkpoint was made with (config.json edited by hand)."""
    try:
        now = json.loads((run_dir / "config.json").read_text())["config"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # read_config says what is wrong with it
    made_with, now = _dotted(made_with), _dotted(now)
    # a key config.json lacks is not an edit: an older engine's config.json (the resume reads it with defaults)
    changed = [k for k in now if k not in RESUMABLE and made_with.get(k) != now[k]]
    if changed:
        k = changed[0]
        raise runconfig.ConfigError(f"{run_dir / 'config.json'}: config key {k!r} is {now.get(k)!r}, but the run's "
                                    f"checkpoint was made with {made_with.get(k)!r}: config.json was edited since; "
                                    f"only {', '.join(RESUMABLE)} can change on resume (--set); nothing was changed")


def _run_id(run_dir: Path) -> str | None:
    """The run id in RUN/config.json (None for a run made before run ids, or no readable config)."""
    try:
        return json.loads((run_dir / "config.json").read_text()).get(RUN_ID)
    except (OSError, ValueError, AttributeError):
        return None


def _dotted(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as {"section.key": value} (the names --set takes)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        out.update(_dotted(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def has_checkpoint(run_dir: Path) -> bool:
    return (Path(run_dir) / CHECKPOINT).is_file()


def is_run_dir(path: Path) -> bool:
    """Whether PATH/config.json was written by rlspec (a dict with the engine's name and its config)."""
    try:
        data = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("engine"), str) and isinstance(data.get("config"), dict)


def claim_for_new_run(path: Path) -> None:
    """Refuse (FileExistsError, nothing changed) to start a new run in PATH unless it is new, empty, or a run
    directory with nothing to lose (no checkpoint, no metric rows)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"--out {path} is a file, not a folder; nothing was changed")
    if not path.exists() or _only_leftovers(path):
        return
    if not is_run_dir(path):
        raise FileExistsError(f"--out {path} is not empty and holds no run of rlspec's (no config.json written by "
                              "rlspec): nothing was changed; give a new or empty folder")
    if has_checkpoint(path):
        raise FileExistsError(f"{path} already holds a run; use --resume {path} to continue it or choose another "
                              "--out; nothing was changed")
    rows = read_metrics(path)
    if rows:
        raise FileExistsError(f"{path} holds a run with {len(rows)} metric rows and no checkpoint to resume from: a "
                              "new run there would lose them; choose another --out (or delete it yourself); nothing "
                              "was changed")


def _only_leftovers(path: Path) -> bool:
    """PATH holds nothing, or only what a process killed before it wrote config.json leaves: the lock and
    unfinished atomic writes (.NAME.PID.tmp)."""
    return all(p.is_file() and (p.name == LOCK or (p.name.startswith(".") and p.name.endswith(".tmp")))
               for p in path.iterdir())


def check_resumable(path: Path) -> bool:
    """For --resume PATH: True to resume from its checkpoint; False when it has none: it starts again from step 0
    with its own config, and the metric rows no checkpoint covers are dropped (under the run's lock), and said."""
    path = Path(path)
    if not is_run_dir(path):
        RunDir.read_config(path)  # says why it is not one (no config.json, or a damaged one)
    if has_checkpoint(path):
        return True
    held = lock(path)
    try:
        rows = read_metrics(path)
        if rows:
            print(f"rlspec: --resume {path}: no checkpoint ({path / CHECKPOINT}), so the run starts again from step "
                  f"0; its {len(rows)} metric rows are dropped (the restarted run writes them again)", file=sys.stderr)
            (path / "metrics.csv").unlink()
    finally:
        held.close()
    return False


def lock(run_dir: Path):
    """RUN/.lock, flock'ed (exclusive) and holding this process's id; a RunLocked naming the holder's id when
    another process holds it. The lock goes with the returned file (close it) or with the process."""
    f = open(Path(run_dir) / LOCK, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise RunLocked(f"{run_dir} is in use by process {holder} (it holds {Path(run_dir) / LOCK}); wait for it "
                        "to end or stop it; nothing was changed") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def resume_config(cls: type, run_dir: Path, engine: str, overrides: list[str] = ()) -> Any:
    """RUN's config (config.json, written by ``engine``) for --resume, with the ``--set`` ``overrides`` of the
    RESUMABLE keys only: any other key is refused by name."""
    refused = [item.partition("=")[0].strip() for item in overrides
               if item.partition("=")[0].strip() not in RESUMABLE]
    if refused:
        raise runconfig.ConfigError(f"--resume: config key {refused[0]!r} cannot change on resume (the run was "
                                    f"made with it); only {', '.join(RESUMABLE)} can (to extend the run)")
    cfg = runconfig.from_dict(cls, RunDir.read_config(run_dir, engine)["config"], f"{run_dir}/config.json")
    return runconfig.apply_overrides(cfg, list(overrides))


class RunDir:
    """Creates (or reopens, for --resume) a run directory, holds its lock, logs scalars to CSV and
    TensorBoard and writes checkpoints. Used as a context manager around the loop, it closes itself and
    turns a Ctrl-C into ``Interrupted`` and a ``Diverged`` into one saying which checkpoint is kept."""

    def __init__(self, path: Path, engine: str, config: dict[str, Any], extra_versions: dict | None = None,
                 resume_step: int | None = None, final_step: int | None = None):
        """``resume_step``: reopen the run at its checkpoint's step; ``final_step``: the step the run ends at
        (a resumed run already there is ``AlreadyFinished``, nothing touched)."""
        self.path = Path(path)
        self.engine = engine
        if resume_step is None:
            claim_for_new_run(self.path)  # before anything is created there
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = lock(self.path)
        self._remove_unfinished_writes()
        try:
            if resume_step is None:
                self._start(config, extra_versions)
            else:
                self._reopen(config, resume_step, final_step)
        except BaseException:
            self._lock.close()
            raise
        self._keys: list[str] = list(dict.fromkeys(k for r in self._rows for k in r))
        self._write_csv()
        self._tb = None
        self._tb_purge = resume_step
        self.step = self.checkpoint_step = resume_step  # the last row's step, the last checkpoint's step

    def _remove_unfinished_writes(self) -> None:
        """Temporary files of atomic writes a killed process left behind (this process holds the lock: no one
        else is writing them)."""
        for tmp in [*self.path.glob(".*.tmp"), *(self.path / "checkpoints").glob(".*.tmp")]:
            tmp.unlink(missing_ok=True)
            print(f"rlspec: removed {tmp}, an unfinished write a stopped process left", file=sys.stderr)

    def _start(self, config: dict[str, Any], extra_versions: dict | None) -> None:
        if (self.path / "config.json").exists():  # a run with nothing to lose (claim_for_new_run)
            print(f"rlspec: {self.path} holds a run that stopped before its first metric row: starting afresh",
                  file=sys.stderr)
            shutil.rmtree(self.path / "tb", ignore_errors=True)
            (self.path / "summary.json").unlink(missing_ok=True)
        self.run_id = uuid.uuid4().hex
        self.config = json.loads(json.dumps(config))  # as config.json holds it (lists, not tuples)
        self._write_config(config)
        atomic_write_bytes(self.path / "versions.json", json.dumps(versions(extra_versions), indent=2).encode())
        self._rows: list[dict[str, float]] = []

    def _write_config(self, config: dict[str, Any]) -> None:
        atomic_write_bytes(self.path / "config.json", json.dumps(
            {"engine": self.engine, RUN_ID: self.run_id, "config": config}, indent=2).encode())

    def _reopen(self, config: dict[str, Any], resume_step: int, final_step: int | None) -> None:
        if final_step is not None and resume_step >= final_step:
            raise AlreadyFinished(f"{self.path} already finished at step {resume_step}; nothing was changed "
                                  f"(to go on: --resume {self.path} --set total_steps=MORE)")
        saved = self.read_config(self.path, self.engine)
        self.run_id = saved.get(RUN_ID)
        if saved["config"] != config:  # a RESUMABLE key changed
            self._write_config(config)
        self.config = json.loads(json.dumps(config))  # as config.json holds it (lists, not tuples)
        missing = [name for name in ("metrics.csv", "tb") if not (self.path / name).exists()]
        if missing:
            print(f"rlspec: {self.path}: {' and '.join(missing)} missing: the history before step {resume_step} is "
                  "lost; the resumed run writes what follows", file=sys.stderr)
        self._rows = self._recover(resume_step)

    def _recover(self, resume_step: int) -> list[dict[str, float]]:
        """metrics.csv's rows up to the checkpoint's step; a row cut mid-write is dropped, and said."""
        rows, cut = _parse_metrics(self.path / "metrics.csv")
        if cut:
            print(f"rlspec: {self.path / 'metrics.csv'}: its last row was cut mid-write ({cut}); dropped it",
                  file=sys.stderr)
        return [r for r in rows if r["step"] <= resume_step]

    @staticmethod
    def read_config(path: Path, engine: str | None = None) -> dict[str, Any]:
        """RUN/config.json (of ``engine``'s runs, if given), with a clear error when it is damaged."""
        file = Path(path) / "config.json"
        if not file.is_file():
            raise FileNotFoundError(f"{path} is not a run directory (no config.json)")
        try:
            data = json.loads(file.read_text())
            made_by, _ = data["engine"], dict(data["config"])
        except (ValueError, KeyError, TypeError) as err:
            raise runconfig.ConfigError(f"{file} is damaged ({type(err).__name__}: {err}); nothing was "
                                        "changed") from None
        if engine is not None and made_by != engine:
            raise runconfig.ConfigError(f"{path} is a run of engine {made_by!r}, not {engine!r}: use "
                                        f"rlspec train {made_by} --resume {path}")
        return data

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT

    def log(self, step: int, scalars: dict[str, float]) -> None:
        """One row of metrics at env step ``step`` (NaN where a metric has no value yet)."""
        row = {"step": float(step), **{k: float(v) for k, v in scalars.items()}}
        new = [k for k in row if k not in self._keys]
        self._rows.append(row)
        if new:
            self._keys += new
            self._write_csv()
        else:
            with open(self.path / "metrics.csv", "a", newline="") as f:
                csv.DictWriter(f, self._keys, restval="nan", lineterminator="\n").writerow(row)
        self.step = step
        self._tensorboard(step, scalars)

    def save(self, step: int, state: dict[str, Any], params: dict[str, Iterable[torch.Tensor]]) -> None:
        """RUN/checkpoints/last.pt of ``state`` at env step ``step``; never with non-finite ``params`` (groups
        of tensors by name): ``Diverged`` then, and the last checkpoint stays."""
        bad = nonfinite_tensors(params)
        if bad:
            raise Diverged(step, f"parameters of {', '.join(bad)}")
        save_checkpoint(self.checkpoint_path, {**state, RUN_ID: self.run_id, RUN_CONFIG: self.config,
                                               CHECKPOINT_STEP: step})
        self.checkpoint_step = step

    def kept(self) -> str:
        """What a stopped run keeps, in words."""
        if self.checkpoint_step is None:
            return "no checkpoint was written yet (running the same command again starts afresh)"
        return f"the last clean checkpoint (step {self.checkpoint_step}) is kept: {self.checkpoint_path}"

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, kind, err, tb) -> None:
        try:
            self.close()
        except OSError as failed:  # TensorBoard's last flush, on the disk that failed (or first on this one)
            err = err if isinstance(err, OSError) else failed if err is None else err
        if isinstance(err, Diverged) and err.kept is None:
            err.kept = self.kept()
        elif isinstance(err, OSError) and not isinstance(err, (FileNotFoundError, FileExistsError)):
            where = f" ({err.filename})" if err.filename else ""  # ENOSPC, EROFS, EACCES, EIO, ... while running
            raise WriteFailed(f"{err.strerror or err}{where} at step {self.step or 0}; {self.kept()}") from None
        elif isinstance(err, KeyboardInterrupt) and not isinstance(err, Interrupted):
            at = f"interrupted at step {self.step or 0}; resume with --resume {self.path}"
            if self.checkpoint_step is None:
                at += " (no checkpoint yet: it starts afresh)"
            elif self.checkpoint_step != self.step:
                at += f" (it goes on from its checkpoint at step {self.checkpoint_step})"
            raise Interrupted(at, signal_of(err)) from None

    def _write_csv(self) -> None:
        keys = self._keys or ["step"]
        out = io.StringIO()
        writer = csv.DictWriter(out, keys, restval="nan", lineterminator="\n")
        writer.writeheader()
        writer.writerows(self._rows)
        atomic_write_bytes(self.path / "metrics.csv", out.getvalue().encode())

    def _tensorboard(self, step: int, scalars: dict[str, float]) -> None:
        if self._tb is None:
            from torch.utils.tensorboard import SummaryWriter  # needs the `tensorboard` package (runs extra)

            self._tb = SummaryWriter(str(self.path / "tb"), purge_step=self._tb_purge)
        for key, value in scalars.items():
            if math.isfinite(float(value)):
                self._tb.add_scalar(key, float(value), step)

    def close(self) -> None:
        """Close TensorBoard and release the lock (again: nothing)."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        self._lock.close()


def read_metrics(path: Path) -> list[dict[str, float]]:
    """metrics.csv as a list of rows (floats; missing values NaN); a last row cut mid-write is left out."""
    return _parse_metrics(Path(path) / "metrics.csv")[0]


def _parse_metrics(file: Path) -> tuple[list[dict[str, float]], str]:
    """The complete rows of a metrics.csv, and what was cut ("" if nothing): a last line without its line end,
    or a line whose field count is not the header's (it and the lines after it are left out)."""
    if not file.is_file():
        return [], ""
    lines = file.read_text().split("\n")
    tail = lines.pop()  # "" when the file ends with a line end
    cut = f"{len(tail)} characters without a line end" if tail else ""
    if not lines:
        return [], cut
    keys = next(csv.reader([lines[0].rstrip("\r")]))
    rows = []
    for i, line in enumerate(lines[1:], 2):
        values = next(csv.reader([line.rstrip("\r")]), [])
        if len(values) != len(keys):
            return rows, f"line {i} has {len(values)} fields, the header {len(keys)}"
        try:
            rows.append({k: float(v) if v else math.nan for k, v in zip(keys, values)})
        except ValueError as err:
            return rows, f"line {i}: {err}"
    return rows, cut


def peak_memory(device: torch.device | None = None) -> dict[str, float]:
    """Memory/peak_rss_mib: this process's peak resident set size (getrusage ru_maxrss: KiB on Linux, bytes
    on macOS); with a CUDA ``device``, Memory/peak_vram_mib: torch.cuda.max_memory_allocated (the caching
    allocator's peak of tensor memory, not the reserved pool)."""
    out = {}
    try:
        import resource
    except ImportError:  # not on Unix: no getrusage
        pass
    else:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["Memory/peak_rss_mib"] = rss / 2**20 if sys.platform == "darwin" else rss / 2**10
    if device is not None and device.type == "cuda" and torch.cuda.is_available():
        out["Memory/peak_vram_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


class EpisodeProgress:
    """`rlspec eval`'s progress: a line on stderr each time an episode ends ("eval: 3/10 episodes")."""

    def __init__(self, total: int, stream=None):
        self.total, self.stream, self.done = total, stream or sys.stderr, 0

    def update(self, finished: int) -> None:
        while self.done < min(finished, self.total):
            self.done += 1
            self.stream.write(f"eval: {self.done}/{self.total} episodes\n")
            self.stream.flush()


class Progress:
    """One status line (rewritten in place on a terminal, one line per update otherwise): env steps/s and
    the figures a person watches (EpRet, EpCost, λ, ...): the metrics ``keys`` (shown by their last name part;
    none given: every figure passed). With ``on`` False it writes nothing."""

    def __init__(self, total_steps: int, keys: tuple[str, ...] = (), on: bool = True, stream=None,
                 every_s: float = 1.0):
        self.total, self.keys, self.on = total_steps, keys, on
        self.stream, self.every_s = stream or sys.stderr, every_s
        self._t0 = self._last = time.perf_counter()
        self._step0: int | None = None
        self._write(f"started ({total_steps} env steps in all); a line per metrics row from the first one on")

    def update(self, step: int, figures: dict[str, float], force: bool = False) -> None:
        """A line for this metrics row: the first one at once (steps/s from the second on: the first row
        starts the clock), later ones at most every ``every_s`` seconds unless ``force``."""
        now = time.perf_counter()
        if self.keys:
            figures = {k.split("/")[-1]: figures[k] for k in self.keys if k in figures}
        if self._step0 is None:
            self._step0, self._t0 = step, now
            rate = "… steps/s"
        elif force or now - self._last >= self.every_s:
            rate = f"{(step - self._step0) / max(now - self._t0, 1e-9):.0f} steps/s"
        else:
            return
        self._last = now
        shown = "  ".join(f"{k} {v:.3g}" for k, v in figures.items())
        self._write(f"{step}/{self.total} ({100 * step / max(self.total, 1):.0f}%)  {rate}  {shown}")

    def _write(self, line: str) -> None:
        if not self.on:
            return
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.on and getattr(self.stream, "isatty", lambda: False)():
            self.stream.write("\n")
