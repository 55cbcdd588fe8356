"""Every registered ``world_model`` implementation's loss terms reproduce sheeprl 0.8.4's DreamerV3
``reconstruction_loss`` (fixtures/world_model/sheeprl_reconstruction_loss.json) on fixed head outputs, with the
paper preset (``WorldModelConfig.with_paper_kl_scales()``: dyn 0.5, rep 0.1, free bits 1): the image, reward,
continue and KL terms, the raw dynamics KL and the total. The implementation's own ``kl_loss`` and its model's
``reward_nll`` (its two-hot ``log_prob``) and ``continue_target`` compute them; the conversions from sheeprl's
layout are spelled out below (and in the manifest's convention)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlspec.contracts.world_model import WorldModelConfig
from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.spec.core import assert_close

CONTRACT = "world_model"


def _sheeprl_rows(reward: torch.Tensor, cont: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Our replay layout [T, B] (reward / continue of the transition out of obs t) -> the targets sheeprl pairs
    with the heads of its rows s_0..s_T [T+1, B] (those of arriving at s_t)."""
    start = torch.zeros(1, reward.shape[1])  # [1, B]
    rewards = torch.cat((start, reward), 0)  # sheeprl row 0 is an episode start: reward 0; row t+1 = our row t
    continues = torch.cat((1 - start, cont), 0)  # sheeprl target 1 − terminated: 1 at the start, our continue after
    return rewards, continues


def test_reconstruction_loss_matches_sheeprl(impl):
    inputs, expected, entry = read_golden("world_model/sheeprl_reconstruction_loss.json")
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    _, _, S, K = inputs["prior_logits"].shape
    # tiny networks: only the loss terms are used; sheeprl's reward support is 255 bins on [−20, 20] (our default)
    config = WorldModelConfig(num_actions=2, deter=2, stoch=S, classes=K, hidden=2, embed_dim=2, pool=8,
                              reward_bins=inputs["reward_logits"].shape[-1]).with_paper_kl_scales()
    model = impl.WorldModel(config, torch.Generator().manual_seed(0))
    rewards, continues = _sheeprl_rows(inputs["reward"], inputs["cont"])  # [T+1, B] each
    # sheeprl's MSEDistribution(dims=3).log_prob: −Σ over C, H, W of squared errors; ours sums the flat pixels
    recon = (inputs["recon"].flatten(2) - inputs["obs"].flatten(2)).square().sum(-1).mean()
    reward = model.reward_nll(inputs["reward_logits"], rewards).mean()  # two-hot of symlog, sheeprl's 255 bins
    # sheeprl's Independent(BernoulliSafeMode(logits), 1).log_prob over a trailing 1 = −BCE with logits
    cont = F.binary_cross_entropy_with_logits(inputs["cont_logits"], model.continue_target({"continue": continues}))
    kl = impl.kl_loss(inputs["post_logits"], inputs["prior_logits"], config.free_bits, config.dyn_scale,
                      config.rep_scale)  # sheeprl's categorical_kl, same [T, B, S, K] logits, no reshaping
    total = recon + reward + cont + kl.loss  # sheeprl: mean(kl_regularizer 1·kl + obs + reward + continue)
    for clause, what, got, theirs in (
            ("WM-4", "reconstruction Σ_pixels (recon − obs)²", recon, "observation_loss"),
            ("WM-6", "reward −log_prob two-hot", reward, "reward_loss"),
            ("WM-5", "continue BCE vs 1 − terminated", cont, "continue_loss"),
            ("WM-1", "mean raw dyn KL(sg(post) ‖ prior)", kl.dyn.mean(), "kl"),
            ("WM-3", "kl_loss 0.5·mean(max(1, dyn)) + 0.1·mean(max(1, rep))", kl.loss, "state_loss"),
            ("WM-4", "total loss", total, "total")):
        assert_close(clause, f"{what} vs sheeprl {theirs}", got.detach().float(), expected[theirs], **tol)


def test_fixture_exercises_free_nats_on_both_sides():
    """The fixture is informative: some (t, b) have a dynamics KL below the 1-nat floor and some above."""
    inputs, _, _ = read_golden("world_model/sheeprl_reconstruction_loss.json")
    log_p, log_q = inputs["post_logits"].log_softmax(-1), inputs["prior_logits"].log_softmax(-1)
    dyn = (log_p.exp() * (log_p - log_q)).sum((-2, -1))  # [T+1, B]
    assert bool((dyn < 1).any()) and bool((dyn > 1).any()), f"dyn KL {dyn.tolist()} all on one side of 1 nat"
