"""The Warp Game Boy beside PyBoy: emulated frames per CPU second (see README.md)."""
