"""The run loop of the safe-RL PPO family, one for every execution (local.py: one process; parallel.py: env
workers, torchrun, a device): collect, update, check, log, checkpoint, resume.

    rlspec train safe --algo PPOLag --env SafetyPointGoal1-v0 [--preset smoke] [--out DIR] [--set k=v ...]
    rlspec train safe --algo PPOLagSem --set semantic.enable=true --set semantic.model_name=DIR ...
                                              # PPOLag + the semantic side of the PPOLagSem design (rlspec/semantics)
    rlspec train safe --resume RUN            # continue RUN from its last checkpoint

Same config and seed ⇒ the same run, bit for bit, straight or resumed: every random draw comes from one
``torch.Generator`` (weights, action noise, minibatch order), every episode is reset with its own seed
(rlspec/envs/safe_vector.py) and a checkpoint holds models, optimizers, controllers, the generator state
and the envs (as replayable actions). The algorithms are rlspec/algos/safe_ppo.py
and rlspec/algos/trust_region.py (TRPO, TRPOLag, TRPOPID, CPO, P3O); this file only runs them.

PPOLagSem (PPOLagSem design) is PPOLag with ``semantic.enable``: the engine then builds
``rlspec.semantics.build_hooks(cfg.semantic, ...)`` and, following its call protocol
(rlspec/semantics/hooks.py), renders frames on capture steps, shapes the rewards before they are stored,
scales λ's learning rate by the modulation M, trains the risk head after the update, logs the Semantics/*
and Risk/* keys, writes RUN/semantics.json (prompts, their hash, model identity; §13) and checkpoints the
hooks' state. With ``semantic.enable`` False nothing semantic is imported or built: PPOLagSem is PPOLag.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from rlspec.algos.safe_ppo import (
    ALGOS,
    KITS,
    LOCAL,
    Comm,
    Kit,
    Rollout,
    SafePPOState,
    env_feedback,
    log_prob,
    make_state,
    policy_input,
    sample,
)
from rlspec.algos.safe_update import update
from rlspec.algos.trust_region import validate_config
from rlspec.engines.safe import config
from rlspec.engines.safe.config import ENGINE, EXECUTIONS, PARALLEL_ONLY, SafeConfig
from rlspec.envs import safety_gym
from rlspec.envs.safe_vector import SafeVectorEnv, VectorStep
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.faults import check_finite
from rlspec.runs.plots import Panel, draw
from rlspec.runs.rundir import (
    Progress,
    RunDir,
    atomic_write_bytes,
    load_checkpoint,
)
from rlspec.semantics import build_hooks


def panels(cfg: SafeConfig) -> list[Panel]:
    """RUN/plots: return, cost with the limit line, λ; with semantics, β and the shaping ratio decaying."""
    out = [Panel("Metrics/EpRet", "return.png", "episode return"),
           Panel("Metrics/EpCost", "cost.png", "episode cost", {"cost limit": cfg.safety.cost_limit}),
           Panel("Metrics/LagrangeMultiplier", "lambda.png", "Lagrange multiplier λ")]
    if cfg.semantic.enable:
        out += [Panel("Semantics/Beta", "beta.png", "shaping coefficient β"),
                Panel("Semantics/ShapingRewardRatio", "shaping_ratio.png", "E[shaping] / E[reward]")]
    if cfg.semantic.calibrated:
        out += [Panel("Risk/ECE", "risk_ece.png", "risk head ECE on held-out captures")]
    return out


def validate(cfg: SafeConfig) -> None:
    runconfig.check(cfg, {"execution": runconfig.one_of(EXECUTIONS), "algo": runconfig.one_of(sorted(ALGOS)),
                          "kit": runconfig.one_of(KITS)})
    runconfig.refuse_other_executions(cfg, EXECUTIONS, PARALLEL_ONLY)
    problems = validate_config(cfg.trust_region)  # [(key, expected, got)]
    if problems:
        key, expected, got = problems[0]
        raise runconfig.bad(f"trust_region.{key}", expected, got)
    runconfig.require_at_least(cfg, dict.fromkeys(("num_envs", "total_steps", "steps_per_epoch", "ep_window",
                                                   "checkpoint_every", "torch_threads", "ppo.update_iters",
                                                   "ppo.batch_size"), 1) | {"frame_size": 8})
    runconfig.check(cfg, {**dict.fromkeys(("ppo.gamma", "ppo.cost_gamma", "ppo.lam", "ppo.lam_c"), runconfig.UNIT),
                          **dict.fromkeys(("ppo.actor_lr", "ppo.critic_lr", "ppo.clip"), runconfig.POSITIVE)})
    if cfg.steps_per_epoch % cfg.num_envs:
        raise runconfig.bad("steps_per_epoch", f"a multiple of num_envs = {cfg.num_envs}", cfg.steps_per_epoch)
    if cfg.total_steps < cfg.steps_per_epoch:
        raise runconfig.bad("total_steps", f">= one epoch (steps_per_epoch = {cfg.steps_per_epoch})", cfg.total_steps)
    if cfg.semantic.enable and cfg.algo != "PPOLagSem":
        raise runconfig.bad("semantic.enable", f"False with algo {cfg.algo!r} (True needs PPOLagSem)", True)
    # the networks' and controllers' own checks (an activation, a negative cost limit), on stand-in sizes
    runconfig.surfaced(cfg, lambda: make_state(cfg.algo, cfg.ppo, cfg.safety, 1, 1, cfg.num_envs,
                                               Kit.named("reference"), torch.Generator()))
    problem = safety_gym.env_problem(cfg.env_id)  # last: the keys above are checked without the simulator
    if problem:
        raise runconfig.ConfigError(f"config key 'env_id' (--env): {problem}")


# ------------------------------------------------------------------------------------------ the loop
def collect(state: SafePPOState, envs: SafeVectorEnv, steps: int, gen: torch.Generator, hooks=None,
            first_step: int = 0, norm_per_step: bool = False) -> Rollout:
    """``steps`` vectorized steps with the current policy and the frozen observation statistics (with
    ``norm_per_step``, ppo.obs_norm_update 'step': the statistics take each observation first). With
    PPOLagSem ``hooks`` (``first_step``: env steps taken before this rollout), frames of s'_t are rendered
    on capture steps only and the env rewards are shaped before anything else sees them (PPOLagSem design §4.4).

    Each step's actions go to the envs (``step_async``) before this process takes their log-probabilities
    and finishes the previous step's row (s'_t's policy input): with envs in worker processes that work
    overlaps the env steps; the numbers are the same either way."""
    rows = []
    raw = envs.obs  # [N, D_env]
    finish = None  # the previous step's row, completed while this step's envs run
    per_step = norm_per_step and state.obs_norm is not None
    for i in range(steps):
        if per_step:  # OmniSafe's timing: the statistics take each observation before it is normalized
            state.obs_norm.commit(raw)
        obs = policy_input(state, raw)  # [N, D]
        action, dist = sample(state, obs, gen)  # [N, A] on the policy's device
        global_step = first_step + i * envs.num_envs
        host_action = action.cpu()
        capture = hooks is not None and hooks.capture_due(global_step)
        envs.step_async(host_action, **({"margins": True} if capture and hooks.oracle else {"render": capture}))
        logp = log_prob(dist, action)  # [N]
        if finish is not None:
            rows.append(finish())
        out = envs.step_wait()
        done = out.terminated | out.truncated  # [N]
        env_reward = out.reward if hooks is None else hooks.shape_rewards(global_step, out.reward, out.cost, done,
                                                                          out.frames, out.margins)
        reward, z_final = env_feedback(state, env_reward, out.cost, done)
        finish = functools.partial(_row, state, obs, host_action, logp, reward, out, z_final, raw)
        raw = out.obs
    rows.append(finish())
    return Rollout(*(torch.stack(col) for col in zip(*rows)))


def _row(state: SafePPOState, obs: torch.Tensor, action: torch.Tensor, logp: torch.Tensor, reward: torch.Tensor,
         out: VectorStep, z_final: torch.Tensor | None, raw: torch.Tensor) -> tuple:
    """One step's Rollout row; s'_t's policy input is that of the real final observation where the episode
    ended (and of z_final, the budget of s'_t, for Sauté/Simmer)."""
    next_obs = policy_input(state, out.final_obs, z_final)
    return obs, action, logp, reward, out.cost, out.terminated, out.truncated, next_obs, raw


def _window_means(window: deque, comm: Comm) -> dict[str, float]:
    """Mean return, cost and length of the recent episodes (of every process: one J_c for all)."""
    sums = [sum(e[0] for e in window), sum(e[1] for e in window), sum(e[2] for e in window), len(window)]
    ret, cost, length, n = comm.sum(torch.tensor(sums, dtype=torch.float64)).tolist()
    if n == 0:
        return {"Metrics/EpRet": math.nan, "Metrics/EpCost": math.nan, "Metrics/EpLen": math.nan}
    return {"Metrics/EpRet": ret / n, "Metrics/EpCost": cost / n, "Metrics/EpLen": length / n}


@dataclass
class Execution:
    """Where the loop's pieces run. Execution local: one process, its envs in it. Execution parallel
    (rlspec/engines/safe/parallel.py): envs in worker processes, a torch.distributed ``comm``, a device."""

    make_envs: Callable[[SafeConfig, int], object] = lambda cfg, first: safety_gym.make_vector(
        cfg.env_id, cfg.num_envs, cfg.seed, cfg.forced_cost, first, **render_settings(cfg))
    """(config, global index of this process's first env) -> a vector env (SafeVectorEnv's interface)."""
    comm: Comm = LOCAL
    """Data-parallel reductions across processes (rlspec.algos.safe_ppo.Comm)."""
    rank: int = 0
    """This process's rank; rank 0 alone writes the run directory."""
    device: str = "cpu"
    """Where the networks live and the update runs (a GPU policy: actions come back to the host envs)."""


def render_settings(cfg: SafeConfig) -> dict:
    """Env keyword arguments for rgb_array frames when PPOLagSem captures them (none otherwise, and none for the
    oracle's margins: no renderer)."""
    if not cfg.semantic.enable or cfg.semantic.margin_source == "oracle":
        return {}
    return dict(render_mode="rgb_array", width=cfg.frame_size, height=cfg.frame_size)


def rank_seed(seed: int, rank: int) -> int:
    """The generator seed of ``rank`` after the (shared) initial weights are drawn: rank 0 keeps ``seed``'s
    stream, so a one-process run of any engine is the reference run."""
    return seed if rank == 0 else int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


_NETS = ("actor", "reward_critic", "cost_critic")
_OPTS = ("actor_opt", "reward_opt", "cost_opt")
_CONTROLLERS = ("multiplier", "budget", "simmer", "simmer_budget", "obs_norm", "reward_scaler", "guard")


def checkpoint(state: SafePPOState, envs: SafeVectorEnv, gen: torch.Generator, window: deque, epoch: int,
               step: int, hooks=None) -> dict:
    return {"epoch": epoch, "step": step, "gen": gen.get_state(), "envs": envs.state_dict(), "window": list(window),
            **{k: getattr(state, k).state_dict() for k in _NETS + _OPTS if getattr(state, k) is not None},
            "controllers": {k: getattr(state, k) for k in _CONTROLLERS},
            **({"semantics": hooks.state_dict()} if hooks is not None else {})}


def params(state: SafePPOState) -> dict:
    """The networks' parameters by name (what must stay finite)."""
    return {k: getattr(state, k).parameters() for k in _NETS if getattr(state, k) is not None}


def restore(ckpt: dict, state: SafePPOState, envs: SafeVectorEnv, gen: torch.Generator, window: deque,
            hooks=None) -> None:
    for k in _NETS + _OPTS:
        if getattr(state, k) is not None:
            getattr(state, k).load_state_dict(ckpt[k])
    for k, v in ckpt["controllers"].items():
        setattr(state, k, v)
    gen.set_state(ckpt["gen"])
    envs.load_state_dict(ckpt["envs"])
    window.extend(ckpt["window"])
    if hooks is not None:
        hooks.load_state_dict(ckpt["semantics"])


def run(cfg: SafeConfig, out: Path, resume: bool = False, stop_after_epochs: int | None = None,
        show_progress: bool = True, execution: Execution | None = None) -> Path:
    """Train (or, with ``resume``, continue the run in ``out``); returns the run directory."""
    validate(cfg)
    ex = execution or Execution()
    world, io = ex.comm.world_size, ex.rank == 0
    if cfg.steps_per_epoch % (world * cfg.num_envs):
        raise runconfig.bad("steps_per_epoch", f"a multiple of processes × num_envs = {world} × {cfg.num_envs}",
                            cfg.steps_per_epoch)
    if cfg.ppo.obs_norm_update == "step" and world > 1:
        raise runconfig.bad("ppo.obs_norm_update", "'rollout' with more than one process (each rank's statistics "
                            "would move apart during a rollout)", cfg.ppo.obs_norm_update)
    if resume and world > 1:
        raise runconfig.ConfigError("--resume continues one-process runs only")
    torch.set_num_threads(cfg.torch_threads)
    kit = Kit.named(cfg.kit)
    gen = torch.Generator().manual_seed(cfg.seed)  # the same initial weights on every process
    envs = ex.make_envs(cfg, ex.rank * cfg.num_envs)  # this process's slice of world × num_envs envs
    state = make_state(cfg.algo, cfg.ppo, cfg.safety, envs.obs_dim, envs.act_dim, cfg.num_envs, kit, gen,
                       ex.device)
    if ex.rank:
        gen.manual_seed(rank_seed(cfg.seed, ex.rank))  # its own action noise and minibatch order
    hooks = _semantic_hooks(cfg, world)
    if hooks is not None and not isinstance(envs, SafeVectorEnv):
        envs.close()
        raise runconfig.ConfigError(f"config key 'semantic.enable': PPOLagSem renders frames from in-process envs "
                                    f"(SafeVectorEnv), got {type(envs).__name__} (set env_workers=0)")
    window: deque = deque(maxlen=cfg.ep_window)
    epochs = cfg.total_steps // cfg.steps_per_epoch
    start, rundir = 0, None
    try:
        if resume:
            ckpt = load_checkpoint(Path(out) / "checkpoints/last.pt", ("epoch", "step", "gen", "envs", "window"))
            restore(ckpt, state, envs, gen, window, hooks)
            start = ckpt["epoch"]
            rundir = RunDir(out, ENGINE, runconfig.to_dict(cfg), resume_step=ckpt["step"],
                            final_step=epochs * cfg.steps_per_epoch)
        else:
            envs.reset()
            if io:
                rundir = RunDir(out, ENGINE, runconfig.to_dict(cfg), extra_versions=safety_gym.versions())
                if hooks is not None:  # §13: prompts, their hash, load status, model identity
                    atomic_write_bytes(rundir.path / "semantics.json",
                                       json.dumps(hooks.metadata(), indent=2).encode())
        with rundir or contextlib.nullcontext():
            _loop(cfg, ex, kit, state, envs, gen, window, hooks, rundir, start,
                  min(epochs, start + stop_after_epochs if stop_after_epochs is not None else epochs), show_progress)
    finally:
        envs.close()
    if rundir is not None and cfg.plots:
        draw(rundir.path, panels(cfg))
    return Path(out)


def _loop(cfg: SafeConfig, ex: Execution, kit: Kit, state: SafePPOState, envs: SafeVectorEnv, gen: torch.Generator,
          window: deque, hooks, rundir: RunDir | None, start: int, stop: int, show_progress: bool) -> None:
    """Epochs ``start`` .. ``stop`` − 1: collect, update, check that losses and parameters are finite, log,
    checkpoint."""
    epochs = cfg.total_steps // cfg.steps_per_epoch
    steps = cfg.steps_per_epoch // (ex.comm.world_size * cfg.num_envs)  # vector steps per epoch
    progress = Progress(cfg.total_steps, ("Metrics/EpRet", "Metrics/EpCost", "Metrics/LagrangeMultiplier"),
                        on=show_progress and rundir is not None)
    for epoch in range(start, stop):
        t0 = time.perf_counter()
        rollout = collect(state, envs, steps, gen, hooks, epoch * cfg.steps_per_epoch,
                          cfg.ppo.obs_norm_update == "step")
        window.extend(envs.pop_finished())
        jc = _window_means(window, ex.comm)["Metrics/EpCost"]
        t1 = time.perf_counter()
        scale = hooks.lambda_scale() if hooks is not None else 1.0  # M of the PPOLagSem design §4.0.5 (1: PPOLag)
        metrics = update(state, rollout, jc, cfg.ppo, cfg.safety, kit, gen, progress=epoch / epochs, comm=ex.comm,
                         tr=cfg.trust_region, lambda_scale=scale)
        if hooks is not None:  # the risk head learns after the PPO update (§25.15)
            metrics.update(hooks.after_update())
        step = (epoch + 1) * cfg.steps_per_epoch
        check_finite(step, {k: v for k, v in metrics.items() if k.startswith("Loss/")}, params(state))
        t2 = time.perf_counter()
        metrics.update(_window_means(window, ex.comm))
        metrics.update({"Train/Epoch": float(epoch + 1), "TotalEnvSteps": float(step), "Time/Rollout": t1 - t0,
                        "Time/Update": t2 - t1, "Time/FPS": cfg.steps_per_epoch / max(t2 - t0, 1e-9)})
        if hooks is not None:
            metrics.update(hooks.telemetry())
        progress.update(step, metrics, force=True)
        if rundir is not None:
            rundir.log(step, metrics)
            if (epoch + 1) % cfg.checkpoint_every == 0 or epoch + 1 == epochs:
                rundir.save(step, checkpoint(state, envs, gen, window, epoch + 1, step, hooks), params(state))
    progress.close()


def _semantic_hooks(cfg: SafeConfig, world: int):
    """PPOLagSem's hooks (rlspec/semantics/hooks.py) for an enabled config, else None (nothing imported)."""
    if cfg.semantic.enable and world > 1:
        raise runconfig.ConfigError("config key 'semantic.enable': PPOLagSem runs in one process (its semantic "
                                    f"state is not shared across processes), got {world} processes")
    return build_hooks(cfg.semantic, num_envs=cfg.num_envs, gamma=cfg.ppo.gamma, total_steps=cfg.total_steps,
                       seed=cfg.seed, kit=cfg.kit)


# ------------------------------------------------------------------------------------ CLI entry points
def describe(execution: Callable[[SafeConfig], Execution] = lambda cfg: Execution()) -> shell.Engine:
    """The engine `rlspec train safe` runs: this loop, executed by ``execution(cfg)`` (the package's entry chooses
    by cfg.execution)."""
    return config.describe(ENGINE, SafeConfig, validate, lambda cfg, out, resume, stop_after, show_progress: run(
        cfg, out, resume=resume, stop_after_epochs=stop_after, show_progress=show_progress,
        execution=execution(cfg)))


def build_config(preset: str = "default", overrides: list[str] = (), algo: str | None = None,
                 env: str | None = None) -> SafeConfig:
    shorthands = [f"algo={algo}"] * bool(algo) + [f"env_id={env}"] * bool(env)
    return shell.build_config(describe(), preset, [*shorthands, *overrides])
