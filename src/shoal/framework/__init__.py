"""shoal.framework."""
