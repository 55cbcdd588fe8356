"""The Dreamer engine's verbs beyond `train` — `rlspec eval`, `rlspec plot`, `rlspec compare dreamer` — and the
execution of a config (``execution``); they import torch, so the package loads this module on first use.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from rlspec import jsonio
from rlspec.engines.dreamer import device
from rlspec.engines.dreamer.config import EXECUTIONS, DreamerRunConfig, describe
from rlspec.engines.dreamer.local import LocalExecution
from rlspec.engines.dreamer.loop import (
    build,
    panels,
    read_checkpoint,
    reconstruction_strip,
    resolve_device,
    run_episodes,
    run_start_cells,
    validate,
    video_frame,
)
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.compare import largest, mean
from rlspec.runs.faults import attempt
from rlspec.runs.plots import draw, overlay
from rlspec.runs.rundir import EpisodeProgress, RunDir, read_metrics


def execution(cfg: DreamerRunConfig):
    """The execution of ``cfg.execution``: LocalExecution or DeviceExecution."""
    return (device.DeviceExecution if cfg.execution == "device" else LocalExecution)(cfg)


DESCRIPTION = describe(validate, lambda cfg, out, resume, stop_after, show_progress: execution(cfg).run(
    out, resume=resume, stop_after_steps=stop_after, show_progress=show_progress))


def build_config(preset: str = "default", overrides: list[str] = (), task: str | None = None) -> DreamerRunConfig:
    return shell.build_config(DESCRIPTION, preset, [*([f"task={task}"] if task else []), *overrides])


def restore_ring(cfg: DreamerRunConfig, saved):
    """The replay ring of a checkpoint, on the CPU: the local execution's ring is saved as the object, the
    device execution's as its state_dict."""
    return device.cpu_ring(cfg, saved) if cfg.execution == "device" else saved


def load_config(run_dir: Path) -> DreamerRunConfig:
    return runconfig.from_dict(DreamerRunConfig, RunDir.read_config(run_dir)["config"])


def plot(run_dir: Path) -> int:
    """Redraw RUN/plots/*.png from metrics.csv (and the reconstruction strip from the last checkpoint)."""
    cfg = load_config(run_dir)
    for f in draw(run_dir, panels(cfg)):
        print(f)
    ckpt_path = Path(run_dir) / "checkpoints/last.pt"
    if ckpt_path.is_file():
        try:
            ckpt = read_checkpoint(ckpt_path)
        except runconfig.ConfigError as err:
            print(f"rlspec plot: error: no reconstruction strip: {err}", file=sys.stderr)
            return 2
        state = build(cfg, torch.Generator().manual_seed(cfg.seed))
        state.load_state_dict(ckpt["state"])
        f = reconstruction_strip(state, restore_ring(cfg, ckpt["ring"]), Path(run_dir) / "plots/reconstruction.png",
                                 cfg.seed)
        if f is not None:
            print(f)
    return 0


def evaluate(run_dir: Path, argv: list[str]) -> int:
    """Greedy policy (argmax of the actor) of RUN's last checkpoint over K episodes on fresh envs (another seed):
    mean return, length and success rate in RUN/eval/eval.json; with --video, RUN/eval/episodes.mp4 of them."""
    p = shell.eval_parser(episodes=10, video="RUN/eval/episodes.mp4: one frame per vector step (the first: the "
                                             "reset), the num_envs screens side by side, grayscale, upscaled")
    p.add_argument("--scale", type=int, default=4, help="video upscaling of the 72 x 80 frames (default 4)")
    p.add_argument("--fps", type=int, default=15, help="video frames per second (default 15)")
    p.add_argument("--start-cells", action="store_true", help="one episode from every start cell of the room "
                   "instead of the first K episodes to end (env room; --episodes and --video do not apply)")
    checkpoint = Path(run_dir) / "checkpoints/last.pt"
    opened = shell.eval_inputs(p, argv, lambda: (load_config(run_dir), read_checkpoint(checkpoint)),
                               positive=("episodes", "scale", "fps"))
    if opened is None:
        return 2
    args, cfg, ckpt = opened
    if args.start_cells and (args.video or cfg.env != "room"):
        p.error("--start-cells: the room's start cells, without --video" + (
            f" (this run's env is {cfg.env!r})" if cfg.env != "room" else ""))
    seed = shell.eval_seed(args, cfg.seed)
    gen = torch.Generator().manual_seed(seed)
    state = build(cfg, gen)
    state.load_state_dict(ckpt["state"])
    if args.start_cells:
        return shell.write_eval(run_dir, run_start_cells(cfg, state, seed, gen), ckpt, seed)
    frames = [] if args.video else None
    result = run_episodes(cfg, state, args.episodes, seed, gen, frames, EpisodeProgress(args.episodes))
    if frames is not None:
        from rlspec.runs.video import write_mp4

        images = [video_frame(f, args.scale) for f in frames]
        result.update(video=str(write_mp4(Path(run_dir) / "eval/episodes.mp4", images, args.fps)),
                      video_frames=len(images))
    return shell.write_eval(run_dir, result, ckpt, seed)


