"""The PPU's pixels as Warp functions: one scanline at a time into a per-env packed2 frame buffer.

Sources (facts only, no emulator's code): Pan Docs (https://gbdev.io/pandocs/) "Tile Data", "Tile Maps",
"LCDC" (bits 0-6), "Scrolling" (SCX/SCY, WX/WY, the window's internal line counter), "OAM" (object attributes,
the 10-per-line selection, drawing priority), "Palettes" (BGP, OBP0, OBP1); PyBoy 2.8.1 where a frame shows a
choice Pan Docs leaves open (named below).

When: hardware.py's ``ppu_tick`` calls ``render_line`` as line LY's mode 3 ends (dot 252 of lines 0-143), with
the registers, VRAM and OAM as they are then (PyBoy 2.8.1 draws each line at that point too), so a register
written between lines (SCX per line, WX/WY, palettes, LCDC) takes effect from the next line drawn. Mode 3's
pixel-by-pixel timing (a write landing inside mode 3) is not modelled.

``Screen`` (N envs):

* ``frame`` [N, 5760] uint8: the frame being drawn as packed2 (row y at bytes 40y..40y+39, pixel x in byte x // 4
  at bits 2(x % 4): least-significant pair = leftmost pixel), shades 0 (lightest) .. 3 (darkest);
* ``objs`` [N, 10] int32: the OAM indices selected for the line being drawn;
* ``window_line`` [N] int32: the window's internal line counter (the window row drawn next);
* ``window_wy`` [N] int32: 1 once WY == LY was seen at a line's start this frame (the window may show);
* ``obj_limit`` ``signed_tiles`` ``x_priority`` ``window_hidden``: wiring (hardware.Wiring): objects per line
  (10), VRAM offset of tile 0 in LCDC.4 = 0 mode (0x1000: 0x9000), +1 = the smaller X wins (-1 reversed), 1 = the
  window's counter also advances on lines where the window is not drawn (0 on the DMG).

Pixels where Pan Docs and PyBoy 2.8.1 differ (the test programs avoid them; see tests/gameboy/
test_ppu_vs_pyboy.py): LCDC.0 = 0 blanks the window too and draws white (PyBoy keeps the window and draws BGP's
colour 0), and leaves every object in front (PyBoy hides objects with the BG-priority bit there); an object
pixel hidden behind the background (attribute bit 7) hides the objects under it (PyBoy lets a lower-priority
object show through).
"""

from __future__ import annotations

import warp as wp

U8 = wp.array2d(dtype=wp.uint8)
I32 = wp.array2d(dtype=wp.int32)
Vec = wp.array(dtype=wp.int32)

WIDTH, HEIGHT, ROW_BYTES = 160, 144, 40  # pixels, lines, packed2 bytes per line
FRAME_BYTES = HEIGHT * ROW_BYTES  # 5760
MAX_OBJS = 10  # the DMG's objects per line (Pan Docs "OAM": "up to 10 objects per scanline")
_LCDC, _SCY, _SCX, _BGP, _OBP0, _WY, _WX = (wp.constant(r) for r in (0x40, 0x42, 0x43, 0x47, 0x48, 0x4A, 0x4B))


@wp.struct
class Screen:
    frame: U8
    objs: I32
    window_line: Vec
    window_wy: Vec
    obj_limit: int
    signed_tiles: int
    x_priority: int
    window_hidden: int


@wp.func
def tile_colour(vram: U8, i: int, tile_at: int, row: int, col: int) -> int:
    """Colour index 0-3 of pixel (col, row) of the 16-byte tile at VRAM offset tile_at: row r is 2 bytes, the low
    bit plane first, bit 7 the leftmost pixel (Pan Docs "Tile Data")."""
    lo = int(vram[i, tile_at + 2 * row])
    hi = int(vram[i, tile_at + 2 * row + 1])
    bit = 7 - col
    return (((hi >> bit) & 1) << 1) | ((lo >> bit) & 1)


@wp.func
def map_colour(s: Screen, vram: U8, i: int, lcdc: int, map_bit: int, x: int, y: int) -> int:
    """Colour index at (x, y) of the 256 × 256 picture of a tile map: 0x9C00 if LCDC bit ``map_bit`` is set, else
    0x9800 (32 × 32 tile numbers); tile data per LCDC.4 (Pan Docs "LCDC.4"): 1: 0x8000 + 16 × number, 0: the
    number signed from 0x9000."""
    base = wp.where(((lcdc >> map_bit) & 1) == 1, 0x1C00, 0x1800)
    number = int(vram[i, base + (y >> 3) * 32 + (x >> 3)])
    tile_at = 16 * number
    if (lcdc & 0x10) == 0:
        tile_at = s.signed_tiles + 16 * (number - ((number & 0x80) << 1))
    return tile_colour(vram, i, tile_at, y & 7, x & 7)


