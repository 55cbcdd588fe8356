"""Source files read out of a pinned wheel, for libraries whose package cannot (or must not) be imported.

OmniSafe's package import pulls in its environment registry, and CleanRL 1.2.0 supports Python < 3.11
only and keeps its algorithms as scripts: ``nox -s thirdparty`` downloads their wheels (``pip download
--no-deps``) into ``$RLSPEC_WHEEL_DIR`` and the adapters read single files from them. Nothing here
installs or imports those packages.
"""

from __future__ import annotations

import builtins
import os
import types
import zipfile
from pathlib import Path
from typing import Any, Mapping

WHEEL_DIR_ENV = "RLSPEC_WHEEL_DIR"


def wheel_path(package: str, version: str) -> Path:
    wheel_dir = Path(os.environ.get(WHEEL_DIR_ENV, ""))
    wheels = sorted(wheel_dir.glob(f"{package}-{version}-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no {package}-{version} wheel in {WHEEL_DIR_ENV}={str(wheel_dir)!r}; run: pip "
                                f"download {package}=={version} --no-deps --only-binary=:all: -d DIR "
                                "(nox -s thirdparty does)")
    return wheels[0]


def read_source(package: str, version: str, member: str) -> tuple[str, str]:
    """(source text, a file name for tracebacks) of ``member`` inside the pinned wheel."""
    wheel = wheel_path(package, version)
    return zipfile.ZipFile(wheel).read(member).decode(), f"{wheel.name}/{member}"


def load_module(package: str, version: str, member: str,
                stubs: Mapping[str, Mapping[str, Any]] | None = None) -> types.ModuleType:
    """Execute ``member`` from the wheel as a bare module. ``stubs`` maps a module the file imports only
    for type annotations (e.g. "omnisafe.utils.config") to the names it takes from it; every other import
    is the real one."""
    source, filename = read_source(package, version, member)
    stubs = dict(stubs or {})

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if name in stubs:
            return types.SimpleNamespace(**stubs[name])
        if name.split(".")[0] == package:
            raise ImportError(f"{filename} imports {name}: loading it would import the {package} package")
        return builtins.__import__(name, globals, locals, fromlist, level)

    module = types.ModuleType(f"_{package}_{Path(member).stem}")
    module.__dict__["__builtins__"] = dict(vars(builtins), __import__=guarded_import)
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - a file of the pinned wheel
    return module
