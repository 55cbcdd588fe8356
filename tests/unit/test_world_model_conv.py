"""The world model's conv option (encoder='conv': sheeprl 0.8.4's CNNEncoder / CNNDecoder): the input
geometry (centered crop, pooling), shapes and layer layout at sheeprl's 64 × 64, the decoder against a float64
closed form, gradients, initialization from the caller's generator, config validation, and one Dreamer
train_step of each kit with it. The contract clauses (spec/world_model.py) draw conv configs too."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from rlspec.algos import dreamer
from rlspec.contracts.world_model import CONV_64, WorldModelConfig
from rlspec.fast.world_model import WorldModel as Fast
from rlspec.reference import packed2
from rlspec.reference.world_model import WorldModel as Reference

SIZES = dict(deter=16, stoch=4, classes=4, hidden=16, reward_bins=15)


def conv64(**fields) -> WorldModelConfig:
    return WorldModelConfig.conv(3, **{**SIZES, "cnn_mult": 2, **fields})


def obs_of(values: torch.Tensor) -> torch.Tensor:
    """[T, B, 72, 80] codes 0..3 -> packed2 obs [T, B, 1, 72, 20]."""
    return packed2.pack(values.unsqueeze(2).to(torch.uint8))


def test_sheeprl_geometry_shapes_and_layers():
    c = conv64(cnn_mult=8)
    assert (c.frame, c.pool, c.cnn_stages, c.crop_offset, c.pooled_shape) == ((64, 64), 1, 4, (4, 8), (64, 64))
    assert c.cnn_channels == (8, 16, 32, 64) and c.conv_latent_shape == (64, 4, 4) and c.embed_dim == 1024
    m = Reference(c, torch.Generator().manual_seed(0))
    # sheeprl CNNEncoder: Conv2d(k4, s2, p1, bias=False) + LayerNorm(C, eps 1e-3) per stage
    assert [tuple(conv.weight.shape) for conv in m.encoder.convs] == [(8, 1, 4, 4), (16, 8, 4, 4), (32, 16, 4, 4),
                                                                      (64, 32, 4, 4)]
    assert all(conv.bias is None and conv.stride == (2, 2) and conv.padding == (1, 1) for conv in m.encoder.convs)
    assert [n.normalized_shape for n in m.encoder.norms] == [(8,), (16,), (32,), (64,)]
    assert all(n.eps == 1e-3 for n in (*m.encoder.norms, *m.decoder.norms))
    # sheeprl CNNDecoder: Linear(F, 1024) with bias, 3 × ConvTranspose2d without bias + LN, last one with bias
    assert tuple(m.decoder.inp.weight.shape) == (1024, c.feature_dim) and m.decoder.inp.bias is not None
    assert [tuple(d.weight.shape) for d in m.decoder.deconvs] == [(64, 32, 4, 4), (32, 16, 4, 4), (16, 8, 4, 4),
                                                                  (8, 1, 4, 4)]
    assert [d.bias is not None for d in m.decoder.deconvs] == [False, False, False, True]
    obs = obs_of(torch.randint(0, 4, (3, 2, 72, 80), generator=torch.Generator().manual_seed(1)))
    assert m.embed(obs).shape == (3, 2, 1024)
    recon, reward, cont = m.heads(torch.zeros(3, 2, c.feature_dim))
    assert recon.shape == (3, 2, 64 * 64) and reward.shape == (3, 2, 15) and cont.shape == (3, 2)


def test_frames_are_the_centered_crop_pooled():
    g = torch.Generator().manual_seed(2)
    values = torch.randint(0, 4, (2, 1, 72, 80), generator=g)
    for fields, (top, left, h, w, pool) in ((dict(frame=(64, 64), pool=1), (4, 8, 64, 64, 1)),
                                            (dict(frame=(32, 48), pool=2), (20, 16, 32, 48, 2))):
        m = Reference(conv64(**fields, cnn_stages=2))
        want = F.avg_pool2d(values[..., top:top + h, left:left + w].double().flatten(0, 1).unsqueeze(1) / 3, pool)
        torch.testing.assert_close(m.frames(obs_of(values)).double(), want.reshape(2, 1, -1), rtol=0, atol=1e-7)


def _ln_channels64(x, w, b):
    return F.layer_norm(x.movedim(1, -1), w.shape, w.double(), b.double(), 1e-3).movedim(-1, 1)


def test_decoder_is_the_float64_closed_form():
    c = conv64(frame=(32, 48), pool=2, cnn_stages=2, cnn_mult=3)
    m = Reference(c, torch.Generator().manual_seed(3))
    sd = {k: v.double() for k, v in m.state_dict().items()}
    f = torch.randn(2, 3, c.feature_dim, generator=torch.Generator().manual_seed(4))  # [T, B, F]
    y = (f.double() @ sd["decoder.inp.weight"].T + sd["decoder.inp.bias"]).reshape(6, 6, 4, 6)  # [N, 2·3, 16/4, 24/4]
    y = F.silu(_ln_channels64(F.conv_transpose2d(y, sd["decoder.deconvs.0.weight"], stride=2, padding=1),
                              sd["decoder.norms.0.weight"], sd["decoder.norms.0.bias"]))  # [N, 3, 8, 12]
    y = F.conv_transpose2d(y, sd["decoder.deconvs.1.weight"], sd["decoder.deconvs.1.bias"], stride=2, padding=1)
    torch.testing.assert_close(m.decoder(f).double(), y.reshape(2, 3, 16 * 24), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", [Reference, Fast])
def test_every_conv_parameter_gets_a_finite_nonzero_gradient(impl):
    c = dataclasses.replace(conv64(), free_bits=0.0)
    m = impl(c)
    m.load_state_dict(Reference(c, torch.Generator().manual_seed(5)).state_dict())
    g = torch.Generator().manual_seed(6)
    T, B = 3, 2
    batch = dict(obs=obs_of(torch.randint(0, 4, (T, B, 72, 80), generator=g)),
                 action=torch.randint(0, 3, (T, B), generator=g), reward=torch.randn(T, B, generator=g),
                 is_first=torch.zeros(T, B, dtype=torch.bool), **{"continue": torch.ones(T, B)})
    loss, metrics, _ = m.world_model_loss(batch, torch.Generator().manual_seed(7))
    loss.backward()
    for name, p in m.named_parameters():
        if name.startswith(("encoder", "decoder")):
            assert p.grad is not None and p.grad.isfinite().all() and p.grad.ne(0).any(), name


def test_conv_build_draws_from_the_generator_only():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = (Reference(conv64(), torch.Generator().manual_seed(8)) for _ in range(2))
    other = Reference(conv64(), torch.Generator().manual_seed(9))
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    assert not torch.equal(a.encoder.convs[0].weight, other.encoder.convs[0].weight)
    w = a.encoder.convs[1].weight  # fan_in = 2·4·4: U(−1/√32, 1/√32)
    assert w.abs().max() <= 32**-0.5 and w.abs().max() > 0.5 * 32**-0.5


@pytest.mark.parametrize("fields, says", [
    (dict(encoder="cnn"), "('mlp', 'conv')"),
    (dict(frame=(80, 64)), "1..72 × 1..80"),
    (dict(frame=64), "pair of ints"),
    (dict(frame=(64, 64), pool=3), "'pool' must divide the frame 64 × 64"),
    (dict(frame=(72, 80), pool=1, cnn_stages=4), "multiples of 2^4 = 16, got 72 × 80"),
    (dict(embed_dim=100), "flattened output 1024"),
    (dict(cnn_mult=1), "'cnn_mult'"),
])
def test_bad_conv_config_names_the_field(fields, says):
    base = dict(num_actions=2, **SIZES, **CONV_64, cnn_mult=8, embed_dim=1024)
    with pytest.raises((ValueError, TypeError)) as err:
        WorldModelConfig(**{**base, **fields})
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize("kit", dreamer.KITS)
def test_dreamer_train_step_with_the_conv_encoder(kit):
    cfg = dreamer.DreamerConfig(deter=16, stoch=4, classes=4, hidden=16, mlp_hidden=16, mlp_layers=1,
                                encoder="conv", frame=(32, 32), pool=2, cnn_mult=2, cnn_stages=2, horizon=3,
                                batch_size=2, seq_len=3)
    assert dreamer.world_model_config(cfg, 3).embed_dim == 4 * 4 * 4  # [2·2, 16/4, 16/4]
    state = dreamer.make_state(cfg, 3, dreamer.Kit.named(kit), torch.Generator().manual_seed(10))
    g = torch.Generator().manual_seed(11)
    batch = dict(obs=obs_of(torch.randint(0, 4, (3, 2, 72, 80), generator=g)),
                 action=torch.randint(0, 3, (3, 2), generator=g), reward=torch.randn(3, 2, generator=g),
                 is_first=torch.tensor([[True, True], [False, False], [False, True]]),
                 **{"continue": torch.ones(3, 2)})
    before = state.wm.encoder.convs[0].weight.clone()
    metrics = dreamer.train_step(state, batch, g)
    assert all(v.isfinite().all() for v in metrics.values())
    assert not torch.equal(before, state.wm.encoder.convs[0].weight)


def test_fast_twin_runs_the_convs_channels_last_with_the_reference_values():
    c = conv64(frame=(32, 48), pool=2, cnn_stages=2, cnn_mult=3)
    ref = Reference(c, torch.Generator().manual_seed(12))
    fast = Fast(c)
    fast.load_state_dict(ref.state_dict())
    assert fast.encoder.convs[1].weight.is_contiguous(memory_format=torch.channels_last)
    assert fast.decoder.deconvs[0].weight.is_contiguous(memory_format=torch.channels_last)
    obs = obs_of(torch.randint(0, 4, (2, 3, 72, 80), generator=torch.Generator().manual_seed(13)))
    torch.testing.assert_close(fast.embed(obs), ref.embed(obs), rtol=1e-5, atol=1e-5)
    f = torch.randn(2, 3, c.feature_dim, generator=torch.Generator().manual_seed(14))
    torch.testing.assert_close(fast.decoder(f), ref.decoder(f), rtol=1e-5, atol=1e-5)
