"""Contract ``room_env``: the project's Game Boy room, its ROM in PyBoy and its Warp twin, bit for bit.

Source: the Dreamer plan M6 (Warp → packed2 written straight into the replay ring) and M8
("Standing Still" / "Exit Oak" validation scenarios). The game, its data and its rules are in
rlspec/contracts/room_env.py; the ROM is rlspec/envs/room/room.c (built by rlspec.envs.room.build).

Interface (a vector env; every implementation, the reference included, provides it)
-----------------------------------------------------------------------------------
    env = RoomVecEnv(num_envs, scenario="room-exit", *, step_limit=64, seed=0)
    env.reset(out=None) -> Step                                  # out: [N, 1, 72, 20] uint8 or None
    env.step(actions [N] int32/int64, out=None, final_out=None, render=True) -> Step
    env.render(out) -> out                                       # the current frames, written into out

``Step(obs, reward, terminated, truncated, success, is_first, episode_id)``: obs ``[N, 1, 72, 20]`` uint8
packed2 (``out`` itself when given: frames are written in place, e.g. into ReplayRing.obs_slot(t)), reward
``[N]`` float32, the flags ``[N]`` bool, episode_id ``[N]`` int32. An episode that ends (terminated or
truncated) is reset in the same step: obs is the next episode's first frame, is_first is True and
episode_id has grown by one — Dreamer plan §2.3's row stores the transition out of obs_t, so the terminal frame
is never a row; ``final_out`` receives the frame each env showed before any reset. Episode k of env i starts
on ``start_cell(episode_seed(seed, i, k))``. Returned tensors may be the env's own buffers, valid until the
next call. ``step(actions, render=False)`` writes no frame (obs None) and ``render(out)`` writes the frames
later: the replay ring's ``obs_slot(t+1)`` only exists once row t, with this step's reward, is pushed.

The reference is the ROM in PyBoy (rlspec/envs/room/pyboy_room.py): what the Game Boy shows is the truth.
The clauses other than ROOM-1 compare against the rules written out below in plain Python (``RoomModel``),
so they also hold the ROM to its documented behaviour.

Step protocol (why one env step is exactly one game update)
------------------------------------------------------------
The host holds the action's d-pad button, writes CMD (and, for a reset, SEED and MODE) to the ROM's mailbox
and sets REQ = 1, then emulates ``frameskip`` frames. At the first vertical blank the ROM latches the d-pad
once and updates; at the second it copies the player's sprites to OAM and clears REQ; frames 3.. show the
update (``frameskip`` >= 3, default 4). Game time advances only on requests, so frames, rewards and flags
depend on (seed, actions) alone, not on frame timing.
"""

from __future__ import annotations

import functools
from collections import deque

import torch
from hypothesis import strategies as st

from rlspec.contracts.room_env import (
    CELL,
    CELLS,
    COLS,
    DOOR,
    FLOOR,
    MOVES,
    NUM_ACTIONS,
    OBS_SHAPE,
    OBSTACLE,
    ROWS,
    STEP_LIMIT,
    SUCCESS_REWARD,
    WALL,
    Step,
    background_shades,
    episode_seed,
    observed,
    pose_of,
    screen_shades,
    start_cell,
)
from rlspec.reference.packed2 import pack, unpack
from rlspec.spec.core import Contract, Property, assert_identical, by_category, expect_rejection, fail

