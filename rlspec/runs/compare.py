"""The one difference measure of `rlspec compare ENGINE` (every engine that compares runs row by row):

    d(a, b) = |a − b| / max(|a|, |b|, 1)

relative for values of magnitude >= 1, absolute below (values near 0, such as the first imagined values
~1e-10, have no meaningful relative difference); 0 where a == b or both are NaN (a metric with no episode yet
on both sides), inf where only one side is NaN or missing. Two runs are identical when every d is 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def difference(a: float, b: float) -> float:
    if (math.isnan(a) and math.isnan(b)) or a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1.0)


def largest(pairs: Iterable[tuple[dict, dict]], keys: Iterable[str]) -> dict[str, float]:
    """Per key, the largest ``difference`` over the row pairs (a missing value counts as NaN); 0 with no rows."""
    pairs = list(pairs)
    return {k: max((difference(ra.get(k, math.nan), rb.get(k, math.nan)) for ra, rb in pairs), default=0.0)
            for k in keys}


def mean(rows: list[dict], key: str) -> float:
    """The mean of ``key`` over the rows where it is finite (NaN: a row before the first episode); NaN if none."""
    xs = [r[key] for r in rows if math.isfinite(r.get(key, math.nan))]
    return sum(xs) / len(xs) if xs else math.nan
