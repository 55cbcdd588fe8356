"""The target-layout conversion behind fixtures/twohot/sheeprl_log_prob.json: sheeprl's log_prob takes
targets x [..., 1], ours take x [...] (spec/twohot.py, TWOHOT-18). Every registered implementation
rejects sheeprl's layout, and squeezing the trailing 1 reproduces the fixture."""

from __future__ import annotations

from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close, expect_rejection

CONTRACT = "twohot"


def _case():
    inputs, expected, entry = read_golden("twohot/sheeprl_log_prob.json")
    logits, x = inputs["logits"], inputs["x"]  # [R, n], [R, K]
    x_sheeprl = x[..., None]  # [R, K, 1]: the layout sheeprl's log_prob takes
    return logits[:, None].expand(*x.shape, logits.shape[-1]), x_sheeprl, expected["log_prob"], entry


def test_sheeprl_target_layout_is_rejected(impl):
    logits, x_sheeprl, _, _ = _case()  # [R, K, n], [R, K, 1]
    expect_rejection("TWOHOT-18", lambda: impl.log_prob(logits, x_sheeprl), names=["x"],
                     mentions=[str(tuple(x_sheeprl.shape))], what="log_prob with sheeprl's target x [..., 1]")


def test_squeezed_target_reproduces_the_fixture(impl):
    logits, x_sheeprl, want, entry = _case()
    got = impl.log_prob(logits, x_sheeprl.squeeze(-1))  # [R, K]
    assert_close("TWOHOT-12", "log_prob with x[..., 1].squeeze(-1) vs sheeprl", got, want,
                 atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