DETERMINISTIC = {"commit_stride": 1, "steps_per_rollout": 1, "sync_every": 1}


COMPARED = ("Loss/loss", "Loss/recon_loss", "Loss/reward_loss", "Loss/continue_loss", "Loss/kl_loss",
            "Loss/actor_loss", "Loss/critic_loss", "Behavior/entropy", "Behavior/values", "Metrics/EpRet",
            "Metrics/SuccessRate", "Train/replay_ratio")


def compare(argv: list[str]) -> int:
    """`rlspec compare dreamer [--task T] [--preset P] [--set k=v ...] [--updates K] [--rtol X] [--out DIR]`:
    the local and the device execution from one seed on one config into DIR/local and DIR/device;
    DIR/compare.json (per metric, the largest difference |a − b| / max(|a|, |b|, 1), rlspec/runs/compare.py,
    over the rows up to K updates, and over all rows; env steps/s and updates/s of both) and DIR/compare.png
    (their curves side by side). In the deterministic mode (commit_stride = steps_per_rollout = sync_every = 1,
    device cpu) the rows up to K updates must agree within --rtol: exit 1 if not."""
    p = shell.compare_parser(DESCRIPTION, compare.__doc__, "compare-dreamer-TASK-sSEED")
    p.add_argument("--updates", type=int, default=16, help="K: compare the rows up to K updates (default 16)")
    p.add_argument("--rtol", type=float, default=None,
                   help="agreement tolerance on |a − b| / max(|a|, |b|, 1) (default 1e-6 with kit=reference, "
                        "1e-3 with kit=fast)")
    args = p.parse_args(argv)

    def both() -> tuple[DreamerRunConfig, Path, dict[str, Path]]:
        cfg = shell.compare_config(DESCRIPTION, args, ["execution=device"])
        validate(cfg)
        out = shell.claim_compare_out(args.out or Path("runs") / f"compare-dreamer-{cfg.task}-s{cfg.seed}")
        return cfg, out, {name: execution(runconfig.for_execution(cfg, name, EXECUTIONS)).run(
                              out / name, show_progress=not args.quiet) for name in EXECUTIONS}

    status, ran = attempt("rlspec compare dreamer", both)
    if status is not None:
        return status
    cfg, out, runs = ran
    deterministic = all(getattr(cfg, k) == v for k, v in DETERMINISTIC.items()) and resolve_device(cfg).type == "cpu"
    rtol = args.rtol if args.rtol is not None else 1e-6 if cfg.kit == "reference" else 1e-3
    result = compare_runs(runs["local"], runs["device"], args.updates, rtol)
    result.update(deterministic=deterministic, kit=cfg.kit, device=str(resolve_device(cfg)))
    (out / "compare.json").write_text(jsonio.dumps(result))
    compare_plot(runs["local"], runs["device"], out / "compare.png")
    speed = result["speed"]
    verdict = (f"agree within {rtol:g}: {'yes' if result['agree'] else 'NO'}" if deterministic else
               "not the deterministic mode, so the runs may differ and no agreement is checked")
    print(f"first {args.updates} updates ({result['rows_compared']} rows): largest difference "
          f"{result['worst_first'][1]:.3g} in {result['worst_first'][0]} ({verdict}); env steps/s local "
          f"{speed['local']['env_steps_per_s']:.0f}, device {speed['device']['env_steps_per_s']:.0f}; "
          f"written to {out / 'compare.json'}")
    return 1 if deterministic and not result["agree"] else 0


def compare_runs(local: Path, on_device: Path, updates: int, rtol: float) -> dict:
    """Largest difference (rlspec/runs/compare.py) per compared metric: over the rows with at most ``updates``
    updates, and over all rows; rows are matched by env step."""
    a, b = read_metrics(local), read_metrics(on_device)
    pairs = [(ra, rb) for ra, rb in zip(a, b) if ra["step"] == rb["step"]]
    first = [(ra, rb) for ra, rb in pairs if ra.get("Train/updates", 0) <= updates]

    w_first, w_all = largest(first, COMPARED), largest(pairs, COMPARED)
    top = max(w_first.items(), key=lambda kv: kv[1])
    speed = {name: {k: mean(rows, f"Time/{k}") for k in ("env_steps_per_s", "updates_per_s")}
             for name, rows in (("local", a), ("device", b))}
    return {"runs": {"local": str(local), "device": str(on_device)}, "rows": [len(a), len(b)],
            "rows_compared": len(first), "updates": updates, "rtol": rtol,
            "agree": len(a) == len(b) and len(first) > 0 and top[1] <= rtol, "worst_first": list(top),
            "max_rel_diff_first": w_first, "max_rel_diff_all": w_all,
            "speed": speed}


def compare_plot(local: Path, on_device: Path, path: Path) -> Path:
    """One panel per compared metric: the local execution's curve and the device execution's over env steps."""
    return overlay({"local": local, "device": on_device}, COMPARED, path)
