"""Alignment of the replay rows (spec/replay.py): the transition rows of this ring vs the arrival rows of
sheeprl 0.8.4 / danijar's dreamerv3, the converters both ways, truncation semantics, and
``check_invariants`` on corrupted rings (env column, step, wrap seam)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rlspec.contracts import replay as contract
from rlspec.fast import replay as fast
from rlspec.reference import replay as reference
from rlspec.spec import replay as spec
from rlspec.spec.core import ContractViolation

RINGS = pytest.mark.parametrize("impl", [reference, fast], ids=["reference", "fast-torch"])
OBS = (1, 3, 4)


def _column(stream, env):
    return {k: v[:, env] for k, v in stream.items()}


def _simulate(lengths, kinds, seed):
    """An env run episode by episode, written down independently in both conventions.
    Episode i has lengths[i] transitions and ends with kinds[i] ("terminated" / "truncated")."""
    g = torch.Generator().manual_seed(seed)
    trans = {k: [] for k in (*contract.FIELDS, *contract.FLAGS)}
    arr = {k: [] for k in contract.ARRIVAL}
    finals = []
    for ep, (n, kind) in enumerate(zip(lengths, kinds)):
        obs = torch.randint(0, 256, (n + 1, *OBS), generator=g, dtype=torch.uint8)  # o_0 .. o_n (final)
        act = torch.randint(0, 18, (n,), generator=g, dtype=torch.int32)
        rew = torch.randn(n, generator=g)  # rew[k]: reward of the transition o_k -> o_{k+1}
        last = torch.arange(n) == n - 1
        trans["obs"].append(obs[:n])
        trans["action"].append(act)
        trans["reward"].append(rew)
        trans["is_first"].append(torch.arange(n) == 0)
        trans["continue"].append(torch.where(last & (kind == "terminated"), 0.0, 1.0))
        trans["episode_id"].append(torch.full((n,), ep, dtype=torch.int32))
        trans["terminated"].append(last & (kind == "terminated"))
        trans["truncated"].append(last & (kind == "truncated"))
        finals.append(obs[n:])
        arr["obs"].append(obs)
        arr["action"].append(torch.cat([act, torch.zeros(1, dtype=torch.int32)]))  # sheeprl: 0 at the end
        arr["reward"].append(torch.cat([torch.zeros(1), rew]))  # reward on arrival, 0 at the reset
        arr["is_first"].append(torch.arange(n + 1) == 0)
        arr["is_last"].append(torch.arange(n + 1) == n)
        arr["is_terminal"].append((torch.arange(n + 1) == n) & (kind == "terminated"))
        arr["episode_id"].append(torch.full((n + 1,), ep, dtype=torch.int32))
    cat = lambda d: {k: torch.cat(v) for k, v in d.items()}
    return cat(trans), cat(arr), torch.cat(finals)


def _assert_rows_equal(got, want):
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        assert torch.equal(got[k], want[k]), (k, got[k], want[k])


episodes = st.lists(st.tuples(st.integers(1, 5), st.sampled_from(["terminated", "truncated"])),
                    min_size=1, max_size=4)


@given(eps=episodes, seed=st.integers(0, 1000))
def test_converters_match_an_independent_simulation(eps, seed):
    trans, arr, finals = _simulate([n for n, _ in eps], [k for _, k in eps], seed)
    _assert_rows_equal(contract.to_arrival({k: trans[k] for k in contract.FIELDS}, finals), arr)
    back, back_finals = contract.from_arrival(arr)
    _assert_rows_equal(back, trans)
    assert torch.equal(back_finals, finals)


@given(steps=st.integers(1, 20), seed=st.integers(0, 1000), last=st.sampled_from(["terminated", "truncated"]))
def test_round_trips_on_ring_streams(steps, seed, last):
    stream = spec.make_stream(steps, 1, OBS, torch.uint8, seed, 0.3, {(steps - 1, 0): last})
    rows = _column(stream, 0)
    n_eps = int(rows["is_first"].sum())
    last_rows = torch.cat([rows["is_first"][1:], torch.tensor([True])])  # [steps]: each episode's last row
    finals = rows.pop("final_obs")[last_rows]  # [E, *OBS]: the stream's final observation of each episode
    arrival = contract.to_arrival({k: rows[k] for k in contract.FIELDS}, finals)
    assert len(arrival["reward"]) == steps + n_eps  # one final-observation row per episode
    back, back_finals = contract.from_arrival(arrival)
    # the arrival rows have one end flag: a step flagged both (a terminal at the time limit) comes back terminal
    _assert_rows_equal(back, dict(rows, truncated=rows["truncated"] & ~rows["terminated"]))
    assert torch.equal(back_finals, finals)
    _assert_rows_equal(contract.to_arrival({k: back[k] for k in contract.FIELDS}, back_finals), arrival)  # and back


def test_worked_example_truncation_then_terminal():
    """Episode 0: o0 -a=3,r=1-> o1 -a=4,r=2-> [time limit, final obs f0]; episode 1: o2 -a=5,r=3-> terminal f1."""
    o = torch.arange(5, dtype=torch.uint8)[:, None, None, None].expand(5, *OBS).contiguous()  # o0, o1, o2, f0, f1
    trans = {"obs": o[[0, 1, 2]], "action": torch.tensor([3, 4, 5], dtype=torch.int32),
             "reward": torch.tensor([1.0, 2.0, 3.0]), "is_first": torch.tensor([True, False, True]),
             "continue": torch.tensor([1.0, 1.0, 0.0]),  # the truncation keeps continue 1
             "episode_id": torch.tensor([0, 0, 1], dtype=torch.int32)}
    arr = contract.to_arrival(trans, o[[3, 4]])
    assert arr["obs"][:, 0, 0, 0].tolist() == [0, 1, 3, 2, 4]  # the final obs f0 sits between o1 and o2
    assert arr["reward"].tolist() == [0.0, 1.0, 2.0, 0.0, 3.0]  # reward on arrival; 0 at each reset
    assert arr["action"].tolist() == [3, 4, 0, 5, 0]
    assert arr["is_first"].tolist() == [True, False, False, True, False]
    assert arr["is_last"].tolist() == [False, False, True, False, True]
    assert arr["is_terminal"].tolist() == [False, False, False, False, True]  # truncation: not terminal
    back, _finals = contract.from_arrival(arr)
    assert back["truncated"].tolist() == [False, True, False]
    assert back["terminated"].tolist() == [False, False, True]


def test_from_arrival_rejects_what_transition_rows_cannot_hold():
    _, arr, _ = _simulate([2], ["terminated"], 0)
    arr["reward"][0] = 0.5
    with pytest.raises(ValueError, match=r"reward 0.5 on the is_first row 0, expected 0"):
        contract.from_arrival(arr)
    _, arr, _ = _simulate([2], ["terminated"], 0)
    arr["is_last"][-1] = False
    with pytest.raises(ValueError, match=r"must end with its only is_last row"):
        contract.from_arrival(arr)
    with pytest.raises(ValueError, match=r"starting with is_first=True"):
        contract.from_arrival({**arr, "is_first": torch.zeros_like(arr["is_first"])})


@RINGS
def test_truncated_final_observation_is_not_stored(impl):
    """Env 0 is truncated after step 2: row 2 keeps continue 1, row 3 is the next episode's reset
    observation (is_first, episode_id + 1), and a window over steps 1..4 contains that reset mid-window."""
    stream = spec.make_stream(6, 2, OBS, torch.uint8, 0, 0.0, {(2, 0): "truncated", (2, 1): "terminated"})
    ring = impl.ReplayRing(8, 2, OBS, store_flags=True)
    for s in range(6):
        ring.push(**spec.step_args(stream, s, ring.device))
    store = {k: v.cpu() for k, v in ring.storage().items()}
    assert store["continue"][2].tolist() == [1.0, 0.0]  # truncated: bootstrap; terminated: not
    assert store["is_first"][3].tolist() == [True, True]
    assert store["episode_id"][3].tolist() == [1, 1]
    assert torch.equal(store["obs"][3], stream["obs"][3])  # the reset observation, not the final one
    spec.check_invariants(ring)
    g = torch.Generator(device=ring.device).manual_seed(0)
    out = ring.sample_sequences(64, 4, g)  # readable steps [0, 6): starts 0..2
    crossing = (out["step"][0] <= 2).cpu()
    assert bool(out["is_first"][1:, crossing].any())  # non-strict: windows hold the reset mid-window
    # the consumer rule: row 2 of env 0 must not bootstrap from row 3 (another episode's value)
    assert bool(store["continue"][2, 0] == 1) and bool(store["is_first"][3, 0])


@RINGS
def test_check_invariants_names_env_and_step_across_the_seam(impl):
    stream = spec.make_stream(11, 2, OBS, torch.uint8, 1, 0.0, {(7, 1): "truncated"})
    ring = impl.ReplayRing(8, 2, OBS, store_flags=True)
    for s in range(11):
        ring.push(**spec.step_args(stream, s, ring.device))
    spec.check_invariants(ring)
    ring.storage()["is_first"][0, 1] = False  # step 8 of env 1 is the reset after the seam
    with pytest.raises(ContractViolation, match=r"\[REPLAY-3\] env column 1, step 8 \(row 0\) \(across the wrap "
                                                r"seam\): episode_id changes from 0 to 1 with is_first=False"):
        spec.check_invariants(ring)
    with pytest.raises(ContractViolation, match=r"\[REPLAY-8\] env column 1, step 8"):
        spec.check_invariants(ring, ("REPLAY-8",))
    ring.storage()["is_first"][0, 1] = True
    ring.storage()["continue"][5, 0] = 0.5
    with pytest.raises(ContractViolation, match=r"\[REPLAY-5\] env column 0, step 5 \(row 5\): continue = 0.5"):
        spec.check_invariants(ring)


def test_fast_unchecked_pushes_count_violations():
    stream = spec.make_stream(3, 2, OBS, torch.uint8, 0, 0.0)
    ring = fast.ReplayRing(4, 2, OBS, device="cpu", check_values=False)
    ring.push(**spec.step_args(stream, 0))
    bad = spec.step_args(stream, 1)
    bad["continue_"][1] = 0.5
    ring.push(**bad)  # stored: nothing is read back to the host
    assert int(ring.violations) == 1
    with pytest.raises(ContractViolation, match=r"\[REPLAY-5\] env column 1, step 1"):
        spec.check_invariants(ring)
    checked = fast.ReplayRing(4, 2, OBS, device="cpu")
    checked.push(**spec.step_args(stream, 0))
    with pytest.raises(ValueError, match=r"argument 'continue_' at env 1 is 0.5, expected 0.0 or 1.0"):
        checked.push(**bad)
