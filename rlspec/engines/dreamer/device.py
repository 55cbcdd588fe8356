"""Execution device of the DreamerV3 engine, ``DeviceExecution`` (Dreamer plan M6–M7): the functional core of
rlspec/algos/dreamer.py (``train_step``, ``policy_step``) with the fast kit, split into an actor part and a
learner part that share a device-resident replay ring (rlspec/fast/replay.py).

    rlspec train dreamer --execution device --task room-exit [--preset smoke] [--set device=cuda] [--set ...]
    rlspec compare dreamer --preset smoke [--set ...]   # both executions from one seed: compare.json, .png

The config, run directory, checkpoints, plots and eval are the loop's (loop.py; the CLI: the package's
__init__.py); the keys commit_stride, steps_per_rollout, sync_every, kit and device are this execution's.

One iteration:
  actor    (actor stream) ``steps_per_rollout`` vector steps of the Warp room (rlspec/envs/room/warp_room.py,
           ``num_envs`` envs on the device): act (random during the prefill, then ``policy_step`` with the
           actor's copy of the world model and actor), ``step(render=False)``, push the transition row
           (Dreamer plan §2.3), render the next frame straight into the ring's next ``obs_slot`` (M6 direct
           write: the frame never leaves the device). Every ``commit_stride`` pushes the ring commits: the
           rows become readable and, on CUDA, an event is recorded on the actor stream.
  learner  (learner stream) the updates the train-ratio scheduler has due (``updates_due``, as in the
           reference engine), each on a batch sampled from committed rows only (the gather waits on the
           last commit event). Starvation guard: while the ring has fewer than ``seq_len`` readable steps
           (committed, not reserved) the due updates wait (``Train/starved`` counts such phases) and are
           taken as soon as rows are readable, so the replay ratio catches up and is held.
  sync     every ``sync_every`` updates the learner copies its world model and actor into the actor's copy
           (device to device, on the learner stream after the actor's last use of the copy) and records an
           event; the actor stream waits on it before acting again.

The old end of the replay window (the overwrite rule). The actor keeps pushing while a gather drawn by
the learner may still be in flight on the other stream. The ring is built with ``reserve =
steps_per_rollout``: a gather drawn when the write head is at step t reads steps >= t + 1 − capacity +
steps_per_rollout, and the actor may write the next ``steps_per_rollout`` rows (and the next obs slot),
which overwrite steps <= t + steps_per_rollout − capacity: never a row of that gather. Beyond one
rollout, the actor stream waits on the event recorded after the learner phase before the previous one
(``gathered``), so a gather is at most one rollout behind the actor. On CPU the streams and events are
no-ops and the two parts interleave in this one thread, in the order above.

Deterministic mode: on CPU, with commit_stride 1, steps_per_rollout 1, sync_every 1 and kit reference, the
run is the reference engine's run (same draws from the one generator in the same order, the Warp room
bit-identical to the ROM) as long as the ring has not wrapped (the reserve then leaves
``steps_per_rollout`` more old steps out of the windows). ``rlspec compare dreamer`` checks it.

Metrics rows add, to the reference engine's columns (Train/replay_ratio with Train/replayed_steps and
Train/collected_steps, Memory/peak_rss_mib, and Memory/peak_vram_mib on CUDA), Train/starved and the part
times since the last row (``PartTimes``): Time/actor_s, Time/learner_s, Time/starved_s.

Non-finite values: every update adds the number of non-finite metrics (losses, gradient norms, returns) to
a device counter; at each metrics row (a synchronization point) a non-zero count stops the run with
``NonFiniteError`` (no checkpoint of the poisoned state is written). On CUDA the hot loop reads nothing
back to the host: episode statistics, metric sums and the counter stay on the device until a row.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlspec.algos.dreamer import DreamerState, Kit, make_state, policy_step, train_step
from rlspec.contracts.room_env import NUM_ACTIONS
from rlspec.contracts.validate import without_value_checks
from rlspec.engines.dreamer import loop as ref
from rlspec.engines.dreamer.config import DreamerRunConfig
from rlspec.engines.dreamer.loop import resolve_device
from rlspec.runs import config as runconfig
from rlspec.runs.faults import Diverged, RunStopped


class NonFiniteError(Diverged):
    """A train step produced a non-finite metric (the run stops; nothing poisoned is checkpointed)."""


def make_fast_ring(cfg: DreamerRunConfig, dev: torch.device, checks: bool = True):
    """``checks``: the ring checks each push's values (one host read); without, it counts violations on the
    device (read at metrics rows)."""
    from rlspec.fast.replay import ReplayRing

    return ReplayRing(cfg.replay_capacity, cfg.num_envs, store_flags=cfg.replay_ends, store_final=cfg.replay_ends,
                      commit_stride=cfg.commit_stride, device=dev, check_values=checks, reserve=cfg.steps_per_rollout)


def cpu_ring(cfg: DreamerRunConfig, saved: dict):
    """A fast ring's state_dict as a ring on the CPU (the reconstruction strip's, eval's)."""
    ring = make_fast_ring(cfg, torch.device("cpu"))
    ring.load_state_dict(saved)
    return ring