CLAUSES = {
    "ROOM-1": "twin: for the same seed, scenario, step limit and actions, obs and final_out frames, reward, "
              "terminated, truncated, success, is_first and episode_id equal the ROM in PyBoy bit for bit",
    "ROOM-2": "reset from seed: reset() shows env i's player on start_cell(episode_seed(seed, i, 0)) in pose 0, "
              "with reward 0, no flags, is_first True and episode_id 0",
    "ROOM-3": "rules (room-exit): the frame after each step (final_out) shows the player moved one cell in the "
              "d-pad's direction unless a wall or obstacle blocks, in pose (steps >> 2) & 1",
    "ROOM-4": "door: entering it gives reward 1, terminated and success, not truncated; final_out shows the "
              "player on the door; obs is the next episode's first frame (is_first, episode_id + 1)",
    "ROOM-5": "truncation: exactly at step_limit steps without the door, truncated True, terminated and success "
              "False, reward 0; then the next episode starts (is_first, episode_id + 1) and counts from 0",
    "ROOM-6": "standing-still: the d-pad is ignored (only the pose changes), reward 0, never terminated",
    "ROOM-7": "shapes and dtypes: obs [N, 1, 72, 20] uint8 (the caller's out buffer itself, written in place), "
              "reward [N] float32, flags [N] bool, episode_id [N] int32",
    "ROOM-8": "bad input is rejected naming the field: action ids outside 0..4, actions of another dtype or "
              "shape, out/final_out of another shape, dtype or layout, unknown scenario, num_envs or "
              "step_limit < 1, seed outside [0, 2**32)",
    "ROOM-9": "a rejected step changes nothing: neither the env (the next steps give what they would have) "
              "nor the out buffer passed to it",
    "ROOM-10": "deferred frames: step(actions, render=False) returns obs None and the same flags; render(out) "
               "then writes exactly the frames step(actions, out) would have",
    "ROOM-11": "documented defaults: RoomVecEnv(num_envs) plays as RoomVecEnv(num_envs, 'room-exit', step_limit=64, "
               "seed=0)",
    "ROOM-12": "reset() mid-run is a fresh start: after any steps (a door's reward 1 last included) it returns what "
               "a new env's reset() returns (reward 0, episode_id 0, each env's first start cell), and the steps "
               "after it are a new env's",
    "ROOM-13": "call order: step() and render() before the first reset() are rejected (a RuntimeError that says "
               "to call reset()), writing nothing into out; reset() then starts the env as usual",
}

CATEGORIES = by_category(
    maths=("ROOM-1", "ROOM-2", "ROOM-3", "ROOM-4", "ROOM-5", "ROOM-6", "ROOM-7", "ROOM-10", "ROOM-11", "ROOM-12"),
    validation=("ROOM-8", "ROOM-9", "ROOM-13"),
)

INTERFACE = ("RoomVecEnv",)
"""
RoomVecEnv(num_envs: int, scenario: str = "room-exit", *, step_limit: int = 64, seed: int = 0)
    .reset(out: Tensor | None = None) -> Step
    .step(actions: Tensor, out: Tensor | None = None, final_out: Tensor | None = None, render=True) -> Step
    .render(out: Tensor) -> Tensor
"""

FIELDS = ("terminated", "truncated", "success", "reward", "is_first", "episode_id")


def _reference():
    """The ROM in PyBoy, imported on first use: PyBoy is the ``dreamer`` extra, and listing or checking the
    other contracts must not need it."""
    from rlspec.envs.room import pyboy_room

    return pyboy_room


# --------------------------------------------------------------------------------------------------
# The rules in plain Python, one env at a time (contracts/room_env.py docstring)
# --------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def frame(row: int, col: int, pose: int) -> torch.Tensor:
    """[1, 72, 20] packed2 of the room with the player on (row, col) in ``pose`` (reference packed2)."""
    return pack(observed(screen_shades(row, col, pose)).contiguous()).unsqueeze(0)


@functools.lru_cache(maxsize=None)
def _empty_room() -> torch.Tensor:
    return observed(background_shades())  # [72, 80]


def player_cells(obs: torch.Tensor) -> list[tuple[int, int]]:
    """The cells where a packed frame [1, 72, 20] differs from the empty room (for messages)."""
    diff = unpack(obs.cpu().contiguous())[0] != _empty_room()  # [72, 80]
    side = CELL // 2  # observed pixels per cell side
    cells = diff.reshape(ROWS, side, COLS, side).any(3).any(1)  # [ROWS, COLS]
    return [tuple(rc) for rc in cells.nonzero().tolist()]


