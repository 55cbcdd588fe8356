"""DreamerV3 on the room beside sheeprl, and its train-step and environment benchmarks (see README.md)."""
