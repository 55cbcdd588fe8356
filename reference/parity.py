"""Reference ``parity`` (spec/parity.py): one PPO-Lagrangian update and PPOLagSem's semantic wrapper.

``PPOLagLearner`` is the plain learner: a tiny MLP actor-critic (categorical policy, reward and cost
critics) initialized from an explicit ``torch.Generator``, one Adam optimizer, the update of the spec's
docstring. ``SemanticPPOLag`` is the seed's ``PPOLagSem`` (§4.4, §25.1): a subclass that, only when
``semantic_cfgs["enable"]`` is true, imports the shaping code and builds the semantic state (prompt
centroids, pool, normalizer, potential shaper) used by the rollout hook ``process_rewards``. Disabled,
it is the plain learner: no extra attribute values, modules, imports or log keys.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rlspec.contracts.parity import ADV_EPS, validate_batch, validate_config
from rlspec.reference.lagrange import DualAscent

SEMANTIC_MODULES = ("rlspec.reference.shaping",)


def _mlp(sizes: list[int], generator: torch.Generator, dtype: torch.dtype) -> nn.Sequential:
    """Linear/Tanh layers, weights ~ N(0, 1/fan_in), zero biases, all drawn from ``generator``."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        # skip_init: nn.Linear's own initialization would draw from the caller's global RNG (PARITY-7)
        linear = nn.utils.skip_init(nn.Linear, fan_in, fan_out, dtype=dtype)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(fan_out, fan_in, generator=generator, dtype=dtype) / math.sqrt(fan_in))
            linear.bias.zero_()
        layers += [linear] if i == len(sizes) - 2 else [linear, nn.Tanh()]
    return nn.Sequential(*layers)


