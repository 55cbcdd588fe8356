"""``rlspec probe``: offline prompt-centroid separability and annotated frames (PPOLagSem design §30), without
training. Same backend and shaping maths as a run (backend.py, contract ``shaping``).

    rlspec probe --frames DIR|VIDEO --safe "prompt" ... --unsafe "prompt" ... [--model NAME_OR_DIR] [--out DIR]

DIR: the image files in it (png, jpg, ...), sorted by name. VIDEO: any file Pillow opens as a frame
sequence (gif, apng, tiff) or, with imageio + imageio-ffmpeg (the ``semantic`` extra), mp4/webm/avi/...

Writes into --out:
    centroids_and_stats.json   model identity and load status, prompts and their sha256, the unit
                               centroids, their cosine, angle (degrees) and euclidean distance, the mean
                               pairwise cosine within each prompt set (intra) and across them (inter),
                               per-frame safe/unsafe similarity and margin, and their summary
    frames/00000.png ...       each frame, upscaled to >= 256 px wide, annotated with its similarities
    annotated.gif              the annotated frames as an animation (two frames or more)
Similarities: sim_safe = cos(e, μ_safe), sim_unsafe = cos(e, μ_unsafe), margin = sim_safe − sim_unsafe
(§5.1, the raw margin before any normalization).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from rlspec import jsonio

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff"}
MIN_WIDTH = 256


def read_frames(source: Path) -> tuple[list[np.ndarray], list[str]]:
    """(uint8 RGB frames [H, W, 3], their names) from a folder of images or a video file."""
    from PIL import Image, ImageSequence, UnidentifiedImageError

    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise SystemExit(f"rlspec probe: --frames {source} holds no image files ({sorted(IMAGE_SUFFIXES)})")
        return [np.asarray(Image.open(p).convert("RGB")) for p in files], [p.name for p in files]
    if not source.is_file():
        raise SystemExit(f"rlspec probe: --frames {source} is neither a folder nor a file")
    try:
        with Image.open(source) as im:
            frames = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)]
    except UnidentifiedImageError:
        try:
            import imageio.v3 as iio
        except ImportError:
            raise SystemExit(f"rlspec probe: reading {source.suffix} video needs imageio and imageio-ffmpeg "
                             "(pip install 'rlspec[semantic]')") from None
        frames = [np.asarray(f)[..., :3] for f in iio.imiter(source)]
    return frames, [f"{source.name}#{i}" for i in range(len(frames))]


def _mean_offdiag(sim: torch.Tensor) -> float | None:
    n = sim.shape[0]
    return None if n < 2 else float((sim.sum() - sim.diagonal().sum()) / (n * (n - 1)))


def separability(safe: torch.Tensor, unsafe: torch.Tensor, mu_safe: torch.Tensor, mu_unsafe: torch.Tensor) -> dict:
    """Prompt-set statistics from unit prompt embeddings safe [P_s, D], unsafe [P_u, D] and unit centroids."""
    cos = float(mu_safe.double() @ mu_unsafe.double())
    return dict(centroid_cosine=cos, centroid_angle_deg=math.degrees(math.acos(max(-1.0, min(1.0, cos)))),
                centroid_distance=float((mu_safe.double() - mu_unsafe.double()).norm()),
                intra_safe=_mean_offdiag(safe.double() @ safe.double().T),
                intra_unsafe=_mean_offdiag(unsafe.double() @ unsafe.double().T),
                inter=float((safe.double() @ unsafe.double().T).mean()))


def _summary(x: torch.Tensor) -> dict:
    x = x.double()
    return dict(mean=float(x.mean()), std=float(x.std(unbiased=False)), min=float(x.min()), max=float(x.max()))


def annotate(frame: np.ndarray, sim_safe: float, sim_unsafe: float, margin: float):
    """The frame upscaled to >= MIN_WIDTH px wide with a text band: similarities and margin."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(frame)
    scale = max(1, math.ceil(MIN_WIDTH / image.width))
    image = image.resize((image.width * scale, image.height * scale), Image.NEAREST)
    band = 28
    canvas = Image.new("RGB", (image.width, image.height + band), (0, 0, 0))
    canvas.paste(image, (0, band))
    draw = ImageDraw.Draw(canvas)
    color = (80, 220, 80) if margin >= 0 else (240, 80, 80)
    draw.text((4, 2), f"safe {sim_safe:+.3f}  unsafe {sim_unsafe:+.3f}", fill=(255, 255, 255))
    draw.text((4, 14), f"margin {margin:+.4f}", fill=color)
    return canvas


