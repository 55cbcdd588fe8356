"""DreamerV3 train step: world model + behaviour update of rlspec's reference and fast kits
(rlspec/algos/dreamer.py ``train_step``) against sheeprl 0.8.4's own ``build_agent`` + ``train`` at an identical
configuration, in one run. sheeprl is the anchor: every ratio is sheeprl's s/step over ours (> 1: ours faster).

    nox -s bench_sheeprl [-- --configs 1m xs --steps 5 --threads 1]
    python -m benchmarks.dreamer.train_step [--configs 1m xs] [--steps 5] [--warmup 2] [--threads 1]
                                             [--out DIR]   (writes dreamer_train_step.json and .png)
    python -m benchmarks.dreamer.train_step --device cuda ...    (dreamer_train_step_cuda.json and .png)

With --device cuda all three train on the GPU; each step is synchronized before and after for its wall time,
ours runs as the fast engine's hot loop does (``without_value_checks``), and one more step of each under
torch.cuda.set_sync_debug_mode("error") records whether it waits for the device (``host_sync``: None, or the
first synchronizing call; the issue's "no host sync in the step").

Needs sheeprl==0.8.4 beside rlspec (the bench_sheeprl session's own venv; runtime code never imports sheeprl).

How the comparison is made fair (also written into the JSON, ``fairness``):
  * the same network at the same size: sheeprl's CNNEncoder / CNNDecoder against our world model's
    encoder='conv' (sheeprl's stages: Conv2d k4 s2 p1 → LayerNorm over channels eps 1e-3 → SiLU, channels
    cnn_mult·[1, 2, 4, 8], 4 stages 64 → 4, flattened as the embedding; the mirrored ConvTranspose2d decoder),
    the same RSSM layout (LayerNorm GRU, dense = recurrent units, one hidden layer in the prior and the
    posterior), reward / continue heads, actor and critic with sheeprl's mlp_layers. Parameter counts (world
    model + actor + critic, the target critic left out of both) are printed and asserted equal within 1 %.
  * the same batch: B × T sequences of one-channel (grayscale) 64 × 64 frames, 6 discrete actions, imagination
    horizon 15 from every posterior state, float32, no autocast, no torch.compile, one optimizer step each for
    world model, actor and critic, gradient clipping on all three. Our fast kit's own kernels are part of what
    is measured (its conv stages' LayerNorm + SiLU is one C++ kernel per direction, fast/channel_norm.py,
    built on first use: in the untimed warm-up). Both optimizers are torch's single-tensor
    Adam (sheeprl with fused=False, set here: its configs default to fused=True; ours foreach=False).
  * the same frames in each side's replay format: sheeprl's ``train`` gets what its ``sample_batches`` yields,
    float32 [T, B, 1, 64, 64] in 0..255 (normalized inside ``train``); ours gets the replay's packed2 uint8
    [T, B, 1, 72, 20] and unpacks (LUT), crops to the centered 64 × 64 and normalizes inside ``train_step``:
    work sheeprl does not do is inside our timing, not outside it. Same content: our 2-bit codes ×85.
  * denormal floats as each library leaves them (torch's default); --flush-denormals flushes them to zero for
    all three (torch.set_flush_denormal(True)): right after initialization the zero-initialized reward head and
    critic make the actor's gradients tiny, and denormal operands take a slow path in some CPU matmuls. At the
    1.1 M config it moved each implementation by <= 0.05 s/step and the ratios by < 0.05.
  * the same threads (torch.set_num_threads, default 1) in one process; the three are stepped round-robin
    (sheeprl, reference, fast, sheeprl, ...) so background load on a shared machine falls on all of them;
    ``warmup`` steps of each first, not timed; then wall and this process's CPU seconds per step, median.
  * sheeprl's metric aggregator is disabled (its log_level 0: the losses skip its metric-only entropies); our
    step returns its metrics as 0-d tensors (cheap, computed anyway).
Differences that remain (stated, not corrected): sheeprl's inputs are normalized to [−0.5, 0.5], ours to
[0, 1]; initializations and learning rates differ (no effect on cost); sheeprl zeroes the first action row and
runs its learned initial state through the first step, ours resets on is_first (same number of steps).

Also recorded per step: the system (kernel) CPU seconds and the minor page faults (getrusage). On this machine
the kernel's part is mostly the zeroing of fresh pages for new activations: a large share of sheeprl's and the
reference's step at XS, and one reason the fast kit is faster (fused kernels allocate less, its outputs are
prefaulted with huge pages); its cost per page varies between runs of the machine, and the ratios with it.

Also recorded, from one more (untimed) step of each: its launches (rlspec/evidence/launches.py: the ops that run
a kernel, the scalar reads, the CUDA kernels and the host syncs), the figure that says whether a step is
launch-bound. The fast kit's count has a budget (LAUNCH_BUDGET, tested).

Reported, never asserted (except the parameter match). On a machine shared with other jobs the wall times
measure the neighbours too: run it under ``nice`` with enough steps, or on a quiet machine.

The ratios hold for the CPU they were measured on, which the JSON's ``cpu`` and the plot's title name
(rlspec/evidence/cpu.py: model, x86-64 level, vector flags, caches): oneDNN's convolutions and our kernel's
vector width both follow the instruction set (benchmarks/dreamer/results/dreamer_phase_profile.md: an AVX2 EPYC).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.dreamer.anchors.sheeprl_config import model_overrides, unfused_adam
from rlspec.algos import dreamer
from rlspec.contracts.validate import without_value_checks
from rlspec.evidence import cpu, launches
from rlspec.reference import packed2

NUM_ACTIONS, HORIZON, SCREEN = 6, 15, 64
FRAME = (SCREEN, SCREEN)  # our centered crop of the 72 × 80 packed2 frame: sheeprl's 64 × 64 geometry
# name -> sizes: dense (sheeprl dense_units = our hidden, mlp_hidden), recurrent (deter), stoch × classes,
# cnn_mult, mlp_layers (sheeprl's heads, actor, critic; ours: actor and critic, the heads have one hidden layer)
CONFIGS = {
    "1m": dict(dense=128, recurrent=128, stoch=16, classes=16, cnn_mult=8, mlp_layers=1),
    "xs": dict(dense=256, recurrent=256, stoch=32, classes=32, cnn_mult=24, mlp_layers=1),  # sheeprl dreamer_v3_XS
    "s": dict(dense=512, recurrent=512, stoch=32, classes=32, cnn_mult=32, mlp_layers=2),  # sheeprl dreamer_v3_S
}
FAIRNESS = __doc__[__doc__.index("How the comparison"):__doc__.index("Also recorded per step")].strip()


# --------------------------------------------------------------------------------------------------
# Batches: one content, two replay formats
# --------------------------------------------------------------------------------------------------
FABRIC_PRECISION = {"fp32": "32-true", "bf16-mixed": "bf16-mixed"}  # ours -> sheeprl's fabric.precision


def make_batches(T: int, B: int, seed: int) -> tuple[dict, dict]:
    """(ours, sheeprl's) batch of the same sequences: 2-bit frames, actions, rewards; no episode end inside."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 4, (T, B, 1, 72, 80), generator=g, dtype=torch.uint8)  # [T, B, 1, 72, 80]
    action = torch.randint(0, NUM_ACTIONS, (T, B), generator=g)
    reward = torch.randn(T, B, generator=g)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0] = True
    ours = dict(obs=packed2.pack(codes), action=action, reward=reward, is_first=is_first,
                **{"continue": torch.ones(T, B)})
    top, left = (72 - SCREEN) // 2, (80 - SCREEN) // 2
    frames = codes[..., top:top + SCREEN, left:left + SCREEN].float() * 85  # [T, B, 1, 64, 64] in 0..255
    # sheeprl's rows (sample_batches: float32 [T, B, ...]): action taken at obs t one-hot, reward / flags [T, B, 1]
    theirs = {"rgb": frames, "actions": F.one_hot(action, NUM_ACTIONS).float(), "rewards": reward.unsqueeze(-1),
              "terminated": torch.zeros(T, B, 1), "truncated": torch.zeros(T, B, 1),
              "is_first": is_first.float().unsqueeze(-1)}
    return ours, theirs