def make_warp_envs(cfg: DreamerRunConfig, dev: torch.device, checks: bool = True):
    from rlspec.envs.room.warp_room import RoomVecEnv

    return RoomVecEnv(cfg.num_envs, cfg.task, step_limit=cfg.step_limit, seed=cfg.seed, device=dev,
                      check_actions=checks)


class Fence:
    """A CUDA event on CUDA, nothing on CPU (the parts then run in order in one thread)."""

    def __init__(self, dev: torch.device):
        self.event = torch.cuda.Event() if dev.type == "cuda" else None

    def record(self, stream) -> Fence:
        if self.event is not None:
            self.event.record(stream)
        return self

    def wait(self, stream) -> None:
        if self.event is not None:
            stream.wait_event(self.event)


def on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class PartTimes:
    """Busy seconds of the parts since the last metrics row: Time/actor_s (rollouts), Time/learner_s (learner
    phases: updates and their gathers, not the weight sync), Time/starved_s (the rollouts after which the
    learner had due updates but too few readable rows: the time it waited for data). On CPU the host clock
    (the parts run in turn); on CUDA timing events recorded on each part's stream, read only at rows (after
    the row's synchronize: no host read in the hot loop)."""

    PARTS = ("actor", "learner", "starved")

    def __init__(self, dev: torch.device):
        self.cuda = dev.type == "cuda"
        self.spans: dict[str, list] = {part: [] for part in self.PARTS}

    def start(self, stream):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        return event

    def stop(self, part: str, start, stream):
        """Close the span opened by ``start`` under ``part``; returns it (for ``add``)."""
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record(stream)
            span = (start, end)
        else:
            span = time.perf_counter() - start
        self.spans[part].append(span)
        return span

    def add(self, part: str, span) -> None:
        self.spans[part].append(span)

    def take(self) -> dict[str, float]:
        """The seconds of each part since the last call (the device must be synchronized on CUDA)."""
        out = {f"Time/{part}_s": sum(s[0].elapsed_time(s[1]) / 1000 if self.cuda else s for s in spans)
               for part, spans in self.spans.items()}
        self.spans = {part: [] for part in self.PARTS}
        return out


