"""Owner-chain resolution, pod -> (PodGroup, subgroup) assignment and the PodGroup manifest."""

from __future__ import annotations

from typing import Any

import pytest
from workload_fixtures import load, make_pod

from shoal.workloads import (
    OwnerKey,
    WorkloadError,
    derive_podgroups,
    pod_assignment,
    pod_metadata_patch,
    resolve_owner_chain,
)


def _store(*objs: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def test_resolve_chain_deployment() -> None:
    rs, dep = load("deployment-chain.yaml")
    pod = make_pod("nginx-1", "web", owner=rs)
    calls: list[OwnerKey] = []
    store = _store(rs, dep)

    def lookup(key: OwnerKey) -> dict[str, Any] | None:
        calls.append(key)
        return store.get((key.kind, key.name))

    assert resolve_owner_chain(pod, lookup) == [rs, dep]
    assert calls[0] == OwnerKey("apps/v1", "ReplicaSet", rs["metadata"]["name"], "web", rs["metadata"]["uid"])


def test_resolve_chain_prefers_the_controller_reference() -> None:
    job, cron = load("cronjob-chain.yaml")
    pod = make_pod("hello-x", owner=job)
    pod["metadata"]["ownerReferences"].insert(0, {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"})
    assert resolve_owner_chain(pod, lambda k: _store(job, cron).get((k.kind, k.name))) == [job, cron]


def test_resolve_chain_stops_at_the_last_readable_owner() -> None:
    job, _cron = load("cronjob-chain.yaml")
    pod = make_pod("hello-x", owner=job)
    assert resolve_owner_chain(pod, lambda k: job if k.kind == "Job" else None) == [job]
    assert resolve_owner_chain(make_pod("bare"), lambda k: job) == []


def test_resolve_chain_rejects_ambiguous_owners_and_survives_cycles() -> None:
    pod = make_pod("p")
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "a/v1", "kind": "A", "name": "a"},
        {"apiVersion": "b/v1", "kind": "B", "name": "b"},
    ]
    with pytest.raises(WorkloadError, match="none is the controller"):
        resolve_owner_chain(pod, lambda k: None)
    a = {
        "apiVersion": "x/v1",
        "kind": "A",
        "metadata": {
            "name": "a",
            "ownerReferences": [{"apiVersion": "x/v1", "kind": "A", "name": "a", "controller": True}],
        },
    }
    assert resolve_owner_chain(make_pod("p", owner=a), lambda k: a) == [a]


@pytest.mark.parametrize(
    ("data", "labels", "expected"),
    [
        pytest.param(
            "pytorch-segments.yaml",
            {"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "9"},
            ("pg-llm-pretrain-5b0f3f3e-0000-4000-8000-000000000002", "worker-2"),
            id="PyTorch worker 9 with segments of 4 -> worker-2",
        ),
        pytest.param(
            "pytorch-segments.yaml",
            {"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"},
            ("pg-llm-pretrain-5b0f3f3e-0000-4000-8000-000000000002", "master"),
            id="PyTorch master",
        ),
        pytest.param(
            "raycluster-multi.yaml",
            {"ray.io/node-type": "worker", "ray.io/group": "tpu-group"},
            ("pg-raycluster-complete-5b0f3f3e-0000-4000-8000-000000000009", "tpu-group"),
            id="Ray worker",
        ),
        pytest.param(
            "lws-segments.yaml",
            {"leaderworkerset.sigs.k8s.io/group-index": "1", "leaderworkerset.sigs.k8s.io/worker-index": "6"},
            ("pg-leaderworkerset-multi-template-5b0f3f3e-0000-4000-8000-000000000015-group-1", "segment-1"),
            id="LWS worker 6 of group 1 -> segment-1",
        ),
        pytest.param(
            "lws-segments.yaml",
            {"leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            ("pg-leaderworkerset-multi-template-5b0f3f3e-0000-4000-8000-000000000015-group-0", "leader"),
            id="LWS leader -> leader under segment-0",
        ),
        pytest.param(
            "jobset-inorder.yaml",
            {"jobset.sigs.k8s.io/replicatedjob-name": "workers"},
            ("pg-startup-driver-ready-5b0f3f3e-0000-4000-8000-000000000013-workers", None),
            id="InOrder JobSet pod -> its replicatedJob's PodGroup",
        ),
        pytest.param(
            "tfjob.yaml",
            {},
            ("pg-dist-mnist-for-e2e-test-5b0f3f3e-0000-4000-8000-000000000005", None),
            id="no subgroups",
        ),
    ],
)
def test_pod_assignment(data: str, labels: dict[str, str], expected: tuple[str, str | None]) -> None:
    specs = derive_podgroups(load(data), None)
    assert pod_assignment(make_pod("p", labels=labels), specs) == expected


def test_pod_assignment_without_a_match_is_an_error() -> None:
    specs = derive_podgroups(load("pytorch-segments.yaml"), None)
    with pytest.raises(WorkloadError, match="matches no subgroup"):
        pod_assignment(make_pod("p", labels={}), specs)


@pytest.mark.parametrize("labels", [pytest.param({}, id="no ray.io/group label"),
                                    pytest.param({"ray.io/group": "parked-group"}, id="an unknown group")])
def test_ray_pod_without_its_group_still_joins_the_cluster_gang(labels: dict[str, str]) -> None:
    """KAI's Ray grouper logs a pod it cannot put in a subgroup and goes on: the pod keeps the
    cluster's PodGroup (no subgroup label) instead of being an error."""
    specs = derive_podgroups(load("raycluster-multi.yaml"), None)
    assert pod_assignment(make_pod("p", labels=labels), specs) == (specs[0].name, None)


def test_pod_metadata_patch() -> None:
    specs = derive_podgroups(load("raycluster-multi.yaml"), None)
    patch = pod_metadata_patch(make_pod("p", labels={"ray.io/group": "headgroup"}), specs)
    assert patch == {
        "metadata": {
            "annotations": {"pod-group-name": "pg-raycluster-complete-5b0f3f3e-0000-4000-8000-000000000009"},
            "labels": {"kai.scheduler/subgroup-name": "headgroup"},
        }
    }


def test_manifest_shape() -> None:
    spec = derive_podgroups(load("pytorch-segments.yaml"), None)[0]
    manifest = spec.to_manifest()
    assert manifest["apiVersion"] == "scheduling.run.ai/v2alpha2" and manifest["kind"] == "PodGroup"
    assert manifest["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "llm-pretrain",
            "uid": "5b0f3f3e-0000-4000-8000-000000000002",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert manifest["spec"]["minMember"] == 11 and manifest["spec"]["queue"] == "research"
    assert manifest["spec"]["priorityClassName"] == "train" and "preemptibility" not in manifest["spec"]
    assert manifest["spec"]["topologyConstraint"] == {
        "topology": "cluster-topology",
        "requiredTopologyLevel": "zone",
    }
    assert manifest["spec"]["subGroups"][2] == {
        "name": "worker-0",
        "minMember": 4,
        "parent": "worker",
        "topologyConstraint": {"topology": "cluster-topology", "requiredTopologyLevel": "rack"},
    }
    assert manifest["spec"]["subGroups"][0] == {"name": "master", "minMember": 1}
