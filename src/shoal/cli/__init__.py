"""shoal.cli."""
