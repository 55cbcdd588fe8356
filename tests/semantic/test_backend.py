"""PPOLagSem design §15.8 (a) "load & status": real tiny CLIP / SigLIP folders through AutoModel / AutoProcessor,
safetensors only, the dtype fallback chain, the cache lookup, the device fallback, §15.3 precision."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from semantic_helpers import SAFE, UNSAFE, config, frames

from rlspec.semantics.backend import VisionLanguageBackend, as_frame_list
from rlspec.semantics.manager import SemanticManager

EXPECTED_DEVICE_STATUS = "ok" if torch.cuda.is_available() else "fallback_cpu_no_cuda"


@pytest.mark.parametrize("folder, kind", [("clip_dir", "clip"), ("siglip_dir", "siglip"), ("siglip_spm_dir", "siglip")])
def test_load_status_and_embeddings(folder, kind, request):
    """Default chain on a cuda request: bf16 loads first (ok_st_bfloat16); without CUDA the model is on the
    cpu with fallback_cpu_no_cuda; float32 embeddings equal the model's own features, L2-normalized."""
    from transformers import AutoModel, AutoProcessor

    model_dir = request.getfixturevalue(folder)
    backend, report = VisionLanguageBackend.load(str(model_dir), model_device="cuda:0", check_prompts=SAFE)
    assert report.status == "ok_st_bfloat16" and report.attempts == [("bfloat16", "ok_st_bfloat16")], report
    assert report.device_status == EXPECTED_DEVICE_STATUS
    assert backend.dtype == torch.bfloat16 and backend.model.dtype == torch.bfloat16
    assert backend.model_type == kind

    b32, report32 = VisionLanguageBackend.load(str(model_dir), model_device="cpu", dtype_preference=("float32",))
    assert report32.status == "ok_st_float32" and report32.device_status == "ok"
    model = AutoModel.from_pretrained(model_dir, dtype=torch.float32)
    processor = AutoProcessor.from_pretrained(model_dir)
    images = frames(3)
    pixels = processor(images=list(images), return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        want = F.normalize(model.get_image_features(pixel_values=pixels).pooler_output, dim=-1)
    torch.testing.assert_close(b32.image_features(images), want, rtol=1e-5, atol=1e-6)
    e16 = backend.image_features(images)  # bf16 model: the same embedding to bf16 precision
    assert e16.dtype == torch.bfloat16
    assert float((e16.float() * want).sum(-1).min()) > 0.99  # cosine to the float32 embedding
    text = b32.text_features(list(SAFE + UNSAFE))  # [4, D]
    torch.testing.assert_close(text.norm(dim=-1), torch.ones(4), rtol=0, atol=1e-5)
    assert float((text[0] - text[2]).abs().max()) > 1e-3  # different prompts, different embeddings


def test_bin_only_folder_is_refused(clip_dir, tmp_path):
    """A folder with pickled weights only: load_error:NoSafeTensorsWeights, although transformers itself
    would load it (the refusal is the backend's, §15.9 lesson 4)."""
    from transformers import AutoModel

    folder = tmp_path / "bin-only"
    shutil.copytree(clip_dir, folder)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    backend, report = VisionLanguageBackend.load(str(folder), model_device="cpu")
    assert backend is None and report.status == "load_error:NoSafeTensorsWeights", report
    assert "pytorch_model.bin" in report.message
    assert AutoModel.from_pretrained(folder, use_safetensors=False) is not None  # loadable, but not by us


@pytest.fixture(scope="module")
def overflowing_clip(clip_dir, tmp_path_factory):
    """The tiny CLIP with its visual projection scaled by 1e6: image features overflow float16 (max 65504)
    but not bfloat16 (float32's exponent range)."""
    folder = tmp_path_factory.mktemp("overflow-clip")
    shutil.copytree(clip_dir, folder, dirs_exist_ok=True)
    weights = load_file(folder / "model.safetensors")
    weights["visual_projection.weight"] = weights["visual_projection.weight"] * 1e6
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_dtype_fallback_records_first_that_works(overflowing_clip):
    backend, report = VisionLanguageBackend.load(str(overflowing_clip), model_device="cpu",
                                                 dtype_preference=("float16", "float32"))
    assert report.status == "ok_st_float32", report
    assert report.attempts == [("float16", "load_error:NonFiniteEmbeddings"), ("float32", "ok_st_float32")]
    assert backend.dtype == torch.float32
    _, report_bf16 = VisionLanguageBackend.load(str(overflowing_clip), model_device="cpu")
    assert report_bf16.status == "ok_st_bfloat16", report_bf16
    _, report_none = VisionLanguageBackend.load(str(overflowing_clip), model_device="cpu",
                                                dtype_preference=("float16",))
    assert report_none.status == "load_error:NonFiniteEmbeddings", report_none


def test_model_id_from_the_local_cache(clip_dir, tmp_path):
    """A model id resolves to its snapshot in a Hugging Face cache folder (revision recorded); an id that
    is not cached is load_error:ModelNotFound (nothing is downloaded: the Hub is offline here)."""
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "cache" / "models--local--tiny-clip"
    shutil.copytree(clip_dir, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    cache = str(tmp_path / "cache")
    backend, report = VisionLanguageBackend.load("local/tiny-clip", model_device="cpu", cache_dir=cache)
    assert report.status == "ok_st_bfloat16", report
    assert backend.revision == revision and backend.identity()["revision"] == revision
    missing, report = VisionLanguageBackend.load("local/absent", model_device="cpu", cache_dir=cache)
    assert missing is None and report.status == "load_error:ModelNotFound", report


def test_identity_hashes_the_weights(clip_dir, clip32):
    import hashlib

    identity = clip32.identity()
    assert identity["weights_sha256"] == hashlib.sha256((clip_dir / "model.safetensors").read_bytes()).hexdigest()
    assert identity["model_type"] == "clip" and identity["dtype"] == "float32" and identity["revision"] is None


def test_cpu_host_precision(clip_dir):
    """§15.3: a bf16 model with a cpu host keeps centroids and embeddings in float32, computed from the
    model's unit prompt embeddings as normalize(mean(normalize(prompts)))."""
    manager = SemanticManager(config(clip_dir, dtype_preference=("bfloat16",), model_device="cuda:0"),
                              num_envs=2, gamma=0.99, total_steps=100)
    assert manager.report.status == "ok_st_bfloat16" and manager.report.device_status == EXPECTED_DEVICE_STATUS
    assert manager.mu_safe.dtype == torch.float32 and manager.mu_unsafe.dtype == torch.float32
    prompts = manager.backend.text_features(list(SAFE)).double()
    want = F.normalize(F.normalize(prompts, dim=-1).mean(0), dim=0)
    torch.testing.assert_close(manager.mu_safe.double(), want, rtol=0, atol=1e-6)
    e, ms = manager.embed(frames(2))
    assert e.dtype == torch.float32 and e.shape == (2, manager.mu_safe.shape[0]) and ms > 0


def test_bad_frames_are_rejected_naming_the_argument():
    with pytest.raises(ValueError, match="'frames'.*frame 1 of dtype float64"):
        as_frame_list([frames(1)[0], frames(1)[0].astype("float64")])
    with pytest.raises(ValueError, match=r"'frames' must be uint8 \[N, H, W, 3\], got shape \(40, 40, 3\)"):
        as_frame_list(frames(1)[0])


@pytest.mark.parametrize("missing", ["transformers", "huggingface_hub"])
def test_without_the_semantic_extra_the_load_fails_soft(clip_dir, monkeypatch, missing):
    """transformers (or the Hub client a model id needs) not installed: a load_error status naming the extra,
    never an ImportError out of load (fail-soft: the run goes on as PPOLag)."""
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` now raises ImportError
    name = str(clip_dir) if missing == "transformers" else "local/tiny-clip"
    backend, report = VisionLanguageBackend.load(name, model_device="cpu")
    assert backend is None and report.status == "load_error:MissingDependency", report
    assert missing in report.message and "semantic" in report.message
