"""Every registered ``gae`` implementation reproduces rlax 0.1.9 ``truncated_generalized_advantage_estimation``
(fixtures/gae/rlax_truncated_gae.json, stored in rlax's layout) after the explicit conversion below."""

from __future__ import annotations

import pytest
import torch

from rlspec.golden_bridge.fixture_io import FIXTURES_DIR, read_golden
from rlspec.spec.core import assert_close

CONTRACT = "gae"
ROOT = FIXTURES_DIR  # fixtures/


def from_rlax(r_t: torch.Tensor, discount_t: torch.Tensor, values: torch.Tensor, gamma: float) -> dict:
    """rlax (r_t [T, B], discount_t [T, B] with γ_t = γ·(1 − terminated_t), values [T+1, B]) → our ``gae``
    arguments. rlax has no truncation: every episode end is a termination, and V(s_T) = values[T] is the
    bootstrap of the rollout cut (read only on the last row)."""
    bad = (discount_t != 0) & (discount_t != gamma)
    if bool(bad.any()):
        idx = [int(i) for i in bad.nonzero()[0].tolist()]
        raise ValueError(f"from_rlax: argument 'discount_t' must be 0 or gamma={gamma!r} (our gae has one γ), "
                         f"got {discount_t[tuple(idx)].item()!r} at index {idx}")
    bootstrap = torch.zeros_like(values[:-1])  # [T, B]
    bootstrap[-1] = values[-1]
    terminated = discount_t == 0
    return dict(reward=r_t, value=values[:-1], terminated=terminated, truncated=torch.zeros_like(terminated),
                next_value=bootstrap, gamma=gamma)


def _load():
    inputs, expected, entry = read_golden("gae/rlax_truncated_gae.json", ROOT)
    args = from_rlax(inputs["r_t"], inputs["discount_t"], inputs["values"], float(inputs["gamma"]))
    return args, float(inputs["lam"]), expected, dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])


def test_truncated_gae(impl):
    args, lam, expected, tol = _load()
    adv, ret = impl.gae(**args, lam=lam)
    assert_close("GAE-1", "advantages vs rlax.truncated_generalized_advantage_estimation", adv,
                 expected["advantages"], **tol)
    assert_close("GAE-2", "returns vs rlax advantages + values[:-1]", ret, expected["advantages"] + args["value"],
                 **tol)


def test_from_rlax_conversion():
    inputs, _, _ = read_golden("gae/rlax_truncated_gae.json", ROOT)
    gamma = float(inputs["gamma"])
    args = from_rlax(inputs["r_t"], inputs["discount_t"], inputs["values"], gamma)
    assert torch.equal(args["terminated"], inputs["discount_t"] == 0) and not bool(args["truncated"].any())
    assert torch.equal(args["next_value"][-1], inputs["values"][-1])
    assert torch.equal(args["value"], inputs["values"][:-1])
    assert bool(args["terminated"].any()) and bool((~args["terminated"]).any())  # both kinds of step occur
    discount = inputs["discount_t"].clone()
    discount[3, 1] = 0.5  # a per-step discount our gae cannot express
    with pytest.raises(ValueError, match=r"'discount_t'.*\[3, 1\]"):
        from_rlax(inputs["r_t"], discount, inputs["values"], gamma)
