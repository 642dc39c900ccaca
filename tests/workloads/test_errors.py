"""Malformed owners raise WorkloadError naming the object and the field — never a KeyError/TypeError."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest
from workload_fixtures import load, make_pod

from shoal.workloads import WorkloadError, derive_podgroups

Obj = dict[str, Any]


def edit(data: str, change: Callable[[Obj], None], index: int = -1) -> list[Obj]:
    chain = load(data)
    change(chain[index])
    return chain


def set_path(obj: Obj, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        obj = obj[key]
    if value is DELETE:
        del obj[last]
    else:
        obj[last] = value


DELETE = object()


def setting(path: str, value: Any) -> Callable[[Obj], None]:
    return lambda obj: set_path(obj, path, value)


def bert() -> list[Obj]:
    return [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "bert", "namespace": "team-a"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 0}}},
        }
    ]


CASES = [
    pytest.param(
        bert(),
        None,
        "PyTorchJob team-a/bert: spec.pytorchReplicaSpecs.Worker.replicas: must be > 0, got 0",
        id="PyTorchJob worker with 0 replicas",
    ),
    pytest.param(
        edit("tfjob.yaml", setting("spec.tfReplicaSpecs.Worker.replicas", "four")),
        None,
        "TFJob kubeflow/dist-mnist-for-e2e-test: spec.tfReplicaSpecs.Worker.replicas: "
        "must be an integer, got 'four'",
        id="TFJob replicas of the wrong type",
    ),
    pytest.param(
        edit("tfjob.yaml", setting("spec.tfReplicaSpecs", DELETE)),
        None,
        "TFJob kubeflow/dist-mnist-for-e2e-test: spec.tfReplicaSpecs: required field is missing",
        id="TFJob without replica specs",
    ),
    pytest.param(
        edit("mpijob-v1.yaml", setting("spec.mpiReplicaSpecs.Launcher", DELETE)),
        None,
        "MPIJob default/tensorflow-benchmarks: spec.mpiReplicaSpecs.Launcher: "
        "required replica type 'Launcher' is missing",
        id="MPIJob without a launcher",
    ),
    pytest.param(
        edit("xgboostjob.yaml", setting("spec.xgbReplicaSpecs.Master", DELETE)),
        None,
        "spec.xgbReplicaSpecs.Master: required replica type 'Master' is missing",
        id="XGBoostJob without a master",
    ),
    pytest.param(
        edit("jaxjob.yaml", setting("spec.runPolicy", {"schedulingPolicy": {"minAvailable": 0}})),
        None,
        "spec.runPolicy.schedulingPolicy.minAvailable: gang size must be >= 1, got 0",
        id="JAXJob with minAvailable 0",
    ),
    pytest.param(
        edit(
            "pytorch-segments.yaml",
            setting(
                "spec.pytorchReplicaSpecs.Worker.template.metadata.annotations",
                {"kai.scheduler/segment-size": "four"},
            ),
        ),
        None,
        "annotations[kai.scheduler/segment-size]: must be an integer, got 'four'",
        id="PyTorchJob with a non-numeric segment size",
    ),
    pytest.param(
        edit("raycluster-multi.yaml", setting("spec.headGroupSpec", DELETE)),
        None,
        "RayCluster ml/raycluster-complete: spec.headGroupSpec: required field is missing",
        id="RayCluster without a head group",
    ),
    pytest.param(
        edit("raycluster-multi.yaml", lambda o: o["spec"]["workerGroupSpecs"][0].update(minReplicas=7)),
        None,
        "spec.workerGroupSpecs[0].minReplicas: must be <= replicas (3), got 7",
        id="RayCluster group with minReplicas > replicas",
    ),
    pytest.param(
        edit("raycluster-multi.yaml", setting("spec.workerGroupSpecs", {"a": 1})),
        None,
        "spec.workerGroupSpecs: must be a list, got dict",
        id="RayCluster workerGroupSpecs not a list",
    ),
    pytest.param(
        edit("rayjob.yaml", setting("spec.rayClusterSpec", DELETE)),
        None,
        "RayJob default/rayjob-sample: spec.rayClusterSpec: required field is missing",
        id="RayJob with no cluster spec and no RayCluster below it",
    ),
    pytest.param(
        edit("jobset-anyorder.yaml", setting("spec.replicatedJobs", [])),
        None,
        "spec.replicatedJobs: must hold at least one replicatedJob",
        id="JobSet without replicatedJobs",
    ),
    pytest.param(
        edit("jobset-inorder.yaml", setting("spec.startupPolicy.startupPolicyOrder", "Random")),
        None,
        "spec.startupPolicy.startupPolicyOrder: must be AnyOrder or InOrder, got 'Random'",
        id="JobSet with an unknown startup order",
    ),
    pytest.param(
        edit("jobset-anyorder.yaml", lambda o: o["spec"]["replicatedJobs"][1].pop("name")),
        None,
        "spec.replicatedJobs[1].name: required field is missing",
        id="JobSet replicatedJob without name",
    ),
    pytest.param(
        edit("lws-leader-ready.yaml", setting("spec.leaderWorkerTemplate.size", 0)),
        None,
        "spec.leaderWorkerTemplate.size: must be > 0, got 0",
        id="LWS with size 0",
    ),
    pytest.param(
        edit("lws-segments.yaml", setting("spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize", 12)),
        None,
        "segment size must be > 1 and <= the group size 9, got 12",
        id="LWS segment larger than the group",
    ),
    pytest.param(
        edit(
            "lws-segments.yaml",
            lambda o: o["spec"]["leaderWorkerTemplate"].update(
                size=8, subGroupPolicy={"subGroupSize": 4, "subGroupPolicyType": "LeaderExcluded"}
            ),
        ),
        None,
        "LeaderExcluded needs size-1 (7) divisible by the segment size 4",
        id="LWS LeaderExcluded not divisible",
    ),
    pytest.param(
        edit("lws-leader-ready.yaml", setting("spec.startupPolicy", "Eventually")),
        None,
        "spec.startupPolicy: must be LeaderCreated or LeaderReady, got 'Eventually'",
        id="LWS with an unknown startup policy",
    ),
    pytest.param(
        [
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {
                    "name": "w",
                    "namespace": "ns",
                    "ownerReferences": [
                        {"apiVersion": "a/v1", "kind": "A", "name": "a"},
                        {"apiVersion": "b/v1", "kind": "B", "name": "b"},
                    ],
                },
            }
        ],
        None,
        "Widget ns/w: metadata.ownerReferences: 2 owner references and none is the controller",
        id="unknown kind with several non-controller owners",
    ),
    pytest.param(
        edit("tfjob.yaml", setting("spec", ["not", "a", "map"])),
        None,
        "spec: must be an object, got list",
        id="spec of the wrong type",
    ),
    pytest.param(
        edit(
            "notebook.yaml",
            lambda o: (
                o["metadata"].setdefault("labels", {}).update({"kai.scheduler/preemptibility": "sometimes"})
            ),
        ),
        None,
        "metadata.labels[kai.scheduler/preemptibility]: must be one of preemptible, non-preemptible",
        id="invalid preemptibility label",
    ),
    pytest.param(
        edit(
            "notebook.yaml",
            lambda o: (
                o["metadata"]
                .setdefault("annotations", {})
                .update({"kai.scheduler/topology-required-placement": "rack"})
            ),
        ),
        None,
        "a topology placement level is set but no topology is named",
        id="placement without a topology",
    ),
    pytest.param(
        edit("notebook.yaml", setting("metadata.name", DELETE)),
        None,
        "metadata.name: required field is missing",
        id="owner without a name",
    ),
    pytest.param(
        ["not an object"],
        None,
        "owner_chain[0]: must be an object, got str",
        id="owner chain entry of the wrong type",
    ),
    pytest.param(
        load("trainjob-chain.yaml")[-1:],
        None,
        "pass the owner below it",
        id="TrainJob alone: its PodGroup comes from the JobSet",
    ),
    pytest.param(
        load("lws-leader-ready.yaml"),
        make_pod("p", labels={}),
        "metadata.labels[leaderworkerset.sigs.k8s.io/group-index]: a LeaderWorkerSet pod must carry",
        id="LWS pod without a group index",
    ),
    pytest.param(
        load("jobset-inorder.yaml"),
        make_pod("p", labels={"jobset.sigs.k8s.io/replicatedjob-name": "nope"}),
        "names no replicatedJob",
        id="JobSet pod naming an unknown replicatedJob",
    ),
]


@pytest.mark.parametrize(("chain", "pod", "message"), CASES)
def test_malformed_owner_raises_workload_error(chain: list[Any], pod: Obj | None, message: str) -> None:
    with pytest.raises(WorkloadError) as info:
        derive_podgroups(chain, pod)
    assert message in str(info.value)


def test_error_fields_are_structured() -> None:
    with pytest.raises(WorkloadError) as info:
        derive_podgroups(bert(), None)
    err = info.value
    assert (err.kind, err.name, err.field) == (
        "PyTorchJob",
        "team-a/bert",
        "spec.pytorchReplicaSpecs.Worker.replicas",
    )


@pytest.mark.parametrize(
    "data",
    [
        "pytorch-segments.yaml",
        "raycluster-multi.yaml",
        "lws-segments.yaml",
        "jobset-inorder.yaml",
        "mpijob-v2beta1.yaml",
        "deployment-chain.yaml",
    ],
)
def test_type_scrambled_fields_never_escape_as_other_exceptions(data: str) -> None:
    """Replace every scalar of the top owner's spec, one at a time, by a value of another type: the
    result is PodGroups or a WorkloadError, never another exception."""
    chain = load(data)
    top = chain[-1]
    paths: list[list[Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, [*path, k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, [*path, i])
        else:
            paths.append(path)

    walk(top, [])
    assert len(paths) > 10
    for path in paths:
        for bad in ({"x": 1}, ["x"], -3, "zz", True):
            mutated = copy.deepcopy(top)
            node: Any = mutated
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = bad
            with contextlib.suppress(WorkloadError):
                derive_podgroups([*chain[:-1], mutated], None)
