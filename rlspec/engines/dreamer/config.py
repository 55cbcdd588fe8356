"""The Dreamer engine's config and its description for `rlspec train dreamer`: the run's keys
(DreamerRunConfig, one docstring per key: the --set reference; both executions read it), presets, flags and
run names. Imports no torch, so that parsing the command line and its --help are quick; the executions
(reference.py, fast.py) load when a run starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlspec.algos.config import DreamerConfig
from rlspec.contracts.params import SCENARIOS
from rlspec.runs import config as runconfig
from rlspec.runs import shell

ENGINE = "dreamer"


EXECUTIONS = ("local", "device")  # --execution: LocalExecution (local.py), DeviceExecution (device.py)


ENVS = ("room", "pyboy")  # --env: the project's room ROM, or a user's ROM with a RAM plug-in


@dataclass(frozen=True)
class DreamerRunConfig(runconfig.RunConfig):
    """The dreamer engine's run (the keys every engine has: rlspec/runs/config.py RunConfig)."""

    execution: str = "local"
    """local (LocalExecution, local.py: PyBoy, one process, CPU, deterministic) or device (DeviceExecution,
    device.py: the Warp room, actor and learner parts over a replay ring on ``device``). The keys below marked
    "device:" are read by the device execution only."""
    task: str = "room-exit"
    """The room scenario: room-exit (reach the door: success) or standing-still (reconstruction only)."""
    env: str = "room"
    """room (the project's ROM, rlspec/envs/room/room.gb) or pyboy (a user's own ROM: the keys rom, state and
    plugin; execution local only; task is then ignored)."""
    rom: str = ""
    """env pyboy: path of the Game Boy ROM (--rom; the user's own, nothing is shipped or downloaded)."""
    state: str = ""
    """env pyboy: a PyBoy save state every episode starts from (--state; empty: the machine right after boot)."""
    plugin: str = ""
    """env pyboy: the reward/termination plug-in reading RAM (--plugin), a .py file or a module name; its
    interface: rlspec/envs/pyboy_env.py."""
    num_envs: int = 4
    """Rooms stepped together (PyBoy emulators locally; Warp envs in the device execution)."""
    total_steps: int = 50_000
    """Env steps of the whole run (all envs together; a multiple of num_envs)."""
    ep_window: int = 20
    checkpoint_every: int = 4096  # env steps
    min_ready_steps: int = 1024
    """Env steps of uniformly random actions before the first update (replay prefill)."""
    train_ratio: float = 64.0
    """Replayed steps per env step after the prefill: one update (batch_size · seq_len replayed steps) every
    batch_size · seq_len / train_ratio env steps."""
    replay_capacity: int = 20_000
    """Rows of the replay ring per env, 1,440 bytes of packed2 frame each (the oldest are overwritten;
    >= total_steps / num_envs keeps the whole run)."""
    replay_ends: bool = False
    """Also store each step's terminated and truncated flags and its final observation (the frame after the
    step, before any reset) in the replay (contract replay's store_flags and store_final): what bootstrapping a
    time limit from its real final state needs, and what contract collector checks. It doubles the replay's
    frame memory; only the world model's heads with dreamer.head_input=posterior read them (the final frame)."""
    step_limit: int = 64
    """Env steps before an episode is truncated."""
    frameskip: int = 4
    """Emulated frames per env step (>= 3: the room shows its update from the third frame). The Warp room of
    the device execution renders the frame after the update directly (the same frame: contract room_env)."""
    log_every: int = 256
    """Write a metrics row every this many env steps (a multiple of num_envs) and at total_steps."""
    device: str = "auto"
    """device: where the device execution runs, cpu, cuda, cuda:K, or auto (cuda when available, else cpu)."""
    kit: str = "fast"
    """device: the contract implementations (Kit) of the core, fast (the fast twins), fast-compiled (the fast
    twins with torch.compile of the world model's steps, heads and KL), fast-triton (the fast twins with the
    fused Triton LayerNorm-GRU: CUDA, or TRITON_INTERPRET=1) or reference (compare's deterministic mode). The
    local execution always uses the reference kit."""
    steps_per_rollout: int = 8
    """device: vector steps the actor part runs before the learner part takes its due updates (actor-side
    convenience, decoupled from commit_stride and seq_len: the Dreamer plan M7)."""
    commit_stride: int = 4
    """device: vector steps between replay commits (a commit makes rows readable to the learner; on CUDA it
    records an event the learner's gather waits on). <= dreamer.seq_len (the Dreamer plan's default advice is
    seq_len / 2)."""
    sync_every: int = 4
    """device: learner -> actor weight syncs: after a learner phase, if this many updates were taken since the
    last sync, the learner copies its world model and actor into the actor's copy (on CUDA the actor stream
    waits for the copy before acting again)."""
    value_checks: str = "auto"
    """device: check tensor values at every call of the hot loop (NaN/Inf, action ids, 0/1 flags, ring pushes):
    on, off, or auto (on with device cpu, where they are free; off on CUDA, where each is a host
    synchronization). Off, shapes and dtypes are still checked, and the engine still stops on non-finite
    metrics and counts ring push violations on the device."""
    dreamer: DreamerConfig = field(default_factory=DreamerConfig)
    """World model, actor-critic and optimisation settings (rlspec/algos/dreamer.py)."""


