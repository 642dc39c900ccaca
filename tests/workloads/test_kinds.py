"""Table-driven tests of the workload map on owner objects shaped like the upstream projects' examples."""

from __future__ import annotations

from typing import Any

import pytest
from workload_fixtures import load, make_pod

from shoal.workloads import PodGroupSpec, TopologyConstraint, derive_podgroups

UID = "5b0f3f3e-0000-4000-8000-0000000000"


def shape(spec: PodGroupSpec) -> dict[str, Any]:
    """The facts a grouping rule decides, in a compact comparable form."""
    return {
        "name": spec.name,
        "min": spec.min_member,
        "queue": spec.queue,
        "priority": spec.priority_class_name,
        "subgroups": [(sg.name, sg.min_member, sg.parent) for sg in spec.sub_groups],
    }


def pg(name: str, minimum: int, queue: str = "default-queue", priority: str = "train",
       subgroups: list[tuple[str, int, str | None]] | None = None) -> dict[str, Any]:
    return {"name": name, "min": minimum, "queue": queue, "priority": priority, "subgroups": subgroups or []}


def executor_pod() -> dict[str, Any]:
    driver = load("spark-driver-pod.yaml")[0]
    return make_pod("spark-pi-exec-1", "spark", owner=driver, uid="exec-uid", labels={
        "spark-app-name": "spark-pi", "spark-app-selector": "spark-1f2e3d4c5b6a", "spark-role": "executor"})


