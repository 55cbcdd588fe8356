"""What the engines' adapters to contract ``trainer`` (spec/trainer.py) share: a run through the engine's own
`rlspec train ENGINE` front end, and the fingerprint of its last checkpoint as plain data.

``run`` calls the engine's ``train(argv)`` in this process: what `rlspec train ENGINE ...` calls (rlspec.cli,
which the engines do not import, parses only the verb and the engine's name). A fresh run is ``ARGV --out OUT
--set total_steps=N --set seed=S``, a resume ``--resume OUT --set total_steps=N`` (the engine's own extension
of a run, or its "already finished" when it is at N). A resume of a directory that holds no run yet (killed
before the engine wrote its config.json) is a fresh run; one that holds a run without a checkpoint is left to
the engine, which starts it afresh when it has nothing to lose. A non-zero exit status is a RuntimeError
naming it, with what the engine said on stderr.

The runs draw no plots (``plots=false``: matplotlib would take most of a short run's time).
``fingerprint`` is RUN/checkpoints/last.pt as the engine's resume reads it (rlspec.runs.rundir.load_checkpoint:
without the run id, a fresh uuid per run, and the config copy), every object in it turned into plain data
(``plain``).
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rlspec.contracts.trainer import LEAVES
from rlspec.runs.rundir import CHECKPOINT, is_run_dir, load_checkpoint


def sets(*items: str) -> list[str]:
    """``--set KEY=VALUE`` for every "KEY=VALUE" item."""
    return [a for item in items for a in ("--set", item)]


def run(engine: str, argv: list[str], out: str, total_steps: int, seed: int, resume: bool) -> None:
    """`rlspec train ENGINE` to ``total_steps``: fresh (``argv`` and ``seed``) or, with ``resume``, continuing the
    run in ``out`` (module docstring)."""
    if resume and is_run_dir(Path(out)):
        args = ["--resume", out, *sets(f"total_steps={total_steps}")]
    else:
        args = [*argv, "--out", out, *sets(f"total_steps={total_steps}", f"seed={seed}")]
    train = importlib.import_module(f"rlspec.engines.{engine}").train
    said = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said):
        code = train([*args, "--quiet"])
    if code != 0:
        raise RuntimeError(f"rlspec train {engine} {' '.join(args)} exited with status {code}: "
                           f"{said.getvalue().strip()}")


def fingerprint(out: str) -> dict:
    """The run's last checkpoint as plain data (module docstring)."""
    return plain(load_checkpoint(Path(out) / CHECKPOINT))


def steps(out: str, counter: str, per: int = 1) -> int:
    """The env step of the run's last checkpoint: its ``counter`` entry times ``per`` env steps."""
    return int(load_checkpoint(Path(out) / CHECKPOINT)[counter]) * per


def plain(value: Any) -> Any:
    """``value`` as the nested mappings, lists and leaves (tensors, arrays, numbers, strings, bytes, None) a
    fingerprint holds: a named tuple by its fields, another tuple, list or deque as a list, an object by its
    ``state_dict()`` if it has one, else by its attributes (``vars``: what its pickle holds), a torch dtype or
    device by its name. A TypeError names any other kind."""
    if isinstance(value, LEAVES):
        return value
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return plain(value._asdict())
    if isinstance(value, (list, tuple, deque)):
        return [plain(v) for v in value]
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if callable(getattr(value, "state_dict", None)):
        return plain(value.state_dict())
    if hasattr(value, "__dict__"):
        return plain(vars(value))
    raise TypeError(f"plain: a {type(value).__module__}.{type(value).__name__} in a checkpoint is no tensor, "
                    "array, number, string, bytes, None, mapping, sequence or object with attributes")
