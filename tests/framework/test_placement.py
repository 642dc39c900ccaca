"""Session open accounts running pods in bulk (framework.placement); the result must be exactly
what placing every pod one by one gives: node matrices, shared GPU groups, each task's node,
groups, portion and accepted GPUs."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import shoal.framework.placement as placement
from shoal.framework.config import SchedulerConfig
from shoal.framework.session import Session
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

STATUSES = (PodStatus.RUNNING, PodStatus.BOUND, PodStatus.RELEASING, PodStatus.PIPELINED, PodStatus.ALLOCATED)


def world(seed: int) -> ClusterSnapshot:
    rng = random.Random(seed)
    nodes = [Node(f"n{i}", {"cpu": 64_000, "memory": 512 << 30, "pods": 110, "nvidia.com/gpu": 8},
                  gpu_memory_mib=rng.choice((0, 100, 40_960))) for i in range(6)]
    snap = ClusterSnapshot(now=100.0, nodes=nodes, queues=[Queue("q", gpu=QueueResource(-1, -1, 1.0))])
    snap.podgroups.append(PodGroup("g", "g", "ns", "q", 50, True, 0.0, min_member=1))
    for k in range(rng.randint(20, 60)):
        node = rng.choice(nodes).name
        if rng.random() < 0.4:
            gpu = GpuRequest(whole=rng.randint(0, 2))
            groups: list[str] = []
        elif rng.random() < 0.5:
            gpu = GpuRequest(portion_milli=rng.choice((250, 500)), devices=rng.choice((1, 1, 2)))
            groups = [f"d{rng.randint(0, 3)}" for _ in range(gpu.devices)] if rng.random() < 0.85 else []
            groups = list(dict.fromkeys(groups))
        else:
            gpu = GpuRequest(memory_mib=rng.choice((1000, 4000)))
            groups = [f"d{rng.randint(0, 3)}"] if rng.random() < 0.85 else []
        snap.pods.append(Pod(f"p{k}", f"p{k:03d}", "ns", "g", rng.choice(STATUSES), 100, 1 << 20, gpu=gpu,
                             node=node, gpu_groups=groups))
    return snap


def state(ssn: Session) -> dict[str, Any]:
    n = ssn.nodes
    return {"idle": n.idle.tolist(), "used": n.used.tolist(), "releasing": n.releasing.tolist(),
            "groups": [{k: (g.used, g.allocated, g.releasing) for k, g in groups.items()} for groups in n.groups],
            "version": n.version.tolist(), "placed": ssn.placed.tolist(), "releasing_tasks": ssn.releasing.tolist(),
            "tasks": {t.uid: (t.node, t.groups, t.portion, t.accepted_gpu, t.status) for t in ssn.task_list}}


def one_by_one(ssn: Any, tasks: list[Any]) -> None:
    for t in tasks:
        ssn.place(t, ssn.nodes.index[t.pod.node], t.status, list(t.pod.gpu_groups))


@pytest.mark.parametrize("seed", range(30))
def test_bulk_placement_equals_one_by_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = world(seed)
    bulk = state(Session(snap, SchedulerConfig()))
    monkeypatch.setattr(placement, "_place_shared", one_by_one)
    single = state(Session(snap, SchedulerConfig()))
    assert bulk == single
    assert np.asarray(bulk["placed"]).max() >= 0  # something was placed at all


def test_fresh_groups_keep_their_names_beside_bulk_pods() -> None:
    """A running shared pod without known groups on a node: its node's pods are placed one by one."""
    node = Node("n0", {"cpu": 64_000, "memory": 512 << 30, "pods": 110, "nvidia.com/gpu": 8}, gpu_memory_mib=40_960)
    snap = ClusterSnapshot(now=1.0, nodes=[node], queues=[Queue("q")])
    snap.podgroups.append(PodGroup("g", "g", "ns", "q", 50, True, 0.0, min_member=1))
    half = GpuRequest(portion_milli=500)
    snap.pods += [Pod("a", "a", "ns", "g", PodStatus.RUNNING, gpu=half, node="n0", gpu_groups=["0"]),
                  Pod("b", "b", "ns", "g", PodStatus.RUNNING, gpu=half, node="n0")]
    ssn = Session(snap, SchedulerConfig())
    assert ssn.tasks["b"].groups == ["1-b"]  # "0" was taken by a when b was named (pod-name order)
