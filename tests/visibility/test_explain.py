"""The explanation of a pending gang names its cause and what would make it start."""

from __future__ import annotations

import pytest

from shoal.cycle import run_cycle
from shoal.model import ClusterSnapshot
from shoal.visibility.report import build_report, pending_order

from . import scenarios as sc


def _entry(snap: ClusterSnapshot, uid: str) -> dict:
    r = run_cycle(snap)
    report = build_report(r.session, r.decisions)
    r.release()
    return next(e for e in report["pending"] if e["uid"] == uid)


@pytest.mark.parametrize(("make", "uid", "kind", "words", "suggestion"), [
    pytest.param(sc.limit_blocked, "ns/waits", "queue-limit", "queue team-a is at its limit of 8 GPUs",
                 "free 4 GPUs in queue team-a", id="a queue at its GPU limit is named with the limit"),
    pytest.param(sc.fragmented, "ns/wide", "fragmentation", "at most 2 GPUs are free on any node",
                 "free another 2 GPUs on node n0", id="free GPUs spread over nodes are called fragmentation"),
    pytest.param(sc.topology_blocked, "ns/pair", "topology", "must run in one topology.kubernetes.io/rack",
                 "free room for 1 more pod(s) in topology.kubernetes.io/rack=rack-0",
                 id="a required rack no rack can hold is named"),
])
def test_cause_and_remedy(make, uid, kind, words, suggestion) -> None:
    e = _entry(make(), uid)
    assert e["blockers"][0]["kind"] == kind
    assert words in e["blockers"][0]["text"]
    assert words in e["summary"]
    assert any(suggestion in s for s in e["suggestions"]), e["suggestions"]


def test_node_groups_count_every_node_once() -> None:
    e = _entry(sc.fragmented(), "ns/wide")
    assert sum(g["nodes"] for g in e["nodeGroups"]) == 4
    assert e["nodeGroups"][0]["reason"].startswith("insufficient nvidia.com/gpu (need 4")


def test_a_gang_partly_fitting_suggests_a_smaller_minimum() -> None:
    snap = ClusterSnapshot(now=sc.NOW, nodes=[sc.node("n0"), sc.node("n1")], queues=[sc.queue("q")])
    sc.gang(snap, "three", "q", 3, 8)  # three 8-GPU pods, two nodes
    e = _entry(snap, "ns/three")
    kinds = [b["kind"] for b in e["blockers"]]
    assert kinds == ["resources", "gang"]
    assert any("minMember <= 2 (now 3)" in s for s in e["suggestions"])


def test_pending_order_is_allocate_order_and_positions_count_per_queue() -> None:
    snap = ClusterSnapshot(now=sc.NOW, nodes=[sc.node("n0", gpus=1)], queues=[sc.queue("a"), sc.queue("b")])
    sc.gang(snap, "a-old", "a", 1, 4, age=300)
    sc.gang(snap, "b-1", "b", 1, 4, age=200)
    sc.gang(snap, "a-new", "a", 1, 4, age=100)
    sc.gang(snap, "a-high", "a", 1, 4, age=50, priority=100)
    r = run_cycle(snap)
    order = [j.uid for j in pending_order(r.session)]
    report = build_report(r.session, r.decisions)
    r.release()
    assert [e["uid"] for e in report["pending"]] == order
    a_jobs = [e for e in report["pending"] if e["queue"] == "a"]
    assert next(e["uid"] for e in a_jobs) == "ns/a-high"  # priority first inside a queue
    assert [e["queuePosition"] for e in a_jobs] == [1, 2, 3]
    assert [e["position"] for e in report["pending"]] == [1, 2, 3, 4]


def test_queue_tree_reports_fractional_and_whole_gpus() -> None:
    from shoal.model import GpuRequest, Pod, PodGroup, PodStatus

    snap = ClusterSnapshot(now=sc.NOW, nodes=[sc.node("n0")], queues=[sc.queue("dept"), sc.queue("t", parent="dept")])
    sc.gang(snap, "whole", "t", 1, 2, running_on=["n0"])
    snap.podgroups.append(PodGroup(uid="ns/half", name="half", namespace="ns", queue="t", priority=50,
                                   preemptible=True, creation=sc.NOW))
    snap.pods.append(Pod(uid="half-0", name="half-0", namespace="ns", job="ns/half", status=PodStatus.PENDING,
                         gpu=GpuRequest(portion_milli=500)))
    r = run_cycle(snap)
    report = build_report(r.session, r.decisions)
    r.release()
    by = {q["name"]: q for q in report["queues"]}
    assert [q["name"] for q in report["queues"]] == ["dept", "t"]
    assert by["t"]["gpu"]["allocatedWhole"] == 2 and by["t"]["gpu"]["allocatedFractional"] == 0.5
    assert by["dept"]["gpu"]["allocatedFractional"] == 0.5  # parents add their children up
    assert by["t"]["depth"] == 1 and by["dept"]["children"] == ["t"]
