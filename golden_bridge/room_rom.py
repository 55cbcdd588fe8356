"""The room ROM against its manifest entry: ``python -m rlspec.golden_bridge.room_rom --check | --update``.

``--check`` (``nox -s rom``) rebuilds the ROM in a temporary directory (rlspec/envs/room/build.py: sdcc) and
fails unless it equals the committed rlspec/envs/room/room.gb byte for byte and the "artifacts" entry of
fixtures/MANIFEST.json is current. ``--update`` rebuilds into the package and rewrites the entry, after a
deliberate change to room.c or to the game's data (rlspec/contracts/room_env.py).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rlspec.envs.room import build
from rlspec.golden_bridge.fixture_io import FIXTURES_DIR, read_artifacts
from rlspec.golden_bridge.manifest import write_artifacts

ARTIFACTS = [build.manifest_entry]  # what `nox -s fixtures` writes into the manifest's "artifacts"


def update() -> int:
    if build.sdcc_version() != build.BUILT_WITH_SDCC:
        print(f"sdcc {build.sdcc_version()} is not the recorded {build.BUILT_WITH_SDCC}: change BUILT_WITH_SDCC in "
              "rlspec/envs/room/build.py if the new compiler is meant")
        return 1
    build.build(build.ROM)
    write_artifacts(FIXTURES_DIR, ARTIFACTS)
    print(f"wrote {build.ROM} (sha256 {build.sha256(build.ROM)}) and its manifest entry")
    return 0


def check() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rebuilt = build.build(Path(tmp) / "room.gb")
        same = rebuilt.read_bytes() == build.ROM.read_bytes()
        print(f"rebuilt with sdcc {build.sdcc_version()}: sha256 {build.sha256(rebuilt)}; "
              f"committed {build.sha256(build.ROM)}")
    entry = build.manifest_entry()
    current = read_artifacts().get(entry["path"]) == entry
    if same and current:
        print("identical; manifest entry current")
        return 0
    print(("" if same else "the rebuilt ROM differs from the committed one; ")
          + ("" if current else "the manifest entry is stale; ") + "run with --update if the change is meant")
    return 1


if __name__ == "__main__":
    actions = {"--check": check, "--update": update}
    if sys.argv[1:] not in ([a] for a in actions):
        sys.exit(__doc__)
    sys.exit(actions[sys.argv[1]]())
