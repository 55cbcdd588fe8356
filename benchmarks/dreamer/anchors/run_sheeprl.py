"""sheeprl 0.8.4's own DreamerV3, through its own CLI (``python -m sheeprl``), on rlspec's room: the config
writer and the runner of the side-by-side learning comparison with rlspec's ``room-exit`` preset (same task,
model, budget and seeds).

    nox -s bench_sheeprl_room [-- --seeds 0 1 2 --total-steps 20480]
    python -m benchmarks.dreamer.anchors.run_sheeprl --write-only [--preset room-exit] [--seeds 0] [--set KEY=VALUE ...]
    python -m benchmarks.dreamer.anchors.run_sheeprl [--seeds 0 1 2] [--total-steps N] [--chunk C] \\
        [--out runs/sheeprl-room]

Writes OUT/sheeprl_room.json: the rlspec config, the mapping (``TABLE``: every rlspec key, its value, the
sheeprl keys it sets and their value), sheeprl's overrides per seed, the ``differences`` sheeprl cannot
express, and (without --write-only) per seed its log directory and its curve as ``rlspec.evidence.evaluation``
reads it (``read_run``). With --chunk C each seed runs in sheeprl runs of C env steps, each resuming the last
one's checkpoint (``checkpoint.resume_from``, the replay buffer in it); a seed goes on from its last checkpoint
(an interrupted run too) and a finished one is not run again.

The env is ``rlspec.envs.room.sheeprl_env:RlspecRoom-v0`` (the ROM in PyBoy, the frame as PyBoy draws it in
gray, resized by sheeprl to ``env.screen_size``); the frame skip and step limit are the env's (sheeprl's
``action_repeat`` stays 1). Needs sheeprl==0.8.4 beside rlspec (the session's own venv) only to run; the
config writer imports no sheeprl.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.dreamer.anchors.sheeprl_config import HEADS, MODEL_KEYS, WM, unfused_adam
from rlspec.contracts.room_env import NUM_ACTIONS, cell_seeds
from rlspec.engines.dreamer import PRESETS, DreamerRunConfig, build_config, validate
from rlspec.runs.config import ConfigError

ENV_ID = "rlspec.envs.room.sheeprl_env:RlspecRoom-v0"
GREEDY = "greedy.json"  # per seed: the greedy evaluation of each chunk's checkpoint (the first episodes to end)
GREEDY_CELLS = "greedy_cells.json"  # the same, one episode from every start cell (--start-cells)
EVAL_SEED_OFFSET = 1_000_003  # rlspec eval's rooms for a run of seed s: s + this (rlspec/engines/dreamer/loop.py)
CHUNKS = "chunks.json"  # per seed: each sheeprl run's env steps at its end, wall and CPU seconds


def _replay_ratio(cfg: DreamerRunConfig) -> float:
    """danijar's train_ratio (replayed steps per env step) -> sheeprl's gradient steps per policy step."""
    return cfg.train_ratio / (cfg.dreamer.batch_size * cfg.dreamer.seq_len)


def _value(cfg: DreamerRunConfig, key: str):
    return getattr(cfg.dreamer, key[len("dreamer."):]) if key.startswith("dreamer.") else getattr(cfg, key)


# rlspec key -> (the sheeprl keys it sets, its value there from the run config; None: the same value).
# "+key": a key sheeprl's config lacks (the env's keyword arguments, passed to gymnasium.make).
TABLE: dict[str, tuple[tuple[str, ...], object]] = {
    "task": (("+env.wrapper.scenario",), None),
    "seed": (("seed",), None),
    "num_envs": (("env.num_envs",), None),
    "total_steps": (("algo.total_steps",), None),  # policy steps = env steps of all envs (action_repeat 1)
    "min_ready_steps": (("algo.learning_starts",), None),  # random actions, then training
    "train_ratio": (("algo.replay_ratio",), _replay_ratio),
    "replay_capacity": (("buffer.size",), lambda c: c.replay_capacity * c.num_envs),  # sheeprl's: all envs
    "step_limit": (("+env.wrapper.step_limit",), None),
    "frameskip": (("+env.wrapper.frameskip",), None),
    "dreamer.frame": (("+env.wrapper.frame",), lambda c: list(c.dreamer.frame)),  # the env crops as rlspec does
    "log_every": (("metric.log_every",), None),
    "checkpoint_every": (("checkpoint.every",), None),
    "torch_threads": (("num_threads",), None),
    "dreamer.deter": (MODEL_KEYS["recurrent"], None),
    "dreamer.stoch": (MODEL_KEYS["stoch"], None),
    "dreamer.classes": (MODEL_KEYS["classes"], None),
    "dreamer.hidden": (MODEL_KEYS["dense"], None),
    "dreamer.mlp_hidden": (MODEL_KEYS["mlp_hidden"], None),
    "dreamer.mlp_layers": (MODEL_KEYS["mlp_layers"], None),
    "dreamer.cnn_mult": (MODEL_KEYS["cnn_mult"], None),
    "dreamer.free_bits": ((f"{WM}.kl_free_nats",), None),
    "dreamer.dyn_scale": ((f"{WM}.kl_dynamic",), None),
    "dreamer.rep_scale": ((f"{WM}.kl_representation",), None),
    "dreamer.unimix": (("algo.unimix",), None),
    "dreamer.horizon": (("algo.horizon",), None),
    "dreamer.gamma": (("algo.gamma",), None),
    "dreamer.lam": (("algo.lmbda",), None),
    "dreamer.entropy_coef": (("algo.actor.ent_coef",), None),
    "dreamer.slow_rate": (("algo.critic.tau",), None),  # sheeprl: every gradient step (target update freq 1)
    "dreamer.batch_size": (("algo.per_rank_batch_size",), None),
    "dreamer.seq_len": (("algo.per_rank_sequence_length",), None),
    "dreamer.wm_lr": ((f"{WM}.optimizer.lr",), None),
    "dreamer.actor_lr": (("algo.actor.optimizer.lr",), None),
    "dreamer.critic_lr": (("algo.critic.optimizer.lr",), None),
    "dreamer.wm_eps": ((f"{WM}.optimizer.eps",), None),
    "dreamer.ac_eps": (("algo.actor.optimizer.eps", "algo.critic.optimizer.eps"), None),
    "dreamer.wm_clip": ((f"{WM}.clip_gradients",), None),
    "dreamer.actor_clip": (("algo.actor.clip_gradients",), None),
    "dreamer.critic_clip": (("algo.critic.clip_gradients",), None),
    "dreamer.precision": (("fabric.precision",), lambda c: {"fp32": "32-true"}.get(c.dreamer.precision,
                                                                                     c.dreamer.precision)),
}
# rlspec keys sheeprl has at one value only: rlspec's value -> a difference when it is another
SHEEPRL_FIXED = {
    "env": "room",  # the env is this room (the writer refuses another)
    "dreamer.encoder": "conv",  # sheeprl's CNNEncoder / CNNDecoder (rlspec's conv encoder is theirs)
    "dreamer.pool": 1,  # no pooling in sheeprl's encoder
    "dreamer.slow_reg": 1.0,  # sheeprl's critic loss adds the slow critic's log-likelihood with weight 1
    "dreamer.head_input": "posterior",  # sheeprl's reward / continue heads read the posterior of the frame arrived at
}
# the conv geometry (dreamer.cnn_stages against sheeprl's stages for its screen size): ``geometry``
GEOMETRY = ("dreamer.cnn_stages",)
# keys with no effect on what sheeprl runs: the env plug-in paths of other ROMs, the device execution's knobs, the
# MLP encoder's width (unused with the conv encoder), the logged episode window (see IMPLEMENTATION), whether the
# run draws its plots at the end
IGNORED = ("execution", "rom", "state", "plugin", "device", "kit", "steps_per_rollout", "commit_stride", "sync_every",
           "value_checks", "ep_window", "dreamer.embed_dim", "plots", "replay_ends")
# what differs whatever the config (sheeprl's own implementation)
IMPLEMENTATION = [
    "frame values: sheeprl normalizes the gray image PyBoy draws (255, 153, 85, 0) to x/255 - 0.5; rlspec the "
    "2-bit shade codes to code/3 in [0, 1] (the same content, another scale and sign)",
    "weight initialization: sheeprl's (hafner_initialization) and rlspec's are different schemes",
    "episode start: sheeprl's learned initial recurrent state (learnable_initial_recurrent_state) and its "
    "zeroed first action; rlspec resets the RSSM state on is_first",
    "logged return: sheeprl's Rewards/rew_avg is the mean of the training episodes (sampled actions) that ended "
    "since its last log; rlspec's Metrics/EpRet the mean of the last ep_window episodes; the comparison's measure "
    "is neither but the greedy evaluation of every chunk's checkpoint on the same rooms (greedy_eval: sheeprl's "
    "player, its posterior sampled and the actor's mode taken, as rlspec eval does with rlspec's)",
    "threads: sheeprl's num_threads only sets OMP_NUM_THREADS after torch is imported, where it has no effect "
    "(measured here: MKL's sgemm ran a 2-thread OpenMP team whose barrier waits took most of the time, ~4 CPU-s "
    "per gradient step); the benchmark launches sheeprl with OMP_NUM_THREADS and MKL_NUM_THREADS = num_threads in "
    "its environment (thread_env), so both sides run torch_threads threads",
]
# sheeprl settings that hold whatever the rlspec config: its own CLI on this env, CPU, no video, one process
CONSTANT = [
    "exp=dreamer_v3", "env=gym", f"env.id={ENV_ID}", "env.grayscale=True", "env.action_repeat=1",
    "env.capture_video=False", "env.sync_env=True", "env.frame_stack=1", "algo.cnn_keys.encoder=[rgb]",
    "algo.mlp_keys.encoder=[]", "algo.compile.enabled=False", "algo.run_test=False", "fabric.accelerator=cpu",
    "fabric.devices=1", "buffer.checkpoint=True", "checkpoint.keep_last=2", "metric.log_level=1", *HEADS,
    *unfused_adam(),
]


def geometry(cfg: DreamerRunConfig) -> tuple[int, str | None]:
    """(sheeprl's env.screen_size, the difference or None). The env gives sheeprl the centered dreamer.frame
    crop rlspec's encoder sees; sheeprl resizes it (cv2 INTER_AREA: by an integer factor, rlspec's average pool)
    to a square screen_size, the largest power of two within the pooled frame (an image of that size is not
    resized), and runs log2(screen_size) - 2 conv stages."""
    d = cfg.dreamer
    h, w = (n // d.pool for n in d.frame)
    screen = 2 ** int(math.log2(min(h, w)))
    stages = int(math.log2(screen)) - 2
    if (h, w) == (screen, screen) and stages == d.cnn_stages:
        return screen, None
    return screen, (f"frame: rlspec's encoder sees the {h} x {w} frame through {d.cnn_stages} conv stages; sheeprl "
                    f"the same crop resized (cv2 INTER_AREA) to {screen} x {screen} through {stages} stages")


def mapping(cfg: DreamerRunConfig) -> list[dict]:
    """One row per TABLE key: the rlspec key and value, the sheeprl keys and their value."""
    rows = []
    for key, (keys, convert) in TABLE.items():
        value = _value(cfg, key)
        rows.append({"rlspec": key, "value": value, "sheeprl": list(keys),
                     "sheeprl_value": value if convert is None else convert(cfg)})
    return rows


def differences(cfg: DreamerRunConfig) -> list[str]:
    """What sheeprl cannot express of ``cfg``: its fixed settings where cfg has another, the frame geometry,
    then IMPLEMENTATION."""
    out = [f"{key}: rlspec {_value(cfg, key)!r}; sheeprl has {fixed!r} only"
           for key, fixed in SHEEPRL_FIXED.items() if _value(cfg, key) != fixed]
    frame = geometry(cfg)[1]
    return [*out, *([frame] if frame else []), *IMPLEMENTATION]


def overrides(cfg: DreamerRunConfig, out: Path) -> list[str]:
    """sheeprl's hydra overrides of ``cfg``: logs under out/<task>/s<seed>/ (its TensorBoard events there)."""
    if cfg.env != "room":
        raise SystemExit(f"sheeprl_room: config key 'env': expected 'room', got {cfg.env!r}")
    values = [f"{key}={_hydra(row['sheeprl_value'])}" for row in mapping(cfg) for key in row["sheeprl"]]
    return [*CONSTANT, *values, f"env.screen_size={geometry(cfg)[0]}", f"log_root={out}", f"root_dir={cfg.task}",
            f"run_name=s{cfg.seed}", f"hydra.run.dir={seed_dir(out, cfg)}"]