# --------------------------------------------------------------------------------------------------
# The three steppers: (step, parameter count, config, parts); step () -> None runs one train step on a fresh
# copy of its batch; parts: the objects it trains (benchmarks/dreamer/phase_profile.py labels their calls)
# --------------------------------------------------------------------------------------------------
def ours(kit: str, size: dict, T: int, B: int, batch: dict, device: torch.device, precision: str = "fp32"):
    cfg = dreamer.DreamerConfig(deter=size["recurrent"], hidden=size["dense"], stoch=size["stoch"],
                                classes=size["classes"], mlp_hidden=size["dense"], mlp_layers=size["mlp_layers"],
                                encoder="conv", frame=FRAME, pool=1, cnn_mult=size["cnn_mult"], cnn_stages=4,
                                horizon=HORIZON, batch_size=B, seq_len=T, precision=precision)
    state = dreamer.make_state(cfg, NUM_ACTIONS, dreamer.Kit.named(kit), torch.Generator().manual_seed(0))
    for m in (state.wm, state.actor, state.critic, state.slow_critic):  # as the fast engine does
        m.to(device)
    batch = {k: v.to(device) for k, v in batch.items()}
    gen = torch.Generator(device).manual_seed(1)
    params = sum(p.numel() for m in (state.wm, state.actor, state.critic) for p in m.parameters())

    def step() -> None:
        with without_value_checks():  # the engine's hot loop: no value reads back to the host (none on CPU)
            dreamer.train_step(state, batch, gen)

    return step, params, dataclasses.asdict(cfg), {"state": state}