@dataclass
class ActorLoop:
    """What the actor part carries between vector steps, on the device (besides env, ring, policy copy)."""

    env_steps: int
    is_first: torch.Tensor  # [N] bool: is the current obs (in ring.obs_slot(ring.t)) an episode's first
    episode_id: torch.Tensor  # [N] int32
    prev_action: torch.Tensor  # [N] int64
    carry: tuple | None  # the policy's (h [N, H], z [N, S, K]); None: not started
    ep_return: torch.Tensor  # [N] float64
    ep_length: torch.Tensor  # [N] int64
    window: torch.Tensor  # [3, W + 1] float64: return, length, success of the last W episodes; column W: bin
    finished: torch.Tensor  # [] int64: episodes finished so far

    def state_dict(self) -> dict:
        return {k: (tuple(t.cpu() for t in v) if isinstance(v, tuple) else v.cpu() if isinstance(v, torch.Tensor)
                    else v) for k, v in vars(self).items()}

    @classmethod
    def load(cls, sd: dict, dev: torch.device) -> ActorLoop:
        return cls(**{k: (tuple(t.to(dev) for t in v) if isinstance(v, tuple) else v.to(dev)
                          if isinstance(v, torch.Tensor) else v) for k, v in sd.items()})

    @classmethod
    def start(cls, cfg: DreamerRunConfig, step, dev: torch.device) -> ActorLoop:
        n = cfg.num_envs
        return cls(0, step.is_first.clone(), step.episode_id.clone(), torch.zeros(n, dtype=torch.int64, device=dev),
                   None, torch.zeros(n, dtype=torch.float64, device=dev), torch.zeros(n, dtype=torch.int64, device=dev),
                   torch.zeros(3, cfg.ep_window + 1, dtype=torch.float64, device=dev),
                   torch.zeros((), dtype=torch.int64, device=dev))

    def episode_stats(self, w: int) -> dict[str, float]:
        """Mean return, length, success over the last ``w`` finished episodes (a host read: rows only)."""
        k = min(int(self.finished), w)
        if k == 0:
            return {"Metrics/EpRet": math.nan, "Metrics/EpLen": math.nan, "Metrics/SuccessRate": math.nan}
        mean = self.window[:, :w].sum(1) / k  # unfilled entries are 0
        return {"Metrics/EpRet": float(mean[0]), "Metrics/EpLen": float(mean[1]), "Metrics/SuccessRate": float(mean[2])}


def record_episodes(loop: ActorLoop, out, w: int) -> None:
    """Add the step's rewards; write the episodes that ended into the window, in env order, without a host read:
    entry i goes to column (finished + #ended before and at i − 1) mod w, or to the bin column w."""
    loop.ep_return += out.reward.double()
    loop.ep_length += 1
    end = out.terminated | out.truncated  # [N]
    rank = torch.cumsum(end.long(), 0)  # [N]
    col = torch.where(end, (loop.finished + rank - 1) % w, torch.full_like(rank, w))  # [N]
    values = torch.stack((loop.ep_return, loop.ep_length.double(), out.success.double()))  # [3, N]
    loop.window.scatter_(1, col.expand(3, -1), values)
    loop.finished += rank[-1]
    loop.ep_return.masked_fill_(end, 0.0)
    loop.ep_length.masked_fill_(end, 0)


@dataclass
class Parts:
    """A run's pieces: the learner's state, the actor's policy copy, the generator, envs, ring, the actor's
    loop, the learner's bookkeeping, and the fences between the parts."""

    state: DreamerState
    policy: DreamerState
    gen: torch.Generator
    envs: Any
    ring: Any
    loop: ActorLoop
    learner: Learner
    gathered: deque  # the fences after the last two learner phases
    synced: Fence  # after the last weight sync

    def checkpoint(self) -> dict:
        return {"execution": "device", "env_steps": self.loop.env_steps, "state": self.state.state_dict(),
                "policy": {"wm": self.policy.wm.state_dict(), "actor": self.policy.actor.state_dict()},
                "ring": self.ring.state_dict(), "envs": {k: v.cpu().clone() for k, v in self.envs.state.items()},
                "loop": self.loop.state_dict(), "learner": self.learner.state_dict(), "gen": self.gen.get_state()}


