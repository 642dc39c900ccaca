"""Property: rolling a statement back to a checkpoint restores the session exactly (every node
matrix, every shared-GPU group, every task, pod-set counter and queue allocation, and every node's
state token), whatever sequence of allocate / pipeline / evict operations ran after it; and two
equal node tokens always name the same node state (what node choice's cache relies on)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.reclaim_world import GIB, World
from shoal.cycle import open_session
from shoal.framework.config import SchedulerConfig
from shoal.framework.session import Session
from shoal.framework.statement import Statement
from shoal.model import GpuRequest, Pod, PodStatus


def world(n_nodes: int, running: list[int], pending: int, shared: int) -> Session:
    w = World().queue("q0", quota=2).queue("q1")
    for i in range(n_nodes):
        w.node(f"n{i}", 4)
    for k, node in enumerate(running):
        w.job(f"r{k}", "q0" if k % 2 else "q1", nodes=[f"n{node % n_nodes}"], priority=50 + 50 * (k % 3 == 0))
    for k in range(pending):
        w.job(f"p{k}", "q1", gpus=1 + k % 2)
    for k in range(shared):
        w.job(f"s{k}", "q0")
        w.snapshot.pods[-1] = Pod(f"s{k}-0", f"s{k}-0", "ns", f"s{k}", PodStatus.PENDING, cpu_milli=100,
                                  memory=GIB, gpu=GpuRequest(portion_milli=250 + 250 * (k % 2)))
    return open_session(w.snapshot, SchedulerConfig(actions=()))


def state(ssn: Session) -> dict[str, Any]:
    n = ssn.nodes
    return {
        "matrices": [m.copy() for m in (n.idle, n.releasing, n.used)],
        "groups": [{g: (v.used, v.allocated, v.releasing) for g, v in groups.items()} for groups in n.groups],
        "tasks": {u: (t.status, t.node, list(t.groups), t.portion, t.left_on and dict(t.left_on))
                  for u, t in ssn.tasks.items()},
        "pod_sets": {(j.uid, name): (ps.active_allocated, ps.active_used, ps.alive, ps.gated)
                     for j in ssn.jobs.values() for name, ps in j.pod_sets.items()},
        "queues": {q: (v.allocated.copy(), v.allocated_np.copy()) for q, v in ssn.queues.items()},
        "tokens": list(ssn.nodes.token),
    }


def node_state(ssn: Session, i: int) -> tuple[Any, ...]:
    """Everything a node-local check may read of node i: its rows, its shared devices, and the
    tasks placed on it with their status and devices."""
    n = ssn.nodes
    on = sorted((t.uid, int(t.status), tuple(t.groups)) for t in ssn.tasks.values()
                if int(ssn.placed[t.ordinal]) == i)
    groups = sorted((g, v.used, v.allocated, v.releasing) for g, v in n.groups[i].items())
    return (n.idle[i].tobytes(), n.releasing[i].tobytes(), n.used[i].tobytes(), tuple(groups), tuple(on))


def check_tokens(ssn: Session, named: dict[int, tuple[Any, ...]]) -> None:
    """Every node's token names one state only, whenever it is seen (`named` remembers them)."""
    for i, t in enumerate(ssn.nodes.token):
        got = node_state(ssn, i)
        assert named.setdefault(t, got) == got, f"node {i}: token {t} named another state before"


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if not all(np.array_equal(x, y) for x, y in zip(a["matrices"], b["matrices"], strict=True)):
        return False
    if any(not (np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]))
           for x, y in zip(a["queues"].values(), b["queues"].values(), strict=True)):
        return False
    return (a["groups"] == b["groups"] and a["tasks"] == b["tasks"] and a["pod_sets"] == b["pod_sets"]
            and a["tokens"] == b["tokens"])


OPS = st.lists(st.tuples(st.sampled_from(["allocate", "pipeline", "evict", "checkpoint", "rollback"]),
                         st.integers(0, 50), st.integers(0, 50)), max_size=40)


@settings(max_examples=120, deadline=None)
@given(n_nodes=st.integers(1, 3), running=st.lists(st.integers(0, 5), max_size=8),
       pending=st.integers(0, 4), shared=st.integers(0, 3), ops=OPS)
