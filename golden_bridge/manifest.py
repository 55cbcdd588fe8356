"""One golden fixture as a generator returns it, and ``fixtures/MANIFEST.json`` built from them.

Manifest entry (README, golden fixtures): path (relative to fixtures/), sha256, contract,
source {package, version, qualname}, generator (module:function), seed, tolerance {atol, rtol, why},
convention (how the third party's layout was converted into ours).

The manifest's "artifacts" list describes files the project builds itself and commits (the room ROM:
path relative to the repository, sha256, sources and their hashes, builder, recipe); each comes from an
``ARTIFACTS`` function that reads the committed files only, so regenerating the fixtures keeps it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from pathlib import Path
from typing import Callable

import torch

from rlspec.golden_bridge.fixture_io import MANIFEST_NAME, sha256, write_fixture

FIELDS = ("path", "sha256", "contract", "source", "generator", "seed", "tolerance", "convention")
SOURCE_FIELDS = ("package", "version", "qualname")
TOLERANCE_FIELDS = ("atol", "rtol", "why")


@dataclasses.dataclass(frozen=True)
class Fixture:
    path: str  # relative to fixtures/, e.g. "twohot/sheeprl_mean.json"
    contract: str
    package: str  # the distribution whose version is recorded, e.g. "sheeprl"
    qualname: str  # what produced `expected`, e.g. "sheeprl.utils.utils.symlog"
    seed: int
    atol: float
    rtol: float
    why: str  # one line: why this tolerance
    convention: str  # one line: layout / convention conversion
    inputs: dict[str, torch.Tensor]
    expected: dict[str, torch.Tensor]
    version: str | None = None  # set when the package is read from a downloaded file, not installed


def write_all(generators: list[Callable[[], Fixture]], root: Path,
              artifacts: list[Callable[[], dict]] = ()) -> None:
    """Run every generator, write its fixture under ``root`` and ``root/MANIFEST.json`` describing them
    and the built ``artifacts``."""
    entries = []
    for gen in generators:
        fx = gen()
        write_fixture(root / fx.path, fx.inputs, fx.expected)
        entries.append(dict(
            path=fx.path, sha256=sha256(root / fx.path), contract=fx.contract,
            source=dict(package=fx.package, version=fx.version or importlib.metadata.version(fx.package),
                        qualname=fx.qualname),
            generator=f"{gen.__module__}:{gen.__qualname__}", seed=fx.seed,
            tolerance=dict(atol=fx.atol, rtol=fx.rtol, why=fx.why), convention=fx.convention,
        ))
    manifest = {"fixtures": sorted(entries, key=lambda e: e["path"]), "artifacts": _artifacts(artifacts)}
    (root / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")


def write_artifacts(root: Path, artifacts: list[Callable[[], dict]]) -> None:
    """Rewrite only the "artifacts" of ``root/MANIFEST.json`` (after a deliberate rebuild)."""
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest["artifacts"] = _artifacts(artifacts)
    (root / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")


def _artifacts(artifacts: list[Callable[[], dict]]) -> list[dict]:
    return sorted((a() for a in artifacts), key=lambda e: e["path"])
