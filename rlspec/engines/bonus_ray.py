"""Ray execution of the bonus engine (issue 14, seed 003's architecture): ``--set execution=ray``.

    rlspec train bonus --task metaworld:push-v3 --set execution=ray --set rollout_workers=4 --set trainers=2

Actors (the `bonus` extra: ray, metaworld), the same sides as the local execution (rlspec/engines/bonus.py):
* ``rollout_workers`` RolloutActors: each steps num_envs envs (global env indices i·num_envs ...) with its own
  copy of the policy, its own action generator, and returns fragments with their Part1 metadata;
* one ReplayActor: the fragment replay, episode reassembly, the success pool, prototypes and the paired
  queue (pair mining happens here, seed 003 Part2);
* ``trainers`` TrainerActors in one torch.distributed process group (gloo on CPU): the same initial weights,
  each trains on the newest fragments of its workers (worker w goes to trainer w mod trainers) plus replayed
  ones, gradients averaged across ranks; bonus time decides and early-stops through all_reduce(MIN) (the
  contract's BonusScheduler), each rank reserving its own packs from the replay actor before the decision.

The driver runs synchronous rounds — collect on every worker, add to the replay in worker order, update on
every trainer, send rank 0's weights to the workers — so a run is reproducible from its seed (the actors'
generators are seeded from (seed, role, index)), and a checkpoint gathers every actor's state.
``best_workers`` of the rollout workers act with trainer 0's EMA policy, broadcast every ``best_every``
rounds and optionally perturbed by each worker (seed 003 §2.3 EMA-best-policy broadcast, perturbed_best).
Every worker runs its own policy copy (IMPALA-style); seed 003's separate inference actor, which serves
those rollouts from one place, is not built.
Ray starts locally without network: RAY_AUTH_MODE=disabled, no dashboard; actors ask for 0 CPUs so any
number fits on a small machine.
"""

from __future__ import annotations

import os
import socket

import numpy as np
import ray
import torch
import torch.distributed as dist

from rlspec.algos.bonus_vtrace import BonusKit, bonus_setup, effective_config, make_learner
from rlspec.engines.bonus import BonusConfig, LearnerSide, ReplaySide, RolloutSide


def role_seed(seed: int, role: int, index: int) -> int:
    return int(np.random.SeedSequence([seed, role, index]).generate_state(1)[0])


def _parts(cfg: BonusConfig):
    kit = BonusKit.fast() if cfg.fast else BonusKit.reference()
    setup = bonus_setup(cfg.ablation)
    return kit, setup, effective_config(cfg.bonus, setup)


@ray.remote(num_cpus=0)
class RolloutActor:
    def __init__(self, cfg: BonusConfig, index: int):
        torch.set_num_threads(1)
        self.side = RolloutSide(cfg, cfg.num_envs, index * cfg.num_envs, cfg.rollout_workers * cfg.num_envs)
        envs = self.side.envs
        self.learner = make_learner(cfg.learner, envs.obs_dim, envs.action_dim, envs.n_bins, torch.Generator())
        self.gen = torch.Generator().manual_seed(role_seed(cfg.seed, 1, index))

    def dims(self) -> tuple[int, int, int]:
        envs = self.side.envs
        return envs.obs_dim, envs.action_dim, envs.n_bins

    def collect(self, weights: dict, perturb_std: float = 0.0):
        """A fragment acting with ``weights`` (plus N(0, perturb_std²) noise drawn from this worker's generator)."""
        self.learner.policy.load_state_dict(weights)
        if perturb_std:
            with torch.no_grad():
                for p in self.learner.policy.parameters():
                    p.add_(torch.randn(p.shape, generator=self.gen) * perturb_std)
        return self.side.collect(self.learner, self.gen)

    def state_dict(self) -> dict:
        return {"side": self.side.state_dict(), "gen": self.gen.get_state()}

    def load_state_dict(self, s: dict) -> None:
        self.side.load_state_dict(s["side"])
        self.gen.set_state(s["gen"])


@ray.remote(num_cpus=0)
class ReplayActor:
    def __init__(self, cfg: BonusConfig):
        torch.set_num_threads(1)
        kit, setup, bonus_cfg = _parts(cfg)
        self.side = ReplaySide(cfg, kit, setup, bonus_cfg)
        self.latest: list = []  # this round's fragments, in worker order

    def add(self, *collected) -> None:
        for c in collected:
            self.side.add(c)
        self.latest = [c.frag for c in collected]

    def batch(self, rank: int, world: int, seed: int):
        """(this rank's batch, the return scale)."""
        gen = torch.Generator().manual_seed(seed)
        return self.side.batch(self.latest[rank::world], gen, fresh=len(self.latest)), self.side.scale()

    def stats(self) -> tuple[int, int]:
        return self.side.miner.stats()

    def reserve(self, n: int, seed: int) -> list:
        return self.side.miner.reserve(n, torch.Generator().manual_seed(seed))

    def consume(self, fail_ep_ids: list[int]) -> None:
        self.side.miner.consume(fail_ep_ids)

    def metrics(self) -> dict:
        return self.side.metrics()

    def state_dict(self) -> dict:
        return self.side.state_dict()

    def load_state_dict(self, s: dict) -> None:
        self.side.load_state_dict(s)


