"""KAI's minSubGroup: N of M child subgroups must be placeable (docs/developer/designs/min-subgroups)."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.kai.crds import podgroup_from
from shoal.kai.nodes import node_from
from shoal.kai.pods import pod_from
from shoal.model import ClusterSnapshot, Queue

from .test_kube_constraints import node


def gang(min_subgroup: int | None, replicas: dict[str, int], gpus: int, nested: bool = False) -> ClusterSnapshot:
    """A PodGroup with one leaf subgroup per replica (min 2 pods each), optionally under a parent."""
    sub: list[dict[str, Any]] = []
    if nested:
        sub.append({"name": "prefill", **({"minSubGroup": min_subgroup} if min_subgroup is not None else {})})
    sub += [{"name": r, "minMember": 2, **({"parent": "prefill"} if nested else {})} for r in replicas]
    spec: dict[str, Any] = {"queue": "default-queue", "subGroups": sub}
    if min_subgroup is not None and not nested:
        spec["minSubGroup"] = min_subgroup
    pg = podgroup_from({"metadata": {"name": "inf", "namespace": "team", "uid": "pg"}, "spec": spec}, {})
    pg.uid = "team/inf"
    snap = ClusterSnapshot(now=1e9, nodes=[node_from(node(f"n{i}", **{"nvidia.com/gpu": "1"})) for i in range(gpus)],
                           queues=[Queue("default-queue")], podgroups=[pg])
    for r, count in replicas.items():
        for k in range(count):
            obj = {"metadata": {"name": f"{r}-{k}", "namespace": "team", "uid": f"{r}-{k}",
                                "labels": {"kai.scheduler/subgroup-name": r}},
                   "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
                   "status": {"phase": "Pending"}}
            snap.pods.append(pod_from(obj, "team/inf"))
    return snap


def placed(snap: ClusterSnapshot) -> list[str]:
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    return sorted(b.pod.split("-")[0] for b in result.decisions.binds)


@pytest.mark.parametrize("min_subgroup, replicas, gpus, expected", [
    pytest.param(None, {"p0": 2, "p1": 2, "p2": 2}, 4, [], id="without minSubGroup every subgroup is needed"),
    pytest.param(2, {"p0": 2, "p1": 2, "p2": 2}, 4, ["p0", "p0", "p1", "p1"], id="2 of 3 replicas fit: they run"),
    pytest.param(3, {"p0": 2, "p1": 2, "p2": 2}, 4, [], id="3 of 3 needed, room for 2: nothing runs"),
    pytest.param(2, {"p0": 2, "p1": 1, "p2": 2}, 6, ["p0", "p0", "p2", "p2"],
                 id="a replica short of pods does not block the gang (ready with 2 of 3)"),
    pytest.param(2, {"p0": 2, "p1": 1, "p2": 1}, 6, [], id="only 1 replica has its pods: not ready"),
])
def test_min_subgroup(min_subgroup: int | None, replicas: dict[str, int], gpus: int, expected: list[str]) -> None:
    assert placed(gang(min_subgroup, replicas, gpus)) == expected


def test_min_subgroup_of_a_parent_subgroup() -> None:
    assert placed(gang(2, {"p0": 2, "p1": 2, "p2": 2}, 4, nested=True)) == ["p0", "p0", "p1", "p1"]
    assert placed(gang(None, {"p0": 2, "p1": 2, "p2": 2}, 4, nested=True)) == []
