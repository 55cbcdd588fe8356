"""Every registered ``rssm`` implementation, loaded with the fixture's weights, reproduces sheeprl 0.8.4's
RSSM unroll (fixtures/rssm/sheeprl_observe.json): prior and posterior logits, h, the samples drawn by the
spec's sampler from the stored generator seed, and one img_step — with is_first mid-sequence and twice in
a row. The fixture's actions are in the seed's layout; sheeprl was fed them shifted (see the manifest's
convention), so agreement also pins the action alignment and the zeroing at a reset."""

from __future__ import annotations

import torch

from rlspec.contracts.rssm import RSSMConfig
from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close

CONTRACT = "rssm"


def _fixture():
    inputs, expected, entry = read_golden("rssm/sheeprl_observe.json")
    weights = {k.removeprefix("weight."): v for k, v in inputs.items() if k.startswith("weight.")}
    T, B, S, K = expected["prior_logits"].shape
    config = RSSMConfig(embed_dim=inputs["embed"].shape[-1], num_actions=weights["img_in.weight"].shape[1] - S * K,
                        deter=weights["initial_h"].shape[0], stoch=S, classes=K,
                        hidden=weights["img_in.weight"].shape[0])  # unimix 0.01, LN eps 1e-3, learned h0
    return inputs, expected, entry, weights, config


def test_observe_and_img_step_match_sheeprl(impl):
    inputs, expected, entry, weights, config = _fixture()
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    model = impl.RSSM(config)
    model.load_state_dict(weights)
    g = torch.Generator().manual_seed(entry["seed"])
    with torch.no_grad():
        out = model.observe(inputs["embed"], inputs["action"].long(), inputs["is_first"].bool(), g)
        img_prior, img_h, img_z = model.img_step(out.state.h, out.state.z, inputs["img_action"].long(), g)
    for what, got in (("prior_logits", out.prior_logits), ("post_logits", out.post_logits), ("h", out.h),
                      ("img_prior_logits", img_prior), ("img_h", img_h)):
        assert_close("RSSM-4", f"{what} vs sheeprl", got, expected[what], **tol)
    assert_close("RSSM-10", "sampled classes vs the stored indices", out.z.argmax(-1), expected["z_index"], atol=0)
    assert_close("RSSM-10", "img_step sampled classes vs the stored indices", img_z.argmax(-1),
                 expected["img_z_index"], atol=0)
