"""Where a DreamerV3 train step's time goes, phase by phase: the reference and fast kits (and sheeprl 0.8.4
where it is installed) at the configurations and batch of benchmarks/dreamer/train_step.py, one thread.

    python -m benchmarks.dreamer.phase_profile [--configs 1m xs] [--rounds 3] [--warmup 1]
                                                [--kernel-flags "-O3 -march=native ..."] [--out DIR]

Writes dreamer_phase_profile.json (the CPU's identity inside, from rlspec/evidence/cpu.py) and prints
a markdown table. ``--kernel-flags`` adds an arm: the fast kit with its channel LayerNorm + SiLU kernel
(fast/channel_norm.py) built with these flags instead of FLAGS.

Method. Each phase is a ``record_function`` label put around the calls that make it (innermost label wins):
conv (every Conv2d / ConvTranspose2d of encoder and decoder: oneDNN), channel LN+SiLU (the conv stages'
LayerNorm over channels + SiLU: our ``norm_silu``, sheeprl's LayerNormChannelLast and SiLU modules), encoder/
decoder other (the rest of those modules), RSSM observe scan, imagination (the prior steps; the actor inside
it counts as actor/critic), actor/critic MLPs, reward/continue heads, optimizer + clip (torch's
``Optimizer.*`` and ``clip_grad_norm_``); the rest of the step is "losses & other" (unpacking, KL, two-hot,
returns, Python). A backward op counts to the phase of the forward op that made its autograd node (matched
by sequence number). torch.profiler times ops by the wall clock; each phase's share of the profiled step is
applied to the process CPU seconds of an unprofiled step of the same round (the profiler's own overhead and
the neighbours' load on a shared machine stay out of the seconds, not out of the shares). Each round steps
every arm twice (unprofiled, then profiled), the arms interleaved; medians over rounds. Per step also: system
CPU seconds and minor page faults (getrusage) and the load average. Reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import statistics
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from benchmarks.dreamer import train_step as bench
from rlspec.evidence import cpu
from rlspec.fast import channel_norm, cpu_kernel

LABEL = "phase::"
PHASES = ("conv", "channel LN+SiLU", "encoder/decoder other", "RSSM observe scan", "imagination",
          "actor/critic MLPs", "reward/continue heads", "optimizer + clip", "losses & other")
OTHER = "losses & other"
BACKWARD = "autograd::engine::evaluate_function"


# --------------------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------------------
def labelled(fn, phase: str):
    """fn, run inside record_function(LABEL + phase)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with record_function(LABEL + phase):
            return fn(*args, **kwargs)

    return run


def label(obj, attr: str, phase: str) -> None:
    """Replace obj.attr (a method, an nn.Module's forward, a frozen Kit's field) by its labelled twin."""
    object.__setattr__(obj, attr, labelled(getattr(obj, attr), phase))


def label_conv_stack(stack: nn.Module) -> None:
    """encoder / decoder: the module, its convolutions, its LayerNorm + SiLU (ours: norm_silu; sheeprl's
    LayerNormChannelLast and SiLU modules)."""
    label(stack, "forward", "encoder/decoder other")
    for m in stack.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            label(m, "forward", "conv")
        elif isinstance(m, nn.SiLU) or type(m).__name__ == "LayerNormChannelLast":
            label(m, "forward", "channel LN+SiLU")
    if hasattr(stack, "norm_silu"):
        label(stack, "norm_silu", "channel LN+SiLU")


def label_ours(parts: dict) -> None:
    state = parts["state"]
    wm = state.wm
    label_conv_stack(wm.encoder)
    label_conv_stack(wm.decoder)
    label(wm.rssm, "observe", "RSSM observe scan")
    label(state.kit, "imagine", "imagination")
    for m in (state.actor, state.critic, state.slow_critic):
        label(m, "forward", "actor/critic MLPs")
    for m in (wm.reward_head, wm.continue_head):
        label(m, "forward", "reward/continue heads")


def label_sheeprl(parts: dict) -> None:
    wm = parts["world_model"]
    label_conv_stack(wm.encoder)
    label_conv_stack(wm.observation_model)
    for name in ("dynamic", "_representation", "project_observations", "prior_logits"):
        if hasattr(wm.rssm, name):
            label(wm.rssm, name, "RSSM observe scan")
    label(wm.rssm, "imagination", "imagination")
    for m in (parts["actor"], parts["critic"], parts["target_critic"]):
        label(m, "forward", "actor/critic MLPs")
    for m in (wm.reward_model, wm.continue_model):
        label(m, "forward", "reward/continue heads")


