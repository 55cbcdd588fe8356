"""Every registered ``numerics`` implementation reproduces Stable-Baselines3's ``RunningMeanStd`` state
batch by batch over two splits of one stream (fixtures/numerics/sb3_running_mean_std.json), and its
``VecNormalize`` observation normalization, within the manifest's tolerance."""

from __future__ import annotations

import pytest

from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close

CONTRACT = "numerics"
PATH = "numerics/sb3_running_mean_std.json"


@pytest.mark.parametrize("split", ["a", "b"])
def test_running_mean_std_matches_sb3(impl, split):
    inputs, expected, entry = read_golden(PATH)
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    sizes = [int(s) for s in inputs[f"split_{split}"].tolist()]
    rms = impl.RunningMeanStd(shape=(3,))
    start = 0
    for t, size in enumerate(sizes):
        batch = inputs["stream"][start:start + size]  # [size, 3]
        start += size
        rms.update(batch)
        state = rms.state_dict()
        # NUM-6: Chan's update from (mean 0, var 1, count 1e-4), as SB3
        for key in ("mean", "var", "count"):
            assert_close("NUM-6", f"{key} after batch {t} of split {sizes} vs SB3 RunningMeanStd",
                         state[key].cpu(), expected[f"{key}_{split}"][t], batch=batch, **tol)


def test_obs_normalizer_matches_sb3_vec_normalize(impl):
    inputs, expected, entry = read_golden(PATH)
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    norm = impl.ObsNormalizer(shape=(3,), epsilon=1e-8, clip=10.0)
    norm.commit(inputs["stream"])
    # NUM-10: clip((obs - mean) / sqrt(var + eps), ±clip), SB3 VecNormalize._normalize_obs
    assert_close("NUM-10", "normalize(obs) vs SB3 VecNormalize", norm.normalize(inputs["obs"]).cpu(),
                 expected["normalized"], obs=inputs["obs"], **tol)
