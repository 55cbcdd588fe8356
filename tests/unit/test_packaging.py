"""pyproject.toml lists its packages by hand (the top-level spec/, reference/, fast/, golden_bridge/ and
thirdparty/ folders install under the rlspec namespace), so a new sub-package must be added there: a
non-editable install (the GPU gate's) left out rlspec.engines.safe, .dreamer and .bonus once, while every test
run from the checkout passed. Every folder with an __init__.py under a mapped folder is a listed package."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, dirs = set(setuptools["packages"]), setuptools["package-dir"]
    found = set()
    for package, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join((package, *rel.parts)))
    missing, stale = sorted(found - listed), sorted(listed - found - set(dirs))
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}"
    assert not stale, f"pyproject.toml lists packages with no folder: {stale}"
