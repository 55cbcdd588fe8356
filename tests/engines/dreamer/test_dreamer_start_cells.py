"""The greedy evaluation over every start cell of the room (`rlspec eval RUN --start-cells`): one seed per free
cell (cell_seeds), PyBoy rooms reset from them, and a policy that always presses "up" scored against the closed
form read off the room's layout (only the cells below the door with nothing between reach it)."""

from __future__ import annotations

import json

import pytest
import torch
from test_dreamer_engine import TINY

from rlspec import cli
from rlspec.contracts import room_env as game
from rlspec.engines import dreamer
from rlspec.engines.dreamer.loop import run_start_cells
from rlspec.envs.room.pyboy_room import RoomVecEnv

UP = game.ACTION_NAMES.index("up")


def reaches_door_going_up(row: int, col: int) -> bool:
    """Closed form: pressing up from (row, col) enters the door iff every cell above is floor up to a door."""
    for r in range(row - 1, -1, -1):
        if game.CELLS[r][col] != game.FLOOR:
            return game.CELLS[r][col] == game.DOOR
    return False


def test_cell_seeds_start_on_each_free_cell_in_order():
    seeds = game.cell_seeds()
    assert [game.start_cell(s) for s in seeds] == list(game.FREE_CELLS)
    for cell, s in zip(game.FREE_CELLS, seeds):  # each the smallest such seed >= 1
        assert all(game.start_cell(t) != cell for t in range(1, s))


def test_first_seeds_are_validated():
    with pytest.raises(ValueError, match=r"first_seeds.*2 ints in \[0, 65535\].*got \(1, 70000\)"):
        RoomVecEnv(2, first_seeds=(1, 70000))
    with pytest.raises(ValueError, match="first_seeds.*got"):
        RoomVecEnv(2, first_seeds=(1,))


def always_up(state) -> None:
    """Make the actor's logits favour "up" whatever it reads: last layer weights 0, bias one-hot."""
    last = [m for m in state.actor.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
        last.bias[UP] = 10.0


def test_every_start_cell_against_the_layout():
    cfg = dreamer.build_config(overrides=TINY)
    gen = torch.Generator().manual_seed(0)
    state = dreamer.build(cfg, gen)
    always_up(state)
    result = run_start_cells(cfg, state, 5, gen)
    want = [int(reaches_door_going_up(r, c)) for r, c in game.FREE_CELLS]
    assert 0 < sum(want) < len(want)  # the closed form separates cells
    assert result["episodes"] == len(game.FREE_CELLS) and result["success_by_cell"] == want
    assert result["start_cells"] == [list(c) for c in game.FREE_CELLS]
    lengths = [r if ok else cfg.step_limit for (r, _), ok in zip(game.FREE_CELLS, want)]  # one step per row
    assert result["EpLen"] == pytest.approx(sum(lengths) / len(lengths))
    assert result["SuccessRate"] == pytest.approx(sum(want) / len(want))
    assert result["steps"] == cfg.step_limit  # every env's first episode has ended, no step more


def test_eval_start_cells_verb(tmp_path):
    run = tmp_path / "run"
    assert cli.main(["train", "dreamer", "--quiet", "--out", str(run),
                     *[a for kv in [*TINY, "total_steps=16"] for a in ("--set", kv)]]) == 0
    assert cli.main(["eval", str(run), "--start-cells", "--seed", "3"]) == 0
    result = json.loads((run / "eval/eval.json").read_text())
    assert result["episodes"] == len(game.FREE_CELLS) == len(result["success_by_cell"])
    assert result["checkpoint_step"] == 16 and result["seed"] == 3
