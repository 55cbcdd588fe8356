"""Planted bugs for the ``replay`` contract: the reference ring (or the fast one, for the commit logic)
with exactly one bug. Storage bugs corrupt the row just written after the ring's own validation (which
reads the previous step from the ring's private state, not from storage), so they show up where a
consumer would meet them: in the stored rows.

Each entry names the clause that must catch it; ``spared`` clauses must still pass.
"""

from __future__ import annotations

import types

import torch
from planted import Planted

from rlspec.fast import replay as fast
from rlspec.reference import replay as ref


class _IsFirstDropped(ref.ReplayRing):
    """is_first not set after a reset: only the ring's very first row keeps it."""

    def push(self, *args, **kwargs):
        super().push(*args, **kwargs)
        if self.t > 1:
            self._store["is_first"][(self.t - 1) % self.capacity] = False


class _EpisodeIdFrozen(ref.ReplayRing):
    """episode_id not incremented: every row keeps the id of the env's first episode."""

    def push(self, *args, **kwargs):
        super().push(*args, **kwargs)
        row = (self.t - 1) % self.capacity
        if self.t == 1:
            self._first_id = self._store["episode_id"][row].clone()
        self._store["episode_id"][row] = self._first_id


class _TruncationAsTerminal(ref.ReplayRing):
    """truncation stored as continue 0 (done = terminated or truncated)."""

    def push(self, obs, action, reward, is_first, continue_, episode_id, terminated=None, truncated=None,
             final_obs=None):
        super().push(obs, action, reward, is_first, continue_, episode_id, terminated, truncated, final_obs)
        if truncated is not None:
            row = (self.t - 1) % self.capacity
            self._store["continue"][row] = torch.where(truncated, 0.0, self._store["continue"][row])


class _CrossesWriteHead(ref.ReplayRing):
    """Windows start anywhere in the filled rows and run on across the write head."""

    def sample_sequences(self, B, T, generator):
        filled = min(self.t, self.capacity)
        env = torch.randint(0, self.num_envs, (B,), generator=generator)  # [B]
        first = torch.randint(0, filled - T + 1, (B,), generator=generator)  # [B] rows
        rows = first + torch.arange(T)[:, None]  # [T, B]
        step = rows + self.capacity * ((self.t - 1 - rows) // self.capacity)  # the step each row holds
        out = {k: v[rows, env] for k, v in self._store.items()}
        return {**out, "env": env, "step": step}


class _GlobalRng(ref.ReplayRing):
    """The window indices come from the global RNG; the generator argument is ignored."""

    def sample_sequences(self, B, T, generator):
        seeded = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ())))
        return super().sample_sequences(B, T, seeded)


class _StrictSampler(ref.ReplayRing):
    """Strict sampling: redraws windows that contain an episode start after their first row."""

    def sample_sequences(self, B, T, generator):
        keep = []
        for _ in range(20):
            out = super().sample_sequences(B, T, generator)
            ok = ~out["is_first"][1:].any(0)  # [B]
            keep.append({k: v[ok] if k == "env" else v[:, ok] for k, v in out.items()})
            if sum(o["env"].numel() for o in keep) >= B:
                break
        keep.append(out)  # no clean window found often enough: fall back to the last draw
        cat = {k: torch.cat([o[k] for o in keep], dim=0 if k == "env" else 1) for k in keep[0]}
        return {k: v[:B] if k == "env" else v[:, :B] for k, v in cat.items()}


class _WritesBeforeValidating(ref.ReplayRing):
    """The reward row is written before the push is validated: a rejected push leaves a trace."""

    def push(self, obs, action, reward, is_first, continue_, episode_id, terminated=None, truncated=None,
             final_obs=None):
        if isinstance(reward, torch.Tensor) and reward.shape == (self.num_envs,):
            self._store["reward"][self.t % self.capacity] = reward
        super().push(obs, action, reward, is_first, continue_, episode_id, terminated, truncated, final_obs)


class _ReadsUnderHead(ref.ReplayRing):
    """The oldest stored step is readable although its row is the next step's obs_slot."""

    def sample_sequences(self, B, T, generator):
        self.t -= 1  # readable_range(t - 1, ...) starts one step earlier
        try:
            return super().sample_sequences(B, T, generator)
        finally:
            self.t += 1


class _FinalIsObs(ref.ReplayRing):
    """final_obs stored as the step's own observation o_t (the row's obs), not the one after a_t."""

    def push(self, *args, **kwargs):
        super().push(*args, **kwargs)
        if self.store_final:
            row = (self.t - 1) % self.capacity
            self._store["final_obs"][row] = self._store["obs"][row]