class RoomModel:
    """What every implementation must compute: positions, steps, episodes; frames from ``frame``."""

    def __init__(self, num_envs: int, scenario: str, step_limit: int, seed: int):
        self.n, self.scenario, self.step_limit, self.seed = num_envs, scenario, step_limit, seed

    def reset(self) -> Step:
        self.episode = [0] * self.n
        self.steps = [0] * self.n
        self.cell = [start_cell(episode_seed(self.seed, i, 0)) for i in range(self.n)]
        self.final = torch.stack([self._frame(i) for i in range(self.n)])
        zeros = [False] * self.n
        return self._step(self.final, [0.0] * self.n, zeros, zeros, zeros, [True] * self.n)

    def step(self, actions: list[int]) -> Step:
        """-> the expected Step; ``self.final`` is the expected final_out."""
        reward, terminated, truncated = [0.0] * self.n, [False] * self.n, [False] * self.n
        final, obs = [], []
        for i, a in enumerate(actions):
            self.steps[i] += 1
            if self.scenario == "room-exit":
                r, c = self.cell[i]
                target = (r + MOVES[a][0], c + MOVES[a][1])
                if CELLS[target[0]][target[1]] not in (WALL, OBSTACLE):
                    self.cell[i] = target
                    terminated[i] = CELLS[target[0]][target[1]] == DOOR
            truncated[i] = not terminated[i] and self.steps[i] >= self.step_limit
            reward[i] = SUCCESS_REWARD if terminated[i] else 0.0
            final.append(self._frame(i))
            if terminated[i] or truncated[i]:
                self.episode[i] += 1
                self.steps[i] = 0
                self.cell[i] = start_cell(episode_seed(self.seed, i, self.episode[i]))
            obs.append(self._frame(i))
        self.final = torch.stack(final)
        ends = [t or u for t, u in zip(terminated, truncated)]
        return self._step(torch.stack(obs), reward, terminated, truncated, terminated, ends)

    def _frame(self, i: int) -> torch.Tensor:
        return frame(*self.cell[i], pose_of(self.steps[i]))

    def _step(self, obs, reward, terminated, truncated, success, is_first) -> Step:
        b = lambda v: torch.tensor(v, dtype=torch.bool)  # noqa: E731
        return Step(obs, torch.tensor(reward, dtype=torch.float32), b(terminated), b(truncated), b(success),
                    b(is_first), torch.tensor(self.episode, dtype=torch.int32))


@functools.lru_cache(maxsize=None)
def toward_door() -> dict[tuple[int, int], int]:
    """For every reachable cell, the action of a shortest path to the door (breadth-first from the door)."""
    door = next((r, c) for r in range(ROWS) for c in range(COLS) if CELLS[r][c] == DOOR)
    best, queue = {door: 0}, deque([door])
    while queue:
        r, c = queue.popleft()
        for a, (dr, dc) in enumerate(MOVES[1:], start=1):
            prev = (r - dr, c - dc)  # from prev, action a leads to (r, c)
            if 0 <= prev[0] < ROWS and 0 <= prev[1] < COLS and CELLS[prev[0]][prev[1]] == FLOOR and prev not in best:
                best[prev] = a
                queue.append(prev)
    del best[door]
    return best


def plan(model: RoomModel, steps: int, policy_seed: int, greed: float, avoid_door: bool = False):
    """Actions [steps, N] int64 and the model's expected (Step, final_out) per step. Each env takes the
    shortest-path action to the door with probability ``greed``, else a uniform one (never into the door
    when ``avoid_door``); the model runs alongside, so episodes end and restart inside the plan."""
    g = torch.Generator().manual_seed(policy_seed)
    first = model.reset()
    actions, expected = [], []
    for _ in range(steps):
        greedy = torch.rand(model.n, generator=g) < greed  # [N]
        uniform = torch.randint(0, NUM_ACTIONS, (model.n,), generator=g)  # [N]
        row = []
        for i in range(model.n):
            a = toward_door()[model.cell[i]] if greedy[i] else int(uniform[i])
            r, c = model.cell[i]
            if avoid_door and CELLS[r + MOVES[a][0]][c + MOVES[a][1]] == DOOR:
                a = 0
            row.append(a)
        actions.append(row)
        expected.append((model.step(row), model.final))
    return first, torch.tensor(actions, dtype=torch.int64), expected


# --------------------------------------------------------------------------------------------------
# Running an implementation along a plan
# --------------------------------------------------------------------------------------------------
def _copy(step: Step) -> Step:
    return Step(*(v.detach().cpu().clone() for v in step))  # the env may reuse its buffers


def run(impl, case: dict, actions: torch.Tensor, env=None):
    """Yields (t, Step, final_out) for t = -1 (reset), 0, 1, ..., copied to the host; ``env``: one already
    made (else one is made from ``case``)."""
    if env is None:
        env = impl.RoomVecEnv(case["num_envs"], case["scenario"], step_limit=case["step_limit"], seed=case["seed"])
    yield -1, _copy(env.reset()), None
    final = torch.empty(case["num_envs"], *OBS_SHAPE, dtype=torch.uint8)
    for t, a in enumerate(actions):
        yield t, _copy(env.step(a, final_out=final)), final.clone()