class RemoteMiner:
    """A trainer's view of the replay actor's miner (the interface bonus_phase reads)."""

    def __init__(self, replay, cfg):
        self.replay, self.cfg = replay, cfg

    def stats(self) -> tuple[int, int]:
        return ray.get(self.replay.stats.remote())

    def reserve(self, n: int, gen: torch.Generator) -> list:
        return ray.get(self.replay.reserve.remote(n, int(torch.randint(2**62, (1,), generator=gen))))

    def consume(self, fail_ep_ids: list[int]) -> None:
        ray.get(self.replay.consume.remote(fail_ep_ids))


@ray.remote(num_cpus=0)
class TrainerActor:
    def __init__(self, cfg: BonusConfig, rank: int, world: int, init_method: str, dims: tuple[int, int, int]):
        torch.set_num_threads(cfg.torch_threads)
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
        self.rank, self.world = rank, world
        kit, setup, bonus_cfg = _parts(cfg)
        self.bonus_cfg = bonus_cfg
        gen = torch.Generator().manual_seed(cfg.seed)  # the same initial weights on every rank
        self.side = LearnerSide(cfg, kit, setup, bonus_cfg, *dims, gen, average_gradients=self._average)
        self.gen = gen.manual_seed(role_seed(cfg.seed, 2, rank))  # its own minibatch order and pack draws

    def _average(self, params: list) -> None:
        for p in params:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= self.world

    def update(self, replay, step: int, batch_seed: int) -> dict:
        batch, scale = ray.get(replay.batch.remote(self.rank, self.world, batch_seed))
        return self.side.update(batch, RemoteMiner(replay, self.bonus_cfg), step, self.gen, scale)

    def weights(self) -> dict:
        return self.side.learner.policy.state_dict()

    def ema_weights(self) -> dict:
        return self.side.ema

    def state_dict(self) -> dict:
        return {"side": self.side.state_dict(), "gen": self.gen.get_state()}

    def load_state_dict(self, s: dict) -> None:
        self.side.load_state_dict(s["side"])
        self.gen.set_state(s["gen"])

    def close(self) -> None:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayWorld:
    """The Ray execution behind the same three calls as the local World (train_update, state_dict,
    load_state_dict) plus close()."""

    def __init__(self, cfg: BonusConfig):
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        self.cfg = cfg
        self.workers = [RolloutActor.remote(cfg, i) for i in range(cfg.rollout_workers)]
        dims = ray.get(self.workers[0].dims.remote())
        self.replay = ReplayActor.remote(cfg)
        init = f"tcp://127.0.0.1:{_free_port()}"
        self.trainers = [TrainerActor.remote(cfg, r, cfg.trainers, init, dims) for r in range(cfg.trainers)]
        self.weights = ray.get(self.trainers[0].weights.remote())
        self.best = self.weights  # the EMA policy the best workers act with (seed 003 §2.3)
        self.round = 0

    def train_update(self, step: int) -> dict[str, float]:
        cfg = self.cfg
        if cfg.best_workers and self.round % cfg.best_every == 0:
            self.best = ray.get(self.trainers[0].ema_weights.remote())
        current, best = ray.put(self.weights), ray.put(self.best)
        on_policy = len(self.workers) - cfg.best_workers  # workers 0 .. on_policy − 1 act with the current policy
        ray.get(self.replay.add.remote(*(w.collect.remote(current) if i < on_policy else
                                         w.collect.remote(best, cfg.best_perturb_std)
                                         for i, w in enumerate(self.workers))))
        seeds = [role_seed(self.cfg.seed, 3, self.round * self.cfg.trainers + r) for r in range(self.cfg.trainers)]
        metrics = ray.get([t.update.remote(self.replay, step, s) for t, s in zip(self.trainers, seeds)])
        self.weights = ray.get(self.trainers[0].weights.remote())
        self.round += 1
        return {**metrics[0], **ray.get(self.replay.metrics.remote())}

    def state_dict(self) -> dict:
        return {"round": self.round, "best": self.best, "workers": ray.get([w.state_dict.remote() for w in self.workers]),
                "replay": ray.get(self.replay.state_dict.remote()),
                "trainers": ray.get([t.state_dict.remote() for t in self.trainers])}

    def load_state_dict(self, s: dict) -> None:
        self.round, self.best = s["round"], s["best"]
        ray.get([w.load_state_dict.remote(x) for w, x in zip(self.workers, s["workers"])]
                + [self.replay.load_state_dict.remote(s["replay"])]
                + [t.load_state_dict.remote(x) for t, x in zip(self.trainers, s["trainers"])])
        self.weights = ray.get(self.trainers[0].weights.remote())

    def close(self) -> None:
        ray.get([t.close.remote() for t in self.trainers])
        ray.shutdown()
