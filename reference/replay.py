"""Reference ``replay`` (spec/replay.py): a plain CPU ring. Every push is validated before anything is
written; the commit counters follow the same rules as the device ring, without events; windows are
gathered step by step."""

from __future__ import annotations

import torch

from rlspec.contracts.replay import (
    OBS_SHAPE,
    episode_end,
    readable_range,
    schema,
    validate_config,
    validate_push_meta,
    validate_push_values,
    validate_sample_args,
    value_inputs,
)
from rlspec.contracts.validate import scalar_args


class ReplayRing:
    @scalar_args("capacity", "num_envs", "commit_stride", "safety_margin")
    def __init__(self, capacity: int, num_envs: int, obs_shape: tuple = OBS_SHAPE,
                 obs_dtype: torch.dtype = torch.uint8, *, store_flags: bool = False, store_final: bool = False,
                 commit_stride: int = 1, safety_margin: int = 0):
        validate_config(capacity, num_envs, obs_shape, obs_dtype, commit_stride, safety_margin)
        self.capacity, self.num_envs = capacity, num_envs
        self.obs_shape, self.obs_dtype, self.store_flags = tuple(obs_shape), obs_dtype, store_flags
        self.store_final = store_final
        self.commit_stride, self.safety_margin = commit_stride, safety_margin
        self.device = torch.device("cpu")
        self._store = {k: torch.zeros(shape, dtype=dtype) for k, (shape, dtype) in
                       schema(capacity, num_envs, self.obs_shape, obs_dtype, store_flags, store_final).items()}
        self.t = 0  # steps pushed; step s lives at row s % capacity
        self.committed_t = 0  # steps < committed_t are visible to the sampler
        self._prev_episode_id = torch.zeros(num_envs, dtype=torch.int32)  # [N], of step t - 1
        self._prev_end = torch.zeros(num_envs, dtype=torch.bool)  # [N], step t - 1 ended an episode
        self._prev_final = None  # [N, *obs_shape] final_obs of step t - 1 (store_final)
        self._slot_step = -1  # the step whose obs_slot was handed out

    def storage(self) -> dict[str, torch.Tensor]:
        return self._store

    def obs_slot(self, t: int) -> torch.Tensor:
        if t != self.t:
            raise ValueError(f"ReplayRing.obs_slot: argument 't' is {t}, expected the next step {self.t}")
        self._slot_step = t
        return self._store["obs"][t % self.capacity]  # [N, *obs_shape], contiguous

    def push(self, obs, action, reward, is_first, continue_, episode_id, terminated=None, truncated=None,
             final_obs=None):
        fields = {"obs": obs, "action": action, "reward": reward, "is_first": is_first, "continue": continue_,
                  "episode_id": episode_id, "terminated": terminated, "truncated": truncated, "final_obs": final_obs}
        validate_push_meta(self, fields, slot_written=self._slot_step == self.t)
        validate_push_values(self.t, self._prev_episode_id, self._prev_end, *value_inputs(self, fields))
        row = self.t % self.capacity
        for name, column in self._store.items():
            if fields[name] is not None:  # obs None: already written through obs_slot
                column[row] = fields[name].detach()  # storage keeps no autograd graph
        self._prev_episode_id = episode_id.clone()
        self._prev_end = episode_end(fields)
        if self.store_final:
            self._prev_final = final_obs.detach().clone()
        self.t += 1
        if self.t % self.commit_stride == 0:
            self.commit()

    def commit(self) -> None:
        self.committed_t = self.t

    @scalar_args("B", "T")
    def sample_sequences(self, B: int, T: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        lo, hi = readable_range(self.t, self.committed_t, self.capacity, self.safety_margin)
        validate_sample_args("ReplayRing.sample_sequences", B, T, generator, self.device, lo, hi)
        starts = hi - lo - T + 1  # valid starts per env column
        u = torch.randint(0, self.num_envs * starts, (B,), generator=generator)  # [B]
        env, step = u // starts, torch.empty(T, B, dtype=torch.int64)  # [B], [T, B]
        out = {k: torch.empty((T, B, *v.shape[2:]), dtype=v.dtype) for k, v in self._store.items()}
        for b in range(B):
            first = lo + int(u[b]) % starts
            for i in range(T):
                step[i, b] = first + i
                for k, v in self._store.items():
                    out[k][i, b] = v[(first + i) % self.capacity, env[b]]
        return {**out, "env": env, "step": step}
