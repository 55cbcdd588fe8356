"""``python -m rlspec.thirdparty [--out DIR] [ADAPTER ...]``: run the adapters through the kit's runner and
write DIR/conformance.json and DIR/conformance.md (default benchmarks/kit/results/thirdparty). Exits 1 when a failure is
undeclared or a declaration is stale (the table is written either way). ``nox -s thirdparty`` installs
the pinned libraries and runs this."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from rlspec.spec.core import PROFILES
from rlspec.thirdparty import ADAPTERS
from rlspec.thirdparty.findings import FINDINGS
from rlspec.thirdparty.table import build, problems, to_markdown
from rlspec.thirdparty.wheel import WHEEL_DIR_ENV

DISTRIBUTIONS = ("torch", "sheeprl", "stable-baselines3", "gymnasium", "torchrl", "tensordict", "rlax", "jax", "jaxlib",
                 "numpy")


def _versions() -> dict[str, str]:
    out = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    wheel_dir = Path(os.environ.get(WHEEL_DIR_ENV, ""))
    out["wheels"] = sorted(p.name for p in wheel_dir.glob("*.whl")) if os.environ.get(WHEEL_DIR_ENV) else []
    return out


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlspec.thirdparty", description=__doc__)
    parser.add_argument("adapters", nargs="*", choices=[[], *ADAPTERS], help="default: all")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/kit/results/thirdparty"))
    args = parser.parse_args(argv)
    rows = build(args.adapters or None)
    meta = dict(command="python -m rlspec.thirdparty", rlspec=_commit(), torch=torch.__version__,
                max_examples=PROFILES["ci"]["max_examples"], versions=_versions())
    findings = [f.run() for f in FINDINGS]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "conformance.json").write_text(json.dumps(dict(meta=meta, adapters=rows, findings=findings),
                                                         indent=2, ensure_ascii=False) + "\n")
    (args.out / "conformance.md").write_text(to_markdown(rows, meta, findings))
    print((args.out / "conformance.md").read_text())
    bad = problems(rows, findings)
    for line in bad:
        print(f"PROBLEM: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