def _where(obs: torch.Tensor) -> str:
    cells = player_cells(obs)
    if len(cells) <= 1:
        return f"the player at {cells}"
    return f"{len(cells)} cells unlike the empty room (the room itself is drawn wrong), first {cells[:3]}"


def compare(clause: str, t: int, got: Step, want: Step, case: dict, fields=FIELDS, frames: bool = True,
            got_final=None, want_final=None) -> None:
    """Fail with ``clause`` at the first field of ``got`` that differs from ``want`` (step t; -1 = reset)."""
    when = "reset()" if t == -1 else f"step {t}"
    info = {k: case[k] for k in ("scenario", "num_envs", "seed", "step_limit", "steps_before_reset") if k in case}
    for name in fields:
        assert_identical(clause, f"{when}: {name}", getattr(got, name), getattr(want, name), **info)
    pairs = [("obs", got.obs, want.obs)] if frames else []
    if got_final is not None:
        pairs.append(("final_out", got_final, want_final))
    for name, g, w in pairs:
        if g.shape == w.shape and g.dtype == w.dtype:
            for i in range(w.shape[0]):
                if not torch.equal(g[i], w[i]):
                    n_bad = int((g[i] != w[i]).sum())
                    fail(clause, f"{when}, env {i}: {name} differs from the expected frame in {n_bad} of "
                                 f"{w[i].numel()} bytes; it shows {_where(g[i])}, expected {_where(w[i])}", **info)
        assert_identical(clause, f"{when}: {name}", g, w, **info)


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
seeds32 = st.integers(0, 2**32 - 1)


@st.composite
def plans(draw, scenarios=("room-exit", "standing-still"), max_steps: int = 60):
    """A case: scenario, N, seed, step limit, and a policy (greed toward the door, its seed)."""
    return dict(scenario=draw(st.sampled_from(scenarios)), num_envs=draw(st.integers(1, 3)), seed=draw(seeds32),
                step_limit=draw(st.integers(1, 40)), steps=draw(st.integers(1, max_steps)),
                policy_seed=draw(st.integers(0, 2**31 - 1)), greed=draw(st.sampled_from([0.0, 0.6, 0.9])))


def _case(scenario="room-exit", num_envs=2, seed=0, step_limit=40, steps=60, policy_seed=0, greed=0.6) -> dict:
    return dict(scenario=scenario, num_envs=num_envs, seed=seed, step_limit=step_limit, steps=steps,
                policy_seed=policy_seed, greed=greed)


PLAN_EXAMPLES = (
    _case(num_envs=3, seed=0, step_limit=24, steps=90, greed=0.9),  # doors, truncations, several episodes
    _case(scenario="standing-still", seed=2**32 - 1, step_limit=7, steps=20),
    _case(num_envs=1, seed=12345, step_limit=1, steps=4),  # every step truncates: reset right after reset
)


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------
def _plan(case: dict, avoid_door: bool = False):
    model = RoomModel(case["num_envs"], case["scenario"], case["step_limit"], case["seed"])
    return plan(model, case["steps"], case["policy_seed"], case["greed"], avoid_door)


def check_twin(impl, **case):
    _, actions, _ = _plan(case)
    ref = run(_reference(), case, actions)
    for (t, got, got_final), (_, want, want_final) in zip(run(impl, case, actions), ref):
        compare("ROOM-1", t, got, want, case, got_final=got_final, want_final=want_final)


def check_reset(impl, **case):
    first, _, _ = _plan(case)
    _, got, _ = next(run(impl, case, torch.zeros(0, case["num_envs"], dtype=torch.int64)))
    compare("ROOM-2", -1, got, first, case)


def check_rules(impl, **case):
    _, actions, expected = _plan(case)
    for (t, got, got_final) in run(impl, case, actions):
        if t >= 0:
            compare("ROOM-3", t, got, expected[t][0], case, fields=(), frames=False, got_final=got_final,
                    want_final=expected[t][1])


def check_door(impl, **case):
    _, actions, expected = _plan(case)  # greed 1: straight to the door
    for (t, got, got_final) in run(impl, case, actions):
        if t >= 0 and bool(expected[t][0].terminated.any()):
            compare("ROOM-4", t, got, expected[t][0], case, got_final=got_final, want_final=expected[t][1])
            return
    fail("ROOM-4", "the plan never reached the door (the spec's own plan is wrong)", **case)