def probe(frames: list[np.ndarray], names: list[str], safe_prompts: list[str], unsafe_prompts: list[str],
          backend, batch: int = 32) -> dict:
    """The statistics of centroids_and_stats.json (no files written)."""
    from rlspec.fast.shaping import prompt_centroid, semantic_margin
    from rlspec.semantics.hooks import prompts_sha256

    def unit(x: torch.Tensor) -> torch.Tensor:  # re-normalized in float32 (the model's dtype may be bf16)
        return F.normalize(x.float().cpu(), dim=-1)

    safe, unsafe = unit(backend.text_features(safe_prompts)), unit(backend.text_features(unsafe_prompts))  # [P, D]
    mu_safe, mu_unsafe = prompt_centroid(safe), prompt_centroid(unsafe)  # [D]
    e = unit(torch.cat([backend.image_features(frames[i:i + batch]) for i in range(0, len(frames), batch)]))  # [N, D]
    sim_safe, sim_unsafe = e @ mu_safe, e @ mu_unsafe  # [N]
    margin = semantic_margin(e, mu_safe, mu_unsafe)  # [N]
    per_frame = [dict(index=i, name=names[i], safe_sim=float(sim_safe[i]), unsafe_sim=float(sim_unsafe[i]),
                      margin=float(margin[i])) for i in range(len(frames))]
    return dict(safe_prompts=safe_prompts, unsafe_prompts=unsafe_prompts,
                prompts_sha256=prompts_sha256(safe_prompts, unsafe_prompts),
                prompts=separability(safe, unsafe, mu_safe, mu_unsafe),
                centroids=dict(safe=mu_safe.tolist(), unsafe=mu_unsafe.tolist()),
                frames=dict(count=len(frames), safe_sim=_summary(sim_safe), unsafe_sim=_summary(sim_unsafe),
                            margin=_summary(margin), positive_margin_fraction=float((margin > 0).double().mean())),
                per_frame=per_frame)


def main(argv: list[str] | None = None) -> int:
    from rlspec.semantics.backend import VisionLanguageBackend
    from rlspec.semantics.config import DTYPE_NAMES, SemanticConfig

    default = SemanticConfig()
    parser = argparse.ArgumentParser(prog="rlspec probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=Path, required=True, help="a folder of images or a video file")
    parser.add_argument("--safe", nargs="+", required=True, help="safe prompts")
    parser.add_argument("--unsafe", nargs="+", required=True, help="unsafe prompts")
    parser.add_argument("--model", default=default.model_name, help="local folder or cached model id")
    parser.add_argument("--cache-dir", default="", help="Hugging Face cache folder ('' = the default)")
    parser.add_argument("--device", default="cpu", help="model device (cuda falls back to cpu without CUDA)")
    parser.add_argument("--dtype", nargs="+", default=list(DTYPE_NAMES), choices=DTYPE_NAMES,
                        help="dtypes tried in order")
    parser.add_argument("--batch", type=int, default=32, help="frames per model forward")
    parser.add_argument("--out", type=Path, default=Path("probe-out"), help="output folder")
    args = parser.parse_args(argv)

    frames, names = read_frames(args.frames)
    if not frames:
        raise SystemExit(f"rlspec probe: --frames {args.frames} holds no frames")
    backend, report = VisionLanguageBackend.load(args.model, model_device=args.device, dtype_preference=args.dtype,
                                                 cache_dir=args.cache_dir, check_prompts=args.safe + args.unsafe)
    if backend is None:
        print(f"rlspec probe: model not loaded: {report.status}: {report.message}", file=sys.stderr)
        return 1
    stats = probe(frames, names, args.safe, args.unsafe, backend, args.batch)
    stats = dict(model=backend.identity(), status=report.status, device_status=report.device_status, **stats)
    (args.out / "frames").mkdir(parents=True, exist_ok=True)
    (args.out / "centroids_and_stats.json").write_text(jsonio.dumps(stats, indent=1))
    images = [annotate(f, r["safe_sim"], r["unsafe_sim"], r["margin"]) for f, r in zip(frames, stats["per_frame"])]
    for i, image in enumerate(images):
        image.save(args.out / "frames" / f"{i:05d}.png")
    if len(images) > 1:
        images[0].save(args.out / "annotated.gif", save_all=True, append_images=images[1:], duration=100, loop=0)
    p, f = stats["prompts"], stats["frames"]
    print(f"{report.status} | centroid cosine {p['centroid_cosine']:.4f}, angle {p['centroid_angle_deg']:.2f} deg, "
          f"distance {p['centroid_distance']:.4f} | {f['count']} frames, margin {f['margin']['mean']:+.4f} "
          f"± {f['margin']['std']:.4f} | written to {args.out}")
    return 0