def sheeprl(size: dict, T: int, B: int, batch: dict, device: torch.device, precision: str = "fp32"):
    """sheeprl 0.8.4's DreamerV3 from its own config (exp=dreamer_v3, algo=dreamer_v3_XS with the sizes
    overridden), ``build_agent``, its optimizers through hydra and a plain CPU lightning Fabric at
    FABRIC_PRECISION[precision], as its ``main`` does; one step = its ``train``."""
    import gymnasium
    import hydra
    import numpy as np
    from hydra import compose, initialize_config_module
    from lightning.fabric import Fabric
    from omegaconf import OmegaConf
    from sheeprl.algos.dreamer_v3.agent import build_agent
    from sheeprl.algos.dreamer_v3.dreamer_v3 import train
    from sheeprl.algos.dreamer_v3.utils import Moments
    from sheeprl.utils.metric import MetricAggregator
    from sheeprl.utils.utils import dotdict

    overrides = [
        "exp=dreamer_v3", "algo=dreamer_v3_XS", "env=dummy", f"env.screen_size={SCREEN}", "env.num_envs=1",
        "algo.cnn_keys.encoder=[rgb]", "algo.mlp_keys.encoder=[]", f"fabric.accelerator={device.type}", "metric.log_level=0",
        *model_overrides(dense=size["dense"], recurrent=size["recurrent"], stoch=size["stoch"],
                         classes=size["classes"], cnn_mult=size["cnn_mult"], mlp_layers=size["mlp_layers"]),
        f"algo.horizon={HORIZON}", f"algo.per_rank_batch_size={B}", f"algo.per_rank_sequence_length={T}",
        "algo.compile.enabled=False", *unfused_adam(), f"fabric.precision={FABRIC_PRECISION[precision]}",
    ]
    with initialize_config_module("sheeprl.configs", version_base="1.3"):
        cfg = dotdict(OmegaConf.to_container(compose("config", overrides=overrides), resolve=True))
    MetricAggregator.disabled = True  # what its main does at metric.log_level 0
    torch.distributions.Distribution.set_default_validate_args(cfg.distribution.validate_args)  # as its cli does
    fabric = Fabric(accelerator=device.type, devices=1, precision=FABRIC_PRECISION[precision])
    obs_space = gymnasium.spaces.Dict({"rgb": gymnasium.spaces.Box(0, 255, (1, SCREEN, SCREEN), np.uint8)})
    world_model, actor, critic, target_critic, _ = build_agent(fabric, [NUM_ACTIONS], False, cfg, obs_space)
    opts = [hydra.utils.instantiate(cfg.algo[k].optimizer, params=m.parameters(), _convert_="all")
            for k, m in (("world_model", world_model), ("actor", actor), ("critic", critic))]
    opts = fabric.setup_optimizers(*opts)
    m = cfg.algo.actor.moments
    moments = Moments(m.decay, m.max, m.percentile.low, m.percentile.high)
    params = sum(p.numel() for mod in (world_model, actor, critic) for p in mod.parameters())
    batch = {k: v.to(device) for k, v in batch.items()}

    def step() -> None:
        data = {k: v.clone() for k, v in batch.items()}  # train writes is_first[0] in place
        train(fabric, world_model, actor, critic, target_critic, *opts, data, None, cfg, False, [NUM_ACTIONS],
              moments)

    return step, params, {"overrides": overrides}, {"world_model": world_model, "actor": actor, "critic": critic,
                                                     "target_critic": target_critic}


