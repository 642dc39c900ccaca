"""shoal: a Kubernetes-native batch scheduler for GPU and AI workloads."""

__version__ = "0.1.0"
