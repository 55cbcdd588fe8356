"""The bonus engine's sides (rollout, replay + pair miner, learner) and the local execution, World: the three
sides in one process with one generator. The Ray execution (ray.py) runs the same sides as actors."""

from __future__ import annotations

import copy
import math
from collections import deque
from typing import Callable, NamedTuple

import numpy as np
import torch

from rlspec.algos.bonus_vtrace import (
    BonusKit,
    Fragment,
    PairMiner,
    ReturnScale,
    act,
    bonus_phase,
    bonus_setup,
    effective_config,
    make_learner,
    ppo_vtrace_update,
    stack_fragments,
)
from rlspec.algos.episodes import EpisodeAssembler
from rlspec.contracts.success_set import SuccessSetConfig
from rlspec.engines.bonus.config import BonusConfig, total_envs
from rlspec.envs.token_reach import TokenReachVector


# ------------------------------------------------------------------------------------------ the sides
def make_envs(cfg: BonusConfig, num_envs: int, first_env: int):
    """This process's slice of the task's envs (global indices first_env ...)."""
    if cfg.task == "token-reach":
        return TokenReachVector(num_envs, cfg.seed, first_env)
    from rlspec.envs.metaworld_tokens import MetaWorldTokenVector  # the `bonus` extra

    return MetaWorldTokenVector(cfg.task, num_envs, cfg.seed, first_env, cfg.episode_steps)


class Collected(NamedTuple):
    """A rollout fragment with its Part1 metadata."""

    frag: Fragment
    episode_id: torch.Tensor  # [T, N] int64, unique over every env of the run
    t: torch.Tensor  # [T, N] int64 step within the episode
    success: torch.Tensor  # [T, N] bool


