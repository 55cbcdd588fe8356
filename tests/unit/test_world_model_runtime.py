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


def test_kl_loss_with_the_paper_preset_is_sheeprls_formula():
    """sheeprl 0.8.4 ``algos/dreamer_v3/loss.py`` reconstruction_loss, transcribed with torch.distributions
    (its KL terms, kl_regularizer 1): kl_dynamic·max(KL(sg(post) ‖ prior), fb) + kl_representation·max(
    KL(post ‖ sg(prior)), fb) per (t, b), then the mean. Not a golden fixture (sheeprl is not imported)."""
    from torch.distributions import Independent, OneHotCategoricalStraightThrough, kl_divergence

    from rlspec.reference.world_model import kl_loss

    g = torch.Generator().manual_seed(0)
    post, prior = (3 * torch.randn(2, 5, 3, 4, 4, generator=g)).log_softmax(-1).unbind(0)  # [T, B, S, K] each
    post[0] = prior[0]  # some (t, b) below the free bits, the rest above

    def dist(logits):
        return Independent(OneHotCategoricalStraightThrough(logits=logits), 1)

    scales = WorldModelConfig(num_actions=1).with_paper_kl_scales()
    fb = torch.full((5, 3), 1.0)
    dyn = scales.dyn_scale * torch.maximum(kl_divergence(dist(post.detach()), dist(prior)), fb)
    rep = scales.rep_scale * torch.maximum(kl_divergence(dist(post), dist(prior.detach())), fb)
    ours = kl_loss(post, prior, scales.free_bits, scales.dyn_scale, scales.rep_scale).loss
    torch.testing.assert_close(ours, (dyn + rep).mean(), rtol=1e-6, atol=1e-6)
