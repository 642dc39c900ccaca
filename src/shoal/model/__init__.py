"""shoal.model."""
