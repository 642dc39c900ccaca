"""shoal.plugins."""
