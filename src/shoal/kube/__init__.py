"""shoal.kube."""
