"""PPOLagSem's semantic side on CUDA (PPOLagSem design §15.2, §15.3, §26.3). UNVERIFIED: written on a machine
without a GPU; the CPU halves of the same paths run in tests/semantic.

* §15.3 precision matrix: a bf16 model on cuda with a cuda host keeps embeddings and centroids in bf16
  on the GPU; with a cpu host they arrive as float32 on the CPU.
* The float32 risk head trains on the GPU from bf16 embeddings.
* A real CUDA out-of-memory (a per-process memory cap) is backed off by halving the batch, and the
  embeddings equal those of an uncapped run.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: the semantic model's "
                                                             "cuda paths need a GPU"),
]


def _config(model_dir, **overrides):
    from rlspec.semantics.config import SemanticConfig

    base = dict(enable=True, model_name=str(model_dir), model_device="cuda:0", risk_enable=True,
                risk_min_samples=8)
    return SemanticConfig(**{**base, **overrides})


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    from rlspec.semantics.tiny import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("tiny-clip"))


@pytest.mark.parametrize("host", ["cuda:0", "cpu"])
def test_precision_matrix(clip_dir, host):
    from rlspec.semantics.manager import SemanticManager

    manager = SemanticManager(_config(clip_dir, host_device=host), num_envs=4, gamma=0.99, total_steps=100)
    assert manager.report.status == "ok_st_bfloat16" and manager.report.device_status == "ok"
    assert manager.backend.device.type == "cuda"
    frames = np.random.default_rng(0).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
    e, _ = manager.embed(frames)
    want = (torch.bfloat16, "cuda") if host.startswith("cuda") else (torch.float32, "cpu")
    assert (e.dtype, e.device.type) == want and (manager.mu_safe.dtype, manager.mu_safe.device.type) == want
    shaped, raw, _ = manager.shape(torch.zeros(4, device=host), 0, e, torch.ones(4, dtype=torch.bool, device=host))
    assert shaped.device.type == want[1] and torch.isfinite(raw).all()


def test_float32_risk_head_on_bf16_embeddings(clip_dir):
    from rlspec.semantics.hooks import PPOLagSemHooks

    hooks = PPOLagSemHooks(_config(clip_dir, host_device="cuda:0"), num_envs=4, gamma=0.99, total_steps=100, seed=0)
    frames = np.random.default_rng(1).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
    for k in range(4):
        hooks.shape_rewards(4 * k, torch.zeros(4), torch.ones(4), torch.zeros(4, dtype=torch.bool), frames)
    logs = hooks.after_update()
    assert logs["Risk/TrainStatusCode"] == 0 and logs["Risk/TrainSamples"] == 16
    assert next(hooks.risk.head.parameters()).dtype == torch.float32
    assert next(hooks.risk.head.parameters()).device.type == "cuda"


def test_real_cuda_oom_is_backed_off(tmp_path):
    """224×224 frames, patch 8: 785 tokens. The cap is set from measured peaks, halfway between what a batch of
    16 and a batch of 64 allocate, so 64 runs out of memory while 16 fit whatever attention kernel the installed
    transformers picks (an SDPA kernel does not hold the 785 × 785 attention matrix)."""
    from rlspec.semantics.manager import SemanticManager
    from rlspec.semantics.tiny import save_tiny_clip

    model_dir = save_tiny_clip(tmp_path / "clip224", image_size=224, patch_size=8)
    frames = np.random.default_rng(2).integers(0, 256, (64, 224, 224, 3), dtype=np.uint8)
    cfg = _config(model_dir, dtype_preference=("float32",), host_device="cuda:0", risk_enable=False)
    uncapped = SemanticManager(cfg, num_envs=64, gamma=0.99, total_steps=1)
    manager = SemanticManager(cfg, num_envs=64, gamma=0.99, total_steps=1)

    def peak(n: int) -> int:  # bytes allocated at the peak of embedding n frames, above what is held before
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        uncapped.embed(frames[:n])
        return torch.cuda.max_memory_allocated() - held

    small, full = peak(16), peak(64)
    assert full > 2 * small, f"peak bytes: 16 frames {small}, 64 frames {full}"
    want, _ = uncapped.embed(frames)
    torch.cuda.empty_cache()
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_allocated() + (small + full) // 2) / total)
    try:
        got, _ = manager.embed(frames)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert manager.oom_backoffs >= 1 and manager.batch_cap < 64
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
