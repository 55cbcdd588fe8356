"""Run files as the tools write them, for the tests of the readers (tests/ is on sys.path: its conftest.py)."""

from __future__ import annotations

import csv
from pathlib import Path


def write_csv(path: Path, columns: dict[str, list[float]]) -> None:
    """``columns`` (name -> values, all the same length) as a CSV with a header row, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(zip(*columns.values()))