@wp.func
def select_objects(s: Screen, oam: U8, i: int, ly: int, height: int) -> int:
    """Store in ``objs`` the first ``obj_limit`` objects in OAM order whose rows cover line ly (Y - 16 <= ly <
    Y - 16 + height; X plays no part, Pan Docs "OAM"); return how many."""
    count = int(0)
    for n in range(40):
        top = int(oam[i, 4 * n]) - 16
        if count < s.obj_limit and ly >= top and ly < top + height:
            s.objs[i, count] = n
            count += 1
    return count


@wp.func
def object_pixel(s: Screen, vram: U8, oam: U8, i: int, count: int, x: int, ly: int, height: int) -> int:
    """The object pixel at (x, ly): among the selected objects with an opaque pixel there (colour 0 is
    transparent), the one with the smaller X wins, the lower OAM index on a tie (Pan Docs "Drawing priority",
    non-CGB); returns its colour | attributes << 2, or -1. Tiles at 0x8000 + 16 × number; 8 × 16 objects ignore
    the number's bit 0; attribute bit 5 flips X, bit 6 flips Y."""
    best = int(-1)
    best_key = int(0)
    for k in range(count):
        n = s.objs[i, k]
        left = int(oam[i, 4 * n + 1]) - 8
        if x >= left and x < left + 8:
            attrs = int(oam[i, 4 * n + 3])
            row = ly - (int(oam[i, 4 * n]) - 16)
            col = x - left
            if (attrs & 0x40) != 0:
                row = height - 1 - row
            if (attrs & 0x20) != 0:
                col = 7 - col
            number = int(oam[i, 4 * n + 2])
            if height == 16:
                number = number & 0xFE
            colour = tile_colour(vram, i, 16 * number + 16 * (row >> 3), row & 7, col)
            key = s.x_priority * left * 64 + n
            if colour != 0 and (best < 0 or key < best_key):
                best = colour | (attrs << 2)
                best_key = key
    return best


@wp.func
def shade(palette: int, colour: int) -> int:
    """A palette register maps colour index c to the shade in its bits 2c+1..2c (Pan Docs "Palettes")."""
    return (palette >> (2 * colour)) & 3


@wp.func
def render_line(s: Screen, vram: U8, oam: U8, io: U8, i: int, ly: int):
    """Draw line ly (0-143) into ``frame``: the background (LCDC.0; scrolled by SCX/SCY, wrapping at 256), the
    window over it from screen x = WX - 7 when LCDC.5 is set and WY == LY has been seen this frame (its row is the
    internal line counter, which advances only on lines that draw it), objects (LCDC.1; 8 × 16 when LCDC.2 is
    set) in front unless attribute bit 7 puts them behind background colours 1-3."""
    lcdc = int(io[i, _LCDC])
    scx, scy, wx, bgp = int(io[i, _SCX]), int(io[i, _SCY]), int(io[i, _WX]) - 7, int(io[i, _BGP])
    window = (lcdc & 0x21) == 0x21 and s.window_wy[i] == 1 and wx < WIDTH
    height = wp.where((lcdc & 4) != 0, 16, 8)
    count = int(0)
    if (lcdc & 2) != 0:
        count = select_objects(s, oam, i, ly, height)
    packed = int(0)
    for x in range(WIDTH):
        colour = int(0)
        if window and x >= wx:
            colour = map_colour(s, vram, i, lcdc, 6, x - wx, s.window_line[i])
        elif (lcdc & 1) != 0:
            colour = map_colour(s, vram, i, lcdc, 3, (x + scx) & 0xFF, (ly + scy) & 0xFF)
        value = wp.where((lcdc & 1) != 0, shade(bgp, colour), 0)
        obj = object_pixel(s, vram, oam, i, count, x, ly, height)
        if obj >= 0 and ((obj & 0x200) == 0 or colour == 0):
            value = shade(int(io[i, _OBP0 + ((obj >> 6) & 1)]), obj & 3)
        packed = packed | (value << (2 * (x & 3)))
        if (x & 3) == 3:
            s.frame[i, ly * ROW_BYTES + (x >> 2)] = wp.uint8(packed)
            packed = 0
    if window or (s.window_hidden == 1 and s.window_wy[i] == 1):
        s.window_line[i] = s.window_line[i] + 1


@wp.func
def line_start(s: Screen, io: U8, i: int, ly: int):
    """At each line's start (mode 2): the window may show from the first line where WY == LY (Pan Docs
    "Scrolling": the WY condition), for the rest of the frame."""
    if int(io[i, _WY]) == ly:
        s.window_wy[i] = 1


@wp.func
def frame_start(s: Screen, i: int):
    """VBlank (or the LCD switched on): the window's counter and its WY condition start again."""
    s.window_line[i] = 0
    s.window_wy[i] = 0


@wp.func
def blank(s: Screen, io: U8, i: int):
    """The whole frame in BGP's colour 0 (PyBoy 2.8.1's blank screen: the LCD switched off, and the first frame
    after it is switched on; white with the usual BGP)."""
    v = shade(int(io[i, _BGP]), 0) * 0x55
    for k in range(FRAME_BYTES):
        s.frame[i, k] = wp.uint8(v)
