"""The PPO-family core (rlspec/algos/safe_ppo.py, reference kit) against OmniSafe 0.5.0's PPOLag update on a
fixed batch (fixtures/safe_ppo/omnisafe_ppo_lag_update.json, golden_bridge/omnisafe_ppo_lag.py): advantage
processing, the λ sequence, the combined advantage and the clipped policy loss."""

from __future__ import annotations

import math

import torch

from rlspec.algos.safe_ppo import Kit, PPOConfig, combine_advantages, policy_loss, process_advantages
from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.models.actor_critic import GaussianActor
from rlspec.spec.core import assert_close

KIT = Kit.reference()
inputs, expected, entry = read_golden("safe_ppo/omnisafe_ppo_lag_update.json")
TOL = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])


def _actor() -> GaussianActor:
    obs_dim, act_dim = inputs["obs"].shape[1], inputs["act"].shape[1]
    hidden = inputs["actor.mean.0.weight"].shape[0]
    actor = GaussianActor(obs_dim, act_dim, (hidden,), "tanh", torch.Generator()).double()
    actor.load_state_dict({k.removeprefix("actor."): v for k, v in inputs.items() if k.startswith("actor.")})
    return actor


def test_advantage_processing_matches_omnisafe_buffer():
    adv_r, adv_c = process_advantages(inputs["adv_r_raw"], inputs["adv_c_raw"], PPOConfig())
    assert_close("SAFE-PPO", "adv_r", adv_r, expected["adv_r"], **TOL)
    assert_close("SAFE-PPO", "adv_c", adv_c, expected["adv_c"], **TOL)


def test_lambda_combined_advantage_and_policy_loss_match_omnisafe():
    adv_r, adv_c = process_advantages(inputs["adv_r_raw"], inputs["adv_c_raw"], PPOConfig())
    lagrange = KIT.OmniSafeLagrange()  # PPOLag.yaml defaults: d 25, λ0 0.001, lr 0.035
    ppo = PPOConfig()
    logp, entropy = _actor().log_prob(inputs["obs"], inputs["act"])
    ratio = (logp - inputs["logp"]).exp()
    assert bool(((ratio - 1).abs() > ppo.clip).any()), "the fixture must exercise clipping"
    for k, jc in enumerate(inputs["jc"].tolist()):
        lam = float(lagrange.update(jc))  # before the policy update, as PPOLag._update
        assert_close("SAFE-PPO", f"λ[{k}]", torch.tensor(lam, dtype=torch.float64), expected["lam"][k], **TOL)
        adv = combine_advantages(adv_r, adv_c, lam, "omnisafe")
        assert_close("SAFE-PPO", f"adv[{k}]", adv, expected["adv"][k], **TOL)
        loss, events = policy_loss(logp, entropy, inputs["logp"], adv, ppo, KIT)
        assert_close("SAFE-PPO", f"loss_pi[{k}]", loss.detach(), expected["loss_pi"][k], **TOL)
        assert int(events["ratio_clamped"]) == 0


def test_the_entropy_bonus_is_omnisafes_mean_over_batch_and_action_dimensions():
    # OmniSafe 0.5.0 PPO._loss_pi: loss -= entropy_coef · distribution.entropy().mean() (over batch and action
    # dimensions; Train/Entropy logs that mean). H(N(μ, σ²)) = ½·ln(2πe) + ln σ per dimension.
    actor = _actor()
    with torch.no_grad():  # unequal σ per dimension: a sum over dimensions, or one dimension, differs
        actor.log_std.copy_(torch.linspace(-1.0, 0.5, actor.log_std.numel(), dtype=torch.float64))
    assert actor.log_std.numel() >= 2, "the fixture's actor must have several action dimensions"
    logp, entropy = actor.log_prob(inputs["obs"], inputs["act"])
    per_dim = 0.5 * math.log(2 * math.pi * math.e) + actor.log_std.detach()  # [A]
    assert_close("SAFE-PPO", "entropy", entropy.detach(), per_dim.mean().expand_as(entropy), atol=1e-12, rtol=0)
    adv = torch.linspace(-1.0, 1.0, logp.numel(), dtype=torch.float64)
    plain, _ = policy_loss(logp, entropy, inputs["logp"], adv, PPOConfig(entropy_coef=0.0), KIT)
    bonus, _ = policy_loss(logp, entropy, inputs["logp"], adv, PPOConfig(entropy_coef=0.01), KIT)
    assert_close("SAFE-PPO", "entropy bonus", (plain - bonus).detach(), 0.01 * per_dim.mean(), atol=1e-12, rtol=0)
