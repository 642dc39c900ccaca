"""A watch event that changes only a pod's placement (bound, started, ending) is applied by
`with_placement` instead of decoding the pod again: it must give what `pod_from` gives."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shoal.kai.pods import mutable_fields, pod_from, with_placement
from shoal.kube.cache import ClusterCache
from shoal.model.status import PodStatus


def _pod(annotations: dict[str, str], labels: dict[str, str], gpus: int = 0) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"kai.scheduler/queue": "q", **labels}, "annotations": annotations},
            "spec": {"schedulerName": "shoal", "tolerations": [{"key": "k", "operator": "Exists"}],
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"},
                                                                 "limits": limits}}]},
            "status": {"phase": "Pending"}}


def _steps(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The versions a bound pod goes through: bound, running, terminating."""
    out = []
    obj = copy.deepcopy(obj)
    obj["spec"]["nodeName"] = "n1"
    out.append(copy.deepcopy(obj))
    obj["status"] = {"phase": "Running", "startTime": "2026-01-01T00:01:00Z", "nominatedNodeName": "n1"}
    out.append(copy.deepcopy(obj))
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:02:00Z"
    out.append(copy.deepcopy(obj))
    return out


@pytest.mark.parametrize("annotations,labels,gpus", [
    pytest.param({}, {}, 1, id="whole-gpu"),
    pytest.param({"gpu-fraction": "0.5"}, {"runai-gpu-group": "g1"}, 0, id="shared-gpu-with-group"),
    pytest.param({"pod-group-name": "pg"}, {}, 0, id="cpu-only"),
])
def test_with_placement_equals_a_full_decode(annotations: dict[str, str], labels: dict[str, str], gpus: int) -> None:
    first = _pod(annotations, labels, gpus)
    prev = pod_from(first, "ns/job")
    statuses = []
    for obj in _steps(first):
        assert mutable_fields(obj)[1] == mutable_fields(first)[1]
        assert mutable_fields(obj)[0] != mutable_fields(first)[0]
        fast, full = with_placement(prev, obj), pod_from(obj, "ns/job")
        assert fast == full
        statuses.append(fast.status)
        prev = fast
    assert statuses == [PodStatus.BOUND, PodStatus.RUNNING, PodStatus.RELEASING]


def test_the_cache_decodes_again_only_when_more_than_the_placement_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    import shoal.kube.cache as cache_mod

    calls = []
    real = cache_mod.pod_from
    monkeypatch.setattr(cache_mod, "pod_from", lambda obj, job: calls.append(job) or real(obj, job))
    cache = ClusterCache(scheduler_name="shoal", clock=lambda: 0.0)
    first = _pod({}, {}, 1)
    cache.on_pod("ADDED", None, first)
    old = first
    for obj in _steps(first):
        cache.on_pod("MODIFIED", old, obj)
        old = obj
    assert len(calls) == 1 and cache.pods["u1"] == real(old, calls[0])
    bigger = copy.deepcopy(old)
    bigger["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    cache.on_pod("MODIFIED", old, bigger)
    assert len(calls) == 2 and cache.pods["u1"].cpu_milli == 500
