"""The DreamerV3 engine (Dreamer plan M6–M8) on the project's Game Boy room (rlspec/envs/room/room.gb), in the
engines' one layout: config.py (the keys, no torch), loop.py (the run loop and what the executions share), one
module per execution — local.py (``LocalExecution``: one process, CPU, PyBoy, deterministic) and device.py
(``DeviceExecution``: actor and learner parts over a device ring, the Warp room) —, verbs.py (eval, plot,
compare) and this entry, which joins them behind the CLI. loop.py imports neither execution; nothing imports
this module.

    rlspec train dreamer --task room-exit|standing-still [--preset smoke] [--out DIR]
                         [--set KEY=VALUE ...]
    rlspec train dreamer --env pyboy --rom ROM [--state STATE] --plugin PLUGIN [...]   # a user's own game:
                         # its ROM, a save state every episode starts from, a RAM reward/termination plug-in
                         # (interface: rlspec/envs/pyboy_env.py); execution local only
    rlspec train dreamer --resume RUN            # continue RUN from its last checkpoint, bit for bit
    rlspec eval RUN [--episodes K] [--video]     # greedy policy: mean return, success rate (RUN/eval/eval.json);
                                                 # --video: RUN/eval/episodes.mp4 of those episodes
    rlspec plot RUN                              # redraw RUN/plots/*.png
    rlspec train dreamer --execution device ...  # DeviceExecution (device.py), same config
    rlspec compare dreamer ...                   # both executions from one seed
"""

from __future__ import annotations

from pathlib import Path

from rlspec.engines import lazy
from rlspec.engines.dreamer.config import (
    ENGINE,
    EXECUTIONS,
    PRESETS,
    DreamerRunConfig,
    describe,
    execution_args,
    user_env_args,
)
from rlspec.runs import shell

__all__ = ["ENGINE", "EXECUTIONS", "PRESETS", "DreamerRunConfig", "execution_args", "train",
           "user_env_args"]

# every other name (DESCRIPTION, build_config, evaluate, plot, compare, execution, restore_ring, the executions'
# classes, the loop's parts) from verbs.py, the loop or an execution, imported on first use: they import torch
__getattr__ = lazy(__name__, ("verbs", "loop", "local", "device"))


def _validate(cfg: DreamerRunConfig) -> None:
    from rlspec.engines.dreamer.loop import validate

    validate(cfg)


def _run(cfg: DreamerRunConfig, out: Path, resume: bool, stop_after: int | None, show_progress: bool) -> Path:
    from rlspec.engines.dreamer.verbs import DESCRIPTION

    return DESCRIPTION.run(cfg, out, resume, stop_after, show_progress)


def train(argv: list[str]) -> int:
    """`rlspec train dreamer ...`: parsing and --help import no torch."""
    return shell.train(describe(_validate, _run), argv)
