"""What the webhook refuses and adds (shoal.kai.admission), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.kai.admission import MutationOptions, pod_patch, pod_problem, podgroup_problem

QUEUES = {"parent": ["leaf"], "leaf": []}


def pod(annotations: dict[str, str] | None = None, gpus: int = 0, queue: str | None = "leaf") -> Any:
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {},
                         "labels": {"kai.scheduler/queue": queue} if queue else {}},
            "spec": {"schedulerName": "s", "containers": [{"name": "main", "resources": res}]}}


@pytest.mark.parametrize("obj, fragment", [
    pytest.param(pod({"gpu-fraction": "1.5"}), "gpu-fraction='1.5': must be in (0, 1]", id="fraction above one"),
    pytest.param(pod({"gpu-fraction": "0"}), "gpu-fraction='0'", id="fraction zero"),
    pytest.param(pod({"gpu-fraction": "x"}), "not a number", id="fraction not numeric"),
    pytest.param(pod({"gpu-fraction": "0.5"}, gpus=1), "with an nvidia.com/gpu request", id="fraction and whole"),
    pytest.param(pod({"gpu-memory": "0"}), "gpu-memory='0': must be positive", id="memory not positive"),
    pytest.param(pod(queue="nope"), "kai.scheduler/queue='nope': no Queue", id="missing queue"),
    pytest.param(pod(queue="parent"), "not a leaf (child queues: leaf)", id="non-leaf queue"),
])
def test_bad_pods_are_refused_naming_the_field(obj: Any, fragment: str) -> None:
    problem = pod_problem(obj, QUEUES)
    assert problem is not None and fragment in problem


def test_a_good_pod_passes_and_unknown_queues_are_not_guessed() -> None:
    assert pod_problem(pod({"gpu-fraction": "0.5"}), QUEUES) is None
    assert pod_problem(pod(queue="nope"), None) is None


@pytest.mark.parametrize("spec, fragment", [
    pytest.param({"minMember": -1}, "spec.minMember", id="negative minMember"),
    pytest.param({"minSubGroup": 3, "subGroups": [{"name": "a"}, {"name": "b"}]},
                 "spec.minSubGroup: 3 is impossible",
                 id="more subgroups required than exist"),
    pytest.param({"queue": "parent"}, "spec.queue='parent'", id="non-leaf queue"),
])
def test_impossible_podgroups_are_refused(spec: dict[str, Any], fragment: str) -> None:
    problem = podgroup_problem({"metadata": {"name": "pg"}, "spec": spec}, QUEUES)
    assert problem is not None and fragment in problem


def test_mutation_links_fractional_pods_and_fills_the_queue() -> None:
    ops = pod_patch(pod({"gpu-fraction": "0.5"}, queue=None), MutationOptions(runtime_class="nvidia"), "team-a",
                    "abcdefg")
    by_path = {op["path"]: op["value"] for op in ops}
    assert by_path["/metadata/annotations"]["runai/shared-gpu-configmap"] == "p-abcdefg-shared-gpu"
    assert by_path["/metadata/labels"] == {"kai.scheduler/queue": "team-a"}
    assert by_path["/spec/runtimeClassName"] == "nvidia"
    assert by_path["/spec/containers"][0]["envFrom"][0]["configMapRef"]["name"] == "p-abcdefg-shared-gpu-0-evar"
    assert pod_patch(pod(), MutationOptions(), None, "abcdefg") == [], "a whole-GPU pod with a queue is untouched"
    invalid = pod({"gpu-fraction": "7"})
    assert pod_patch(invalid, MutationOptions(), None, "abcdefg") == [], "invalid: validation refuses it"
