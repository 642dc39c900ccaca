"""shoal.conformance."""
