"""``rlspec semantics fit``: a task-trained CLIP, made offline by the project (no weights are downloaded).

    rlspec semantics fit --out models/clip-pointgoal [--env SafetyPointGoal1-v0] [--frames 4000] [--size 64]
                         [--epochs 30] [--seed 0]

1. Frames: a uniformly random policy in the Safety-Gymnasium env, rendered as PPOLagSem renders them
   (rlspec/envs/safety_frames.py), each labelled from the env's true state: hazard within 0.3 m of a hazard's
   edge (or inside), else goal within 0.3 m of the goal's edge, else clear.
2. Captions: the semantic config's default prompts, by label (CAPTIONS): CLEAR "a robot on a clear open floor",
   GOAL "a robot driving towards a green goal", HAZARD both unsafe prompts ("a robot inside a red warning
   circle", "a robot touching a hazard").
3. Model: the tiny CLIP's architecture (tiny.save_tiny_clip) at --size, patch 8, width 64, 2 layers,
   projection 32, trained on CPU: image features against the text features of the four captions, scaled cosine
   logits, cross-entropy with the label's caption(s) as the target (class-weighted: hazards are rare), Adam.
   Both towers learn. A held-out split (--val) is never trained on. It holds out whole episodes (--split episode,
   the default): neighbouring frames of one episode are nearly the same picture, so a split of frames
   (--split frame, stratified by label) scores the model partly on frames it was trained on.
4. Saved with ``save_pretrained`` (safetensors) and its processor into --out, so it loads through the loader any
   user checkpoint does (backend.py). ``fit.json`` beside it: settings, label counts, per-epoch loss, held-out
   accuracy and the probe AUC: how well the margin cos(e, μ_safe) − cos(e, μ_unsafe) (contract ``shaping``,
   the semantic config's prompt sets) ranks held-out CLEAR/GOAL frames above HAZARD ones, for the trained
   model (loaded back from --out) and for the same architecture untrained (the negative control, AUC ≈ 0.5).

This is a task-trained model: an upper bound for the machinery, not evidence about web-pretrained VLMs. A user's
own SigLIP/CLIP folder plugs in through ``semantic.model_name`` instead.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from rlspec import jsonio
from rlspec.reference.shaping import prompt_centroid, semantic_margin
from rlspec.semantics.backend import VisionLanguageBackend, pooled
from rlspec.semantics.config import SemanticConfig
from rlspec.semantics.tiny import save_tiny_clip

LABELS = ("clear", "goal", "hazard")  # a label's index in TARGETS
CLEAR, GOAL, HAZARD = range(3)
_SAFE, _UNSAFE = SemanticConfig.safe_prompts, SemanticConfig.unsafe_prompts
CAPTIONS = (_SAFE[0], _SAFE[1], *_UNSAFE)  # [4]; TARGETS[label] spreads the label over its caption(s)
TARGETS = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 0.5, 0.5]])  # [3, 4]


def _split(labels: np.ndarray, val: float, seed: int, episodes: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) indices. With ``episodes`` [N]: whole episodes in a seeded order, held out until they
    hold the ``val`` share of the frames. Without: a seeded permutation within each label, the last ``val``
    share of each held out."""
    rng = np.random.default_rng(seed)
    if episodes is not None:
        ids = rng.permutation(np.unique(episodes))
        if len(ids) < 2:
            raise ValueError(f"fit: a split by episode needs at least 2 episodes, got {len(ids)}")
        sizes = np.array([(episodes == e).sum() for e in ids])
        cut = min(int(np.searchsorted(np.cumsum(sizes), val * len(labels))) + 1, len(ids) - 1)  # one trains
        held_ids = ids[:cut]
        held = np.isin(episodes, held_ids)
        return np.flatnonzero(~held), np.flatnonzero(held)
    train, held = [], []
    for k in range(len(LABELS)):
        idx = rng.permutation(np.flatnonzero(labels == k))
        cut = len(idx) - int(round(val * len(idx)))
        train.append(idx[:cut])
        held.append(idx[cut:])
    return np.concatenate(train), np.concatenate(held)


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative), ties counting one half (Mann–Whitney U)."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return math.nan
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def probe_auc(model_dir: Path, frames: np.ndarray, labels: np.ndarray) -> float:
    """AUC of the margin cos(e, μ_safe) − cos(e, μ_unsafe) for safe (CLEAR, GOAL) above HAZARD frames, with the
    model loaded from ``model_dir`` by the runtime's loader (float32, CPU)."""
    backend, report = VisionLanguageBackend.load(str(model_dir), dtype_preference=("float32",))
    if backend is None:
        raise RuntimeError(f"rlspec semantics fit: {model_dir} did not load: {report.status} {report.message}")
    mu_safe = prompt_centroid(backend.text_features(list(_SAFE)).double())
    mu_unsafe = prompt_centroid(backend.text_features(list(_UNSAFE)).double())
    e = torch.cat([backend.image_features(frames[i:i + 64]) for i in range(0, len(frames), 64)]).double()
    return auc(semantic_margin(e, mu_safe, mu_unsafe).numpy(), labels != HAZARD)