# --------------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------------
def host_sync(step) -> str | None:
    """CUDA: None if one step never waits for the device (torch.cuda.set_sync_debug_mode 'error'), else the
    first synchronizing call's message."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
        return None
    except RuntimeError as e:
        return str(e).splitlines()[0]
    finally:
        torch.cuda.set_sync_debug_mode("default")


def measure(name: str, size: dict, T: int, B: int, steps: int, warmup: int, device: torch.device,
            precision: str = "fp32") -> dict:
    batch_ours, batch_theirs = make_batches(T, B, seed=0)
    steppers = {"sheeprl": sheeprl(size, T, B, batch_theirs, device, precision),
                "reference": ours("reference", size, T, B, batch_ours, device, precision),
                "fast": ours("fast", size, T, B, batch_ours, device, precision)}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    params = {k: v[1] for k, v in steppers.items()}
    print(f"[{name}] parameters (world model + actor + critic): {params}", flush=True)
    spread = max(params.values()) / min(params.values()) - 1
    assert spread <= 0.01, f"parameter counts differ by {spread:.2%} (> 1 %): {params}"
    walls: dict[str, list[float]] = {k: [] for k in steppers}
    cpus: dict[str, list[float]] = {k: [] for k in steppers}
    kernel: dict[str, list[float]] = {k: [] for k in steppers}  # system CPU s: mostly page faults here
    faults: dict[str, list[int]] = {k: [] for k in steppers}  # minor page faults (fresh pages touched)
    for i in range(warmup + steps):  # round-robin: background load falls on all three alike
        for k, (step, *_) in steppers.items():
            sync()
            w0, c0, r0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
            step()
            sync()
            w, c, r1 = time.perf_counter() - w0, time.process_time() - c0, resource.getrusage(resource.RUSAGE_SELF)
            if i >= warmup:
                walls[k].append(w)
                cpus[k].append(c)
                kernel[k].append(r1.ru_stime - r0.ru_stime)
                faults[k].append(r1.ru_minflt - r0.ru_minflt)
            print(f"[{name}] {k:9s} step {i}{' (warm-up)' if i < warmup else ''}: {w:.3f} s wall, {c:.3f} s CPU "
                  f"({r1.ru_stime - r0.ru_stime:.3f} s system, {r1.ru_minflt - r0.ru_minflt} page faults)", flush=True)
    impls = {k: {"params": params[k], "wall_s_per_step": statistics.median(walls[k]),
                 "cpu_s_per_step": statistics.median(cpus[k]), "system_s_per_step": statistics.median(kernel[k]),
                 "page_faults_per_step": statistics.median(faults[k]), "wall_s": walls[k], "cpu_s": cpus[k],
                 "system_s": kernel[k], "page_faults": faults[k], "config": steppers[k][2],
                 "host_sync": host_sync(steppers[k][0]) if device.type == "cuda" else None,
                 "launches": launches.count(steppers[k][0])} for k in steppers}
    anchor = impls["sheeprl"]
    ratios = {k: {"wall": anchor["wall_s_per_step"] / v["wall_s_per_step"],
                  "cpu": anchor["cpu_s_per_step"] / v["cpu_s_per_step"]} for k, v in impls.items() if k != "sheeprl"}
    return {"size": size, "batch": B, "seq_len": T, "horizon": HORIZON, "actions": NUM_ACTIONS,
            "frame": [1, SCREEN, SCREEN], "implementations": impls, "ratios_vs_sheeprl": ratios}


def plot(results: dict, path: Path, title: str) -> None:
    """Two panels, wall and process CPU s/step (median), one bar group per config, ratios vs sheeprl on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ("sheeprl", "reference", "fast")
    colors = {"sheeprl": "tab:gray", "reference": "tab:blue", "fast": "tab:orange"}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100)
    width = 0.8 / len(names)
    for ax, clock in zip(axes, ("wall", "cpu")):
        for j, impl in enumerate(names):
            xs = [i + (j - 1) * width for i in range(len(results))]
            ys = [r["implementations"][impl][f"{clock}_s_per_step"] for r in results.values()]
            bars = ax.bar(xs, ys, width, label=impl, color=colors[impl])
            if clock == "cpu":  # the system (kernel) part of the CPU time, hatched at the bottom of each bar
                ax.bar(xs, [r["implementations"][impl]["system_s_per_step"] for r in results.values()], width,
                       fill=False, hatch="///", edgecolor="black", linewidth=0,
                       label="system (page faults)" if j == len(names) - 1 else None)
            for bar, r in zip(bars, results.values()):
                ratio = "" if impl == "sheeprl" else f"\n{r['ratios_vs_sheeprl'][impl][clock]:.2f}×"
                ax.annotate(f"{bar.get_height():.2f}s{ratio}", (bar.get_x() + width / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(results)))
        ax.set_xticklabels([f"{k}: {r['implementations']['sheeprl']['params'] / 1e6:.2f} M params"
                            for k, r in results.items()])
        ax.set_ylabel(f"s / train step ({'wall' if clock == 'wall' else 'process CPU'}, median)")
        ax.margins(y=0.25)
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


