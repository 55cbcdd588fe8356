"""Environments: the room ROM through PyBoy, its Warp twin, Safety-Gymnasium and Meta-World wrappers.
Each third-party simulator is imported inside its own module only."""
