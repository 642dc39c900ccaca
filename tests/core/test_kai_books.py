"""`kai_books`: KAI's final node accounting checked against its own final placements."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.conformance import kai_books, runner

#: Final statuses of the pods: two 1-GPU pods hold node0 and a 2-GPU pod there is releasing; by
#: default three half-GPU shares end pipelined onto node1 (2 or 3 devices: 1 to 2 GPUs left free).
FINAL = {"whole-0": ("Running", "node0"), "whole-1": ("Running", "node0"), "gone-0": ("Releasing", "node0")}


def _job(name: str, gpus: float, count: int) -> dict[str, Any]:
    return {"name": name, "queue_name": "q", "priority": 50, "required_gpus_per_task": gpus,
            "tasks": [{"name": f"{name}-{i}", "state": "Running", "node_name": "node0"} for i in range(count)]}


def _request(gpus: float) -> dict[str, Any]:
    share = {"gpu_fraction": gpus, "gpu_fraction_devices": 1} if gpus < 1 else {"gpus": int(gpus)}
    return {"milli_cpu": 1000, "memory": 10**9, "pods": 1, **share}


def scenario(resources: dict[str, tuple[float, float]] | None, shares: int = 3) -> dict[str, Any]:
    """A decided two-node scenario; `resources`: node -> (idle, releasing GPUs) KAI ended with;
    `shares` half-GPU pods end pipelined on node1."""
    jobs = [_job("whole", 1, 2), _job("gone", 2, 1), _job("share", 0.5, shares)]
    node = {"allocatable": {"milli_cpu": 64000, "memory": 256 * 10**9, "gpus": 4, "pods": 110}}
    final = {**FINAL, **{f"share-{i}": ("Pipelined", "node1") for i in range(shares)}}
    expected: dict[str, Any] = {"tasks": {uid: {"status": s, "node_name": n} for uid, (s, n) in final.items()}}
    if resources is not None:
        expected["nodes_resources"] = {n: {"idle_gpus": i, "releasing_gpus": r} for n, (i, r) in resources.items()}
    return {
        "schema_version": 1, "id": "books", "name": "books", "kind": "reclaim", "actions": ["reclaim"],
        "nodes": [{"name": "node0", "gpus": 4}, {"name": "node1", "gpus": 4}],
        "queues": [{"name": "q", "deserved_gpus": 8}], "jobs": jobs,
        "derived": {
            "nodes": {"node0": node, "node1": node},
            "queue_hierarchy": [{"name": "q", "parent_queue": None, "priority": None, "creation_offset_minutes": 0,
                                 "resources": {r: {"quota": 8 if r == "gpu" else -1, "limit": -1,
                                                   "over_quota_weight": 1} for r in ("gpu", "cpu", "memory")}}],
            "jobs": {j["name"]: {"pod_sets": [{"name": "default", "min_available": len(j["tasks"])}],
                                 "task_request": _request(j["required_gpus_per_task"])} for j in jobs},
        },
        "expected": expected,
    }


def breaks(resources: dict[str, tuple[float, float]] | None, shares: int = 3) -> list[kai_books.Break]:
    return kai_books.node_accounting_breaks(runner.parse(scenario(resources, shares), "books"))


@pytest.mark.parametrize("node1", [(2, 0), (1, 0), (3, -1), (0, 1)])
def test_accounting_that_the_pods_can_give_passes(node1: tuple[float, float]) -> None:
    # node0: 4 GPUs - 2 held = 2 free (the releasing pod's GPUs count as free); node1: 1 to 2.
    assert breaks({"node0": (0, 2), "node1": node1}) == []


def test_a_node_below_what_its_pods_hold_is_reported_with_its_gap() -> None:
    got = breaks({"node0": (0, 2), "node1": (0, -8)})
    assert [(b.node, b.gap, b.low, b.high) for b in got] == [("node1", 9, 1, 2)]
    assert got[0].pods == ("share-0", "share-1", "share-2")
    assert "idle 0, releasing -8" in got[0].describe() and "leave 1 to 2 free" in got[0].describe()


def test_breaks_come_largest_gap_first() -> None:
    got = breaks({"node0": (4, 2), "node1": (0, -8)})  # node0: 6 free where 2 can be
    assert [(b.node, b.gap) for b in got] == [("node1", 9), ("node0", 4)]


def test_the_touched_nodes_are_the_broken_ones_a_differing_pod_lands_on() -> None:
    got = breaks({"node0": (4, 2), "node1": (0, -8)})
    assert kai_books.broken_nodes_touched(got, {"share-0": ("node1", "node0"), "whole-0": (None, None)}) == [
        "node1", "node0"]
    assert kai_books.broken_nodes_touched(got, {"whole-1": ("node0", "node0")}) == ["node0"]


def test_a_scenario_decided_without_node_resources_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"books: .*--node-resources"):
        breaks(None)


def test_shares_on_more_devices_than_the_node_has_still_leave_no_less_than_nothing() -> None:
    # Six half-GPU shares on 4 GPUs: 3 to 4 devices, so 0 or 1 GPU free - never below 0.
    assert breaks({"node0": (0, 2), "node1": (0, 0)}, shares=6) == []
    got = breaks({"node0": (0, 2), "node1": (1, -2)}, shares=6)
    assert [(b.node, b.gap, b.low, b.high) for b in got] == [("node1", 1, 0, 1)]


def test_a_pod_without_its_final_node_is_refused_by_name() -> None:
    data = scenario({"node0": (0, 2), "node1": (2, 0)})
    del data["expected"]["tasks"]["whole-0"]["node_name"]  # as when KAI's runs varied on it
    with pytest.raises(ValueError, match=r"expected.tasks.whole-0 lacks its final status or node"):
        kai_books.node_accounting_breaks(runner.parse(data, "books"))
