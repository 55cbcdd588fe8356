"""dreamer.head_input=posterior (sheeprl's heads: the posterior of the frame each step arrives at, read from the
replay's final_obs): both executions train with it to the same rows, it changes what the heads learn from,
it needs replay_ends, and imagination hands its outputs to behaviour unshifted, as with "next"."""

from __future__ import annotations

import json

import torch
from test_dreamer_engine import TINY

from rlspec import cli
from rlspec.algos.dreamer import arrival_rows
from rlspec.engines import dreamer
from rlspec.runs.rundir import read_metrics

POSTERIOR = ["dreamer.head_input=posterior", "replay_ends=true"]
DETERMINISTIC = ["commit_stride=1", "steps_per_rollout=1", "sync_every=1", "device=cpu", "kit=reference"]


def _sets(*overrides: str) -> list[str]:
    return [a for kv in overrides for a in ("--set", kv)]


def test_both_executions_train_the_same_rows(tmp_path, capsys):
    code = cli.main(["compare", "dreamer", "--quiet", "--out", str(tmp_path / "cmp"), "--updates", "32",
                     *_sets(*TINY, *DETERMINISTIC, *POSTERIOR)])
    result = json.loads((tmp_path / "cmp/compare.json").read_text())
    assert code == 0 and result["deterministic"] and result["agree"] and result["rows"] == [6, 6]
    assert all(v == 0.0 for v in result["max_rel_diff_all"].values())


def test_the_heads_learn_from_another_input_than_next(tmp_path):
    runs = {}
    for name, extra in {"posterior": POSTERIOR, "next": ["dreamer.head_input=next", "replay_ends=true"]}.items():
        assert cli.main(["train", "dreamer", "--quiet", "--out", str(tmp_path / name), *_sets(*TINY, *extra)]) == 0
        runs[name] = read_metrics(tmp_path / name)
    trained = [(a, b) for a, b in zip(runs["posterior"], runs["next"]) if float(a["Train/updates"]) > 0]
    assert len(trained) >= 3 and all(a["step"] == b["step"] for a, b in trained)  # rows before: the prefill
    pairs = torch.tensor([[float(r[key]) for r in pair] for pair in trained for key in ("Loss/reward_loss",)])
    assert bool(torch.isfinite(pairs).all()) and bool((pairs[:, 0] != pairs[:, 1]).all())


def test_posterior_needs_replay_ends(tmp_path, capsys):
    code = cli.main(["train", "dreamer", "--out", str(tmp_path / "r"), *_sets(*TINY, "dreamer.head_input=posterior")])
    err = capsys.readouterr().err
    assert code == 2 and "config key 'replay_ends': expected true with dreamer.head_input posterior" in err
    assert not (tmp_path / "r").exists()


def test_imagination_rows_are_unshifted_as_for_next():
    reward, cont = torch.arange(12.0).reshape(4, 3), -torch.arange(12.0).reshape(4, 3)
    for a, b in zip(arrival_rows(reward, cont, "posterior"), arrival_rows(reward, cont, "next")):
        assert torch.equal(a, b)
    assert torch.equal(arrival_rows(reward, cont, "posterior")[0][1:], reward[1:])


def test_the_config_key_reaches_the_world_model():
    cfg = dreamer.build_config(overrides=[*TINY, *POSTERIOR])
    gen = torch.Generator().manual_seed(0)
    assert dreamer.build(cfg, gen).wm.config.head_input == "posterior"
