"""A run directory (design.md "Runs") and what is written into it.

```
RUN/config.json      {"engine": ..., "config": {...}}: enough to resume or evaluate the run
RUN/versions.json    python, torch, numpy, rlspec commit, plus what the engine adds (env package versions)
RUN/metrics.csv      one row per logged step; columns are the metric keys (OmniSafe names where they exist)
RUN/tb/              TensorBoard events of the same scalars
RUN/plots/*.png      rlspec.runs.plots
RUN/checkpoints/last.pt   written to a temporary file in the same folder, then renamed (atomic)
```
Resuming truncates metrics.csv (and TensorBoard, through ``purge_step``) after the checkpoint's step, so
a resumed run's files are those of a straight run.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT = "checkpoints/last.pt"


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


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint this package wrote (it holds plain Python objects too: only load your own runs)."""
    if not path.is_file():
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}")
    return torch.load(path, map_location="cpu", weights_only=False)


class RunDir:
    """Creates (or reopens, for --resume) a run directory and logs scalars to CSV and TensorBoard."""

    def __init__(self, path: Path, engine: str, config: dict[str, Any], extra_versions: dict | None = None,
                 resume_step: int | None = None):
        self.path = Path(path)
        self.engine = engine
        if resume_step is None:
            if (self.path / "config.json").exists():
                raise FileExistsError(f"RunDir: {self.path} already holds a run; use --resume {self.path} to "
                                      "continue it or choose another --out")
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.path / "config.json",
                               json.dumps({"engine": engine, "config": config}, indent=2).encode())
            atomic_write_bytes(self.path / "versions.json", json.dumps(versions(extra_versions), indent=2).encode())
            self._rows: list[dict[str, float]] = []
        else:
            self._rows = [r for r in read_metrics(self.path) if r["step"] <= resume_step]
        self._keys: list[str] = list(dict.fromkeys(k for r in self._rows for k in r))
        self._write_csv()
        self._tb = None
        self._tb_purge = resume_step

    @staticmethod
    def read_config(path: Path) -> dict[str, Any]:
        file = Path(path) / "config.json"
        if not file.is_file():
            raise FileNotFoundError(f"{path} is not a run directory (no config.json)")
        return json.loads(file.read_text())

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
                csv.DictWriter(f, self._keys, restval="nan").writerow(row)
        self._tensorboard(step, scalars)

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
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_metrics(path: Path) -> list[dict[str, float]]:
    """metrics.csv as a list of rows (floats; missing values NaN)."""
    file = Path(path) / "metrics.csv"
    if not file.is_file():
        return []
    with open(file, newline="") as f:
        return [{k: float(v) if v not in ("", None) else math.nan for k, v in row.items()} for row in csv.DictReader(f)]


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


class Progress:
    """One status line (rewritten in place on a terminal, one line per update otherwise): env steps/s and
    the figures a person watches (EpRet, EpCost, λ, ...)."""

    def __init__(self, total_steps: int, stream=None, every_s: float = 1.0):
        self.total, self.stream, self.every_s = total_steps, stream or sys.stderr, every_s
        self._t0 = self._last = time.perf_counter()
        self._step0: int | None = None

    def update(self, step: int, figures: dict[str, float], force: bool = False) -> None:
        now = time.perf_counter()
        if self._step0 is None:
            self._step0, self._t0 = step, now
            return
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        rate = (step - self._step0) / max(now - self._t0, 1e-9)
        shown = "  ".join(f"{k} {v:.3g}" for k, v in figures.items())
        line = f"{step}/{self.total} ({100 * step / max(self.total, 1):.0f}%)  {rate:.0f} steps/s  {shown}"
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if getattr(self.stream, "isatty", lambda: False)():
            self.stream.write("\n")
