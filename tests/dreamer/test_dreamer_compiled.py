"""``Kit.fast(compile=True)`` (fast/world_model_compiled.py): from one seed, two train steps on one batch give
the eager fast kit's losses and parameters within float32 reordering (inductor fuses and reorders sums:
1e-4 relative + 1e-5 absolute stated; measured ~1e-7), and the compiled pieces really ran as compiled graphs.

Cost: compiling on a cold inductor cache is most of it (~45 s CPU time on this 2-core machine, ~12 s with a
warm cache in /tmp/torchinductor_$USER); the tiny config keeps the steps themselves at milliseconds."""

from __future__ import annotations

import torch
from torch._dynamo.utils import counters

from rlspec.algos import dreamer as core
from rlspec.fast import world_model_compiled

CFG = core.DreamerConfig(deter=16, stoch=4, classes=4, hidden=16, embed_dim=16, pool=8, mlp_hidden=16,
                         mlp_layers=1, horizon=3, batch_size=2, seq_len=5)


def _batch(gen: torch.Generator, T: int = 5, B: int = 2) -> dict:
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0, 0] = first[3, 1] = True
    return {"obs": torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=gen),
            "action": torch.randint(0, 5, (T, B), dtype=torch.int32, generator=gen),
            "reward": (torch.rand(T, B, generator=gen) < 0.3).float(), "is_first": first,
            "continue": torch.ones(T, B)}


def test_compiled_kit_gives_the_eager_losses_and_updates():
    runs = {}
    for name in ("fast", "fast-compiled"):
        gen = torch.Generator().manual_seed(0)
        state = core.make_state(CFG, 5, core.Kit.named(name), gen)
        batch = _batch(gen)
        graphs = counters["stats"]["unique_graphs"]
        metrics = [core.train_step(state, batch, gen) for _ in range(2)]
        runs[name] = state, metrics, counters["stats"]["unique_graphs"] - graphs
    (eager, m_eager, graphs_eager), (compiled, m_compiled, graphs_compiled) = runs["fast"], runs["fast-compiled"]
    assert isinstance(compiled.wm, world_model_compiled.WorldModel)
    assert isinstance(compiled.wm.rssm, world_model_compiled.RSSM)
    assert graphs_eager == 0 and graphs_compiled >= 5, (graphs_eager, graphs_compiled)  # 3 RSSM pieces, heads, KL
    for step, (a, b) in enumerate(zip(m_eager, m_compiled)):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=lambda m, k=k: f"step {step} {k}: {m}")
    for part in ("wm", "actor", "critic"):
        want, got = getattr(eager, part).state_dict(), getattr(compiled, part).state_dict()
        assert want.keys() == got.keys()
        for k in want:
            torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-5, msg=lambda m, k=k: f"{part}.{k}: {m}")
