"""Fast ``replay`` (spec/replay.py): the same ring on any torch device, without host synchronization.

* Storage is allocated once on the device: ``obs_slot(t)`` is a view of it, so its ``data_ptr()`` is
  stable for the ring's lifetime and an env kernel can write the next observation in place.
* ``push`` is one device copy per field into row ``t mod Tcap`` (host integers choose the row). With
  ``check_values=True`` (the default) the value rules are checked first, which reads one flag back to
  the host; with ``check_values=False`` nothing is read back: offending env entries are counted on the
  device in ``violations`` (read it, or run ``check_invariants``, at a synchronization point).
* ``reserve`` (default 0): the sampler also leaves the oldest ``reserve`` steps alone, lo = max(0, t + 1 −
  capacity + reserve): an actor may push ``reserve`` more steps (their obs slots included) while a gather
  drawn now is still in flight on another stream, and none of its rows is overwritten (the async Dreamer
  engine's rule, rlspec/engines/dreamer/device.py).
* ``state_dict()`` / ``load_state_dict()``: the storage and the write/commit counters (CPU copies), for
  checkpoints; the commit event is not state (a restored ring has everything committed up to
  ``committed_t``).
* Every ``commit_stride`` pushes (and on ``commit()``) a CUDA event is recorded on the pushing stream
  and ``committed_t`` advances; ``sample_sequences`` makes the current (learner) stream wait on the last
  commit event, draws the window indices on the device with the caller's device generator and gathers
  ``[T, B, ...]`` with one indexing kernel per field. On CPU the events are no-ops and the same code runs.
"""

from __future__ import annotations

import torch

from rlspec.contracts.replay import (
    OBS_SHAPE,
    episode_end,
    push_violations,
    readable_range,
    schema,
    validate_config,
    validate_push_meta,
    validate_push_values,
    validate_sample_args,
    value_inputs,
)
from rlspec.contracts.validate import scalar_args

BACKEND_NOTE = "cuda" if torch.cuda.is_available() else "cpu"


