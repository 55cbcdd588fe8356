"""Ray execution of the bonus engine (success-set design's architecture): ``--set execution=ray``.

    rlspec train bonus --task metaworld:push-v3 --set execution=ray --set rollout_workers=4 --set trainers=2

Actors (the `bonus` extra: ray, metaworld), the same sides as the local execution (local.py):
* ``rollout_workers`` RolloutActors: each steps num_envs envs (global env indices i·num_envs ...) and returns
  fragments with their Part1 metadata; its actions come from its own policy copy (``inference=local``) or
  from the InferenceActor (``inference=actor``), drawn with the worker's own generator either way;
* with ``inference=actor``, one InferenceActor: the policy in one place (success-set design's InferenceActor); each
  worker step sends its num_envs observations and gets tokens and behaviour log-probabilities back; trainer
  0's weights reach it every round, the EMA-best policy every ``best_every`` rounds (``load_best_weights``);
* one ReplayActor: the fragment replay, episode reassembly, the success pool, prototypes and the paired
  queue (pair mining happens here, success-set design Part2);
* ``trainers`` TrainerActors in one torch.distributed process group (gloo on CPU): the same initial weights,
  each trains on the newest fragments of its workers (worker w goes to trainer w mod trainers) plus replayed
  ones, gradients averaged across ranks; bonus time decides and early-stops through all_reduce(MIN) (the
  contract's BonusScheduler), each rank reserving its own packs from the replay actor before the decision.

The driver runs synchronous rounds — collect on every worker, add to the replay in worker order, update on
every trainer, send rank 0's weights to the workers (or the InferenceActor) — so a run is reproducible from
its seed (the actors' generators are seeded from (seed, role, index)), and a checkpoint gathers every actor's
state.
``best_workers`` of the rollout workers act with trainer 0's EMA policy, broadcast every ``best_every``
rounds and perturbed afresh every round with the worker's generator (success-set design §2.3 EMA-best-policy broadcast,
perturbed_best). Both inference modes draw the same numbers in the same order from each worker's generator,
so a run is the same with either (tests/engines/bonus/test_bonus_ray_metaworld.py). The trade-off: ``actor`` costs a
Ray round trip per worker step (~1.3 ms on a quiet machine: ~40 ms per 32-step fragment, against ~210 ms of
Meta-World stepping for 8 envs; on this loaded 2-core machine a round of 2 workers × 8 envs × 32 steps took
3.1 s local vs 4.6 s actor on reach-v3, 0.87 s vs 2.3 s on token-reach), and its requests are served one
worker-step batch at a time (no batching across workers); ``local`` (the default) ships the weights to every
worker once a round instead. The actor pays off where inference is expensive (a GPU policy, many workers).
Ray starts locally without network: RAY_AUTH_MODE=disabled, no dashboard; actors ask for 0 CPUs so any
number fits on a small machine.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import threading

import numpy as np
import ray
import torch
import torch.distributed as dist

from rlspec.algos.bonus_vtrace import BonusKit, TokenPolicy, act, bonus_setup, effective_config, load_policy
from rlspec.algos.bonus_vtrace import make_policy as learner_policy
from rlspec.engines.bonus.config import BonusConfig
from rlspec.engines.bonus.local import LearnerSide, ReplaySide, RolloutSide


def role_seed(seed: int, role: int, index: int) -> int:
    return int(np.random.SeedSequence([seed, role, index]).generate_state(1)[0])


def _parts(cfg: BonusConfig):
    kit = BonusKit.named(cfg.kit)
    setup = bonus_setup(cfg.ablation)
    return kit, setup, effective_config(cfg.bonus, setup)


def average_over_ranks(params: list) -> None:
    """Each parameter's gradient replaced by its mean over the default process group's ranks."""
    for p in params:
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= dist.get_world_size()


def standardize_over_ranks(standardize, adv: torch.Tensor) -> torch.Tensor:
    """``standardize`` (contract numerics' safe_standardize) of every rank's advantages [M] (the same M on each),
    concatenated in rank order; this rank's part [M]. Each rank's own statistics would give each another step."""
    everyone = [torch.empty_like(adv) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, adv)
    return standardize(torch.cat(everyone)).view(len(everyone), -1)[dist.get_rank()]


def worker_generator(cfg: BonusConfig, index: int) -> torch.Generator:
    """Rollout worker ``index``'s action (and perturbation) generator, wherever its policy runs."""
    return torch.Generator().manual_seed(role_seed(cfg.seed, 1, index))


def make_policy(cfg: BonusConfig, dims: tuple[int, int, int]) -> TokenPolicy:
    """A policy to load weights (and observation statistics) into (its initial weights are never used)."""
    return learner_policy(cfg.learner, *dims, BonusKit.named(cfg.kit), torch.Generator())


@ray.remote(num_cpus=0)
class RolloutActor:
    def __init__(self, cfg: BonusConfig, index: int):
        torch.set_num_threads(1)
        self.index = index
        self.side = RolloutSide(cfg, cfg.num_envs, index * cfg.num_envs, cfg.rollout_workers * cfg.num_envs)
        local = cfg.inference == "local"  # otherwise the InferenceActor holds this worker's policy and generator
        self.policy = make_policy(cfg, self.dims()) if local else None
        self.gen = worker_generator(cfg, index) if local else None

    def dims(self) -> tuple[int, int, int]:
        envs = self.side.envs
        return envs.obs_dim, envs.action_dim, envs.n_bins

    def collect(self, weights: dict, perturb_std: float = 0.0):
        """inference=local: a fragment acting with ``weights`` (plus N(0, perturb_std²) noise from this worker's
        generator)."""
        load_policy(self.policy, weights, perturb_std, self.gen)
        return self.side.collect(lambda obs: act(self.policy, obs, self.gen))

    def collect_served(self, inference):
        """inference=actor: a fragment, every step's actions asked of the InferenceActor."""
        return self.side.collect(lambda obs: ray.get(inference.act.remote(self.index, obs)))

    def state_dict(self) -> dict:
        return {"side": self.side.state_dict(), "gen": None if self.gen is None else self.gen.get_state()}

    def load_state_dict(self, s: dict) -> None:
        self.side.load_state_dict(s["side"])
        if self.gen is not None:
            self.gen.set_state(s["gen"])


@ray.remote(num_cpus=0)
class InferenceActor:
    """The rollout policy in one place (inference=actor). Workers 0 .. on_policy − 1 act with the current
    weights, the others with their own perturbed copy of the EMA-best weights; worker w samples with
    worker_generator(cfg, w), so the actions do not depend on the order the requests arrive in."""

    def __init__(self, cfg: BonusConfig, dims: tuple[int, int, int]):
        torch.set_num_threads(1)
        self.cfg = cfg
        self.on_policy = cfg.rollout_workers - cfg.best_workers
        self.current = make_policy(cfg, dims)
        self.best_copies = [make_policy(cfg, dims) for _ in range(cfg.best_workers)]
        self.best: dict | None = None
        self.gens = [worker_generator(cfg, w) for w in range(cfg.rollout_workers)]

    def load_best_weights(self, weights: dict) -> None:
        """Trainer 0's EMA policy (success-set design §2.3 broadcast), for the best workers from the next round on."""
        self.best = weights

    def begin_round(self, weights: dict) -> None:
        """The current weights for this round; each best worker's copy perturbed afresh from its generator."""
        self.current.load_state_dict(weights)
        for k, policy in enumerate(self.best_copies):
            w = self.on_policy + k
            load_policy(policy, self.best, self.cfg.best_perturb_std, self.gens[w])

    def act(self, worker: int, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [N, OBS] of worker ``worker`` -> tokens [N, A], behaviour log-probabilities [N]."""
        policy = self.current if worker < self.on_policy else self.best_copies[worker - self.on_policy]
        return act(policy, obs, self.gens[worker])

    def state_dict(self) -> dict:
        return {"best": self.best, "gens": [g.get_state() for g in self.gens]}

    def load_state_dict(self, s: dict) -> None:
        self.best = s["best"]
        for g, state in zip(self.gens, s["gens"]):
            g.set_state(state)


@ray.remote(num_cpus=0)
class ReplayActor:
    def __init__(self, cfg: BonusConfig, obs_dim: int):
        torch.set_num_threads(1)
        kit, setup, bonus_cfg = _parts(cfg)
        self.side = ReplaySide(cfg, kit, setup, bonus_cfg, obs_dim)
        self.latest: list = []  # this round's fragments, in worker order

    def add(self, *collected) -> None:
        for c in collected:
            self.side.add(c)
        self.latest = [c.frag for c in collected]

    def batch(self, rank: int, world: int, seed: int):
        """(this rank's batch, the return scale, the observation statistics)."""
        gen = torch.Generator().manual_seed(seed)
        return (self.side.batch(self.latest[rank::world], gen, fresh=len(self.latest)), self.side.scale(),
                self.side.obs_stats())

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
        self.side = LearnerSide(cfg, kit, setup, bonus_cfg, *dims, gen, average_gradients=average_over_ranks,
                                standardize=functools.partial(standardize_over_ranks, kit.safe_standardize))
        self.gen = gen.manual_seed(role_seed(cfg.seed, 2, rank))  # its own minibatch order and pack draws

    def update(self, replay, step: int, batch_seed: int) -> dict:
        batch, scale, obs_stats = ray.get(replay.batch.remote(self.rank, self.world, batch_seed))
        return self.side.update(batch, RemoteMiner(replay, self.bonus_cfg), step, self.gen, scale, obs_stats)

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


def trainer_metrics(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """One row from the trainers' metrics: each Loss/* is the mean over ranks (the objective whose gradients
    they all-reduce), so a loss that turns non-finite on any rank stops the run; the rest are trainer 0's."""
    losses = {k: sum(m[k] for m in per_rank) / len(per_rank) for k in per_rank[0] if k.startswith("Loss/")}
    return {**per_rank[0], **losses}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayWorld:
    """The Ray execution behind the same three calls as the local World (train_update, state_dict,
    load_state_dict) plus close()."""

    def __init__(self, cfg: BonusConfig):
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        self.owns_ray = not ray.is_initialized()  # a caller's running Ray (tests share one) is left running
        if self.owns_ray:
            ending = signal.getsignal(signal.SIGTERM)  # the run's own (rlspec/runs/faults.py: ends as Ctrl-C does)
            ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, ending)  # ray.init's handler exits 15 with Ray's stack dump
        self.cfg = cfg
        self.workers = [RolloutActor.remote(cfg, i) for i in range(cfg.rollout_workers)]
        dims = ray.get(self.workers[0].dims.remote())
        self.replay = ReplayActor.remote(cfg, dims[0])
        init = f"tcp://127.0.0.1:{_free_port()}"
        self.trainers = [TrainerActor.remote(cfg, r, cfg.trainers, init, dims) for r in range(cfg.trainers)]
        self.inference = InferenceActor.remote(cfg, dims) if cfg.inference == "actor" else None
        self.weights = ray.get(self.trainers[0].weights.remote())
        self.best = self.weights  # the EMA policy the best workers act with (success-set design §2.3)
        self.round = 0

    def train_update(self, step: int) -> dict[str, float]:
        cfg = self.cfg
        if cfg.best_workers and self.round % cfg.best_every == 0:
            self.best = ray.get(self.trainers[0].ema_weights.remote())
            if self.inference is not None:
                ray.get(self.inference.load_best_weights.remote(self.best))
        ray.get(self.replay.add.remote(*self._collect()))
        seeds = [role_seed(self.cfg.seed, 3, self.round * self.cfg.trainers + r) for r in range(self.cfg.trainers)]
        metrics = ray.get([t.update.remote(self.replay, step, s) for t, s in zip(self.trainers, seeds)])
        self.weights = ray.get(self.trainers[0].weights.remote())
        self.round += 1
        return {**trainer_metrics(metrics), **ray.get(self.replay.metrics.remote())}

    def params(self) -> dict:
        """Trainer 0's policy weights of this round (the trainers all-reduce: every rank holds the same); its
        critic shows through the value loss."""
        return {"policy": self.weights.values()}

    def _collect(self) -> list:
        """Every worker's fragment of this round (object refs, in worker order)."""
        if self.inference is not None:
            ray.get(self.inference.begin_round.remote(self.weights))
            return [w.collect_served.remote(self.inference) for w in self.workers]
        current, best = ray.put(self.weights), ray.put(self.best)
        on_policy = len(self.workers) - self.cfg.best_workers  # workers 0 .. on_policy − 1: the current policy
        return [w.collect.remote(current) if i < on_policy else w.collect.remote(best, self.cfg.best_perturb_std)
                for i, w in enumerate(self.workers)]

    def state_dict(self) -> dict:
        return {"round": self.round, "best": self.best, "workers": ray.get([w.state_dict.remote() for w in self.workers]),
                "inference": None if self.inference is None else ray.get(self.inference.state_dict.remote()),
                "replay": ray.get(self.replay.state_dict.remote()),
                "trainers": ray.get([t.state_dict.remote() for t in self.trainers])}

    def load_state_dict(self, s: dict) -> None:
        self.round, self.best = s["round"], s["best"]
        ray.get([w.load_state_dict.remote(x) for w, x in zip(self.workers, s["workers"])]
                + [self.replay.load_state_dict.remote(s["replay"])]
                + [t.load_state_dict.remote(x) for t, x in zip(self.trainers, s["trainers"])]
                + ([] if self.inference is None else [self.inference.load_state_dict.remote(s["inference"])]))
        self.weights = ray.get(self.trainers[0].weights.remote())

    def close(self) -> None:
        ray.get([t.close.remote() for t in self.trainers])
        for a in [*self.workers, self.replay, *self.trainers, *([self.inference] if self.inference else [])]:
            ray.kill(a)
        if self.owns_ray:
            ray.shutdown()
