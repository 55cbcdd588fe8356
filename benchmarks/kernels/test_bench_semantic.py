"""PPOLagSem spatial batching (PPOLagSem design §26, §18.1): embedding one frame per env for 8 envs in one
forward ("fast-batched", batch_across_envs with batch_max 8) vs one forward per frame ("per-frame"),
through the same SemanticManager.embed (processor + model + host copy), with the tiny random CLIP in
float32. The speedup is what batching buys the capture step; the engine-level overhead (env steps/s at
capture_interval 1 and 20 vs PPOLag) is benchmarks/semantics/overhead.py."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytestmark = pytest.mark.bench

ENVS = 8


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    from rlspec.semantics.tiny import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("bench-clip"))


@pytest.mark.parametrize("impl", ["per-frame", "fast-batched"], indirect=True)
def test_embed_8_envs(check_and_time, device, impl, tiny_clip):
    from rlspec.semantics.config import SemanticConfig
    from rlspec.semantics.manager import SemanticManager

    cfg = SemanticConfig(enable=True, model_name=str(tiny_clip), model_device=device, host_device=device,
                         dtype_preference=("float32",), batch_max=ENVS if impl == "fast-batched" else 1)
    manager = SemanticManager(cfg, num_envs=ENVS, gamma=0.99, total_steps=1)
    frames = np.random.default_rng(0).integers(0, 256, (ENVS, 64, 64, 3), dtype=np.uint8)  # rendered at 64×64
    reference = SemanticManager(cfg.__class__(**{**cfg.to_dict(), "batch_max": ENVS}), ENVS, 0.99, 1)
    check_and_time(f"semantic.embed[{ENVS} envs, tiny CLIP]", lambda: manager.embed(frames)[0],
                   reference.embed(frames)[0])
