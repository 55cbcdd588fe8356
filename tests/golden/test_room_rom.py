"""The committed room ROM is the one fixtures/MANIFEST.json describes, built from the committed source and
the game's current data, and rebuilding it gives the same bytes (when Debian's sdcc of the recorded version
is installed: .ci/run installs it)."""

from __future__ import annotations

import shutil

import pytest

from rlspec.envs.room import build
from rlspec.golden_bridge import room_rom
from rlspec.golden_bridge.fixture_io import MANIFEST_NAME, read_artifacts
from rlspec.golden_bridge.manifest import write_all

ENTRY = read_artifacts()[build.manifest_entry()["path"]]
STALE = "stale: rebuild with `python -m rlspec.envs.room.build --update` (or `nox -s rom -- --update`)"


def test_rom_hash_matches_the_manifest():
    assert build.sha256(build.ROM) == ENTRY["sha256"], "rlspec/envs/room/room.gb changed since its manifest entry"


def test_manifest_entry_is_current():
    """room.c and the data room_data.h is generated from (pictures, layout, palettes, RAM addresses) are
    those the ROM was built from: editing the game's data without rebuilding the ROM fails here."""
    assert build.manifest_entry() == ENTRY, f"the ROM's manifest entry is {STALE}"


def test_regenerating_the_fixtures_keeps_the_entry(tmp_path):
    """`nox -s fixtures` (golden_bridge/__main__.py) rewrites the whole manifest: the ROM's entry comes back."""
    write_all([], tmp_path, room_rom.ARTIFACTS)
    assert (tmp_path / MANIFEST_NAME).exists() and read_artifacts(tmp_path) == read_artifacts()


def test_rom_header():
    rom = build.ROM.read_bytes()
    assert len(rom) == 32 * 1024, len(rom)  # two 16 KiB banks, no MBC
    assert rom[0x104:0x134] == b"\xff" * 48, "the logo area must stay empty (makebin -yN)"
    assert rom[0x134:0x144].rstrip(b"\0") == build.TITLE.encode()
    assert rom[0x147] == 0, "cartridge type: ROM only"
    assert rom[0x14D] == (-sum(b + 1 for b in rom[0x134:0x14D])) & 0xFF, "header checksum"


@pytest.mark.skipif(shutil.which("sdcc") is None, reason="sdcc is not installed (.ci/run installs it)")
def test_rebuild_is_identical(tmp_path):
    if build.sdcc_version() != build.BUILT_WITH_SDCC:
        pytest.skip(f"sdcc {build.sdcc_version()} is not the {build.BUILT_WITH_SDCC} that built the committed ROM")
    rebuilt = build.build(tmp_path / "room.gb")
    assert rebuilt.read_bytes() == build.ROM.read_bytes(), (
        f"rebuilt sha256 {build.sha256(rebuilt)} != committed {build.sha256(build.ROM)}: {STALE}")
