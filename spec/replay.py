"""Contract ``replay``: DreamerV3's time-major replay ring with transition-aligned rows.

Source: the Dreamer plan (Master Plan v2) §2.2 (time-major: storage ``[Tcap, N, ...]``, samples ``[T, B, ...]``),
§2.3 (replay schema, is_first contract, non-strict sampling), milestones M1 (ReplayRing, episode_id
invariants, continue semantics), M6 (``obs_slot`` direct writes, commit markers, zero-copy gates) and
M7 (``commit_stride`` decoupled from ``seq_len``; the learner samples a stable committed region).

Schema (storage ``[Tcap, N, ...]``; a push writes one row ``[N, ...]`` = one env step for all N envs)
----------------------------------------------------------------------------------------------------
    obs        o_t [Tcap, N, *obs_shape]  obs_dtype (default packed2 uint8, obs_shape (1, 72, 20))
    action     a_t [Tcap, N]  int32       action taken at o_t
    reward     r_t [Tcap, N]  float32     reward of the transition out of o_t (finite)
    is_first   f_t [Tcap, N]  bool        o_t is the first observation of an episode
    continue   c_t [Tcap, N]  float32     0.0 if the transition out of o_t terminated the episode, else 1.0
    episode_id e_t [Tcap, N]  int32       per env: unchanged within an episode, +1 at every reset
    terminated, truncated [Tcap, N] bool  optional (``store_flags=True``), for debugging
    final_obs  [Tcap, N, *obs_shape]     optional (``store_final=True``): the observation after a_t, before any
                                          reset (= o_{t+1} unless step t ended an episode)

Push dtypes are exact (no silent casts); inputs must already be on the ring's device (no hidden copy).

Alignment: row t holds the transition *out of* o_t (seed §2.3)
----------------------------------------------------------------
    transition rows (this ring)             arrival rows (sheeprl 0.8.4, danijar/dreamerv3)
    t: o_t, a_t, r_{t+1}, f_t, c_t, e_t      k: o_k, a_k, reward received on arriving at o_k, is_first_k,
                                                is_last_k, is_terminal_k (continue target 1 − is_terminal_k)
An episode of L transitions is L transition rows, and L + 1 arrival rows: the arrival convention also
stores the *final* observation (is_last = 1, reward = the last transition's reward, action meaningless;
sheeprl writes 0), and its first row carries reward 0. ``from_arrival`` / ``to_arrival`` convert one env
column of whole episodes; the final observations travel separately (``final_obs [E, *obs_shape]``, one
per episode), so both round trips are exact (tests/unit/test_replay_alignment.py).

Truncation. A time-limit end stores c_t = 1 (the state after a_t is not terminal: its value should be
bootstrapped) although the env resets: row t+1 holds the *reset* observation of the next episode with
f_{t+1} = 1 and e_{t+1} = e_t + 1. The final observation of a truncated episode is in the ring only
with ``store_final=True`` (final_obs_t; it doubles the observation memory).
Hence the rule for every consumer: **never bootstrap row t from row t+1 when f_{t+1} = 1** — its value
belongs to another episode. c_t alone does not say so (it is 1 on a truncation). Terminals are safe
(c_t = 0); at a truncation the target is in final_obs_t where the ring stores it; otherwise cut the return
there, or keep V(final obs) aside (the ``lambda_return`` and ``gae`` contracts state their choices). Inside
the world model the RSSM resets its state where f_t = 1 (seed §2.3), which is why sampling may cross episode
starts.

Invariants (``check_invariants(ring)``; consecutive steps s, s+1 of one env, across the wrap seam)
-----------------------------------------------------------------------------------------------
    e_{s+1} == e_s  or  f_{s+1}               f_{s+1} ⇒ e_{s+1} == e_s + 1           c_s ∈ {0.0, 1.0}
    terminated_s ⇒ c_s = 0     truncated_s ∧ ¬terminated_s ⇒ c_s = 1     (c_s = 0 or an end flag) ⇒ f_{s+1}
    A step flagged both terminated and truncated is terminal (gymnasium 1.x's TimeLimit on a terminal step
    at the limit): continue 0.     store_final: ¬f_{s+1} ⇒ final_obs_s == o_{s+1}

Ring, commits and sampling (global step s is stored at row s mod Tcap; ``t`` = steps pushed so far)
-------------------------------------------------------------------------------------------------
* Past capacity a push overwrites the oldest row. ``obs_slot(t)`` is the ``[N, *obs_shape]`` contiguous
  view of the next step's row (stable ``data_ptr()`` for the ring's lifetime) for direct writes by an env
  kernel; ``push(obs=None, ...)`` then stores what was written there.
* ``committed_t``: steps < committed_t are visible to the sampler. A commit happens after every
  ``commit_stride``-th push (and on ``commit()``); on CUDA it records an event on the pushing stream and
  the sampler's stream waits on it (no host synchronization). The reference models the same counters.
* Readable steps: ``lo = max(0, t + 1 − Tcap) <= s < hi = committed_t − safety_margin``. The lower
  bound excludes the row under the write head (it is the next step's ``obs_slot``, written at any time);
  the upper bound is the seed's "rows <= committed_t − safety_margin" (M6), with steps counted from 0.
* ``sample_sequences(B, T, generator)`` draws B windows of T consecutive readable steps of one env
  column, uniformly over the S·N valid (env, start) pairs, S = hi − lo − T + 1, with the given generator
  only (on the ring's device): ``u ~ randint(0, N·S)``, env = u // S, start = lo + u mod S. Windows may
  contain f_t = 1 anywhere (non-strict: no rejection). Returns the schema fields as ``[T, B, ...]`` plus
  ``env [B]`` and ``step [T, B]`` (int64 global steps, for checks and debugging).

Bad input (wrong dtype/shape/device, non-finite reward, continue ∉ {0, 1}, an episode_id that does not
follow the is_first rule — compared in int64, so an int32 id at 2³¹−1 cannot wrap to −2³¹ —, a missing
reset after an episode end, obs=None without a prior obs_slot write for that step) raises
ValueError/TypeError naming ``ReplayRing.push``, the argument, the env column, expected and actual, and
leaves the ring bit-identical. The fast ring can skip the value checks on device (``check_values=False``,
no host sync): it then counts offending env entries in ``violations`` (a device tensor) instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from hypothesis import strategies as st

from rlspec.contracts.replay import ARG, DEFAULTS, FINAL, OBS_LIKE, OBS_SHAPE, PUSH, readable_range, schema
from rlspec.spec.core import Change, Contract, Property, by_category, expect_rejection, fail
from rlspec.spec.power import assert_same_values
from rlspec.spec.scalars import RATIONALE as SCALAR_RATIONALE
from rlspec.spec.scalars import check_scalar_types

CLAUSES = {
    "REPLAY-1": "storage() holds the schema fields [Tcap, N, ...] with their dtypes (obs uint8 [1, 72, 20] "
                "by default; terminated/truncated iff store_flags)",
    "REPLAY-2": "row s mod Tcap holds what step s pushed, for the last min(t, Tcap) steps "
                "(past capacity the oldest rows are overwritten)",
    "REPLAY-3": "episode_id[s+1] == episode_id[s] or is_first[s+1] (also across the wrap seam)",
    "REPLAY-4": "is_first[s+1] => episode_id[s+1] == episode_id[s] + 1",
    "REPLAY-5": "continue is 0.0 or 1.0",
    "REPLAY-6": "terminated[s] => continue[s] == 0",
    "REPLAY-7": "truncated[s] and not terminated[s] => continue[s] == 1 (although a reset follows); a step "
                "flagged both is terminal",
    "REPLAY-8": "an episode end at s (continue 0, terminated or truncated) => is_first[s+1]",
    "REPLAY-9": "sample_sequences returns the fields as [T, B, ...] with the storage dtypes, env [B], step [T, B]",
    "REPLAY-10": "each window is T consecutive steps of one env column holding the pushed data "
                 "(never across the write head)",
    "REPLAY-11": "windows read only steps in [max(0, t+1-Tcap), committed_t - safety_margin); committed_t "
                 "advances every commit_stride pushes and on commit()",
    "REPLAY-12": "identical generator state => identical samples, whatever the global RNG state",
    "REPLAY-13": "window starts are uniform over the valid (env, start) pairs, episode starts inside "
                 "windows included (chi-square at a fixed seed, alpha = 0.001)",
    "REPLAY-14": "a bad push is rejected naming the field, expected and actual; the ring is left "
                 "bit-identical and keeps accepting valid pushes",
    "REPLAY-15": "bad sample arguments (T beyond the readable steps, B or T < 1, no generator) are rejected "
                 "naming the argument",
    "REPLAY-16": "obs_slot(t) is a contiguous [N, *obs_shape] view of step t's row with a stable data_ptr; "
                 "push(obs=None) stores what was written there",
    "REPLAY-17": "hyper-parameters given as numpy scalars or 0-d tensors are validated and used exactly like the Python number they hold",
    "REPLAY-18": "stored fields keep no autograd graph: pushing a reward that requires grad leaves storage() detached",
    "REPLAY-19": "sample_sequences decodes exactly as documented: u = randint(0, N·S, (B,), generator), env = u // S, "
                 "step[i] = lo + u mod S + i (S = hi − lo − T + 1), bit for bit with a copy of the generator",
    "REPLAY-20": "a fresh ring has t == committed_t == 0 before any push",
    "REPLAY-21": "documented defaults: omitting obs_shape, obs_dtype, store_flags, commit_stride, safety_margin equals "
                 "passing (1, 72, 20), uint8, False, 1, 0 (storage, counters and samples, bit for bit)",
    "REPLAY-22": "a bad configuration (capacity < 2, num_envs < 1, commit_stride < 1, safety_margin < 0, obs_shape, "
                 "obs_dtype) and obs_slot(t) for a t other than the next step are rejected naming the argument",
    "REPLAY-23": "push copies what it keeps: writing into the caller's tensors after a push changes neither the "
                 "storage nor how later pushes are validated",
    "REPLAY-24": "sampling a fresh ring (nothing pushed) is rejected naming 'T'",
    "REPLAY-25": "store_final=True (default False: no such field) adds final_obs [Tcap, N, *obs_shape] with the obs "
                 "dtype; row s mod Tcap holds the final_obs step s pushed, and sampled windows carry it",
    "REPLAY-26": "store_final: final_obs[s] == obs[s+1] wherever is_first[s+1] is False (no reset in between, the "
                 "observation after a step is the next step's; also across the wrap seam)",
    "REPLAY-27": "store_final: a push without final_obs, or whose obs is not the previous step's final_obs although "
                 "is_first is False, is rejected naming the argument; the ring is left bit-identical; the comparison "
                 "is with final_obs as pushed (writing into that tensor afterwards changes nothing)",
}

CATEGORIES = by_category(
    maths=("REPLAY-1", "REPLAY-2", "REPLAY-3", "REPLAY-4", "REPLAY-5", "REPLAY-6", "REPLAY-7", "REPLAY-8",
           "REPLAY-9", "REPLAY-10", "REPLAY-11", "REPLAY-12", "REPLAY-13", "REPLAY-16", "REPLAY-19", "REPLAY-20",
           "REPLAY-21", "REPLAY-25", "REPLAY-26"),
    robustness=("REPLAY-17", "REPLAY-18", "REPLAY-23"),
    validation=("REPLAY-14", "REPLAY-15", "REPLAY-22", "REPLAY-24", "REPLAY-27"),
)
RATIONALE = {
    "REPLAY-18": "The ring's layout says nothing about autograd; storing a reward that still requires grad "
                 "keeps the whole rollout's graph alive in the ring (memory grows with capacity) and lets a "
                 "later backward reach the actor. The kit asks that stored fields be detached, as every replay "
                 "buffer in the field does.",
    "REPLAY-23": "The layout says nothing about aliasing, so a ring that keeps references to the caller's "
                 "tensors stores every value right at push time. The kit asks for copies because collectors "
                 "reuse their buffers: the next step's write would silently rewrite the stored transition.",
    "REPLAY-17": SCALAR_RATIONALE,
}

INTERFACE = ("ReplayRing",)
"""
ReplayRing(capacity, num_envs, obs_shape=(1, 72, 20), obs_dtype=torch.uint8, *, store_flags=False,
           store_final=False, commit_stride=1, safety_margin=0)   # fast adds device=..., check_values=True
  .capacity, .num_envs, .obs_shape, .obs_dtype, .store_flags, .store_final, .device, .t, .committed_t
  .push(obs [N, *obs_shape] | None, action [N], reward [N], is_first [N], continue_ [N], episode_id [N],
        terminated=None, truncated=None, final_obs=None [N, *obs_shape]) -> None
  .commit() -> None
  .obs_slot(t) -> Tensor [N, *obs_shape]                (t == .t: the next step)
  .storage() -> dict[str, Tensor [Tcap, N, ...]]
  .sample_sequences(B, T, generator) -> dict[str, Tensor [T, B, ...]] + env [B], step [T, B]
