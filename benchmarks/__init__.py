"""rlspec's evidence by area, run from the checkout as `python -m benchmarks.AREA.MODULE` (see README.md)."""
