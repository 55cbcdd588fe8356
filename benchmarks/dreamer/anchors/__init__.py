"""sheeprl's own DreamerV3 on the room, and its config keys for rlspec's model sizes."""