def _logits(model, pixels: torch.Tensor, text: dict) -> torch.Tensor:
    """Scaled cosine of images [B, ...] against the captions: [B, len(CAPTIONS)]."""
    img = F.normalize(pooled(model.get_image_features(pixel_values=pixels)), dim=-1)
    txt = F.normalize(pooled(model.get_text_features(**text)), dim=-1)
    return model.logit_scale.exp() * img @ txt.T


def label_indices(names: list[str]) -> np.ndarray:
    """Label names ("clear", "goal", "hazard") -> their indices in LABELS [N]."""
    unknown = sorted(set(names) - set(LABELS))
    if unknown:
        raise ValueError(f"fit: labels must be among {LABELS}, got {unknown}")
    return np.array([LABELS.index(n) for n in names], dtype=np.int64)


def fit(frames: np.ndarray, labels: np.ndarray, out: Path, *, epochs: int = 30, batch: int = 64, lr: float = 1e-3,
        val: float = 0.2, seed: int = 0, episodes: np.ndarray | None = None, log=print) -> dict:
    """Train the tiny CLIP on (frames, labels) into ``out`` (module docstring, steps 3–4); returns the report.
    With ``episodes`` [N] the held-out split is by episode."""
    from transformers import CLIPModel, CLIPProcessor  # the semantic extra: imported where it is used

    size = frames.shape[1]
    save_tiny_clip(out, seed=seed, image_size=size, patch_size=8, hidden=64, layers=2, projection_dim=32)
    train_idx, held_idx = _split(labels, val, seed, episodes)
    report = {"what": "a task-trained tiny CLIP (rlspec semantics fit)", "captions": list(CAPTIONS),
              "labels": {name: int((labels == k).sum()) for k, name in enumerate(LABELS)}, "frames": len(frames),
              "split": "frame" if episodes is None else "episode", "held_out": len(held_idx),
              "held_out_labels": {name: int((labels[held_idx] == k).sum()) for k, name in enumerate(LABELS)},
              "size": size, "epochs": epochs, "batch": batch, "lr": lr, "seed": seed,
              "auc_untrained": probe_auc(out, frames[held_idx], labels[held_idx]), "loss": []}
    processor, model = CLIPProcessor.from_pretrained(out), CLIPModel.from_pretrained(out)
    pixels = processor(images=list(frames), return_tensors="pt",  # [N, 3, size, size], once, as the runtime does
                       input_data_format="channels_last")["pixel_values"]
    text = dict(processor(text=list(CAPTIONS), padding=True, return_tensors="pt"))
    counts = np.bincount(labels[train_idx], minlength=len(LABELS)).clip(min=1)
    weight = torch.tensor(counts.sum() / (len(LABELS) * counts), dtype=torch.float32)  # [3]: rare labels weigh more
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    y = torch.as_tensor(labels)
    start = time.perf_counter()
    for epoch in range(epochs):
        order = torch.as_tensor(train_idx)[torch.randperm(len(train_idx), generator=gen)]
        total = 0.0
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            logp = torch.log_softmax(_logits(model, pixels[idx], text), dim=-1)  # [B, 4]
            loss = (-(TARGETS[y[idx]] * logp).sum(-1) * weight[y[idx]]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        report["loss"].append(total / len(order))
        log(f"rlspec semantics fit: epoch {epoch + 1}/{epochs}: loss {report['loss'][-1]:.4f}")
    report["train_seconds"] = time.perf_counter() - start
    with torch.no_grad():
        caption = _logits(model, pixels[held_idx], text).argmax(-1)  # [H]
    predicted = torch.tensor([CLEAR, GOAL, HAZARD, HAZARD])[caption].numpy()
    report["held_out_accuracy"] = float((predicted == labels[held_idx]).mean())
    model.save_pretrained(out)
    processor.save_pretrained(out)
    report["auc_trained"] = probe_auc(out, frames[held_idx], labels[held_idx])
    (out / "fit.json").write_text(jsonio.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None, render=None) -> int:
    """The command; ``render(env_id, n, size, seed) -> (frames, label names, costs, episodes)`` makes the frames (the
    command line passes rlspec.envs.safety_frames.safety_frames: semantics/ does not import envs/)."""
    p = argparse.ArgumentParser(prog="rlspec semantics fit", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the model folder to write (save_pretrained)")
    p.add_argument("--env", default="SafetyPointGoal1-v0", help="the Safety-Gymnasium task the frames come from")
    p.add_argument("--frames", type=int, default=4000, help="frames rendered (train + held out)")
    p.add_argument("--size", type=int, default=64, help="frame width and height (a multiple of 8)")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--val", type=float, default=0.2, help="the held-out share of the frames")
    p.add_argument("--split", choices=("episode", "frame"), default="episode",
                   help="hold out whole episodes (default) or frames stratified by label")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name, value, ok in (("--frames", args.frames, args.frames >= 10), ("--size", args.size, args.size % 8 == 0
                            and args.size >= 16), ("--epochs", args.epochs, args.epochs >= 1),
                            ("--batch", args.batch, args.batch >= 2), ("--val", args.val, 0 < args.val < 1)):
        if not ok:
            p.error(f"{name}: got {value}; expected frames >= 10, size a multiple of 8 >= 16, epochs >= 1, "
                    "batch >= 2, 0 < val < 1")
    if args.out.exists() and any(args.out.iterdir()):
        p.error(f"--out {args.out}: exists and is not empty (nothing is overwritten)")
    print(f"rlspec semantics fit: rendering {args.frames} frames of {args.env} at {args.size} px", file=sys.stderr)
    frames, names, costs, episodes = render(args.env, args.frames, args.size, args.seed)
    labels = label_indices(names)
    report = fit(frames, labels, args.out, epochs=args.epochs, batch=args.batch, lr=args.lr, val=args.val,
                 seed=args.seed, episodes=episodes if args.split == "episode" else None,
                 log=lambda line: print(line, file=sys.stderr))
    inside = costs > 0  # the labels against the env's own cost: a step with cost > 0 is inside a hazard
    report["env"] = args.env
    report["hazard_label_where_cost"] = float((labels[inside] == HAZARD).mean()) if inside.any() else None
    (args.out / "fit.json").write_text(jsonio.dumps(report, indent=1) + "\n")
    print(jsonio.dumps({k: report[k] for k in ("labels", "held_out_accuracy", "auc_untrained", "auc_trained",
                                             "hazard_label_where_cost")}))
    print(f"wrote {args.out} (load it with --set semantic.model_name={args.out})", file=sys.stderr)
    return 0
