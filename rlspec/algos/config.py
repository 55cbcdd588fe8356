"""The algorithms' hyper-parameters, one dataclass per algorithm family, one docstring per field (the
`--set KEY=VALUE` reference): the safe PPO family's PPOConfig and SafetyConfig (and which algorithm uses
what: ALGOS), the trust-region family's TrustRegionConfig, DreamerV3's DreamerConfig, the bonus-phase
learner's LearnerConfig. Imports only the standard library and the contracts' torch-free parameters, so that
`rlspec train ENGINE --help` and every config check run before torch is imported; the algorithm modules
(safe_ppo, trust_region, dreamer, bonus_vtrace) re-export what they use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from rlspec.contracts.params import (
    CG_DAMPING,
    CG_ITERS,
    CPO_LINE_SEARCH_STEPS,
    LINE_SEARCH_DECAY,
    MAX_KL,
    P3O_KAPPA,
    TRPO_LINE_SEARCH_STEPS,
)

KITS = ("reference", "fast")  # a run's kit: the contracts' reference implementations, or the fast twins

# ------------------------------------------------------------------------------ safe PPO family (safe_ppo.py)
@dataclass(frozen=True)
class AlgoSpec:
    multiplier: Literal["none", "lagrange", "pid"]
    """How λ is driven: not at all, OmniSafe's Adam Lagrange, or the PID Lagrangian."""
    budget: Literal["none", "saute", "simmer"]
    """Sauté state augmentation (fixed budget) or Simmer (budget set by a PID each epoch)."""
    use_cost: bool
    """Train a cost critic and compute cost advantages (OmniSafe's use_cost)."""
    family: Literal["ppo", "trust_region", "p3o"] = "ppo"
    """Which update trains the actor: this module's clipped surrogate, or rlspec/algos/trust_region.py's
    natural-gradient step (TRPO, TRPOLag, CPO) or P3O loss."""


ALGOS = {
    "PPO": AlgoSpec("none", "none", False),
    "PPOLag": AlgoSpec("lagrange", "none", True),
    # PPOLag plus the semantic side (PPOLagSem design, rlspec/semantics), which the engine adds around this core
    "PPOLagSem": AlgoSpec("lagrange", "none", True),
    "CPPOPID": AlgoSpec("pid", "none", True),
    "PPOSaute": AlgoSpec("none", "saute", False),
    "PPOSimmerPID": AlgoSpec("none", "simmer", False),
    # rlspec/algos/trust_region.py
    "TRPO": AlgoSpec("none", "none", False, "trust_region"),
    "TRPOLag": AlgoSpec("lagrange", "none", True, "trust_region"),
    "TRPOPID": AlgoSpec("pid", "none", True, "trust_region"),
    "CPO": AlgoSpec("none", "none", True, "trust_region"),
    "P3O": AlgoSpec("none", "none", True, "p3o"),
}