CASES = [
    pytest.param("pytorch-elastic.yaml", None, [
        pg(f"pg-elastic-example-imagenet-{UID}01", 1, subgroups=[("worker", 1, None)]),
    ], id="elastic PyTorchJob: min from elasticPolicy.minReplicas, worker subgroup only"),
    pytest.param("pytorch-segments.yaml", None, [
        pg(f"pg-llm-pretrain-{UID}02", 11, queue="research", subgroups=[
            ("master", 1, None), ("worker", 10, None),
            ("worker-0", 4, "worker"), ("worker-1", 4, "worker"), ("worker-2", 2, "worker")]),
    ], id="PyTorchJob, segment-size 4 over 10 workers: worker parents worker-0..2, last = remainder"),
    pytest.param("mpijob-v2beta1.yaml", None, [pg(f"pg-pi-{UID}03", 2)],
                 id="MPIJob v2beta1 WaitForWorkersReady, no launcher pod yet: launcher not in the gang"),
    pytest.param("mpijob-v1.yaml", None, [pg(f"pg-tensorflow-benchmarks-{UID}04", 3)],
                 id="MPIJob v1: launcher + workers"),
    pytest.param("tfjob.yaml", None, [pg(f"pg-dist-mnist-for-e2e-test-{UID}05", 6, queue="vision")],
                 id="TFJob: sum of PS and Worker replicas, queue from the project label"),
    pytest.param("xgboostjob.yaml", None, [pg(f"pg-xgboost-dist-iris-test-train-{UID}06", 3)],
                 id="XGBoostJob: master + workers"),
    pytest.param("jaxjob.yaml", None, [pg(f"pg-jaxjob-simple-{UID}07", 2)], id="JAXJob: workers"),
    pytest.param("notebook.yaml", None, [pg(f"pg-notebook-sample-v1beta1-{UID}08", 1, priority="build")],
                 id="Notebook: default grouper with priority build"),
    pytest.param("raycluster-multi.yaml", None, [
        pg(f"pg-raycluster-complete-{UID}09", 10, queue="ml-team", priority="inference", subgroups=[
            ("headgroup", 1, None), ("small-group", 1, None), ("tpu-group", 8, None)]),
    ], id="RayCluster: head + minReplicas group + multi-host group; suspended skipped; ray priority"),
    pytest.param("rayjob.yaml", None, [
        pg(f"pg-rayjob-sample-{UID}10", 2, subgroups=[("headgroup", 1, None), ("small-group", 1, None)]),
    ], id="RayJob alone: the embedded rayClusterSpec"),
    pytest.param("rayjob-cluster.yaml", None, [
        pg(f"pg-rayjob-sample-{UID}10", 3, subgroups=[("headgroup", 1, None), ("small-group", 2, None)]),
    ], id="RayCluster->RayJob chain: the live RayCluster's spec, named after the RayJob"),
    pytest.param("rayservice.yaml", None, [
        pg(f"pg-rayservice-sample-{UID}12", 2, subgroups=[("headgroup", 1, None), ("small-group", 1, None)]),
    ], id="RayService: the rayClusterConfig"),
    pytest.param("jobset-inorder.yaml", None, [
        pg(f"pg-startup-driver-ready-{UID}13-driver", 1),
        pg(f"pg-startup-driver-ready-{UID}13-workers", 8),
    ], id="InOrder JobSet: one PodGroup per replicatedJob, min = replicas x parallelism"),
    pytest.param("jobset-inorder.yaml",
                 make_pod("w", labels={"jobset.sigs.k8s.io/replicatedjob-name": "workers"}),
                 [pg(f"pg-startup-driver-ready-{UID}13-workers", 8)],
                 id="InOrder JobSet with a pod: only the pod's replicatedJob"),
    pytest.param("jobset-anyorder.yaml", None, [
        pg(f"pg-paralleljobs-{UID}14", 5, subgroups=[("workers", 4, None), ("driver", 1, None)]),
    ], id="AnyOrder JobSet: one PodGroup, min = sum, a subgroup per replicatedJob"),
    pytest.param("lws-segments.yaml", None, [
        pg(f"pg-leaderworkerset-multi-template-{UID}15-group-{i}", 9, subgroups=[
            ("segment-0", 5, None), ("leader", 1, "segment-0"), ("workers", 4, "segment-0"),
            ("segment-1", 4, None)]) for i in range(2)
    ], id="LWS size 9 with segments of 4: leader rides in segment 0"),
    pytest.param("lws-leader-ready.yaml", None, [
        pg(f"pg-leaderworkerset-sample-{UID}16-group-{i}", 4,
           subgroups=[("leader", 1, None), ("workers", 3, None)])
        for i in range(3)
    ], id="LWS: a PodGroup per group index, leader + workers"),
    pytest.param("lws-leader-ready.yaml", make_pod("lws-1", labels={
        "leaderworkerset.sigs.k8s.io/group-index": "1", "leaderworkerset.sigs.k8s.io/worker-index": "0"}), [
        pg(f"pg-leaderworkerset-sample-{UID}16-group-1", 1, subgroups=[("leader", 1, None)]),
    ], id="LWS LeaderReady with an unscheduled leader pod: gang of one"),
    pytest.param("lws-leader-ready.yaml", make_pod("lws-1", node="node-a", labels={
        "leaderworkerset.sigs.k8s.io/group-index": "1", "leaderworkerset.sigs.k8s.io/worker-index": "0"}), [
        pg(f"pg-leaderworkerset-sample-{UID}16-group-1", 4,
           subgroups=[("leader", 1, None), ("workers", 3, None)]),
    ], id="LWS LeaderReady with a scheduled leader: the whole group"),
    pytest.param("cronjob-chain.yaml", make_pod("hello-28945120-x2x9z", uid="pod-uid"), [
        pg(f"pg-hello-28945120-{UID}17", 1, queue="nightly"),
    ], id="CronJob->Job->Pod: the Job is the top owner"),
    pytest.param("deployment-chain.yaml",
                 make_pod("nginx-deployment-66b6c48dd5-abcde", "web", uid="pod-uid-1"), [
        pg("pg-nginx-deployment-66b6c48dd5-abcde-pod-uid-1", 1, queue="web-serving", priority="inference"),
    ], id="Deployment->ReplicaSet->Pod: a PodGroup per pod, priority inference"),
    pytest.param("statefulset.yaml", None, [pg(f"pg-web-{UID}21", 1, priority="build")],
                 id="StatefulSet: default grouper; priorityClassName label on the pod template"),
    pytest.param("knative-service.yaml", make_pod("helloworld-go-00001-deployment-1", uid="kpod"), [
        pg("pg-helloworld-go-00001-deployment-1-kpod", 1, priority="inference"),
    ], id="Knative Service: a PodGroup per pod, priority inference"),
    pytest.param("trainjob-chain.yaml", make_pod("pytorch-mnist-node-0-0", "team-a",
                                                 labels={"jobset.sigs.k8s.io/replicatedjob-name": "node"}), [
        pg(f"pg-pytorch-mnist-{UID}24-node", 2, queue="team-a-queue"),
    ], id="TrainJob is skipped: the JobSet below it groups (InOrder, KAI's default), with the TrainJob's queue"),
    pytest.param("argo-workflow.yaml", make_pod("hello-world-x7k2p", "argo", uid="wf-pod"), [
        pg("pg-hello-world-x7k2p-wf-pod", 1, queue="pipelines"),
    ], id="Argo Workflow is skipped: the pod is the top owner and inherits the queue label"),
]


@pytest.mark.parametrize(("data", "pod", "expected"), CASES)
def test_kind_rules(data: str, pod: dict[str, Any] | None, expected: list[dict[str, Any]]) -> None:
    chain = load(data)
    if pod is not None and chain[0].get("kind") != "Pod" and "ownerReferences" not in pod["metadata"]:
        pod = {**pod, "metadata": {**pod["metadata"], "ownerReferences": [{
            "apiVersion": chain[0]["apiVersion"], "kind": chain[0]["kind"],
            "name": chain[0]["metadata"]["name"], "controller": True}]}}
    assert [shape(s) for s in derive_podgroups(chain, pod)] == expected