class PPOLagLearner(nn.Module):
    def __init__(self, config: dict, seed: int):
        super().__init__()
        cfg = validate_config(config)
        self.cfg = cfg
        self.generator = torch.Generator().manual_seed(seed)
        dims = [cfg["obs_dim"], cfg["hidden"], cfg["hidden"]]
        self.actor = _mlp(dims + [cfg["n_actions"]], self.generator, cfg["dtype"])
        self.reward_critic = _mlp(dims + [1], self.generator, cfg["dtype"])
        self.cost_critic = _mlp(dims + [1], self.generator, cfg["dtype"])
        self.optimizer = torch.optim.Adam(self.parameters(), lr=cfg["lr"])
        self.dual = DualAscent(cfg["cost_limit"], cfg["lambda_lr"], cfg["lagrangian_init"])

    def log_prob(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:  # [N, obs_dim], [N] -> [N]
        return torch.log_softmax(self.actor(obs), -1).gather(-1, act[:, None])[:, 0]

    @property
    def lagrangian_multiplier(self) -> float:
        return float(self.dual.lagrangian_multiplier)

    def optimizer_state_dict(self) -> dict:
        return self.optimizer.state_dict()

    @staticmethod
    def combined_advantage(adv_r: torch.Tensor, adv_c: torch.Tensor, lam: float) -> torch.Tensor:
        """(Â_r − λ·Â_c) / (1 + λ), Â_r standardized, Â_c centered (OmniSafe PPOLag): [N]."""
        adv_r = (adv_r - adv_r.mean()) / (adv_r.std(unbiased=False) + ADV_EPS)
        return (adv_r - lam * (adv_c - adv_c.mean())) / (1 + lam)

    def update(self, batch: dict) -> dict[str, float]:
        validate_batch(batch, self.cfg)
        cfg, lam = self.cfg, self.lagrangian_multiplier
        adv = self.combined_advantage(batch["adv_r"], batch["adv_c"], lam)  # [N]
        n = adv.shape[0]
        sums = dict.fromkeys(("Loss/Loss_pi", "Loss/Loss_reward_critic", "Loss/Loss_cost_critic",
                              "Train/Entropy", "Train/ClipFrac"), 0.0)
        minibatches = 0
        for _ in range(cfg["epochs"]):
            perm = torch.randperm(n, generator=self.generator)
            for start in range(0, n, cfg["minibatch_size"]):
                idx = perm[start:start + cfg["minibatch_size"]]  # [M]
                obs = batch["obs"][idx]
                log_probs = torch.log_softmax(self.actor(obs), -1)  # [M, n_actions]
                ratio = torch.exp(log_probs.gather(-1, batch["act"][idx, None])[:, 0] - batch["logp_old"][idx])
                clipped = torch.clamp(ratio, 1 - cfg["clip"], 1 + cfg["clip"])
                loss_pi = -torch.minimum(ratio * adv[idx], clipped * adv[idx]).mean()
                entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
                loss_v = ((self.reward_critic(obs)[:, 0] - batch["target_value_r"][idx]) ** 2).mean()
                loss_vc = ((self.cost_critic(obs)[:, 0] - batch["target_value_c"][idx]) ** 2).mean()
                total = loss_pi + cfg["vf_coef"] * loss_v + cfg["cost_vf_coef"] * loss_vc - cfg["ent_coef"] * entropy
                self.optimizer.zero_grad()
                total.backward()
                self.optimizer.step()
                clip_frac = ((ratio - 1).abs() > cfg["clip"]).double().mean()
                for key, value in zip(sums, (loss_pi, loss_v, loss_vc, entropy, clip_frac)):
                    sums[key] += value.item()
                minibatches += 1
        # projected dual ascent after the policy epochs (§2A, §5.5 step 4)
        self.dual.update(float(batch["ep_cost"]))
        logs = {k: v / minibatches for k, v in sums.items()}
        logs["Metrics/LagrangeMultiplier"] = self.lagrangian_multiplier
        return logs


class SemanticPPOLag(PPOLagLearner):
    """PPOLagSem: semantic shaping on the rollout side, strictly opt-in (§4.4, §25.16)."""

    def __init__(self, config: dict, semantic_cfgs: dict, seed: int):
        super().__init__(config, seed)
        self.semantic_enabled = bool(semantic_cfgs.get("enable", False))
        if self.semantic_enabled:
            self._build_semantics(semantic_cfgs)

    def _build_semantics(self, sc: dict) -> None:
        from rlspec.reference import (
            shaping,  # only here: disabled semantics import nothing (PARITY-3)
        )

        num_envs, prompts = sc["num_envs"], (sc["safe_prompts"], sc["unsafe_prompts"])
        self.semantics = dict(
            sc=sc, shaping=shaping, mu=tuple(shaping.prompt_centroid(p) for p in prompts),
            pool=shaping.TemporalPool(num_envs, prompts[0].shape[1], sc.get("temporal_window", 1)),
            normalizer=shaping.MarginNormalizer(sc.get("norm_window", 1000), sc.get("margin_scale", 1.0),
                                                sc.get("margin_norm_enable", True)),
            potential=shaping.PotentialShaper(num_envs, sc["gamma"]) if sc.get("potential_enable") else None,
            beta=0.0, captures=0)

    def process_rewards(self, reward: torch.Tensor, step: int, embeddings: torch.Tensor | None = None,
                        captured: torch.Tensor | None = None, is_first: torch.Tensor | None = None) -> torch.Tensor:
        """reward [B] -> shaped reward [B]; with semantics disabled the rewards themselves."""
        if not self.semantic_enabled or embeddings is None:
            return reward
        s, sc = self.semantics, self.semantics["sc"]
        shaping = s["shaping"]
        captured = torch.ones(reward.shape[0], dtype=torch.bool) if captured is None else captured
        if is_first is not None:
            s["pool"].reset(is_first)
            if s["potential"] is not None:
                s["potential"].reset(is_first)
        pooled = s["pool"](embeddings, captured)  # [B, D]
        margin = torch.zeros_like(reward)
        if bool(captured.any()):
            m = shaping.semantic_margin(pooled[captured], *s["mu"]).to(reward.dtype)
            margin[captured] = s["normalizer"](m)
        s["beta"] = shaping.beta_schedule(step, sc["total_steps"], sc["beta_start"], sc["beta_end_step_fraction"])
        s["captures"] += int(captured.sum())
        if s["potential"] is not None:
            return reward + s["potential"](margin, captured, s["beta"])
        return shaping.additive_shaping(reward, s["beta"], margin, captured)

    def update(self, batch: dict) -> dict[str, float]:
        logs = super().update(batch)
        if self.semantic_enabled:
            s = self.semantics
            logs.update({"Semantics/Beta": s["beta"], "Semantics/ClampFrac": float(s["normalizer"].clamp_fraction),
                         "Semantics/CaptureCount": float(s["captures"])})
        return logs


def make_learner(config: dict, seed: int) -> PPOLagLearner:
    return PPOLagLearner(config, seed)


def make_semantic_learner(config: dict, semantic_cfgs: dict, seed: int) -> SemanticPPOLag:
    return SemanticPPOLag(config, semantic_cfgs, seed)
