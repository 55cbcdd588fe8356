"""Every registered ``twohot`` implementation reproduces sheeprl 0.8.4's outputs (fixtures/twohot/)
within the manifest's tolerance. Layout conversions are in each entry's ``convention``."""

from __future__ import annotations

from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close

CONTRACT = "twohot"


def test_log_prob(impl):
    inputs, expected, entry = read_golden("twohot/sheeprl_log_prob.json")
    logits, x = inputs["logits"], inputs["x"]  # [R, n], [R, K]: each row's logits serve its K targets
    got = impl.log_prob(logits[:, None].expand(*x.shape, logits.shape[-1]), x)  # [R, K]
    assert_close("TWOHOT-12", "log_prob vs sheeprl", got, expected["log_prob"], atol=entry["tolerance"]["atol"],
                 rtol=entry["tolerance"]["rtol"], x=x)


def test_mean(impl):
    inputs, expected, entry = read_golden("twohot/sheeprl_mean.json")
    assert_close("TWOHOT-14", "mean vs sheeprl", impl.mean(inputs["logits"]), expected["mean"],
                 atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"], logits=inputs["logits"])


def test_symlog_symexp(impl):
    inputs, expected, entry = read_golden("twohot/sheeprl_symlog.json")
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    assert_close("TWOHOT-4", "symlog vs sheeprl", impl.symlog(inputs["x"]), expected["symlog"], x=inputs["x"], **tol)
    assert_close("TWOHOT-4", "symexp vs sheeprl", impl.symexp(inputs["y"]), expected["symexp"], y=inputs["y"], **tol)
