"""Dreamer plan's "Exit Oak" as a RAM plug-in (interface: rlspec/envs/pyboy_env.py) for a user's own Pokémon Red or
Blue ROM (English release; nothing of the game ships with rlspec or is downloaded):

    rlspec train dreamer --env pyboy --rom PokemonRed.gb --state oaks_lab.state --plugin rlspec.envs.exit_oak \\
        --set frameskip=24 --set step_limit=256

Every episode starts from the user's save state standing in Oak's lab (saved after the rival's battle, with
no text box open: before that the game does not let the player leave). Success: the player leaves the lab
(the current map id changes), reward 1, terminated. Shaping: ``PROGRESS_REWARD`` for each block the player
gets closer to the lab's exit, which is on its bottom row (the deepest row reached in the episode, module
state: one copy per env).

Well-known RAM addresses (pret/pokered, the disassembly: ram/wram.asm and constants/map_constants.asm; also
Data Crystal's "Pokémon Red and Blue/RAM map"):
    wCurMap  0xD35E   the current map id; OAKS_LAB = 0x28, PALLET_TOWN = 0x00
    wYCoord  0xD361   the player's Y in blocks on the current map (grows downward)
    wXCoord  0xD362   the player's X in blocks
"""

from __future__ import annotations

CUR_MAP, Y_COORD, X_COORD = 0xD35E, 0xD361, 0xD362
OAKS_LAB = 0x28
SUCCESS_REWARD = 1.0
PROGRESS_REWARD = 0.05  # per block closer to the exit row (a new deepest Y)

_deepest = 0  # the deepest Y reached in this episode (this env's copy of the module)


def reset(memory, seed: int) -> None:
    global _deepest
    if memory[CUR_MAP] != OAKS_LAB:
        raise ValueError(f"exit_oak: the save state is not in Oak's lab: wCurMap (0xD35E) = {memory[CUR_MAP]:#04x}, "
                         f"expected {OAKS_LAB:#04x} (save the state inside the lab)")
    _deepest = memory[Y_COORD]


def done(memory) -> bool:
    return memory[CUR_MAP] != OAKS_LAB


def reward(memory) -> float:
    global _deepest
    if done(memory):
        return SUCCESS_REWARD
    y = memory[Y_COORD]
    gain = PROGRESS_REWARD * max(y - _deepest, 0)
    _deepest = max(_deepest, y)
    return gain
