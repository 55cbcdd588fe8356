"""The safe engine's verbs beside training: `rlspec eval RUN`, `rlspec plot RUN` and `rlspec compare safe` (the
local and the parallel execution on the same config).

    rlspec eval RUN [--episodes K] [--video]  # mean return/cost of the mean action; MP4 of an episode
    rlspec plot RUN                           # redraw RUN/plots/*.png
    rlspec compare safe --algo PPOLag --env ToyGoal-v0 [--out DIR]
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import torch

from rlspec import jsonio
from rlspec.algos.safe_ppo import Kit, env_feedback, make_state, policy_input
from rlspec.engines.safe import loop as safe
from rlspec.engines.safe.config import COMPARED_PARALLEL, PARALLEL_ONLY, SafeConfig
from rlspec.engines.safe.loop import panels
from rlspec.engines.safe.parallel import execution
from rlspec.envs import safety_gym
from rlspec.runs import config as runconfig
from rlspec.runs import shell
from rlspec.runs.compare import largest, mean
from rlspec.runs.faults import attempt
from rlspec.runs.plots import curve, draw
from rlspec.runs.rundir import EpisodeProgress, RunDir, load_run, read_metrics
from rlspec.runs.video import write_mp4
from rlspec.semantics.config import RELIABILITY_BINS


def plot(run_dir: Path) -> int:
    cfg = runconfig.from_dict(SafeConfig, RunDir.read_config(run_dir)["config"])
    for f in draw(run_dir, panels(cfg)):
        print(f)
    if cfg.semantic.calibrated:
        bins = range(RELIABILITY_BINS)
        f = curve(run_dir, [f"Risk/Reliability/Pred/{b}" for b in bins], [f"Risk/Reliability/Target/{b}" for b in bins],
                  "risk_reliability.png", "risk head reliability (held-out captures)", "mean prediction q_φ(e)",
                  "mean target g")
        print(f or "no held-out reliability curve yet (no risk update with held-out captures)")
    return 0


def evaluate(run_dir: Path, argv: list[str]) -> int:
    """Mean return and cost of the policy's mean action over K episodes (RUN/eval/eval.json); with --video,
    the first episode as RUN/eval/episode0.mp4 (imageio + imageio-ffmpeg; MuJoCo renders headless with
    MUJOCO_GL=egl or osmesa)."""
    p = shell.eval_parser(episodes=5, video="RUN/eval/episode0.mp4 of the first episode")
    p.add_argument("--size", type=int, default=256, help="video frame width and height (default 256)")
    p.add_argument("--max-frames", type=int, default=1000, help="frames at most in the video (default 1000)")
    opened = shell.eval_inputs(p, argv, lambda: load_run(run_dir, SafeConfig, ("actor", "controllers")))
    if opened is None:
        return 2
    args, cfg, ckpt = opened
    render = dict(render_mode="rgb_array", width=args.size, height=args.size) if args.video else {}
    seed = shell.eval_seed(args, cfg.seed)
    envs = safety_gym.make_vector(cfg.env_id, 1, seed, cfg.forced_cost, **render)
    state = make_state(cfg.algo, cfg.ppo, cfg.safety, envs.obs_dim, envs.act_dim, 1, Kit.named(cfg.kit),
                       torch.Generator().manual_seed(0))  # the weights are the checkpoint's
    state.actor.load_state_dict(ckpt["actor"])
    for k in ("obs_norm", "budget"):
        setattr(state, k, ckpt["controllers"][k])
    if state.budget is not None:
        state.budget.num_envs, state.budget.z = 1, torch.ones(1, dtype=state.budget.z.dtype)
    envs.reset()
    frames = [envs.envs[0].render()] if args.video else []
    progress = EpisodeProgress(args.episodes)
    while len(envs.finished) < args.episodes:
        with torch.no_grad():
            out = envs.step(state.actor(policy_input(state, envs.obs)).mean)
        env_feedback(state, out.reward, out.cost, out.terminated | out.truncated)
        progress.update(len(envs.finished))
        if args.video and not envs.finished and len(frames) < args.max_frames:
            frames.append(envs.envs[0].render())
    eps = envs.finished[:args.episodes]
    result = {"episodes": len(eps), **shell.episode_means(eps, ("EpRet", "EpCost", "EpLen"))}
    if frames:
        result["video"] = str(write_mp4(Path(run_dir) / "eval/episode0.mp4", frames))
    return shell.write_eval(run_dir, result, ckpt, seed)


def compare(argv: list[str]) -> int:
    """`rlspec compare safe [--algo A] [--env E] [--preset P] [--set k=v ...] [--out DIR]`: run the local and the
    parallel execution (2 envs in 2 workers unless --set says otherwise) on the same config into DIR/local and
    DIR/parallel, then compare every logged metric row by row (timings apart) and the env steps/s. Written to
    DIR/compare.json. With one process the parallel execution steps the same episodes, so the runs must be
    identical: exit 1 if any metric differs."""
    description = safe.describe()
    args = shell.compare_parser(description, compare.__doc__, "compare-ALGO-ENV-sSEED").parse_args(argv)

    def both() -> tuple[Path, dict[str, Path]]:
        cfg = shell.compare_config(description, args, list(COMPARED_PARALLEL))
        local = replace(cfg, execution="local", **PARALLEL_ONLY)
        out = shell.claim_compare_out(args.out or Path("runs") / f"compare-{cfg.algo}-{cfg.env_id}-s{cfg.seed}")
        return out, {"local": safe.run(local, out / "local", show_progress=not args.quiet),
                     "parallel": safe.run(cfg, out / "parallel", show_progress=not args.quiet,
                                          execution=execution(cfg))}

    status, ran = attempt("rlspec compare safe", both)
    if status is not None:
        return status
    out, runs = ran
    result = compare_runs(runs["local"], runs["parallel"])
    (out / "compare.json").write_text(jsonio.dumps(result))
    worst = max(result["max_diff"].items(), key=lambda kv: kv[1], default=("-", 0.0))
    print(f"rows: {result['rows']}; identical: {result['identical']} (largest difference {worst[1]:.3g} in "
          f"{worst[0]}); env steps/s local {result['fps']['local']:.0f}, parallel {result['fps']['parallel']:.0f} "
          f"(parallel/local {result['fps']['ratio']:.2f}x); written to {out / 'compare.json'}")
    return 0 if result["identical"] else 1


def compare_runs(local: Path, parallel: Path) -> dict:
    """Per metric (Time/* left out), the largest difference of two runs' rows in order (rlspec/runs/compare.py:
    |a − b| / max(|a|, |b|, 1), NaN equals NaN), whether they are identical, and their mean env steps/s."""
    a, b = read_metrics(local), read_metrics(parallel)
    keys = sorted(k for k in set().union(*a[:1], *b[:1]) if not k.startswith("Time/"))
    diff = largest(zip(a, b), keys)
    fps = {name: mean(rows, "Time/FPS") for name, rows in (("local", a), ("parallel", b))}
    fps["ratio"] = fps["parallel"] / fps["local"] if fps["local"] else math.nan
    return {"runs": {"local": str(local), "parallel": str(parallel)}, "rows": [len(a), len(b)],
            "identical": len(a) == len(b) and all(v == 0.0 for v in diff.values()), "max_diff": diff, "fps": fps}
