"""The vision-language backend (PPOLagSem design §15.1 rows 6–17, §15.2–§15.4, §25.6): any Hugging Face
image-text model that ``AutoModel`` / ``AutoProcessor`` load and that has ``get_image_features`` and
``get_text_features`` (CLIP, SigLIP, SigLIP2, ...).

Loading, in order; every outcome is a status string, nothing raises (fail-soft, §2 principle 4):
    1. devices: ``model_device`` cuda without CUDA → cpu, device status ``fallback_cpu_no_cuda``.
    2. the folder: ``model_name`` is a local folder, or a model id resolved in the local Hugging Face
       cache (``local_files_only``: nothing is ever downloaded) → else ``load_error:ModelNotFound``.
    3. safetensors only: a folder without ``*.safetensors`` → ``load_error:NoSafeTensorsWeights``
       (pickled ``.bin`` weights are never loaded, §15.9 lesson 4).
    4. dtypes in ``dtype_preference`` order (bf16 → fp16 → fp32, §15.3): the first one that loads *and*
       embeds the prompts and a gray frame to finite values is kept → ``ok_st_<dtype>``. A dtype whose
       weights overflow (fp16 holds |x| ≤ 65504) gives non-finite embeddings and the next is tried;
       none left → ``load_error:NonFiniteEmbeddings`` or ``load_error:<exception class>``.

Embeddings are L2-normalized on the model device in the model's dtype (§15.2); moving them to the host
is the manager's job (the §15.3 precision matrix).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

log = logging.getLogger("rlspec.semantics")

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
GRAY = 128  # the validation frame's pixel value


class LoadError(Exception):
    """A load failure with its status code (``load_error:<code>``)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class LoadReport:
    status: str = "not_loaded"  # ok_st_<dtype> | load_error:<code>
    device_status: str = "ok"  # ok | fallback_cpu_no_cuda
    message: str = ""
    attempts: list[tuple[str, str]] = field(default_factory=list)  # (dtype, outcome) in the order tried

    @property
    def ok(self) -> bool:
        return self.status.startswith("ok_st_")


def resolve_device(requested: str) -> tuple[torch.device, str]:
    """(device, status): a cuda device without CUDA becomes cpu with ``fallback_cpu_no_cuda`` (§15.4)."""
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu"), "fallback_cpu_no_cuda"
    return device, "ok"


def require(module: str):
    """The module, or LoadError("MissingDependency") naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LoadError("MissingDependency", f"{module} is not installed: the semantic side needs the `semantic` "
                                             "extra (pip install -e '.[semantic]')") from exc


def resolve_model_dir(model_name: str, cache_dir: str = "") -> tuple[Path, str | None]:
    """(folder, cache revision or None): a local folder, else the model id's snapshot in the local cache."""
    path = Path(model_name).expanduser()
    if path.is_dir():
        return path, None
    snapshot_download = require("huggingface_hub").snapshot_download
    try:
        snapshot = snapshot_download(model_name, cache_dir=cache_dir or None, local_files_only=True)
    except Exception as exc:  # not a repo id, or not cached: both mean "not here"
        raise LoadError("ModelNotFound", f"{model_name!r} is neither a folder nor a model in the local "
                                         f"Hugging Face cache ({type(exc).__name__}: {exc})") from exc
    return Path(snapshot), Path(snapshot).name


def _sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def as_frame_list(frames) -> list[np.ndarray]:
    """uint8 frames [N, H, W, 3] (numpy, torch, or a list of [H, W, 3]) → N numpy arrays [H, W, 3]."""
    items = list(frames) if isinstance(frames, (list, tuple)) else None
    if items is None:
        if isinstance(frames, torch.Tensor):
            frames = frames.detach().cpu().numpy()
        if not isinstance(frames, np.ndarray) or frames.ndim != 4:
            got = f"shape {tuple(frames.shape)}" if hasattr(frames, "shape") else type(frames).__name__
            raise ValueError(f"embed: argument 'frames' must be uint8 [N, H, W, 3], got {got}")
        items = list(frames)
    out = [np.asarray(f.detach().cpu() if isinstance(f, torch.Tensor) else f) for f in items]
    for i, f in enumerate(out):
        if f.dtype != np.uint8 or f.ndim != 3 or f.shape[-1] != 3:
            raise ValueError(f"embed: argument 'frames' must hold uint8 [H, W, 3] images, got frame {i} of "
                             f"dtype {f.dtype} and shape {tuple(f.shape)}")
    return out


def pooled(out) -> torch.Tensor:
    """The embedding of get_text_features / get_image_features: an output object's pooler_output (transformers 5)
    or the tensor itself (transformers 4)."""
    return out.pooler_output if hasattr(out, "pooler_output") else out


