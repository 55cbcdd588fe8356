"""The bonus engine's run config: BonusConfig (every --set key with its docstring), presets, validation, the
env-step arithmetic of an update, and the engine's description for `rlspec train bonus`. Imports no execution
and no torch, so that parsing the command line and its --help are quick; the loop (loop.py) loads when a run
starts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlspec.algos.config import ABLATIONS, KITS, LearnerConfig
from rlspec.contracts.params import SuccessSetConfig
from rlspec.runs import config as runconfig
from rlspec.runs import shell

ENGINE = "bonus"
METAWORLD = "metaworld:"


@dataclass(frozen=True)
class BonusConfig(runconfig.RunConfig):
    """The bonus engine's run (the keys every engine has: rlspec/runs/config.py RunConfig)."""

    num_envs: int = 8
    total_steps: int = 200_000
    checkpoint_every: int = 50  # updates
    task: str = "token-reach"
    """token-reach (rlspec/envs/token_reach.py: numpy, two gaps in a wall, for CI and quick runs) or
    metaworld:NAME-v3 (e.g. metaworld:push-v3; the `bonus` extra)."""
    execution: str = "local"
    """local (one process) or ray (rollout worker actors, a replay actor, trainer actors all-reducing through
    torch.distributed: ray.py; the `bonus` extra)."""
    rollout_workers: int = 2
    """Ray: rollout worker actors, each stepping num_envs envs."""
    trainers: int = 1
    """Ray: trainer actors (data parallel: gradients averaged with torch.distributed, gloo on CPU)."""
    inference: str = "local"
    """Ray: where the rollout workers' actions come from. local: each worker holds a policy copy, sent trainer
    0's weights every round (no round trip per step: the faster on CPU). actor: one InferenceActor holds the
    policy (and the EMA-best copies) and serves every worker's per-step batch of observations, ~1.3 ms per
    Ray round trip here (success-set design's architecture: one place for the weights, a GPU for inference at scale)."""
    best_workers: int = 0
    """Ray: rollout workers acting with trainer 0's EMA ("best") policy instead of the current one (success-set design
    §2.3 EMA-best-policy broadcast); their fragments are off-policy and V-trace corrects them."""
    best_every: int = 10
    """Ray: rounds between broadcasts of the EMA policy to the best workers."""
    best_ema: float = 0.99
    """Ray: EMA factor of the best policy: ema ← best_ema·ema + (1 − best_ema)·θ after every update."""
    best_perturb_std: float = 0.0
    """Ray: std of the Gaussian noise a best worker adds to the EMA weights it receives (perturbed_best; 0:
    none)."""
    episode_steps: int = 200
    """Meta-World: steps before truncation (at most 500); token-reach has its own 60."""
    ablation: str = "prototypes"
    """Success-set design §7: baseline, queue, top1, topk or prototypes (everything on)."""
    fragment_len: int = 32
    """Steps per env in one rollout fragment (one main update per fragment)."""
    replay_fragments: int = 3
    """Older fragments drawn from the replay into each update beside the newest (V-trace corrects them)."""
    replay_capacity: int = 64
    """Fragments kept in the replay (FIFO)."""
    pool_size: int = 256
    """Successes kept for pair mining (FIFO)."""
    queue_size: int = 1024
    """Capacity of the paired queue (FIFO)."""
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    """PPO + V-trace settings."""
    bonus: SuccessSetConfig = field(default_factory=SuccessSetConfig)
    """Bonus-phase settings (contract success_set: tau, margin, top_k, window, cooldown_steps, ...)."""


PRESETS: dict[str, dict] = {
    "default": {},
    # Meta-World tasks: the token learner measured beside SB3 PPO
    # (benchmarks/bonus/results/bonus_vs_sb3_reach-v3.json):
    # observations normalized as SB3's VecNormalize does, and 10 epochs per update (SB3's n_epochs)
    "metaworld": {"learner.normalize_obs": True, "learner.epochs": 10},
    # a couple of minutes on 2 CPU cores with every path taken: mining, trigger, bonus updates (CI)
    "smoke": {"total_steps": 6144, "num_envs": 4, "fragment_len": 64, "checkpoint_every": 4,
              "bonus.min_pairs": 2, "bonus.batch_packs": 2, "bonus.min_clusters": 1, "bonus.cooldown_steps": 256,
              "bonus.num_prototypes": 2},
}


