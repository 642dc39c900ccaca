"""One job, four ways in: the simulator's job file, the cluster file of `shoal cycle`, Kubernetes
objects and a conformance scenario all give the same model pods and pod group.

Identity fields (uid, name, namespace, creation time, labels) differ by construction and are
blanked; everything the scheduler decides on must be equal, exactly. The job asks for a GPU
fraction KAI rounds (0.333 -> 0.33), so a unit rule one adapter forgets shows up here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shoal.cli.clusterfile import load_cluster_file
from shoal.conformance.loader import Scenario, build_snapshot
from shoal.kai.crds import podgroup_from
from shoal.kai.pods import pod_from
from shoal.kai.units import PRIORITY_CLASSES
from shoal.model import Pod, PodGroup
from shoal.sim.cluster import make_job
from shoal.sim.loaders.jobs import load_jobs

PODS = 2
GIB = 1024**3
CASES = [
    pytest.param({"gpus": 0.333, "priority": "build-preemptible"}, id="a fraction KAI rounds, preemptible class"),
    pytest.param({"gpus": 2, "priority": "inference"}, id="whole GPUs, non-preemptible class"),
    pytest.param({"gpus": 0.999, "priority": "train"}, id="a fraction that rounds to a whole GPU"),
]


def via_sim_job_file(tmp_path: Path, job: dict[str, Any]) -> tuple[PodGroup, list[Pod]]:
    path = tmp_path / "jobs.csv"
    path.write_text("name,arrival,duration,queue,gpus,pods,cpu,memory,priority_class\n"
                    f"train-a,0,600,team-a,{job['gpus']},{PODS},2,8Gi,{job['priority']}\n")
    (spec,) = load_jobs(path)
    sim_job = make_job(spec, 0)
    return sim_job.pg, sim_job.pods


def via_cluster_file(tmp_path: Path, job: dict[str, Any]) -> tuple[PodGroup, list[Pod]]:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"""\
nodes: [{{name: n1, gpus: 8}}]
queues: [{{name: team-a}}]
jobs:
- {{name: train-a, queue: team-a, priority: {job['priority']}, pods: {PODS}, gpus: {job['gpus']},
   cpu: 2, memory: 8Gi}}
""")
    snap, _ = load_cluster_file(path)
    return snap.podgroups[0], snap.pods


def _kube_pod(i: int, job: dict[str, Any]) -> dict[str, Any]:
    gpus = job["gpus"]
    resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}}
    annotations = {"pod-group-name": "train-a"}
    if gpus < 1:
        annotations["gpu-fraction"] = str(gpus)
    else:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": f"train-a-{i}", "namespace": "ns", "uid": f"u{i}",
                         "labels": {"kai.scheduler/queue": "team-a"}, "annotations": annotations},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": resources}]},
            "status": {"phase": "Pending"}}


def via_kubernetes(job: dict[str, Any]) -> tuple[PodGroup, list[Pod]]:
    podgroup = {"metadata": {"name": "train-a", "namespace": "ns", "uid": "pg"},
                "spec": {"queue": "team-a", "minMember": PODS, "priorityClassName": job["priority"]}}
    pg = podgroup_from(podgroup, dict(PRIORITY_CLASSES))
    return pg, [pod_from(_kube_pod(i, job), "ns/train-a") for i in range(PODS)]


def via_conformance_scenario(job: dict[str, Any]) -> tuple[PodGroup, list[Pod]]:
    gpus = job["gpus"]
    request: dict[str, Any] = {"milli_cpu": 2000, "memory": 8 * GIB}
    if gpus < 1:
        request["gpu_fraction"] = gpus
    else:
        request["gpus"] = gpus
    data = {
        "derived": {
            "nodes": {"n1": {"allocatable": {"gpus": 8, "milli_cpu": 64000, "memory": 512 * GIB}}},
            "queue_hierarchy": [{"name": "team-a", "resources": {}}],
            "jobs": {"train-a": {"task_request": request, "pod_sets": [{"name": "default", "min_available": PODS}]}},
        },
        "jobs": [{"name": "train-a", "queue_name": "team-a", "priority": PRIORITY_CLASSES[job["priority"]],
                  "tasks": [{"state": "Pending"} for _ in range(PODS)]}],
    }
    snap = build_snapshot(Scenario(id="four-adapters", kind="allocate", actions=["allocate"], data=data))
    return snap.podgroups[0], snap.pods


def decisive_pod(pod: Pod) -> Pod:
    """The pod without the fields that name it (they differ by adapter by construction)."""
    return replace(pod, uid="", name="", namespace="", job="", creation=0.0, labels={})


def decisive_group(pg: PodGroup) -> tuple[object, ...]:
    return (pg.queue, pg.priority, pg.preemptible, pg.pod_sets, pg.sub_group_sets, pg.topology,
            pg.last_start_time, pg.stale_since, pg.invalid_reasons)


@pytest.mark.parametrize("job", CASES)
def test_four_adapters_give_the_same_model_objects(tmp_path: Path, job: dict[str, Any]) -> None:
    ways = {
        "simulator job file": via_sim_job_file(tmp_path, job),
        "cluster file": via_cluster_file(tmp_path, job),
        "kubernetes objects": via_kubernetes(job),
        "conformance scenario": via_conformance_scenario(job),
    }
    groups = {way: decisive_group(pg) for way, (pg, _) in ways.items()}
    pods = {way: [decisive_pod(p) for p in ps] for way, (_, ps) in ways.items()}
    reference = "kubernetes objects"
    for way in ways:
        assert groups[way] == groups[reference], way
        assert pods[way] == pods[reference], way
    assert len(pods[reference]) == PODS


def test_the_simulator_rounds_a_fraction_like_kai(tmp_path: Path) -> None:
    """The bug this module was written for: the simulator used to keep 0.333 as 333 milli-GPU."""
    _, pods = via_sim_job_file(tmp_path, {"gpus": 0.333, "priority": "train"})
    assert pods[0].gpu.portion_milli == 330
