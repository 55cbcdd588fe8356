"""Fixture generators: the only code that imports third-party RL packages (run by `nox -s fixtures`)."""