def _hydra(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def seed_config(preset: str, sets: list[str], seed: int, total_steps: int | None) -> DreamerRunConfig:
    extra = [f"seed={seed}", *([f"total_steps={total_steps}"] if total_steps is not None else [])]
    cfg = build_config(preset, [*sets, *extra])
    validate(cfg)
    return cfg


def report(preset: str, configs: dict[int, DreamerRunConfig], out: Path) -> dict:
    first = next(iter(configs.values()))
    return {"what": "sheeprl 0.8.4 DreamerV3 on rlspec's room through its own CLI: config from rlspec's preset",
            "preset": preset, "env_id": ENV_ID, "rlspec_config": dataclasses.asdict(first),
            "mapping": mapping(first), "differences": differences(first),
            "overrides": {seed: overrides(cfg, out) for seed, cfg in configs.items()}, "runs": {}}


def seed_dir(out: Path, cfg: DreamerRunConfig) -> Path:
    """The seed's directory: sheeprl's log directories of its chunks under it (version_0, version_1, ...)."""
    return out / cfg.task / f"s{cfg.seed}"


def last_checkpoint(path: Path) -> tuple[int, Path | None]:
    """(env steps, path) of the latest of sheeprl's checkpoints under ``path`` (ckpt_<policy step>_<rank>.ckpt);
    (0, None) before the first."""
    return max(checkpoints(path), default=(0, None))


def chunk_ends(done: int, total: int, chunk: int | None) -> list[int]:
    """The total_steps of the sheeprl runs still to do: from ``done`` env steps to ``total`` in ``chunk`` steps
    (None: one run)."""
    if done >= total:
        return []
    step = total - done if chunk is None else chunk
    return [*range(done + step, total, step), total]


@contextlib.contextmanager
def timed_chunk(path: Path, end: int):
    """Appends {env_steps: end, wall_s, cpu_s} of the sheeprl run in the block to path/chunks.json: its wall time
    and its CPU time (user + system of the finished child processes: one torch thread, so the wall time it would
    take alone on a core, whatever else shares the machine)."""
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    yield
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    target = path / CHUNKS
    rows = json.loads(target.read_text()) if target.is_file() else []
    rows.append({"env_steps": end, "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(cpu, 1)})
    target.write_text(json.dumps(rows, indent=1) + "\n")


def thread_env(threads: int) -> dict[str, str]:
    """The environment sheeprl is launched with: this one, with OpenMP's and MKL's thread counts set to
    ``threads`` before sheeprl's process imports torch (its own num_threads comes too late; IMPLEMENTATION)."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def run_seed(cfg: DreamerRunConfig, out: Path, chunk: int | None, episodes: int, start_cells: bool = False) -> None:
    """Runs sheeprl on one seed, in chunks of ``chunk`` env steps, each resuming from the last checkpoint (also
    one of an interrupted run; a finished seed is not run again), each followed by the greedy evaluation of
    ``episodes`` episodes (0: none) or of every start cell."""
    done, ckpt = last_checkpoint(seed_dir(out, cfg))
    for end in chunk_ends(done, cfg.total_steps, chunk):
        resume = [f"checkpoint.resume_from={ckpt}"] if ckpt else []
        run_cfg = dataclasses.replace(cfg, total_steps=end)
        with timed_chunk(seed_dir(out, cfg), end):
            subprocess.run([sys.executable, "-m", "sheeprl", *overrides(run_cfg, out), *resume], check=True,
                           env=thread_env(cfg.torch_threads))
        done, ckpt = last_checkpoint(seed_dir(out, cfg))
        if done != end:
            raise SystemExit(f"sheeprl_room: seed {cfg.seed}: the last checkpoint is at {done} env steps, "
                             f"expected {end}")
        if episodes or start_cells:
            evaluate_seed(cfg, out, episodes, start_cells)


def seed_result(cfg: DreamerRunConfig, out: Path) -> dict:
    """The seed's directory, its training curve as rlspec's reader reads it, and its greedy rows."""
    from rlspec.evidence.evaluation import read_run

    curve = read_run(seed_dir(out, cfg))
    greedy = seed_dir(out, cfg) / GREEDY
    return {"dir": str(seed_dir(out, cfg)), "steps": curve.steps.tolist(),
            **{key: [None if math.isnan(v) else v for v in values.tolist()] for key, values in curve.values.items()},
            "greedy": json.loads(greedy.read_text()) if greedy.is_file() else []}


def checkpoints(path: Path) -> list[tuple[int, Path]]:
    """(env steps, path) of sheeprl's checkpoints under a seed's directory (ckpt_<policy step>_<rank>.ckpt in each
    chunk's version_*/checkpoint), in step order."""
    found = [(int(ckpt.name.split("_")[1]), ckpt) for ckpt in path.glob("version_*/checkpoint/ckpt_*_0.ckpt")]
    return sorted(found)


def sheeprl_frames(obs, screen: int, frame: tuple[int, int]):
    """packed2 frames [N, 1, 72, 20] -> sheeprl's player input [1, N, 1, screen, screen] float in [-0.5, 0.5]: the
    gray image PyBoy draws, its centered ``frame`` crop as the env gives it, resized as sheeprl's make_env resizes
    it (cv2 INTER_AREA), then x / 255 - 0.5 as its prepare_obs scales it."""
    import cv2
    import numpy as np
    import torch

    from rlspec.envs.room.sheeprl_env import frame_image

    images = [cv2.resize(frame_image(o.numpy(), frame), (screen, screen), interpolation=cv2.INTER_AREA) for o in obs]
    return torch.from_numpy(np.stack(images)).float()[None, :, None] / 255 - 0.5  # [1, N, 1, S, S]


def check_frames(cfg) -> None:
    """sheeprl_frames equals what sheeprl's own make_env gives its player (the reset frame of one env), or exits."""
    import numpy as np
    import torch
    from sheeprl.utils.env import make_env

    from rlspec.envs.room.sheeprl_env import ImageObservation

    env = make_env(cfg, cfg.seed, 0, None, "test")()
    theirs = env.reset(seed=cfg.seed)[0]["rgb"]  # [1, S, S] uint8
    inner = env
    while not isinstance(inner, ImageObservation):
        inner = inner.env
    packed = torch.from_numpy(inner.packed)[None]  # [1, 1, 72, 20] the room's frame before the crop
    ours = (sheeprl_frames(packed, cfg.env.screen_size, inner.frame)[0, 0] + 0.5) * 255
    env.close()
    if not np.array_equal(ours.round().numpy().astype(np.uint8), theirs):
        raise SystemExit("sheeprl_room: the evaluation's frames differ from sheeprl's make_env frames")


def greedy_eval(version: Path, ckpt: Path, seed: int, episodes: int, start_cells: bool = False) -> dict:
    """sheeprl's player of ``ckpt`` (its own build_agent, greedy actions: the actor's mode) on the rooms rlspec's
    ``rlspec eval`` plays for a run of this seed: cfg.num_envs PyBoy rooms from seed + EVAL_SEED_OFFSET, the
    first ``episodes`` episodes to end (in order of env step, then env index); with ``start_cells``, as
    ``rlspec eval --start-cells``: one room per free cell (reset from cell_seeds()), each room's first episode."""
    import gymnasium
    import numpy as np
    import torch
    from lightning import Fabric
    from omegaconf import OmegaConf
    from sheeprl.algos.dreamer_v3.agent import build_agent
    from sheeprl.utils import fs
    from sheeprl.utils.utils import dotdict

    from rlspec.envs.room.pyboy_room import RoomVecEnv
    from rlspec.envs.room.sheeprl_env import WHOLE

    cfg = dotdict(OmegaConf.to_container(OmegaConf.load(version / "config.yaml"), resolve=True))
    check_frames(cfg)
    torch.set_num_threads(cfg.num_threads)  # effective here: this process's own thread count
    fabric = Fabric(accelerator="cpu", devices=1)
    state = fs.load_checkpoint(fabric, ckpt, weights_only=False)  # as sheeprl's own evaluation loads it
    screen, frame = cfg.env.screen_size, tuple(cfg.env.wrapper.get("frame", WHOLE))
    space = gymnasium.spaces.Dict({"rgb": gymnasium.spaces.Box(0, 255, (1, screen, screen), np.uint8)})
    player = build_agent(fabric, (NUM_ACTIONS,), False, cfg, space, state["world_model"], state["actor"])[-1]
    first_seeds = cell_seeds() if start_cells else None
    envs = RoomVecEnv(len(first_seeds) if start_cells else cfg.env.num_envs, cfg.env.wrapper.scenario,
                      step_limit=cfg.env.wrapper.step_limit, seed=seed + EVAL_SEED_OFFSET,
                      frameskip=cfg.env.wrapper.frameskip, first_seeds=first_seeds)
    torch.manual_seed(seed + EVAL_SEED_OFFSET)  # the posterior's samples
    player.num_envs = envs.num_envs
    player.init_states()
    obs = envs.reset().obs
    ret, length, finished = torch.zeros(envs.num_envs), torch.zeros(envs.num_envs, dtype=torch.long), []
    first = [None] * envs.num_envs  # each room's first episode

    def more() -> bool:
        return None in first if start_cells else len(finished) < episodes

    with torch.no_grad():
        while more():
            one_hot = player.get_actions({"rgb": sheeprl_frames(obs, screen, frame)}, greedy=True)[0]  # [1, N, 5]
            out = envs.step(one_hot.argmax(-1).view(-1))
            ret, length = ret + out.reward, length + 1
            ended = (out.terminated | out.truncated).nonzero().flatten().tolist()
            for i in ended:
                finished.append((float(ret[i]), int(length[i]), bool(out.success[i])))
                first[i] = first[i] or finished[-1]
                ret[i], length[i] = 0.0, 0
            if ended:
                player.init_states(ended)
            obs = out.obs
    done = first if start_cells else finished[:episodes]
    return {"greedy_success": sum(e[2] for e in done) / len(done), "greedy_ep_len": sum(e[1] for e in done) / len(done),
            "greedy_ep_ret": sum(e[0] for e in done) / len(done),
            **({"success_by_cell": [int(e[2]) for e in done]} if start_cells else {})}


def evaluate_seed(cfg: DreamerRunConfig, out: Path, episodes: int, start_cells: bool = False) -> list[dict]:
    """The greedy evaluation (``greedy_eval``) of every chunk checkpoint of the seed not yet in its GREEDY file
    (GREEDY_CELLS with ``start_cells``), each row with the training wall and CPU seconds up to it (CHUNKS; None
    where a chunk ran untimed)."""
    path = seed_dir(out, cfg)
    target = path / (GREEDY_CELLS if start_cells else GREEDY)
    rows = json.loads(target.read_text()) if target.is_file() else []
    chunks = json.loads((path / CHUNKS).read_text()) if (path / CHUNKS).is_file() else []
    seen = {row["env_steps"] for row in rows}
    for steps, ckpt in checkpoints(path):
        if steps in seen:
            continue
        before = [c for c in chunks if c["env_steps"] <= steps]
        timed = len(before) == len([s for s, _ in checkpoints(path) if s <= steps])
        rows.append({"env_steps": steps, **{key: round(sum(c[key] for c in before), 1) if timed else None
                                             for key in ("wall_s", "cpu_s")},
                     **greedy_eval(ckpt.parent.parent, ckpt, cfg.seed, episodes, start_cells)})
        rows.sort(key=lambda row: row["env_steps"])
        target.write_text(json.dumps(rows, indent=1) + "\n")
        print(f"sheeprl_room: seed {cfg.seed}: {rows[-1]}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="room-exit", choices=sorted(PRESETS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--total-steps", type=int, help="override the preset's total_steps")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an rlspec config override")
    p.add_argument("--chunk", type=int, help="env steps per sheeprl run, each resuming the last (default: one run)")
    p.add_argument("--out", type=Path, default=Path("runs/sheeprl-room"))
    p.add_argument("--write-only", action="store_true", help="write the JSON (mapping, overrides), run nothing")
    p.add_argument("--episodes", type=int, default=20,
                   help="greedy episodes per chunk checkpoint, on the rooms rlspec eval plays (0: none; default 20)")
    p.add_argument("--start-cells", action="store_true", help="evaluate one episode from every start cell of the "
                   "room instead (rlspec eval --start-cells; into greedy_cells.json)")
    p.add_argument("--eval-only", action="store_true",
                   help="no training: evaluate the seeds' chunk checkpoints not evaluated yet")
    args = p.parse_args(argv)
    out = args.out.resolve()
    try:
        configs = {seed: seed_config(args.preset, args.set, seed, args.total_steps) for seed in args.seeds}
    except ConfigError as err:  # a bad preset or override: its message, no traceback
        print(f"sheeprl_room: {err}", file=sys.stderr)
        return 2
    num_envs = next(iter(configs.values())).num_envs
    if args.chunk is not None and (args.chunk < 1 or args.chunk % num_envs):
        print(f"sheeprl_room: --chunk: expected a positive multiple of num_envs = {num_envs}, got {args.chunk}",
              file=sys.stderr)
        return 2
    result = report(args.preset, configs, out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "sheeprl_room.json"
    if not args.write_only:
        for seed, cfg in configs.items():
            if args.eval_only:
                evaluate_seed(cfg, out, args.episodes, args.start_cells)
            else:
                run_seed(cfg, out, args.chunk, args.episodes, args.start_cells)
            result["runs"][seed] = seed_result(cfg, out)
            target.write_text(json.dumps(result, indent=2) + "\n")  # after every seed
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {target}" + "".join(f"\n  differences: {d}" for d in result["differences"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
