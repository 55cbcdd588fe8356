"""world_model benchmarks (Dreamer plan M4), one run, float32. Reported, never asserted.

* ``world_model.train_step`` — one world-model train step (loss, backward, Adam step) of the reference and
  the fast twin (fast RSSM, fast two-hot, LUT unpack), same parameters and generator, on a replay batch of
  B 8 × T 16 packed2 frames at a reduced DreamerV3 size (H 128, hidden 128, S = K = 16, E 128, pool 4:
  18 × 20 pixels reconstructed). The comparison with sheeprl 0.8.4 at an identical configuration is not
  here yet.
* ``world_model.embed[unpack_impl]`` — the encoder alone (unpack + normalize + pool + MLP) on B 16 × T 64
  frames, per unpack_impl the fast twin supports on this device (Triton only on CUDA: interpreted on CPU).
"""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.world_model import WorldModelConfig
from rlspec.fast.world_model import WorldModel as Fast
from rlspec.reference import packed2
from rlspec.reference.world_model import WorldModel as Reference

pytestmark = pytest.mark.bench

SIZE = dict(num_actions=6, deter=128, stoch=16, classes=16, hidden=128, embed_dim=128, pool=4)
UNPACK = {"fast-torch": "lut", "fast-triton": "triton", "fast-warp": "warp"}


def _batch(T: int, B: int, device: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0] = True
    batch = dict(obs=packed2.pack(torch.randint(0, 4, (T, B, 1, 72, 80), generator=g, dtype=torch.uint8)),
                 action=torch.randint(0, SIZE["num_actions"], (T, B), generator=g, dtype=torch.int32),
                 reward=torch.randn(T, B, generator=g), is_first=is_first, **{"continue": torch.ones(T, B)})
    return {k: v.to(device) for k, v in batch.items()}


def _model(cls, device: str, **overrides):
    model = cls(WorldModelConfig(**SIZE, **overrides), torch.Generator().manual_seed(1))
    return model.to(device)


def _train_step(model, batch, device: str):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        loss, _, _ = model.world_model_loss(batch, torch.Generator(device).manual_seed(2))
        loss.backward()
        opt.step()
        return loss.detach()

    return step


@pytest.mark.parametrize("impl", ["reference", "fast-torch"], indirect=True)
def test_train_step(check_and_time, device, impl):
    batch = _batch(16, 8, device)
    model = _model(Reference if impl == "reference" else Fast, device)
    expected = _train_step(_model(Fast, device), batch, device)()
    check_and_time("world_model.train_step[B8×T16, H128, S16×K16]", _train_step(model, batch, device), expected)


@pytest.mark.parametrize("impl", ["fast-torch", "fast-triton", "fast-warp"], indirect=True)
def test_embed(check_and_time, device, impl):
    obs = _batch(64, 16, device)["obs"]
    model = _model(Fast, device, unpack_impl=UNPACK[impl])
    with torch.no_grad():
        expected = _model(Fast, device).embed(obs)
        check_and_time("world_model.embed[B16×T64, pool 4]", lambda: model.embed(obs), expected)