class _FinalUnchecked(ref.ReplayRing):
    """push never compares an observation with the previous step's final_obs (it forgets the one it got)."""

    def push(self, *args, **kwargs):
        super().push(*args, **kwargs)
        self._prev_final = None


class _FinalAliased(ref.ReplayRing):
    """The previous final_obs kept as the caller's tensor, not a copy."""

    def push(self, *args, **kwargs):
        super().push(*args, **kwargs)
        if self.store_final:
            self._prev_final = kwargs["final_obs"]


class _FinalNotSampled(ref.ReplayRing):
    """final_obs stored but left out of the sampled windows."""

    def sample_sequences(self, B, T, generator):
        return {k: v for k, v in super().sample_sequences(B, T, generator).items() if k != "final_obs"}


class _ReadsUncommitted(fast.ReplayRing):
    """The fast ring's sampler reads every pushed step, committed or not."""

    def _window_range(self):
        lo, _ = super()._window_range()
        return lo, self.t - self.safety_margin


def _ring(cls) -> types.SimpleNamespace:
    return types.SimpleNamespace(ReplayRing=cls)


PLANTED_REPLAY = (
    Planted("is_first not set after a reset", "replay", _ring(_IsFirstDropped), "REPLAY-3",
            "with is_first=False", ("REPLAY-4", "REPLAY-5", "REPLAY-6", "REPLAY-7", "REPLAY-14")),
    Planted("episode_id not incremented", "replay", _ring(_EpisodeIdFrozen), "REPLAY-4",
            "is_first=True with episode_id", ("REPLAY-3", "REPLAY-5", "REPLAY-7", "REPLAY-8")),
    Planted("truncation stored as continue 0", "replay", _ring(_TruncationAsTerminal), "REPLAY-7",
            "truncated=True with continue = 0.0", ("REPLAY-3", "REPLAY-4", "REPLAY-5", "REPLAY-6", "REPLAY-8")),
    Planted("sampler crosses the write head", "replay", _ring(_CrossesWriteHead), "REPLAY-10",
            "crosses the write head", ("REPLAY-2", "REPLAY-3", "REPLAY-9")),
    Planted("sampler uses the global RNG", "replay", _ring(_GlobalRng), "REPLAY-12",
            "the global RNG is used", ("REPLAY-9", "REPLAY-10", "REPLAY-11")),  # REPLAY-13's fixed-seed
    # chi-square is meaningless for a sampler that ignores its generator: it then depends on earlier tests
    Planted("strict sampler rejects episode starts", "replay", _ring(_StrictSampler), "REPLAY-13",
            "chi-square", ("REPLAY-9", "REPLAY-10", "REPLAY-11", "REPLAY-12")),
    Planted("push writes before validating", "replay", _ring(_WritesBeforeValidating), "REPLAY-14",
            "changed by the rejected push", ("REPLAY-2", "REPLAY-3", "REPLAY-10")),
    Planted("sampler reads the row under the write head", "replay", _ring(_ReadsUnderHead), "REPLAY-11",
            "under the write head", ("REPLAY-9", "REPLAY-10", "REPLAY-12")),
    Planted("final_obs stored as the step's own obs", "replay", _ring(_FinalIsObs), "REPLAY-26",
            "differs from the previous step's final_obs", ("REPLAY-3", "REPLAY-4", "REPLAY-5", "REPLAY-8")),
    Planted("push accepts an obs that is not the previous final_obs", "replay", _ring(_FinalUnchecked), "REPLAY-27",
            "obs_not_final", ("REPLAY-2", "REPLAY-3", "REPLAY-25", "REPLAY-26")),
    Planted("the previous final_obs aliased, not copied", "replay", _ring(_FinalAliased), "REPLAY-27",
            "kept the caller's tensor", ("REPLAY-2", "REPLAY-25", "REPLAY-26")),
    Planted("final_obs left out of the samples", "replay", _ring(_FinalNotSampled), "REPLAY-25",
            "sample['final_obs'] is missing", ("REPLAY-2", "REPLAY-26", "REPLAY-27")),
    Planted("fast sampler reads uncommitted rows", "replay", _ring(_ReadsUncommitted), "REPLAY-11",
            "not yet committed", ("REPLAY-9", "REPLAY-10", "REPLAY-12", "REPLAY-13")),
)
