"""Golden fixture from OmniSafe 0.5.0's PPOLag update on a fixed tiny batch: advantage processing,
the λ step, the combined advantage and the clipped policy loss.

Nothing imports the omnisafe package (golden_bridge/omnisafe_trust_region.py's approach): the wheel's own
methods are compiled from its source and bound to a host object —
``OnPolicyBuffer.get`` (A_r standardized with the population std + 1e-8, A_c centered),
``Lagrange.update_lagrange_multiplier`` (Adam on −λ(J_c − d), clamped at 0), ``PPOLag._compute_adv_surrogate``
((A_r − λ·A_c)/(1 + λ)) and ``PPO._loss_pi`` (clip 0.2, entropy_coef 0) on a float64 tanh-MLP Gaussian actor
with OmniSafe's GaussianLearningActor interface. The policy is evaluated at θ, a perturbation of the θ_old that
sampled the actions, so that some ratios leave [1 − ε, 1 + ε] and clipping matters.
"""

from __future__ import annotations

import types

import torch

from rlspec.golden_bridge.manifest import Fixture
from rlspec.golden_bridge.omnisafe_lagrange import PACKAGE, VERSION, load_omnisafe_file
from rlspec.golden_bridge.omnisafe_trust_region import ALGOS, TinyActor, _Logger, omnisafe_functions

F64 = torch.float64
OBS, HIDDEN, ACT, N = 3, 4, 2, 48
LAGRANGE = dict(cost_limit=25.0, lagrangian_multiplier_init=0.001, lambda_lr=0.035)  # PPOLag.yaml
JC = (40.0, 40.0, 10.0)  # three updates: λ rises twice, then falls
CLIP = 0.2


def _named(actor: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {f"actor.{k}": v.detach().clone() for k, v in actor.state_dict().items()}


def ppo_lag_update(seed: int = 0) -> Fixture:
    g = torch.Generator().manual_seed(seed)
    n = HIDDEN * OBS + HIDDEN + ACT * HIDDEN + ACT + ACT
    theta_old = 0.5 * torch.randn(n, generator=g, dtype=F64)
    theta = theta_old + 0.15 * torch.randn(n, generator=g, dtype=F64)
    obs = torch.randn(N, OBS, generator=g, dtype=F64)
    old_actor = TinyActor(theta_old)
    with torch.no_grad():
        dist = old_actor(obs)
        act = dist.mean + dist.stddev * torch.randn(N, ACT, generator=g, dtype=F64)
        logp = old_actor.log_prob(act)
    adv_r_raw = 3.0 * torch.randn(N, generator=g, dtype=F64) + 1.0  # GAE outputs before processing
    adv_c_raw = 2.0 * torch.randn(N, generator=g, dtype=F64).abs() + 0.5 * act[:, 0]

    buffer = type("Buffer", (), omnisafe_functions("omnisafe/common/buffer/onpolicy_buffer.py", ("get",),
                                                   "OnPolicyBuffer"))()
    buffer.data = dict(obs=obs, act=act, logp=logp, adv_r=adv_r_raw.clone(), adv_c=adv_c_raw.clone(),
                       target_value_r=adv_r_raw, target_value_c=adv_c_raw, discounted_ret=adv_r_raw)
    buffer._standardized_adv_r = buffer._standardized_adv_c = True
    data = buffer.get()

    lagrange = load_omnisafe_file("omnisafe/common/lagrange.py").Lagrange(**LAGRANGE, lambda_optimizer="Adam")
    methods = omnisafe_functions(ALGOS + "naive_lagrange/ppo_lag.py", ("_compute_adv_surrogate",), "PPOLag")
    methods.update(omnisafe_functions(ALGOS + "base/ppo.py", ("_loss_pi",), "PPO"))
    host = type("OmniSafePPOLag", (), methods)()
    actor = TinyActor(theta)
    host._actor_critic = types.SimpleNamespace(actor=actor)
    host._cfgs = types.SimpleNamespace(algo_cfgs=types.SimpleNamespace(clip=CLIP, entropy_coef=0.0))
    host._logger = _Logger(0.0)
    host._lagrange = lagrange
    lams, advs, losses = [], [], []
    for jc in JC:
        lagrange.update_lagrange_multiplier(jc)  # PPOLag._update: λ first, then the policy update
        adv = host._compute_adv_surrogate(data["adv_r"], data["adv_c"])
        loss = host._loss_pi(obs, act, logp, adv)
        lams.append(lagrange.lagrangian_multiplier.detach().item())
        advs.append(adv.detach())
        losses.append(loss.detach())
    return Fixture(
        path="safe_ppo/omnisafe_ppo_lag_update.json", contract="safe_ppo", package=PACKAGE,
        qualname="omnisafe OnPolicyBuffer.get; Lagrange.update_lagrange_multiplier; PPOLag._compute_adv_surrogate; "
                 "PPO._loss_pi", seed=seed, atol=1e-7, rtol=1e-6,
        why="float64 actor and advantages, but OmniSafe's dist_statistics_scalar returns float32 mean/std and λ is "
            "a float32 Parameter (Adam in float32): O(1) values carry float32 rounding, ~1e-7 absolute",
        convention="adv_r/adv_c: OnPolicyBuffer.get(adv_r_raw, adv_c_raw) with standardized_adv_r/c True; for each "
                   "J_c in jc: λ[k] after update_lagrange_multiplier(J_c) (d 25, λ0 0.001, lr 0.035, Adam), "
                   "adv[k] = PPOLag._compute_adv_surrogate(adv_r, adv_c), loss_pi[k] = PPO._loss_pi(obs, act, logp, "
                   "adv[k]) at θ (actor.*: GaussianActor state_dict names) with clip 0.2, entropy_coef 0; "
                   "logp from θ_old",
        inputs=dict(obs=obs, act=act, logp=logp, adv_r_raw=adv_r_raw, adv_c_raw=adv_c_raw,
                    jc=torch.tensor(JC, dtype=F64), **_named(actor)),
        expected=dict(adv_r=data["adv_r"].detach(), adv_c=data["adv_c"].detach(), lam=torch.tensor(lams, dtype=F64),
                      adv=torch.stack(advs), loss_pi=torch.stack(losses)),
        version=VERSION)


GENERATORS = [ppo_lag_update]
