"""fixtures/MANIFEST.json describes exactly the files in fixtures/, with matching hashes and all fields."""

from __future__ import annotations

import pytest

from rlspec.golden_bridge.fixture_io import (
    FIXTURES_DIR,
    MANIFEST_NAME,
    read_manifest,
    sha256,
)
from rlspec.golden_bridge.manifest import FIELDS, SOURCE_FIELDS, TOLERANCE_FIELDS

MANIFEST = read_manifest()
ON_DISK = sorted(p.relative_to(FIXTURES_DIR).as_posix() for p in FIXTURES_DIR.rglob("*")
                 if p.is_file() and p.name != MANIFEST_NAME)


def test_every_file_is_in_the_manifest():
    assert sorted(set(ON_DISK) - set(MANIFEST)) == []


def test_every_entry_has_its_file():
    assert sorted(set(MANIFEST) - set(ON_DISK)) == []


@pytest.mark.parametrize("path", sorted(MANIFEST))
def test_hash(path):
    assert sha256(FIXTURES_DIR / path) == MANIFEST[path]["sha256"], f"{path} changed since the manifest"


@pytest.mark.parametrize("path", sorted(MANIFEST))
def test_entry_fields(path):
    entry = MANIFEST[path]
    for fields, part in ((FIELDS, entry), (SOURCE_FIELDS, entry["source"]), (TOLERANCE_FIELDS, entry["tolerance"])):
        missing = [f for f in fields if part.get(f) in (None, "")]
        assert missing == [], f"{path}: manifest fields {missing} missing or empty"
    assert ":" in entry["generator"], f"{path}: generator must be 'module:function'"
    assert isinstance(entry["seed"], int)
    assert entry["tolerance"]["atol"] >= 0 and entry["tolerance"]["rtol"] >= 0