EXECUTIONS = ("local", "ray")


def validate(cfg: BonusConfig) -> None:
    if cfg.task != "token-reach" and not cfg.task.startswith(METAWORLD):
        raise runconfig.bad("task", f"token-reach or {METAWORLD}NAME-v3", cfg.task)
    runconfig.check(cfg, {"execution": runconfig.one_of(EXECUTIONS)})
    runconfig.refuse_other_executions(cfg, EXECUTIONS)
    if cfg.task.startswith(METAWORLD):
        _require_extra("task", cfg.task, "metaworld")
        from rlspec.envs.metaworld_tokens import parse_task

        try:
            parse_task(cfg.task)
        except ValueError as err:
            raise runconfig.ConfigError(f"config key 'task': {err}") from None
    if cfg.execution == "ray":
        _require_extra("execution", cfg.execution, "ray")
    runconfig.check(cfg, {"kit": runconfig.one_of(KITS), "ablation": runconfig.one_of(ABLATIONS),
                          "inference": runconfig.one_of(("local", "actor"))})
    runconfig.require_at_least(cfg, dict.fromkeys(("num_envs", "fragment_len", "total_steps", "replay_capacity",
                                                   "pool_size", "queue_size", "ep_window", "checkpoint_every",
                                                   "torch_threads", "rollout_workers", "trainers", "episode_steps"), 1)
                               | {"replay_fragments": 0, "learner.epochs": 1, "learner.heldout_packs": 0})
    smallest = cfg.fragment_len * cfg.num_envs  # samples of one fragment: the least a trainer's batch holds
    runconfig.check(cfg, {"learner.minibatches": runconfig.at_most(smallest, "fragment_len · num_envs: at least "
                                                                   "one sample per minibatch"),
                          "learner.gamma": runconfig.UNIT,
                          **dict.fromkeys(("learner.lr", "learner.bonus_lr", "learner.clip"), runconfig.POSITIVE)})
    if not 0 <= cfg.best_workers < cfg.rollout_workers:
        raise runconfig.bad("best_workers", f"0 <= best_workers < rollout_workers = {cfg.rollout_workers} (one "
                            "worker at least stays on-policy)", cfg.best_workers)
    if not 0.0 <= cfg.best_ema < 1.0 or cfg.best_perturb_std < 0:
        raise runconfig.ConfigError(f"config keys 'best_ema' in [0, 1) and 'best_perturb_std' >= 0: got "
                                    f"{cfg.best_ema}, {cfg.best_perturb_std}")
    if cfg.execution == "ray" and cfg.trainers > 1 and cfg.learner.target_kl is not None:
        raise runconfig.ConfigError(f"config key 'learner.target_kl': the KL early stop needs trainers = 1 (each "
                                    f"rank would decide alone), got target_kl = {cfg.learner.target_kl} with "
                                    f"trainers = {cfg.trainers}")
    if cfg.learner.target_kl is not None and not cfg.learner.target_kl > 0:
        raise runconfig.bad("learner.target_kl", "> 0 or none", cfg.learner.target_kl)
    if cfg.execution == "ray" and cfg.rollout_workers % cfg.trainers:
        raise runconfig.bad("rollout_workers", f"a multiple of trainers = {cfg.trainers} (each trainer takes the same "
                            "number of fragments)", cfg.rollout_workers)
    if cfg.total_steps < steps_per_update(cfg):
        raise runconfig.bad("total_steps", f">= one update ({steps_per_update(cfg)} env steps)", cfg.total_steps)