PRESETS: dict[str, dict] = {
    "default": {},
    # a few hundred env steps with a tiny model: every code path taken in well under a minute on 2 cores
    "smoke": {"num_envs": 2, "total_steps": 400, "min_ready_steps": 64, "train_ratio": 32.0,
              "replay_capacity": 1024, "log_every": 40, "checkpoint_every": 200, "ep_window": 10,
              "dreamer.deter": 64, "dreamer.stoch": 8, "dreamer.classes": 8, "dreamer.hidden": 64,
              "dreamer.embed_dim": 64, "dreamer.pool": 4, "dreamer.mlp_hidden": 64, "dreamer.mlp_layers": 1,
              "dreamer.horizon": 8, "dreamer.batch_size": 4, "dreamer.seq_len": 16},
    # the room-exit benchmark's conv run (benchmarks/dreamer/room_exit.py OVERRIDES + the conv encoder on the
    # whole 72 × 80 frame): both engines reached greedy success 1.0 at 18,432 env steps from seed 0
    "room-exit": {"task": "room-exit", "total_steps": 20480, "num_envs": 4, "min_ready_steps": 1024,
                  "train_ratio": 32.0, "replay_capacity": 20000, "log_every": 512, "checkpoint_every": 2048,
                  "dreamer.deter": 128, "dreamer.stoch": 8, "dreamer.classes": 8, "dreamer.hidden": 128,
                  "dreamer.embed_dim": 128, "dreamer.pool": 1, "dreamer.mlp_hidden": 128, "dreamer.mlp_layers": 2,
                  "dreamer.horizon": 15, "dreamer.batch_size": 8, "dreamer.seq_len": 32, "dreamer.wm_lr": 3e-4,
                  "dreamer.actor_lr": 3e-4, "dreamer.critic_lr": 3e-4, "dreamer.encoder": "conv",
                  "dreamer.cnn_stages": 3, "dreamer.cnn_mult": 8},
}


# ------------------------------------------------------------------------------------ `rlspec train dreamer`
def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--execution", choices=EXECUTIONS, default=None,
                   help="local (default): PyBoy, one process, deterministic; device: the Warp room, actor and "
                        "learner parts, CUDA streams when device is cuda")
    p.add_argument("--env", choices=ENVS, help="room (default): the project's ROM; pyboy: your own ROM (--rom, "
                                               "--state, --plugin)")
    p.add_argument("--rom", type=Path, help="env pyboy: your Game Boy ROM (shorthand for --set rom=...)")
    p.add_argument("--state", type=Path, help="env pyboy: a PyBoy save state every episode starts from")
    p.add_argument("--plugin", help="env pyboy: reward/termination plug-in reading RAM, a .py file or a module "
                                    "(functions reward(memory), done(memory); rlspec/envs/pyboy_env.py)")


def _out_name(cfg: DreamerRunConfig) -> str:
    name = cfg.task if cfg.env == "room" else f"pyboy-{Path(cfg.rom).stem}"
    return f"{ENGINE}{'-device' * (cfg.execution == 'device')}-{name}-s{cfg.seed}"


def describe(validate: Callable[[DreamerRunConfig], None], run: Callable[..., Path]) -> shell.Engine:
    """The engine `rlspec train dreamer` runs: ``run`` (rlspec/runs/shell.py's signature) with DreamerRunConfig,
    checked by ``validate``; its --help text is the package's docstring, read without importing it."""
    return shell.Engine(
        name=ENGINE, config=DreamerRunConfig, presets=PRESETS, doc=shell.docstring("rlspec.engines.dreamer"),
        decides=encoder_decides,
        validate=validate, run=run, out_name=_out_name, out_pattern="dreamer-TASK-sSEED", stop_unit="steps",
        flags=(shell.Flag("task", "task", choices=tuple(sorted(SCENARIOS))),), options=_options,
        option_sets=lambda args: [*execution_args(args), *user_env_args(args)],
        option_names=("--execution", "--env", "--rom", "--state", "--plugin"))


def encoder_decides(cfg: DreamerRunConfig) -> dict[str, tuple[object, str]]:
    """Engine.decides: the encoder's keys the other encoder never reads (the MLP encoder has no conv stages; the
    conv encoder's embedding size follows from the frame, rlspec/algos/dreamer.py world_model_config)."""
    if cfg.dreamer.encoder == "conv":
        return {"dreamer.embed_dim": (runconfig.UNUSED, "dreamer.encoder conv, whose embedding size follows from "
                                                        "dreamer.frame, pool, cnn_mult and cnn_stages")}
    unused = (runconfig.UNUSED, f"dreamer.encoder {cfg.dreamer.encoder}, which never reads it")
    return dict.fromkeys(("dreamer.cnn_mult", "dreamer.cnn_stages"), unused)


def execution_args(args) -> list[str]:
    """--execution as a --set override."""
    return [f"execution={args.execution}"] if args.execution else []


def user_env_args(args) -> list[str]:
    """--env/--rom/--state/--plugin as --set overrides; paths made absolute (config.json is read from
    elsewhere by --resume and eval). A plug-in given as a file is a path too; a module name stays."""
    out = [f"env={args.env}"] if args.env else []
    for key in ("rom", "state", "plugin"):
        value = getattr(args, key)
        if value is not None:
            is_path = key != "plugin" or str(value).endswith(".py")
            out.append(f"{key}={Path(value).resolve() if is_path else value}")
    return out
