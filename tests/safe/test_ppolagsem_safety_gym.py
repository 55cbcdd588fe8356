"""PPOLagSem smoke run on SafetyPointGoal1-v0: MuJoCo frames rendered headless on capture steps
(capture_interval 4), embedded by the tiny random CLIP on the CPU, rewards shaped while β > 0, the risk head
trained and every semantic key logged. The tiny CLIP has random weights: this checks the machinery, never
semantic quality. Needs safety_gymnasium, MUJOCO_GL=egl or osmesa, and transformers (the `safety` extra)."""

from __future__ import annotations

import json
import math
import os

import pytest

from rlspec.envs.safety_gym import import_safety_gymnasium

try:
    import_safety_gymnasium()
except ModuleNotFoundError as err:
    pytest.skip(f"safety_gymnasium is not installed: {err}", allow_module_level=True)
pytest.importorskip("transformers")
if os.environ.get("MUJOCO_GL") not in ("egl", "osmesa"):
    pytest.skip("headless MuJoCo rendering needs MUJOCO_GL=egl or osmesa (nox -s safety sets egl)",
                allow_module_level=True)
os.environ["HF_HUB_OFFLINE"] = "1"

from rlspec.engines import safe  # noqa: E402
from rlspec.runs.rundir import read_metrics  # noqa: E402
from rlspec.semantics import telemetry  # noqa: E402
from rlspec.semantics.tiny import save_tiny_clip  # noqa: E402


def test_ppolagsem_smoke_on_rendered_frames(tmp_path):
    clip = save_tiny_clip(tmp_path / "clip")
    # one env, 1000-step epochs (one episode each); β reaches 0 at half the run, i.e. at the second epoch
    cfg = safe.build_config(overrides=[
        "algo=PPOLagSem", "env_id=SafetyPointGoal1-v0", "num_envs=1", "total_steps=2000", "steps_per_epoch=1000",
        "ppo.update_iters=2", "ppo.batch_size=500", "frame_size=64", "semantic.enable=true",
        f"semantic.model_name={clip}", "semantic.model_device=cpu", "semantic.dtype_preference=float32",
        "semantic.shaping_enable=true", "semantic.capture_interval=4", "semantic.risk_enable=true",
        "semantic.risk_min_samples=32"])
    run = safe.run(cfg, tmp_path / "run", show_progress=False)
    rows = read_metrics(run)
    assert len(rows) == 2 and set(telemetry.keys(cfg.semantic)) <= set(rows[0])
    assert [r["Semantics/CaptureCount"] for r in rows] == [250, 500]  # every 4th of 1000 steps per epoch
    assert [r["Semantics/FailSoftEvents"] for r in rows] == [0, 0]  # every frame rendered and embedded
    assert [r["Semantics/EmbedSuccessRate"] for r in rows] == [1, 1]
    assert [r["Semantics/Debug/ClipStatus"] for r in rows] == [1, 1]  # ok_st_float32
    assert rows[0]["Semantics/ShapingRewardRatio"] != 0 and rows[1]["Semantics/ShapingRewardRatio"] == 0
    assert rows[1]["Semantics/Beta"] == 0 and rows[1]["Risk/TrainStatusCode"] == 0  # the head trained
    assert all(math.isfinite(r[k]) for r in rows for k in ("Risk/Loss", "Loss/Loss_pi", "Metrics/EpRet"))
    assert json.loads((run / "semantics.json").read_text())["status"] == "ok_st_float32"