"""






# --------------------------------------------------------------------------------------------------
# check_invariants: reusable on any ring (tests, debug mode)
# --------------------------------------------------------------------------------------------------
INVARIANTS = ("REPLAY-3", "REPLAY-4", "REPLAY-5", "REPLAY-6", "REPLAY-7", "REPLAY-8", "REPLAY-26")


def check_invariants(ring: Any, clauses: tuple[str, ...] = INVARIANTS) -> None:
    """Check the episode invariants over every stored step, oldest first (across the wrap seam); raise a
    clause-tagged ContractViolation naming the env column, the global step and the row of the first
    violation. Copies the storage to the CPU (a synchronization on CUDA: not for the hot loop)."""
    final = "REPLAY-26" in clauses and FINAL in ring.storage()
    store = {k: v.detach().cpu() for k, v in ring.storage().items() if k not in OBS_LIKE or final}
    cap, t = ring.capacity, ring.t
    steps = list(range(max(0, t - cap), t))
    rows = torch.tensor([s % cap for s in steps], dtype=torch.long)
    col = {k: v[rows] for k, v in store.items()}  # [S, N], chronological
    e, f, c = col["episode_id"].long(), col["is_first"], col["continue"]
    term, trunc = col.get("terminated"), col.get("truncated")
    end = (c == 0) | (term if term is not None else False) | (trunc if trunc is not None else False)
    checks = {
        "REPLAY-3": (1, (e[1:] != e[:-1]) & ~f[1:], "episode_id changes from {p} to {v} with is_first=False",
                     e),
        "REPLAY-4": (1, f[1:] & (e[1:] != e[:-1] + 1), ("is_first=True with episode_id {v} after {p}, "
                                                       "expected {p} + 1"), e),
        "REPLAY-5": (0, (c != 0) & (c != 1), "continue = {v}, expected 0.0 or 1.0", c),
        "REPLAY-6": (0, term & (c != 0) if term is not None else None,
                     "terminated=True with continue = {v}, expected 0.0", c),
        "REPLAY-7": (0, trunc & ~term & (c != 1) if trunc is not None and term is not None else None,
                     "truncated=True with continue = {v}, expected 1.0 (a time limit is not a terminal)", c),
        "REPLAY-8": (1, end[:-1] & ~f[1:], ("is_first=False after an episode end at the previous step "
                                           "(continue {p})"), c),
        "REPLAY-26": (1, ~f[1:] & (col["obs"][1:] != col[FINAL][:-1]).flatten(2).any(2) if final else None,
                      "obs differs from the previous step's final_obs with is_first={v} (no reset in between)", f),
    }
    for clause in clauses:
        shift, bad, template, values = checks[clause]
        if bad is None or not bool(bad.any()):
            continue
        i, env = (int(x) for x in bad.nonzero()[0])
        s = steps[i + shift]
        prev = values[i + shift - 1, env].item() if shift else None
        msg = template.format(v=values[i + shift, env].item(), p=prev)
        seam = " (across the wrap seam)" if shift and s % cap == 0 else ""
        fail(clause, f"env column {env}, step {s} (row {s % cap}){seam}: {msg}; "
                     f"{int(bad.sum())} violation(s) in {len(steps)} stored steps × {ring.num_envs} envs")


# --------------------------------------------------------------------------------------------------
# Streams of valid steps, and driving a ring
# --------------------------------------------------------------------------------------------------
def make_stream(steps: int, num_envs: int, obs_shape: tuple, obs_dtype: torch.dtype, seed: int,
                p_end: float = 0.2, ends: Mapping[tuple[int, int], str] = (), first_id: int = 0
                ) -> dict[str, torch.Tensor]:
    """A valid stream [steps, N, ...] (every field plus terminated/truncated and final_obs, the next step's
    obs unless the step ended an episode): random obs/action/reward,
    episode ends with probability p_end (terminated, truncated, or both: gymnasium's terminal at the time
    limit), and the pinned ends {(step, env): "terminated" | "truncated" | "both" | "none"}."""
    g = torch.Generator().manual_seed(seed)
    n = num_envs
    obs = _random_obs(g, (steps, n, *obs_shape), obs_dtype)
    kind = torch.where(torch.rand(steps, n, generator=g) < p_end,
                       torch.randint(1, 4, (steps, n), generator=g), 0)  # 0 none, 1 term., 2 trunc., 3 both
    for (s, env), what in dict(ends).items():
        if s < steps:
            kind[s, env] = ("none", "terminated", "truncated", "both").index(what)
    terminated, truncated = (kind == 1) | (kind == 3), (kind == 2) | (kind == 3)
    final = _random_obs(g, (steps, n, *obs_shape), obs_dtype)  # an episode's end shows its own final frame
    final[:-1] = torch.where((kind[:-1] == 0).reshape(steps - 1, n, *[1] * len(obs_shape)), obs[1:], final[:-1])
    is_first = torch.ones(steps, n, dtype=torch.bool)
    is_first[1:] = (kind[:-1] != 0)
    episode_id = (first_id + torch.cumsum(is_first.int(), 0) - 1).int()
    return {"obs": obs, "action": torch.randint(0, 18, (steps, n), generator=g, dtype=torch.int32),
            "reward": torch.randn(steps, n, generator=g), "is_first": is_first,
            "continue": (~terminated).float(), "episode_id": episode_id,
            "terminated": terminated, "truncated": truncated, FINAL: final}


def _random_obs(g: torch.Generator, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 256 if dtype == torch.uint8 else 1000, shape, generator=g, dtype=dtype)


def step_args(stream: Mapping[str, torch.Tensor], s: int, device: Any = "cpu", obs: bool = True,
              final: bool = False) -> dict:
    """Keyword arguments of ring.push for step s of a stream (final_obs only with ``final``: a ring that stores
    it)."""
    args = {ARG.get(k, k): v[s].to(device) for k, v in stream.items() if final or k != FINAL}
    if not obs:
        args["obs"] = None
    return args


def new_ring(impl: Any, case: Mapping[str, Any]) -> Any:
    return impl.ReplayRing(case["capacity"], case["num_envs"], case["obs_shape"], case["obs_dtype"],
                           store_flags=case["store_flags"], commit_stride=case["commit_stride"],
                           safety_margin=case["safety_margin"], **_final(case))


def _final(case: Mapping[str, Any]) -> dict:
    """store_final=True where the case stores final_obs (omitted otherwise: a ring of replay 1.0 has no such
    argument, and REPLAY-25 checks the default)."""
    return {"store_final": True} if case.get("store_final") else {}


def snapshot(ring: Any) -> dict[str, Any]:
    """Everything observable about a ring's state, copied to the CPU."""
    state = {k: v.detach().cpu().clone() for k, v in ring.storage().items()}
    return {**state, "t": ring.t, "committed_t": ring.committed_t}


