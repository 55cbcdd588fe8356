"""Build recipe of the SM83 test programs (rlspec/envs/gameboy/programs/NAME.s and NAME.gb, both committed).

    python -m rlspec.envs.gameboy.build           write every programs/NAME.s (from programs.py) and NAME.gb
    python -m rlspec.envs.gameboy.build --check   regenerate and rebuild in a temporary directory, compare
                                                  byte for byte with the committed .s and .gb (exit 1 if not)

1. ``programs.py`` generates NAME.s (sdasgb syntax, one absolute area from 0x0000 for bank 0 and the fixed
   0x4000 bank; a banked cartridge adds one area BANKk per ROM bank k >= 1);
2. ``sdasgb`` assembles it, ``sdldgb`` links it to Intel hex, area BANKk at k << 16 | 0x4000 (``-b``), the
   address makebin reads as bank k;
3. ``makebin -Z -yN`` writes the cartridge without the Nintendo logo, title NAME: ROM-only (32 KiB), or as
   ``programs.CARTS`` says: ``-yt`` type (header 0x147), ``-yo`` ROM banks (0x148), ``-ya`` RAM banks (0x149);
4. the boot ROM (``programs.BOOT``): its image's first 256 bytes are written as NAME.bin instead of NAME.gb;
   the benchmark's workload (``programs.BENCH``) is built like a test program.

sdcc's assembler/linker/makebin from Debian's sdcc 4.2.0 produced the committed ROMs (``apt-get install -y
sdcc``); the tests read the committed .gb files, so CI needs no sdcc.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rlspec.envs.gameboy.programs import BENCH, BOOT, CARTS, PROGRAMS, Cart

HERE = Path(__file__).resolve().parent / "programs"
COMMANDS = (  # {src}, {build}, {name}, {out}, {banks}: sdldgb's -b options, {cart}: makebin's -y options
    "sdasgb -o {build}/{name}.rel {src}",
    "sdldgb {banks} -i {build}/{name}.ihx {build}/{name}.rel",
    "makebin -Z -yN {cart} -yn {title} {build}/{name}.ihx {out}",
)


def options(cart: Cart) -> dict[str, str]:
    """The {banks} and {cart} fields of COMMANDS for a cartridge."""
    banks = " ".join(f"-b BANK{k}=0x{k:X}4000" for k in range(1, cart.rom_banks)) if cart.rom_banks > 2 else ""
    header = f"-yt 0x{cart.type:02X} -yo {cart.rom_banks} -ya {cart.ram_banks}" if cart != Cart() else ""
    return dict(banks=banks, cart=header)


def build(name: str, out_dir: Path) -> tuple[Path, Path]:
    """Write ``out_dir/NAME.s`` and assemble it to ``out_dir/NAME.gb`` (a boot ROM: ``NAME.bin``)."""
    for tool in ("sdasgb", "sdldgb", "makebin"):
        if shutil.which(tool) is None:
            raise FileNotFoundError(f"{tool} is not installed (Debian: apt-get install -y sdcc); it builds {name}.gb")
    src, out = out_dir / f"{name}.s", out_dir / (f"{name}.bin" if name in BOOT else f"{name}.gb")
    src.write_text({**PROGRAMS, **BOOT, **BENCH}[name]())
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / f"{name}.gb"
        for command in COMMANDS:
            line = command.format(src=src, build=tmp, name=name, title=name.upper(), out=image,
                                  **options(CARTS.get(name, Cart())))
            subprocess.run(line.split(), check=True, capture_output=True)
        data = image.read_bytes()
    out.write_bytes(data[:0x100] if name in BOOT else data)
    return src, out


def check() -> list[str]:
    """Names of the committed files that differ from a fresh build (empty: all equal)."""
    differ = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in (*PROGRAMS, *BOOT, *BENCH):
            for fresh in build(name, Path(tmp)):
                committed = HERE / fresh.name
                if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
                    differ.append(committed.name)
    return differ


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        differ = check()
        count = len(PROGRAMS) + len(BOOT) + len(BENCH)
        print("differ: " + " ".join(differ) if differ else f"all {count} programs rebuild byte for byte")
        sys.exit(1 if differ else 0)
    if sys.argv[1:]:
        sys.exit(__doc__)
    HERE.mkdir(exist_ok=True)
    for name in (*PROGRAMS, *BOOT, *BENCH):
        src, out = build(name, HERE)
        print(f"wrote {src.name}, {out.name} ({out.stat().st_size} bytes)")
