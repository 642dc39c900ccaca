"""shoal.workloads."""
