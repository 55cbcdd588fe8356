"""Runtime half of contract ``room_env`` (spec/room_env.py): the room game, its data and its rules.

The game is written once as data here; the Game Boy ROM (rlspec/envs/room/room.c, built with the header
``rlspec.envs.room.build`` generates from this module) and the Warp twin (rlspec/envs/room/warp_room.py)
both implement the rules below, and the contract checks that they agree bit for bit.

The room (Dreamer plan M8 "Exit Oak", made small and free)
-------------------------------------------------------
A 10 × 9 grid of 16 × 16-pixel cells fills the 160 × 144 screen (each cell is 2 × 2 background tiles):
walls around, a few obstacles, a door in the top wall. The player is a 16 × 16 sprite (4 OAM entries).

    cell (r, c) covers screen rows 16r .. 16r+15 and columns 16c .. 16c+15

Rules of one env step (one game update, whatever the frame skip)
----------------------------------------------------------------
* actions: 0 no-op, 1 up, 2 down, 3 left, 4 right (the d-pad; the ROM latches the joypad once a step).
* ``room-exit``: the target cell is (r, c) + direction; walls and obstacles block (the player stays), the
  door is entered: reward 1, ``terminated`` (success). Every other step gives reward 0.
* ``standing-still``: the d-pad is ignored; reward 0; nothing terminates. The view barely changes: only
  the player's idle animation (below). This is the reconstruction scenario of the Dreamer plan M8.
* the player's pose is ``(steps >> 2) & 1`` (steps since reset; 0 after reset): it changes every 4 steps.
* ``truncated`` when ``steps == step_limit`` and the step did not terminate (the env's side, not the ROM's).
* reset from a 16-bit seed s: the player starts on ``FREE_CELLS[xorshift16(s) % len(FREE_CELLS)]``;
  the vector envs reset on their own (same-step auto-reset: the obs written is the new episode's first),
  episode k of env i using ``episode_seed(seed, i, k)``.

Frames
------
Shades 0..3 (0 white, 3 black) of every second screen pixel in both axes, starting at (0, 0), packed
four to a byte least-significant first (contract ``packed2``): obs ``[N, 1, 72, 20]`` uint8. PyBoy draws
shade v in RGB with R = ``SCREEN_R[v]`` = 255, 153, 85, 0.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlspec.contracts.params import SCENARIOS  # noqa: F401  (re-exported: the ROM's MODE byte per scenario)
from rlspec.contracts.validate import require_int

# --------------------------------------------------------------------------------------------------
# The room
# --------------------------------------------------------------------------------------------------
ROWS, COLS, CELL = 9, 10, 16  # grid rows, columns, pixels per cell side
SCREEN = (144, 160)  # [H, W] pixels
OBS_SHAPE = (1, 72, 20)  # [C, H/2, W/2/4] packed2 (Dreamer plan §2.3)
FLOOR, WALL, OBSTACLE, DOOR = 0, 1, 2, 3
LAYOUT = (
    "WWWWWWDWWW",
    "W........W",
    "W..O.....W",
    "W....OO..W",
    "W........W",
    "W.O....O.W",
    "W...O....W",
    "W........W",
    "WWWWWWWWWW",
)
_CODES = {".": FLOOR, "W": WALL, "O": OBSTACLE, "D": DOOR}
CELLS = tuple(tuple(_CODES[ch] for ch in row) for row in LAYOUT)  # [ROWS][COLS] cell types
FREE_CELLS = tuple((r, c) for r in range(ROWS) for c in range(COLS) if CELLS[r][c] == FLOOR)  # start cells

NUM_ACTIONS = 5
ACTION_NAMES = ("noop", "up", "down", "left", "right")
MOVES = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))  # (dr, dc) per action
FRAMESKIP = 4  # emulated frames per env step (default)
MIN_FRAMESKIP = 3  # the ROM updates in the first vertical blank and shows it from the third frame on
STEP_LIMIT = 64  # default episode length before truncation
SUCCESS_REWARD = 1.0

# --------------------------------------------------------------------------------------------------
# Pictures: 16 × 16 per cell type and per player pose, one character per pixel = the Game Boy colour
# index 0..3 (before the palette). Details on odd rows/columns are deliberate: they never reach the
# observation, so an env that subsamples at the wrong phase shows.
# --------------------------------------------------------------------------------------------------
CELL_PICTURES = {
    FLOOR: (
        "0000000000000000",
        "0000000000000000",
        "0000000000000000",
        "0000000000000000",
        "0000100000000000",
        "0000000000000000",
        "0000000000000000",
        "0000000000000100",
        "0000000000000000",
        "0000000000000000",
        "0000000000100000",
        "0000000000000000",
        "0000000000000000",
        "0010000000000000",
        "0000000000000000",
        "0000000000000000",
    ),
    WALL: (
        "2222222222222222",
        "2222222222222222",
        "3333332233333333",
        "3333332233333333",
        "3333332233333333",
        "3333332233333333",
        "3333332233333333",
        "3333332233333333",
        "2222222222222222",
        "2222222222222222",
        "2233333333333322",
        "2233333333333322",
        "2233333333333322",
        "2233333333333322",
        "2233333333333322",
        "2233333333333322",
    ),
    OBSTACLE: (
        "3333333333333333",
        "3333333333333333",
        "3322222222222233",
        "3322222222222233",
        "3322332222332233",
        "3322332222332233",
        "3322223333222233",
        "3322223333222233",
        "3322223333222233",
        "3322223333222233",
        "3322332222332233",
        "3322332222332233",
        "3322222222222233",
        "3322222222222233",
        "3333333333333333",
        "3333333333333333",
    ),
    DOOR: (
        "3333333333333333",
        "3333333333333333",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3311111111111133",
        "3322222222222233",
        "3322222222222233",
    ),
}
PLAYER_PICTURES = (  # pose 0, pose 1; colour 0 is transparent (the background shows)
    (
        "0000001111000000",
        "0000001111000000",
        "0000112222110000",
        "0000112222110000",
        "0000223223220000",
        "0000223223220000",
        "0000222222220000",
        "0000222222220000",
        "0011111111111100",
        "0011111111111100",
        "0000111111110000",
        "0000111111110000",
        "0000110000110000",
        "0000110000110000",
        "0000330000330000",
        "0000330000330000",
    ),
    (
        "0000000000000000",
        "0000000000000000",
        "0000001111000000",
        "0000001111000000",
        "0000112222110000",
        "0000112222110000",
        "0000223223220000",
        "0000223223220000",
        "0011222222221100",
        "0011222222221100",
        "0000111111110000",
        "0000111111110000",
        "0000111111110000",
        "0000111111110000",
        "0000330000330000",
        "0000330000330000",
    ),
)
BGP = 0b11_10_01_00  # background palette: colour i -> shade (BGP >> 2i) & 3 (identity)
OBP0 = 0b00_11_10_00  # sprite palette 0: colour 1 -> 2, 2 -> 3, 3 -> 0 (colour 0 transparent)
SCREEN_R = (255, 153, 85, 0)  # PyBoy's default DMG palette, R channel of shade 0..3

# --------------------------------------------------------------------------------------------------
# The ROM's RAM interface (work RAM the ROM's own variables never use: they start at 0xC100)
# --------------------------------------------------------------------------------------------------
RAM = {
    "REQ": 0xC000,  # env writes 1 to request one update; the ROM clears it when done
    "CMD": 0xC001,  # 0 step (latch the d-pad), 1 reset (place the player from the seed)
    "SEED_LO": 0xC002,
    "SEED_HI": 0xC003,
    "MODE": 0xC004,  # SCENARIOS value (| FREE_RUN), written with a reset
    "READY": 0xC005,  # READY_MAGIC once the ROM has drawn the room and waits for requests
    "ROW": 0xC006,  # player cell
    "COL": 0xC007,
    "EXITED": 0xC008,  # 1 once the player entered the door
    "STEPS": 0xC009,  # steps since reset, mod 256
    "INPUT": 0xC00A,  # the d-pad bits latched by the last step (active high: 1 right, 2 left, 4 up, 8 down)
}
CMD_STEP, CMD_RESET = 0, 1
READY_MAGIC = 0xA5
FREE_RUN = 0x80  # MODE flag: the ROM also updates on its own every FREE_RUN_PERIOD frames, polling the d-pad
FREE_RUN_PERIOD = 8  # (an ordinary game's behaviour: how a save state of the ROM runs on the user-ROM path)


# --------------------------------------------------------------------------------------------------
# Seeds: integer formulas every implementation (Python, C, Warp) computes identically
# --------------------------------------------------------------------------------------------------
MASK32 = 0xFFFFFFFF


def xorshift16(s: int) -> int:
    """Marsaglia's 16-bit xorshift (7, 9, 8), one round: the ROM's mix of the seed."""
    s ^= (s << 7) & 0xFFFF
    s ^= s >> 9
    s ^= (s << 8) & 0xFFFF
    return s


def start_cell(seed16: int) -> tuple[int, int]:
    """The player's first cell for a 16-bit seed: FREE_CELLS[xorshift16(seed) % len(FREE_CELLS)]."""
    return FREE_CELLS[xorshift16(seed16) % len(FREE_CELLS)]


