"""The --help of the verbs whose parser lives in a module that imports torch (an engine's `train`, `compare`
and `eval`, the probe), kept from the last time it was printed, so that `rlspec train ENGINE --help` answers
without importing the engine again.

The help is derived from the engine's config dataclasses (every --set key with its docstring), which live
next to the torch code that uses them; the cache spares that import instead of copying them. An entry is
used only while every rlspec source file that was loaded when it was written is unchanged (by content),
under the same Python and terminal width; otherwise the help is produced again and kept. Entries live in
$XDG_CACHE_HOME/rlspec/help (default ~/.cache/rlspec/help); a cache that cannot be read or written is
passed over. Imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlspec" / "help"


def show(key: list[str], produce: Callable[[], int]) -> int:
    """Print the help that ``produce`` prints before exiting (argparse's --help) and exit 0 as it does, from
    the cache when the entry for ``key`` (the verb and its words) is still valid. Should ``produce`` return
    instead (it did not take the words as a request for help), its exit status is returned, nothing kept."""
    path = cache_dir() / f"{_digest(json.dumps([sys.version, shutil.get_terminal_size().columns, key]).encode())}.json"
    text = _read(path)
    if text is not None:
        sys.stdout.write(text)
        raise SystemExit(0)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return produce()
    except SystemExit as exit_:
        if exit_.code in (0, None):
            _write(path, out.getvalue())
        raise
    finally:
        sys.stdout.write(out.getvalue())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: str) -> str | None:
    try:
        return _digest(Path(path).read_bytes())
    except OSError:
        return None


def _read(path: Path) -> str | None:
    """The entry's text if every file it was built from is unchanged, else None."""
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("text"), str) or not entry.get("files"):
        return None
    if any(_file_digest(f) != d for f, d in entry["files"].items()):
        return None
    return entry["text"]


def _write(path: Path, text: str) -> None:
    """Keep ``text`` with the digests of every rlspec source file now loaded (those that produced it)."""
    files = sorted({m.__file__ for name, m in list(sys.modules.items())
                    if name.split(".")[0] == "rlspec" and getattr(m, "__file__", None)})
    entry = {"text": text, "files": {f: _file_digest(f) for f in files}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry))
        tmp.replace(path)
    except OSError:
        pass  # no cache here: the help was printed all the same
