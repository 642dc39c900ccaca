"""The one error the workload map raises: a malformed or unsupported owner object."""

from __future__ import annotations


class WorkloadError(ValueError):
    """A workload object cannot be turned into PodGroups.

    Carries the object's kind, its ``namespace/name``, the offending field path and a message, so that a
    caller can raise an event on exactly that object and keep scheduling everything else.
    ``str()`` reads
    ``"PyTorchJob team-a/bert: spec.pytorchReplicaSpecs.Worker.replicas: must be > 0, got 0"``.
    """

    def __init__(self, kind: str, name: str, field: str, message: str) -> None:
        self.kind = kind
        self.name = name
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.kind or 'object'} {self.name or '<unnamed>'}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"

    def __reduce__(self) -> tuple[type[WorkloadError], tuple[str, str, str, str]]:
        return (WorkloadError, (self.kind, self.name, self.field, self.message))