def cell_seeds() -> tuple[int, ...]:
    """One 16-bit seed per start cell, in FREE_CELLS order: the smallest s >= 1 with start_cell(s) equal to that
    cell (xorshift16 permutes 1..65535, so every cell has one). An evaluation that resets env k from seed k
    plays every start cell once, instead of a sample of them."""
    first: dict[tuple[int, int], int] = {}
    for s in range(1, 1 << 16):
        first.setdefault(start_cell(s), s)
        if len(first) == len(FREE_CELLS):
            break
    return tuple(first[cell] for cell in FREE_CELLS)


def episode_seed(seed: int, env: int, episode: int) -> int:
    """16-bit seed of episode ``episode`` of env ``env`` in a vector env created with ``seed`` (uint32
    arithmetic: a linear mix, then the murmur3 finalizer)."""
    h = (seed * 0x9E3779B1 + env * 0x85EBCA77 + episode * 0xC2B2AE3D + 0x27D4EB2F) & MASK32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    h ^= h >> 16
    return h & 0xFFFF


# --------------------------------------------------------------------------------------------------
# Rendering data: shades (after the palette) of the background and of the player, full resolution
# --------------------------------------------------------------------------------------------------
TRANSPARENT = 4  # a sprite pixel of colour 0


def palette_shade(palette: int, colour: int) -> int:
    return (palette >> (2 * colour)) & 3


