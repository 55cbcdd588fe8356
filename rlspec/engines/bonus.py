"""Bonus-phase engine (seed 003), local in-process execution: rollout, Part1 episode metadata,
pair mining, PPO + V-trace over a fragment replay, bonus time — top to bottom in one process.

    rlspec train bonus --task token-reach [--ablation prototypes] [--preset smoke] [--out DIR] [--set k=v ...]
    rlspec train bonus --resume RUN
    rlspec eval RUN [--episodes K]            # greedy tokens: mean return and success rate
    rlspec plot RUN
    rlspec compare bonus [--preset smoke] ... # the local and the Ray execution on one config, side by side

Same config and seed ⇒ the same run, straight or resumed: every random draw (weights, actions, replay
picks, pack sampling) comes from one ``torch.Generator``; the envs draw each episode from its own seed.
The algorithm is rlspec/algos/bonus_vtrace.py (learner, miner, bonus phase) and rlspec/algos/episodes.py
(Part1 reassembly); this file only runs them. The ablations of seed 003 §7 are ``--ablation``: baseline
(PPO + V-trace + replay), queue (+ paired queue, no Loss A), top1 (+ Loss A with the Top-1 success),
topk (+ the Top-K set), prototypes (+ prototypes and cross-cluster sampling, the default).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import torch

from rlspec.algos.bonus_vtrace import (
    ABLATIONS,
    BonusKit,
    Fragment,
    LearnerConfig,
    PairMiner,
    ReturnScale,
    act,
    bonus_phase,
    bonus_setup,
    effective_config,
    make_learner,
    ppo_vtrace_update,
    stack_fragments,
)
from rlspec.algos.episodes import EpisodeAssembler
from rlspec.contracts.success_set import SuccessSetConfig
from rlspec.envs.token_reach import TokenReachVector
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.compare import difference
from rlspec.runs.faults import attempt, check_finite
from rlspec.runs.plots import Panel, draw, overlay
from rlspec.runs.rundir import (
    EpisodeProgress,
    Progress,
    RunDir,
    load_checkpoint,
    read_metrics,
)

ENGINE = "bonus"
METAWORLD = "metaworld:"


@dataclass(frozen=True)
class BonusConfig:
    task: str = "token-reach"
    """token-reach (rlspec/envs/token_reach.py: numpy, two gaps in a wall, for CI and quick runs) or
    metaworld:NAME-v3 (e.g. metaworld:push-v3; the `bonus` extra)."""
    execution: str = "local"
    """local (one process) or ray (rollout worker actors, a replay actor, trainer actors all-reducing through
    torch.distributed: rlspec/engines/bonus_ray.py; the `bonus` extra)."""
    rollout_workers: int = 2
    """Ray: rollout worker actors, each stepping num_envs envs."""
    trainers: int = 1
    """Ray: trainer actors (data parallel: gradients averaged with torch.distributed, gloo on CPU)."""
    inference: str = "local"
    """Ray: where the rollout workers' actions come from. local: each worker holds a policy copy, sent trainer
    0's weights every round (no round trip per step: the faster on CPU). actor: one InferenceActor holds the
    policy (and the EMA-best copies) and serves every worker's per-step batch of observations, ~1.3 ms per
    Ray round trip here (seed 003's architecture: one place for the weights, a GPU for inference at scale)."""
    best_workers: int = 0
    """Ray: rollout workers acting with trainer 0's EMA ("best") policy instead of the current one (seed 003
    §2.3 EMA-best-policy broadcast); their fragments are off-policy and V-trace corrects them."""
    best_every: int = 10
    """Ray: rounds between broadcasts of the EMA policy to the best workers."""
    best_ema: float = 0.99
    """EMA factor of the best policy: ema ← best_ema·ema + (1 − best_ema)·θ after every update."""
    best_perturb_std: float = 0.0
    """Std of the Gaussian noise a best worker adds to the EMA weights it receives (perturbed_best; 0: none)."""
    episode_steps: int = 200
    """Meta-World: steps before truncation (at most 500); token-reach has its own 60."""
    ablation: str = "prototypes"
    """Seed 003 §7: baseline, queue, top1, topk or prototypes (everything on)."""
    seed: int = 0
    """Seed of the generator (weights, actions, replay picks, pack sampling) and of every episode."""
    num_envs: int = 8
    """Environments stepped together."""
    fragment_len: int = 32
    """Steps per env in one rollout fragment (one main update per fragment)."""
    total_steps: int = 200_000
    """Env steps of the whole run (all envs together)."""
    replay_fragments: int = 3
    """Older fragments drawn from the replay into each update beside the newest (V-trace corrects them)."""
    replay_capacity: int = 64
    """Fragments kept in the replay (FIFO)."""
    pool_size: int = 256
    """Successes kept for pair mining (FIFO)."""
    queue_size: int = 1024
    """Capacity of the paired queue (FIFO)."""
    ep_window: int = 50
    """Episodes averaged in Metrics/EpRet, Metrics/SuccessRate, Metrics/EpLen."""
    checkpoint_every: int = 50
    """Write RUN/checkpoints/last.pt every this many updates (and at the end)."""
    fast: bool = False
    """Use the fast twins of vtrace and success_set (vectorized torch) instead of the reference."""
    torch_threads: int = 1
    """torch.set_num_threads for the run (1: the same numbers on any machine)."""
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    """PPO + V-trace settings."""
    bonus: SuccessSetConfig = field(default_factory=SuccessSetConfig)
    """Bonus-phase settings (contract success_set: tau, margin, top_k, window, cooldown_steps, ...)."""


PRESETS: dict[str, dict] = {
    "default": {},
    # a couple of minutes on 2 CPU cores with every path taken: mining, trigger, bonus updates (CI)
    "smoke": {"total_steps": 6144, "num_envs": 4, "fragment_len": 64, "checkpoint_every": 4,
              "bonus.min_pairs": 2, "bonus.batch_packs": 2, "bonus.min_clusters": 1, "bonus.cooldown_steps": 256,
              "bonus.num_prototypes": 2},
}


def validate(cfg: BonusConfig) -> None:
    if cfg.task != "token-reach" and not cfg.task.startswith(METAWORLD):
        raise runconfig.ConfigError(f"config key 'task': expected token-reach or {METAWORLD}NAME-v3, got {cfg.task!r}")
    if cfg.execution not in ("local", "ray"):
        raise runconfig.ConfigError(f"config key 'execution': expected local or ray, got {cfg.execution!r}")
    if cfg.task.startswith(METAWORLD):
        _require_extra("task", cfg.task, "metaworld")
        from rlspec.envs.metaworld_tokens import parse_task

        try:
            parse_task(cfg.task)
        except ValueError as err:
            raise runconfig.ConfigError(f"config key 'task': {err}") from None
    if cfg.execution == "ray":
        _require_extra("execution", cfg.execution, "ray")
    if cfg.inference not in ("local", "actor") or (cfg.inference == "actor" and cfg.execution != "ray"):
        raise runconfig.ConfigError(f"config key 'inference': expected local, or actor with execution=ray, got "
                                    f"{cfg.inference!r} with execution={cfg.execution!r}")
    if cfg.ablation not in ABLATIONS:
        raise runconfig.ConfigError(f"config key 'ablation': expected one of {list(ABLATIONS)}, got {cfg.ablation!r}")
    runconfig.require_at_least(cfg, dict.fromkeys(("num_envs", "fragment_len", "total_steps", "replay_capacity",
                                                   "pool_size", "queue_size", "ep_window", "checkpoint_every",
                                                   "torch_threads", "rollout_workers", "trainers", "episode_steps"), 1)
                               | {"replay_fragments": 0, "learner.epochs": 1})
    smallest = cfg.fragment_len * cfg.num_envs  # samples of one fragment: the least a trainer's batch holds
    runconfig.check(cfg, {"learner.minibatches": runconfig.at_most(smallest, "fragment_len · num_envs: at least "
                                                                   "one sample per minibatch"),
                          "learner.gamma": runconfig.UNIT,
                          **dict.fromkeys(("learner.lr", "learner.bonus_lr", "learner.clip"), runconfig.POSITIVE)})
    if not 0 <= cfg.best_workers < cfg.rollout_workers:
        raise runconfig.ConfigError(f"config key 'best_workers': expected 0 <= best_workers < rollout_workers = "
                                    f"{cfg.rollout_workers} (one worker at least stays on-policy), got {cfg.best_workers}")
    if not 0.0 <= cfg.best_ema < 1.0 or cfg.best_perturb_std < 0:
        raise runconfig.ConfigError(f"config keys 'best_ema' in [0, 1) and 'best_perturb_std' >= 0: got "
                                    f"{cfg.best_ema}, {cfg.best_perturb_std}")
    if cfg.execution == "ray" and cfg.rollout_workers % cfg.trainers:
        raise runconfig.ConfigError(f"config key 'rollout_workers': {cfg.rollout_workers} is not a multiple of "
                                    f"trainers = {cfg.trainers} (each trainer takes the same number of fragments)")
    if cfg.total_steps < steps_per_update(cfg):
        raise runconfig.ConfigError(f"config key 'total_steps': {cfg.total_steps} is less than one update "
                                    f"({steps_per_update(cfg)} env steps)")


def _require_extra(key: str, value: str, module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise runconfig.ConfigError(f"config key {key!r}: {value!r} needs the {module} package, not installed here: "
                                    f"pip install -e '.[bonus]'")


def panels() -> list[Panel]:
    return [Panel("Metrics/SuccessRate", "success.png", "success rate (recent episodes)"),
            Panel("Metrics/EpRet", "return.png", "episode return"),
            Panel("pairs/queue", "queue.png", "paired-queue size"),
            Panel("bonus/updates", "bonus_updates.png", "bonus updates per main update")]


# ------------------------------------------------------------------------------------------ the sides
def make_envs(cfg: BonusConfig, num_envs: int, first_env: int):
    """This process's slice of the task's envs (global indices first_env ...)."""
    if cfg.task == "token-reach":
        return TokenReachVector(num_envs, cfg.seed, first_env)
    from rlspec.envs.metaworld_tokens import MetaWorldTokenVector  # the `bonus` extra

    return MetaWorldTokenVector(cfg.task, num_envs, cfg.seed, first_env, cfg.episode_steps)


class Collected(NamedTuple):
    """A rollout fragment with its Part1 metadata."""

    frag: Fragment
    episode_id: torch.Tensor  # [T, N] int64, unique over every env of the run
    t: torch.Tensor  # [T, N] int64 step within the episode
    success: torch.Tensor  # [T, N] bool


class RolloutSide:
    """Envs and their current observations; collects fragments with a given policy (seed 003 rollout worker)."""

    def __init__(self, cfg: BonusConfig, num_envs: int, first_env: int, total_envs: int):
        self.cfg, self.first_env, self.total_envs = cfg, first_env, total_envs
        self.envs = make_envs(cfg, num_envs, first_env)
        self.obs = torch.from_numpy(self.envs.reset())  # [N, OBS]

    def episode_ids(self) -> torch.Tensor:
        """[N] (episodes started − 1)·total_envs + global env index: unique across workers (Part1)."""
        return torch.from_numpy((self.envs.episodes - 1) * self.total_envs + self.first_env
                                + np.arange(self.envs.num_envs))

    def collect(self, policy: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> Collected:
        """A fragment; ``policy``: obs [N, OBS] -> (tokens [N, A], behaviour log-probabilities [N])."""
        rows, ids, ts, successes = [], [], [], []
        for _ in range(self.cfg.fragment_len):
            tokens, logp = policy(self.obs)  # [N, A], [N]
            ids.append(self.episode_ids())
            ts.append(torch.from_numpy(self.envs.t.copy()))
            out = self.envs.step(tokens.numpy())
            rows.append((self.obs, tokens, logp, torch.from_numpy(out.reward), torch.from_numpy(out.terminated),
                         torch.from_numpy(out.truncated), torch.from_numpy(out.final_obs)))
            successes.append(torch.from_numpy(out.success))
            self.obs = torch.from_numpy(out.obs)
        frag = Fragment(*(torch.stack(col) for col in zip(*rows)))
        return Collected(frag, torch.stack(ids), torch.stack(ts), torch.stack(successes))

    def state_dict(self) -> dict:
        return {"envs": self.envs.state_dict(), "obs": self.obs}

    def load_state_dict(self, s: dict) -> None:
        self.envs.load_state_dict(s["envs"])
        self.obs = torch.from_numpy(self.envs.obs())  # Meta-World restarts its episodes (metaworld_tokens.py)


class ReplaySide:
    """The fragment replay, Part1 reassembly, the episode window, the pair miner (seed 003 replay actor) and the
    return scale the learner divides rewards by (every env's rewards pass here, in order)."""

    def __init__(self, cfg: BonusConfig, kit: BonusKit, setup, bonus_cfg: SuccessSetConfig):
        self.cfg, self.setup = cfg, setup
        self.total_envs = total_envs(cfg)
        self.return_scale = ReturnScale(self.total_envs, cfg.learner.gamma, kit)
        self.replay: deque[Fragment] = deque(maxlen=cfg.replay_capacity)
        self.assembler = EpisodeAssembler()
        self.miner = PairMiner(bonus_cfg, setup, kit, cfg.pool_size, cfg.queue_size)
        self.window: deque = deque(maxlen=cfg.ep_window)  # (return, success, length)

    def add(self, c: Collected) -> None:
        """Part1 → Part2: each env's steps to the assembler, finished episodes to the window and the miner;
        the fragment to the replay."""
        frag = c.frag
        done = frag.terminated | frag.truncated  # [T, N]
        self.return_scale.observe(frag.reward, done, c.episode_id[0] % self.total_envs)  # Part1 ids -> env index
        for i in range(frag.obs.shape[1]):
            for ep in self.assembler.add(c.episode_id[:, i], c.t[:, i], frag.obs[:, i], frag.tokens[:, i],
                                         frag.reward[:, i], done[:, i], c.success[:, i]):
                self.window.append((ep.ret, float(ep.success), ep.episode.states.shape[0]))
                if self.setup.mine:
                    self.miner.add(ep)
        self.replay.append(frag)

    def batch(self, newest: list[Fragment], gen: torch.Generator, fresh: int | None = None) -> Fragment:
        """The newest fragments and replay_fragments older ones per newest, drawn uniformly (with replacement)
        from the replay without its ``fresh`` most recent fragments (default: len(newest))."""
        fresh = len(newest) if fresh is None else fresh
        older = list(self.replay)[:-fresh] if len(self.replay) > fresh else []
        k = min(self.cfg.replay_fragments * len(newest), len(older))
        picks = torch.randint(len(older), (k,), generator=gen).tolist() if k else []
        return stack_fragments([*newest, *(older[j] for j in picks)])

    def scale(self) -> float:
        """What the learner divides this round's rewards by (1 without normalize_returns)."""
        return self.return_scale.scale() if self.cfg.learner.normalize_returns else 1.0

    def metrics(self) -> dict[str, float]:
        out = {f"episodes/{k}": float(v) for k, v in self.assembler.counts.items()}
        out.update(self.miner.metrics() if self.setup.mine else {})
        if not self.window:
            return {**out, "Metrics/EpRet": math.nan, "Metrics/SuccessRate": math.nan, "Metrics/EpLen": math.nan}
        n = len(self.window)
        return {**out, "Metrics/EpRet": sum(e[0] for e in self.window) / n,
                "Metrics/SuccessRate": sum(e[1] for e in self.window) / n,
                "Metrics/EpLen": sum(e[2] for e in self.window) / n}

    def state_dict(self) -> dict:
        return {"replay": list(self.replay), "assembler": self.assembler, "window": list(self.window),
                "successes": list(self.miner.successes), "queue": list(self.miner.queue.packs),
                "prototypes": self.miner.prototypes, "miner_counts": dict(self.miner.counts),
                "return_scale": self.return_scale.state_dict()}

    def load_state_dict(self, s: dict) -> None:
        self.replay.extend(s["replay"])
        self.window.extend(s["window"])
        self.assembler = s["assembler"]
        self.miner.successes.extend(s["successes"])
        self.miner.queue.packs.extend(s["queue"])
        self.miner.prototypes, self.miner.counts = s["prototypes"], s["miner_counts"]
        self.return_scale.load_state_dict(s["return_scale"])


class LearnerSide:
    """PPO + V-trace learner and the bonus scheduler (seed 003 trainer)."""

    def __init__(self, cfg: BonusConfig, kit: BonusKit, setup, bonus_cfg: SuccessSetConfig, obs_dim: int,
                 action_dim: int, n_bins: int, gen: torch.Generator, reduce_min=None, average_gradients=None):
        self.cfg, self.kit, self.setup, self.n_bins = cfg, kit, setup, n_bins
        self.learner = make_learner(cfg.learner, obs_dim, action_dim, n_bins, gen)
        self.scheduler = kit.BonusScheduler(bonus_cfg, **({"reduce_min": reduce_min} if reduce_min else {}))
        self.average_gradients = average_gradients
        self.bonus_errors = 0
        # the EMA ("best") policy of seed 003 §2.3, kept only when some worker acts with it
        self.ema = ({k: v.detach().clone() for k, v in self.learner.policy.state_dict().items()}
                    if cfg.best_workers else None)

    def update(self, batch: Fragment, miner: PairMiner, step: int, gen: torch.Generator,
               return_scale: float = 1.0) -> dict[str, float]:
        """The main update on rewards / return_scale, then bonus time (its errors counted)."""
        metrics = ppo_vtrace_update(self.learner, batch, self.cfg.learner, self.kit.vtrace, gen,
                                    self.average_gradients, return_scale)
        if self.setup.loss_a:
            telemetry = bonus_phase(self.learner, miner, self.scheduler, step, self.n_bins,
                                    self.cfg.learner.max_grad_norm, self.kit, gen, self.average_gradients)
            self.bonus_errors += int(telemetry.pop("bonus/error"))
            metrics.update(telemetry)
            metrics["bonus/errors"] = float(self.bonus_errors)
        if self.ema is not None:
            with torch.no_grad():
                for k, v in self.learner.policy.state_dict().items():
                    self.ema[k].lerp_(v, 1.0 - self.cfg.best_ema)
        return metrics

    def state_dict(self) -> dict:
        l = self.learner
        return {"policy": l.policy.state_dict(), "critic": l.critic.state_dict(), "opt": l.opt.state_dict(),
                "bonus_opt": l.bonus_opt.state_dict(), "last_bonus_step": self.scheduler.last_bonus_step,
                "bonus_errors": self.bonus_errors, "ema": self.ema}

    def load_state_dict(self, s: dict) -> None:
        for name in ("policy", "critic", "opt", "bonus_opt"):
            getattr(self.learner, name).load_state_dict(s[name])
        self.scheduler.last_bonus_step, self.bonus_errors, self.ema = s["last_bonus_step"], s["bonus_errors"], s["ema"]


class World:
    """The local execution: the three sides in one process, one generator."""

    def __init__(self, cfg: BonusConfig):
        self.cfg = cfg
        kit = BonusKit.fast() if cfg.fast else BonusKit.reference()
        setup = bonus_setup(cfg.ablation)
        bonus_cfg = effective_config(cfg.bonus, setup)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.rollout = RolloutSide(cfg, cfg.num_envs, 0, cfg.num_envs)
        envs = self.rollout.envs
        self.replay = ReplaySide(cfg, kit, setup, bonus_cfg)
        self.learner = LearnerSide(cfg, kit, setup, bonus_cfg, envs.obs_dim, envs.action_dim, envs.n_bins, self.gen)

    def train_update(self, step: int) -> dict[str, float]:
        """One rollout fragment, its episodes to the miner, the main update, then bonus time."""
        c = self.rollout.collect(lambda obs: act(self.learner.learner.policy, obs, self.gen))
        self.replay.add(c)
        metrics = self.learner.update(self.replay.batch([c.frag], self.gen), self.replay.miner, step, self.gen,
                                      self.replay.scale())
        return {**metrics, **self.replay.metrics()}

    def state_dict(self) -> dict:
        return {"gen": self.gen.get_state(), "rollout": self.rollout.state_dict(), "replay": self.replay.state_dict(),
                "learner": self.learner.state_dict()}

    def params(self) -> dict:
        """The learner's networks' parameters by name (what must stay finite)."""
        nets = self.learner.learner
        return {"policy": nets.policy.parameters(), "critic": nets.critic.parameters()}

    def load_state_dict(self, s: dict) -> None:
        self.gen.set_state(s["gen"])
        for side in ("rollout", "replay", "learner"):
            getattr(self, side).load_state_dict(s[side])

    def close(self) -> None:
        pass


def make_world(cfg: BonusConfig):
    """The execution: World (one process) or RayWorld (actors; rlspec/engines/bonus_ray.py)."""
    if cfg.execution == "ray":
        from rlspec.engines.bonus_ray import RayWorld

        return RayWorld(cfg)
    return World(cfg)


def total_envs(cfg: BonusConfig) -> int:
    """Envs of the run, all rollout workers together."""
    return cfg.num_envs * (cfg.rollout_workers if cfg.execution == "ray" else 1)


def steps_per_update(cfg: BonusConfig) -> int:
    return total_envs(cfg) * cfg.fragment_len


def run(cfg: BonusConfig, out: Path, resume: bool = False, stop_after_updates: int | None = None,
        show_progress: bool = True) -> Path:
    validate(cfg)
    torch.set_num_threads(cfg.torch_threads)
    per_update = steps_per_update(cfg)
    w = make_world(cfg)
    updates, start = cfg.total_steps // per_update, 0
    try:
        if resume:
            ckpt = load_checkpoint(Path(out) / "checkpoints/last.pt", ("update", "world"))
            w.load_state_dict(ckpt["world"])
            start = ckpt["update"]
            rundir = RunDir(out, ENGINE, runconfig.to_dict(cfg), resume_step=start * per_update,
                            final_step=updates * per_update)
        else:
            rundir = RunDir(out, ENGINE, runconfig.to_dict(cfg))
        with rundir:
            _loop(cfg, w, rundir, start, min(updates, start + stop_after_updates) if stop_after_updates is not None
                  else updates, show_progress)
    finally:
        w.close()
    draw(rundir.path, panels())
    return Path(out)


def _loop(cfg: BonusConfig, w, rundir: RunDir, start: int, stop: int, show_progress: bool) -> None:
    """Updates ``start`` .. ``stop`` − 1: rollout, update, check that losses and parameters are finite, log,
    checkpoint."""
    per_update = steps_per_update(cfg)
    updates = cfg.total_steps // per_update
    bar = Progress(updates * per_update) if show_progress else None
    for k in range(start, stop):
        t0 = time.perf_counter()
        step = (k + 1) * per_update
        metrics = w.train_update(step)
        check_finite(step, {key: v for key, v in metrics.items() if key.startswith("Loss/")}, w.params())
        metrics["Time/FPS"] = per_update / max(time.perf_counter() - t0, 1e-9)
        rundir.log(step, metrics)
        if bar is not None:
            bar.update(step, {"success": metrics["Metrics/SuccessRate"], "ret": metrics["Metrics/EpRet"],
                              "queue": metrics.get("pairs/queue", 0.0)}, force=True)
        if (k + 1) % cfg.checkpoint_every == 0 or k + 1 == updates:
            rundir.save(step, {"update": k + 1, "world": w.state_dict()}, w.params())
    if bar is not None:
        bar.close()


# ------------------------------------------------------------------------------------ CLI entry points
DESCRIPTION = shell.Engine(
    name=ENGINE, config=BonusConfig, presets=PRESETS, doc=__doc__, validate=validate,
    run=lambda cfg, out, resume, stop_after, show_progress: run(
        cfg, out, resume=resume, stop_after_updates=stop_after, show_progress=show_progress),
    out_name=lambda cfg: f"{ENGINE}-{cfg.task}-{cfg.ablation}-s{cfg.seed}", out_pattern="bonus-TASK-ABLATION-sSEED",
    stop_unit="updates", flags=(shell.Flag("task", "task"), shell.Flag("ablation", "ablation", choices=ABLATIONS)))


def train(argv: list[str]) -> int:
    """`rlspec train bonus ...`"""
    return shell.train(DESCRIPTION, argv)


def build_config(preset: str = "default", overrides: list[str] = (), task: str | None = None,
                 ablation: str | None = None) -> BonusConfig:
    shorthands = [f"task={task}"] * bool(task) + [f"ablation={ablation}"] * bool(ablation)
    return shell.build_config(DESCRIPTION, preset, [*shorthands, *overrides])


def plot(run_dir: Path) -> int:
    for f in draw(run_dir, panels()):
        print(f)
    return 0


def policy_state(world: dict) -> dict:
    """The policy's weights in a checkpoint's world: the local learner's, or (execution=ray) trainer 0's — the
    trainers average their gradients, so every one holds the same."""
    side = world["learner"] if "learner" in world else world["trainers"][0]["side"]
    return side["policy"]


def evaluate(run_dir: Path, argv: list[str]) -> int:
    """Success rate and mean return of the greedy policy (argmax token per dimension) over K episodes drawn
    from a seed the run never trained on; RUN/eval/eval.json."""
    p = argparse.ArgumentParser(prog="rlspec eval RUN")
    p.add_argument("--episodes", type=int, default=20, help="episodes to average (default 20)")
    args = p.parse_args(argv)
    if args.episodes < 1:
        p.error(f"--episodes: expected an int >= 1, got {args.episodes}")
    try:
        cfg = runconfig.from_dict(BonusConfig, RunDir.read_config(run_dir)["config"])
        ckpt = load_checkpoint(Path(run_dir) / "checkpoints/last.pt", ("update", "world"))
    except (runconfig.ConfigError, FileNotFoundError) as err:
        print(f"rlspec eval: error: {err}", file=sys.stderr)
        return 2
    w = World(cfg)
    w.learner.learner.policy.load_state_dict(policy_state(ckpt["world"]))
    envs = make_envs(cfg, 1, 1_000_003)  # an env index no training run uses
    obs, ret, results, progress = torch.from_numpy(envs.reset()), 0.0, [], EpisodeProgress(args.episodes)
    while len(results) < args.episodes:
        with torch.no_grad():
            out = envs.step(w.learner.learner.policy(obs).argmax(-1).numpy())
        ret += float(out.reward[0])
        if out.terminated[0] or out.truncated[0]:
            results.append((ret, float(out.success[0])))
            progress.update(len(results))
            ret = 0.0
        obs = torch.from_numpy(out.obs)
    result = {"episodes": len(results), "EpRet": sum(r[0] for r in results) / len(results),
              "SuccessRate": sum(r[1] for r in results) / len(results)}
    (Path(run_dir) / "eval").mkdir(exist_ok=True)
    (Path(run_dir) / "eval/eval.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


COMPARED = ("Metrics/SuccessRate", "Metrics/EpRet", "pairs/queue", "bonus/updates")


def compare(argv: list[str]) -> int:
    """`rlspec compare bonus [--task T] [--ablation A] [--preset P] [--set k=v ...] [--out DIR]`: one config run
    by the local execution (one process) and by the Ray execution (actors, gloo trainers) into DIR/local and
    DIR/ray; DIR/compare.json (per run: the last 10% of rows' mean success rate and return, env steps/s) and
    DIR/compare.png (their curves side by side), with the difference of those means (rlspec/runs/compare.py).
    The two draw their random numbers differently (one generator vs one per worker), so their curves are
    compared, not their rows."""
    p = argparse.ArgumentParser(prog="rlspec compare bonus", description=compare.__doc__)
    p.add_argument("--task", help="shorthand for --set task=...")
    p.add_argument("--ablation", choices=ABLATIONS, help="shorthand for --set ablation=...")
    p.add_argument("--preset", choices=sorted(PRESETS), default="default", help="a named set of overrides")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (both)")
    p.add_argument("--out", type=Path, help="where the runs and compare.json go (default runs/compare-bonus-TASK-sSEED)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)

    def both() -> tuple[Path, dict[str, Path]]:
        cfg = build_config(args.preset, args.set, args.task, args.ablation)
        out = args.out or Path("runs") / f"compare-bonus-{cfg.task}-s{cfg.seed}"
        configs = {execution: dataclasses.replace(cfg, execution=execution,
                                                  inference=cfg.inference if execution == "ray" else "local")
                   for execution in ("local", "ray")}
        for c in configs.values():  # both valid before either run writes anything
            validate(c)
        return out, {execution: run(c, out / execution, show_progress=not args.quiet) for execution, c in configs.items()}

    status, ran = attempt("rlspec compare bonus", both)
    if status is not None:
        return status
    out, runs = ran
    result = {name: summary(path) for name, path in runs.items()}
    diff = {k: difference(result["local"][k], result["ray"][k]) for k in ("SuccessRate", "EpRet")}
    (out / "compare.json").write_text(json.dumps({**result, "difference": diff}, indent=2))
    overlay(runs, COMPARED, out / "compare.png", cols=2)
    print("; ".join(f"{name}: success {r['SuccessRate']:.3f}, return {r['EpRet']:.3g}, {r['env_steps_per_s']:.0f} "
                    f"env steps/s" for name, r in result.items()) + f"; written to {out / 'compare.json'}")
    return 0


def summary(run_dir: Path) -> dict:
    """The last 10% of a run's rows (at least one): mean success rate and return; env steps/s over all rows."""
    rows = read_metrics(run_dir)
    tail = rows[-max(1, len(rows) // 10):]
    def mean(key: str, rs: list[dict]) -> float:  # over the rows where the key is finite (NaN: no episode yet)
        xs = [r[key] for r in rs if math.isfinite(r.get(key, math.nan))]
        return sum(xs) / len(xs) if xs else math.nan

    return {"run": str(run_dir), "rows": len(rows), "SuccessRate": mean("Metrics/SuccessRate", tail),
            "EpRet": mean("Metrics/EpRet", tail), "env_steps_per_s": mean("Time/FPS", rows)}
