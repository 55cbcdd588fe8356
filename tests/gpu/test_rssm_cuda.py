"""On CUDA, the ``rssm`` twins agree with each other (one state_dict, one CUDA generator), samples follow the
CUDA generator, and the precision policy holds under autocast in bf16 and fp16: h, z and the state are
float32 and h is not rounded to the autocast dtype.

observe makes one host read by design (the action-id range check in contracts.rssm), so no sync-free check
is made here. Written without a GPU at hand: unverified until ``nox -s gpu_gate`` runs on a CUDA machine."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.rssm import RSSMConfig
from rlspec.fast.rssm import RSSM as Fast
from rlspec.reference.rssm import RSSM as Reference
from rlspec.spec.rssm import close_until_flip, make_inputs, random_state_dict

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")]

CONFIG = RSSMConfig(embed_dim=24, num_actions=5, deter=64, stoch=8, classes=8, hidden=32)
T, B = 12, 8


def _models(twin=Fast):
    """(reference, twin) on CUDA with one state_dict (CONFIG's sizes)."""
    sd = random_state_dict(CONFIG, seed=0, scale=4.0)
    out = []
    for cls in (Reference, twin):
        m = cls(CONFIG)
        m.load_state_dict(sd)
        out.append(m.cuda())
    return out


def _run(model, dtype=None):
    embed, action, is_first = (t.cuda() for t in make_inputs(CONFIG, T, B, seed=1, resets=[(0, 0), (5, 1), (9, 3)]))
    g = torch.Generator("cuda").manual_seed(2)
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        return model.observe(embed, action, is_first, g)


def test_fast_matches_reference_on_cuda():
    ref, fast = _models()
    got, want = _run(fast), _run(ref)
    assert got.h.is_cuda and got.h.shape == want.h.shape
    close_until_flip("RSSM-2", "cuda observe", got, want, atol=1e-4, rtol=1e-4)  # raises naming the clause


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("which", [0, 1], ids=["reference", "fast"])
def test_precision_policy_under_cuda_autocast(dtype, which):
    model = _models()[which]
    got, want = _run(model, dtype), _run(model)
    for name, t in (("h", got.h), ("z", got.z), ("state.h", got.state.h), ("state.z", got.state.z)):
        assert t.dtype == torch.float32, f"{name} is {t.dtype} under autocast({dtype})"
    assert torch.isfinite(got.h).all() and torch.isfinite(got.post_logits).all()
    assert (got.h.to(dtype).float() == got.h).float().mean() < 0.9, "h rounded to the autocast dtype"
    assert (got.h[0] - want.h[0]).abs().max() < 0.05