def ablation_decides(cfg: BonusConfig) -> dict[str, tuple[object, str]]:
    """key -> (the value cfg's ablation runs it at, or runconfig.UNUSED; in words) for every key the ablation
    decides:
    top1's top_k = 1; without prototypes no clusters and no prototype keys (unused); without Loss A (queue)
    the bonus phase's keys (unused); under baseline (no bonus at all) every bonus key, the success pool and
    the paired queue (unused)."""
    from rlspec.algos.bonus_vtrace import bonus_setup, effective_config  # torch: after --help

    setup, by = bonus_setup(cfg.ablation), f"--ablation {cfg.ablation}"
    unused = (runconfig.UNUSED, f"{by}, which never reads it")
    if not setup.mine:
        keys = ["pool_size", "queue_size", "learner.bonus_lr", "learner.heldout_packs",
                *(f"bonus.{f.name}" for f in dataclasses.fields(SuccessSetConfig))]
        return dict.fromkeys(keys, unused)
    runs_with, mine = effective_config(cfg.bonus, setup), cfg.bonus
    out = {f"bonus.{f.name}": (getattr(runs_with, f.name), f"{by}, which runs it at {getattr(runs_with, f.name)!r}")
           for f in dataclasses.fields(SuccessSetConfig)
           if getattr(runs_with, f.name) != getattr(mine, f.name) or (f.name == "top_k" and setup.top_k)}
    if not setup.prototypes:  # no success prototypes to keep
        out.update(dict.fromkeys(("bonus.num_prototypes", "bonus.prototype_ema"), unused))
    if not setup.loss_a:  # pairs are mined, never trained on: the bonus phase's keys
        out.update(dict.fromkeys((f"bonus.{key}" for key in BONUS_PHASE_KEYS), unused))
        out.update(dict.fromkeys(("learner.bonus_lr", "learner.heldout_packs"), unused))
    return out


def decides(cfg: BonusConfig) -> dict[str, tuple[object, str]]:
    """Engine.decides: the ablation's keys (``ablation_decides``), the best workers' keys without best workers,
    and episode_steps on token-reach (its episodes have their own length)."""
    out = ablation_decides(cfg)
    if cfg.best_workers == 0:
        out.update(dict.fromkeys(("best_every", "best_ema", "best_perturb_std"),
                                 (runconfig.UNUSED, "best_workers 0, which never reads it")))
    if cfg.task == "token-reach":
        out["episode_steps"] = (runconfig.UNUSED, "task token-reach, whose episodes have their own length")
    return out


# the SuccessSetConfig keys read only in a bonus phase (Loss A, its trigger, its stops, its sampling)
BONUS_PHASE_KEYS = ("tau", "margin", "cooldown_steps", "batch_packs", "min_pairs", "kl_guard", "entropy_floor",
                    "bonus_updates", "consume_packs")


def _require_extra(key: str, value: str, module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise runconfig.ConfigError(f"config key {key!r}: {value!r} needs the {module} package, not installed here: "
                                    f"pip install -e '.[bonus]'")


def total_envs(cfg: BonusConfig) -> int:
    """Envs of the run, all rollout workers together."""
    return cfg.num_envs * (cfg.rollout_workers if cfg.execution == "ray" else 1)


def steps_per_update(cfg: BonusConfig) -> int:
    return total_envs(cfg) * cfg.fragment_len


# ------------------------------------------------------------------------------------ `rlspec train bonus`
def describe(run: Callable[..., Path]) -> shell.Engine:
    """The engine `rlspec train bonus` runs: ``run`` (rlspec/runs/shell.py's signature) with BonusConfig; its
    --help text is the package's docstring, read without importing it."""
    return shell.Engine(
        name=ENGINE, config=BonusConfig, presets=PRESETS, doc=shell.docstring("rlspec.engines.bonus"),
        validate=validate, run=run, out_name=lambda cfg: f"{ENGINE}-{cfg.task}-{cfg.ablation}-s{cfg.seed}",
        out_pattern="bonus-TASK-ABLATION-sSEED", stop_unit="updates",
        flags=(shell.Flag("task", "task"), shell.Flag("ablation", "ablation", choices=ABLATIONS)),
        decides=decides)