@dataclass(frozen=True)
class PPOConfig:
    update_iters: int = 40
    """Epochs over the rollout per update (OmniSafe update_iters)."""
    batch_size: int = 64
    """Minibatch size."""
    clip: float = 0.2
    """PPO ratio clip ε."""
    target_kl: float | None = 0.02
    """The KL early stop's threshold (none: never stop); see kl_check."""
    kl_check: Literal["minibatch", "pass"] = "minibatch"
    """minibatch: before every optimizer step, stop when the minibatch's k3-KL exceeds 1.5·target_kl (PPO review
    HIGH-2); pass: OmniSafe 0.5.0's, after each pass over the rollout, stop when the exact KL(π_old‖π), summed
    over action dimensions and averaged over the rollout, exceeds target_kl."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient α."""
    gamma: float = 0.99
    """Reward discount γ."""
    cost_gamma: float = 0.99
    """Cost discount γ_c."""
    lam: float = 0.95
    """GAE λ of the reward."""
    lam_c: float = 0.95
    """GAE λ of the cost."""
    value_clip: float | None = None
    """Value clipping range around the rollout's values, its own range (PPO review HIGH-4); none = no clipping
    (OmniSafe)."""
    max_grad_norm: float | None = 40.0
    """Gradient norm clip of each network (none: off)."""
    critic_norm_coef: float = 0.001
    """L2 penalty coefficient on critic weights (OmniSafe use_critic_norm)."""
    actor_lr: float = 3e-4
    """Actor Adam learning rate."""
    critic_lr: float = 3e-4
    """Critics' Adam learning rate."""
    linear_lr_decay: bool = True
    """Actor learning rate decays linearly to 0 over the run (OmniSafe linear_lr_decay)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of actor and critics."""
    activation: str = "tanh"
    """Hidden activation: tanh, relu or elu."""
    standardize_reward_adv: bool = True
    """A_r ← (A_r − mean)/(std + 1e-8) over the rollout."""
    center_cost_adv: bool = True
    """A_c ← A_c − mean over the rollout."""
    adv_combine: Literal["omnisafe", "seed"] = "omnisafe"
    """omnisafe: (A_r − λ·A_c)/(1 + λ); seed: A_r − λ·A_c (PPOLagSem design §4.0.2)."""
    lambda_update: Literal["before", "after"] = "before"
    """Update λ before the policy update (OmniSafe) or after it (PPOLagSem design §5.5)."""
    obs_normalize: bool = True
    """Normalize observations with running statistics, frozen during each rollout (PPO review CRITICAL-1)."""
    obs_norm_update: Literal["rollout", "step"] = "rollout"
    """When those statistics learn: 'rollout', from the whole rollout after its update (frozen while it is
    collected: every stored input was normalized by the statistics the update starts from); 'step', OmniSafe's:
    from each observation as it is collected, before it is normalized (the stored inputs were normalized by
    statistics that moved during the rollout). 'step' is there to measure the difference apart."""
    reward_normalize: bool = False
    """Scale rewards by the running std of the discounted return, updated once per vectorized step."""


@dataclass(frozen=True)
class SafetyConfig:
    cost_limit: float = 25.0
    """d: the episode cost limit (PPOLag, CPPOPID) and the Sauté/Simmer safety budget."""
    lagrangian_multiplier_init: float = 0.001
    """λ_0 (PPOLag, CPPOPID)."""
    lambda_lr: float = 0.035
    """Adam learning rate of λ (PPOLag)."""
    pid_kp: float = 0.1
    """CPPOPID proportional gain."""
    pid_ki: float = 0.01
    """CPPOPID integral gain."""
    pid_kd: float = 0.01
    """CPPOPID derivative gain."""
    pid_d_delay: int = 10
    """CPPOPID derivative delay (epochs)."""
    saute_gamma: float = 0.999
    """Sauté budget discount γ_s."""
    max_ep_len: int = 1000
    """Episode length T in the Sauté per-step budget d·(1 − γ_s^T)/((1 − γ_s)·T)."""
    unsafe_reward: float = -1.0
    """Reward once the Sauté budget is spent."""
    simmer_kp: float = 1.0
    """Simmer PID proportional gain (OmniSafe PPOSimmerPID.yaml)."""
    simmer_ki: float = 0.001
    """Simmer PID integral gain."""
    simmer_kd: float = 0.01
    """Simmer PID derivative gain."""
    simmer_polyak: float = 0.995
    """Simmer error EMA factor."""
    simmer_upper_budget: float = 25.0
    """Largest budget the Simmer controller may set (episode-cost units)."""


# ------------------------------------------------------------------------------ trust region (trust_region.py)
@dataclass(frozen=True)
class TrustRegionConfig:
    target_kl: float = MAX_KL
    """δ: the KL trust region of TRPO/TRPOLag/CPO (OmniSafe TRPO.yaml/CPO.yaml target_kl 0.01; P3O's KL early
    stop is ppo.target_kl)."""
    cg_iters: int = CG_ITERS
    """Conjugate-gradient iterations."""
    cg_damping: float = CG_DAMPING
    """F + damping·I."""
    fvp_sample_freq: int = 1
    """The Fisher is taken on every k-th observation of the rollout (OmniSafe fvp_sample_freq)."""
    line_search_steps: int = TRPO_LINE_SEARCH_STEPS
    """Candidates of TRPO's backtracking line search."""
    cpo_line_search_steps: int = CPO_LINE_SEARCH_STEPS
    """Candidates of CPO's line search (OmniSafe: 20)."""
    line_search_decay: float = LINE_SEARCH_DECAY
    """Candidate k is θ + decay^(k−1)·step."""
    kappa: float = P3O_KAPPA
    """P3O's penalty coefficient κ."""


