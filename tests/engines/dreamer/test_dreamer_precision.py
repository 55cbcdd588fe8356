"""dreamer.precision=bf16-mixed: the learner's forward passes under bfloat16 autocast, parameters and optimizer
states in float32. On one batch from the same parameters its world-model losses stay within TOLERANCE of fp32's
(the documented tolerance), with both kits and both encoders; a run trains and stays finite in both executions;
a bad value is refused naming the key."""

from __future__ import annotations

import math

import pytest
import torch
from test_dreamer_engine import TINY

from rlspec import cli
from rlspec.algos.dreamer import Kit, make_state, train_step
from rlspec.engines import dreamer
from rlspec.runs.rundir import read_metrics
from rlspec.spec import world_model as wm_spec

TOLERANCE = 0.02  # relative, per world-model loss term, first update (bfloat16 keeps 8 bits of mantissa)
WORLD_MODEL = ("Loss/loss", "Loss/recon_loss", "Loss/reward_loss", "Loss/continue_loss", "Loss/kl_loss")
CONV = ["dreamer.encoder=conv", "dreamer.frame=16,16", "dreamer.pool=1", "dreamer.cnn_stages=2", "dreamer.cnn_mult=2"]


def first_update(kit: str, precision: str, encoder: list[str]) -> tuple[dict, dict]:
    cfg = dreamer.build_config(overrides=[*TINY, *encoder, f"dreamer.precision={precision}"])
    state = make_state(cfg.dreamer, 5, getattr(Kit, kit)(), torch.Generator().manual_seed(0))
    batch = wm_spec.make_batch(state.wm.config, 8, 2, 0)
    metrics = train_step(state, batch, torch.Generator().manual_seed(1))
    return metrics, {n: p.dtype for n, p in state.wm.named_parameters()}


@pytest.mark.parametrize("kit", ["reference", "fast"])
@pytest.mark.parametrize("encoder", [[], CONV], ids=["mlp", "conv"])
def test_bf16_mixed_world_model_losses_within_tolerance_of_fp32(kit, encoder):
    want, _ = first_update(kit, "fp32", encoder)
    got, dtypes = first_update(kit, "bf16-mixed", encoder)
    assert set(dtypes.values()) == {torch.float32}  # mixed: the parameters stay float32
    assert all(v.dtype == torch.float32 and math.isfinite(float(v)) for v in got.values())
    for key in WORLD_MODEL:
        assert float(got[key]) == pytest.approx(float(want[key]), rel=TOLERANCE), key
    assert any(float(got[k]) != float(want[k]) for k in WORLD_MODEL)  # autocast really ran in bfloat16


@pytest.mark.parametrize("execution", [["execution=local"],
                                       ["execution=device", "device=cpu", "commit_stride=2", "steps_per_rollout=2",
                                        "sync_every=2"]], ids=["local", "device"])
def test_a_bf16_mixed_run_trains_and_stays_finite(tmp_path, execution):
    sets = [*TINY, *execution, "dreamer.precision=bf16-mixed"]
    assert cli.main(["train", "dreamer", "--quiet", "--out", str(tmp_path / "r"),
                     *[a for kv in sets for a in ("--set", kv)]]) == 0
    rows = [r for r in read_metrics(tmp_path / "r") if float(r["Train/updates"]) > 0]
    assert rows and all(math.isfinite(float(r[k])) for r in rows for k in ("Loss/loss", "Loss/actor_loss"))


def test_a_bad_precision_is_refused_naming_the_key(tmp_path, capsys):
    code = cli.main(["train", "dreamer", "--out", str(tmp_path / "r"), "--set", "dreamer.precision=fp16"])
    assert code == 2 and "'dreamer.precision': expected one of ['fp32', 'bf16-mixed'], got 'fp16'" in \
        capsys.readouterr().err
