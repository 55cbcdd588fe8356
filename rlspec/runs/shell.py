"""One front end for every engine's `rlspec train ENGINE`: an engine describes itself (``Engine``: its config
class, presets, shorthand flags, how it names and runs a run) and ``train`` owns what every engine shares:

- the common flags: ``--preset``, ``--set KEY=VALUE`` (with ``--resume``: total_steps only), ``--out``,
  ``--resume RUN``, ``--stop-after-<unit> N`` (the engine's unit: epochs, steps, updates), ``--quiet``;
- the shorthand flags (``--algo A`` = ``--set algo=A``, ...), applied before ``--set``;
- the resume guard: ``--resume`` continues a run with its own config.json, so it takes no preset, no ``--out``
  and no shorthand;
- the config built from the preset and the overrides, validated before anything is created;
- the exit statuses of rlspec.runs.faults (``outcome``: 0, 2 for a user error, 3 stopped, 130 interrupted ...).

`rlspec compare ENGINE` and `rlspec eval RUN` share their common part too: ``compare_parser``/``compare_config``
(the shorthand flags, --preset, --set for both runs, --out, --quiet) and ``eval_parser``/``eval_inputs``
(--episodes, the run's config and checkpoint, one error line for a missing or damaged run), ``episode_means``
and ``write_eval`` (RUN/eval/eval.json).

Imports no torch: an engine module builds its ``Engine`` and passes it here.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlspec import jsonio
from rlspec.runs import config as runconfig
from rlspec.runs.faults import outcome


@dataclass(frozen=True)
class Flag:
    """``--NAME VALUE``: shorthand for ``--set KEY=VALUE``."""

    name: str
    key: str
    help: str = ""
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Engine:
    """What `rlspec train NAME` needs to know of an engine."""

    name: str  # the CLI name: rlspec train NAME
    config: type  # the run-config dataclass (its docstrings are the --set help)
    presets: dict[str, dict[str, Any]]  # preset name -> overrides ("default" among them)
    doc: str  # the --help description
    validate: Callable[[Any], None]  # raises ConfigError naming the key, expected and actual value
    run: Callable[..., Path]  # run(cfg, out, resume=, stop_after=, show_progress=) -> the run directory
    out_name: Callable[[Any], str]  # cfg -> the default run directory's name under runs/
    out_pattern: str  # that name in the --help, e.g. safe-ALGO-ENV-sSEED
    stop_unit: str  # --stop-after-<unit>: epochs, steps or updates
    flags: tuple[Flag, ...] = ()
    # more options, and the --set overrides they stand for (e.g. paths made absolute), for engines that need them
    options: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    option_sets: Callable[[argparse.Namespace], list[str]] = lambda args: []
    option_names: tuple[str, ...] = field(default=())  # those options' flags, for the resume guard
    # cfg -> {key: (the value cfg runs it at, that in words: "--ablation top1, which runs it at 1")} for keys
    # another key decides (bonus: the ablation's); an explicit --set of one to another value is refused
    # (``refuse_contradictions``)
    decides: Callable[[Any], dict[str, tuple[Any, str]]] = lambda cfg: {}


def docstring(module: str) -> str:
    """A module's docstring, read from its source without importing it (an engine's --help: its modules import
    torch)."""
    source = Path(importlib.util.find_spec(module).origin).read_text()
    return ast.get_docstring(ast.parse(source), clean=False) or ""


def build_config(engine: Engine, preset: str = "default", overrides: list[str] = ()) -> Any:
    """The engine's config: its defaults, then the preset, then ``overrides`` ("key=value", in order: a later
    one wins, and --set overrides the preset: the documented rule)."""
    cfg = runconfig.replace(engine.config(), engine.presets[preset], f"preset {preset!r}")
    return runconfig.apply_overrides(cfg, list(overrides))


def refuse_contradictions(engine: Engine, cfg: Any, flags: list[str], sets: list[str]) -> None:
    """The command line's contradictions, a ConfigError naming both sides: a shorthand flag and a --set of its
    key with another value (``--task a --set task=b``), and a key set (by either) to a value another key
    overrides (``engine.decides``: bonus's ``--ablation top1`` runs top_k = 1). No option is silently dropped."""
    by_flag = dict(item.partition("=")[::2] for item in flags)
    for item in sets:
        key, _, value = item.partition("=")
        if key.strip() in by_flag and by_flag[key.strip()] != value:
            raise runconfig.ConfigError(f"config key {key.strip()!r} is given two values, {by_flag[key.strip()]!r} "
                                        f"by its flag and {value!r} by --set: give it once")
    given = {**by_flag, **{k.strip(): v for k, _, v in (item.partition("=") for item in sets)}}
    for key, (runs_at, said) in engine.decides(cfg).items():
        if key in given and runconfig.value_at(cfg, key) != runs_at:
            raise runconfig.ConfigError(f"config key {key!r} = {given[key]} contradicts {said}: drop one")


def parser(engine: Engine) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"rlspec train {engine.name}", description=engine.doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="config keys (--set KEY=VALUE):\n" + runconfig.help_text(engine.config))
    for flag in engine.flags:
        p.add_argument(f"--{flag.name}", choices=flag.choices, help=flag.help or f"shorthand for --set {flag.key}=...")
    engine.options(p)
    p.add_argument("--preset", choices=sorted(engine.presets), default="default", help="a named set of overrides")
    p.add_argument("--out", type=Path, help=f"run directory (default: runs/{engine.out_pattern})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (with --resume: total_steps only, to extend the run)")
    p.add_argument("--resume", type=Path, metavar="RUN", help="continue RUN from its last checkpoint")
    p.add_argument(f"--stop-after-{engine.stop_unit}", dest="stop_after", type=int, metavar="N",
                   help=f"stop after this many {engine.stop_unit} (a later --resume goes on)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def flag_sets(engine: Engine, args: argparse.Namespace) -> list[str]:
    """The shorthand flags given, as --set overrides."""
    return [f"{flag.key}={getattr(args, flag.name)}" for flag in engine.flags if getattr(args, flag.name) is not None]


def shorthand_sets(engine: Engine, args: argparse.Namespace) -> list[str]:
    """The shorthand flags and the engine's options given, as --set overrides (before the user's --set)."""
    return [*flag_sets(engine, args), *engine.option_sets(args)]


def compare_parser(engine: Engine, doc: str, out_pattern: str) -> argparse.ArgumentParser:
    """`rlspec compare ENGINE`'s parser: the engine's shorthand flags, ``--preset``, ``--set`` (both runs),
    ``--out`` (default runs/``out_pattern``) and ``--quiet``; an engine adds its own options."""
    p = argparse.ArgumentParser(prog=f"rlspec compare {engine.name}", description=doc)
    for flag in engine.flags:
        p.add_argument(f"--{flag.name}", choices=flag.choices, help=flag.help or f"shorthand for --set {flag.key}=...")
    p.add_argument("--preset", choices=sorted(engine.presets), default="default", help="a named set of overrides")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (both runs)")
    p.add_argument("--out", type=Path, help=f"where the runs and compare.json go (default runs/{out_pattern})")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def compare_config(engine: Engine, args: argparse.Namespace, first: list[str] = ()) -> Any:
    """The config both runs of `rlspec compare` share: the preset, ``first``, the shorthand flags, ``--set``."""
    cfg = build_config(engine, args.preset, [*first, *flag_sets(engine, args), *args.set])
    refuse_contradictions(engine, cfg, flag_sets(engine, args), args.set)
    return cfg


def claim_compare_out(out: Path) -> Path:
    """``out`` for `rlspec compare`, which starts both runs afresh (it has no --resume): a new or empty folder,
    else FileExistsError, nothing changed."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"--out {out} is {'a file' if not out.is_dir() else 'not empty'}: rlspec compare "
                              "starts both runs afresh (it has no --resume); choose another --out or delete it "
                              "yourself; nothing was changed")
    return out


def eval_parser(episodes: int, video: str | None = None) -> argparse.ArgumentParser:
    """`rlspec eval RUN`'s parser with ``--episodes K`` (default ``episodes``) and ``--seed S`` (the envs' and
    the policy's seed; default: one the run never trained on); with ``video`` (what it writes), ``--video``.
    An engine adds its own options."""
    p = argparse.ArgumentParser(prog="rlspec eval RUN")
    p.add_argument("--episodes", type=int, default=episodes, help=f"episodes to average (default {episodes})")
    p.add_argument("--seed", type=int, help="the envs' and the policy's seed, an int in [0, 2**32) (default: one "
                                            "the run never trained on)")
    if video:
        p.add_argument("--video", action="store_true", help=f"write {video} (imageio + imageio-ffmpeg)")
    return p


def eval_inputs(p: argparse.ArgumentParser, argv: list[str], load: Callable[[], tuple[Any, dict]],
                positive: tuple[str, ...] = ("episodes",)) -> tuple[argparse.Namespace, Any, dict] | None:
    """`rlspec eval RUN ...`'s inputs: ``argv`` parsed (each option of ``positive`` an int >= 1, --seed in
    [0, 2**32), --video only where imageio is installed: else argparse's error, before any episode), then RUN's
    config and checkpoint from ``load()``; (args, cfg, ckpt), or None after one error line (a missing or
    damaged run: ConfigError, FileNotFoundError)."""
    args = p.parse_args(argv)
    for key in positive:
        if getattr(args, key) < 1:
            p.error(f"--{key}: expected an int >= 1, got {getattr(args, key)}")
    if args.seed is not None and not 0 <= args.seed < 2**32:
        p.error(f"--seed: expected an int in [0, 2**32), got {args.seed}")
    if getattr(args, "video", False) and not all(importlib.util.find_spec(m) for m in ("imageio", "imageio_ffmpeg")):
        p.error("--video needs imageio and imageio-ffmpeg (pip install 'rlspec[semantic]'); nothing was run")
    try:
        cfg, ckpt = load()
    except (runconfig.ConfigError, FileNotFoundError) as err:
        print(f"rlspec eval: error: {err}", file=sys.stderr)
        return None
    return args, cfg, ckpt


def eval_seed(args: argparse.Namespace, run_seed: int) -> int:
    """The seed `rlspec eval` uses: --seed, else the run's seed + 1000003 (no training env has it)."""
    return run_seed + 1_000_003 if args.seed is None else args.seed


def episode_means(episodes: list[tuple], names: tuple[str, ...]) -> dict[str, float]:
    """name -> the mean of that entry of the episodes' tuples (NaN with no episode)."""
    return {name: sum(e[i] for e in episodes) / len(episodes) if episodes else math.nan for i, name in enumerate(names)}


def write_eval(run_dir: Path, result: dict, ckpt: dict, seed: int) -> int:
    """RUN/eval/eval.json of ``result`` with the checkpoint's env step and the seed (an eval during training
    says which checkpoint it read), and that as one JSON line on stdout; 0 (`rlspec eval`'s status)."""
    from rlspec.runs.rundir import CHECKPOINT_STEP

    result = {"checkpoint_step": ckpt.get(CHECKPOINT_STEP), "seed": seed, **result}
    (Path(run_dir) / "eval").mkdir(exist_ok=True)
    (Path(run_dir) / "eval/eval.json").write_text(jsonio.dumps(result))
    print(jsonio.dumps(result, indent=None))
    return 0


def train(engine: Engine, argv: list[str]) -> int:
    """`rlspec train ENGINE ...`: parse, build (or resume) the config, validate it, run; one line and an exit
    status for every ending (rlspec.runs.faults.outcome)."""
    args = parser(engine).parse_args(argv)  # --help and a bad flag end here, before torch is imported
    from rlspec.runs.rundir import check_resumable, resume_config

    def work() -> Path:
        if args.resume:
            if shorthand_sets(engine, args) or args.preset != "default" or args.out:
                given = "/".join(f"--{f.name}" for f in engine.flags) + "".join(f"/{o}" for o in engine.option_names)
                raise runconfig.ConfigError(f"--resume continues a run with its own config.json: give no "
                                            f"{given}/--preset/--out")
            cfg, out = resume_config(engine.config, args.resume, engine.name, args.set), args.resume
        else:
            cfg = build_config(engine, args.preset, [*shorthand_sets(engine, args), *args.set])
            refuse_contradictions(engine, cfg, shorthand_sets(engine, args), args.set)
            out = args.out or Path("runs") / engine.out_name(cfg)
        engine.validate(cfg)  # before anything is created
        if args.stop_after is not None and args.stop_after < 1:
            raise runconfig.ConfigError(f"--stop-after-{engine.stop_unit}: expected an int >= 1, "
                                        f"got {args.stop_after}")
        return engine.run(cfg, out, resume=bool(args.resume) and check_resumable(out), stop_after=args.stop_after,
                          show_progress=not args.quiet)

    return outcome(f"rlspec train {engine.name}", work)