class DeviceExecution:
    """The fast engine (module docstring); ``run`` trains, with the reference engine's run directory."""

    def __init__(self, cfg: DreamerRunConfig):
        ref.validate(cfg)
        if cfg.execution != "device":
            raise runconfig.ConfigError(f"config key 'execution': DeviceExecution runs execution 'device', got "
                                        f"{cfg.execution!r}")
        self.cfg = cfg
        self.dev = resolve_device(cfg)
        cuda = self.dev.type == "cuda"
        self.checks = {"auto": not cuda, "on": True, "off": False}[cfg.value_checks]  # host-read value checks
        self.actor_stream = torch.cuda.Stream(self.dev) if cuda else None
        self.learner_stream = torch.cuda.Stream(self.dev) if cuda else None
        self.times = PartTimes(self.dev)

    # ---- setup
    def _build(self) -> tuple[DreamerState, torch.Generator]:
        """The learner's state on the device and the run's generator. On CPU one generator draws everything
        (as in the reference engine); on CUDA the weights are drawn on the CPU from the seed, then one device
        generator (seeded alike) draws the rest."""
        cfg, dev = self.cfg, self.dev
        gen = torch.Generator(dev).manual_seed(cfg.seed)
        init = gen if dev.type == "cpu" else torch.Generator().manual_seed(cfg.seed)
        state = make_state(cfg.dreamer, NUM_ACTIONS, Kit.named(cfg.kit), init)
        for m in (state.wm, state.actor, state.critic, state.slow_critic):
            m.to(dev)
        return state, gen

    def setup(self, ckpt: dict | None = None) -> Parts:
        """Everything a run holds, fresh or restored from ``ckpt``, on the device (synchronized)."""
        cfg, dev = self.cfg, self.dev
        state, gen = self._build()
        policy = policy_copy(state, dev)
        envs, ring = make_warp_envs(cfg, dev, self.checks), make_fast_ring(cfg, dev, self.checks)
        learner = Learner(cfg, dev)
        if ckpt is not None:
            state.load_state_dict(ckpt["state"])
            policy.wm.load_state_dict(ckpt["policy"]["wm"])
            policy.actor.load_state_dict(ckpt["policy"]["actor"])
            ring.load_state_dict(ckpt["ring"])
            envs.reset()
            for k, v in envs.state.items():
                v.copy_(ckpt["envs"][k])
            envs.render(ring.obs_slot(ring.t))  # the current frame, as it was written before the checkpoint
            loop = ActorLoop.load(ckpt["loop"], dev)
            learner.load_state_dict(ckpt["learner"], dev)
            gen.set_state(ckpt["gen"])
        else:
            loop = ActorLoop.start(cfg, envs.reset(out=ring.obs_slot(0)), dev)
        self._synchronize()  # setup (allocations, reset, restore) done before the two streams start
        return Parts(state, policy, gen, envs, ring, loop, learner, deque([Fence(dev), Fence(dev)], maxlen=2),
                     Fence(dev))

    def iterate(self, p: Parts) -> None:
        """One actor rollout (actor stream), then the learner's due updates and a weight sync when due
        (learner stream); with value checks off, no host read."""
        with contextlib.nullcontext() if self.checks else without_value_checks():
            self._iterate(p)

    def _iterate(self, p: Parts) -> None:
        with on(self.actor_stream):
            p.gathered[0].wait(self.actor_stream)  # the gathers of the phase before the last are done
            p.synced.wait(self.actor_stream)
            span = self.times.start(self.actor_stream)
            self.rollout(p.envs, p.ring, p.policy, p.loop, p.gen)
            actor = self.times.stop("actor", span, self.actor_stream)
            actor_done = Fence(self.dev).record(self.actor_stream)
        with on(self.learner_stream):
            starved = p.learner.starved
            span = self.times.start(self.learner_stream)
            p.learner.phase(p.state, p.ring, p.loop.env_steps, p.gen)
            self.times.stop("learner", span, self.learner_stream)
            if p.learner.starved > starved:
                self.times.add("starved", actor)
            p.gathered.append(Fence(self.dev).record(self.learner_stream))
            if p.state.updates - p.learner.synced_at >= self.cfg.sync_every:
                actor_done.wait(self.learner_stream)  # the actor's last policy_step read the copy
                sync_weights(p.state, p.policy)
                p.learner.synced_at = p.state.updates
                p.synced = Fence(self.dev).record(self.learner_stream)

    def run(self, out: Path, resume: bool = False, stop_after_steps: int | None = None,
            show_progress: bool = True) -> Path:
        """Train (or, with ``resume``, continue the run in ``out``); returns the run directory.
        ``stop_after_steps``: stop (with a checkpoint) at the first rollout boundary after this many more env
        steps."""
        cfg = self.cfg
        torch.set_num_threads(cfg.torch_threads)
        ckpt = ref.read_checkpoint(Path(out) / "checkpoints/last.pt") if resume else None
        p = self.setup(ckpt)
        rundir = ref.open_rundir(cfg, out, p.loop.env_steps if ckpt is not None else None)
        end = cfg.total_steps if stop_after_steps is None else min(cfg.total_steps, p.loop.env_steps + stop_after_steps)
        with rundir:
            log = ref.Logger(cfg, rundir, p.loop.env_steps, p.state.updates, show_progress, self.dev)
            try:
                while p.loop.env_steps < end:
                    self.iterate(p)
                    if log.due(p.loop.env_steps):
                        self._synchronize()
                        log.row(p.loop.env_steps, p.state.updates, {**p.learner.row(p.state, p.loop, p.ring),
                                                                    **self.times.take()})
                    if p.loop.env_steps % cfg.checkpoint_every == 0 or p.loop.env_steps >= end:
                        self._synchronize()
                        p.learner.check_finite(p.state, p.loop.env_steps)
                        rundir.save(p.loop.env_steps, p.checkpoint(), ref.params(p.state))
            except RunStopped:
                log.close()
                raise
            log.close(*self._on_cpu(p.state, p.ring))
        return Path(out)

    def _on_cpu(self, state: DreamerState, ring) -> tuple:
        """CPU copies of the learner's state (reference kit, same parameters) and of the ring, for the
        reconstruction strip."""
        cpu = ref.build(self.cfg, torch.Generator().manual_seed(self.cfg.seed))
        cpu.load_state_dict(state.state_dict())
        return cpu, cpu_ring(self.cfg, ring.state_dict())

    def _synchronize(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    def rollout(self, envs, ring, policy: DreamerState, loop: ActorLoop, gen: torch.Generator) -> None:
        """Vector steps up to the next rollout boundary."""
        cfg = self.cfg
        final = torch.empty((ring.num_envs, *ring.obs_shape), dtype=ring.obs_dtype, device=ring.device) \
            if cfg.replay_ends else None
        for _ in range(cfg.steps_per_rollout):
            if loop.env_steps < cfg.min_ready_steps:
                action = torch.randint(0, NUM_ACTIONS, (cfg.num_envs,), generator=gen, device=self.dev)
            else:
                obs = ring.storage()["obs"][ring.t % ring.capacity]  # [N, 1, 72, 20]: the current frames
                action, loop.carry = policy_step(policy, obs, loop.prev_action, loop.is_first, loop.carry, gen)
            out = envs.step(action, render=False, final_out=final)  # final [N, 1, 72, 20]: before any reset
            ring.push(None, action.to(torch.int32), out.reward, loop.is_first, (~out.terminated).float(),
                      loop.episode_id, out.terminated, out.truncated, final)
            envs.render(ring.obs_slot(ring.t))  # the next frame, straight into its replay row
            record_episodes(loop, out, cfg.ep_window)
            loop.is_first.copy_(out.is_first)
            loop.episode_id.copy_(out.episode_id)
            loop.prev_action = action
            loop.env_steps += cfg.num_envs
            if self.boundary(loop.env_steps):
                break

    def boundary(self, env_steps: int) -> bool:
        """Where a rollout ends: every steps_per_rollout vector steps, and at metrics rows and checkpoints.
        A function of the env step only, so a stopped and resumed run has the straight run's schedule."""
        cfg = self.cfg
        return any(env_steps % every == 0 for every in (cfg.steps_per_rollout * cfg.num_envs, cfg.log_every,
                                                         cfg.checkpoint_every)) or env_steps == cfg.total_steps


def policy_copy(state: DreamerState, dev: torch.device) -> DreamerState:
    """The actor part's own world model and actor (same weights), for ``policy_step``; the rest is shared and
    unused by it. (The world model is rebuilt and loaded: the fast one holds its unpack module, which does
    not deepcopy.)"""
    wm = type(state.wm)(state.wm.config, torch.Generator().manual_seed(0))  # its draws are overwritten below
    wm.load_state_dict(state.wm.state_dict())
    return dataclasses.replace(state, wm=wm.to(dev).requires_grad_(False),
                               actor=copy.deepcopy(state.actor).requires_grad_(False))


def sync_weights(learner: DreamerState, policy: DreamerState) -> None:
    """Learner -> actor copy of the world model and actor parameters (device to device)."""
    with torch.no_grad():
        for src, dst in ((learner.wm, policy.wm), (learner.actor, policy.actor)):
            torch._foreach_copy_(list(dst.state_dict().values()), list(src.state_dict().values()))


class Learner:
    """The learner part's bookkeeping: metric sums and the non-finite count on the device, starved phases,
    the last weight sync."""

    def __init__(self, cfg: DreamerRunConfig, dev: torch.device):
        self.cfg, self.dev = cfg, dev
        self.keys: list[str] = []  # metric names, in train_step's order
        self.sums: torch.Tensor | None = None  # [K] float64 since the last row
        self.count = 0  # updates since the last row
        self.nonfinite = torch.zeros((), dtype=torch.int64, device=dev)  # [] since the start
        self.checked_updates = 0  # updates before the last finite check
        self.starved = 0  # phases with updates due but fewer than seq_len readable steps
        self.synced_at = 0

    def phase(self, state: DreamerState, ring, env_steps: int, gen: torch.Generator) -> None:
        d = self.cfg.dreamer
        due = ref.updates_due(self.cfg, env_steps) - state.updates
        if due > 0 and ring.readable() < d.seq_len:
            self.starved += 1
            return
        for _ in range(due):
            batch = ring.sample_sequences(d.batch_size, d.seq_len, gen)
            with ref.nonfinite_as_diverged(state, env_steps):
                metrics = train_step(state, batch, gen)
            values = torch.stack([v.to(torch.float64) for v in metrics.values()])  # [K]
            if self.sums is None:
                self.keys, self.sums = list(metrics), torch.zeros_like(values)
            self.sums += values
            self.nonfinite += (~torch.isfinite(values)).sum()
            self.count += 1

    def check_finite(self, state: DreamerState, env_steps: int) -> None:
        """Raise NonFiniteError if any update since the start gave a non-finite metric (a host read)."""
        bad = int(self.nonfinite)
        if bad:
            sums = self.sums.tolist() if self.sums is not None else []
            worst = [k for k, v in zip(self.keys, sums) if not math.isfinite(v)]
            raise NonFiniteError(env_steps, f"metric values ({bad}) in updates {self.checked_updates + 1}.."
                                 f"{state.updates} (non-finite sums since the last row: {worst or 'already logged'})")
        self.checked_updates = state.updates

    def row(self, state: DreamerState, loop: ActorLoop, ring) -> dict[str, float]:
        """The reference engine's metrics row (same keys), plus Train/starved; resets the sums."""
        self.check_finite(state, loop.env_steps)
        m = {k: v / self.count for k, v in zip(self.keys, self.sums.tolist())} if self.count else {}
        self.sums = None if self.sums is None else torch.zeros_like(self.sums)
        self.count = 0
        m.update({**ref.ratio_metrics(self.cfg, state.updates, loop.env_steps),
                  **loop.episode_stats(self.cfg.ep_window), "Train/starved": float(self.starved)})
        if not ring.check_values and int(ring.violations):  # unchecked pushes (CUDA)
            raise RunStopped(f"DeviceExecution: {int(ring.violations)} replay rows broke the ring's value rules "
                                 "(rlspec/contracts/replay.py)")
        return m

    def state_dict(self) -> dict:
        return {"keys": self.keys, "sums": None if self.sums is None else self.sums.cpu(), "count": self.count,
                "nonfinite": self.nonfinite.cpu(), "checked_updates": self.checked_updates, "starved": self.starved,
                "synced_at": self.synced_at}

    def load_state_dict(self, sd: dict, dev: torch.device) -> None:
        self.keys, self.count, self.starved = sd["keys"], sd["count"], sd["starved"]
        self.sums = None if sd["sums"] is None else sd["sums"].to(dev)
        self.nonfinite = sd["nonfinite"].to(dev)
        self.checked_updates, self.synced_at = sd["checked_updates"], sd["synced_at"]