GOAL = 1.5  # fast / sheeprl on CPU, wall time per update
# kernel ops of one fast update at the 1m config and T = 64 on a CPU (any B): 9,503 measured when it was set.
# A regression guard (tests/benchmarks/test_dreamer_launches.py): each op is a launch on CUDA, where ~5 µs
# apiece make ~50 ms an update before any kernel time; CUDA graphs are the way below it.
LAUNCH_BUDGET = 10_000


def markdown(report: dict) -> str:
    """The JSON's table: per config the parameter count and the median wall seconds per update of each side
    (the system part beside), ours as sheeprl's over ours, the fast kit against the goal."""
    device = report.get("device", "CPU")  # older JSONs: no device key (CPU), the CPU as a string
    cpu_name = report["device"] if device != "CPU" else (
        cpu.label(report["cpu"]) if isinstance(report["cpu"], dict) else report["cpu"])
    lines = [f"{cpu_name}, {report['torch_threads']} thread(s), {report.get('precision', 'fp32')}, median of "
             f"{report['steps']} timed updates after {report['warmup']}:", "",
             f"| config (params) | sheeprl {report['sheeprl']} | reference | fast | fast / sheeprl |",
             "|---|---|---|---|---|"]
    for name, r in report["results"].items():
        impl, ratio = r["implementations"], r["ratios_vs_sheeprl"]

        def cell(k: str) -> str:
            v = impl[k]
            return f"{v['wall_s_per_step']:.2f} s ({v['system_s_per_step']:.2f} s system)"
        fast = ratio["fast"]["wall"]
        verdict = "met" if fast >= GOAL else "not met"
        lines.append(f"| {name} ({impl['fast']['params'] / 1e6:.2f} M) | {cell('sheeprl')} | {cell('reference')} "
                     f"({ratio['reference']['wall']:.2f}×) | {cell('fast')} | **{fast:.2f}×** (goal {GOAL}×: "
                     f"{verdict}) |")
    counted = {name: r["implementations"] for name, r in report["results"].items()
               if all("kernel_ops" in v.get("launches", {}) for v in r["implementations"].values())}
    if counted:  # JSONs from before the launch count have none
        lines += ["", "Launches per update, from one more step of each (rlspec/evidence/launches.py): kernel ops, the "
                  "CPU's estimate; CUDA kernels and host syncs where it ran on CUDA.", "",
                  "| config | sheeprl | reference | fast |", "|---|---|---|---|"]
        for name, impl in counted.items():
            cells = [(f"{v['launches']['kernel_ops']:,} ops" + (f", {v['launches']['cuda_kernels']:,} kernels, "
                      f"{v['launches']['cuda_syncs']} syncs" if v["launches"]["cuda_kernels"] else ""))
                     for v in (impl["sheeprl"], impl["reference"], impl["fast"])]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def title(report: dict) -> str:
    r = next(iter(report["results"].values()))
    return (f"DreamerV3 train step on {report['device']}: B{r['batch']}×T{r['seq_len']}, 64×64×1 frames, "
            f"{r['actions']} actions, H{r['horizon']}, fp32, {report['torch_threads']} thread(s); "
            f"ratio = sheeprl {report['sheeprl']} / ours"
            + ("" if report["device"] != "CPU" else f"\n{cpu.label(report['cpu'])}"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=["1m"])
    p.add_argument("--steps", type=int, default=5, help="timed steps of each implementation")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps of each implementation first")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for all three")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--flush-denormals", action="store_true", help="flush denormals to zero (all three)")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:K]: all three on it (files *_cuda.json/png)")
    p.add_argument("--precision", choices=list(FABRIC_PRECISION), default="fp32",
                   help="all three: ours dreamer.precision, sheeprl fabric.precision (files *_bf16-mixed.json/png)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    flush = args.flush_denormals and torch.set_flush_denormal(True)
    results = {name: measure(name, CONFIGS[name], args.seq_len, args.batch, args.steps, args.warmup, device,
                             args.precision) for name in args.configs}
    import sheeprl as sheeprl_pkg

    report = {"what": "DreamerV3 train step (world model + behaviour), s/step; ratios = sheeprl / ours (> 1: ours "
                      "faster)", "fairness": FAIRNESS, "torch": torch.__version__, "sheeprl": sheeprl_pkg.__version__,
              "torch_threads": torch.get_num_threads(), "flush_denormal": flush, "niceness": os.nice(0),
              "steps": args.steps, "warmup": args.warmup, "cpu": cpu.identity(),
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
              "python": platform.python_version(), "precision": args.precision, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "dreamer_train_step" + ("" if device.type == "cpu" else "_cuda") + (
        "" if args.precision == "fp32" else f"_{args.precision}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.out / f"{stem}.png", title(report))
    (args.out / f"{stem}.md").write_text(markdown(report))
    for name, r in results.items():
        row = ", ".join(f"{k} {v['wall_s_per_step']:.3f} s ({v['cpu_s_per_step']:.3f} CPU, "
                        f"{v['system_s_per_step']:.3f} system)"
                        for k, v in r["implementations"].items())
        ratio = ", ".join(f"{k} {v['wall']:.2f}× wall / {v['cpu']:.2f}× CPU"
                          for k, v in r["ratios_vs_sheeprl"].items())
        print(f"{name}: {row}; vs sheeprl: {ratio}")


if __name__ == "__main__":
    main()
