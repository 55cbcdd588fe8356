"""What the benchmarks judge runs with, apart from the engines: the PPOLagSem design's evaluation protocol over the logs
of rlspec, OmniSafe, Stable-Baselines3 and sheeprl (evaluation.py, `rlspec report`) and the identity of the CPU
a speed figure was measured on (cpu.py). Imports no other rlspec layer and no torch."""