@pytest.mark.parametrize(("chain", "pod", "name", "owner_kind"), [
    pytest.param([], "driver", "spark-1f2e3d4c5b6a", "Pod",
                 id="Spark driver pod: named after spark-app-selector"),
    pytest.param(["driver"], "executor", "spark-1f2e3d4c5b6a", "Pod",
                 id="Spark executor owned by the driver: the same PodGroup"),
    pytest.param([], "plain", "pg-lonely-lonely-uid", "Pod", id="a bare pod: its own PodGroup"),
])
def test_pod_groupers(chain: list[str], pod: str, name: str, owner_kind: str) -> None:
    pods = {"driver": load("spark-driver-pod.yaml")[0], "executor": executor_pod(),
            "plain": make_pod("lonely", uid="lonely-uid")}
    specs = derive_podgroups([pods[c] for c in chain], pods[pod])
    assert [(s.name, s.min_member, s.owner_reference.kind) for s in specs] == [(name, 1, owner_kind)]


def test_mpi_launcher_counts_once_it_exists() -> None:
    job = load("mpijob-v2beta1.yaml")
    launcher = make_pod("pi-launcher", labels={"training.kubeflow.org/job-role": "launcher"})
    worker = make_pod("pi-worker-0", labels={"training.kubeflow.org/job-role": "worker"})
    deleting = {**launcher, "metadata": {**launcher["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert derive_podgroups(job, worker)[0].min_member == 2
    assert derive_podgroups(job, worker, sibling_pods=[deleting])[0].min_member == 2
    assert derive_podgroups(job, worker, sibling_pods=[launcher])[0].min_member == 3
    assert derive_podgroups(job, launcher)[0].min_member == 3


def test_segment_and_job_topology() -> None:
    spec = derive_podgroups(load("pytorch-segments.yaml"), None)[0]
    assert spec.topology_constraint == TopologyConstraint("cluster-topology", "zone", "")
    segments = {sg.name: sg.topology_constraint for sg in spec.sub_groups}
    assert segments["worker-0"] == TopologyConstraint("cluster-topology", "rack", "")
    assert segments["worker"] is None and segments["master"] is None


def test_ray_group_topology_and_lws_segment_topology() -> None:
    ray = derive_podgroups(load("raycluster-multi.yaml"), None)[0]
    assert {sg.name: sg.topology_constraint for sg in ray.sub_groups}["tpu-group"] == TopologyConstraint(
        "cluster-topology", "rack", "")
    lws = derive_podgroups(load("lws-segments.yaml"), None)[0]
    topo = {sg.name: sg.topology_constraint for sg in lws.sub_groups}
    assert topo["segment-1"] == TopologyConstraint("cluster-topology", "rack", "")
    assert topo["leader"] is None


def test_lws_leader_excluded_segments() -> None:
    lws = load("lws-segments.yaml")[0]
    lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupPolicyType"] = "LeaderExcluded"
    spec = derive_podgroups([lws], None)[0]
    assert [(sg.name, sg.min_member, sg.parent) for sg in spec.sub_groups] == [
        ("leader", 1, None), ("segment-0", 4, None), ("segment-1", 4, None)]


def test_lws_segment_size_not_dividing_workers() -> None:
    lws = load("lws-segments.yaml")[0]
    lws["spec"]["leaderWorkerTemplate"]["size"] = 8  # leader = index 0 of segment 0: {0..3}, {4..7}
    spec = derive_podgroups([lws], None)[0]
    assert [(sg.name, sg.min_member, sg.parent) for sg in spec.sub_groups] == [
        ("segment-0", 4, None), ("leader", 1, "segment-0"), ("workers", 3, "segment-0"),
        ("segment-1", 4, None)]


def test_pytorch_min_available_overrides_elastic() -> None:
    job = load("pytorch-elastic.yaml")[0]
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 2}}
    assert derive_podgroups([job], None)[0].min_member == 2


def test_ray_autoscaling_uses_min_replicas() -> None:
    cluster = load("raycluster-multi.yaml")[0]
    cluster["spec"]["enableInTreeAutoscaling"] = True
    spec = derive_podgroups([cluster], None)[0]
    assert spec.min_member == 2  # head + small-group minReplicas 1; tpu-group minReplicas 0
    assert [sg.name for sg in spec.sub_groups] == ["headgroup", "small-group", "tpu-group"]


def test_job_alone_is_grouped_per_pod() -> None:
    job = load("cronjob-chain.yaml")[0]
    pod = make_pod("hello-28945120-abc", labels={"kai.scheduler/queue": "pod-queue"})
    spec = derive_podgroups([job], pod)[0]
    assert (spec.name, spec.queue) == (f"pg-hello-28945120-abc-{UID}17", "nightly")


def test_inputs_are_not_mutated() -> None:
    chain = load("trainjob-chain.yaml")
    before = repr(chain)
    derive_podgroups(chain, make_pod("p", "team-a", labels={"jobset.sigs.k8s.io/replicatedjob-name": "node"}))
    assert repr(chain) == before
