"""Smoke tests of the e2e cluster itself: API access, kwok lifecycles, RBAC, and the KAI-compatible CRDs."""

from __future__ import annotations

import contextlib
import copy
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from lightkube import ApiError, codecs
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.models.core_v1 import Container, ObjectReference, PodSpec, ResourceRequirements
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.core_v1 import Namespace, Node, Pod

from .cluster import DATA, Cluster, KEnv, data_text, eventually, node_ready, wait_crd_served

pytestmark = pytest.mark.e2e

Queue = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")


def make_pod(name: str, node: str | None = None, annotations: dict[str, str] | None = None,
             scheduler: str = "shoal-e2e-nobody") -> Pod:
    """A one-container pod; with ``node`` it is pre-bound, otherwise it waits for a scheduler."""
    return Pod(
        metadata=ObjectMeta(name=name, annotations=annotations),
        spec=PodSpec(
            nodeName=node,
            schedulerName=scheduler,
            containers=[Container(name="main", image="busybox",
                                  resources=ResourceRequirements(limits={"nvidia.com/gpu": "1"}))],
        ),
    )


def pod_phase(kenv: KEnv, name: str) -> str | None:
    pod = kenv.client.get(Pod, name, namespace=kenv.namespace)
    return pod.status.phase if pod.status else None


def test_scheduler_kubeconfig_sees_cluster_state(kenv: KEnv) -> None:
    (name,) = kenv.add_gpu_nodes(1)
    sched = kenv.cluster.client("scheduler")
    assert name in {n.metadata.name for n in sched.list(Node)}
    assert list(sched.list(Queue)) is not None  # the CRD is served and readable with the scheduler's role
    assert list(sched.list(Pod, namespace=kenv.namespace)) == []


def test_kwok_node_becomes_ready_and_keeps_gpu_capacity(kenv: KEnv) -> None:
    (name,) = kenv.add_gpu_nodes(1, gpus=4, labels={"nvidia.com/gpu.product": "H100"})
    kenv.wait_nodes_ready([name])
    node = kenv.client.get(Node, name)
    assert node.status.allocatable["nvidia.com/gpu"] == "4"
    assert node.status.capacity["nvidia.com/gpu"] == "4"
    assert not (node.spec.taints or [])
    assert node.status.nodeInfo.kubeletVersion.startswith("kwok-")


