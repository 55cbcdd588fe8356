"""On CUDA, the fast ``world_model`` twin (fast RSSM, fast two-hot, packed2 per unpack_impl) embeds as on the
CPU, and its encoder gives bit-identical embeddings for every unpack_impl (lut, triton,
warp) on device tensors; a train step's loss and gradients are finite.

Written without a GPU at hand: unverified until ``nox -s gpu_gate`` runs on a CUDA machine."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rlspec.contracts.world_model import UNPACK_IMPLS, WorldModelConfig
from rlspec.fast.world_model import WorldModel as Fast
from rlspec.spec.world_model import make_batch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]

CONFIG = WorldModelConfig(num_actions=3, deter=32, stoch=4, classes=4, hidden=32, embed_dim=16, pool=4,
                          reward_bins=41)


def _model(config: WorldModelConfig, device: str) -> Fast:
    return Fast(config, torch.Generator().manual_seed(0)).to(device)


def test_cuda_step_is_finite_and_embeds_as_on_cpu():
    batch = make_batch(CONFIG, 6, 2, seed=0)
    cpu, gpu = _model(CONFIG, "cpu"), _model(CONFIG, "cuda")
    cuda_batch = {k: v.cuda() for k, v in batch.items()}
    torch.testing.assert_close(gpu.embed(cuda_batch["obs"]).cpu(), cpu.embed(batch["obs"]), rtol=1e-5, atol=1e-5)
    # the sampler draws from the CUDA generator: the latents differ from the CPU run's, the loss is not compared
    loss, metrics, out = gpu.world_model_loss(cuda_batch, torch.Generator("cuda").manual_seed(1))
    loss.backward()
    assert torch.isfinite(loss) and out.h.is_cuda and all(torch.isfinite(v) for v in metrics.values())
    assert all(p.grad is not None and bool(p.grad.isfinite().all()) for p in gpu.parameters())


@pytest.mark.parametrize("unpack_impl", UNPACK_IMPLS)
def test_embed_identical_for_every_unpack_impl(unpack_impl):
    obs = make_batch(CONFIG, 6, 2, seed=0)["obs"].cuda()
    lut = _model(CONFIG, "cuda")
    other = _model(dataclasses.replace(CONFIG, unpack_impl=unpack_impl), "cuda")
    assert torch.equal(other.embed(obs), lut.embed(obs))
