"""The fast twins timed against the reference and the anchors (pytest-benchmark modules; see README.md)."""
