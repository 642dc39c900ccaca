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

from collections.abc import Callable
from typing import Generic, TypeVar

from shoal.framework.jobs import Task

T = TypeVar("T")
_MISSING = object()


class RecordedJobs:
    """A partial job's recorded victims (`tasks`, in recorded order) grouped by job uid (each
    job's tasks in recorded order).

    `parent`: the previous partial job's `RecordedJobs` when these are its jobs plus other jobs
    (`added`, in order) - what was derived from `parent` may be extended."""

    __slots__ = ("added", "by_job", "parent", "tasks")

    def __init__(self, tasks: list[Task], by_job: dict[str, list[Task]] | None = None,
                 parent: RecordedJobs | None = None, added: tuple[str, ...] = ()) -> None:
        self.tasks = tasks
        self.by_job = by_job if by_job is not None else group_by_job(tasks)
        self.parent = parent
        self.added = added

    def extended(self, tasks: list[Task], more: list[Task]) -> RecordedJobs:
        """For the recorded victims `tasks` = these ones + `more`: a child of this one when `more`
        belongs to other jobs, else a new grouping."""
        new = group_by_job(more)
        if any(uid in self.by_job for uid in new):
            return RecordedJobs(tasks)
        return RecordedJobs(tasks, self.by_job | new, self, tuple(new))


def group_by_job(tasks: list[Task]) -> dict[str, list[Task]]:
    """Tasks per job uid, jobs in first-seen order, each job's tasks in the given order."""
    out: dict[str, list[Task]] = {}
    for t in tasks:
        out.setdefault(t.job.uid, []).append(t)
    return out


class ScenarioVictims(dict[str, list[Task]]):
    """Victim tasks per job uid; `base` and `extra` as in the module docstring."""

    __slots__ = ("base", "extra")

    def __init__(self, tasks: dict[str, list[Task]], base: RecordedJobs | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        super().__init__(tasks)
        self.base = base
        self.extra = extra


class KeptPerBase(Generic[T]):
    """What a validator derives from a `RecordedJobs` (per `tag`, e.g. the reclaimer's queue): the
    latest two kept, and a child's value extended from its parent's when that one is kept."""

    def __init__(self) -> None:
        self._kept: list[tuple[RecordedJobs, object, T]] = []

    def get(self, base: RecordedJobs, tag: object, build: Callable[[], T], extend: Callable[[T], T]) -> T:
        """The value for `base`: kept, `extend(parent's value)` (for `base.added`), or `build()`."""
        for had, t, value in self._kept:
            if had is base and t == tag:
                return value
        parent: object = _MISSING
        if base.parent is not None:
            parent = next((v for h, t, v in self._kept if h is base.parent and t == tag), _MISSING)
        value = build() if parent is _MISSING else extend(parent)  # type: ignore[arg-type]
        self._kept[:] = [*self._kept[-1:], (base, tag, value)]
        return value
