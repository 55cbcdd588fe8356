"""fast/onehot.py: a Linear over the features f = [h; flatten(z)] of an exactly one-hot z, computed from z's
class indices (gather-sum of weight columns, index_add_ weight gradient), against the dense F.linear on the
built one-hot; the fast RSSM's img_step on indices against its one-hot img_step; the fast kit's actor, critic
and heads reading Features with the reference kit's parameters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from rlspec.algos import dreamer as core
from rlspec.contracts.rssm import RSSMConfig
from rlspec.fast import onehot
from rlspec.fast.rssm import RSSM
from rlspec.reference.rssm import RSSM as Reference


def _case(lead: tuple, H: int, S: int, K: int, out: int, dtype: torch.dtype, seed: int):
    """(Features, weight [out, H+S·K], bias [out]) random, weight and bias leaves requiring grad."""
    g = torch.Generator().manual_seed(seed)
    f = onehot.Features(torch.randn(*lead, H, generator=g, dtype=dtype),
                        torch.randint(0, K, (*lead, S), generator=g), K)
    weight = torch.randn(out, H + S * K, generator=g, dtype=dtype).requires_grad_()
    bias = torch.randn(out, generator=g, dtype=dtype).requires_grad_()
    return f, weight, bias


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lead,H,S,K,out", [((7,), 5, 2, 3, 4), ((3, 5), 8, 4, 6, 9), ((2, 3, 4), 16, 16, 16, 32),
                                            ((33,), 3, 32, 32, 7), ((4,), 6, 1, 5, 1)])
def test_linear_of_features_equals_dense_linear_forward_and_gradients(dtype, lead, H, S, K, out):
    f, weight, bias = _case(lead, H, S, K, out, dtype, seed=S * 100 + K)
    dense = f.dense()  # [..., H + S·K]
    assert dense.shape == (*lead, H + S * K) and f.lead_shape == lead and f.feature_dim == H + S * K
    assert torch.equal(dense[..., H:].unflatten(-1, (S, K)).argmax(-1), f.idx)
    y = onehot.linear(f, weight, bias)
    want = F.linear(dense, weight, bias)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y, want, **tol)
    grad_out = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=dtype)
    got = torch.autograd.grad(y, (weight, bias), grad_out)
    expected = torch.autograd.grad(want, (weight, bias), grad_out)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, **tol)


def test_h_gradient_flows_and_the_indices_carry_none():
    f, weight, bias = _case((5,), 4, 3, 3, 2, torch.float64, seed=3)
    h = f.h.clone().requires_grad_()
    y = onehot.linear(onehot.Features(h, f.idx, 3), weight, bias)
    (grad_h,) = torch.autograd.grad(y.sum(), h)
    torch.testing.assert_close(grad_h, weight[:, :4].sum(0).detach().expand(5, 4))
    assert not f.detach().h.requires_grad and f.detach().idx is f.idx


def test_group_offsets_matter():
    """Planted bug: dropping the per-latent offsets s·K (all latents reading the first group's columns) must
    give other values than the dense product; with S >= 2 the real gather matches it."""
    f, weight, _ = _case((64,), 2, 4, 5, 3, torch.float64, seed=4)
    want = F.linear(f.dense()[..., 2:], weight[:, 2:])
    torch.testing.assert_close(onehot.onehot_matmul(f.idx, weight[:, 2:], 5), want)
    no_offsets = F.embedding_bag(f.idx, weight[:, 2:].t().contiguous(), mode="sum")
    assert (no_offsets - want).abs().max() > 1e-3


def test_indices_of_a_one_hot_z_and_features_from_it():
    g = torch.Generator().manual_seed(5)
    idx = torch.randint(0, 7, (3, 4, 6), generator=g)
    z = F.one_hot(idx, 7).float().requires_grad_()
    assert torch.equal(onehot.indices(z.detach()), idx)
    h = torch.randn(3, 4, 10, generator=g)
    f = onehot.features(h, z)
    assert torch.equal(f.idx, idx) and f.classes == 7
    torch.testing.assert_close(f.dense(), torch.cat((h, z.detach().flatten(-2)), -1), rtol=0, atol=0)


def test_feature_linear_is_an_nn_linear_with_its_parameters():
    lin = onehot.FeatureLinear(10, 3, bias=False)
    assert isinstance(lin, nn.Linear) and list(lin.state_dict()) == ["weight"]
    f, _, _ = _case((6,), 4, 2, 3, 3, torch.float32, seed=6)
    torch.testing.assert_close(lin(f), F.linear(f.dense(), lin.weight))
    x = torch.randn(6, 10)
    assert torch.equal(lin(x), F.linear(x, lin.weight))


@pytest.mark.parametrize("bad,says", [
    (lambda: onehot.Features(torch.zeros(2, 3), torch.zeros(2, 4), 5), "'idx' has dtype torch.float32"),
    (lambda: onehot.Features(torch.zeros(2, 3), torch.zeros(3, 4, dtype=torch.int64), 5), "leading shapes"),
    (lambda: onehot.linear(onehot.Features(torch.zeros(2, 3), torch.zeros(2, 2, dtype=torch.int64), 4),
                           torch.zeros(5, 10)), "dimension 11"),
])
def test_bad_features_are_named(bad, says):
    with pytest.raises((TypeError, ValueError), match=says):
        bad()


def test_fast_rssm_img_step_on_indices_equals_img_step_on_the_one_hot():
    cfg = RSSMConfig(num_actions=3, deter=12, stoch=4, classes=5, hidden=10, embed_dim=6)
    rssm = RSSM(cfg, torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(8)
    h = torch.randn(9, 12, generator=g)
    idx = torch.randint(0, 5, (9, 4), generator=g)
    action = torch.randint(0, 3, (9,), generator=g)
    want = rssm.img_step(h, F.one_hot(idx, 5).float(), action, torch.Generator().manual_seed(9))
    got = rssm.img_step(h, idx, action, torch.Generator().manual_seed(9))
    for a, b in zip(got[:2], want[:2]):  # prior, h'
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert got[2].dtype == torch.int64 and torch.equal(F.one_hot(got[2], 5).float(), want[2])  # z' as indices


def test_sample_index_is_the_reference_sample_on_every_cdf_edge(monkeypatch):
    """u on and around every cdf value (the inverse CDF's ties and its last-class clamp) in place of the
    generator's draw: the indices are those of the reference's one-hot sample."""
    rssm = RSSM(RSSMConfig(num_actions=2, deter=4, stoch=3, classes=4, hidden=4, embed_dim=2))
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0)) * 3
    short = x[x.softmax(-1).cumsum(-1)[:, -1] < 1][0]  # a cdf ending below 1: u above it takes the clamp to K − 1
    logits = torch.stack((torch.tensor([0.25, 0.25, 0.25, 0.25]).log(), torch.tensor([0.0, 0.5, 0.0, 0.5]).log(),
                          short)).expand(2, 3, 4)  # [B, S, K]: ties, empty classes, the short cdf
    cdf = logits[0].softmax(-1).cumsum(-1)  # [S, K]
    edges = torch.cat((cdf, cdf.nextafter(torch.zeros(())), cdf.nextafter(torch.ones(())), torch.zeros(3, 1),
                       torch.ones(3, 1)), 1)  # [S, 14] values of u per latent
    g = torch.Generator()
    for col in range(edges.shape[1]):
        u = edges[:, col].expand(2, 3)  # [B, S]
        monkeypatch.setattr(torch, "rand", lambda shape, generator=None, device=None, u=u: u.clone())
        want = Reference._sample(rssm, logits, g)
        got = rssm._sample_index(logits, g)
        assert torch.equal(F.one_hot(got, 4).float(), want), (col, u[0], got[0], want[0].argmax(-1))


def test_fast_kit_reads_features_with_the_reference_kit_parameters():
    """The fast kit's actor, critic and heads are built with FeatureLinear: the reference kit's state_dict
    (same keys, same values from one seed), and on Features the outputs of the dense features."""
    cfg = core.DreamerConfig(deter=16, stoch=4, classes=4, hidden=16, embed_dim=16, pool=8, mlp_hidden=16,
                             mlp_layers=1, horizon=3, batch_size=2, seq_len=5)
    ref, fast = (core.make_state(cfg, 5, core.Kit.named(k), torch.Generator().manual_seed(0))
                 for k in ("reference", "fast"))
    for part in ("actor", "critic", "slow_critic"):
        a, b = getattr(ref, part).state_dict(), getattr(fast, part).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert isinstance(fast.actor.body[0], onehot.FeatureLinear)
    assert isinstance(fast.wm.reward_head.inp, onehot.FeatureLinear)
    assert type(ref.actor.body[0]) is nn.Linear and type(ref.wm.reward_head.inp) is nn.Linear
    g = torch.Generator().manual_seed(1)
    f = onehot.Features(torch.randn(3, 7, 16, generator=g), torch.randint(0, 4, (3, 7, 4), generator=g), 4)
    with torch.no_grad():
        fast.wm.reward_head.out.weight.normal_(generator=g)  # the zeroed output layers made non-zero
        fast.critic.out.weight.normal_(generator=g)
    for module in (fast.actor, fast.critic, fast.wm.reward_head, fast.wm.continue_head):
        torch.testing.assert_close(module(f), module(f.dense()))