def validate_config(tr: TrustRegionConfig) -> list[tuple[str, str, object]]:
    """(key, expected, got) of each bad setting (the engine turns them into ConfigErrors)."""
    bad = []
    for key in ("cg_iters", "fvp_sample_freq", "line_search_steps", "cpo_line_search_steps"):
        if getattr(tr, key) < 1:
            bad.append((key, "an int >= 1", getattr(tr, key)))
    if not tr.target_kl > 0:
        bad.append(("target_kl", "> 0", tr.target_kl))
    if not tr.cg_damping >= 0:
        bad.append(("cg_damping", ">= 0", tr.cg_damping))
    if not 0 < tr.line_search_decay < 1:
        bad.append(("line_search_decay", "in (0, 1)", tr.line_search_decay))
    if not tr.kappa >= 0:
        bad.append(("kappa", ">= 0", tr.kappa))
    return bad


# ------------------------------------------------------------------------------ DreamerV3 (dreamer.py)
@dataclass(frozen=True)
class DreamerConfig:
    # --- world model (contract world_model; sizes far below DreamerV3-XS: the room is small) ---
    deter: int = 256
    """H: recurrent state of the RSSM."""
    stoch: int = 16
    """S: categorical latents."""
    classes: int = 16
    """K: classes per latent."""
    hidden: int = 256
    """Width of the RSSM MLPs, encoder, decoder and heads."""
    embed_dim: int = 256
    """E: output of the MLP encoder (the conv encoder's is its flattened last stage, derived from the geometry)."""
    pool: int = 4
    """Average pooling of the (cropped) frame in the encoder; the decoder reconstructs the pooled frame."""
    frame: tuple[int, int] = (72, 80)
    """Centered crop of the 72 × 80 frame the encoder sees ((64, 64): sheeprl's geometry; contract world_model)."""
    encoder: str = "mlp"
    """'mlp' (MLP encoder and decoder) or 'conv' (sheeprl 0.8.4's CNNEncoder / CNNDecoder)."""
    cnn_mult: int = 8
    """Channel multiplier of the conv encoder and decoder (sheeprl cnn_channels_multiplier)."""
    cnn_stages: int = 4
    """Stride-2 stages of the conv encoder and decoder (4 at 64 × 64, as sheeprl)."""
    free_bits: float = 1.0
    """Free nats per (t, b) of each KL term (seed §3 M4)."""
    dyn_scale: float = 0.5
    """Scale of KL(sg(post) ‖ prior) (paper / sheeprl 0.5; the world_model contract's default is 1)."""
    rep_scale: float = 0.1
    """Scale of KL(post ‖ sg(prior)) (paper / sheeprl 0.1)."""
    unimix: float = 0.01
    """Uniform mixture of the latents."""
    head_input: str = "next"
    """What the reward and continue heads read: 'next' (one prior step after the action: action-conditioned),
    'posterior' (the posterior of the frame the step arrives at, sheeprl's heads; needs replay_ends, which
    stores that frame) or 'state' (the state the transition leaves; module docstring)."""
    # --- actor and critic ---
    mlp_hidden: int = 256
    """Width of the actor and critic MLPs."""
    mlp_layers: int = 2
    """Hidden layers of the actor and critic (sheeprl mlp_layers)."""
    # --- behaviour (contract behavior; DreamerV3 defaults) ---
    horizon: int = 15
    """Imagined steps H."""
    gamma: float = 1 - 1 / 333
    """Discount γ."""
    lam: float = 0.95
    """λ of the λ-returns."""
    entropy_coef: float = 3e-4
    """η of the actor's entropy bonus."""
    slow_rate: float = 0.02
    """Slow critic EMA rate after every update."""
    slow_reg: float = 1.0
    """Weight of the slow-critic regularizer."""
    # --- optimisation (sheeprl dreamer_v3.yaml) ---
    batch_size: int = 16
    """B: sequences per update."""
    seq_len: int = 64
    """T: steps per sequence."""
    wm_lr: float = 1e-4
    """Adam learning rate of the world model."""
    actor_lr: float = 8e-5
    """Adam learning rate of the actor."""
    critic_lr: float = 8e-5
    """Adam learning rate of the critic."""
    wm_eps: float = 1e-8
    """Adam eps of the world model."""
    ac_eps: float = 1e-5
    """Adam eps of the actor and the critic."""
    wm_clip: float = 1000.0
    """Gradient-norm clip of the world model."""
    actor_clip: float = 100.0
    """Gradient-norm clip of the actor."""
    critic_clip: float = 100.0
    """Gradient-norm clip of the critic."""
    precision: str = "fp32"
    """The learner's arithmetic: 'fp32', or 'bf16-mixed' (the forward passes of each update under bfloat16
    autocast, as sheeprl's fabric.precision=bf16-mixed; parameters, gradients and Adam states stay float32, the
    RSSM's GRU update runs in float32 either way). Acting and evaluation stay float32."""

    def shared(self, cls: type) -> dict[str, Any]:
        """This config's values of the keys it shares, by name, with the contract config ``cls`` (every key of
        this class is one of WorldModelConfig's, BehaviorConfig's or ENGINE_ONLY: tests/engines/dreamer)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in names}


# DreamerConfig's keys that are neither WorldModelConfig's nor BehaviorConfig's: the actor/critic MLPs and the
# optimisation
ENGINE_ONLY = ("mlp_hidden", "mlp_layers", "batch_size", "seq_len", "wm_lr", "actor_lr", "critic_lr", "wm_eps",
               "ac_eps", "wm_clip", "actor_clip", "critic_clip", "precision")
PRECISIONS = ("fp32", "bf16-mixed")  # DreamerConfig.precision


# ------------------------------------------------------------------------------ bonus phase (bonus_vtrace.py)
Ablation = Literal["baseline", "queue", "top1", "topk", "prototypes", "placebo"]
# success-set design §7, in order of what they add; then "placebo": topk's dose of Loss A on shuffled positive sets
ABLATIONS = ("baseline", "queue", "top1", "topk", "prototypes", "placebo")




@dataclass(frozen=True)
class LearnerConfig:
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the policy and the critic."""
    lr: float = 3e-4
    """Adam learning rate of the main update (policy and critic)."""
    gamma: float = 0.99
    """Discount γ."""
    clip: float = 0.2
    """PPO ratio clip ε (ratio of π to the update-start policy π_old)."""
    entropy_coef: float = 0.01
    """Entropy bonus coefficient (entropy = Σ_d H(π_d))."""
    value_coef: float = 0.5
    """Weight of ½(V − v_s)² in the loss."""
    epochs: int = 4
    """PPO epochs over the update's batch."""
    minibatches: int = 4
    """Minibatches per epoch."""
    rho_bar: float = 1.0
    """V-trace ρ̄ (truncation of the importance weight in the value target)."""
    c_bar: float = 1.0
    """V-trace c̄ (trace cutting)."""
    max_grad_norm: float = 0.5
    """Gradient norm clip of the policy (main update and bonus steps)."""
    value_max_grad_norm: float = 0.5
    """Gradient norm clip of the critic, apart from the policy's."""
    normalize_returns: bool = True
    """Divide rewards by the running std of the discounted return before V-trace (ReturnScale)."""
    normalize_obs: bool = False
    """Normalize the policy's and the critic's input with running statistics of every observation collected so
    far ((obs − μ)/√(σ² + 1e-8) clipped to ±10, SB3 VecNormalize's; frozen during a rollout, refreshed before
    each update, saved in the checkpoint and carried with the policy's weights)."""
    bonus_lr: float = 1e-4
    """Adam learning rate of the bonus phase's policy steps (its own optimizer)."""
    heldout_packs: int = 0
    """Packs reserved beside each bonus batch and never trained on: bonus/heldout_margin_change logs how much
    bonus time moved their mean log p⁺ − log p⁻ (the dose acting on failure states it did not see). 0: none."""
    target_kl: float | None = None
    """KL early stop (PPO review and numerics note, OmniSafe's kl_early_stop): after each epoch, the approximate KL
    mean(log π_old − log π) over the whole batch; above target_kl the update's remaining epochs are skipped
    (Guard/KLEarlyStop, Train/StopIter). None: every epoch runs. One trainer only (a per-rank decision would
    desynchronize the gradient all-reduce)."""
