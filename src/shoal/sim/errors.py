"""The simulator's input error: one line naming the file, the line or field, and the problem."""

from __future__ import annotations


class SimInputError(ValueError):
    """Bad simulator input (scenario, cluster, queues, workload). `str(err)` is the one-line message
    printed by `shoal simulate` (exit code 2): ``FILE[:LINE]: FIELD: problem``."""
