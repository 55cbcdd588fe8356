"""The DreamerV3 run loop (Dreamer plan M6–M8) on the project's Game Boy room, and what both executions share:
local.py (``LocalExecution``: one process, CPU, PyBoy, top to bottom) runs the loop below as it reads;
device.py (``DeviceExecution``: actor and learner parts over a device ring, the Warp room) builds on its parts.

Shared here: the config's validation (the device execution's keys included; the config itself,
DreamerRunConfig, is config.py's, torch-free), the train-ratio scheduler (``updates_due``), the loop's steps
(``act``, ``env_step``, ``learn``), the run directory, metrics rows and plots (``Logger``), checkpoint
reading, the greedy episodes of eval. verbs.py (eval, plot, compare) and the package's entry (__init__.py,
`rlspec train`) join the executions behind the CLI.


One loop iteration is one vector step of the ``num_envs`` emulators (``num_envs`` env steps):
  act     random actions until ``min_ready_steps`` env steps are in the replay (prefill), then the policy
          (rlspec/algos/dreamer.py ``policy_step``, sampling);
  store   the replay row of every env: (obs_t, action_t, reward and continue of that transition, is_first,
          episode id) — Dreamer plan §2.3's transition layout (contract replay);
  learn   the train-ratio scheduler: after env step s the number of updates done is
          floor((s − min_ready_steps) · train_ratio / (batch_size · seq_len)), so every update replays
          batch_size · seq_len steps and replayed / collected steps stay at ``train_ratio`` (danijar's
          ``train_ratio``; sheeprl's replay_ratio = train_ratio / (B·T) updates per env step).

Every metrics row (RUN/metrics.csv, both engines) holds the achieved replay ratio (Train/replay_ratio =
Train/replayed_steps / Train/collected_steps), env steps/s, updates/s and the process's peak memory
(Memory/peak_rss_mib; Memory/peak_vram_mib on CUDA); RUN/summary.json has the last row's figures and the
peak memory at the end.

Same config and seed ⇒ the same run, bit for bit, straight or resumed (``torch_threads`` 1): every random
draw (weights, prefill actions, policy samples, replay windows, latent samples) comes from one
``torch.Generator``; each episode is reset from its own seed; a checkpoint holds the models, optimizers,
ReturnEMA, replay ring, generator state, the loop's state and the envs (replayable actions,
rlspec/envs/room/recorded.py).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from rlspec import jsonio
from rlspec.algos.dreamer import (
    KITS,
    PRECISIONS,
    DreamerState,
    Kit,
    behavior_config,
    make_state,
    policy_step,
    reconstruct,
    train_step,
    world_model_config,
)
from rlspec.contracts.room_env import FREE_CELLS, MASK32, MIN_FRAMESKIP, NUM_ACTIONS, SCENARIOS, cell_seeds
from rlspec.engines.dreamer.config import ENGINE, ENVS, EXECUTIONS, DreamerRunConfig
from rlspec.runs import config as runconfig
from rlspec.runs import device as devices
from rlspec.runs.config import bad
from rlspec.runs.faults import Diverged, RunStopped, check_finite, nonfinite_tensors
from rlspec.runs.plots import Panel, draw
from rlspec.runs.rundir import (
    EpisodeProgress,
    Progress,
    RunDir,
    atomic_write_bytes,
    load_checkpoint,
    peak_memory,
)
from rlspec.runs.shell import episode_means

INT_MIN = {"seed": 0, "num_envs": 1, "total_steps": 1, "min_ready_steps": 0, "replay_capacity": 1, "step_limit": 1,
           "frameskip": MIN_FRAMESKIP, "log_every": 1, "checkpoint_every": 1, "ep_window": 1, "torch_threads": 1,
           "dreamer.batch_size": 1, "dreamer.seq_len": 1, "dreamer.mlp_hidden": 1, "dreamer.mlp_layers": 0}


POSITIVE = ("wm_lr", "actor_lr", "critic_lr", "wm_eps", "ac_eps", "wm_clip", "actor_clip", "critic_clip")


def validate(cfg: DreamerRunConfig) -> None:
    runconfig.check(cfg, {"execution": runconfig.one_of(EXECUTIONS), "task": runconfig.one_of(sorted(SCENARIOS)),
                          "env": runconfig.one_of(ENVS), "train_ratio": runconfig.POSITIVE,
                          "dreamer.precision": runconfig.one_of(PRECISIONS),
                          **{f"dreamer.{key}": runconfig.POSITIVE for key in POSITIVE}})
    runconfig.refuse_other_executions(cfg, EXECUTIONS)
    validate_env(cfg)
    runconfig.require_at_least(cfg, INT_MIN)
    if cfg.seed > MASK32:
        raise bad("seed", "an int <= 2**32 - 1 (the room's episode seeds are uint32 arithmetic)", cfg.seed)
    for key in ("total_steps", "log_every", "checkpoint_every"):
        if getattr(cfg, key) % cfg.num_envs:
            raise bad(key, f"a multiple of num_envs = {cfg.num_envs}", getattr(cfg, key))
    d = cfg.dreamer
    if cfg.min_ready_steps < cfg.num_envs * d.seq_len:
        raise bad("min_ready_steps", f">= num_envs · dreamer.seq_len = {cfg.num_envs * d.seq_len} (a full "
                  "sequence in every env column before the first update)", cfg.min_ready_steps)
    if cfg.replay_capacity < d.seq_len:
        raise bad("replay_capacity", f">= dreamer.seq_len = {d.seq_len}", cfg.replay_capacity)
    if d.head_input == "posterior" and not cfg.replay_ends:
        raise bad("replay_ends", "true with dreamer.head_input posterior (the heads read the frame each step "
                  "arrives at, which only replay_ends stores)", cfg.replay_ends)
    try:
        world_model_config(d, num_actions(cfg)), behavior_config(d)
    except (TypeError, ValueError) as err:
        raise runconfig.ConfigError(f"config group 'dreamer': {err}") from None
    if cfg.execution == "device":
        validate_device(cfg)


def validate_env(cfg: DreamerRunConfig) -> None:
    """The env keys: the room takes none of rom/state/plugin; pyboy needs an existing ROM file, an existing
    save state file if one is named, and a plug-in that loads (its own error in the message)."""
    if cfg.env == "room":
        for key in ("rom", "state", "plugin"):
            if getattr(cfg, key):
                raise bad(key, "empty with env room (the project's ROM; --env pyboy runs a user's ROM)",
                          getattr(cfg, key))
        return
    if cfg.execution != "local":
        raise bad("execution", "local with env pyboy (the device execution runs the Warp room only)", cfg.execution)
    from rlspec.envs import pyboy_env  # needs PyBoy: only on this path

    if not cfg.rom or not Path(cfg.rom).is_file():
        raise bad("rom", "an existing Game Boy ROM file (--rom PATH)", cfg.rom)
    problem = pyboy_env.rom_problem(Path(cfg.rom))
    if problem:
        raise bad("rom", "a Game Boy ROM file (--rom PATH)", cfg.rom, problem)
    if cfg.state and not Path(cfg.state).is_file():
        raise bad("state", "an existing PyBoy save state file (--state PATH) or empty", cfg.state)
    problem = cfg.state and pyboy_env.state_problem(Path(cfg.rom), Path(cfg.state))
    if problem:
        raise bad("state", "a PyBoy save state of this ROM (--state PATH) or empty", cfg.state, problem)
    if not cfg.plugin:
        raise bad("plugin", "a reward/termination plug-in, a .py file or a module name (--plugin; "
                  "interface: rlspec/envs/pyboy_env.py)", cfg.plugin)
    try:
        num_actions(cfg)
    except Exception as err:  # the user's code: any error it raises while loading
        raise bad("plugin", "a plug-in that loads with functions reward(memory) and done(memory) (interface: "
                  "rlspec/envs/pyboy_env.py)", f"{cfg.plugin} ({type(err).__name__}: {err})") from None


def num_actions(cfg: DreamerRunConfig) -> int:
    """The action count: the room's d-pad, or the plug-in's BUTTONS."""
    if cfg.env == "room":
        return NUM_ACTIONS
    return _plugin_buttons(cfg.plugin)


@functools.cache
def _plugin_buttons(plugin: str) -> int:
    from rlspec.envs.pyboy_env import load_plugin

    return len(load_plugin(plugin).buttons)


def rom_path() -> Path:
    """The room ROM, with a clear error when the checkout lacks it."""
    from rlspec.envs.room import pyboy_room

    if not pyboy_room.ROM.is_file():
        raise FileNotFoundError(f"the room ROM {pyboy_room.ROM} is missing: rebuild it with `nox -s rom` "
                                "(sdcc) or restore it with git")
    return pyboy_room.ROM


def make_envs(cfg: DreamerRunConfig, seed: int):
    """The run's envs: the room ROM, or (env pyboy) the user's ROM and plug-in, each emulator from the save
    state (or its boot state) at every reset."""
    from rlspec.envs.pyboy_env import PluginError, PyBoyGame, load_plugin  # PyBoy: imported only when a run starts
    from rlspec.envs.room.recorded import RecordedRoom

    class PluginStopped(PluginError, RunStopped):  # the user's plug-in raised: the run stops, exit 3
        pass

    def user_game() -> PyBoyGame:
        return PyBoyGame(cfg.rom, load_plugin(cfg.plugin, PluginStopped), state=cfg.state or None,
                         frameskip=cfg.frameskip, start_at_boot=True)

    if cfg.env == "room":
        rom_path()
    return RecordedRoom(cfg.num_envs, cfg.task, step_limit=cfg.step_limit, seed=seed, frameskip=cfg.frameskip,
                        make_game=user_game if cfg.env == "pyboy" else None)


def make_ring(cfg: DreamerRunConfig):
    from rlspec.reference.replay import ReplayRing

    return ReplayRing(cfg.replay_capacity, cfg.num_envs, store_flags=cfg.replay_ends, store_final=cfg.replay_ends)


def updates_due(cfg: DreamerRunConfig, env_steps: int) -> int:
    """Updates that should be done after ``env_steps`` (module docstring: the train-ratio scheduler)."""
    d = cfg.dreamer
    if env_steps < cfg.min_ready_steps:
        return 0
    return math.floor((env_steps - cfg.min_ready_steps) * cfg.train_ratio / (d.batch_size * d.seq_len))


@dataclass
class Loop:
    """Everything the loop carries between vector steps (besides models, replay, envs and generator)."""

    env_steps: int
    obs: torch.Tensor  # [N, 1, 72, 20] uint8: the current observations
    is_first: torch.Tensor  # [N] bool
    episode_id: torch.Tensor  # [N] int32
    prev_action: torch.Tensor  # [N] int64: the action taken at the previous obs
    carry: tuple | None  # the policy's (h [N, H], z [N, S, K]); None: not started
    ep_return: torch.Tensor  # [N] float64 return of the running episodes
    ep_length: torch.Tensor  # [N] int64
    finished: list  # (return, length, success) of the last ep_window finished episodes
    sums: dict  # train metrics summed since the last metrics row
    count: int  # updates since the last metrics row

    def state_dict(self) -> dict:
        return dict(vars(self))

    @classmethod
    def start(cls, cfg: DreamerRunConfig, step) -> "Loop":
        n = cfg.num_envs
        return cls(0, step.obs.clone(), step.is_first.clone(), step.episode_id.clone(),
                   torch.zeros(n, dtype=torch.int64), None, torch.zeros(n, dtype=torch.float64),
                   torch.zeros(n, dtype=torch.int64), [], {}, 0)


def act(cfg: DreamerRunConfig, state: DreamerState, loop: Loop, gen: torch.Generator) -> torch.Tensor:
    """[N] action ids: uniform during the prefill, then sampled from the policy."""
    if loop.env_steps < cfg.min_ready_steps:
        return torch.randint(0, num_actions(cfg), (cfg.num_envs,), generator=gen)
    action, loop.carry = policy_step(state, loop.obs, loop.prev_action, loop.is_first, loop.carry, gen)
    return action


def env_step(cfg: DreamerRunConfig, envs, ring, loop: Loop, action: torch.Tensor) -> None:
    """Step the envs, push the transition rows, track episodes (the last ep_window finished ones)."""
    final = torch.empty_like(loop.obs) if cfg.replay_ends else None  # [N, 1, 72, 20] before any reset
    out = envs.step(action, final_out=final)
    ring.push(loop.obs, action.to(torch.int32), out.reward, loop.is_first, (~out.terminated).float(),
              loop.episode_id, out.terminated, out.truncated, final)
    advance(cfg, loop, out, action)
    loop.finished = loop.finished[-cfg.ep_window:]


def advance(cfg: DreamerRunConfig, loop: Loop, out, action: torch.Tensor) -> None:
    """Move ``loop`` past one vector step: episode returns and lengths, the finished episodes, the new obs."""
    loop.ep_return += out.reward.double()
    loop.ep_length += 1
    for i in (out.terminated | out.truncated).nonzero().flatten().tolist():
        loop.finished.append((float(loop.ep_return[i]), int(loop.ep_length[i]), bool(out.success[i])))
        loop.ep_return[i], loop.ep_length[i] = 0.0, 0
    loop.obs, loop.is_first, loop.episode_id = out.obs.clone(), out.is_first.clone(), out.episode_id.clone()
    loop.prev_action = action
    loop.env_steps += cfg.num_envs


def learn(cfg: DreamerRunConfig, state: DreamerState, ring, loop: Loop, gen: torch.Generator) -> None:
    """The due updates; Diverged at the first non-finite metric, or non-finite parameters after them."""
    d = cfg.dreamer
    due = updates_due(cfg, loop.env_steps) - state.updates
    for _ in range(due):
        batch = ring.sample_sequences(d.batch_size, d.seq_len, gen)
        with nonfinite_as_diverged(state, loop.env_steps):
            metrics = {k: float(v) for k, v in train_step(state, batch, gen).items()}
        check_finite(loop.env_steps, metrics, {})
        for k, v in metrics.items():
            loop.sums[k] = loop.sums.get(k, 0.0) + v
        loop.count += 1
    if due > 0:
        check_finite(loop.env_steps, {}, params(state))


def params(state: DreamerState) -> dict:
    """The learner's networks' parameters by name (what must stay finite)."""
    return {name: getattr(state, name).parameters() for name in ("wm", "actor", "critic", "slow_critic")}


@contextlib.contextmanager
def nonfinite_as_diverged(state: DreamerState, env_steps: int):
    """A validator or sampler inside train_step that meets non-finite parameters first raises ValueError or
    RuntimeError: Diverged naming the networks instead (any other error goes on as it is)."""
    try:
        yield
    except (ValueError, RuntimeError) as err:
        broken = nonfinite_tensors(params(state))
        if broken:
            raise Diverged(env_steps, f"parameters of {', '.join(broken)} (update {state.updates + 1}: train_step "
                                      f"stopped with {type(err).__name__}: {str(err).splitlines()[0]})") from err
        raise


def row(cfg: DreamerRunConfig, state: DreamerState, loop: Loop) -> dict[str, float]:
    """One metrics row (and resets the sums): mean train metrics since the last row, episode statistics over
    the window, the measured replay ratio."""
    m = {k: v / loop.count for k, v in loop.sums.items()}
    loop.sums, loop.count = {}, 0
    return {**m, **ratio_metrics(cfg, state.updates, loop.env_steps),
            **episode_means(loop.finished, ("Metrics/EpRet", "Metrics/EpLen", "Metrics/SuccessRate"))}


def ratio_metrics(cfg: DreamerRunConfig, updates: int, env_steps: int) -> dict[str, float]:
    """The achieved replay ratio (both engines): replayed steps (updates · batch_size · seq_len) over the env
    steps collected since the prefill; the scheduler (``updates_due``) holds it at train_ratio to within one
    update."""
    d = cfg.dreamer
    replayed, collected = updates * d.batch_size * d.seq_len, env_steps - cfg.min_ready_steps
    return {"Train/updates": float(updates), "Train/replayed_steps": float(replayed),
            "Train/collected_steps": float(max(collected, 0)),
            "Train/replay_ratio": replayed / collected if collected > 0 else math.nan}


def panels(cfg: DreamerRunConfig) -> list[Panel]:
    """RUN/plots: losses, return, success rate, replay ratio with its target."""
    loss = [Panel(f"Loss/{k}", f"{k}.png", k.replace("_", " ")) for k in
            ("loss", "recon_loss", "reward_loss", "continue_loss", "kl_loss", "actor_loss", "critic_loss")]
    return loss + [Panel("Metrics/EpRet", "return.png", "episode return"),
                   Panel("Metrics/SuccessRate", "success_rate.png", "success rate (window)"),
                   Panel("Train/replay_ratio", "replay_ratio.png", "replay ratio (replayed / collected steps)",
                         {"train_ratio": cfg.train_ratio})]


def reconstruction_strip(state: DreamerState, ring, path: Path, seed: int, frames: int = 12,
                         context: int = 4) -> Path | None:
    """PNG: one replayed sequence, real frames over the posterior's reconstructions over the open-loop
    prediction from the first ``context`` frames (rlspec/algos/dreamer.py ``reconstruct``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gen = torch.Generator().manual_seed(seed)  # its own: the run's generator is untouched
    if ring.committed_t < frames:
        return None
    rows = reconstruct(state, ring.sample_sequences(1, frames, gen), gen, context)  # 3 × [T, 1, h, w]
    titles = ("real (replay)", "reconstructed (posterior)", f"imagined (open loop after {context} frames)")
    fig, axes = plt.subplots(3, 1, figsize=(frames * 1.1, 4.2), dpi=100)
    for ax, frames_tb, title in zip(axes, rows, titles):
        img = torch.cat(list(frames_tb[:, 0].clamp(0, 1)), 1)  # [h, T·w]
        ax.imshow(1 - img.numpy(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")  # shade 3 = black
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def checkpoint(state: DreamerState, ring, envs, loop: Loop, gen: torch.Generator) -> dict:
    return {"env_steps": loop.env_steps, "state": state.state_dict(), "ring": ring, "envs": envs.state_dict(),
            "loop": loop.state_dict(), "gen": gen.get_state()}


def read_checkpoint(path: Path) -> dict:
    """The run's last checkpoint, with a clear error when it is missing or unreadable."""
    return load_checkpoint(path, ("env_steps", "state", "ring", "envs", "loop", "gen"))


def build(cfg: DreamerRunConfig, gen: torch.Generator) -> DreamerState:
    return make_state(cfg.dreamer, num_actions(cfg), Kit.reference(), gen)


def open_rundir(cfg: DreamerRunConfig, out: Path, resume_step: int | None) -> RunDir:
    """A new run directory (config.json, versions.json), or the run in ``out`` reopened at ``resume_step``."""
    if resume_step is not None:
        return RunDir(out, ENGINE, runconfig.to_dict(cfg), resume_step=resume_step, final_step=cfg.total_steps)
    return RunDir(out, ENGINE, runconfig.to_dict(cfg), extra_versions=_versions(cfg))


class Logger:
    """Metrics rows (with env steps/s and updates/s since the last row), the progress line, and at the end
    the plots and the reconstruction strip: shared by both engines."""

    def __init__(self, cfg: DreamerRunConfig, rundir: RunDir, env_steps: int, updates: int, show_progress: bool,
                 device: torch.device | None = None):
        """``device``: the engine's (peak VRAM is reported on CUDA)."""
        self.cfg, self.rundir, self.device = cfg, rundir, device
        self.bar = Progress(cfg.total_steps, ("Time/updates_per_s", "Train/replay_ratio", "Loss/loss",
                                              "Loss/recon_loss", "Metrics/EpRet", "Metrics/SuccessRate"),
                            on=show_progress)
        self.t0, self.steps0, self.updates0 = time.perf_counter(), env_steps, updates
        self.start, self.last = self.t0, {"step": float(env_steps)}

    def due(self, env_steps: int) -> bool:
        return env_steps % self.cfg.log_every == 0 or env_steps == self.cfg.total_steps

    def row(self, env_steps: int, updates: int, m: dict[str, float]) -> None:
        dt = max(time.perf_counter() - self.t0, 1e-9)
        m.update({"Time/env_steps_per_s": (env_steps - self.steps0) / dt,
                  "Time/updates_per_s": (updates - self.updates0) / dt, **peak_memory(self.device)})
        self.t0, self.steps0, self.updates0 = time.perf_counter(), env_steps, updates
        self.rundir.log(env_steps, m)
        self.last = {"step": float(env_steps), **m}
        self.bar.update(env_steps, m, force=True)

    def close(self, state: DreamerState | None = None, ring=None) -> None:
        """Close the run directory and write RUN/summary.json; with ``state``, draw the plots and the
        reconstruction strip."""
        self.bar.close()
        self.rundir.close()
        self.write_summary()
        if state is not None and self.cfg.plots:
            draw(self.rundir.path, panels(self.cfg))
            reconstruction_strip(state, ring, self.rundir.path / "plots/reconstruction.png", self.cfg.seed)


    def write_summary(self) -> None:
        """RUN/summary.json: the env step the run ended at (its last checkpoint's, written at every end, or
        the last row's if later), the last checkpoint's step, and the last row's step (``row_step``),
        updates, replay ratio (and its target) and losses; the peak memory of this process (a resumed run: of
        its last part), its wall time."""
        keys = ("Train/updates", "Train/replay_ratio", "Loss/loss", "Loss/recon_loss", "Metrics/EpRet",
                "Metrics/SuccessRate")
        saved = self.rundir.checkpoint_step
        summary = {"execution": self.cfg.execution, "train_ratio": self.cfg.train_ratio,
                   "step": max(self.last["step"], saved or 0), "checkpoint_step": saved,
                   "row_step": self.last["step"],
                   **{k: self.last[k] for k in keys if k in self.last}, **peak_memory(self.device),
                   "wall_s": time.perf_counter() - self.start}
        atomic_write_bytes(self.rundir.path / "summary.json", jsonio.dumps(summary).encode())


def _versions(cfg: DreamerRunConfig) -> dict:
    """The room's implementations: PyBoy and the ROM (the reference engine's env, and eval's), Warp (the fast
    engine's env)."""
    import hashlib

    import pyboy

    out = {"pyboy": getattr(pyboy, "__version__", "unknown")}
    if cfg.env == "pyboy":
        out.update({f"user_{k}_sha256": hashlib.sha256(Path(getattr(cfg, k)).read_bytes()).hexdigest()
                    for k in ("rom", "state") if getattr(cfg, k)})
    else:
        out["room_rom_sha256"] = hashlib.sha256(rom_path().read_bytes()).hexdigest()
    if cfg.execution == "device":
        import warp

        out["warp"] = warp.__version__
    return out


def video_frame(obs: torch.Tensor, scale: int, bar: int = 2):
    """[N, 1, 72, 20] packed2 -> [72·scale, N·(80·scale + bar) − bar] uint8 grayscale (shade 0 white, 3 black;
    grey bars between the envs), as numpy for imageio."""
    from rlspec.reference.packed2 import unpack

    gray = 255 - 85 * unpack(obs[:, 0]).to(torch.int32)  # [N, 72, 80]
    big = gray.repeat_interleave(scale, 1).repeat_interleave(scale, 2)  # [N, 72·s, 80·s]
    sep = torch.full((big.shape[1], bar), 128, dtype=torch.int32)
    parts = [x for img in big for x in (img, sep)][:-1]
    return torch.cat(parts, 1).to(torch.uint8).numpy()


def run_episodes(cfg: DreamerRunConfig, state: DreamerState, episodes: int, seed: int,
                 gen: torch.Generator, frames: list | None = None, progress: EpisodeProgress | None = None) -> dict:
    """The greedy policy on ``cfg.num_envs`` fresh envs until ``episodes`` episodes end (the first ones, in
    order of env step then env index). ``frames``: receives the observations [N, 1, 72, 20], the reset's and
    then one per vector step (an ended episode shows the next one's first frame, as the policy sees it)."""
    envs = make_envs(cfg, seed)
    loop = Loop.start(cfg, envs.reset())
    steps = 0
    while len(loop.finished) < episodes:
        if frames is not None:
            frames.append(loop.obs.clone())
        action, loop.carry = policy_step(state, loop.obs, loop.prev_action, loop.is_first, loop.carry, gen,
                                         greedy=True)
        advance(cfg, loop, envs.step(action), action)
        steps += 1
        if progress is not None:
            progress.update(len(loop.finished))
    if frames is not None:
        frames.append(loop.obs.clone())
    envs.close()
    done = loop.finished[:episodes]
    return {"episodes": len(done), "seed": seed, "steps": steps,
            **episode_means(done, ("EpRet", "EpLen", "SuccessRate"))}


def run_start_cells(cfg: DreamerRunConfig, state: DreamerState, seed: int, gen: torch.Generator) -> dict:
    """The greedy policy once from every start cell of the room: one PyBoy room per free cell (env k reset
    from ``cell_seeds()[k]``, so it starts on FREE_CELLS[k]), each env's first episode only. The success rate
    is over all start cells, not over the first episodes to end, which favour the short (successful) ones."""
    from rlspec.envs.room.pyboy_room import RoomVecEnv

    if cfg.env != "room":
        raise bad("env", "'room' (every start cell is a cell of the room)", cfg.env)
    seeds = cell_seeds()
    cfg = replace(cfg, num_envs=len(seeds))
    envs = RoomVecEnv(cfg.num_envs, cfg.task, step_limit=cfg.step_limit, seed=seed, frameskip=cfg.frameskip,
                      first_seeds=seeds)
    loop = Loop.start(cfg, envs.reset())
    first: list[tuple | None] = [None] * cfg.num_envs  # env k's first episode: (return, length, success)
    steps = 0
    while None in first:
        action, loop.carry = policy_step(state, loop.obs, loop.prev_action, loop.is_first, loop.carry, gen,
                                         greedy=True)
        out, before = envs.step(action), len(loop.finished)
        advance(cfg, loop, out, action)  # appends the ended episodes in env order
        ended = (out.terminated | out.truncated).nonzero().flatten().tolist()
        for i, episode in zip(ended, loop.finished[before:]):
            first[i] = first[i] or episode
        steps += 1
    envs.close()
    return {"episodes": len(first), "start_cells": [list(c) for c in FREE_CELLS], "seed": seed, "steps": steps,
            "success_by_cell": [int(e[2]) for e in first], **episode_means(first, ("EpRet", "EpLen", "SuccessRate"))}


def validate_device(cfg: DreamerRunConfig) -> None:
    """The device execution's keys."""
    d = cfg.dreamer
    runconfig.check(cfg, {**dict.fromkeys(("steps_per_rollout", "commit_stride", "sync_every"), runconfig.at_least(1)),
                          "kit": runconfig.one_of(KITS), "value_checks": runconfig.one_of(("auto", "on", "off"))})
    if cfg.commit_stride > d.seq_len:
        raise bad("commit_stride", f"<= dreamer.seq_len = {d.seq_len} (commit often enough that the learner can "
                  "assemble full sequences; the Dreamer plan M7)", cfg.commit_stride)
    need = d.seq_len + cfg.commit_stride + cfg.steps_per_rollout
    if cfg.replay_capacity < need:
        raise bad("replay_capacity", f">= dreamer.seq_len + commit_stride + steps_per_rollout = {need} (a full "
                  "window between the uncommitted rows and the reserved old end)", cfg.replay_capacity)
    if cfg.ep_window < cfg.num_envs:
        raise bad("ep_window", f">= num_envs = {cfg.num_envs} (the device-side episode window)", cfg.ep_window)
    try:
        resolve_device(cfg)
    except (RuntimeError, ValueError) as err:
        raise bad("device", devices.CHOICES, cfg.device, str(err)) from None


def resolve_device(cfg: DreamerRunConfig) -> torch.device:
    return devices.resolve(cfg.device)
