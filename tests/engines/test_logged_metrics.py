"""Each engine page's "Logged metrics" table is true of the engine: a tiny real run of each logs only keys the
table lists (a `*` row covers a family), and every key the table says is logged "always" is in its rows."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

from rlspec.engines import bonus, dreamer, safe
from rlspec.runs.rundir import read_metrics

ROOT = Path(__file__).resolve().parents[2]
SAFE_TINY = ["env_id=ToyGoal-v0", "total_steps=300", "steps_per_epoch=150", "num_envs=2", "ep_window=5",
             "ppo.update_iters=2", "ppo.batch_size=50", "plots=false"]
DREAMER_TINY = ["num_envs=2", "total_steps=48", "min_ready_steps=16", "train_ratio=16", "replay_capacity=64",
                "step_limit=10", "log_every=8", "checkpoint_every=48", "ep_window=5", "plots=false",
                "dreamer.deter=16", "dreamer.stoch=4", "dreamer.classes=4", "dreamer.hidden=16",
                "dreamer.embed_dim=16", "dreamer.pool=8", "dreamer.mlp_hidden=16", "dreamer.mlp_layers=1",
                "dreamer.horizon=4", "dreamer.batch_size=2", "dreamer.seq_len=8"]


def table(engine: str) -> list[tuple[list[str], str]]:
    """(keys, when) of each row of the page's "Logged metrics" table."""
    page = (ROOT / f"docs/engines/{engine}.md").read_text()
    section = page.split("## Logged metrics", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    return [(re.findall(r"`([^`]+)`", keys), when.strip()) for keys, when in rows]


def logged(engine: str, tmp_path: Path) -> dict[str, set[str]]:
    """The keys of a few tiny runs of the engine, by run: the base configuration first."""
    runs = {}
    if engine == "safe":
        for algo in ("PPOLag", "CPO", "P3O", "PPOSimmerPID"):
            runs[algo] = safe.run(safe.build_config(overrides=[f"algo={algo}", *SAFE_TINY]), tmp_path / algo,
                                  show_progress=False)
    elif engine == "dreamer":
        for execution in ("local", "device"):
            extra = ["execution=device", "device=cpu"] if execution == "device" else []
            cfg = dreamer.build_config(overrides=[*DREAMER_TINY, *extra])
            runs[execution] = dreamer.execution(cfg).run(tmp_path / execution, show_progress=False)
    else:
        runs["smoke"] = bonus.run(bonus.build_config("smoke", ["plots=false"]), tmp_path / "bonus",
                                  show_progress=False)
    return {name: set().union(*read_metrics(run)) for name, run in runs.items()}


@pytest.mark.parametrize("engine", ["safe", "dreamer", "bonus"])
def test_the_logged_metrics_table_is_what_the_engine_logs(engine, tmp_path):
    rows = table(engine)
    assert len(rows) >= 8, rows
    patterns = [key for keys, _ in rows for key in keys]
    runs = logged(engine, tmp_path)
    every = set().union(*runs.values())
    unlisted = sorted(k for k in every if not any(fnmatch.fnmatchcase(k, p) for p in patterns))
    assert not unlisted, f"logged but not in docs/engines/{engine}.md: {unlisted}"
    base = next(iter(runs.values()))
    always = [key for keys, when in rows if when == "always" for key in keys]
    missing = [p for p in always if not any(fnmatch.fnmatchcase(k, p) for k in base)]
    assert not missing, f"docs/engines/{engine}.md says always, the run did not log: {missing}"
    listed_never_seen = [p for p in patterns if "*" not in p and not any(fnmatch.fnmatchcase(k, p) for k in every)]
    assert set(listed_never_seen) <= {"Memory/peak_vram_mib"}, listed_never_seen  # CUDA only
