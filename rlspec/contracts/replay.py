"""Runtime half of contract ``replay`` (the formula, clauses and properties: spec/replay.py).

Constants, documented defaults and validators shared by every implementation; imports only torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import torch

from rlspec.contracts.validate import (
    require_finite,
    require_int,
    require_no_nan,
    require_shape,
)

OBS_SHAPE = (1, 72, 20)  # packed2: 72 rows × 80 pixels at 2 bits per pixel (seed §2.3, §2.4)


FIELDS = ("obs", "action", "reward", "is_first", "continue", "episode_id")


FLAGS = ("terminated", "truncated")


FINAL = "final_obs"  # optional (store_final=True): the observation after a_t, before any reset
OBS_LIKE = ("obs", FINAL)  # the fields shaped [N, *obs_shape] with the ring's obs dtype


DTYPES = {"action": torch.int32, "reward": torch.float32, "is_first": torch.bool,
          "continue": torch.float32, "episode_id": torch.int32, "terminated": torch.bool,
          "truncated": torch.bool}


ARG = {"continue": "continue_"}  # push argument names that differ from the field names


PUSH = "ReplayRing.push"


def schema(capacity: int, num_envs: int, obs_shape: tuple, obs_dtype: torch.dtype,
           store_flags: bool, store_final: bool = False) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """field -> (storage shape, dtype)."""
    out = {"obs": ((capacity, num_envs, *obs_shape), obs_dtype)}
    for name in FIELDS[1:] + (FLAGS if store_flags else ()):
        out[name] = ((capacity, num_envs), DTYPES[name])
    if store_final:
        out[FINAL] = out["obs"]
    return out


# documented defaults of ReplayRing's optional arguments (REPLAY-21)
DEFAULTS = dict(obs_shape=OBS_SHAPE, obs_dtype=torch.uint8, store_flags=False, commit_stride=1, safety_margin=0)


def validate_config(capacity: int, num_envs: int, obs_shape: tuple, obs_dtype: torch.dtype,
                    commit_stride: int, safety_margin: int) -> None:
    fn = "ReplayRing"
    require_int(fn, "capacity", capacity, 2)
    require_int(fn, "num_envs", num_envs, 1)
    require_int(fn, "commit_stride", commit_stride, 1)
    require_int(fn, "safety_margin", safety_margin, 0)
    if not (isinstance(obs_shape, tuple) and all(isinstance(d, int) and d >= 1 for d in obs_shape)):
        raise ValueError(f"{fn}: argument 'obs_shape' must be a tuple of ints >= 1, got {obs_shape!r}")
    if not isinstance(obs_dtype, torch.dtype):
        raise TypeError(f"{fn}: argument 'obs_dtype' must be a torch.dtype, got {obs_dtype!r}")


def readable_range(t: int, committed_t: int, capacity: int, safety_margin: int) -> tuple[int, int]:
    """[lo, hi): the global steps the sampler may read (see the module docstring)."""
    return max(0, t + 1 - capacity), committed_t - safety_margin


def validate_sample_args(fn: str, B: int, T: int, generator: Any, device: torch.device,
                         lo: int, hi: int) -> None:
    require_int(fn, "B", B, 1)
    require_int(fn, "T", T, 1)
    if T > hi - lo:
        raise ValueError(f"{fn}: argument 'T' = {T} exceeds the {max(0, hi - lo)} readable steps "
                         f"[{lo}, {hi}) (committed and not under the write head); expected T <= {max(0, hi - lo)}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"{fn}: argument 'generator' must be a torch.Generator (the global RNG is never "
                        f"used), got {type(generator).__name__}")
    if torch.device(generator.device).type != torch.device(device).type:
        raise ValueError(f"{fn}: argument 'generator' is on {generator.device}, expected the ring's "
                         f"device {device}")


def validate_push_meta(ring: Any, fields: Mapping[str, torch.Tensor | None], slot_written: bool) -> None:
    """dtype, shape, device of one step's fields (host metadata only: no device synchronization).
    ``fields`` maps field names to tensors; obs None means "written through obs_slot(ring.t)", which
    ``slot_written`` confirms."""
    n = ring.num_envs
    for name, value in fields.items():
        arg = ARG.get(name, name)
        if value is None:
            if name == "obs" and not slot_written:
                raise ValueError(f"{PUSH}: argument 'obs' is None, expected a tensor [N, *obs_shape] or a "
                                 f"prior direct write through obs_slot({ring.t}) (got none for this step)")
            if name == "obs" or name in FLAGS and not ring.store_flags or name == FINAL and not ring.store_final:
                continue
            why = (f"a tensor [{n}, *obs_shape] (the ring stores final_obs: store_final=True)" if name == FINAL
                   else f"a bool tensor [{n}] (the ring stores terminated/truncated: store_flags=True)")
            raise ValueError(f"{PUSH}: argument '{arg}' is None, expected {why}")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{PUSH}: argument '{arg}' must be a torch.Tensor, got {type(value).__name__}")
        dtype = ring.obs_dtype if name in OBS_LIKE else DTYPES[name]
        if value.dtype != dtype:
            raise TypeError(f"{PUSH}: argument '{arg}' has dtype {value.dtype}, expected {dtype}")
        shape = (n, *ring.obs_shape) if name in OBS_LIKE else (n,)
        require_shape(PUSH, arg, value, shape, "(one step for all N envs)")
        if value.device != ring.device:
            raise ValueError(f"{PUSH}: argument '{arg}' is on {value.device}, expected the ring's device "
                             f"{ring.device} (no hidden copies)")


def push_violations(t: int, prev_episode_id: torch.Tensor, prev_end: torch.Tensor,
                    fields: Mapping[str, torch.Tensor | None], prev_final: torch.Tensor | None = None
                    ) -> torch.Tensor:
    """[N] bool: env entries of one step that break a value rule (computed on the device, no sync).
    ``prev_final``: the previous step's stored final_obs [N, ...] (a store_final ring after its first push);
    ``fields['obs']`` is then this step's obs, also where it was written through obs_slot."""
    r, c, f, e = (fields[k] for k in ("reward", "continue", "is_first", "episode_id"))
    bad = ~torch.isfinite(r) | ((c != 0) & (c != 1))
    if t == 0:
        bad |= ~f
    else:  # in int64: an int32 id at 2³¹−1 has no successor (a wrap to −2³¹ is not "+ 1")
        e, prev = e.long(), prev_episode_id.long()
        bad |= torch.where(f, e != prev + 1, e != prev) | (prev_end & ~f)
    term, trunc = fields.get("terminated"), fields.get("truncated")
    if term is not None:
        bad |= term & (c != 0)
    if trunc is not None:  # a step flagged both is terminal (continue 0)
        bad |= trunc & ~(term if term is not None else torch.zeros_like(trunc)) & (c != 1)
    if prev_final is not None:  # no reset in between: the observation after the last step is this one
        bad |= ~f & _differs(fields["obs"], prev_final)
    return bad