def check_truncation(impl, **case):
    _, actions, expected = _plan(case, avoid_door=True)
    for (t, got, _) in run(impl, case, actions):
        if t >= 0:
            compare("ROOM-5", t, got, expected[t][0], case,
                    fields=("truncated", "terminated", "success", "reward", "is_first", "episode_id"), frames=False)


def check_standing_still(impl, **case):
    _, actions, expected = _plan(case)
    for (t, got, got_final) in run(impl, case, actions):
        if t >= 0:
            compare("ROOM-6", t, got, expected[t][0], case, fields=("reward", "terminated", "success"),
                    got_final=got_final, want_final=expected[t][1])


def _require(clause: str, what: str, t, shape, dtype) -> None:
    if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != dtype:
        got = f"shape {tuple(t.shape)} dtype {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
        fail(clause, f"{what}: {got}, expected {shape} {dtype}")


def _require_step(clause: str, when: str, step: Step, n: int) -> None:
    _require(clause, f"{when}: obs", step.obs, (n, *OBS_SHAPE), torch.uint8)
    _require(clause, f"{when}: reward", step.reward, (n,), torch.float32)
    for name in ("terminated", "truncated", "success", "is_first"):
        _require(clause, f"{when}: {name}", getattr(step, name), (n,), torch.bool)
    _require(clause, f"{when}: episode_id", step.episode_id, (n,), torch.int32)


def check_shapes(impl, num_envs):
    env = impl.RoomVecEnv(num_envs)
    _require_step("ROOM-7", "reset()", env.reset(), num_envs)
    _require_step("ROOM-7", "step(actions)", env.step(torch.ones(num_envs, dtype=torch.int64)), num_envs)
    right = torch.full((num_envs,), 4, dtype=torch.int32)
    calls = (("reset(out)", lambda out: env.reset(out)), ("step(actions, out)", lambda out: env.step(right, out)))
    for when, call in calls:
        out = torch.full((num_envs, *OBS_SHAPE), 0xAA, dtype=torch.uint8)
        step = call(out)
        _require_step("ROOM-7", when, step, num_envs)
        if step.obs.data_ptr() != out.data_ptr():
            fail("ROOM-7", f"{when}: obs is not the out buffer (frames must be written in place)")
        if bool((out == 0xAA).all()):
            fail("ROOM-7", f"{when}: the out buffer was not written")


def _bad_inputs(n: int):
    """(what, call(env), names, mentions)."""
    obs = lambda **kw: torch.zeros(n, *OBS_SHAPE, **({"dtype": torch.uint8} | kw))  # noqa: E731
    good = torch.zeros(n, dtype=torch.int64)
    return (
        ("action id 5", lambda e: e.step(torch.full((n,), 5)), ["actions"], ["5", "0..4"]),
        ("action id -1", lambda e: e.step(torch.full((n,), -1, dtype=torch.int32)), ["actions"], ["-1", "0..4"]),
        ("float actions", lambda e: e.step(torch.zeros(n)), ["actions"], ["float32"]),
        ("actions as a list", lambda e: e.step([0] * n), ["actions"], ["list"]),
        ("actions [N+1]", lambda e: e.step(torch.zeros(n + 1, dtype=torch.int64)), ["actions"], [f"({n + 1},)"]),
        ("out int32", lambda e: e.step(good, obs(dtype=torch.int32)), ["out"], ["uint8", "int32"]),
        ("out unpacked [N, 1, 72, 80]", lambda e: e.step(good, torch.zeros(n, 1, 72, 80, dtype=torch.uint8)),
         ["out"], [f"({n}, 1, 72, 80)", f"({n}, 1, 72, 20)"]),
        ("out non-contiguous", lambda e: e.step(good, obs().transpose(2, 3).contiguous().transpose(2, 3)),
         ["out"], ["contiguous"]),
        ("final_out float32", lambda e: e.step(good, None, obs(dtype=torch.float32)), ["final_out"], ["uint8"]),
        ("reset(out) int64", lambda e: e.reset(obs(dtype=torch.int64)), ["out"], ["uint8"]),
        ("render(out) float32", lambda e: e.render(obs(dtype=torch.float32)), ["out"], ["uint8"]),
        ("render(out) [N+1, 1, 72, 20]", lambda e: e.render(torch.zeros(n + 1, *OBS_SHAPE, dtype=torch.uint8)),
         ["out"], [f"({n + 1}, 1, 72, 20)"]),
    )


