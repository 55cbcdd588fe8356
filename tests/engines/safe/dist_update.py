"""One process of a data-parallel update (PPOLag, or ALGO) on a fixed batch (tests/engines/safe/test_safe_fast.py runs it).

    python dist_update.py RANK WORLD_SIZE RENDEZVOUS_FILE OUT.pt [ALGO]

The batch has ENVS env columns; with WORLD_SIZE processes, rank r updates on columns [r·ENVS/W, (r+1)·ENVS/W)
with full-batch minibatches, so one process on all columns and W processes on their slices take the same steps.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from rlspec.algos.safe_ppo import LOCAL, Kit, PPOConfig, Rollout, SafetyConfig, make_state
from rlspec.algos.safe_update import update
from rlspec.engines.safe.parallel import TorchDistComm

T, ENVS, D, A = 8, 4, 3, 2


def main(rank: int, world: int, rendezvous: str, out: str, algo: str = "PPOLag") -> None:
    comm = LOCAL
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
        comm = TorchDistComm(torch.device("cpu"))
    kit = Kit.reference()
    g = torch.Generator().manual_seed(7)
    n = ENVS // world
    ppo = PPOConfig(update_iters=3, batch_size=T * n, linear_lr_decay=False)
    state = make_state(algo, ppo, SafetyConfig(), D, A, n, kit, torch.Generator().manual_seed(0))
    obs, next_obs = torch.randn(T, ENVS, D, generator=g), torch.randn(T, ENVS, D, generator=g)
    act = torch.randn(T, ENVS, A, generator=g)
    reward, cost = torch.randn(T, ENVS, generator=g), torch.rand(T, ENVS, generator=g)
    term, trunc = torch.rand(T, ENVS, generator=g) < 0.1, torch.rand(T, ENVS, generator=g) < 0.1
    with torch.no_grad():
        logp = state.actor.log_prob(obs, act)[0] + 0.05 * torch.randn(T, ENVS, generator=g)
    initial = {k: v.clone() for k, v in state.actor.state_dict().items()}
    cols = slice(rank * n, (rank + 1) * n)
    batch = Rollout(obs=obs[:, cols], act=act[:, cols], logp=logp[:, cols], reward=reward[:, cols],
                    cost=cost[:, cols], terminated=term[:, cols], truncated=trunc[:, cols],
                    next_obs=next_obs[:, cols], raw_obs=obs[:, cols])
    metrics = update(state, batch, 40.0, ppo, SafetyConfig(), kit, torch.Generator().manual_seed(rank), comm=comm)
    torch.save({"actor": state.actor.state_dict(), "reward_critic": state.reward_critic.state_dict(),
                "cost_critic": state.cost_critic.state_dict(), "metrics": metrics, "initial_actor": initial}, out)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], *sys.argv[5:])
