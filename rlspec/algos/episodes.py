"""Episodes reassembled from rollout fragments (success-set design Part1): every step a worker sends carries
(episode_id, t); the replay side appends the steps of each open episode and finalizes it at its done step,
with the episode's success flag and return, for pair mining (Part2). Training data is not touched here.

A fragment is one env's consecutive steps, in time order (fragments of different episodes and workers may
interleave freely). A step whose t is not the next one of its episode (a lost fragment, a worker restart)
breaks that episode: it is dropped, counted in ``counts["gaps"]``, and its later steps are skipped up to its
done step — a broken episode is never mined (a failure spliced from two pieces would pair garbage).
Episodes left open when more than ``max_open`` are open are evicted oldest first (``counts["evicted"]``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import torch

from rlspec.contracts.success_set import Episode


class Finished(NamedTuple):
    episode: Episode  # states [T, OBS], actions [T, ACTION_DIM]
    success: bool
    ret: float  # undiscounted episode return


class EpisodeAssembler:
    def __init__(self, max_open: int = 4096):
        if max_open < 1:
            raise ValueError(f"EpisodeAssembler: argument 'max_open' must be >= 1, got {max_open}")
        self.max_open = max_open
        self.open: OrderedDict[int, list | None] = OrderedDict()  # id -> [(obs, action, reward)], None if broken
        self.counts = {"finished": 0, "gaps": 0, "evicted": 0}

    def add(self, episode_id: torch.Tensor, t: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor,
            reward: torch.Tensor, done: torch.Tensor, success: torch.Tensor) -> list[Finished]:
        """One env's fragment: episode_id [T], t [T] int64, obs [T, OBS], actions [T, ACTION_DIM] int64,
        reward [T], done [T] bool, success [T] bool (read at done steps). Returns the episodes it finishes."""
        T = episode_id.shape[0]
        for name, x in (("t", t), ("obs", obs), ("actions", actions), ("reward", reward), ("done", done),
                        ("success", success)):
            if x.shape[0] != T:
                raise ValueError(f"EpisodeAssembler.add: argument {name!r} must have {T} rows like 'episode_id', "
                                 f"got shape {tuple(x.shape)}")
        out = []
        for k in range(T):
            ep, step = int(episode_id[k]), int(t[k])
            steps = self._steps(ep, step)
            if steps is not None:
                steps.append((obs[k], actions[k], float(reward[k])))
            if bool(done[k]):
                self.open.pop(ep, None)
                if steps is not None:
                    out.append(self._finish(ep, steps, bool(success[k])))
        return out

    def _steps(self, ep: int, step: int) -> list | None:
        """The open episode's step list if ``step`` continues it (opening it at t = 0), else None."""
        if ep not in self.open:
            self.open[ep] = [] if step == 0 else None  # t > 0: its beginning was lost
            self.counts["gaps"] += step != 0
            if len(self.open) > self.max_open:
                self.open.popitem(last=False)
                self.counts["evicted"] += 1
            return self.open.get(ep)
        steps = self.open[ep]
        if steps is not None and len(steps) != step:
            self.counts["gaps"] += 1
            self.open[ep] = steps = None
        return steps

    def _finish(self, ep: int, steps: list, success: bool) -> Finished:
        self.counts["finished"] += 1
        states = torch.stack([s[0] for s in steps])  # [T, OBS]
        actions = torch.stack([s[1] for s in steps]).long()  # [T, ACTION_DIM]
        return Finished(Episode(ep, states, actions), success, sum(s[2] for s in steps))
