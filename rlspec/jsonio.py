"""Strict JSON for every file rlspec writes: NaN and ±inf are not JSON (RFC 8259 §6), and strict parsers
(``jq``, JavaScript's ``JSON.parse``, Go) refuse Python's bare ``NaN``. A non-finite number is written as
``null``, and a top-level ``"non_finite"`` object says which were, by dotted path, and what each held, so a
null read back is never taken for a missing value."""

from __future__ import annotations

import json
import math
from typing import Any

NON_FINITE = "non_finite"


def dumps(obj: Any, indent: int | None = 2) -> str:
    """``obj`` as strict JSON; a dict gets ``"non_finite": {path: "NaN" | "inf" | "-inf"}`` when any was."""
    found: dict[str, str] = {}
    clean = _clean(obj, "", found)
    if found and isinstance(clean, dict):
        clean[NON_FINITE] = found
    return json.dumps(clean, indent=indent, allow_nan=False)


def _clean(obj: Any, path: str, found: dict[str, str]) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v, f"{path}.{k}" if path else str(k), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v, f"{path}[{i}]", found) for i, v in enumerate(obj)]
    if isinstance(obj, float) or type(obj).__module__ == "numpy" and hasattr(obj, "dtype") and obj.dtype.kind == "f":
        value = float(obj)
        if not math.isfinite(value):
            found[path] = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            return None
        return value
    return obj