def background_shades() -> torch.Tensor:
    """[144, 160] uint8 shades of the room without the player."""
    out = torch.empty(SCREEN, dtype=torch.uint8)
    for r in range(ROWS):
        for c in range(COLS):
            picture = CELL_PICTURES[CELLS[r][c]]
            out[CELL * r:CELL * (r + 1), CELL * c:CELL * (c + 1)] = torch.tensor(
                [[palette_shade(BGP, int(ch)) for ch in line] for line in picture], dtype=torch.uint8)
    return out


def player_shades() -> torch.Tensor:
    """[2, 16, 16] uint8 shades of the player's poses; TRANSPARENT where the sprite's colour is 0."""
    return torch.tensor([[[TRANSPARENT if ch == "0" else palette_shade(OBP0, int(ch)) for ch in line]
                          for line in pose] for pose in PLAYER_PICTURES], dtype=torch.uint8)


def screen_shades(row: int, col: int, pose: int) -> torch.Tensor:
    """[144, 160] uint8: the frame with the player on cell (row, col) in ``pose``."""
    frame = background_shades()
    sprite = player_shades()[pose]
    box = frame[CELL * row:CELL * (row + 1), CELL * col:CELL * (col + 1)]
    box.copy_(torch.where(sprite == TRANSPARENT, box, sprite))
    return frame


def observed(shades: torch.Tensor) -> torch.Tensor:
    """[..., 144, 160] shades -> [..., 72, 80]: every second pixel in both axes, from (0, 0)."""
    return shades[..., ::2, ::2]


def pose_of(steps: int) -> int:
    return (steps >> 2) & 1


