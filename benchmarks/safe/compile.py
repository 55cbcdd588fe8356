"""Does torch.compile pay in the safe-RL engines? One run times the two
phases of an epoch at the engine's network size ([64, 64] tanh, OmniSafe's) on a fixed rollout:

* update: ``rlspec.algos.trust_region.update`` (the PPO family's minibatch loop: KL check, two critic steps,
  the actor step) on one rollout, each variant from the same weights and generator state;
* act: the batched policy call of a vector step (``rlspec.algos.safe_ppo.act``) at a few env counts.

Variants, each against the eager engine (the anchor, ratio = eager time / variant time, above 1 pays):
``compiled-nets`` (``nn.Module.compile()`` on the actor's and critics' MLPs: state_dict keys unchanged),
``adam-foreach`` and ``adam-fused`` (not compile: torch's multi-tensor and fused CPU Adam, for where the update's
time goes). One thread (the engine's ``torch_threads`` default), 3 rounds, medians.

    python -m benchmarks.safe.compile [--env ToyGoal-v0] [--steps 2048] [--iters 10] [--out benchmarks/safe/results]

Writes safe_compile.json and safe_compile.png. Reported, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from rlspec.algos.safe_ppo import Kit, PPOConfig, SafetyConfig, act, make_state
from rlspec.algos.safe_update import update
from rlspec.engines.safe import collect
from rlspec.envs import safety_gym
from rlspec.evidence.cpu import identity as cpu_identity

VARIANTS = ("eager", "compiled-nets", "adam-foreach", "adam-fused")


def variant(base, name: str, ppo: PPOConfig):
    """A deep copy of ``base`` (the same weights) set up as ``name``."""
    st = copy.deepcopy(base)
    if name == "compiled-nets":
        for net in (st.actor.mean, st.reward_critic.net, st.cost_critic.net):
            net.compile()
    if name.startswith("adam-"):
        kw = {"foreach": True} if name == "adam-foreach" else {"fused": True}
        st.actor_opt = torch.optim.Adam(st.actor.parameters(), lr=ppo.actor_lr, **kw)
        st.reward_opt = torch.optim.Adam(st.reward_critic.parameters(), lr=ppo.critic_lr, **kw)
        st.cost_opt = torch.optim.Adam(st.cost_critic.parameters(), lr=ppo.critic_lr, **kw)
    return st


def time_update(base, rollout, ppo: PPOConfig, name: str, rounds: int) -> tuple[float, float]:
    """(median seconds of one update, its Loss/Loss_pi), after one warm-up update (compilation)."""
    times, loss = [], None
    st = variant(base, name, ppo)  # round 0 is the warm-up (it compiles); later rounds reuse the state
    for r in range(rounds + 1):
        gen = torch.Generator().manual_seed(1)
        t0 = time.perf_counter()
        m = update(st, rollout, 10.0, ppo, SafetyConfig(), Kit.reference(), gen)
        if r:
            times.append(time.perf_counter() - t0)
        loss = m["Loss/Loss_pi"] if r == 0 else loss
    return statistics.median(times), loss


def time_act(base, obs_dim: int, n: int, compiled: bool, calls: int = 500) -> float:
    st = copy.deepcopy(base)
    if compiled:
        st.actor.mean.compile()
    obs, gen = torch.randn(n, obs_dim, generator=torch.Generator().manual_seed(2)), torch.Generator().manual_seed(3)
    for _ in range(20):
        act(st, obs, gen)
    t0 = time.perf_counter()
    for _ in range(calls):
        act(st, obs, gen)
    return (time.perf_counter() - t0) / calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="ToyGoal-v0")
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--steps", type=int, default=2048, help="env steps of the rollout (all envs)")
    p.add_argument("--iters", type=int, default=10, help="ppo.update_iters (no KL stop: target_kl off)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    a = p.parse_args()
    torch.set_num_threads(1)
    ppo = PPOConfig(update_iters=a.iters, target_kl=None)
    envs = safety_gym.make_vector(a.env, a.envs, 0)
    envs.reset()
    base = make_state("PPOLag", ppo, SafetyConfig(), envs.obs_dim, envs.act_dim, a.envs, Kit.reference(),
                      torch.Generator().manual_seed(0))
    rollout = collect(base, envs, a.steps // a.envs, torch.Generator().manual_seed(4))
    envs.close()
    upd = {}
    for name in VARIANTS:
        sec, loss = time_update(base, rollout, ppo, name, a.rounds)
        upd[name] = {"seconds": sec, "first_update_loss_pi": loss}
        print(f"update {name:14s} {sec:.3f} s  Loss_pi {loss:.6g}")
    for name in VARIANTS:
        upd[name]["ratio_vs_eager"] = upd["eager"]["seconds"] / upd[name]["seconds"]
    acts = {}
    for n in (4, 16, 64):
        e, c = time_act(base, envs.obs_dim, n, False), time_act(base, envs.obs_dim, n, True)
        acts[str(n)] = {"eager_us": e * 1e6, "compiled_us": c * 1e6, "ratio_vs_eager": e / c}
        print(f"act N={n:3d} eager {e * 1e6:.0f} us, compiled {c * 1e6:.0f} us")
    result = {"env": a.env, "num_envs": a.envs, "rollout_steps": a.steps, "update_iters": a.iters,
              "minibatch": ppo.batch_size, "hidden": list(ppo.hidden), "torch_threads": 1,
              "torch": torch.__version__, "machine": f"{platform.machine()}, {torch.get_num_threads()} thread",
              "cpu": cpu_identity(), "update": upd, "act": acts,
              "anchor": "eager engine (ratio = eager seconds / variant seconds; above 1 pays)"}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "safe_compile.json").write_text(json.dumps(result, indent=2))
    plot(result, a.out / "safe_compile.png")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    names = list(result["update"])
    left.bar(names, [result["update"][n]["ratio_vs_eager"] for n in names], color="tab:blue")
    left.axhline(1.0, color="k", lw=0.8)
    left.set_title(f"update ({result['rollout_steps']} steps × {result['update_iters']} iters): eager / variant")
    ns = list(result["act"])
    right.bar([f"N={n}" for n in ns], [result["act"][n]["ratio_vs_eager"] for n in ns], color="tab:orange")
    right.axhline(1.0, color="k", lw=0.8)
    right.set_title("policy call: eager / compiled")
    for ax in (left, right):
        ax.set_ylabel("speed-up (above 1 pays)")
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
