"""PPOLagSem's overhead, batching and evaluation protocol (see README.md)."""
