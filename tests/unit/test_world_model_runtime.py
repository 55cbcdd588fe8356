"""Runtime half of ``world_model``: configuration defaults, presets and validation, initialization from an
explicit generator (the global RNG untouched), and one state_dict loading into reference and fast."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rlspec.contracts.world_model import PAPER_KL_SCALES, WorldModelConfig
from rlspec.fast.world_model import WorldModel as Fast
from rlspec.reference.world_model import WorldModel as Reference

TINY = dict(num_actions=2, deter=8, stoch=2, classes=3, hidden=8, embed_dim=4, pool=8, reward_bins=15)


def test_defaults_are_the_seeds_with_the_paper_as_preset():
    c = WorldModelConfig(num_actions=3)
    assert (c.dyn_scale, c.rep_scale, c.free_bits, c.unpack_impl) == (1.0, 1.0, 1.0, "lut")
    paper = c.with_paper_kl_scales()
    assert (paper.dyn_scale, paper.rep_scale) == (0.5, 0.1) and PAPER_KL_SCALES == dict(dyn_scale=0.5, rep_scale=0.1)
    assert dataclasses.replace(paper, dyn_scale=1.0, rep_scale=1.0) == c
    assert c.rssm_config().embed_dim == c.embed_dim and c.feature_dim == c.deter + c.stoch * c.classes


@pytest.mark.parametrize("field, value, says", [
    ("pool", 3, "divide the frame 72 × 80"), ("pool", 0, "int >= 1"), ("free_bits", -0.5, "[0.0, inf)"),
    ("dyn_scale", float("inf"), "[0.0, inf)"), ("rep_scale", "0.1", "real number"),
    ("unpack_impl", "cuda", "('lut', 'triton', 'warp')"), ("reward_bins", 1, "int >= 2"),
    ("reward_low", 20.0, "'reward_low' < 'reward_high'"),
    ("unimix", 1.0, "[0.0, 1.0)"), ("num_actions", 0, "int >= 1"),
])
def test_bad_config_names_the_field(field, value, says):
    with pytest.raises((ValueError, TypeError)) as err:
        WorldModelConfig(**{**TINY, field: value})
    msg = str(err.value)
    assert f"'{field}'" in msg and says in msg, msg


def test_build_leaves_the_global_rng_untouched_and_one_state_dict_loads_into_both():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = Reference(WorldModelConfig(**TINY), torch.Generator().manual_seed(5))
    b = Reference(WorldModelConfig(**TINY), torch.Generator().manual_seed(5))
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    fast = Fast(WorldModelConfig(**TINY))
    fast.load_state_dict(a.state_dict())  # strict: same names and shapes


def test_config_type_is_checked():
    with pytest.raises(TypeError, match="'config' must be a WorldModelConfig"):
        Reference(dict(TINY))
