"""The token learner beside SB3 on Meta-World and the bonus ablations (see README.md)."""
