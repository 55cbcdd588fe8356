"""benchmarks/runs/MANIFEST.json describes exactly the kept runs' files, with matching hashes, and says for each
folder the command and the commit that made it (as fixtures/MANIFEST.json does for the fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlspec.evidence import keep_runs as kr

RUNS = Path(__file__).resolve().parents[2] / "benchmarks/runs"
MANIFEST = kr.read_manifest(RUNS / "MANIFEST.json")
LISTED = {f"{folder}/{name}": sha for folder, e in MANIFEST.items() for name, sha in e["files"].items()}
ON_DISK = sorted(p.relative_to(RUNS).as_posix() for p in RUNS.rglob("*")
                 if p.is_file() and p.name not in ("README.md", "MANIFEST.json"))


def test_the_manifest_lists_exactly_the_kept_files():
    assert len(ON_DISK) > 90
    assert sorted(set(ON_DISK) - set(LISTED)) == [], "kept files missing from benchmarks/runs/MANIFEST.json"
    assert sorted(set(LISTED) - set(ON_DISK)) == [], "manifest entries without their file"


def test_every_kept_file_has_its_hash():
    changed = [path for path in ON_DISK if kr.sha256(RUNS / path) != LISTED[path]]
    assert changed == [], f"kept files changed since the manifest: {changed}"


@pytest.mark.parametrize("folder", sorted(MANIFEST))
def test_every_entry_names_its_command_and_commit(folder):
    entry = MANIFEST[folder]
    assert entry["path"] == folder and entry["files"]
    # +dirty: the run had uncommitted changes on top of the commit
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", entry["commit"]), entry["commit"]
    assert entry["commit_from"] in ("versions.json", "HEAD when kept", "the commit that first kept it")
    assert re.match(r"(python -m benchmarks\.|nox -s bench_)", entry["command"]), entry["command"]
