"""Queue, priority, preemptibility, topology and metadata rules shared by all kinds (the default grouper)."""

from __future__ import annotations

from typing import Any

import pytest
from workload_fixtures import make_pod

from shoal.workloads import TopologyConstraint, derive_podgroups


def widget(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "u1",
            "labels": labels or {},
            "annotations": annotations or {},
        },
    }


@pytest.mark.parametrize(
    ("owner_labels", "pod_labels", "expected"),
    [
        pytest.param(
            {"kai.scheduler/queue": "owner-q"},
            {"kai.scheduler/queue": "pod-q"},
            "owner-q",
            id="owner queue label wins over the pod's",
        ),
        pytest.param(
            {}, {"kai.scheduler/queue": "pod-q"}, "pod-q", id="pod queue label when the owner has none"
        ),
        pytest.param({"project": "vision"}, {}, "vision", id="project label"),
        pytest.param(
            {"project": "vision"},
            {"kai.scheduler/node-pool": "a100"},
            "vision-a100",
            id="project label with the pod's node pool",
        ),
        pytest.param(
            {"project": "vision"},
            {"kai.scheduler/queue": "pod-q"},
            "pod-q",
            id="an explicit queue label beats the project convention",
        ),
        pytest.param({}, {}, "fallback-q", id="the default queue"),
    ],
)
def test_queue(owner_labels: dict[str, str], pod_labels: dict[str, str], expected: str) -> None:
    pod = make_pod("p", "ns", labels=pod_labels)
    assert derive_podgroups([widget(owner_labels)], pod, default_queue="fallback-q")[0].queue == expected


@pytest.mark.parametrize(
    ("owner_label", "pod_label", "pod_spec", "known", "expected"),
    [
        pytest.param("build", "inference", "train", None, "build", id="owner label first"),
        pytest.param("", "inference", "train", None, "inference", id="then the pod label"),
        pytest.param(
            "", "", "build-preemptible", None, "build-preemptible", id="then pod.spec.priorityClassName"
        ),
        pytest.param("", "", "", None, "train", id="else the kind default"),
        pytest.param(
            "typo",
            "",
            "inference",
            {"inference": 125, "train": 50},
            "inference",
            id="a class that does not exist is skipped",
        ),
        pytest.param("typo", "", "", {"train": 50}, "train", id="nothing existing: the kind default"),
    ],
)
def test_priority(
    owner_label: str, pod_label: str, pod_spec: str, known: dict[str, int] | None, expected: str
) -> None:
    owner = widget({"priorityClassName": owner_label} if owner_label else {})
    pod = make_pod(
        "p", "ns", labels={"priorityClassName": pod_label} if pod_label else {}, priority_class=pod_spec
    )
    assert derive_podgroups([owner], pod, priority_classes=known)[0].priority_class_name == expected


def test_default_grouper_reads_priority_through_the_whole_chain() -> None:
    lower = widget({"priorityClassName": "build"})
    top = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "ns"}}
    spec = derive_podgroups([lower, top], make_pod("p", "ns"))[0]
    assert (spec.name, spec.priority_class_name) == ("pg-g", "build")


@pytest.mark.parametrize(
    ("owner", "pod", "expected"),
    [
        pytest.param("non-preemptible", "preemptible", "non-preemptible", id="owner label first"),
        pytest.param("", "preemptible", "preemptible", id="then the pod label"),
        pytest.param("", "", "", id="unset"),
    ],
)
def test_preemptibility(owner: str, pod: str, expected: str) -> None:
    key = "kai.scheduler/preemptibility"
    spec = derive_podgroups(
        [widget({key: owner} if owner else {})], make_pod("p", "ns", labels={key: pod} if pod else {})
    )[0]
    assert spec.preemptibility == expected


def test_topology_and_copied_metadata() -> None:
    owner = widget(
        {"team": "a"},
        {
            "kai.scheduler/topology": "dc",
            "kai.scheduler/topology-preferred-placement": "rack",
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        },
    )
    spec = derive_podgroups([owner], make_pod("p", "ns"))[0]
    assert spec.topology_constraint == TopologyConstraint("dc", "", "rack")
    assert dict(spec.labels) == {"team": "a"}
    assert "kubectl.kubernetes.io/last-applied-configuration" not in spec.annotations
    assert (spec.name, spec.namespace, spec.owner_reference.uid) == ("pg-w-u1", "ns", "u1")


def test_known_kind_at_unknown_version_uses_default_grouper() -> None:
    job = {
        "apiVersion": "kubeflow.org/v9",
        "kind": "PyTorchJob",
        "metadata": {"name": "x", "namespace": "n"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}},
    }
    spec = derive_podgroups([job], None)[0]
    assert (spec.min_member, spec.sub_groups) == (1, ())
