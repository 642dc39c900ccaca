"""shoal.actions."""