@contextlib.contextmanager
def labelled_clipping():
    """torch.nn.utils.clip_grad_norm_ (ours and Fabric's clip_gradients call it) labelled 'optimizer + clip'."""
    original = nn.utils.clip_grad_norm_
    nn.utils.clip_grad_norm_ = labelled(original, "optimizer + clip")
    try:
        yield
    finally:
        nn.utils.clip_grad_norm_ = original


# --------------------------------------------------------------------------------------------------
# Attribution of a profiled step's events to phases
# --------------------------------------------------------------------------------------------------
def own_phase(event) -> str | None:
    """The innermost phase label around ``event`` (itself included); 'optimizer + clip' for torch's
    Optimizer.* scopes; None outside every label."""
    while event is not None:
        if event.name.startswith(LABEL):
            return event.name[len(LABEL):]
        if event.name.startswith("Optimizer."):
            return "optimizer + clip"
        event = event.cpu_parent
    return None


def backward_node(event):
    """The autograd node evaluation ``event`` runs in (its nearest evaluate_function ancestor), or None."""
    while event is not None:
        if event.name.startswith(BACKWARD):
            return event
        event = event.cpu_parent
    return None


def attribute(events) -> dict[str, dict[str, float]]:
    """{phase: {'forward': s, 'backward': s}} from the events' self times (µs -> s)."""
    made_by: dict[int, str] = {}  # autograd sequence number -> phase of the forward op that made the node
    for e in events:
        if e.sequence_nr >= 0 and backward_node(e) is None:
            made_by.setdefault(e.sequence_nr, own_phase(e) or OTHER)
    out = {p: {"forward": 0.0, "backward": 0.0} for p in PHASES}
    for e in events:
        node = backward_node(e)
        if node is None:
            out[own_phase(e) or OTHER]["forward"] += e.self_cpu_time_total / 1e6
        else:
            out[made_by.get(node.sequence_nr, OTHER)]["backward"] += e.self_cpu_time_total / 1e6
    return out


def conv_ops(events) -> dict[str, int]:
    """Count of each aten convolution op under a 'conv' label (forward only): which kernels the convolutions
    reach (aten::mkldnn_convolution: oneDNN)."""
    counts: dict[str, int] = {}
    for e in events:
        if e.name.startswith("aten::") and "conv" in e.name and own_phase(e) == "conv":
            counts[e.name] = counts.get(e.name, 0) + 1
    return counts


# --------------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------------
def timed(step) -> dict:
    c0, r0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    step()
    w, c, r1 = time.perf_counter() - w0, time.process_time() - c0, resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": c, "wall_s": w, "system_s": r1.ru_stime - r0.ru_stime, "page_faults": r1.ru_minflt - r0.ru_minflt}