def test_kwok_node_heartbeat_advances(kenv: KEnv) -> None:
    (name,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([name])

    def ready_condition() -> Any:
        node = kenv.client.get(Node, name)
        return next(c for c in node.status.conditions if c.type == "Ready")

    first = ready_condition()
    # The fixture starts kwok with a 10-12.5 s heartbeat.
    later = eventually(lambda: (c := ready_condition()).lastHeartbeatTime > first.lastHeartbeatTime and c,
                       20, interval=0.5, what="a newer lastHeartbeatTime")
    assert later.status == "True"
    assert later.lastTransitionTime == first.lastTransitionTime


def test_node_without_kwok_annotation_is_left_alone(kenv: KEnv) -> None:
    name = f"{kenv.node_prefix}-unmanaged"
    kenv.client.create(Node(metadata=ObjectMeta(name=name)))
    kenv.nodes.append(name)
    (managed,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([managed])  # kwok is working, so it has had its chance at the other node
    time.sleep(1.0)
    assert not node_ready(kenv.client, name)


def test_bound_pod_becomes_running_with_pod_ip(kenv: KEnv) -> None:
    (node,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([node])
    kenv.client.create(make_pod("bound", node=node), namespace=kenv.namespace)
    eventually(lambda: pod_phase(kenv, "bound") == "Running", 30, what="pod Running")
    pod = kenv.client.get(Pod, "bound", namespace=kenv.namespace)
    assert pod.status.podIP
    assert pod.status.containerStatuses[0].state.running is not None


def test_pod_with_run_for_succeeds_after_that_time(kenv: KEnv) -> None:
    (node,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([node])
    kenv.client.create(make_pod("timed", node=node, annotations={"shoal.dev/run-for": "2s"}),
                       namespace=kenv.namespace)
    eventually(lambda: pod_phase(kenv, "timed") == "Running", 30, interval=0.05, what="pod Running")
    started = time.monotonic()
    eventually(lambda: pod_phase(kenv, "timed") == "Succeeded", 30, interval=0.1, what="pod Succeeded")
    assert time.monotonic() - started >= 1.5
    pod = kenv.client.get(Pod, "timed", namespace=kenv.namespace)
    assert pod.status.containerStatuses[0].state.terminated.exitCode == 0


def test_pod_without_run_for_keeps_running(kenv: KEnv) -> None:
    (node,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([node])
    kenv.client.create(make_pod("forever", node=node), namespace=kenv.namespace)
    eventually(lambda: pod_phase(kenv, "forever") == "Running", 30, what="pod Running")
    time.sleep(3)
    assert pod_phase(kenv, "forever") == "Running"


def test_deleted_pod_with_finalizer_goes_away(kenv: KEnv) -> None:
    (node,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([node])
    pod = make_pod("doomed", node=node)
    pod.metadata.finalizers = ["shoal.dev/e2e-test"]
    kenv.client.create(pod, namespace=kenv.namespace)
    eventually(lambda: pod_phase(kenv, "doomed") == "Running", 30, what="pod Running")
    kenv.client.delete(Pod, "doomed", namespace=kenv.namespace)

    def gone() -> bool:
        try:
            kenv.client.get(Pod, "doomed", namespace=kenv.namespace)
        except ApiError as e:
            return e.status.code == 404
        return False

    eventually(gone, 30, what="pod deleted")


@pytest.mark.parametrize(
    ("verb", "group", "resource", "subresource", "allowed"),
    [
        pytest.param("watch", "", "pods", "", True, id="watch-pods"),
        pytest.param("list", "", "nodes", "", True, id="list-nodes"),
        pytest.param("create", "", "pods", "binding", True, id="create-binding"),
        pytest.param("create", "", "pods", "eviction", True, id="create-eviction"),
        pytest.param("patch", "", "pods", "status", True, id="patch-pod-status"),
        pytest.param("create", "events.k8s.io", "events", "", True, id="create-events"),
        pytest.param("update", "coordination.k8s.io", "leases", "", True, id="update-leases"),
        pytest.param("create", "scheduling.run.ai", "podgroups", "", True, id="create-podgroups"),
        pytest.param("patch", "scheduling.run.ai", "queues", "status", True, id="patch-queue-status"),
        pytest.param("list", "kubeflow.org", "pytorchjobs", "", True, id="list-pytorchjobs"),
        pytest.param("get", "argoproj.io", "workflows", "", True, id="get-workflows"),
        pytest.param("delete", "", "namespaces", "", False, id="no-delete-namespaces"),
        pytest.param("delete", "", "pods", "", False, id="no-delete-pods"),
        pytest.param("create", "", "pods", "", False, id="no-create-pods"),
        pytest.param("get", "", "secrets", "", False, id="no-secrets"),
        pytest.param("patch", "", "nodes", "", False, id="no-patch-nodes"),
        pytest.param("create", "scheduling.run.ai", "queues", "", False, id="no-create-queues"),
        pytest.param("update", "batch", "jobs", "", False, id="no-update-jobs"),
        pytest.param("get", "argoproj.io", "workflowtemplates", "", False, id="no-workflowtemplates"),
    ],
)
def test_scheduler_rbac(cluster: Cluster, verb: str, group: str, resource: str, subresource: str,
                        allowed: bool) -> None:
    review = SelfSubjectAccessReview(spec=SelfSubjectAccessReviewSpec(resourceAttributes=ResourceAttributes(
        verb=verb, group=group, resource=resource, subresource=subresource or None, namespace="default")))
    result = cluster.client("scheduler").create(review)
    assert result.status.allowed is allowed, result.status


def test_scheduler_may_bind_but_not_delete_namespaces(kenv: KEnv) -> None:
    (node,) = kenv.add_gpu_nodes(1)
    kenv.wait_nodes_ready([node])
    kenv.client.create(make_pod("unbound"), namespace=kenv.namespace)
    sched = kenv.cluster.client("scheduler")

    with pytest.raises(ApiError) as forbidden:
        sched.delete(Namespace, kenv.namespace)
    assert forbidden.value.status.code == 403

    binding = Pod.Binding(metadata=ObjectMeta(name="unbound"),
                          target=ObjectReference(apiVersion="v1", kind="Node", name=node))
    # The 201 answer is a metav1.Status, which lightkube fails to decode as a Binding.
    with contextlib.suppress(msgspec.ValidationError):
        sched.create(binding, name="unbound", namespace=kenv.namespace)
    pod = kenv.client.get(Pod, "unbound", namespace=kenv.namespace)
    assert pod.spec.nodeName == node
    eventually(lambda: pod_phase(kenv, "unbound") == "Running", 30, what="bound pod Running")


# --------------------------------------------------------------------------------------------- CRDs


def _kai_examples() -> list[Any]:
    files = sorted((DATA / "kai-examples").glob("*.yaml"))
    assert files, f"no KAI example manifests under {DATA / 'kai-examples'}"
    return [pytest.param(p, id=p.stem) for p in files]


def _ensure_crd(cluster: Cluster, rel: str) -> None:
    client = cluster.client()
    for crd in codecs.load_all_yaml(data_text(rel)):
        try:
            client.create(crd)
        except ApiError as e:
            if e.status.code != 409:
                raise
        wait_crd_served(client, crd)


@pytest.mark.parametrize("path", _kai_examples())
def test_kai_example_manifest_is_accepted(kenv: KEnv, path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    if any(d["kind"] == "PyTorchJob" for d in docs):
        _ensure_crd(kenv.cluster, "crds/kubeflow-training-operator-v1/kubeflow.org_pytorchjobs.yaml")
    for doc in docs:
        obj = codecs.from_dict(copy.deepcopy(doc)) if doc["kind"] != "PyTorchJob" else _generic(doc)
        if doc["kind"] == "Queue":
            # Cluster-scoped: dry-run so the real default queues stay free for scheduler tests.
            got = kenv.client.create(obj, dry_run=True)
            # Nothing was pruned: the CRD knows every field KAI's example uses.
            assert got.to_dict()["spec"] == doc["spec"]
        else:
            got = kenv.client.create(obj, namespace=kenv.namespace)
            assert got.metadata.namespace == kenv.namespace


def _generic(doc: dict[str, Any]) -> Any:
    group, version = doc["apiVersion"].split("/")
    res = create_namespaced_resource(group, version, doc["kind"], doc["kind"].lower() + "s")
    return res.from_dict(copy.deepcopy(doc))


def _queue(spec: dict[str, Any], name: str = "q-invalid") -> Any:
    return Queue.from_dict({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                            "metadata": {"name": name}, "spec": spec})


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        pytest.param({"resources": {"gpu": {"quota": "lots"}}}, "quota", id="quota-not-a-number"),
        pytest.param({"priority": "high"}, "priority", id="priority-not-an-integer"),
        pytest.param({"resources": {"cpu": {"limit": -5}}}, "limit", id="limit-below-minus-one"),
        pytest.param({"resources": {"memory": {"overQuotaWeight": -1}}}, "overQuotaWeight",
                     id="negative-weight"),
        pytest.param({"preemptMinRuntime": "ten minutes"}, "preemptMinRuntime", id="bad-duration"),
    ],
)
def test_invalid_queue_is_rejected(kenv: KEnv, spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ApiError) as err:
        kenv.client.create(_queue(spec), dry_run=True)
    assert err.value.status.code == 422
    assert fragment in err.value.status.message


def test_valid_queue_round_trips(kenv: KEnv) -> None:
    spec = {"displayName": "Team A", "parentQueue": "root", "priority": 200,
            "preemptMinRuntime": "10m", "reclaimMinRuntime": "1h30m",
            "resources": {"gpu": {"quota": 8, "overQuotaWeight": 2, "limit": -1},
                          "cpu": {"quota": 0.5, "overQuotaWeight": 1, "limit": 64000},
                          "memory": {"quota": 1024, "overQuotaWeight": 0, "limit": -1}}}
    got = kenv.client.create(_queue(spec, "q-valid"), dry_run=True)
    assert got.to_dict()["spec"] == spec


def test_unknown_queue_spec_field_is_pruned(kenv: KEnv) -> None:
    got = kenv.client.create(_queue({"priority": 1, "quotaa": 3}, "q-typo"), dry_run=True)
    assert got.to_dict()["spec"] == {"priority": 1}


PodGroup_gvk = ("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        pytest.param({"minMember": 2, "queue": "q", "priorityClassName": "train",
                      "preemptibility": "non-preemptible", "markUnschedulable": True, "schedulingBackoff": 1,
                      "topologyConstraint": {"topology": "t", "requiredTopologyLevel": "rack"},
                      "subGroups": [{"name": "a", "minMember": 1},
                                    {"name": "b", "minMember": 0, "parent": "a",
                                     "topologyConstraint": {"preferredTopologyLevel": "host"}}]},
                     True, id="full"),
        pytest.param({"minMember": 0}, False, id="min-member-zero"),
        pytest.param({"preemptibility": "sometimes"}, False, id="bad-preemptibility"),
        pytest.param({"schedulingBackoff": 3}, False, id="bad-backoff"),
        pytest.param({"subGroups": [{"minMember": 1}]}, False, id="subgroup-without-name"),
    ],
)
def test_podgroup_validation(kenv: KEnv, spec: dict[str, Any], ok: bool) -> None:
    PodGroup = create_namespaced_resource(*PodGroup_gvk)
    obj = PodGroup.from_dict({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                              "metadata": {"name": "pg1"}, "spec": spec})
    if ok:
        got = kenv.client.create(obj, namespace=kenv.namespace)
        assert got.to_dict()["spec"] == spec
    else:
        with pytest.raises(ApiError) as err:
            kenv.client.create(obj, namespace=kenv.namespace)
        assert err.value.status.code == 422


@pytest.mark.parametrize(
    ("levels", "ok"),
    [
        pytest.param([{"nodeLabel": "topology/rack"}, {"nodeLabel": "kubernetes.io/hostname"}], True,
                     id="ok"),
        pytest.param([], False, id="empty"),
        pytest.param([{"nodeLabel": f"l{i}"} for i in range(17)], False, id="too-many"),
        pytest.param([{"nodeLabel": "a"}, {"nodeLabel": "a"}], False, id="duplicate"),
        pytest.param([{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}], False,
                     id="hostname-not-last"),
    ],
)
def test_topology_validation(kenv: KEnv, levels: list[dict[str, str]], ok: bool) -> None:
    Topology = create_global_resource("kai.scheduler", "v1alpha1", "Topology", "topologies")
    obj = Topology.from_dict({"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
                              "metadata": {"name": "topo"}, "spec": {"levels": levels}})
    if ok:
        got = kenv.client.create(obj, dry_run=True)
        assert got.to_dict()["spec"]["levels"] == levels
    else:
        with pytest.raises(ApiError) as err:
            kenv.client.create(obj, dry_run=True)
        assert err.value.status.code == 422