def test_rollback_restores_everything(n_nodes: int, running: list[int], pending: int, shared: int,
                                      ops: list[tuple[str, int, int]]) -> None:
    ssn = world(n_nodes, running, pending, shared)
    stmt = Statement(ssn)
    tasks = sorted(ssn.tasks.values(), key=lambda t: t.uid)
    marks = [(stmt.checkpoint(), state(ssn))]
    named: dict[int, tuple[Any, ...]] = {}
    check_tokens(ssn, named)
    for op, a, b in ops:
        check_tokens(ssn, named)
        task = tasks[a % len(tasks)] if tasks else None
        node = b % len(ssn.nodes)
        if op == "checkpoint":
            marks.append((stmt.checkpoint(), state(ssn)))
        elif op == "rollback":
            cp, want = marks[a % len(marks)]
            stmt.rollback(cp)
            assert same(state(ssn), want)
            marks = [m for m in marks if m[0] <= cp]
        elif task is None:
            continue
        elif op in ("allocate", "pipeline") and task.status in (PodStatus.PENDING, PodStatus.RELEASING):
            groups = [ssn.nodes.fresh_group_name(node, set())] if task.pod.gpu.is_shared else []
            if op == "allocate" and task.status == PodStatus.PENDING:
                stmt.allocate(task, node, groups)
            else:
                stmt.pipeline(task, node, groups)
        elif op == "evict" and task.status & (PodStatus.RUNNING | PodStatus.ALLOCATED | PodStatus.PIPELINED):
            stmt.evict(task, "test", "property")
    stmt.discard()
    assert same(state(ssn), marks[0][1])
    check_tokens(ssn, named)


def test_pipeline_back_to_a_node_the_victim_was_moved_from_unevicts_it() -> None:
    """KAI keeps a moved victim's pod on its old node until it is deleted, so pipelining it there
    again (a later statement) finds it "already on the node" and undoes this statement's eviction:
    the victim stays where it was pipelined before, with no second eviction or pipeline."""
    w = World().queue("q0").node("n0", 4).node("n1", 4).node("n2", 4)
    w.job("r0", "q0", gpus=2, nodes=["n0"])
    ssn = open_session(w.snapshot, SchedulerConfig(actions=()))
    task = ssn.tasks["r0-0"]
    first = Statement(ssn)
    first.evict(task, "reclaim", "test")
    first.pipeline(task, 1)
    first.commit()
    assert (task.status, task.node, task.left_on) == (PodStatus.PIPELINED, 1, {0: []})
    second = Statement(ssn)
    second.evict(task, "reclaim", "test")
    second.pipeline(task, 0)
    assert (task.status, task.node) == (PodStatus.PIPELINED, 1)
    second.commit()
    d = ssn.decisions
    assert [(e.pod, e.node) for e in d.evictions] == [("r0-0", "n0")]
    assert [(p.pod, p.node) for p in d.pipelines] == [("r0-0", "n1")]
    third = Statement(ssn)
    third.evict(task, "reclaim", "test")
    third.pipeline(task, 2)  # a node it never ran on: a real move
    assert (task.status, task.node, sorted(task.left_on)) == (PodStatus.PIPELINED, 2, [0, 1])
    third.rollback(0)
    assert (task.status, task.node, task.left_on) == (PodStatus.PIPELINED, 1, {0: []})


def test_share_moved_to_another_device_of_its_own_node_keeps_its_old_device_releasing() -> None:
    """KAI's `Statement.Pipeline` of a share onto other devices of the node it runs on
    (`ConsolidateSharedPodInfoToDifferentGPU`) adds the pipelined copy without taking the pod off
    its old device: until the pod is deleted that device is releasing, not idle, as for a victim
    moved to another node. A rollback restores the node exactly."""
    w = World().queue("q0").node("n0", 4)
    w.job("s", "q0")
    w.snapshot.pods[-1] = Pod("s-0", "s-0", "ns", "s", PodStatus.PENDING, cpu_milli=100, memory=GIB,
                              gpu=GpuRequest(portion_milli=500))
    ssn = open_session(w.snapshot, SchedulerConfig(actions=()))
    task = ssn.tasks["s-0"]
    first = Statement(ssn)
    first.allocate(task, 0, ["0"])
    first.commit()
    assert ssn.nodes.whole_free(0) == (3, 0)
    before = state(ssn)
    move = Statement(ssn)
    move.evict(task, "reclaim", "test")
    move.pipeline(task, 0, ["1"])
    assert (task.status, task.node, task.groups) == (PodStatus.PIPELINED, 0, ["1"])
    # Device 0 still holds the releasing pod (+1 releasing), device 1 waits for it (-1): 3 idle,
    # not 4 - no device is free for a whole-GPU pod beyond the three untouched ones.
    assert ssn.nodes.whole_free(0) == (3, 0)
    share = ssn.shared_mib(task, 0)
    old, new = ssn.nodes.groups[0]["0"], ssn.nodes.groups[0]["1"]
    assert (old.used, old.releasing, new.used, new.allocated) == (share, share, share, 0)
    move.rollback(0)
    assert same(state(ssn), before)
