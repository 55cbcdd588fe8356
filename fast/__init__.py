"""Optimized twins of reference/: same names and signatures, checked by the same properties."""
