"""The engines' ``device`` key: "auto", "cpu", "cuda" or "cuda:K" -> a torch.device that exists here."""

from __future__ import annotations

import torch

CHOICES = "cpu, cuda, cuda:K (a visible device) or auto"


def resolve(requested: str) -> torch.device:
    """auto: cuda when available, else cpu; cuda without an index: the current CUDA device. ValueError (naming
    what is missing) for an unknown type or a CUDA device this machine does not have."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(requested)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("CUDA is not available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"{torch.cuda.device_count()} CUDA device(s) visible")
        return torch.device("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
    if dev.type != "cpu":
        raise ValueError(f"unsupported device type {dev.type}")
    return dev
