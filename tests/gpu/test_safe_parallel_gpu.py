"""The safe engine's parallel execution with a GPU policy (``--set execution=parallel --set device=cuda``):
networks and updates on CUDA, envs on the host. The initial weights and the action noise come from the host
generator, so the CUDA run follows the CPU run up to floating-point rounding: the first epoch's episodes (taken
with the initial weights) agree, every later metric is finite, and the checkpoint evaluates on the host.

Written without a GPU at hand: unverified until ``nox -s gpu_gate`` runs on a CUDA machine."""

from __future__ import annotations

import math

import pytest
import torch

from rlspec.engines.safe import loop as safe
from rlspec.engines.safe import parallel
from rlspec.runs.rundir import read_metrics

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]

TINY = ["env_id=ToyGoal-v0", "total_steps=300", "steps_per_epoch=150", "num_envs=3", "ep_window=5",
        "ppo.update_iters=2", "ppo.batch_size=50", "forced_cost=0.3", "execution=parallel", "env_workers=0"]


@pytest.mark.parametrize("algo", ["PPOLag", "CPO"])
def test_gpu_policy_follows_the_host_run(tmp_path, algo):
    runs = {}
    for dev in ("cpu", "cuda"):
        cfg = safe.build_config(overrides=[f"algo={algo}", *TINY, f"device={dev}"])
        runs[dev] = read_metrics(safe.run(cfg, tmp_path / dev, show_progress=False,
                                          execution=parallel.execution(cfg)))
    cpu, gpu = runs["cpu"], runs["cuda"]
    assert len(cpu) == len(gpu) == 2
    for key in ("Metrics/EpRet", "Metrics/EpCost", "Metrics/EpLen"):  # epoch 1: the initial weights acted
        assert gpu[0][key] == pytest.approx(cpu[0][key], rel=1e-4, abs=1e-6), key
    for row in gpu:
        assert all(math.isfinite(row[k]) for k in ("Loss/Loss_pi", "Loss/Loss_reward_critic", "Train/KL"))
    assert gpu[-1]["Metrics/LagrangeMultiplier"] == pytest.approx(cpu[-1]["Metrics/LagrangeMultiplier"], rel=1e-3)
    ckpt = torch.load(tmp_path / "cuda/checkpoints/last.pt", map_location="cpu", weights_only=False)
    assert all(t.device.type == "cpu" for t in ckpt["actor"].values())  # loads and evaluates on the host