BAD_CONFIGS = (
    (dict(num_envs=0), ["num_envs"], ["0"]),
    (dict(num_envs=1, scenario="exit"), ["scenario"], ["'exit'", "room-exit"]),
    (dict(num_envs=1, step_limit=0), ["step_limit"], ["0"]),
    (dict(num_envs=1, seed=-1), ["seed"], ["-1"]),
    (dict(num_envs=1, seed=2**32), ["seed"], [str(2**32)]),
)


def check_rejects(impl, num_envs):
    for kwargs, names, mentions in BAD_CONFIGS:
        expect_rejection("ROOM-8", lambda kw=kwargs: impl.RoomVecEnv(**kw), names=names, mentions=mentions,
                         what=f"RoomVecEnv({kwargs})")
    env = impl.RoomVecEnv(num_envs)
    env.reset()
    for what, call, names, mentions in _bad_inputs(num_envs):
        expect_rejection("ROOM-8", lambda call=call: call(env), names=names, mentions=mentions, what=what)


def check_rejection_keeps_state(impl, num_envs, seed, bad):
    case = _case(num_envs=num_envs, seed=seed, steps=12, greed=0.9)
    _, actions, _ = _plan(case)
    what, call, _, _ = _bad_inputs(num_envs)[bad]
    envs = [impl.RoomVecEnv(num_envs, seed=seed) for _ in range(2)]
    outs = [torch.full((num_envs, *OBS_SHAPE), 0x55, dtype=torch.uint8) for _ in range(2)]
    for env, out in zip(envs, outs):
        env.reset(out)
    for t, a in enumerate(actions):
        if t == len(actions) // 2:
            kept = outs[1].clone()
            try:
                call(envs[1])
            except (ValueError, TypeError):
                pass
            if not torch.equal(outs[1], kept):
                fail("ROOM-9", f"the rejected call ({what}) wrote into an out buffer", num_envs=num_envs, seed=seed)
        want, got = (_copy(env.step(a, out)) for env, out in zip(envs, outs))
        after = f"{t} (the rejected call, {what}, came before step {len(actions) // 2})"
        compare("ROOM-9", after, got, want, case)


def check_deferred_render(impl, **case):
    _, actions, expected = _plan(case)
    env = impl.RoomVecEnv(case["num_envs"], case["scenario"], step_limit=case["step_limit"], seed=case["seed"])
    env.reset()
    for t, a in enumerate(actions):
        got = env.step(a, render=False)
        if got.obs is not None:
            fail("ROOM-10", f"step {t}: step(actions, render=False) returned obs {type(got.obs).__name__}, "
                            "expected None")
        got = _copy(got._replace(obs=torch.zeros(0)))
        out = torch.full((case["num_envs"], *OBS_SHAPE), 0x77, dtype=torch.uint8)
        if env.render(out) is not out:
            fail("ROOM-10", f"step {t}: render(out) did not return out")
        compare("ROOM-10", t, got._replace(obs=out), expected[t][0], case)


def check_defaults(impl, num_envs):
    case = _case(num_envs=num_envs, seed=0, step_limit=STEP_LIMIT, steps=STEP_LIMIT + 3, greed=0.6)
    _, actions, expected = _plan(case, avoid_door=True)  # reaches the default step limit: it truncates there
    for (t, got, got_final) in run(impl, case, actions, env=impl.RoomVecEnv(num_envs)):
        if t >= 0:
            compare("ROOM-11", t, got, expected[t][0], case, got_final=got_final, want_final=expected[t][1])


def check_reset_again(impl, **case):
    first, actions, expected = _plan(case)
    doors = [t for t in range(len(actions)) if bool(expected[t][0].terminated.any())]
    before = actions[: doors[0] + 1] if doors else actions  # end on the door's reward when the plan reaches it
    env = impl.RoomVecEnv(case["num_envs"], case["scenario"], step_limit=case["step_limit"], seed=case["seed"])
    env.reset()
    for a in before:
        env.step(a)
    case = dict(case, steps_before_reset=len(before))
    for (t, got, got_final) in run(impl, case, actions, env=env):
        if t == -1:
            compare("ROOM-12", t, got, first, case)
        else:
            compare("ROOM-12", t, got, expected[t][0], case, got_final=got_final, want_final=expected[t][1])


