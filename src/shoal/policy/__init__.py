"""shoal.policy."""
