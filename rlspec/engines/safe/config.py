"""The safe engine's config and its description for `rlspec train safe`: the run's
keys (SafeConfig, one docstring per key: the --set reference), presets, shorthand flags and run names.
Imports no torch, so that parsing the command line and its --help are quick; the loop (loop.py) and the
executions (local.py, parallel.py) load when a run starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlspec.algos.config import ALGOS, PPOConfig, SafetyConfig, TrustRegionConfig
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.semantics.config import SemanticConfig

ENGINE = "safe"


@dataclass(frozen=True)
class SafeConfig(runconfig.RunConfig):
    """The safe engine's run (the keys every engine has: rlspec/runs/config.py RunConfig)."""

    algo: str = "PPOLag"
    """PPO, PPOLag, PPOLagSem, CPPOPID, PPOSaute, PPOSimmerPID (rlspec/algos/safe_ppo.py), TRPO, TRPOLag,
    TRPOPID, CPO or P3O (rlspec/algos/trust_region.py)."""
    env_id: str = "SafetyPointGoal1-v0"
    """A Safety-Gymnasium id, or ToyGoal-v0 (numpy only, for tests)."""
    total_steps: int = 10_000_000
    steps_per_epoch: int = 20_000
    """Env steps per rollout/update (all envs together; a multiple of num_envs)."""
    ep_window: int = 50
    """Episodes averaged in Metrics/EpRet, EpCost, EpLen and in J_c for λ (OmniSafe window_length 50)."""
    forced_cost: float = 0.0
    """Constant cost added to every step (test aid: λ must rise when the cost exceeds the limit)."""
    execution: str = "local"
    """How the run executes: local (the loop and its envs in this process: local.py) or parallel (the same
    loop, the same run with one process: envs in env_workers worker processes, data parallel under torchrun,
    the networks on device: parallel.py). The three keys below are parallel's."""
    env_workers: int = 0
    """parallel: worker processes stepping this process's num_envs envs (0: step them in this process)."""
    learner_steps: bool = False
    """parallel: this process steps a share of the envs too (the first of env_workers + 1 slices) while the
    workers step theirs: on two cores env_workers=1 with learner_steps leaves no core idle while the learner
    waits."""
    device: str = "cpu"
    """parallel: where the networks live and the update runs: cpu, cuda, cuda:K or auto. On CUDA (a GPU policy)
    the batched policy call runs on the device and its actions come back to the env workers; the action noise
    is still drawn from the host generator (the same draws as on the host). Under torchrun with cuda each
    process takes cuda:LOCAL_RANK and the process group is NCCL's."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO hyper-parameters (OmniSafe 0.5.0 PPOLag.yaml defaults)."""
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    """Cost limit, Lagrange, PID, Sauté and Simmer settings."""
    frame_size: int = 64
    """Width and height of the frames rendered for PPOLagSem's semantic captures (semantic.enable only)."""
    semantic: SemanticConfig = field(default_factory=SemanticConfig)
    """PPOLagSem's semantic side (PPOLagSem design §8 semantic_cfgs); enable=False: plain PPOLag."""
    trust_region: TrustRegionConfig = field(default_factory=TrustRegionConfig)
    """TRPO, TRPOLag, TRPOPID, CPO and P3O settings (OmniSafe 0.5.0 TRPO.yaml, CPO.yaml, P3O.yaml defaults)."""


PRESETS: dict[str, dict] = {
    "default": {},
    # a few thousand steps: finite losses, files written, every code path taken (CI)
    "smoke": {"total_steps": 4000, "steps_per_epoch": 1000, "num_envs": 2, "ep_window": 10,
              "ppo.update_iters": 4, "ppo.batch_size": 250},
}


EXECUTIONS = ("local", "parallel")
PARALLEL_ONLY = {"env_workers": 0, "learner_steps": False, "device": "cpu"}  # key -> its value with execution local


