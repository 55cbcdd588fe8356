"""The safe engine beside OmniSafe and SB3, its throughput, compile and learning benchmarks (see README.md)."""