def profiled(step) -> tuple[dict, dict]:
    with labelled_clipping(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function(LABEL + OTHER):
            step()
    events = prof.events()
    return attribute(events), conv_ops(events)


def with_kernel(flags: tuple[str, ...] | None, step):
    """step, run with the channel kernel built with ``flags`` (None: as fast/channel_norm.py builds it)."""
    if flags is None:
        return step
    lib = channel_norm.library(flags)

    def run() -> None:
        default, channel_norm.library = channel_norm.library, lambda: lib
        try:
            step()
        finally:
            channel_norm.library = default

    return run


def arms(size: dict, T: int, B: int, kernel_flags: tuple[str, ...] | None) -> dict:
    batch_ours, batch_theirs = bench.make_batches(T, B, seed=0)
    cpu_dev = torch.device("cpu")
    out = {}
    try:
        import sheeprl  # noqa: F401

        step, _, _, parts = bench.sheeprl(size, T, B, batch_theirs, cpu_dev)
        label_sheeprl(parts)
        out["sheeprl"] = step
    except ImportError:
        print("sheeprl is not installed: its arm is left out", flush=True)
    ours = [("reference", "reference", None), ("fast", "fast", None)]
    if kernel_flags is not None:
        changed = [f"+{f}" for f in kernel_flags if f not in cpu_kernel.FLAGS]
        changed += [f"−{f}" for f in cpu_kernel.FLAGS if f not in kernel_flags]
        ours.append((f"fast (kernel {' '.join(changed)})", "fast", kernel_flags))
    for name, kit, flags in ours:
        step, _, _, parts = bench.ours(kit, size, T, B, batch_ours, cpu_dev)
        label_ours(parts)
        out[name] = with_kernel(flags, step)
    return out


def measure(name: str, size: dict, T: int, B: int, rounds: int, warmup: int, kernel_flags) -> dict:
    steppers = arms(size, T, B, kernel_flags)
    runs: dict[str, list] = {k: [] for k in steppers}
    for i in range(warmup + rounds):
        for k, step in steppers.items():
            plain = timed(step)
            phases, convs = profiled(step)
            print(f"[{name}] {k:10s} round {i}{' (warm-up)' if i < warmup else ''}: {plain['cpu_s']:.3f} s CPU, "
                  f"{plain['wall_s']:.3f} s wall, {plain['system_s']:.3f} s system, {plain['page_faults']} faults, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
            if i >= warmup:
                runs[k].append({**plain, "phases": phases, "conv_ops": convs, "load_1min": os.getloadavg()[0]})
    return {k: summarize(v) for k, v in runs.items()}


def summarize(runs: list[dict]) -> dict:
    """Medians over rounds; phase seconds = share of the profiled step × the unprofiled step's CPU s."""
    cpu_s = statistics.median(r["cpu_s"] for r in runs)
    phases = {}
    for p in PHASES:
        shares = {d: [r["phases"][p][d] / sum(sum(v.values()) for v in r["phases"].values()) for r in runs]
                  for d in ("forward", "backward")}
        fwd, bwd = statistics.median(shares["forward"]), statistics.median(shares["backward"])
        phases[p] = {"share": fwd + bwd, "s": (fwd + bwd) * cpu_s, "forward_s": fwd * cpu_s, "backward_s": bwd * cpu_s}
    return {"cpu_s_per_step": cpu_s, "wall_s_per_step": statistics.median(r["wall_s"] for r in runs),
            "system_s_per_step": statistics.median(r["system_s"] for r in runs),
            "page_faults_per_step": statistics.median(r["page_faults"] for r in runs),
            "load_1min": [r["load_1min"] for r in runs], "phases": phases, "conv_ops": runs[-1]["conv_ops"],
            "runs": runs}


def table(results: dict) -> str:
    lines = []
    for name, impls in results.items():
        names = list(impls)
        lines += [f"\n**{name}** (process CPU s per step, share in parentheses)\n",
                  "| phase | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for p in PHASES:
            cells = (f"{impls[k]['phases'][p]['s']:.3f} ({impls[k]['phases'][p]['share']:.0%})" for k in names)
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
        cells = (f"**{impls[k]['cpu_s_per_step']:.3f}**" for k in names)
        lines.append("| **step (unprofiled)** | " + " | ".join(cells) + " |")
        cells = (f"{impls[k]['system_s_per_step']:.3f} ({impls[k]['page_faults_per_step']:.0f} faults)" for k in names)
        lines.append("| of which system (page faults) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", nargs="+", choices=list(bench.CONFIGS), default=["1m", "xs"])
    p.add_argument("--rounds", type=int, default=3, help="measured rounds (each arm: one plain + one profiled step)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (the kernel builds here)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--kernel-flags", type=str.split, default=None,
                   help="an extra fast arm: the channel kernel built with these compiler flags")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    flags = tuple(args.kernel_flags) if args.kernel_flags else None
    ident = cpu.identity()
    results = {name: measure(name, bench.CONFIGS[name], args.seq_len, args.batch, args.rounds, args.warmup, flags)
               for name in args.configs}
    report = {"what": "DreamerV3 train step by phase, process CPU s (module docstring: method)",
              "method": __doc__[__doc__.index("Method."):].strip(), "cpu": ident, "cpu_label": cpu.label(ident),
              "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "niceness": os.nice(0),
              "kernel_flags": {"fast": list(cpu_kernel.FLAGS), "extra arm": flags and list(flags)},
              "batch": args.batch, "seq_len": args.seq_len, "rounds": args.rounds, "warmup": args.warmup,
              "load_average_end": os.getloadavg(), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "dreamer_phase_profile.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{cpu.label(ident)}\n{table(results)}\n\nwrote {path}")


if __name__ == "__main__":
    main()
