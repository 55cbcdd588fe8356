"""Shared by the CUDA checks: event timing, the device copy bandwidth every throughput is compared
with, the "no host synchronization" context, and the JSON report under bench-results/."""

from __future__ import annotations

import contextlib
import json
import statistics
from pathlib import Path

import torch


def cuda_seconds(fn, iters: int = 20) -> float:
    """Median wall time of fn() on the current stream, by CUDA events, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def copy_bandwidth(nbytes: int) -> float:
    """Bytes read + written per second by a device-to-device copy of ``nbytes``."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / cuda_seconds(lambda: dst.copy_(src))


@contextlib.contextmanager
def sync_is_an_error():
    """Any synchronizing CUDA operation inside the block raises."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def write_report(name: str, report: dict) -> Path:
    """bench-results/<name>.json (reported, never asserted)."""
    path = Path("bench-results") / f"{name}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