class RolloutSide:
    """Envs and their current observations; collects fragments with a given policy (success-set design rollout worker)."""

    def __init__(self, cfg: BonusConfig, num_envs: int, first_env: int, total_envs: int):
        self.cfg, self.first_env, self.total_envs = cfg, first_env, total_envs
        self.envs = make_envs(cfg, num_envs, first_env)
        self.obs = torch.from_numpy(self.envs.reset())  # [N, OBS]

    def episode_ids(self) -> torch.Tensor:
        """[N] (episodes started − 1)·total_envs + global env index: unique across workers (Part1)."""
        return torch.from_numpy((self.envs.episodes - 1) * self.total_envs + self.first_env
                                + np.arange(self.envs.num_envs))

    def collect(self, policy: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> Collected:
        """A fragment; ``policy``: obs [N, OBS] -> (tokens [N, A], behaviour log-probabilities [N])."""
        rows, ids, ts, successes = [], [], [], []
        for _ in range(self.cfg.fragment_len):
            tokens, logp = policy(self.obs)  # [N, A], [N]
            ids.append(self.episode_ids())
            ts.append(torch.from_numpy(self.envs.t.copy()))
            out = self.envs.step(tokens.numpy())
            rows.append((self.obs, tokens, logp, torch.from_numpy(out.reward), torch.from_numpy(out.terminated),
                         torch.from_numpy(out.truncated), torch.from_numpy(out.final_obs)))
            successes.append(torch.from_numpy(out.success))
            self.obs = torch.from_numpy(out.obs)
        frag = Fragment(*(torch.stack(col) for col in zip(*rows)))
        return Collected(frag, torch.stack(ids), torch.stack(ts), torch.stack(successes))

    def state_dict(self) -> dict:
        return {"envs": self.envs.state_dict(), "obs": self.obs}

    def load_state_dict(self, s: dict) -> None:
        self.envs.load_state_dict(s["envs"])
        self.obs = torch.from_numpy(self.envs.obs())  # Meta-World restarts its episodes (metaworld_tokens.py)


class ReplaySide:
    """The fragment replay, Part1 reassembly, the episode window, the pair miner (success-set design replay actor), the
    return scale the learner divides rewards by and the observation statistics it normalizes with (every env's
    steps pass here, in order)."""

    def __init__(self, cfg: BonusConfig, kit: BonusKit, setup, bonus_cfg: SuccessSetConfig, obs_dim: int):
        self.cfg, self.setup = cfg, setup
        self.total_envs = total_envs(cfg)
        self.return_scale = ReturnScale(self.total_envs, cfg.learner.gamma, kit)
        self.obs_norm = kit.ObsNormalizer((obs_dim,)) if cfg.learner.normalize_obs else None
        self.replay: deque[Fragment] = deque(maxlen=cfg.replay_capacity)
        self.assembler = EpisodeAssembler()
        self.miner = PairMiner(bonus_cfg, setup, kit, cfg.pool_size, cfg.queue_size)
        self.window: deque = deque(maxlen=cfg.ep_window)  # (return, success, length)

    def add(self, c: Collected) -> None:
        """Part1 → Part2: each env's steps to the assembler, finished episodes to the window and the miner;
        the fragment to the replay."""
        frag = c.frag
        done = frag.terminated | frag.truncated  # [T, N]
        self.return_scale.observe(frag.reward, done, c.episode_id[0] % self.total_envs)  # Part1 ids -> env index
        if self.obs_norm is not None:
            self.obs_norm.commit(frag.obs.reshape(-1, frag.obs.shape[-1]))  # [T·N, OBS]
        for i in range(frag.obs.shape[1]):
            for ep in self.assembler.add(c.episode_id[:, i], c.t[:, i], frag.obs[:, i], frag.tokens[:, i],
                                         frag.reward[:, i], done[:, i], c.success[:, i]):
                self.window.append((ep.ret, float(ep.success), ep.episode.states.shape[0]))
                if self.setup.mine:
                    self.miner.add(ep)
        self.replay.append(frag)

    def batch(self, newest: list[Fragment], gen: torch.Generator, fresh: int | None = None) -> Fragment:
        """The newest fragments and replay_fragments older ones per newest, drawn uniformly (with replacement)
        from the replay without its ``fresh`` most recent fragments (default: len(newest))."""
        fresh = len(newest) if fresh is None else fresh
        older = list(self.replay)[:-fresh] if len(self.replay) > fresh else []
        k = min(self.cfg.replay_fragments * len(newest), len(older))
        picks = torch.randint(len(older), (k,), generator=gen).tolist() if k else []
        return stack_fragments([*newest, *(older[j] for j in picks)])

    def scale(self) -> float:
        """What the learner divides this round's rewards by (1 without normalize_returns)."""
        return self.return_scale.scale() if self.cfg.learner.normalize_returns else 1.0

    def obs_stats(self) -> dict | None:
        """The observation statistics the learner normalizes this round's batch with (None without normalize_obs)."""
        return None if self.obs_norm is None else self.obs_norm.state_dict()

    def metrics(self) -> dict[str, float]:
        out = {f"episodes/{k}": float(v) for k, v in self.assembler.counts.items()}
        out.update(self.miner.metrics() if self.setup.mine else {})
        if not self.window:
            return {**out, "Metrics/EpRet": math.nan, "Metrics/SuccessRate": math.nan, "Metrics/EpLen": math.nan}
        n = len(self.window)
        return {**out, "Metrics/EpRet": sum(e[0] for e in self.window) / n,
                "Metrics/SuccessRate": sum(e[1] for e in self.window) / n,
                "Metrics/EpLen": sum(e[2] for e in self.window) / n}

    def state_dict(self) -> dict:
        return {"replay": list(self.replay), "assembler": self.assembler, "window": list(self.window),
                "successes": list(self.miner.successes), "queue": list(self.miner.queue.packs),
                "prototypes": self.miner.prototypes, "miner_counts": dict(self.miner.counts),
                "return_scale": self.return_scale.state_dict(), "obs_norm": self.obs_stats()}

    def load_state_dict(self, s: dict) -> None:
        self.replay.extend(s["replay"])
        self.window.extend(s["window"])
        self.assembler = s["assembler"]
        self.miner.successes.extend(s["successes"])
        self.miner.queue.packs.extend(s["queue"])
        self.miner.prototypes, self.miner.counts = s["prototypes"], s["miner_counts"]
        self.return_scale.load_state_dict(s["return_scale"])
        if self.obs_norm is not None:
            self.obs_norm.load_state_dict(s["obs_norm"])


class LearnerSide:
    """PPO + V-trace learner and the bonus scheduler (success-set design trainer)."""

    def __init__(self, cfg: BonusConfig, kit: BonusKit, setup, bonus_cfg: SuccessSetConfig, obs_dim: int,
                 action_dim: int, n_bins: int, gen: torch.Generator, reduce_min=None, average_gradients=None,
                 standardize=None):
        self.cfg, self.kit, self.setup, self.n_bins = cfg, kit, setup, n_bins
        self.learner = make_learner(cfg.learner, obs_dim, action_dim, n_bins, kit, gen)
        self.scheduler = kit.BonusScheduler(bonus_cfg, **({"reduce_min": reduce_min} if reduce_min else {}))
        self.average_gradients, self.standardize = average_gradients, standardize
        self.bonus_errors = 0
        # the EMA ("best") policy of the success-set design §2.3, kept only when some worker acts with it
        self.ema = copy.deepcopy(self.learner.policy.state_dict()) if cfg.best_workers else None

    def update(self, batch: Fragment, miner: PairMiner, step: int, gen: torch.Generator,
               return_scale: float = 1.0, obs_stats: dict | None = None) -> dict[str, float]:
        """The main update on rewards / return_scale and observations normalized with ``obs_stats`` (ReplaySide),
        then bonus time (its errors counted)."""
        if obs_stats is not None:
            self.learner.policy.norm.set_extra_state(obs_stats)
        metrics = ppo_vtrace_update(self.learner, batch, self.cfg.learner, self.kit, gen,
                                    self.average_gradients, return_scale, self.standardize)
        if self.setup.loss_a:
            telemetry = bonus_phase(self.learner, miner, self.scheduler, step, self.n_bins,
                                    self.cfg.learner.max_grad_norm, self.kit, gen, self.average_gradients,
                                    self.setup.placebo, self.cfg.learner.heldout_packs)
            self.bonus_errors += int(telemetry.pop("bonus/error"))
            metrics.update(telemetry)
            metrics["bonus/errors"] = float(self.bonus_errors)
        if self.ema is not None:
            self._update_ema()
        return metrics

    @torch.no_grad()
    def _update_ema(self) -> None:
        """The EMA of the policy's weights; its observation statistics (extra state) are the current ones."""
        for k, v in self.learner.policy.state_dict().items():
            if isinstance(v, torch.Tensor):
                self.ema[k].lerp_(v, 1.0 - self.cfg.best_ema)
            else:
                self.ema[k] = copy.deepcopy(v)

    def state_dict(self) -> dict:
        l = self.learner
        return {"policy": l.policy.state_dict(), "critic": l.critic.state_dict(), "opt": l.opt.state_dict(),
                "bonus_opt": l.bonus_opt.state_dict(), "last_bonus_step": self.scheduler.last_bonus_step,
                "bonus_errors": self.bonus_errors, "ema": self.ema}

    def load_state_dict(self, s: dict) -> None:
        for name in ("policy", "critic", "opt", "bonus_opt"):
            getattr(self.learner, name).load_state_dict(s[name])
        self.scheduler.last_bonus_step, self.bonus_errors, self.ema = s["last_bonus_step"], s["bonus_errors"], s["ema"]


class World:
    """The local execution: the three sides in one process, one generator."""

    def __init__(self, cfg: BonusConfig):
        self.cfg = cfg
        kit = BonusKit.named(cfg.kit)
        setup = bonus_setup(cfg.ablation)
        bonus_cfg = effective_config(cfg.bonus, setup)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.rollout = RolloutSide(cfg, cfg.num_envs, 0, cfg.num_envs)
        envs = self.rollout.envs
        self.replay = ReplaySide(cfg, kit, setup, bonus_cfg, envs.obs_dim)
        self.learner = LearnerSide(cfg, kit, setup, bonus_cfg, envs.obs_dim, envs.action_dim, envs.n_bins, self.gen)

    def train_update(self, step: int) -> dict[str, float]:
        """One rollout fragment, its episodes to the miner, the main update, then bonus time."""
        c = self.rollout.collect(lambda obs: act(self.learner.learner.policy, obs, self.gen))
        self.replay.add(c)
        metrics = self.learner.update(self.replay.batch([c.frag], self.gen), self.replay.miner, step, self.gen,
                                      self.replay.scale(), self.replay.obs_stats())
        return {**metrics, **self.replay.metrics()}

    def state_dict(self) -> dict:
        return {"gen": self.gen.get_state(), "rollout": self.rollout.state_dict(), "replay": self.replay.state_dict(),
                "learner": self.learner.state_dict()}

    def params(self) -> dict:
        """The learner's networks' parameters by name (what must stay finite)."""
        nets = self.learner.learner
        return {"policy": nets.policy.parameters(), "critic": nets.critic.parameters()}

    def load_state_dict(self, s: dict) -> None:
        self.gen.set_state(s["gen"])
        for side in ("rollout", "replay", "learner"):
            getattr(self, side).load_state_dict(s[side])

    def close(self) -> None:
        pass

