"""Fast ``world_model`` twin: the reference's network and loss with the fast parts injected — the fast RSSM
(fast/rssm.py: projections hoisted out of the scan), the fast two-hot (fast/twohot.py: no [T, B, bins] target
built) and the packed2 backend chosen by ``config.unpack_impl`` (seed §3 M4 contingency hook):

    "lut"    fast/packed2.py          256 × 4 lookup table, torch on any device (default)
    "triton" fast/packed2_triton.py   Triton kernel (CUDA, or TRITON_INTERPRET=1 on CPU tensors)
    "warp"   fast/packed2_warp.py     Warp kernel

With encoder='conv' the convolutions run channels-last (weights and activations): the LayerNorm over channels
then reads contiguous rows instead of a permuted copy (~10 % of the conv time on CPU; cuDNN's layout on CUDA),
and each stage's LayerNorm + SiLU is one fused C++ kernel per direction on CPU (fast/channel_norm.py).

The reward and continue heads' first layer is fast/onehot.py's FeatureLinear: besides a tensor it reads the
imagined features as ``Features`` (h and the class indices of z, the one-hot never multiplied).

Same parameters (one state_dict loads into both) and interface as the reference. Faster variants:
fast/world_model_compiled.py (torch.compile of the RSSM steps, heads and KL: ``Kit.fast(compile=True)``) and
the fused LayerNorm-GRU RSSM of fast/rssm_triton.py (contract rssm, backend fast-triton).
"""

from __future__ import annotations

import importlib

import torch

from rlspec.contracts.world_model import UNPACK_MODULES
from rlspec.fast import onehot, rssm, twohot
from rlspec.fast.channel_norm import channel_norm_silu
from rlspec.reference import world_model as ref
from rlspec.reference.world_model import kl_loss

__all__ = ["BACKEND_NOTE", "WorldModel", "kl_loss"]

BACKEND_NOTE = "fast RSSM and two-hot, fused channel LayerNorm+SiLU, packed2 per unpack_impl"


class WorldModel(ref.WorldModel):
    RSSM = rssm.RSSM
    twohot = twohot
    FeatureLinear = onehot.FeatureLinear

    def __init__(self, config, generator: torch.Generator | None = None):
        super().__init__(config, generator)
        # imported on use: Triton and Warp load only when chosen (an unavailable one raises ImportError here)
        self._packed2 = importlib.import_module(UNPACK_MODULES[config.unpack_impl])
        if config.encoder == "conv":  # channels-last convolutions: the LayerNorm over channels reads them in place
            for part in (self.encoder, self.decoder):
                part.to(memory_format=torch.channels_last)
                part.memory_format = torch.channels_last
                part.norm_silu = channel_norm_silu

    def unpack(self, obs: torch.Tensor) -> torch.Tensor:
        return self._packed2.unpack_normalized(obs, torch.float32)