class VisionLanguageBackend:
    """A loaded model + processor on one device in one dtype; see :meth:`load`."""

    def __init__(self, model, processor, dtype: torch.dtype, device: torch.device, model_dir: Path,
                 revision: str | None):
        self.model, self.processor = model, processor
        self.dtype, self.device = dtype, device
        self.model_dir, self.revision = model_dir, revision
        self.model_type = getattr(model.config, "model_type", "unknown")

    @classmethod
    def load(cls, model_name: str, *, model_device: str = "cpu", dtype_preference=("bfloat16", "float16", "float32"),
             cache_dir: str = "", check_prompts=("a photo",)) -> tuple["VisionLanguageBackend | None", LoadReport]:
        """(backend or None, report). Never raises: every failure is a ``load_error:*`` status."""
        device, device_status = resolve_device(model_device)
        report = LoadReport(device_status=device_status)
        try:
            transformers = require("transformers")  # only on this path (PARITY-3)
            model_dir, revision = resolve_model_dir(model_name, cache_dir)
            if not list(model_dir.glob("*.safetensors")):
                found = sorted(p.name for p in model_dir.iterdir())
                raise LoadError("NoSafeTensorsWeights", f"{model_dir} has no *.safetensors weights (found "
                                                        f"{found}); pickled weights are never loaded")
        except LoadError as exc:
            report.status, report.message = f"load_error:{exc.code}", str(exc)
            log.warning("semantic model not loaded: %s", report.message)
            return None, report
        AutoModel, AutoProcessor = transformers.AutoModel, transformers.AutoProcessor

        error = LoadError("NoDtype", "dtype_preference is empty")
        for name in dtype_preference:
            try:
                with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                    model = AutoModel.from_pretrained(model_dir, dtype=DTYPES[name], use_safetensors=True,
                                                      local_files_only=True).to(device).eval()
                processor = AutoProcessor.from_pretrained(model_dir, local_files_only=True)
                backend = cls(model, processor, DTYPES[name], device, model_dir, revision)
                probe = [backend.text_features(list(check_prompts)),
                         backend.image_features([np.full((32, 32, 3), GRAY, np.uint8)])]
                if not all(bool(torch.isfinite(p).all()) for p in probe):
                    raise LoadError("NonFiniteEmbeddings", f"{name} weights embed to non-finite values "
                                                           "(overflow in this dtype)")
            except Exception as exc:  # fail-soft: try the next dtype, report the last failure
                error = exc if isinstance(exc, LoadError) else LoadError(type(exc).__name__, str(exc))
                report.attempts.append((name, f"load_error:{error.code}"))
                continue
            report.attempts.append((name, f"ok_st_{name}"))
            report.status = f"ok_st_{name}"
            return backend, report
        report.status, report.message = f"load_error:{error.code}", str(error)
        log.warning("semantic model not loaded: %s (attempts %s)", report.message, report.attempts)
        return None, report

    # ----------------------------------------------------------------------------------------------
    def _to_device(self, inputs) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, self.dtype if v.is_floating_point() else None) for k, v in inputs.items()}


    @torch.no_grad()
    def text_features(self, prompts: list[str]) -> torch.Tensor:  # -> [P, D] unit, model dtype and device
        padding = "max_length" if self.model_type.startswith("siglip") else True  # SigLIP trains padded
        max_length = getattr(self.model.config.text_config, "max_position_embeddings", None)
        inputs = self.processor(text=list(prompts), padding=padding, truncation=True, max_length=max_length,
                                return_tensors="pt")
        return F.normalize(pooled(self.model.get_text_features(**self._to_device(inputs))), dim=-1)

    @torch.no_grad()
    def image_features(self, frames) -> torch.Tensor:  # uint8 [N, H, W, 3] -> [N, D] unit, model dtype
        inputs = self.processor(images=as_frame_list(frames), return_tensors="pt", input_data_format="channels_last")
        return F.normalize(pooled(self.model.get_image_features(**self._to_device(inputs))), dim=-1)

    def identity(self) -> dict:
        """Model identity for the run's metadata (§13: hash the model for archival)."""
        import transformers

        weights = list(self.model_dir.glob("*.safetensors"))
        return dict(model_dir=str(self.model_dir), revision=self.revision, model_type=self.model_type,
                    model_class=type(self.model).__name__, processor_class=type(self.processor).__name__,
                    dtype=str(self.dtype).removeprefix("torch."), device=str(self.device),
                    weights=[p.name for p in sorted(weights)], weights_sha256=_sha256(weights),
                    transformers=transformers.__version__, torch=torch.__version__)