def expected_committed(pushes: int, commit_stride: int) -> int:
    return pushes - pushes % commit_stride


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds = st.integers(0, 2**31 - 1)


@st.composite
def ring_cases(draw, min_steps: int = 1):
    """A ring configuration (Tcap <= 32, N <= 4) and a valid stream of up to 2.5·Tcap steps."""
    capacity = draw(st.sampled_from([2, 3, 5, 8, 13, 32]))
    num_envs = draw(st.integers(1, 4))
    obs_shape, obs_dtype = draw(st.sampled_from([((1, 3, 4), torch.uint8), ((2,), torch.float32),
                                                 ((3, 2), torch.int16), (OBS_SHAPE, torch.uint8)]))
    steps = draw(st.integers(min_steps, max(min_steps, 5 * capacity // 2 + 1)))
    p_end = draw(st.sampled_from([0.0, 0.15, 0.5]))
    case = {"capacity": capacity, "num_envs": num_envs, "obs_shape": obs_shape, "obs_dtype": obs_dtype,
            "store_flags": draw(st.booleans()), "commit_stride": draw(st.sampled_from([1, 1, 2, 3, 5])),
            "safety_margin": draw(st.sampled_from([0, 0, 1, 2]))}
    case["stream"] = make_stream(steps, num_envs, obs_shape, obs_dtype, draw(seeds), p_end,
                                 first_id=draw(st.sampled_from([0, 7])))
    return case


def pinned(capacity=8, num_envs=2, steps=12, ends=(), store_flags=True, commit_stride=1, safety_margin=0,
           p_end=0.0, seed=0) -> dict:
    """An edge case as a ring case: small uint8 obs, the given pinned episode ends."""
    return {"capacity": capacity, "num_envs": num_envs, "obs_shape": (1, 3, 4), "obs_dtype": torch.uint8,
            "store_flags": store_flags, "commit_stride": commit_stride, "safety_margin": safety_margin,
            "stream": make_stream(steps, num_envs, (1, 3, 4), torch.uint8, seed, p_end, dict(ends))}


EXAMPLES = (
    pinned(ends={(0, 0): "terminated", (1, 1): "truncated"}),  # an end on the very first steps
    pinned(ends={(0, 0): "truncated", (1, 0): "truncated"}, steps=3),  # truncation right after a reset
    pinned(capacity=8, steps=9, ends={(7, 0): "truncated", (7, 1): "terminated"}),  # ends at the seam
    pinned(capacity=2, num_envs=1, steps=7, p_end=0.5, seed=3),  # the smallest ring, many laps
    pinned(capacity=8, steps=8),  # exactly full
)


@st.composite
def sample_cases(draw):
    """A ring case with enough steps to sample, and checkpoints (push counts) at which to sample."""
    case = draw(ring_cases(min_steps=4))
    case["capacity"] = max(case["capacity"], 5)
    total = len(case["stream"]["reward"])
    case["checkpoints"] = sorted(set(draw(st.lists(st.integers(1, total), min_size=1, max_size=3)) + [total]))
    case["B"] = draw(st.integers(1, 8))
    case["T"] = draw(st.integers(1, 6))
    case["seed"] = draw(seeds)
    return case


SAMPLE_EXAMPLES = (
    dict(pinned(capacity=8, steps=21, p_end=0.3), checkpoints=[21], B=16, T=3, seed=1),  # laps + resets
    dict(pinned(capacity=13, steps=31, commit_stride=8, safety_margin=0, p_end=0.2),  # 7 uncommitted steps
         checkpoints=[23, 31], B=16, T=2, seed=2),
    dict(pinned(capacity=8, steps=11, commit_stride=3, safety_margin=2), checkpoints=[11], B=8, T=4, seed=5),
)


# --------------------------------------------------------------------------------------------------
# Properties: storage and invariants
# --------------------------------------------------------------------------------------------------
def _args(ring, stream, s, obs=True) -> dict:
    """step_args for this ring: final_obs where it stores it."""
    return step_args(stream, s, ring.device, obs, final=getattr(ring, "store_final", False) is True)


def _push(ring, stream, start, stop, obs=True):
    for s in range(start, stop):
        ring.push(**_args(ring, stream, s, obs))


def _fill(impl, case):
    ring = new_ring(impl, case)
    _push(ring, case["stream"], 0, len(case["stream"]["reward"]))
    return ring


def _config(case):
    return {k: v for k, v in case.items() if k not in ("stream", "checkpoints", "seed")}


def check_schema(impl, **case):
    ring = new_ring(impl, case)
    want = schema(case["capacity"], case["num_envs"], case["obs_shape"], case["obs_dtype"], case["store_flags"])
    default = impl.ReplayRing(4, 2).storage()["obs"]
    for name, (shape, dtype), got in [*((k, v, ring.storage().get(k)) for k, v in want.items()),
                                      ("obs (defaults)", ((4, 2, *OBS_SHAPE), torch.uint8), default)]:
        if got is None or tuple(got.shape) != shape or got.dtype != dtype:
            fail("REPLAY-1", f"storage field '{name}' is "
                             f"{'missing' if got is None else (tuple(got.shape), got.dtype)}, expected "
                             f"{(shape, dtype)}", **_config(case))
    extra = sorted(set(ring.storage()) - set(want))
    if extra:
        fail("REPLAY-1", f"storage has unexpected fields {extra}", **_config(case))


def check_storage(impl, **case):
    ring = new_ring(impl, case)
    stream, cap = case["stream"], case["capacity"]
    total = len(stream["reward"])
    for stop in sorted({min(total, cap), min(total, cap + 1), total}):  # full, one past the seam, the end
        _push(ring, stream, ring.t, stop)
        store = {k: v.cpu() for k, v in ring.storage().items()}
        for s in range(max(0, stop - cap), stop):
            for name, v in store.items():
                if not torch.equal(v[s % cap], stream[name][s]):
                    fail("REPLAY-2", f"after {stop} pushes, storage['{name}'] row {s % cap} is "
                                     f"{v[s % cap].reshape(-1)[:6].tolist()}..., expected step {s}'s "
                                     f"{stream[name][s].reshape(-1)[:6].tolist()}...", **_config(case))
        if ring.t != stop:
            fail("REPLAY-2", f"ring.t = {ring.t} after {stop} pushes", **_config(case))


def _invariant_check(clause):
    def check(impl, **case):
        case = dict(case, store_flags=True) if clause in ("REPLAY-6", "REPLAY-7") else case
        case = dict(case, store_final=True) if clause == "REPLAY-26" else case
        check_invariants(_fill(impl, case), (clause,))

    check.__name__ = f"check_invariant_{clause.split('-')[1]}"
    return check


# --------------------------------------------------------------------------------------------------
# Properties: sampling
# --------------------------------------------------------------------------------------------------
def _samples(impl, case):
    """Yield (ring, pushes, lo, hi, sample) at each checkpoint with enough readable steps."""
    ring = new_ring(impl, case)
    stream = case["stream"]
    g = torch.Generator(device=ring.device).manual_seed(case["seed"])
    for stop in case["checkpoints"]:
        _push(ring, stream, ring.t, stop)
        lo, hi = readable_range(stop, expected_committed(stop, case["commit_stride"]), case["capacity"],
                                case["safety_margin"])
        if hi - lo >= case["T"]:
            yield ring, stop, lo, hi, ring.sample_sequences(case["B"], case["T"], g)


def check_sample_shapes(impl, **case):
    for ring, stop, _, _, out in _samples(impl, case):
        T, B = case["T"], case["B"]
        want = {k: ((T, B, *shape[2:]), dtype) for k, (shape, dtype) in
                schema(case["capacity"], case["num_envs"], case["obs_shape"], case["obs_dtype"],
                       case["store_flags"], case.get("store_final", False)).items()}
        want.update(env=((B,), torch.int64), step=((T, B), torch.int64))
        for name, (shape, dtype) in want.items():
            got = out.get(name)
            if got is None or tuple(got.shape) != shape or got.dtype != dtype:
                fail("REPLAY-9", f"sample['{name}'] is {'missing' if got is None else (tuple(got.shape), got.dtype)}"
                                 f", expected {(shape, dtype)}", pushes=stop, **_config(case))


def check_windows(impl, **case):
    stream = case["stream"]
    for ring, stop, _, _, out in _samples(impl, case):
        env, step = out["env"].cpu(), out["step"].cpu()  # [B], [T, B]
        for b in range(case["B"]):
            steps = step[:, b].tolist()
            if steps != list(range(steps[0], steps[0] + case["T"])):
                fail("REPLAY-10", f"window {b} of env {int(env[b])} reads steps {steps}: not consecutive, it "
                                  f"crosses the write head (row {stop % case['capacity']})", pushes=stop,
                     **_config(case))
            for name, v in out.items():
                if name in ("env", "step"):
                    continue
                want = stream[name][step[:, b].clamp(0, len(stream[name]) - 1), int(env[b])]
                if not torch.equal(v[:, b].cpu(), want):
                    fail("REPLAY-10", f"window {b} ('{name}') differs from what env {int(env[b])} pushed at "
                                      f"steps {steps}: got {v[:, b].reshape(-1)[:6].tolist()}..., expected "
                                      f"{want.reshape(-1)[:6].tolist()}... (rows across the write head?)",
                         pushes=stop, **_config(case))


def check_final_storage(impl, **case):
    default = impl.ReplayRing(case["capacity"], case["num_envs"], case["obs_shape"], case["obs_dtype"])
    if FINAL in default.storage():
        fail("REPLAY-25", "a ring built without store_final stores final_obs (the default is False)", **_config(case))
    case, stream = dict(case, store_final=True), case["stream"]
    cap, shape = case["capacity"], (case["capacity"], case["num_envs"], *case["obs_shape"])
    for ring, stop, _, _, out in _samples(impl, case):
        stored = ring.storage().get(FINAL)
        if stored is None or tuple(stored.shape) != shape or stored.dtype != case["obs_dtype"]:
            fail("REPLAY-25", f"storage field '{FINAL}' is "
                              f"{'missing' if stored is None else (tuple(stored.shape), stored.dtype)}, expected "
                              f"{(shape, case['obs_dtype'])}", **_config(case))
        for s in range(max(0, stop - cap), stop):
            if not torch.equal(stored[s % cap].cpu(), stream[FINAL][s]):
                fail("REPLAY-25", f"after {stop} pushes, storage['{FINAL}'] row {s % cap} is not what step {s} "
                                  "pushed", **_config(case))
        got = out.get(FINAL)
        want = stream[FINAL][out["step"].cpu(), out["env"].cpu()]  # [T, B, *obs_shape]
        if got is None or not torch.equal(got.cpu(), want):
            fail("REPLAY-25", f"sample['{FINAL}'] is {'missing' if got is None else 'not the windows pushed'} "
                              f"(after {stop} pushes)", **_config(case))


def check_readable(impl, **case):
    for ring, stop, lo, hi, out in _samples(impl, case):
        committed = expected_committed(stop, case["commit_stride"])
        if ring.committed_t != committed:
            fail("REPLAY-11", f"committed_t = {ring.committed_t} after {stop} pushes with commit_stride "
                              f"{case['commit_stride']}, expected {committed}", **_config(case))
        step = out["step"].cpu()
        bad = (step < lo) | (step >= hi)
        if bool(bad.any()):
            s = int(step[bad][0])
            why = ("never written" if s >= stop else "not yet committed" if s >= committed else
                   "within the safety margin" if s >= hi else
                   "under the write head" if s == stop - case["capacity"] else "overwritten")
            fail("REPLAY-11", f"a window reads step {s} ({why}; t = {stop}, committed_t = {committed}); readable "
                              f"steps are [{lo}, {hi})", **_config(case))
    ring = new_ring(impl, case)
    _push(ring, case["stream"], 0, 1)
    ring.commit()
    if ring.committed_t != 1:
        fail("REPLAY-11", f"committed_t = {ring.committed_t} after 1 push and commit(), expected 1", **_config(case))


def check_determinism(impl, **case):
    ring = _fill(impl, case)
    lo, hi = readable_range(ring.t, ring.committed_t, case["capacity"], case["safety_margin"])
    T = min(case["T"], hi - lo)
    if T < 1:
        return
    outs = []
    for global_seed in (1, 2):
        with torch.random.fork_rng():  # restores the global RNG afterwards
            torch.manual_seed(global_seed)
            g = torch.Generator(device=ring.device).manual_seed(case["seed"])
            outs.append(ring.sample_sequences(case["B"], T, g))
    for name in outs[0]:
        if not torch.equal(outs[0][name], outs[1][name]):
            fail("REPLAY-12", f"sample['{name}'] differs between two calls with the same generator state and "
                              f"global seeds 1 vs 2: {outs[0][name].reshape(-1)[:8].tolist()} vs "
                              f"{outs[1][name].reshape(-1)[:8].tolist()} (the global RNG is used)",
                 **_config(case))


CHI2 = {"capacity": 12, "num_envs": 3, "steps": 20, "T": 3, "draws_per_cell": 40, "seed": 1234, "alpha": 0.001,
        "z": 3.0902}


def chi2_critical(df: int, z: float) -> float:
    """Upper quantile of chi-square(df) by Wilson–Hilferty; z is the normal quantile (3.0902: α = 0.001)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def check_uniform(impl):
    p = CHI2
    case = pinned(capacity=p["capacity"], num_envs=p["num_envs"], steps=p["steps"], p_end=0.3, seed=p["seed"])
    ring = _fill(impl, case)
    lo, hi = readable_range(ring.t, ring.committed_t, p["capacity"], 0)
    S = hi - lo - p["T"] + 1
    cells = S * p["num_envs"]
    g = torch.Generator(device=ring.device).manual_seed(p["seed"])
    counts = torch.zeros(cells, dtype=torch.float64)
    for _ in range(p["draws_per_cell"]):
        out = ring.sample_sequences(cells, p["T"], g)
        cell = (out["env"].cpu() * S + out["step"][0].cpu() - lo).clamp(0, cells - 1)
        counts += torch.bincount(cell, minlength=cells).double()
    expected = float(p["draws_per_cell"])
    stat = float(((counts - expected) ** 2 / expected).sum())
    crit = chi2_critical(cells - 1, p["z"])
    if stat > crit:
        worst = torch.argsort((counts - expected).abs(), descending=True)[:3].tolist()
        fail("REPLAY-13", f"chi-square = {stat:.1f} over {cells} (env, start) cells exceeds the alpha = "
                          f"{p['alpha']} critical value {crit:.1f} (df = {cells - 1}); expected {expected:g} "
                          f"draws per cell, worst cells (env, start): " +
                          ", ".join(f"({c // S}, {lo + c % S}): {int(counts[c])}" for c in worst),
             seed=p["seed"], readable=(lo, hi), T=p["T"])


# --------------------------------------------------------------------------------------------------
# Properties: bad input, obs_slot
# --------------------------------------------------------------------------------------------------
BAD_PUSHES = ("obs_dtype", "obs_shape", "action_dtype", "reward_shape", "reward_nan", "continue_half",
              "episode_id_repeat", "episode_id_jump", "episode_id_wrap", "no_reset_after_end", "truncated_continue0",
              "is_first_dtype", "flags_missing", "obs_none_unwritten")
FINAL_BAD_PUSHES = ("final_missing", "obs_not_final")  # REPLAY-27, on a ring that stores final_obs


def _bad_step(kind, args, prev_id, env):
    """(bad push kwargs, names, mentions) derived from a valid step."""
    a = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
    n = a["reward"].numel()
    if kind == "obs_dtype":
        a["obs"] = a["obs"].to(torch.float64)
        return a, ["obs"], ["float64"]
    if kind == "obs_shape":
        a["obs"] = a["obs"][..., :-1] if a["obs"].shape[-1] > 1 else a["obs"][None]
        return a, ["obs"], [str(tuple(a["obs"].shape)), str(tuple(args["obs"].shape))]
    if kind == "action_dtype":
        a["action"] = a["action"].long()
        return a, ["action"], ["int32", "int64"]
    if kind == "reward_shape":
        a["reward"] = a["reward"][:, None]
        return a, ["reward"], [str((n, 1)), str((n,))]
    if kind == "reward_nan":
        a["reward"][env] = math.nan
        return a, ["reward", "NaN"], [f"[{env}]"]
    if kind == "continue_half":
        a["continue_"][env] = 0.5
        return a, ["continue_"], ["0.5", f"env {env}"]
    if kind == "is_first_dtype":
        a["is_first"] = a["is_first"].to(torch.uint8)
        return a, ["is_first"], ["uint8", "bool"]
    if kind == "obs_none_unwritten":  # nothing was written through obs_slot for this step
        a["obs"] = None
        return a, ["obs"], ["None", "obs_slot"]
    if kind == "flags_missing":
        a["truncated"] = None
        return a, ["truncated"], ["None"]
    if kind == "final_missing":
        a[FINAL] = None
        return a, [FINAL], ["None", "store_final"]
    if kind == "obs_not_final":  # the caller's previous step ended no episode: obs must be its final_obs
        a["obs"][env] += 1
        return a, ["obs"], [f"env {env}", FINAL]
    if kind == "truncated_continue0":
        a["truncated"][env], a["terminated"][env], a["continue_"][env] = True, False, 0.0
        return a, ["continue_"], ["truncated", f"env {env}"]
    if kind == "no_reset_after_end":  # handled by the caller: the previous step ended, this one is_first
        a["is_first"][env] = False
        a["episode_id"][env] = prev_id
        return a, ["is_first"], [f"env {env}"]
    if kind == "episode_id_wrap":  # the caller's previous id is 2³¹−1: int32 "+ 1" wraps to −2³¹
        a["is_first"][env] = True
        a["episode_id"][env] = -2**31
        return a, ["episode_id"], [f"env {env}", str(-2**31), str(2**31)]
    if kind == "episode_id_repeat":  # a reset that does not increment
        a["is_first"][env] = True
        a["episode_id"][env] = prev_id
        return a, ["episode_id"], [f"env {env}", str(prev_id), str(prev_id + 1)]
    # episode_id_jump: the id changes without a reset
    a["is_first"][env] = False
    a["episode_id"][env] = prev_id + 2
    a["continue_"][env], a["terminated"][env] = 1.0, False
    return a, ["episode_id"], [f"env {env}", str(prev_id + 2), str(prev_id)]


def check_rejects_push(impl, kind, at, env, **case):
    _rejects_push("REPLAY-14", impl, kind, at, env, case)


def check_rejects_final(impl, kind, at, env, **case):
    case = dict(case, store_final=True)
    _rejects_push("REPLAY-27", impl, kind, at, env, case)
    stream = make_stream(2, case["num_envs"], case["obs_shape"], case["obs_dtype"], at, 0.0)  # no reset at 1
    ring = new_ring(impl, case)
    first = _args(ring, stream, 0)
    ring.push(**first)
    first[FINAL] += 1  # the caller reuses its buffer after the push
    try:
        ring.push(**_args(ring, stream, 1))
    except (ValueError, TypeError) as err:
        fail("REPLAY-27", f"writing into step 0's final_obs tensor after its push changed how step 1 is validated "
                          f"(the ring kept the caller's tensor, not a copy): {err}", **_config(case))


def _rejects_push(clause, impl, kind, at, env, case):
    """A bad step (``kind`` at env ``env``) pushed after ``at`` valid ones: rejected, nothing changed, the ring
    goes on accepting the valid steps."""
    stream = case["stream"]
    total = len(stream["reward"])
    env = env % case["num_envs"]
    at = at % total
    if kind in ("episode_id_repeat", "episode_id_jump", "episode_id_wrap", "no_reset_after_end", "obs_not_final"):
        at = max(at, 1)  # a controlled previous step
        ends = {(at - 1, env): "terminated"} if kind == "no_reset_after_end" else {}
        first_id = 2**31 - 1 if kind == "episode_id_wrap" else 0
        stream = make_stream(total, case["num_envs"], case["obs_shape"], case["obs_dtype"], at, 0.0, ends,
                             first_id=first_id)
    case = dict(case, store_flags=case["store_flags"] or kind == "flags_missing")
    ring = new_ring(impl, case)
    _push(ring, stream, 0, at)
    prev_id = int(stream["episode_id"][at - 1, env]) if at else 0
    args, names, mentions = _bad_step(kind, _args(ring, stream, at), prev_id, env)
    before = snapshot(ring)
    expect_rejection(clause, lambda: ring.push(**args), names=[PUSH, *names], mentions=mentions,
                     what=f"push of step {at} with {kind} at env {env}")
    after = snapshot(ring)
    for k, v in before.items():
        same = torch.equal(v, after[k]) if isinstance(v, torch.Tensor) else v == after[k]
        if not same:
            fail(clause, f"'{k}' changed by the rejected push ({kind} at step {at}, env {env})",
                 **_config(case))
    try:
        _push(ring, stream, at, total)
    except (ValueError, TypeError) as err:
        fail(clause, f"after a rejected push ({kind}), the valid step {ring.t} was rejected too: {err}",
             **_config(case))
    cap = case["capacity"]
    for s in range(max(0, total - cap), total):
        if not torch.equal(ring.storage()["reward"][s % cap].cpu(), stream["reward"][s]):
            fail(clause, f"after a rejected push ({kind}), step {s} was not stored correctly", **_config(case))


def check_rejects_sample(impl, **case):
    ring = _fill(impl, case)
    lo, hi = readable_range(ring.t, ring.committed_t, case["capacity"], case["safety_margin"])
    g = torch.Generator(device=ring.device).manual_seed(0)
    n = max(0, hi - lo)
    for B, T, gen, names, mentions in ((2, n + 1, g, ["T"], [str(n + 1), str(n)]), (0, 1, g, ["B"], ["0"]),
                                       (2, 0, g, ["T"], ["0"]), (2, 1, None, ["generator"], ["NoneType"])):
        if names == ["generator"] and n < 1:
            continue
        expect_rejection("REPLAY-15", lambda B=B, T=T, gen=gen: ring.sample_sequences(B, T, gen), names=names,
                         mentions=mentions,
                         what=f"sample_sequences(B={B}, T={T}, generator={type(gen).__name__}) with "
                              f"{n} readable steps")


def check_obs_slot(impl, via_slot_seed, **case):
    ring = new_ring(impl, case)
    stream, cap = case["stream"], case["capacity"]
    total = len(stream["reward"])
    use_slot = torch.rand(total, generator=torch.Generator().manual_seed(via_slot_seed)) < 0.5
    base = ring.storage()["obs"].data_ptr()
    ptrs: dict[int, int] = {}
    for s in range(total):
        if use_slot[s]:
            slot = ring.obs_slot(ring.t)
            shape = (case["num_envs"], *case["obs_shape"])
            if tuple(slot.shape) != shape or not slot.is_contiguous():
                fail("REPLAY-16", f"obs_slot({s}) has shape {tuple(slot.shape)}, contiguous={slot.is_contiguous()}, "
                                  f"expected a contiguous {shape}", **_config(case))
            if ptrs.setdefault(s % cap, slot.data_ptr()) != slot.data_ptr():
                fail("REPLAY-16", f"obs_slot({s}).data_ptr() moved from {ptrs[s % cap]:#x} to "
                                  f"{slot.data_ptr():#x} (row {s % cap})", **_config(case))
            slot.copy_(stream["obs"][s].to(ring.device))
        ring.push(**_args(ring, stream, s, obs=not bool(use_slot[s])))
    obs = ring.storage()["obs"]
    if obs.data_ptr() != base:
        fail("REPLAY-16", f"storage obs moved from {base:#x} to {obs.data_ptr():#x}", **_config(case))
    for s in range(max(0, total - cap), total):
        if not torch.equal(obs[s % cap].cpu(), stream["obs"][s]):
            fail("REPLAY-16", f"obs of step {s} (written {'through obs_slot' if use_slot[s] else 'by push'}) "
                              "is not what was written", **_config(case))


def _with(strategy, **extra):
    return st.builds(lambda c, x: {**c, **x}, strategy, st.fixed_dictionaries(extra))


def check_scalar_hyperparameters(impl, **case):
    steps = len(case["stream"]["reward"])

    def run(capacity, num_envs, commit_stride, safety_margin):
        ring = impl.ReplayRing(capacity, num_envs, case["obs_shape"], case["obs_dtype"],
                               store_flags=case["store_flags"], commit_stride=commit_stride,
                               safety_margin=safety_margin, **_final(case))
        _push(ring, case["stream"], 0, steps)
        return snapshot(ring)

    check_scalar_types("REPLAY-17", run, {k: case[k] for k in ("capacity", "num_envs", "commit_stride",
                                                               "safety_margin")}, **_config(case))


def check_detached(impl, **case):
    ring = new_ring(impl, case)
    stream = case["stream"]
    for s in range(len(stream["reward"])):
        args = _args(ring, stream, s)
        args["reward"] = args["reward"].clone().requires_grad_()
        ring.push(**args)
    attached = [k for k, v in ring.storage().items() if v.requires_grad or v.grad_fn is not None]
    if attached:
        fail("REPLAY-18", f"storage fields {attached} require grad after pushing rewards that do: the ring keeps "
                          "every step's autograd graph alive (memory grows without bound)", **_config(case))


def check_decoding(impl, **case):
    ring = new_ring(impl, case)
    g = torch.Generator(device=ring.device).manual_seed(case["seed"])
    B, T, N = case["B"], case["T"], case["num_envs"]
    for stop in case["checkpoints"]:
        _push(ring, case["stream"], ring.t, stop)
        lo, hi = readable_range(stop, expected_committed(stop, case["commit_stride"]), case["capacity"],
                                case["safety_margin"])
        if hi - lo < T:
            continue
        S = hi - lo - T + 1
        copy = torch.Generator(device=ring.device)
        copy.set_state(g.get_state())
        u = torch.randint(0, N * S, (B,), generator=copy, device=ring.device).cpu()  # [B]
        out = ring.sample_sequences(B, T, g)
        want_step = lo + u % S + torch.arange(T)[:, None]  # [T, B]
        for name, got, want in (("env", out["env"].cpu(), u // S), ("step", out["step"].cpu(), want_step)):
            if not torch.equal(got, want):
                fail("REPLAY-19", f"after {stop} pushes (readable [{lo}, {hi}), S = {S}), sample['{name}'] = "
                                  f"{got.reshape(-1)[:8].tolist()}, expected {want.reshape(-1)[:8].tolist()} from "
                                  f"u = {u[:8].tolist()}", **_config(case))


def check_fresh(impl, **case):
    ring = new_ring(impl, case)
    if (ring.t, ring.committed_t) != (0, 0):
        fail("REPLAY-20", f"a fresh ring has t = {ring.t}, committed_t = {ring.committed_t}, expected 0, 0",
             **_config(case))


def check_fresh_sample_rejected(impl, **case):
    ring = new_ring(impl, case)
    g = torch.Generator(device=ring.device).manual_seed(0)
    expect_rejection("REPLAY-24", lambda: ring.sample_sequences(1, 1, g), names=["T"],
                     what="sample_sequences(1, 1) on a ring with nothing pushed")


def check_defaults(impl, omitted, **case):
    def run(extra):
        kept = {k: case[k] for k in DEFAULTS if k not in omitted}
        ring = impl.ReplayRing(case["capacity"], case["num_envs"], **{**kept, **extra})
        committed = []
        for s in range(len(case["stream"]["reward"])):
            ring.push(**_args(ring, case["stream"], s))
            committed.append(ring.committed_t)
        lo, hi = readable_range(ring.t, ring.committed_t, ring.capacity, kept.get("safety_margin", 0))
        sample = ring.sample_sequences(2, 1, torch.Generator(device=ring.device).manual_seed(case["seed"])) \
            if hi > lo else {}
        return dict(storage={k: v.cpu() for k, v in ring.storage().items()}, committed=committed,
                    sample={k: v.cpu() for k, v in sample.items()})

    assert_same_values("REPLAY-21", f"ReplayRing ({', '.join(sorted(omitted))} omitted) vs the documented "
                                    f"defaults passed explicitly", run({}), run({k: DEFAULTS[k] for k in omitted}),
                       **_config(case))


@st.composite
def default_cases(draw):
    """A ring case whose obs are the default (1, 72, 20) uint8 and the parameters to omit."""
    case = draw(ring_cases(min_steps=3))
    case.update(obs_shape=OBS_SHAPE, obs_dtype=torch.uint8, seed=draw(seeds))
    case["stream"] = make_stream(len(case["stream"]["reward"]), case["num_envs"], OBS_SHAPE, torch.uint8, case["seed"])
    case["omitted"] = draw(st.one_of(st.just(frozenset(DEFAULTS)),
                                     st.frozensets(st.sampled_from(tuple(DEFAULTS)), min_size=1)))
    return case


BAD_CONFIGS = (("capacity", dict(capacity=1)), ("num_envs", dict(num_envs=0)), ("commit_stride", dict(commit_stride=0)),
               ("safety_margin", dict(safety_margin=-1)), ("obs_shape", dict(obs_shape=(0, 3))),
               ("obs_shape", dict(obs_shape=[1, 3])), ("obs_dtype", dict(obs_dtype="uint8")))


def check_rejects_config(impl, **case):
    base = dict(capacity=4, num_envs=2, obs_shape=(1, 3, 4), obs_dtype=torch.uint8, commit_stride=1, safety_margin=0)
    for name, bad in BAD_CONFIGS:
        cfg = {**base, **bad}
        expect_rejection("REPLAY-22", lambda: impl.ReplayRing(cfg.pop("capacity"), cfg.pop("num_envs"), **cfg),
                         names=[name], what=f"ReplayRing with {bad}")
    ring = new_ring(impl, case)
    _push(ring, case["stream"], 0, 2)
    for t in (ring.t - 1, ring.t + 1):
        expect_rejection("REPLAY-22", lambda: ring.obs_slot(t), names=["t"], mentions=[str(t), str(ring.t)],
                         what=f"obs_slot({t}) when the next step is {ring.t}")


def check_copies(impl, **case):
    stream = case["stream"]
    ring = new_ring(impl, case)
    for s in range(len(stream["reward"])):
        args = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in _args(ring, stream, s).items()}
        try:
            ring.push(**args)
        except (ValueError, TypeError) as err:
            fail("REPLAY-23", f"the valid push of step {s} was rejected after the caller wrote into the tensors of "
                              f"step {s - 1} (the ring kept a reference, not a copy): {err}", **_config(case))
        for v in args.values():  # the caller reuses its buffers
            if isinstance(v, torch.Tensor):
                v.copy_(torch.ones_like(v) if v.dtype == torch.bool else v + 3)
    cap = case["capacity"]
    store = {k: v.cpu() for k, v in ring.storage().items()}
    for s in range(max(0, ring.t - cap), ring.t):
        for name, v in store.items():
            if not torch.equal(v[s % cap], stream[name][s]):
                fail("REPLAY-23", f"storage['{name}'] row {s % cap} changed when the caller wrote into the tensors "
                                  f"it had pushed at step {s}", **_config(case))


PROPERTIES = (
    Property("REPLAY-1", check_schema, ring_cases(), EXAMPLES[:1], INTERFACE, max_examples=8),
    Property("REPLAY-2", check_storage, ring_cases(), EXAMPLES, INTERFACE),
    *(Property(c, _invariant_check(c), ring_cases(), EXAMPLES, INTERFACE) for c in INVARIANTS),
    Property("REPLAY-9", check_sample_shapes, sample_cases(), SAMPLE_EXAMPLES[:1], INTERFACE, max_examples=10),
    Property("REPLAY-10", check_windows, sample_cases(), SAMPLE_EXAMPLES, INTERFACE),
    Property("REPLAY-11", check_readable, sample_cases(), SAMPLE_EXAMPLES, INTERFACE),
    Property("REPLAY-12", check_determinism, sample_cases(), SAMPLE_EXAMPLES[:1], INTERFACE, max_examples=10),
    Property("REPLAY-13", check_uniform, requires=INTERFACE),
    Property("REPLAY-14", check_rejects_push,
             _with(ring_cases(min_steps=3), kind=st.sampled_from(BAD_PUSHES), at=st.integers(0, 80),
                   env=st.integers(0, 3)),
             tuple(dict(EXAMPLES[2], kind=k, at=8, env=1) for k in BAD_PUSHES), INTERFACE),
    Property("REPLAY-15", check_rejects_sample, sample_cases(), SAMPLE_EXAMPLES[:1], INTERFACE, max_examples=8),
    Property("REPLAY-16", check_obs_slot, _with(ring_cases(), via_slot_seed=seeds),
             (dict(EXAMPLES[3], via_slot_seed=0),), INTERFACE, max_examples=15),
    Property("REPLAY-17", check_scalar_hyperparameters, ring_cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("REPLAY-18", check_detached, ring_cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("REPLAY-19", check_decoding, sample_cases(), SAMPLE_EXAMPLES, INTERFACE, max_examples=15),
    Property("REPLAY-20", check_fresh, ring_cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("REPLAY-24", check_fresh_sample_rejected, ring_cases(), EXAMPLES[:1], INTERFACE, max_examples=5),
    Property("REPLAY-25", check_final_storage, sample_cases(), SAMPLE_EXAMPLES, INTERFACE, max_examples=10),
    Property("REPLAY-27", check_rejects_final,
             _with(ring_cases(min_steps=3), kind=st.sampled_from(FINAL_BAD_PUSHES), at=st.integers(0, 80),
                   env=st.integers(0, 3)),
             tuple(dict(EXAMPLES[2], kind=k, at=8, env=1) for k in FINAL_BAD_PUSHES), INTERFACE, max_examples=10),
    Property("REPLAY-21", check_defaults, default_cases(), (dict(EXAMPLES[0], obs_shape=OBS_SHAPE, seed=0,
             stream=make_stream(12, 2, OBS_SHAPE, torch.uint8, 0), omitted=frozenset(DEFAULTS)),), INTERFACE,
             max_examples=8),
    Property("REPLAY-22", check_rejects_config, ring_cases(min_steps=3), EXAMPLES[:1], INTERFACE, max_examples=3),
    Property("REPLAY-23", check_copies, ring_cases(), EXAMPLES, INTERFACE, max_examples=10),
)

CHANGES = (
    Change("1.0", "first versioned release"),
    Change("1.1", "store_final: the observation after each step, before any reset (final_obs), where a truncated "
                  "episode's final state lives", added=("REPLAY-25", "REPLAY-26", "REPLAY-27")),
)

CONTRACT = Contract("replay", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES, rationale=RATIONALE,
                    changes=CHANGES)
