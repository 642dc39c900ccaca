"""The front door of the core: one scheduling cycle, snapshot in, decisions out."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from shoal.defaults import builtins
from shoal.framework.config import ConfigError, SchedulerConfig
from shoal.framework.decisions import NO_NODES, Decisions, GangExplanation
from shoal.framework.faults import isolated
from shoal.framework.registry import Registry
from shoal.framework.session import Session
from shoal.model.snapshot import ClusterSnapshot

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class CycleResult:
    decisions: Decisions
    session: Session
    actions_run: list[str] = field(default_factory=list)

    def release(self) -> None:
        """Done with the session: break its reference cycles (see `Session.release`)."""
        self.session.release()


def check_config(config: SchedulerConfig, source: str = "config", registry: Registry | None = None) -> None:
    """Raise ConfigError (prefixed with `source`) if `config` names a plugin or an action the
    registry (default: the built-ins) does not have."""
    try:
        (registry or builtins()).check(config)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def open_session(snapshot: ClusterSnapshot, config: SchedulerConfig, registry: Registry | None = None) -> Session:
    """Build a session and open the configured plugins in order. Raises ConfigError when the
    config names a plugin or an action the registry (default: the built-ins) does not have."""
    registry = registry or builtins()
    registry.check(config)
    ssn = Session(snapshot, config)
    for plugin in config.plugins:
        registry.plugins[plugin.name](ssn, plugin.arguments)
    ssn.sort_tasks()
    return ssn


def run_actions(ssn: Session, actions: list[str] | tuple[str, ...], registry: Registry | None = None) -> list[str]:
    """Run `actions` in order; a name the registry lacks is skipped (and logged)."""
    known = (registry or builtins()).actions
    ran = []
    for name in actions:
        action = known.get(name)
        if action is None:
            logger.debug("action %s is not available; skipped", name)
            continue
        with isolated(ssn, None, name):  # a failure outside one job's turn ends this action only
            action(ssn)
        ran.append(name)
    return ran


def close_session(ssn: Session) -> Decisions:
    """Explanations for every gang that still has pending pods. In a cluster without nodes each
    one says so, even when no action tried to place it (allocate is not configured)."""
    d = ssn.decisions
    no_nodes = not len(ssn.nodes)
    for job in ssn.jobs.values():
        if not job.has_pending() or job.pg.backoff_blocked:
            continue
        reasons = list(job.reasons)
        messages = list(job.fit_errors)
        if no_nodes and not any(NO_NODES in m for m in messages):
            messages.insert(0, NO_NODES)
        if job.queue is None:
            reasons.append("QueueDoesNotExist")
            messages.append(f"queue {job.pg.queue!r} does not exist")
        elif not job.queue.is_leaf:
            reasons.append("QueueDoesNotExist")
            messages.append(f"queue {job.pg.queue!r} is not a leaf queue")
        if job.fault:
            reasons.append("SchedulingError")
            messages.append(f"skipped this cycle: {job.fault}")
        for problem in job.pg.invalid_reasons:
            reasons.append("InvalidPodGroup")
            messages.append(problem)
        if not job.is_ready() and not job.pg.invalid_reasons:
            reasons.append("NotReady")
            messages.append("fewer pods exist than the gang's minimum")
        if not reasons:
            reasons.append("Unschedulable")
        d.explanations[job.uid] = GangExplanation(job.uid, job.pg.namespace, job.pg.queue,
                                                  list(dict.fromkeys(reasons)), messages)
    return d


def run_cycle(snapshot: ClusterSnapshot, config: SchedulerConfig | None = None,
              registry: Registry | None = None) -> CycleResult:
    """Run one scheduling cycle. Pure: reads the snapshot, never mutates it, returns decisions.
    `registry` (default: the built-ins) may hold more actions, run when `config` names them."""
    config = config or SchedulerConfig()
    registry = registry or builtins()
    ssn = open_session(snapshot, config, registry)
    ran = run_actions(ssn, config.actions, registry)
    return CycleResult(close_session(ssn), ssn, ran)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run a cycle without Python's cyclic garbage collector, then restore it.

    A cycle over a large backlog allocates hundreds of thousands of container objects that all live
    until the cycle ends; the generational collector would scan the whole live heap again and
    again while they pile up (measured: half of a 20,000-pending-pod cycle). Reference counting
    still frees everything that is not in a cycle, and `CycleResult.release` breaks the session's
    cycles, so nothing accumulates. Process-wide, so only adapters (simulator, service, benches)
    use it; decisions are the same with and without it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
