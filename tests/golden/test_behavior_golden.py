"""Every registered ``behavior`` implementation reproduces sheeprl 0.8.4's behaviour learning on a tiny imagined
batch (fixtures/behavior/sheeprl_behavior_losses.json): λ-values, discounts, values, the Moments update, the actor
and critic losses and their gradients w.r.t. the actor's and the critic's weights."""

from __future__ import annotations

import torch

from rlspec.contracts.behavior import BehaviorConfig
from rlspec.golden_bridge.fixture_io import read_golden
from rlspec.reference.return_ema import ReturnEMA
from rlspec.spec.core import assert_close

CONTRACT = "behavior"
SHEEPRL = BehaviorConfig(horizon=3, gamma=1 - 1 / 333, lam=0.95, entropy_coef=3e-4, slow_reg=1.0,
                         continue_mode="mode")


def test_sheeprl_behavior(impl):
    inputs, expected, entry = read_golden("behavior/sheeprl_behavior_losses.json")
    tol = dict(atol=entry["tolerance"]["atol"], rtol=entry["tolerance"]["rtol"])
    traj = inputs["traj"]  # [H+1, N, L]
    actor_w, actor_b, critic_b = (inputs[k].clone().requires_grad_(True) for k in ("actor_w", "actor_b", "critic_b"))
    ema = ReturnEMA()
    ema.load_state_dict(dict(low=inputs["ema_low"], high=inputs["ema_high"]))
    out = impl.behavior_losses(
        reward=inputs["reward"], cont_logits=inputs["cont_logits"],
        value_logits=torch.nn.functional.linear(traj, inputs["critic_w"], critic_b),
        slow_value_logits=torch.nn.functional.linear(traj, inputs["target_w"], inputs["target_b"]),
        actor_logits=torch.nn.functional.linear(traj, actor_w, actor_b), actions=inputs["actions"].long(),
        start_terminal=inputs["start_terminal"].bool(), return_ema=ema, cfg=SHEEPRL)
    checks = (("BEHAV-4", "returns", "lambda_values"), ("BEHAV-3", "weights", "discount"),
              ("BEHAV-4", "values", "values"), ("BEHAV-4", "offset", "offset"), ("BEHAV-4", "invscale", "invscale"),
              ("BEHAV-5", "actor_loss", "policy_loss"), ("BEHAV-5", "critic_loss", "value_loss"))
    for clause, ours, theirs in checks:
        assert_close(clause, f"{ours} vs sheeprl {theirs}", torch.as_tensor(out[ours]).float(), expected[theirs], **tol)
    out["actor_loss"].backward()
    out["critic_loss"].backward()
    for clause, got, theirs in (("BEHAV-5", actor_w.grad, "actor_w_grad"), ("BEHAV-5", actor_b.grad, "actor_b_grad"),
                                ("BEHAV-5", critic_b.grad, "critic_b_grad")):
        assert_close(clause, f"d loss / d {theirs.removesuffix('_grad')} vs sheeprl", got, expected[theirs], **tol)
