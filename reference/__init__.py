"""Deterministic CPU truth: readable, float64 where it matters, no global RNG."""
