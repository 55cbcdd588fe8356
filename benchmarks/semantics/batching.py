"""PPOLagSem spatial batching (PPOLagSem design §26, §18.1) as a script: embedding one frame per env for 8 envs in one
forward (batch_max 8) vs one forward per frame (batch_max 1), through SemanticManager.embed (processor, model,
host copy), tiny random CLIP in float32 on the CPU, 64×64 frames, at 1 and 2 torch threads; medians of
``--rounds`` calls. benchmarks/kernels/test_bench_semantic.py times the same two calls under pytest-benchmark (and
checks that they agree); this script writes the JSON and plot shown in the README.

    python -m benchmarks.semantics.batching --out benchmarks/semantics/results
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlspec.evidence.cpu import identity as cpu_identity

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ENVS = 8


def median_ms(fn, rounds: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from rlspec.semantics.config import SemanticConfig
    from rlspec.semantics.manager import SemanticManager
    from rlspec.semantics.tiny import save_tiny_clip

    model_dir = save_tiny_clip(Path(tempfile.mkdtemp(prefix="semantic-batching-")) / "tiny-clip")
    frames = np.random.default_rng(0).integers(0, 256, (ENVS, 64, 64, 3), dtype=np.uint8)
    managers = {}
    for name, cap in (("per-frame", 1), ("batched", ENVS)):
        cfg = SemanticConfig(enable=True, model_name=str(model_dir), model_device="cpu", dtype_preference=("float32",),
                             batch_max=cap)
        managers[name] = SemanticManager(cfg, num_envs=ENVS, gamma=0.99, total_steps=1)
    torch.testing.assert_close(managers["per-frame"].embed(frames)[0], managers["batched"].embed(frames)[0],
                               rtol=1e-4, atol=1e-5)  # the same embeddings either way
    results = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        ms = {name: median_ms(lambda m=m: m.embed(frames), args.rounds) for name, m in managers.items()}
        results[f"{threads} thread{'s' * (threads > 1)}"] = dict(ms_per_8_frames=ms,
                                                                   speedup=ms["per-frame"] / ms["batched"])
    report = dict(envs=ENVS, frame="64x64 uint8", rounds=args.rounds,
                  model="tiny random CLIP (rlspec.semantics.tiny, float32, cpu)",
                  machine="shared 2-core CPU machine (other jobs running)", cpu=cpu_identity(), results=results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "semantic_batching.json").write_text(json.dumps(report, indent=1))
    plot(results, args.out / "semantic_batching.png")
    for key, r in results.items():
        print(f"{key}: per-frame {r['ms_per_8_frames']['per-frame']:.2f} ms, batched "
              f"{r['ms_per_8_frames']['batched']:.2f} ms for 8 frames: speedup {r['speedup']:.2f}x")
    return 0


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    keys, width = list(results), 0.38
    for j, name in enumerate(("per-frame", "batched")):
        xs = [i + (j - 0.5) * width for i in range(len(keys))]
        ax.bar(xs, [results[k]["ms_per_8_frames"][name] for k in keys], width, label=name)
    ax.set_xticks(range(len(keys)), [f"{k}\n×{results[k]['speedup']:.2f}" for k in keys])
    ax.set_ylabel("ms to embed 8 frames")
    ax.set_title("embedding 8 envs' frames (tiny CLIP, CPU)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
