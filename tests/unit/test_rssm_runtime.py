"""Runtime half of ``rssm``: configuration validation, the shared parameter layout, initialization from an
explicit generator, and one state_dict loading into reference and fast."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.rssm import CLASSES, DETER, HIDDEN, LN_EPS, STOCH, UNIMIX, RSSMConfig, RSSMParameters
from rlspec.fast.rssm import RSSM as Fast
from rlspec.reference.rssm import RSSM as Reference


def test_defaults_are_sheeprl_xs():
    c = RSSMConfig(embed_dim=5, num_actions=3)
    assert (c.deter, c.stoch, c.classes, c.hidden) == (DETER, STOCH, CLASSES, HIDDEN) == (256, 32, 32, 256)
    assert (c.unimix, c.ln_eps, c.initial) == (UNIMIX, LN_EPS, "learned") == (0.01, 1e-3, "learned")


@pytest.mark.parametrize("field, value, says", [
    ("deter", 0, "int >= 1"), ("stoch", 2.0, "int >= 1"), ("classes", True, "int >= 1"),
    ("embed_dim", -1, "int >= 1"), ("num_actions", 0, "int >= 1"), ("hidden", None, "int >= 1"),
    ("unimix", 1.0, "[0.0, 1.0)"), ("unimix", -0.01, "[0.0, 1.0)"), ("ln_eps", 0.0, "(0.0, inf)"),
    ("initial", "random", "('learned', 'zeros')"),
])
def test_bad_config_names_the_field(field, value, says):
    kwargs = {**dict(embed_dim=4, num_actions=2), field: value}
    with pytest.raises((ValueError, TypeError)) as err:
        RSSMConfig(**kwargs)
    msg = str(err.value)
    assert f"'{field}'" in msg and repr(value) in msg and says in msg, msg


def test_parameter_layout():
    c = RSSMConfig(embed_dim=5, num_actions=3, deter=8, stoch=2, classes=3, hidden=4)
    shapes = {k: tuple(v.shape) for k, v in RSSMParameters(c).state_dict().items()}
    assert shapes == {
        "img_in.weight": (4, 6 + 3), "img_in_norm.weight": (4,), "img_in_norm.bias": (4,),
        "gru.weight": (24, 8 + 4), "gru_norm.weight": (24,), "gru_norm.bias": (24,),
        "prior_hidden.weight": (4, 8), "prior_norm.weight": (4,), "prior_norm.bias": (4,),
        "prior_out.weight": (6, 4), "prior_out.bias": (6,),
        "post_hidden.weight": (4, 8 + 5), "post_norm.weight": (4,), "post_norm.bias": (4,),
        "post_out.weight": (6, 4), "post_out.bias": (6,), "initial_h": (8,),
    }
    zeros = RSSMParameters(RSSMConfig(embed_dim=5, num_actions=3, deter=8, initial="zeros"))
    assert "initial_h" not in dict(zeros.named_parameters()) and "initial_h" in zeros.state_dict()


def test_init_uses_only_the_generator():
    c = RSSMConfig(embed_dim=3, num_actions=2, deter=8, stoch=2, classes=2, hidden=4)
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    a = Reference(c, torch.Generator().manual_seed(5)).state_dict()
    assert torch.equal(torch.random.get_rng_state(), before), "building the module consumed the global RNG"
    torch.manual_seed(1)
    b = Reference(c, torch.Generator().manual_seed(5)).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_one_state_dict_for_both_twins():
    c = RSSMConfig(embed_dim=3, num_actions=2, deter=8, stoch=2, classes=2, hidden=4)
    ref = Reference(c, torch.Generator().manual_seed(1))
    fast = Fast(c)
    fast.load_state_dict(ref.state_dict())  # strict: same names and shapes
    assert all(torch.equal(v, fast.state_dict()[k]) for k, v in ref.state_dict().items())


@pytest.mark.parametrize("cls", [Reference, Fast], ids=["reference", "fast"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_embed_dtype_does_not_change_the_state_dtype(cls, dtype):
    c = RSSMConfig(embed_dim=3, num_actions=2, deter=8, stoch=2, classes=3, hidden=4)
    model = cls(c, torch.Generator().manual_seed(1))
    embed = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(2))
    action, is_first = torch.zeros(4, 2, dtype=torch.long), torch.zeros(4, 2, dtype=torch.bool)
    with torch.no_grad():
        want = model.observe(embed, action, is_first, torch.Generator().manual_seed(3))
        got = model.observe(embed.to(dtype), action, is_first, torch.Generator().manual_seed(3))
    assert got.h.dtype == got.post_logits.dtype == torch.float32
    torch.testing.assert_close(got.post_logits[0], want.post_logits[0], atol=0.05, rtol=0)  # e_0 enters here
