"""The victims of one victim scenario as the scenario validators get them (`Hooks.*_validators`).

A validator is given a dict: victim job uid -> that job's victim tasks. The victim solver tries
thousands of scenarios per preemptor at scale, and every scenario of a partial job shares the
same recorded victims (the next partial job's recorded victims mostly extend them), so the dict
is a `ScenarioVictims`: besides the tasks it may name the part that is the recorded victims' as
they stand at the search's base (`base`), so that a validator can derive something from that
part once and keep it, instead of reading thousands of unchanged victim jobs per scenario.

Contract for a validator that uses `base`: when `victims.base` is a `RecordedJobs` R, every job
of `R.by_job` is in `victims` with exactly R's tasks and is in the same state as when R was first
given (nothing has changed any of its tasks since), and the other jobs of `victims` are
`victims.extra`. When R has a `parent` P, R's jobs are P's plus `R.added` (the jobs of P in the
same state as under P). Without `base` (None), nothing is promised beyond the dict.
"""

from __future__ import annotations

from shoal.framework.jobs import Task


class RecordedJobs:
    """A partial job's recorded victims grouped by job uid (each job's tasks in recorded order).

    `parent`: the previous partial job's `RecordedJobs` when these are its jobs plus other jobs
    (`added`, in order) - a validator may extend what it derived from `parent`."""

    __slots__ = ("added", "by_job", "parent")

    def __init__(self, by_job: dict[str, list[Task]], parent: RecordedJobs | None = None,
                 added: tuple[str, ...] = ()) -> None:
        self.by_job = by_job
        self.parent = parent
        self.added = added


class ScenarioVictims(dict[str, list[Task]]):
    """Victim tasks per job uid; `base` and `extra` as in the module docstring."""

    __slots__ = ("base", "extra")

    def __init__(self, tasks: dict[str, list[Task]], base: RecordedJobs | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        super().__init__(tasks)
        self.base = base
        self.extra = extra