PID_KEYS = ("safety.pid_kp", "safety.pid_ki", "safety.pid_kd", "safety.pid_d_delay")
SIMMER_KEYS = ("safety.simmer_kp", "safety.simmer_ki", "safety.simmer_kd", "safety.simmer_polyak",
               "safety.simmer_upper_budget")
NATURAL_STEP_KEYS = tuple(f"trust_region.{k}" for k in ("target_kl", "cg_iters", "cg_damping", "fvp_sample_freq",
                                                         "line_search_steps", "line_search_decay"))
# the PPO keys of the actor's clipped-surrogate step, which the natural-gradient step replaces
SURROGATE_KEYS = ("ppo.clip", "ppo.target_kl", "ppo.kl_check", "ppo.entropy_coef", "ppo.actor_lr",
                  "ppo.linear_lr_decay")


def unread_keys(cfg: SafeConfig) -> list[str]:
    """The keys cfg's algo never reads (ALGOS' AlgoSpec: how λ is driven, the budget, the cost critic, which
    update trains the actor), and the semantic side's without semantic.enable."""
    spec, out = ALGOS[cfg.algo], []
    if spec.multiplier != "lagrange":
        out.append("safety.lambda_lr")
    if spec.multiplier != "pid":
        out += PID_KEYS
    if spec.multiplier == "none":
        out += ["safety.lagrangian_multiplier_init", "ppo.adv_combine", "ppo.lambda_update"]
    if spec.budget == "none":
        out += ["safety.saute_gamma", "safety.max_ep_len", "safety.unsafe_reward"]
    if spec.budget != "simmer":
        out += SIMMER_KEYS
    if not spec.use_cost:
        out += ["ppo.cost_gamma", "ppo.lam_c", "ppo.center_cost_adv"]
        if spec.budget == "none":
            out.append("safety.cost_limit")
    if spec.family == "trust_region":
        out += SURROGATE_KEYS
    else:
        out += NATURAL_STEP_KEYS
    if cfg.algo != "CPO":
        out.append("trust_region.cpo_line_search_steps")
    if spec.family != "p3o":
        out.append("trust_region.kappa")
    if not cfg.semantic.enable:
        out += ["frame_size", *(k for k in runconfig.flat_keys(SemanticConfig, "semantic.") if k != "semantic.enable")]
    return out


def algo_decides(cfg: SafeConfig) -> dict[str, tuple[object, str]]:
    """Engine.decides: every key cfg's algo never reads (``unread_keys``) is refused when given."""
    said = ("semantic.enable false, which never reads it", f"algo {cfg.algo}, which never reads it")
    return {k: (runconfig.UNUSED, said[not k.startswith("semantic.") and k != "frame_size"]) for k in unread_keys(cfg)}


# the parallel run of `rlspec compare safe`, before its --set: 2 envs stepped by 2 worker processes
COMPARED_PARALLEL = ("execution=parallel", "num_envs=2", "env_workers=2")


def describe(name: str, cls: type, validate: Callable[[SafeConfig], None], run: Callable[..., Path]) -> shell.Engine:
    """The engine `rlspec train NAME` runs: ``run`` (the loop, rlspec/runs/shell.py's signature) with ``cls``'s
    config (its defaults), checked by ``validate``, its runs recorded as NAME's. Its --help text is the
    docstrings of the engine's modules, read without importing them."""
    doc = "\n".join(shell.docstring(f"rlspec.engines.safe{m}") for m in ("", ".loop", ".local", ".parallel", ".verbs"))
    return shell.Engine(
        name=name, config=cls, presets=PRESETS, doc=doc, validate=validate, run=run,
        out_name=lambda cfg: f"{name}-{cfg.algo}-{cfg.env_id}-s{cfg.seed}", out_pattern=f"{name}-ALGO-ENV-sSEED",
        stop_unit="epochs", flags=(shell.Flag("algo", "algo", choices=tuple(sorted(ALGOS))),
                                   shell.Flag("env", "env_id")), decides=algo_decides)
