"""Real tiny vision-language models for the semantic tests, built once per session from configs
(rlspec.semantics.tiny) into a temporary folder; the Hub is offline for the whole session, so any
attempt to download fails the test instead of passing slowly. They need the `semantic` extra (part of
`test`)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers / huggingface_hub read it

import pytest  # noqa: E402

from rlspec.semantics.backend import VisionLanguageBackend  # noqa: E402
from rlspec.semantics.tiny import save_tiny_clip, save_tiny_siglip  # noqa: E402


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory):
    return save_tiny_clip(tmp_path_factory.mktemp("tiny-clip"))


@pytest.fixture(scope="session")
def siglip_dir(tmp_path_factory):
    return save_tiny_siglip(tmp_path_factory.mktemp("tiny-siglip"))


@pytest.fixture(scope="session")
def siglip_spm_dir(tmp_path_factory):
    """SigLIP with its own sentencepiece tokenizer (as real SigLIP checkpoints ship it)."""
    return save_tiny_siglip(tmp_path_factory.mktemp("tiny-siglip-spm"), sentencepiece=True)


@pytest.fixture(scope="session")
def clip32(clip_dir):
    """The tiny CLIP loaded in float32 on the CPU (tight tolerances)."""
    backend, report = VisionLanguageBackend.load(str(clip_dir), model_device="cpu", dtype_preference=("float32",))
    assert report.status == "ok_st_float32", report
    return backend
