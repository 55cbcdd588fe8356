"""Executable contracts: one module per contract (formula, clauses, strategies, properties)."""
