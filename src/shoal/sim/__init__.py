"""shoal.sim."""
