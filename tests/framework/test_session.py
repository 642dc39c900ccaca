"""A released session leaves no cyclic garbage, and `paused_gc` restores the collector's state.

Why it matters: adapters run cycles under `paused_gc()`; anything the session leaves in a
reference cycle would pile up until the next full collection."""

from __future__ import annotations

import gc

import pytest

from shoal.cycle import paused_gc, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, Node, Pod, PodGroup, PodStatus, Queue, QueueResource


def _snapshot(pending_gangs: int, running: int) -> ClusterSnapshot:
    nodes = [Node(f"n{i}", {"cpu": 8_000, "memory": 32 << 30, "pods": 110, "nvidia.com/gpu": 4}) for i in range(4)]
    queues = [Queue("dept", cpu=QueueResource(-1, -1, 1.0)),
              Queue("team", parent="dept", gpu=QueueResource(4, -1, 1.0)),
              Queue("orphan", parent="missing")]
    snap = ClusterSnapshot(now=100.0, nodes=nodes, queues=queues)
    for g in range(pending_gangs + running):
        name = f"g{g}"
        snap.podgroups.append(PodGroup(name, name, "ns", "team", 50, True, float(g), min_member=2))
        for k in range(2):
            is_running = g < running
            snap.pods.append(Pod(f"{name}-{k}", f"{name}-{k}", "ns", name,
                                 PodStatus.RUNNING if is_running else PodStatus.PENDING, 500, 1 << 30,
                                 node=f"n{g % 4}" if is_running else None, creation=float(g)))
    return snap


@pytest.mark.parametrize("actions", [
    pytest.param(("allocate",), id="allocate"),
    pytest.param(("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"), id="all-actions"),
])
def test_released_session_leaves_no_cycles(actions: tuple[str, ...]) -> None:
    snap = _snapshot(pending_gangs=30, running=4)
    # A first cycle imports what the actions load lazily (numpy.ma leaves import-time cycles).
    run_cycle(snap, SchedulerConfig(actions=actions)).release()
    gc.collect()
    with paused_gc():
        result = run_cycle(snap, SchedulerConfig(actions=actions))
        assert result.decisions.binds, "the cycle should place something"
        result.release()
        del result
        assert gc.collect() == 0


def test_unreleased_session_is_cyclic() -> None:
    """The control: without release the session's task <-> job links are cycles (so the test above can fail)."""
    snap = _snapshot(pending_gangs=5, running=0)
    gc.collect()
    with paused_gc():
        result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
        del result
        assert gc.collect() > 0


@pytest.mark.parametrize("enabled", [pytest.param(True, id="was-enabled"), pytest.param(False, id="was-disabled")])
def test_paused_gc_restores_state(enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(RuntimeError), paused_gc():
            assert not gc.isenabled()
            raise RuntimeError("boom")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