def value_inputs(ring: Any, fields: Mapping[str, torch.Tensor | None]) -> tuple[dict, torch.Tensor | None]:
    """(fields with obs resolved, prev_final) for push_violations / validate_push_values: obs None reads the
    row obs_slot wrote; prev_final is the final_obs the previous push gave, which the ring keeps in
    ``_prev_final`` (like the previous episode_id: validation never reads storage back). None: the ring does
    not store final_obs, or nothing was pushed yet."""
    current = {**fields, "obs": ring.storage()["obs"][ring.t % ring.capacity] if fields["obs"] is None
               else fields["obs"]}
    return current, ring._prev_final if ring.store_final and ring.t else None


def _differs(obs: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
    """[N] bool: env rows of two [N, *obs_shape] observations that differ anywhere."""
    return (obs != final).reshape(len(obs), -1).any(1)


def validate_push_values(t: int, prev_episode_id: torch.Tensor, prev_end: torch.Tensor,
                         fields: Mapping[str, torch.Tensor | None], prev_final: torch.Tensor | None = None) -> None:
    """Raise naming the field, env column, expected and actual for the first broken value rule
    (``prev_final`` and ``fields['obs']`` as in push_violations)."""
    if not bool(push_violations(t, prev_episode_id, prev_end, fields, prev_final).any()):
        return  # one synchronization on the happy path
    r, c, f, e = (fields[k] for k in ("reward", "continue", "is_first", "episode_id"))
    require_no_nan(PUSH, "reward", r)
    require_finite(PUSH, "reward", r)
    _first_bad("continue_", (c != 0) & (c != 1), c, "0.0 or 1.0")
    if t == 0:
        _first_bad("is_first", ~f, f, "True on the first push (every env starts an episode)")
    else:
        _first_bad("is_first", prev_end & ~f, f, "True after an episode end (continue 0, terminated or "
                                                  "truncated at the previous step)")
        for env in range(len(e)):
            want = int(prev_episode_id[env]) + int(bool(f[env]))
            if int(e[env]) != want:
                rule = "previous episode_id + 1 (is_first=True)" if bool(f[env]) else \
                    "the previous episode_id (is_first=False)"
                raise ValueError(f"{PUSH}: argument 'episode_id' at env {env} is {int(e[env])}, expected "
                                 f"{want} = {rule}")
    term, trunc = fields.get("terminated"), fields.get("truncated")
    if term is not None:
        _first_bad("continue_", term & (c != 0), c, "0.0 where terminated=True")
    if trunc is not None:
        cut = trunc & ~term if term is not None else trunc
        _first_bad("continue_", cut & (c != 1), c, "1.0 where truncated=True and terminated=False (a time limit "
                                                    "is not a terminal)")
    if prev_final is not None:
        bad = ~f & _differs(fields["obs"], prev_final)
        if bool(bad.any()):
            env = int(bad.nonzero()[0])
            raise ValueError(f"{PUSH}: argument 'obs' at env {env} differs from the previous step's final_obs, "
                             "expected the same observation (is_first=False: no reset in between, so the "
                             f"observation after that step is this one) ({int(bad.sum())} of {bad.numel()} envs)")


def _first_bad(arg: str, bad: torch.Tensor, value: torch.Tensor, expected: str) -> None:
    if bool(bad.any()):
        env = int(bad.nonzero()[0])
        raise ValueError(f"{PUSH}: argument '{arg}' at env {env} is {value[env].item()!r}, expected {expected} "
                         f"({int(bad.sum())} of {bad.numel()} envs)")


def episode_end(fields: Mapping[str, torch.Tensor | None]) -> torch.Tensor:
    """[N] bool: the step ends an episode (continue 0, or a terminated/truncated flag)."""
    end = fields["continue"] == 0
    for k in FLAGS:
        if fields.get(k) is not None:
            end = end | fields[k]
    return end


ARRIVAL = ("obs", "action", "reward", "is_first", "is_last", "is_terminal", "episode_id")


def _episodes(is_first: torch.Tensor, fn: str, name: str) -> list[tuple[int, int]]:
    """[(start, end)) of each episode in a column [T] that starts with is_first."""
    if is_first.dim() != 1 or is_first.numel() == 0 or not bool(is_first[0]):
        raise ValueError(f"{fn}: argument '{name}' must be one env column [T] of whole episodes starting "
                         f"with is_first=True, got shape {tuple(is_first.shape)}, values "
                         f"{is_first[:4].tolist()}...")
    starts = is_first.nonzero().reshape(-1).tolist() + [is_first.numel()]
    return list(itertools.pairwise(starts))


def to_arrival(rows: Mapping[str, torch.Tensor], final_obs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Transition rows of one env column (whole episodes: it starts with is_first and its last row ends
    an episode) + the final observation of each episode [E, *obs_shape] -> arrival rows [T + E, ...]."""
    spans = _episodes(rows["is_first"], "to_arrival", "rows['is_first']")
    if final_obs.shape[0] != len(spans) or final_obs.shape[1:] != rows["obs"].shape[1:]:
        raise ValueError(f"to_arrival: argument 'final_obs' has shape {tuple(final_obs.shape)}, expected "
                         f"({len(spans)}, *{tuple(rows['obs'].shape[1:])}) (one per episode)")
    out: dict[str, list] = {k: [] for k in ARRIVAL}
    for i, (a, b) in enumerate(spans):
        n = b - a  # transitions; the episode has n + 1 arrival rows
        out["obs"] += [rows["obs"][a:b], final_obs[i:i + 1]]
        out["action"] += [rows["action"][a:b], torch.zeros(1, dtype=rows["action"].dtype)]
        out["reward"] += [torch.zeros(1, dtype=rows["reward"].dtype), rows["reward"][a:b]]
        out["is_first"].append(torch.arange(n + 1) == 0)
        out["is_last"].append(torch.arange(n + 1) == n)
        out["is_terminal"].append((torch.arange(n + 1) == n) & bool(rows["continue"][b - 1] == 0))
        out["episode_id"].append(rows["episode_id"][a:a + 1].expand(n + 1))
    return {k: torch.cat(v) for k, v in out.items()}


def from_arrival(rows: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Arrival rows of one env column (whole episodes, each ending with is_last) -> (transition rows with
    terminated/truncated [T − E, ...], final_obs [E, *obs_shape]). The final rows' actions are dropped
    (no action is taken from a final observation); a non-zero reward on an is_first row is rejected (no
    transition led there: nothing in the transition rows could hold it). Arrival rows carry one end flag
    (is_terminal): a step that was both terminated and truncated comes back terminated only."""
    spans = _episodes(rows["is_first"], "from_arrival", "rows['is_first']")
    out: dict[str, list] = {k: [] for k in FIELDS + FLAGS}
    finals = []
    for a, b in spans:
        last = b - 1
        if not bool(rows["is_last"][last]) or bool(rows["is_last"][a:last].any()) or last == a:
            raise ValueError(f"from_arrival: argument 'rows' episode at rows [{a}, {b}) must end with its only "
                             f"is_last row after at least one step, got is_last={rows['is_last'][a:b].tolist()}")
        if rows["reward"][a] != 0:
            raise ValueError(f"from_arrival: argument 'rows' has reward {rows['reward'][a].item()!r} on the "
                             f"is_first row {a}, expected 0 (a reset is not reached by a transition)")
        n = last - a
        terminal = bool(rows["is_terminal"][last])
        out["obs"].append(rows["obs"][a:last])
        out["action"].append(rows["action"][a:last])
        out["reward"].append(rows["reward"][a + 1:b])
        out["is_first"].append(torch.arange(n) == 0)
        out["continue"].append(torch.where((torch.arange(n) == n - 1) & terminal, 0.0, 1.0))
        out["episode_id"].append(rows["episode_id"][a:last])
        out["terminated"].append((torch.arange(n) == n - 1) & terminal)
        out["truncated"].append((torch.arange(n) == n - 1) & (not terminal))
        finals.append(rows["obs"][last:b])
    return {k: torch.cat(v) for k, v in out.items()}, torch.cat(finals)
