"""``world_model`` twin with the fused LayerNorm-GRU: fast/world_model.py whose RSSM is fast/rssm_triton.py's
(Triton forward and backward of the GRU after its matmul), the world model of ``Kit.fast(fused_gru=True)``
(rlspec/algos/dreamer.py, kit name "fast-triton"). Made for CUDA, where the kernels are compiled; on CPU they
run under the Triton interpreter (TRITON_INTERPRET=1: correct, slow). Same parameters and interface.
"""

from __future__ import annotations

from rlspec.fast import rssm_triton
from rlspec.fast import world_model as fast_wm
from rlspec.reference.world_model import kl_loss

__all__ = ["BACKEND_NOTE", "WorldModel", "kl_loss"]

BACKEND_NOTE = rssm_triton.BACKEND_NOTE


class WorldModel(fast_wm.WorldModel):
    RSSM = rssm_triton.RSSM
