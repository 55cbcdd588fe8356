/* room: the project's own Game Boy game (contract room_env, rlspec/contracts/room_env.py).
 *
 * A 10 x 9 grid of 16 x 16 cells: walls, obstacles, a door. The player (4 sprites) moves one cell per
 * update with the d-pad. Updates happen only on request: the host writes CMD (and for a reset SEED and
 * MODE) into work RAM, then REQ = 1. At the next vertical blank the ROM latches the d-pad once, updates
 * the game and prepares the sprites in a shadow copy; at the vertical blank after that it copies them to
 * OAM (first thing, well inside the blank) and clears REQ: the third frame after the request shows the
 * update. One env step is therefore exactly one game update, for any frame skip >= 3.
 * With MODE_FREE_RUN set in MODE (before a reset) the ROM also behaves like an ordinary game: it updates on
 * its own every FREE_RUN_PERIOD frames, polling the d-pad, so that a save state of it can be driven by
 * buttons alone (the user-ROM path: rlspec/envs/pyboy_env.py). The data (pictures, layout, palettes, RAM addresses) comes from
 * room_data.h, which rlspec.envs.room.build generates from rlspec/contracts/room_env.py.
 *
 * Build: python -m rlspec.envs.room.build (sdcc -msm83, makebin -Z -yN; recipe in build.py).
 */
#include <stdint.h>
#include "room_data.h"

#define REG(addr) (*(volatile uint8_t *)(addr))
#define P1 REG(0xFF00)
#define IF REG(0xFF0F)
#define LCDC REG(0xFF40)
#define SCY REG(0xFF42)
#define SCX REG(0xFF43)
#define LY REG(0xFF44)
#define BGP_REG REG(0xFF47)
#define OBP0_REG REG(0xFF48)
#define IE REG(0xFFFF)
#define VRAM_TILES ((volatile uint8_t *)0x8000)
#define BG_MAP ((volatile uint8_t *)0x9800)
#define OAM ((volatile uint8_t *)0xFE00)

#define LCD_ON_BG_OBJ 0x93 /* LCD on, tile data at 0x8000, map at 0x9800, sprites 8x8 on, BG on */
#define MAP_WIDTH 32

static void draw_room(void)
{
    uint16_t i;
    uint8_t r, c, t, dy, dx;
    for (i = 0; i < sizeof(TILES); i++)
        VRAM_TILES[i] = TILES[i];
    for (r = 0; r < ROWS; r++)
        for (c = 0; c < COLS; c++) {
            t = CELLS[r * COLS + c] * 4;
            for (dy = 0; dy < 2; dy++)
                for (dx = 0; dx < 2; dx++)
                    BG_MAP[(uint16_t)(2 * r + dy) * MAP_WIDTH + 2 * c + dx] = t + dy * 2 + dx;
        }
    for (i = 0; i < 160; i++)
        OAM[i] = 0; /* y = 0: every sprite hidden until the first reset */
}

static uint8_t shadow_oam[16]; /* the player's 4 sprites: y + 16, x + 8, tile, attributes */

static void draw_player(void)
{
    uint8_t q, y = MB(ROW) * 16 + 16, x = MB(COL) * 16 + 8;
    uint8_t tile = PLAYER_TILE0 + ((MB(STEPS) >> 2) & 1) * 4;
    for (q = 0; q < 4; q++) {
        shadow_oam[4 * q] = y + (q >> 1) * 8;
        shadow_oam[4 * q + 1] = x + (q & 1) * 8;
        shadow_oam[4 * q + 2] = tile + q;
        shadow_oam[4 * q + 3] = 0;
    }
}

static void reset(void)
{
    uint16_t s = MB(SEED_LO) | ((uint16_t)MB(SEED_HI) << 8);
    uint8_t k;
    s ^= s << 7; /* xorshift16 (7, 9, 8) */
    s ^= s >> 9;
    s ^= s << 8;
    k = s % N_FREE;
    MB(ROW) = FREE_ROW[k];
    MB(COL) = FREE_COL[k];
    MB(EXITED) = 0;
    MB(STEPS) = 0;
    MB(INPUT) = 0;
}

static uint8_t read_dpad(void)
{
    uint8_t v;
    P1 = 0x20; /* select the direction keys */
    v = ~P1 & 0x0F; /* active high: 1 right, 2 left, 4 up, 8 down */
    P1 = 0x30;
    return v;
}

static void step(void)
{
    uint8_t pad = read_dpad(), r = MB(ROW), c = MB(COL), t;
    MB(INPUT) = pad;
    MB(STEPS)++;
    if ((MB(MODE) & ~MODE_FREE_RUN) != MODE_ROOM_EXIT || MB(EXITED))
        return;
    if (pad & 4) r--;
    else if (pad & 8) r++;
    else if (pad & 2) c--;
    else if (pad & 1) c++;
    t = CELLS[r * COLS + c];
    if (t == CELL_WALL || t == CELL_OBSTACLE)
        return;
    MB(ROW) = r;
    MB(COL) = c;
    if (t == CELL_DOOR)
        MB(EXITED) = 1;
}

void main(void)
{
    uint8_t i, pending = 0, frames = 0;
    while (LY < 144) /* the LCD may only be switched off in vertical blank */
        ;
    LCDC = 0;
    draw_room();
    BGP_REG = BGP;
    OBP0_REG = OBP0;
    SCX = 0;
    SCY = 0;
    for (i = 0; i < MAILBOX_SIZE; i++)
        MB_AT(i) = 0;
    LCDC = LCD_ON_BG_OBJ;
    MB(READY) = READY_MAGIC;
    IF = 0;
    IE = 0x01; /* vertical blank only; its vector (crt0) is a bare reti */
    __asm__("ei");
    for (;;) {
        __asm__("halt"); /* woken by the vertical blank */
        frames++;
        if (pending) {
            for (i = 0; i < 16; i++)
                OAM[i] = shadow_oam[i];
            pending = 0;
            MB(REQ) = 0;
        } else if (MB(REQ) || ((MB(MODE) & MODE_FREE_RUN) && frames >= FREE_RUN_PERIOD)) {
            frames = 0;
            if (MB(REQ) && MB(CMD) == CMD_RESET)
                reset();
            else
                step();
            draw_player();
            pending = 1;
        }
    }
}
