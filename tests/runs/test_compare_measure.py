"""rlspec/runs/compare.py: the one difference measure of `rlspec compare`, against its closed form."""

from __future__ import annotations

import math

import pytest

from rlspec.runs.compare import difference, largest


@pytest.mark.parametrize("a,b,expected", [
    (2.0, 3.0, 1 / 3), (-4.0, 4.0, 2.0),  # relative at magnitudes >= 1
    (0.25, 0.5, 0.25), (1e-10, 0.0, 1e-10),  # absolute below 1
    (1.5, 1.5, 0.0), (math.nan, math.nan, 0.0),  # equal, or no value on both sides
    (math.nan, 1.0, math.inf), (0.0, math.nan, math.inf)])  # a value on one side only
def test_difference_is_its_closed_form(a, b, expected):
    assert difference(a, b) == pytest.approx(expected) and difference(b, a) == difference(a, b)


def test_largest_takes_the_worst_row_per_key_and_a_missing_value_as_nan():
    rows = [({"x": 1.0, "y": 2.0}, {"x": 1.0, "y": 2.5}), ({"x": 3.0, "y": 2.0}, {"x": 5.0})]
    assert largest(rows, ["x", "y", "z"]) == {"x": 2 / 5, "y": math.inf, "z": 0.0}
    assert largest([], ["x"]) == {"x": 0.0}
