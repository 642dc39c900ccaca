"""Fault isolation inside a cycle: an exception while handling one job skips that job, never the cycle.

A poisoned object (a value no conversion foresaw, a plugin bug on one pod's data) must not stop
the scheduling of everything else. Actions handle each job inside `isolated(ssn, job, stage)`:
when the body raises, every statement opened inside the scope is rolled back (newest first, so
the session is as it was when the job's turn began), the job is marked faulted (`Job.fault`; no
action takes it as a preemptor or a victim again this cycle), the failure is recorded once in
`Decisions.faults` and logged, and the action goes on with its next job. `cycle.run_actions`
wraps each whole action the same way with `job=None`: a failure outside any one job's turn ends
that action only.

Contract: only `Exception`s are contained (never `KeyboardInterrupt`, `SystemExit` or
cancellation); if rolling back itself fails the session can no longer be trusted, so that error
propagates and the cycle fails as a whole (an adapter then decides nothing from it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sized
from contextlib import contextmanager
from typing import Protocol

from shoal.framework.cycle_state import CycleState, StateKey
from shoal.framework.decisions import Decisions, JobFault
from shoal.framework.jobs import Job

logger = logging.getLogger(__name__)


class Undoable(Protocol):
    """What a scope rolls back: a statement (framework.statement.Statement); `ops` empty = nothing open."""

    @property
    def ops(self) -> Sized: ...

    def discard(self) -> None: ...


class _Scopes:
    """The stack of open isolation scopes, each with the statements opened inside it."""

    __slots__ = ("stack",)

    def __init__(self) -> None:
        self.stack: list[list[Undoable]] = []


_SCOPES: StateKey[_Scopes] = StateKey("fault isolation scopes")


class SessionLike(Protocol):
    """The parts of a session isolation touches (avoids importing framework.session here)."""

    state: CycleState
    decisions: Decisions


def track(ssn: SessionLike, stmt: Undoable) -> None:
    """Called by every new statement: it belongs to the innermost open scope (if any)."""
    scopes = ssn.state.get(_SCOPES)
    if scopes is not None and scopes.stack:
        scopes.stack[-1].append(stmt)


@contextmanager
def isolated(ssn: SessionLike, job: Job | None, stage: str) -> Iterator[None]:
    """Run the body; on an `Exception`, undo its statements and record the fault instead of raising.

    `job` is the job whose turn it is (None: the whole action `stage`)."""
    scopes = ssn.state.setdefault(_SCOPES, _Scopes)
    mine: list[Undoable] = []
    scopes.stack.append(mine)
    try:
        yield
    except Exception as e:
        scopes.stack.pop()
        for stmt in reversed(mine):
            stmt.discard()
        record(ssn, job, stage, e)
        return
    scopes.stack.pop()
    if scopes.stack:  # statements still open after a clean exit belong to the enclosing scope
        scopes.stack[-1].extend(s for s in mine if s.ops)


def record(ssn: SessionLike, job: Job | None, stage: str, error: BaseException) -> None:
    """Mark `job` faulted and add one `JobFault` for it (a job already faulted is not recorded again)."""
    message = f"{type(error).__name__}: {error}"[:500]
    if job is not None:
        if job.fault:
            return
        job.fault = f"{stage}: {message}"
        logger.error("%s: job %s skipped for this cycle: %s", stage, job.uid, message, exc_info=error)
        ssn.decisions.faults.append(JobFault(job.uid, job.pg.namespace, stage, message))
    else:
        logger.error("%s failed outside any one job; the action is cut short: %s", stage, message,
                     exc_info=error)
        ssn.decisions.faults.append(JobFault("", "", stage, message))
