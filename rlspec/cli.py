"""`rlspec` command line.

Kit: `rlspec check <contract> [<contract> ...]|all [--impl MODULE_OR_PATH] [--clause ID] [--jobs N]
[--unsupported FILE]`, `rlspec list [CONTRACT]`.
Engines: `rlspec train <engine> ...`, `rlspec eval RUN ...`, `rlspec plot RUN`, `rlspec compare <engine> ...`.
Tools: `rlspec probe --frames DIR|VIDEO --safe ... --unsafe ...` (semantic prompt probe, PPOLagSem design §30),
`rlspec report RUN... [--threshold R] [--cost-limit L]` (PPOLagSem design's evaluation metrics over runs of rlspec,
OmniSafe, Stable-Baselines3 or sheeprl, grouped, with bootstrap CIs), `rlspec semantics fit --out DIR` (a
task-trained CLIP made offline from Safety-Gymnasium frames).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

from rlspec import help_cache, registry
from rlspec.contracts import gb_emulator

# Only the standard library and the registry's names are imported here, so that parsing (and every --help)
# is quick: torch, the engines' executions and the checker load when their verb runs. `rlspec train ENGINE`
# parses with the engine's config module (no torch); the --help of the verbs whose parser lives next to torch
# code (compare, eval, probe, report, semantics) is printed through rlspec/help_cache.py.

PROFILES = ("ci", "dev", "nightly")  # spec.core.PROFILES' names (tests/unit/test_layering.py keeps them equal)
CATEGORIES = ("maths", "robustness", "validation")  # spec.core.CATEGORIES' names (likewise)

# Exit status of every verb, in one place (`rlspec --help` prints it, the docs show it).
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM}
EXIT_STATUS = {
    0: "success: every checked clause passes (declared unsupported ones allowed); a run finished, or was already "
       "finished and nothing changed",
    1: "rlspec check found something: a clause fails, is missing or only partly checkable, an implementation "
       "fails to load, or the one --impl asked for is unavailable here",
    2: "a usage error, nothing checked or changed: a bad option, value, config, checkpoint or run directory (or "
       "one in use); an unknown contract, clause or category; an --unsupported file that cannot be read or "
       "matches nothing; a --reproduce token that is damaged or of another contract or clause; a --spec-version "
       "this rlspec cannot honour",
    3: "a run stopped on a fault it detected (non-finite losses or parameters, an env worker or plug-in that "
       "raised or died, a write that failed: a full disk, a read-only folder): its last clean checkpoint is kept; "
       "any other verb that could not write says so in one line",
    130: "interrupted by Ctrl-C: a run keeps its last checkpoint (--resume RUN goes on from it); rlspec check stops "
         "its workers and prints and writes the tables of the contracts that finished",
    129: "SIGHUP (a closed terminal), as for Ctrl-C",
    143: "SIGTERM (a scheduler's preemption, kill), as for Ctrl-C",
}

# Engines behind `train`, `eval`, `plot` and `compare`, imported only when their verb runs: a module providing
# train(argv) -> int, evaluate(run_dir, argv) -> int, plot(run_dir) -> int, compare(argv) -> int.
ENGINES: dict[str, str] = {"safe": "rlspec.engines.safe", "bonus": "rlspec.engines.bonus",
                           "dreamer": "rlspec.engines.dreamer"}
HELP = ("-h", "--help")


def _engine(name: str):
    if name not in ENGINES:  # a user error: exit 2 with one line, as argparse's
        print(f"rlspec: unknown engine {name!r}; known: {', '.join(sorted(ENGINES)) or 'none'}", file=sys.stderr)
        raise SystemExit(2)
    return importlib.import_module(ENGINES[name])


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return n


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _parser() -> argparse.ArgumentParser:
    epilog = "exit status:\n" + "\n".join(textwrap.fill(v, 100, initial_indent=f"  {k:<5}", subsequent_indent=" " * 7)
                                             for k, v in EXIT_STATUS.items())
    parser = argparse.ArgumentParser(prog="rlspec", description=__doc__, epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    p_check = sub.add_parser("check", help="run a contract's properties over implementations")
    p_check.add_argument("contract", nargs="+",
                         help=f"one or more of {', '.join(registry.CONTRACTS)}; or 'all'")
    p_check.add_argument("--impl", help="check this module instead of the registered ones: "
                                        "'pkg.module[:attr]' or 'path/to/file.py[:attr]'")
    p_check.add_argument("--profile", choices=PROFILES, default=None,
                         help="hypothesis profile (default: $HYPOTHESIS_PROFILE, else ci; dev and nightly dig deeper)")
    p_check.add_argument("--triton", choices=("auto", "interpret", "compiled"), default="auto",
                         help="how Triton backends run: under the interpreter on CPU tensors, or compiled for "
                              "CUDA (default auto: $TRITON_INTERPRET if set, else interpret without CUDA)")
    p_check.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                         help="contracts checked at once, each in a worker process (default: the usable cores, "
                              f"here {_usable_cores()}); the output and the report are the same for any N")
    p_check.add_argument("--out", type=Path, default=Path("rlspec-report"),
                         help="where report.md and report.json go (default: ./rlspec-report)")
    p_check.add_argument("--junit-xml", type=Path, metavar="FILE",
                         help="also write JUnit XML: one testcase per clause × implementation (classname "
                              "rlspec.CONTRACT.IMPL, name the clause id; the category, the shrunk example and the "
                              "replay command in a failure's text)")
    p_check.add_argument("--category", action="append", choices=CATEGORIES, metavar="CATEGORY",
                         help=f"check only the clauses of this category (repeat for several): {', '.join(CATEGORIES)}")
    p_check.add_argument("--spec-version", action="append", metavar="CONTRACT=VERSION",
                         help="the contract version your expectations were written for: clauses added since are "
                              "not checked; a newer major version is refused, listing what changed (repeat per "
                              "contract)")
    p_check.add_argument("--clause", action="append", metavar="ID",
                         help="check only this clause (repeat, or comma-separate, for several)")
    p_check.add_argument("--unsupported", type=Path, metavar="FILE",
                         help="a file declaring the clauses and cases the implementation does not support; "
                              "they are reported UNSUPPORTED, not FAIL (format: rlspec/unsupported.py)")
    p_check.add_argument("--seed", type=int, help="the seed of a profile that is not derandomized (dev, nightly); "
                                                  "printed in every reproduce command")
    p_check.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                         help="the per-example deadline: an implementation that makes no progress for this long is "
                              "stopped and its clause reported HANG (default 300)")
    p_check.add_argument("--rom", type=Path, action="append", metavar="FILE",
                         help="gb_emulator only: a Game Boy ROM of yours that its clauses play instead of the "
                              f"project's test programs (repeat for several; or ${gb_emulator.ROMS_ENV})")
    p_check.add_argument("--rom-frames", type=int, metavar="N",
                         help=f"gb_emulator only: the frames each --rom plays per case (default "
                              f"{gb_emulator.USER_FRAMES}; or ${gb_emulator.FRAMES_ENV})")
    p_check.add_argument("--reproduce", metavar="TOKEN",
                         help="replay one failing example: the token a reproduce line prints (it names its contract "
                              "and clause; a damaged or foreign token is a usage error)")
    p_list = sub.add_parser("list", help="list contracts and clauses; with CONTRACT, its interface signatures, "
                                         "attributes and defaults, and the case keys of each clause")
    p_list.add_argument("contract", nargs="?", help=f"one of {', '.join(registry.CONTRACTS)}")
    engines = f"one of {', '.join(ENGINES)}"
    for verb, what, text in (("train", "engine", "train an engine: rlspec train ENGINE --help"),
                             ("compare", "engine", "run the reference and fast engines side by side: "
                                                   "rlspec compare ENGINE --help"),
                             ("eval", "run", "evaluate a run's checkpoint: rlspec eval RUN --help"),
                             ("plot", "run", "(re)draw a run's plots")):
        p = sub.add_parser(verb, help=text, description=text)
        if verb == "plot":
            p.add_argument("run", type=Path, nargs="+",
                           help="a run directory (it holds config.json): its plots; several runs, of any tool "
                                "rlspec report reads (rlspec, OmniSafe, SB3, sheeprl's TensorBoard events): one "
                                "figure of them all, grouped, mean and 95%% bootstrap CI, with rlspec report's table")
            p.add_argument("--out", type=Path, default=Path("rlspec-report/runs"),
                           help="where the figure of several runs goes (default rlspec-report/runs)")
            continue
        p.add_argument(what, type=Path if what == "run" else str,
                       help=engines if what == "engine" else "a run directory (it holds config.json)")
        p.add_argument("rest", nargs=argparse.REMAINDER, help="the options of the engine's " + verb)
    sub.add_parser("probe", help="prompt-centroid separability on frames: rlspec probe --help", add_help=False)
    sub.add_parser("semantics", help="make a task-trained CLIP offline: rlspec semantics fit --help",
                   add_help=False)
    sub.add_parser("report", help="evaluation metrics of runs (rlspec, OmniSafe, SB3, sheeprl) grouped, with "
                                  "95%% bootstrap CIs, and a plot: rlspec report --help", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # the reader went away (`rlspec list | head`): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # else the interpreter's last flush raises again at exit
        return 128 + signal.SIGPIPE
    except OSError as err:  # a full disk or a read-only folder under a verb that does not say it itself
        if err.errno not in WRITE_ERRORS:
            raise
        where = f" ({err.filename})" if err.filename else ""
        print(f"rlspec: could not write: {err.strerror}{where}; what was written before is kept", file=sys.stderr)
        return 3


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["probe"]:  # its own parser: its options would be taken for rlspec's
        return _verb(argv, lambda: _probe(argv[1:]))
    if argv[:1] == ["report"]:  # likewise
        return _verb(argv, lambda: _report(argv[1:]))
    if argv[:1] == ["semantics"]:
        return _verb(argv, lambda: _semantics(argv[1:]))
    args = parser.parse_args(argv)

    if args.verb == "train":  # an engine's config module imports no torch: its --help is built each time
        return _engine(args.engine).train(args.rest)
    if args.verb == "compare":
        return _verb([args.verb, args.engine, *args.rest], lambda: _engine(args.engine).compare(args.rest))
    if args.verb == "plot" and _overlay(args.run):
        return _report([*map(str, args.run), "--out", str(args.out)])
    if args.verb in ("eval", "plot"):
        run = args.run[0] if args.verb == "plot" else args.run
        name = _run_engine(run)
        if name is None:
            return 2
        if args.verb == "plot":
            return _engine(name).plot(run)
        return _verb([args.verb, name, *args.rest], lambda: _engine(name).evaluate(run, args.rest))

    from rlspec import checker  # loads torch and Hypothesis, which train/eval/plot never need

    if args.verb == "list":
        if args.contract and args.contract not in registry.CONTRACTS:
            parser.error(f"unknown contract {args.contract!r}; known: {', '.join(registry.CONTRACTS)}")
        return checker.list_contracts(args.contract)
    ids = list(registry.CONTRACTS) if args.contract == ["all"] else list(dict.fromkeys(args.contract))
    unknown = [c for c in ids if c not in registry.CONTRACTS]
    if unknown:
        parser.error(f"unknown contract {unknown[0]!r}; known: {', '.join(registry.CONTRACTS)}, all")
    if args.impl and len(ids) > 1:
        parser.error("--impl checks one module against one contract: name the contract")
    _use_roms(parser, args, ids)
    clauses = [c.strip() for arg in args.clause or () for c in arg.split(",") if c.strip()] or None
    profile = args.profile or os.environ.get("HYPOTHESIS_PROFILE", "ci")
    if profile not in PROFILES:
        parser.error(f"$HYPOTHESIS_PROFILE is {profile!r}, not one of rlspec's profiles ({', '.join(PROFILES)}); "
                     "set it to one, or give --profile")
    for name, path in (("--out", args.out), ("--junit-xml", args.junit_xml)):
        if path is not None and path.exists() and (path.is_dir() if name == "--junit-xml" else not path.is_dir()):
            parser.error(f"{name} {path} is a {'folder' if path.is_dir() else 'file'}; expected "
                         f"{'a file' if name == '--junit-xml' else 'a folder'}")
    return checker.check(ids, args.impl, profile, args.out,
                     clauses=clauses, categories=args.category, unsupported_file=args.unsupported, seed=args.seed,
                     reproduce=args.reproduce, jobs=args.jobs or _usable_cores(), triton=args.triton,
                     junit=args.junit_xml, spec_versions=args.spec_version, timeout=args.timeout)


def _use_roms(parser: argparse.ArgumentParser, args: argparse.Namespace, ids: list[str]) -> None:
    """--rom / --rom-frames: checked here, handed to contract gb_emulator (and to --jobs' worker processes) through
    its environment variables."""
    if args.rom is None and args.rom_frames is None:
        return
    if "gb_emulator" not in ids:
        parser.error("--rom and --rom-frames apply to contract gb_emulator only; name it (rlspec check gb_emulator "
                     "--rom MY.gb)")
    if args.rom is None:
        parser.error("--rom-frames: expected --rom FILE with it (the frames each of your ROMs plays)")
    for path in args.rom:
        size = path.stat().st_size if path.is_file() else None
        if size is None or size < gb_emulator.MIN_ROM:
            got = "no such file" if size is None else f"{size} bytes"
            parser.error(f"--rom {path}: expected a Game Boy ROM of at least {gb_emulator.MIN_ROM} bytes, got {got}")
    if args.rom_frames is not None and args.rom_frames < 1:
        parser.error(f"--rom-frames: expected an int >= 1, got {args.rom_frames}")
    os.environ[gb_emulator.ROMS_ENV] = os.pathsep.join(str(p.resolve()) for p in args.rom)
    os.environ[gb_emulator.FRAMES_ENV] = str(args.rom_frames or gb_emulator.USER_FRAMES)


def _verb(words: list[str], run) -> int:
    """Run a verb whose parser lives in a heavy module; its --help comes from rlspec/help_cache.py."""
    if any(w in HELP for w in words):
        return help_cache.show(words, run)
    return run()


def _probe(argv: list[str]) -> int:
    from rlspec.semantics.probe import main as probe

    return probe(argv)


def _semantics(argv: list[str]) -> int:
    if argv[:1] != ["fit"]:
        print(f"rlspec semantics: expected the sub-verb fit (rlspec semantics fit --help), got {argv[:1] or 'none'}",
              file=sys.stderr)
        return 2
    from rlspec.envs.safety_frames import safety_frames
    from rlspec.semantics.fit import main as fit

    return fit(argv[1:], render=safety_frames)


def _report(argv: list[str]) -> int:
    from rlspec.evidence.evaluation import main as report

    return report(argv)


def _overlay(runs: list[Path]) -> bool:
    """Whether `rlspec plot RUN...` draws the runs in one figure (rlspec report's): several runs, or one that is
    not an rlspec run but another tool's that the report reads (an unreadable one gets the run error below)."""
    if len(runs) > 1:
        return True
    if (runs[0] / "config.json").is_file():
        return False
    from rlspec.evidence.evaluation import EvaluationError, read_run

    try:
        read_run(runs[0])
    except EvaluationError:
        return False
    return True


def _run_engine(run_dir: Path) -> str | None:
    """The name of the engine that wrote RUN (RUN/config.json's "engine"); None, said on stderr, when RUN is
    not a run directory, its config.json is damaged or names no engine this rlspec has."""
    config = run_dir / "config.json"
    if not config.is_file():
        print(f"rlspec: error: {run_dir} is not a run directory (no config.json)", file=sys.stderr)
        return None
    try:
        name = json.loads(config.read_text())["engine"]
    except (ValueError, KeyError, TypeError) as err:
        print(f"rlspec: error: {config} is damaged ({type(err).__name__}: {err}); nothing was changed",
              file=sys.stderr)
        return None
    if name not in ENGINES:
        print(f"rlspec: error: {config} names engine {name!r}, which this rlspec does not have (it has "
              f"{', '.join(ENGINES)})", file=sys.stderr)
        return None
    return name


if __name__ == "__main__":
    sys.exit(main())