class ReplayRing:
    @scalar_args("capacity", "num_envs", "commit_stride", "safety_margin")
    def __init__(self, capacity: int, num_envs: int, obs_shape: tuple = OBS_SHAPE,
                 obs_dtype: torch.dtype = torch.uint8, *, store_flags: bool = False, store_final: bool = False,
                 commit_stride: int = 1, safety_margin: int = 0, device: str | torch.device | None = None,
                 check_values: bool = True, reserve: int = 0):
        validate_config(capacity, num_envs, obs_shape, obs_dtype, commit_stride, safety_margin)
        if not (isinstance(reserve, int) and 0 <= reserve < capacity):
            raise ValueError(f"ReplayRing: argument 'reserve' must be an int in [0, capacity={capacity}), "
                             f"got {reserve!r}")
        self.reserve = reserve
        self.capacity, self.num_envs = capacity, num_envs
        self.obs_shape, self.obs_dtype, self.store_flags = tuple(obs_shape), obs_dtype, store_flags
        self.store_final = store_final
        self.commit_stride, self.safety_margin, self.check_values = commit_stride, safety_margin, check_values
        self.device = torch.device(device if device is not None else BACKEND_NOTE)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._store = {k: torch.zeros(shape, dtype=dtype, device=self.device) for k, (shape, dtype) in
                       schema(capacity, num_envs, self.obs_shape, obs_dtype, store_flags, store_final).items()}
        self.t = 0
        self.committed_t = 0
        self._prev_episode_id = torch.zeros(num_envs, dtype=torch.int32, device=self.device)  # [N]
        self._prev_end = torch.zeros(num_envs, dtype=torch.bool, device=self.device)  # [N]
        self._prev_final = torch.zeros((num_envs, *self.obs_shape), dtype=obs_dtype, device=self.device) \
            if store_final else None  # [N, *obs_shape] final_obs of step t - 1
        self.violations = torch.zeros((), dtype=torch.int64, device=self.device)  # unchecked pushes only
        self._event = torch.cuda.Event() if self.device.type == "cuda" else None
        self._slot_step = -1
        self._steps: dict[int, torch.Tensor] = {}  # T -> arange(T) [T, 1] on the device

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
        values = value_inputs(self, fields)
        if self.check_values:
            validate_push_values(self.t, self._prev_episode_id, self._prev_end, *values)
        else:
            self.violations += push_violations(self.t, self._prev_episode_id, self._prev_end, *values).sum()
        row = self.t % self.capacity
        for name, column in self._store.items():
            if fields[name] is not None:
                column[row].copy_(fields[name].detach(), non_blocking=True)  # no autograd graph kept
        self._prev_episode_id.copy_(episode_id)
        self._prev_end.copy_(episode_end(fields))
        if self.store_final:
            self._prev_final.copy_(final_obs.detach(), non_blocking=True)
        self.t += 1
        if self.t % self.commit_stride == 0:
            self.commit()

    def commit(self) -> None:
        if self._event is not None:
            self._event.record()  # on the current (actor) stream, after this step's writes
        self.committed_t = self.t

    @scalar_args("B", "T")
    def sample_sequences(self, B: int, T: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        lo, hi = self._window_range()
        validate_sample_args("ReplayRing.sample_sequences", B, T, generator, self.device, lo, hi)
        if self._event is not None:
            torch.cuda.current_stream(self.device).wait_event(self._event)  # device-side fence, no host sync
        starts = hi - lo - T + 1
        u = torch.randint(0, self.num_envs * starts, (B,), generator=generator, device=self.device)  # [B]
        env = u // starts  # [B]
        step = lo + u % starts + self._arange(T)  # [T, B]
        rows = step % self.capacity  # [T, B]
        out = {k: v[rows, env] for k, v in self._store.items()}  # [T, B, ...]
        return {**out, "env": env, "step": step}

    def _window_range(self) -> tuple[int, int]:
        lo, hi = readable_range(self.t, self.committed_t, self.capacity, self.safety_margin)
        return max(lo, self.t + 1 - self.capacity + self.reserve), hi

    def readable(self) -> int:
        """Steps the sampler may read now (host integers only: no synchronization)."""
        lo, hi = self._window_range()
        return max(0, hi - lo)

    STATE = ("t", "committed_t", "_slot_step")

    def state_dict(self) -> dict:
        return {"store": {k: v.cpu().clone() for k, v in self._store.items()},
                "prev_episode_id": self._prev_episode_id.cpu().clone(), "prev_end": self._prev_end.cpu().clone(),
                "violations": self.violations.cpu().clone(), **{k: getattr(self, k) for k in self.STATE},
                **({"prev_final": self._prev_final.cpu().clone()} if self.store_final else {})}

    def load_state_dict(self, sd: dict) -> None:
        if sd["store"].keys() != self._store.keys() or any(
                sd["store"][k].shape != v.shape for k, v in self._store.items()):
            raise ValueError("ReplayRing.load_state_dict: the state's storage has fields/shapes "
                             f"{ {k: tuple(v.shape) for k, v in sd['store'].items()} }, expected "
                             f"{ {k: tuple(v.shape) for k, v in self._store.items()} }")
        for k, v in self._store.items():
            v.copy_(sd["store"][k])
        self._prev_episode_id.copy_(sd["prev_episode_id"])
        self._prev_end.copy_(sd["prev_end"])
        self.violations.copy_(sd["violations"])
        if self.store_final:
            self._prev_final.copy_(sd["prev_final"])
        for k in self.STATE:
            setattr(self, k, sd[k])

    def _arange(self, T: int) -> torch.Tensor:
        if T not in self._steps:
            self._steps[T] = torch.arange(T, device=self.device)[:, None]  # [T, 1]
        return self._steps[T]
