"""rlspec: a test-first spec-conformance kit for reinforcement-learning contracts."""

__version__ = "0.1.0"
