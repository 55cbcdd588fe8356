"""Tiny JSON golden fixtures with exact float round-trip. Imports only the stdlib and torch (tests use it).

A tensor is stored as ``{"dtype": "float32", "shape": [2, 3], "data": [flat row-major values]}``.
float64 values are written with Python's ``repr`` (shortest round-trip decimal); float32 values with the
shortest decimal that parses back (decimal -> double -> float32, the path ``read_fixture`` takes) to the
same float32, which keeps files small. Non-finite values are refused: the files stay strict JSON.

A fixture file is ``{"inputs": {name: tensor}, "expected": {name: tensor}}``; what the names mean, the
source and the tolerance live in ``fixtures/MANIFEST.json`` (see ``manifest.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

import torch

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures"  # <repo>/fixtures
MANIFEST_NAME = "MANIFEST.json"

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _as_float32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


def _shortest_float32(v: float) -> float:
    """The shortest decimal (as a double) that rounds to the float32 ``v``; 9 digits always suffice."""
    for digits in range(1, 10):
        candidate = float(f"{v:.{digits}g}")
        if _as_float32(candidate) == v and math.copysign(1, candidate) == math.copysign(1, v):
            return candidate
    raise AssertionError(f"no float32 round-trip for {v!r}")


def tensor_to_json(t: torch.Tensor) -> dict:
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in _DTYPES:
        raise TypeError(f"tensor_to_json: dtype {dtype} not supported, expected one of {sorted(_DTYPES)}")
    values = t.detach().cpu().reshape(-1).tolist()
    if not all(math.isfinite(v) for v in values):
        raise ValueError("tensor_to_json: non-finite values cannot be stored as strict JSON")
    data = [_shortest_float32(v) for v in values] if dtype == "float32" else values
    return {"dtype": dtype, "shape": list(t.shape), "data": data}


def tensor_from_json(d: dict) -> torch.Tensor:
    return torch.tensor(d["data"], dtype=_DTYPES[d["dtype"]]).reshape(d["shape"])


def write_fixture(path: Path, inputs: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    body = {"inputs": {k: tensor_to_json(v) for k, v in inputs.items()},
            "expected": {k: tensor_to_json(v) for k, v in expected.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n")


def read_fixture(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """-> (inputs, expected), each {name: tensor}."""
    body = json.loads(Path(path).read_text())
    return ({k: tensor_from_json(v) for k, v in body["inputs"].items()},
            {k: tensor_from_json(v) for k, v in body["expected"].items()})


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_manifest(root: Path = FIXTURES_DIR) -> dict[str, dict]:
    """{relative path: entry} from ``root/MANIFEST.json``."""
    entries = json.loads((root / MANIFEST_NAME).read_text())["fixtures"]
    return {e["path"]: e for e in entries}


def read_artifacts(root: Path = FIXTURES_DIR) -> dict[str, dict]:
    """{path relative to the repository: entry} of the built files ``root/MANIFEST.json`` describes."""
    entries = json.loads((root / MANIFEST_NAME).read_text()).get("artifacts", [])
    return {e["path"]: e for e in entries}


def read_golden(path: str, root: Path = FIXTURES_DIR) -> tuple[dict, dict, dict]:
    """-> (inputs, expected, manifest entry) for the fixture at ``root/path``."""
    return (*read_fixture(root / path), read_manifest(root)[path])
