"""Golden fixture for contract ``world_model`` from sheeprl 0.8.4's DreamerV3 world-model loss
(``sheeprl.algos.dreamer_v3.loss.reconstruction_loss``).

The heads' outputs are fixed tensors, wrapped in the distributions sheeprl's ``train`` builds from them
(sheeprl/algos/dreamer_v3/dreamer_v3.py): ``MSEDistribution(recon, dims=3)`` for the image,
``TwoHotEncodingDistribution(reward_logits, dims=1)`` (255 bins on [−20, 20], symlog) for the reward,
``Independent(BernoulliSafeMode(logits=cont_logits), 1)`` for the continue flag with target 1 − terminated,
and the prior / posterior logits [T, B, S, K] that ``reconstruction_loss`` passes to its ``categorical_kl``.
The paper preset: kl_dynamic 0.5, kl_representation 0.1, kl_free_nats 1, kl_regularizer 1,
continue_scale_factor 1 (sheeprl's DreamerV3 defaults).

sheeprl's rows are the states s_0..s_T with the reward / terminal flag of *arriving* at s_t at row t (row 0
an episode start: reward 0, not terminated). The fixture stores the targets in our replay layout (seed
§2.3: reward[t] / continue[t] of the transition *out of* obs t, T rows) and builds sheeprl's from them.
"""

from __future__ import annotations

import torch
from sheeprl.algos.dreamer_v3.loss import reconstruction_loss
from sheeprl.utils.distribution import BernoulliSafeMode, MSEDistribution, TwoHotEncodingDistribution
from torch.distributions import Independent

from rlspec.golden_bridge.manifest import Fixture

PACKAGE = "sheeprl"
EPS32 = torch.finfo(torch.float32).eps
T, B, S, K, C, PH, PW, BINS = 4, 3, 3, 4, 1, 3, 4, 255  # transitions, batch, stoch, classes, image C × PH × PW
KL_DYNAMIC, KL_REPRESENTATION, KL_FREE_NATS = 0.5, 0.1, 1.0  # the paper preset (WorldModelConfig.with_paper_kl_scales)


def _round(t: torch.Tensor, step: float = 1 / 64) -> torch.Tensor:
    return torch.round(t / step) * step  # short JSON decimals


def sheeprl_targets(reward: torch.Tensor, cont: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Our layout (reward, continue [T, B], out of obs t) -> sheeprl's data["rewards"], data["terminated"]
    [T+1, B, 1] (arriving at s_t; row 0 an episode start with reward 0, not terminated)."""
    start = torch.zeros(1, reward.shape[1])  # [1, B]
    rewards = torch.cat((start, reward), 0)  # [T+1, B]: sheeprl row t+1 = our row t
    terminated = torch.cat((start, 1 - cont), 0)  # [T+1, B]: sheeprl terminated = 1 − our continue
    return rewards.unsqueeze(-1), terminated.unsqueeze(-1)


def world_model_loss(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    n = T + 1  # sheeprl rows s_0..s_T
    obs = torch.randint(0, 4, (n, B, C, PH, PW), generator=g) / 3  # [T+1, B, C, PH, PW] packed2 levels v/3
    recon = _round(obs + 0.3 * torch.randn(obs.shape, generator=g))  # [T+1, B, C, PH, PW] decoder output
    reward_logits = _round(torch.randn(n, B, BINS, generator=g))  # [T+1, B, 255]
    cont_logits = _round(2 + 2 * torch.randn(n, B, generator=g))  # [T+1, B]
    # post near the prior in some (t, b) (KL under the 1-nat floor), far in others
    prior_logits = _round(torch.randn(n, B, S, K, generator=g))  # [T+1, B, S, K]
    spread = torch.tensor([0.1, 0.5, 3.0]).reshape(1, B, 1, 1)  # per batch column: KL below / near / above 1 nat
    post_logits = _round(prior_logits + spread * torch.randn(n, B, S, K, generator=g))  # [T+1, B, S, K]
    # rewards in our layout: 0, on a bin, between bins, large (symlog), negative
    reward = torch.tensor([[0.0, 1.0, -3.5], [0.25, 0.0, 120.0], [-0.75, 2.0, 0.0], [0.0, -40.0, 1.0]])  # [T, B]
    cont = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])  # [T, B] 0: terminated
    rewards, terminated = sheeprl_targets(reward, cont)
    po = {"rgb": MSEDistribution(recon, dims=3)}
    pr = TwoHotEncodingDistribution(reward_logits, dims=1)
    pc = Independent(BernoulliSafeMode(logits=cont_logits.unsqueeze(-1)), 1)
    total, kl, state_loss, reward_loss, observation_loss, continue_loss = reconstruction_loss(
        po, {"rgb": obs}, pr, rewards, prior_logits, post_logits, KL_DYNAMIC, KL_REPRESENTATION, KL_FREE_NATS,
        kl_regularizer=1.0, pc=pc, continue_targets=1 - terminated, continue_scale_factor=1.0)
    return Fixture(
        path="world_model/sheeprl_reconstruction_loss.json", contract="world_model", package=PACKAGE,
        qualname="sheeprl.algos.dreamer_v3.loss.reconstruction_loss (+ utils.distribution MSEDistribution, "
                  "TwoHotEncodingDistribution, BernoulliSafeMode)",
        seed=seed, atol=64 * EPS32, rtol=64 * EPS32,
        why="float32 on both sides (our reference two-hot in float64); means of (T+1)·B terms of 255-bin "
            "log-softmaxes, 12-pixel squared-error sums and 12-class KLs: a few dozen eps relative",
        convention="sheeprl rows s_0..s_T carry the reward / terminal of arriving at s_t (row 0: episode start, "
                   "reward 0, not terminated); inputs reward/continue are ours [T, B] (out of obs t): sheeprl "
                   "rewards[t+1] = reward[t], terminated[t+1] = 1 − continue[t]; sheeprl continue target = "
                   "1 − terminated; image loss = Σ_pixels (recon − obs)² (MSEDistribution, dims 3); KL = sheeprl "
                   "categorical_kl on [T+1, B, S, K] logits; kl_dynamic 0.5, kl_representation 0.1, free nats 1, "
                   "kl_regularizer 1, continue_scale_factor 1; expected kl = mean raw dyn KL, state_loss = scaled "
                   "KL with free nats",
        inputs=dict(obs=obs, recon=recon, reward_logits=reward_logits, cont_logits=cont_logits,
                    prior_logits=prior_logits, post_logits=post_logits, reward=reward, cont=cont),
        expected=dict(total=total, kl=kl, state_loss=state_loss, reward_loss=reward_loss,
                      observation_loss=observation_loss, continue_loss=continue_loss))


GENERATORS = [world_model_loss]
