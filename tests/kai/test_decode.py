"""Kubernetes objects -> model: KAI annotations, queue units, node GPU memory, statuses, pod groups."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.kai.crds import implicit_podgroup, podgroup_from, queue_from
from shoal.kai.nodes import node_from
from shoal.kai.pods import gpu_request, pod_from, pod_status
from shoal.kai.units import ConvertError
from shoal.model.pod import GpuRequest
from shoal.model.status import PodStatus


def pod_obj(annotations: dict[str, str] | None = None, gpus: int = 0, node: str | None = None,
            phase: str = "Pending", labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": "250m", "memory": "1Gi"}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": res}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {},
                         "labels": labels or {}, "creationTimestamp": "2026-01-01T00:00:00Z", **meta},
            "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(("annotations", "whole", "expected"), [
    pytest.param({}, 2, GpuRequest(whole=2), id="whole GPUs from the resource"),
    pytest.param({"gpu-fraction": "0.5"}, 0, GpuRequest(portion_milli=500), id="half a GPU"),
    pytest.param({"gpu-fraction": "0.333"}, 0, GpuRequest(portion_milli=330), id="fraction rounded to 0.01"),
    pytest.param({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, 0,
                 GpuRequest(portion_milli=500, devices=2), id="fraction of two devices"),
    pytest.param({"gpu-fraction": "1"}, 0, GpuRequest(whole=1), id="fraction 1 is one whole GPU"),
    pytest.param({"gpu-memory": "2000"}, 0, GpuRequest(memory_mib=2000), id="GPU memory in MiB"),
])
def test_gpu_request(annotations: dict[str, str], whole: int, expected: GpuRequest) -> None:
    assert gpu_request(annotations, whole) == expected


@pytest.mark.parametrize(("annotations", "whole", "needle"), [
    pytest.param({"gpu-fraction": "abc"}, 0, "not a number", id="fraction not a number"),
    pytest.param({"gpu-fraction": "1.7"}, 0, "(0, 1]", id="fraction above one"),
    pytest.param({"gpu-fraction": "0"}, 0, "(0, 1]", id="fraction zero"),
    pytest.param({"gpu-fraction": "-0.5"}, 0, "(0, 1]", id="fraction negative"),
    pytest.param({"gpu-fraction": "nan"}, 0, "(0, 1]", id="fraction NaN"),
    pytest.param({"gpu-fraction": "0.001"}, 0, "below 0.01", id="fraction rounds to zero"),
    pytest.param({"gpu-fraction": "0.5"}, 1, "nvidia.com/gpu", id="fraction plus whole GPUs"),
    pytest.param({"gpu-memory": "lots"}, 0, "gpu-memory", id="memory not an integer"),
    pytest.param({"gpu-memory": "-5"}, 0, "positive", id="memory negative"),
    pytest.param({"gpu-fraction": "0.5", "gpu-memory": "10"}, 0, "mutually exclusive", id="both annotations"),
    pytest.param({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "two"}, 0, "not an integer",
                 id="devices not an integer"),
    pytest.param({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, 0, "at least 1", id="zero devices"),
])
def test_gpu_request_rejects_bad_annotations(annotations: dict[str, str], whole: int, needle: str) -> None:
    with pytest.raises(ConvertError, match=None) as err:
        gpu_request(annotations, whole)
    assert needle in str(err.value)


@pytest.mark.parametrize(("obj", "status"), [
    pytest.param(pod_obj(), PodStatus.PENDING, id="unbound pod is Pending"),
    pytest.param(pod_obj(node="n1"), PodStatus.BOUND, id="bound, not yet running"),
    pytest.param(pod_obj(node="n1", phase="Running"), PodStatus.RUNNING, id="running"),
    pytest.param(pod_obj(node="n1", phase="Succeeded"), PodStatus.SUCCEEDED, id="succeeded"),
    pytest.param(pod_obj(node="n1", phase="Running", deletionTimestamp="2026-01-01T00:00:00Z"),
                 PodStatus.RELEASING, id="being deleted on a node"),
    pytest.param({**pod_obj(), "spec": {"schedulingGates": [{"name": "g"}]}}, PodStatus.GATED, id="gated"),
])
def test_pod_status(obj: dict[str, Any], status: PodStatus) -> None:
    assert pod_status(obj) == status


def test_pod_requests_sum_containers_max_init_and_read_shared_groups() -> None:
    obj = pod_obj({"gpu-fraction": "0.5"}, node="n1", phase="Running", labels={"runai-gpu-group": "3"})
    obj["spec"]["containers"].append({"name": "side", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}})
    obj["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    pod = pod_from(obj, "job")
    assert (pod.cpu_milli, pod.memory) == (4000, 2 * 1024**3)
    assert pod.gpu == GpuRequest(portion_milli=500)
    assert pod.gpu_groups == ["3"]
    assert pod.creation == 1767225600.0


def test_pending_pod_ignores_stale_gpu_group_label() -> None:
    pod = pod_from(pod_obj({"gpu-fraction": "0.5"}, labels={"runai-gpu-group": "3"}), "job")
    assert pod.gpu_groups == []


def test_bad_quantity_is_a_convert_error() -> None:
    obj = pod_obj()
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(ConvertError, match=r"resources\.cpu"):
        pod_from(obj, "job")


def queue_obj(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "q", "uid": "qu"}, "spec": {"parentQueue": "parent", "resources": resources}}


def test_queue_units_gpu_devices_cpu_millicores_memory_megabytes() -> None:
    q = queue_from(queue_obj(gpu={"quota": 2.5, "limit": -1, "overQuotaWeight": 2},
                             cpu={"quota": 1500, "limit": 3000}, memory={"quota": 1024}))
    assert (q.gpu.quota, q.gpu.limit, q.gpu.over_quota_weight) == (2500, -1, 2.0)
    assert (q.cpu.quota, q.cpu.limit) == (1500, 3000)
    assert q.memory.quota == 1024 * 10**6
    assert q.parent == "parent" and q.priority == 100


@pytest.mark.parametrize(("resources", "needle"), [
    pytest.param({"gpu": {"quota": -0.5}}, "spec.resources.gpu.quota: -0.5 is negative", id="negative quota"),
    pytest.param({"cpu": {"limit": -3}}, "spec.resources.cpu.limit", id="negative limit"),
    pytest.param({"gpu": {"overQuotaWeight": -1}}, "overQuotaWeight", id="negative weight"),
    pytest.param({"gpu": {"quota": "two"}}, "is not a number", id="quota not a number"),
    pytest.param({"gpu": {"quota": 4, "limit": 2}}, "limit 2 is below quota 4", id="limit below quota"),
    pytest.param({"gpu": ["quota"]}, "expected a mapping", id="resource not a mapping"),
])
def test_invalid_queue_is_a_convert_error(resources: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConvertError) as err:
        queue_from(queue_obj(**resources))
    assert needle in str(err.value)


def test_node_gpu_memory_label_and_conditions() -> None:
    obj = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.memory": "40960"}},
           "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
           "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4", "pods": "110",
                                      "ephemeral-storage": "100Gi"},
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    node = node_from(obj)
    # Ephemeral storage is kept: kube-scheduler's NodeResourcesFit checks it.
    assert node.allocatable == {"cpu": 8000, "memory": 32 * 1024**3, "nvidia.com/gpu": 4, "pods": 110,
                                "ephemeral-storage": 100 * 1024**3}
    assert (node.gpu_memory_mib, node.gpu_memory_synced, node.ready) == (40900, True, True)
    assert node.taints[0].key == "k"
    obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    del obj["metadata"]["labels"]["nvidia.com/gpu.memory"]
    node = node_from(obj)
    assert (node.gpu_memory_mib, node.gpu_memory_synced, node.ready) == (100, False, False)


def test_podgroup_leaf_subgroups_are_pod_sets_and_priority_from_class() -> None:
    obj = {"metadata": {"name": "pg", "namespace": "ns", "uid": "pgu",
                        "annotations": {"kai.scheduler/last-start-timestamp": "2026-01-01T00:00:10Z"}},
           "spec": {"minMember": 3, "queue": "team", "priorityClassName": "build",
                    "subGroups": [{"name": "root", "minMember": 9}, {"name": "a", "parent": "root", "minMember": 2},
                                  {"name": "b", "parent": "Root", "minMember": 0}]}}
    pg = podgroup_from(obj, {"build": 100})
    assert [(s.name, s.min_available, s.parent) for s in pg.pod_sets] == [("a", 2, "root"), ("b", 1, "root")]
    assert [s.name for s in pg.sub_group_sets] == ["root"]
    assert (pg.queue, pg.priority, pg.preemptible) == ("team", 100, False)
    assert pg.last_start_time == 1767225610.0


@pytest.mark.parametrize(("spec", "needle"), [
    pytest.param({"minMember": -1}, "spec.minMember", id="negative min member"),
    pytest.param({"preemptibility": "sometimes"}, "spec.preemptibility", id="unknown preemptibility"),
])
def test_invalid_podgroup(spec: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConvertError, match=needle):
        podgroup_from({"metadata": {"name": "pg", "namespace": "ns"}, "spec": spec}, {})


def test_implicit_podgroup_queue_label_default_and_priority() -> None:
    pg = implicit_podgroup(pod_obj(labels={"kai.scheduler/queue": "team"}), {"train": 50}, None)
    assert (pg.uid, pg.queue, pg.priority, pg.preemptible, pg.min_member) == ("pod:u1", "team", 50, True, 1)
    obj = pod_obj()
    obj["spec"]["priorityClassName"] = "inference"
    pg = implicit_podgroup(obj, {"inference": 125}, None)
    assert (pg.queue, pg.priority, pg.preemptible) == ("default-queue", 125, False)
    assert implicit_podgroup(pod_obj(), {}, 7).priority == 7


@pytest.mark.parametrize("spec, status, mark, blocked", [
    pytest.param({}, {}, True, False, id="defaults: mark Unschedulable, no backoff"),
    pytest.param({"markUnschedulable": False}, {}, False, False, id="markUnschedulable false"),
    pytest.param({"schedulingBackoff": 1}, {}, True, False, id="backoff 1, never failed: tried"),
    pytest.param({"schedulingBackoff": 1}, {"schedulingConditions": [{"type": "UnschedulableOnNodePool",
                                                                       "nodePool": "default"}]},
                 True, True, id="backoff 1 after a failure: not tried again"),
    pytest.param({"schedulingBackoff": -1}, {"schedulingConditions": [{"nodePool": "default"}]},
                 True, False, id="backoff -1: always tried"),
])
def test_podgroup_backoff_and_mark_unschedulable(spec: dict[str, Any], status: dict[str, Any], mark: bool,
                                                 blocked: bool) -> None:
    obj = {"metadata": {"name": "pg", "namespace": "ns", "uid": "u"},
           "spec": {"minMember": 1, "queue": "q", **spec}, "status": status}
    pg = podgroup_from(obj, {})
    assert (pg.mark_unschedulable, pg.backoff_blocked) == (mark, blocked)


@pytest.mark.parametrize("spec", [{"schedulingBackoff": 2}, {"markUnschedulable": "no"}])
def test_podgroup_bad_backoff_fields_are_convert_errors(spec: dict[str, Any]) -> None:
    with pytest.raises(ConvertError):
        podgroup_from({"metadata": {"name": "pg"}, "spec": {"minMember": 1, **spec}}, {})
