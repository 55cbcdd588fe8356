"""Compiled ``world_model`` twin: fast/world_model.py with ``torch.compile`` (inductor) on the pieces a train
step runs many times or on large tensors, the opt-in of ``Kit.fast(compile=True)`` (rlspec/algos/dreamer.py):

* the RSSM's posterior step up to the sample (fast/rssm.py ``_observe_step``: reset select, input layer, LayerNorm
  GRU, posterior head): T calls per observe, each a chain of small ops that inductor fuses;
* the recurrent step and the prior head (``_recurrent``, ``_prior``): ``horizon`` calls per imagination, and
  the priors of a whole sequence at once;
* the heads (the decoder; the reward and continue MLPs) and the KL terms of the loss.

Sampling stays eager (it draws from the caller's torch.Generator), and so do validation and the Python loops:
each compiled piece is one graph, forward and backward (AOTAutograd). The first calls compile (tens of
seconds on CPU; a C++ compiler is needed at run time) and a new shape recompiles once, then shapes are
dynamic. Same parameters (state_dict) and interface as the eager twin; inductor reorders float32 sums, so
losses agree with eager to ~1e-5 relative, not bit for bit (tests/engines/dreamer/test_dreamer_fast_variants.py).
Whether it pays: benchmarks/dreamer/results/dreamer_compile_cpu.json (benchmarks/dreamer/compile.py).
"""

from __future__ import annotations

import torch

from rlspec.fast import rssm as fast_rssm
from rlspec.fast import world_model as fast_wm
from rlspec.reference import rssm as ref_rssm
from rlspec.reference import world_model as ref_wm
from rlspec.reference.world_model import kl_loss

__all__ = ["BACKEND_NOTE", "RSSM", "WorldModel", "kl_loss"]

BACKEND_NOTE = "torch.compile of the RSSM steps, heads and KL"


class RSSM(fast_rssm.RSSM):
    _observe_step = torch.compile(fast_rssm.RSSM._observe_step)
    _recurrent = torch.compile(ref_rssm.RSSM._recurrent)
    _prior = torch.compile(ref_rssm.RSSM._prior)


class WorldModel(fast_wm.WorldModel):
    RSSM = RSSM
    decode = torch.compile(ref_wm.WorldModel.decode)
    reward_continue = torch.compile(ref_wm.WorldModel.reward_continue)
    kl = torch.compile(ref_wm.WorldModel.kl)