def check_call_order(impl, num_envs):
    env = impl.RoomVecEnv(num_envs)
    actions = torch.zeros(num_envs, dtype=torch.int64)
    out = torch.full((num_envs, *OBS_SHAPE), 0x33, dtype=torch.uint8)
    calls = (("step(actions)", lambda: env.step(actions)), ("step(actions, render=False)",
             lambda: env.step(actions, render=False)), ("render(out)", lambda: env.render(out)))
    for what, call in calls:
        try:
            call()
        except RuntimeError as err:
            if "reset" not in str(err):
                fail("ROOM-13", f"{what} before reset() raised {err!r}, which does not say to call reset()")
        else:
            fail("ROOM-13", f"{what} before reset() was accepted: an env never reset has no state to step from",
                 num_envs=num_envs)
    if not bool((out == 0x33).all()):
        fail("ROOM-13", "render(out) before reset() wrote into out", num_envs=num_envs)
    case = _case(num_envs=num_envs, steps=0)
    first, _, _ = _plan(case)
    compare("ROOM-13", -1, _copy(env.reset()), first, case)


PROPERTIES = (
    Property("ROOM-1", check_twin, plans(max_steps=50), PLAN_EXAMPLES, INTERFACE, max_examples=3),
    Property("ROOM-2", check_reset, plans(), PLAN_EXAMPLES, INTERFACE, max_examples=10),
    Property("ROOM-3", check_rules, plans(scenarios=("room-exit",)), PLAN_EXAMPLES[:1], INTERFACE, max_examples=6),
    Property("ROOM-4", check_door,
             st.builds(lambda n, s: _case(num_envs=n, seed=s, step_limit=40, steps=30, greed=1.0),
                       st.integers(1, 3), seeds32),
             (_case(num_envs=3, seed=7, step_limit=40, steps=30, greed=1.0),), INTERFACE, max_examples=4),
    Property("ROOM-5", check_truncation,
             st.builds(lambda n, s, lim, g: _case(num_envs=n, seed=s, step_limit=lim, steps=3 * lim + 2, greed=g),
                       st.integers(1, 3), seeds32, st.integers(1, 12), st.sampled_from([0.0, 0.9])),
             (_case(num_envs=2, seed=3, step_limit=5, steps=17, greed=0.9),
              _case(num_envs=1, seed=4, step_limit=1, steps=3)), INTERFACE, max_examples=4),
    Property("ROOM-6", check_standing_still, plans(scenarios=("standing-still",)), PLAN_EXAMPLES[1:2], INTERFACE,
             max_examples=4),
    Property("ROOM-7", check_shapes, st.builds(lambda n: dict(num_envs=n), st.integers(1, 4)),
             (dict(num_envs=1),), INTERFACE, max_examples=3),
    Property("ROOM-8", check_rejects, st.builds(lambda n: dict(num_envs=n), st.integers(1, 3)),
             (dict(num_envs=2),), INTERFACE, max_examples=2),
    Property("ROOM-9", check_rejection_keeps_state,
             st.builds(lambda n, s, b: dict(num_envs=n, seed=s, bad=b), st.integers(1, 3), seeds32,
                       st.integers(0, len(_bad_inputs(1)) - 1)),
             (dict(num_envs=2, seed=1, bad=0), dict(num_envs=1, seed=2, bad=5)), INTERFACE, max_examples=6),
    Property("ROOM-10", check_deferred_render, plans(max_steps=30), PLAN_EXAMPLES[:1], INTERFACE, max_examples=3),
    Property("ROOM-11", check_defaults, st.builds(lambda n: dict(num_envs=n), st.integers(1, 3)),
             (dict(num_envs=2),), INTERFACE, max_examples=2),
    Property("ROOM-12", check_reset_again,
             st.builds(lambda n, s, g: _case(num_envs=n, seed=s, step_limit=40, steps=30, greed=g),
                       st.integers(1, 3), seeds32, st.sampled_from([1.0, 0.6])),
             (_case(num_envs=3, seed=7, step_limit=40, steps=30, greed=1.0),
              _case(num_envs=1, seed=5, step_limit=3, steps=8, greed=0.0)), INTERFACE, max_examples=3),
    Property("ROOM-13", check_call_order, st.builds(lambda n: dict(num_envs=n), st.integers(1, 3)),
             (dict(num_envs=2),), INTERFACE, max_examples=2),
)

CONTRACT = Contract("room_env", CLAUSES, INTERFACE, PROPERTIES, categories=CATEGORIES)
