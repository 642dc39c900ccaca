"""Victim-side helpers: which pods a victim job gives up first, and the victim order."""

from __future__ import annotations

import pytest

from core.reclaim_world import World
from shoal.actions.common.victim_queue import VictimQueue
from shoal.actions.common.victims import clone_job, tasks_to_evict
from shoal.cycle import open_session
from shoal.framework.config import SchedulerConfig
from shoal.framework.session import Session
from shoal.framework.statement import Statement


def session(w: World) -> Session:
    return open_session(w.snapshot, SchedulerConfig(actions=()))


@pytest.mark.parametrize(("tasks", "min_member", "want", "more"), [
    pytest.param(3, 3, ["g-0", "g-1", "g-2"], False, id="gang-at-min-goes-whole"),
    pytest.param(4, 2, ["g-3"], True, id="elastic-above-min-gives-its-last-pod"),
    pytest.param(1, 1, ["g-0"], False, id="single-pod"),
])
def test_tasks_to_evict(tasks: int, min_member: int, want: list[str], more: bool) -> None:
    w = World().node("n0", 8).queue("q").job("g", "q", tasks=tasks, min_member=min_member, nodes=["n0"] * tasks)
    batch, has_more = tasks_to_evict(session(w).jobs["g"])
    assert [t.uid for t in batch] == want
    assert has_more is more


def test_elastic_victim_shrinks_one_pod_at_a_time_down_to_its_min_then_whole() -> None:
    w = World().node("n0", 8).queue("q").job("g", "q", tasks=4, min_member=2, nodes=["n0"] * 4)
    job = session(w).jobs["g"]
    order = []
    while job.tasks:
        batch, _ = tasks_to_evict(job)
        order.append([t.uid for t in batch])
        ids = {t.uid for t in batch}
        job = clone_job(job, [t for t in job.tasks if t.uid not in ids])
    assert order == [["g-3"], ["g-2"], ["g-0", "g-1"]]


def test_victim_order_inside_a_queue_is_reverse_job_order() -> None:
    w = World().node("n0", 8).queue("q")
    w.job("old-low", "q", nodes=["n0"], priority=40).job("new-low", "q", nodes=["n0"], priority=40)
    w.job("high", "q", nodes=["n0"], priority=60)
    ssn = session(w)
    vq = VictimQueue(ssn, ssn.jobs.values())
    popped = []
    while (job := vq.pop()) is not None:
        popped.append(job.uid)
    assert popped == ["new-low", "old-low", "high"]


def test_victim_queue_copies_start_fresh() -> None:
    w = World().node("n0", 8).queue("q").job("a", "q", nodes=["n0"]).job("b", "q", nodes=["n0"])
    ssn = session(w)
    base = VictimQueue(ssn, ssn.jobs.values())
    first = base.copy()
    assert first.pop() is not None and first.pop() is not None and first.pop() is None
    again = base.copy()
    assert again.pop() is ssn.jobs["b"]


def two_queue_world(queues: dict[str, tuple[int, float]], jobs: dict[str, int]) -> Session:
    """One 8-GPU node, the named queues (quota, over-quota weight) and, per queue, that many
    one-GPU running jobs named by the queue's first letter and a number."""
    w = World().node("n0", 8)
    for name, (quota, weight) in queues.items():
        w.queue(name, quota=quota, weight=weight)
    for name, count in jobs.items():
        for i in range(count):
            w.job(f"{name[0]}{i}", name, nodes=["n0"])
    return session(w)


def test_most_over_served_queue_gives_victims_first() -> None:
    ssn = two_queue_world({"fair": (2, 1.0), "over": (1, 0.0)}, {"fair": 2, "over": 4})
    vq = VictimQueue(ssn, ssn.jobs.values())
    first = [vq.pop().uid for _ in range(3)]  # type: ignore[union-attr]
    assert all(uid.startswith("o") for uid in first)


def test_victim_order_reads_the_queues_as_they_were_when_the_queue_was_built() -> None:
    """KAI pops a fresh victim queue over the session the solver started from (every scenario
    before was discarded); shoal's solver pops lazily while a partial job's recorded victims are
    evicted in its statement. Evictions made after the build must not reorder the queues."""
    ssn = two_queue_world({"a": (1, 0.0), "b": (1, 0.0)}, {"a": 4, "b": 3})
    vq = VictimQueue(ssn, ssn.jobs.values())
    stmt = Statement(ssn)
    for uid in ("a0", "a1", "a2"):  # "a" now holds 1 GPU, "b" 3; a3, a's next victim, still runs
        stmt.evict(ssn.jobs[uid].tasks[0], "reclaim", "test")
    live = VictimQueue(ssn, [j for j in ssn.jobs.values() if j.uid not in ("a0", "a1", "a2")]).pop()
    assert live is not None and live.uid.startswith("b")  # a queue built now sees the evictions
    first = vq.pop()
    assert first is not None and first.uid == "a3"  # the earlier queue does not
    stmt.discard()