# --------------------------------------------------------------------------------------------------
# One step of a vector env
# --------------------------------------------------------------------------------------------------
class Step(NamedTuple):
    """What reset() and step() return; row i is env i. ``obs`` is the caller's buffer when one was given.
    After a step that ended an episode (terminated or truncated) obs is already the next episode's first
    frame (is_first True, episode_id + 1): the Dreamer plan's replay row stores the transition out of obs_t."""

    obs: torch.Tensor | None  # [N, 1, 72, 20] uint8, packed2 (None from step(..., render=False))
    reward: torch.Tensor  # [N] float32
    terminated: torch.Tensor  # [N] bool: the door was entered (continue = 0)
    truncated: torch.Tensor  # [N] bool: steps reached step_limit without terminating
    success: torch.Tensor  # [N] bool: the episode ended at the door
    is_first: torch.Tensor  # [N] bool: obs starts an episode
    episode_id: torch.Tensor  # [N] int32 of obs, +1 per reset, 0 at the first


def validate_config(fn: str, num_envs: int, scenario: str, step_limit: int, seed: int) -> None:
    require_int(fn, "num_envs", num_envs, 1)
    if scenario not in SCENARIOS:
        raise ValueError(f"{fn}: argument 'scenario' must be one of {sorted(SCENARIOS)}, got {scenario!r}")
    require_int(fn, "step_limit", step_limit, 1)
    require_int(fn, "seed", seed, 0)
    if seed > MASK32:
        raise ValueError(f"{fn}: argument 'seed' must be an int in [0, 2**32 - 1], got {seed!r}")


def validate_first_seeds(fn: str, first_seeds, num_envs: int) -> tuple[int, ...] | None:
    """None, or one 16-bit seed per env (a tuple of ints in 0..65535)."""
    if first_seeds is None:
        return None
    seeds = tuple(first_seeds)
    if len(seeds) != num_envs or not all(type(s) is int and 0 <= s <= 0xFFFF for s in seeds):
        raise ValueError(f"{fn}: argument 'first_seeds' must be {num_envs} ints in [0, 65535] (one per env), "
                         f"got {first_seeds!r}")
    return seeds


def validate_actions(fn: str, actions, num_envs: int, device: torch.device, check_values: bool = True,
                     num_actions: int = NUM_ACTIONS) -> None:
    """actions [N] int32/int64 on the env's device with ids in 0..num_actions-1 (the value check reads one
    flag back to the host; skipped when ``check_values`` is False). ``num_actions``: another game's action set
    (the user-ROM path) instead of the room's d-pad."""
    if not isinstance(actions, torch.Tensor):
        raise TypeError(f"{fn}: argument 'actions' must be a torch.Tensor of dtype int32 or int64, "
                        f"got {type(actions).__name__}")
    if actions.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{fn}: argument 'actions' must have dtype torch.int32 or torch.int64, got {actions.dtype}")
    if tuple(actions.shape) != (num_envs,):
        raise ValueError(f"{fn}: argument 'actions' has shape {tuple(actions.shape)}, expected ({num_envs},) "
                         "(one action id per env)")
    if actions.device != device:
        raise ValueError(f"{fn}: argument 'actions' is on {actions.device}, expected the env's device {device}")
    if check_values:
        bad = (actions < 0) | (actions >= num_actions)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            names = ", ".join(ACTION_NAMES) if num_actions == NUM_ACTIONS else "the game's buttons"
            raise ValueError(f"{fn}: argument 'actions' has {int(bad.sum())} ids outside 0..{num_actions - 1} "
                             f"(first at env {i}: {int(actions[i])}), expected action ids in "
                             f"0..{num_actions - 1} ({names})")


def validate_out(fn: str, name: str, out, num_envs: int, device: torch.device) -> None:
    """A caller-given observation buffer: uint8 [N, 1, 72, 20], contiguous, on the env's device."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{fn}: argument '{name}' must be a torch.Tensor of dtype uint8, got {type(out).__name__}")
    if out.dtype != torch.uint8:
        raise TypeError(f"{fn}: argument '{name}' must have dtype torch.uint8, got {out.dtype}")
    if tuple(out.shape) != (num_envs, *OBS_SHAPE):
        raise ValueError(f"{fn}: argument '{name}' has shape {tuple(out.shape)}, expected "
                         f"{(num_envs, *OBS_SHAPE)} (packed2 frames)")
    if out.device != device:
        raise ValueError(f"{fn}: argument '{name}' is on {out.device}, expected the env's device {device}")
    if not out.is_contiguous():
        raise ValueError(f"{fn}: argument '{name}' must be contiguous (frames are written in place), "
                         f"got strides {out.stride()}")
