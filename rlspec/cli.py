"""`rlspec` command line.

Kit: `rlspec check <contract>|all [--impl MODULE_OR_PATH] [--clause ID] [--unsupported FILE]`,
`rlspec list [CONTRACT]`.
Engines: `rlspec train <engine> ...`, `rlspec eval RUN ...`, `rlspec plot RUN`, `rlspec compare <engine> ...`.
Tools: `rlspec probe --frames DIR|VIDEO --safe ... --unsafe ...` (semantic prompt probe, seed 000 §30).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import torch

from rlspec import registry

PROFILES = ("ci", "dev", "nightly")  # spec.core.PROFILES' names (tests/unit/test_layering.py keeps them equal)


def choose_triton(mode: str) -> None:
    """The application's choice of how Triton backends run (fast/triton_mode.py); before any is imported.
    auto: keep $TRITON_INTERPRET if set, else interpret exactly when there is no CUDA device."""
    if mode == "interpret" or (mode == "auto" and "TRITON_INTERPRET" not in os.environ
                               and not torch.cuda.is_available()):
        os.environ["TRITON_INTERPRET"] = "1"
    elif mode == "compiled":
        os.environ["TRITON_INTERPRET"] = "0"


# Engines behind `train`, `eval`, `plot` and `compare`, imported only when their verb runs. Each module
# provides train(argv) -> int, evaluate(run_dir, argv) -> int, plot(run_dir) -> int, compare(argv) -> int.
ENGINES: dict[str, str] = {"safe": "rlspec.engines.safe", "safe-fast": "rlspec.engines.safe_fast",
                           "bonus": "rlspec.engines.bonus", "dreamer": "rlspec.engines.dreamer"}


def _engine(name: str):
    if name not in ENGINES:
        raise SystemExit(f"rlspec: unknown engine {name!r}; known: {', '.join(sorted(ENGINES)) or 'none'}")
    return importlib.import_module(ENGINES[name])


def _run_engine(run_dir: Path):
    """The engine that wrote RUN, from RUN/config.json's "engine" key."""
    config = run_dir / "config.json"
    if not config.is_file():
        raise SystemExit(f"rlspec: {run_dir} is not a run directory (no config.json)")
    return _engine(json.loads(config.read_text())["engine"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rlspec", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)
    p_check = sub.add_parser("check", help="run a contract's properties over implementations")
    p_check.add_argument("contract", help=f"one of {', '.join(registry.CONTRACTS)}, or 'all'")
    p_check.add_argument("--impl", help="check this module instead of the registered ones: "
                                        "'pkg.module[:attr]' or 'path/to/file.py[:attr]'")
    p_check.add_argument("--profile", choices=PROFILES, default=None,
                         help="hypothesis profile (default: $HYPOTHESIS_PROFILE, else ci; dev and nightly dig deeper)")
    p_check.add_argument("--triton", choices=("auto", "interpret", "compiled"), default="auto",
                         help="how Triton backends run: under the interpreter on CPU tensors, or compiled for "
                              "CUDA (default auto: $TRITON_INTERPRET if set, else interpret without CUDA)")
    p_check.add_argument("--out", type=Path, default=Path("rlspec-report"),
                         help="where report.md and report.json go (default: ./rlspec-report)")
    p_check.add_argument("--clause", action="append", metavar="ID",
                         help="check only this clause (repeat, or comma-separate, for several)")
    p_check.add_argument("--unsupported", type=Path, metavar="FILE",
                         help="a file declaring the clauses and cases the implementation does not support; "
                              "they are reported UNSUPPORTED, not FAIL (format: rlspec/unsupported.py)")
    p_check.add_argument("--seed", type=int, help="the seed of a profile that is not derandomized (dev, nightly); "
                                                  "printed in every reproduce command")
    p_check.add_argument("--reproduce", metavar="BLOB",
                         help="replay one failing example (the blob a reproduce command prints); needs --clause")
    p_list = sub.add_parser("list", help="list contracts and clauses; with CONTRACT, its interface signatures, "
                                         "attributes and defaults, and the case keys of each clause")
    p_list.add_argument("contract", nargs="?", help=f"one of {', '.join(registry.CONTRACTS)}")
    for verb, what, text in (("train", "engine", "train an engine: rlspec train ENGINE --help"),
                             ("compare", "engine", "run the reference and fast engines side by side"),
                             ("eval", "run", "evaluate a run's checkpoint"),
                             ("plot", "run", "(re)draw a run's plots")):
        p = sub.add_parser(verb, help=text, add_help=False)
        p.add_argument(what, type=Path if what == "run" else str)
        p.add_argument("rest", nargs=argparse.REMAINDER)
    sub.add_parser("probe", help="prompt-centroid separability on frames: rlspec probe --help", add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["probe"]:  # its own parser: its options would be taken for rlspec's
        from rlspec.semantics.probe import main as probe

        return probe(argv[1:])
    args = parser.parse_args(argv)

    if args.verb == "train":
        return _engine(args.engine).train(args.rest)
    if args.verb == "compare":
        return _engine(args.engine).compare(args.rest)
    if args.verb == "eval":
        return _run_engine(args.run).evaluate(args.run, args.rest)
    if args.verb == "plot":
        return _run_engine(args.run).plot(args.run)

    from rlspec import kit  # the checker: loads Hypothesis, which train/eval/plot never need

    if args.verb == "list":
        if args.contract and args.contract not in registry.CONTRACTS:
            parser.error(f"unknown contract {args.contract!r}; known: {', '.join(registry.CONTRACTS)}")
        return kit.list_contracts(args.contract)
    ids = list(registry.CONTRACTS) if args.contract == "all" else [args.contract]
    unknown = [c for c in ids if c not in registry.CONTRACTS]
    if unknown:
        parser.error(f"unknown contract {unknown[0]!r}; known: {', '.join(registry.CONTRACTS)}, all")
    if args.impl and args.contract == "all":
        parser.error("--impl checks one module against one contract: name the contract")
    choose_triton(args.triton)
    clauses = [c.strip() for arg in args.clause or () for c in arg.split(",") if c.strip()] or None
    return kit.check(ids, args.impl, args.profile or os.environ.get("HYPOTHESIS_PROFILE", "ci"), args.out,
                 clauses=clauses, unsupported_file=args.unsupported, seed=args.seed, reproduce=args.reproduce)


if __name__ == "__main__":
    sys.exit(main())
