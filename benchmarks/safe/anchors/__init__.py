"""OmniSafe's and SB3's own code on the safe engine's work, each in its own nox session."""
