"""Stand-in pods: when no real pod is given, the owner's pod template (for its kind) plays the pod.

The stand-in carries the labels the workload's operator would put on its first pod (replica type and
index, Ray group, JobSet replicatedJob, LWS group/worker index), so that grouping rules that read pod
labels see what they would see on a real pod. Its name is ``<owner>-template`` (a placeholder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal.workloads.unstructured import View

_KUBEFLOW_SPECS = {
    "TFJob": "tfReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs", "JAXJob": "jaxReplicaSpecs",
}
_RAY_CLUSTER_PATHS = {
    "RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig"),
}


def _template_and_labels(top: View) -> tuple[View, dict[str, str]]:
    kind = top.string("kind", default="")
    if kind == "CronJob":
        return top.sub("spec", "jobTemplate", "spec", "template"), {}
    if kind in _KUBEFLOW_SPECS and top.string("apiVersion", default="").startswith("kubeflow.org/"):
        specs = top.sub("spec", _KUBEFLOW_SPECS[kind])
        roles = [str(r) for r in specs.obj]
        role = "Worker" if "Worker" in roles else (roles[0] if roles else "Worker")
        lower = role.lower()
        labels = {"training.kubeflow.org/replica-type": lower, "training.kubeflow.org/replica-index": "0",
                  "training.kubeflow.org/job-role": lower}
        return specs.sub(role, "template"), labels
    if kind in _RAY_CLUSTER_PATHS and top.string("apiVersion", default="").startswith("ray.io/"):
        head = top.sub(*_RAY_CLUSTER_PATHS[kind], "headGroupSpec", "template")
        return head, {"ray.io/node-type": "head", "ray.io/group": "headgroup"}
    if kind == "JobSet":
        jobs = top.items("spec", "replicatedJobs")
        if not jobs:
            return top.sub("spec", "template"), {}
        labels = {"jobset.sigs.k8s.io/replicatedjob-name": jobs[0].string("name", default=""),
                  "jobset.sigs.k8s.io/job-index": "0"}
        return jobs[0].sub("template", "spec", "template"), labels
    if kind == "LeaderWorkerSet":
        lwt = top.sub("spec", "leaderWorkerTemplate")
        template = lwt.sub("leaderTemplate") if lwt.has("leaderTemplate") else lwt.sub("workerTemplate")
        return template, {"leaderworkerset.sigs.k8s.io/group-index": "0",
                          "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    return top.sub("spec", "template"), {}


def standin_pod(top: View) -> dict[str, Any]:
    """A pod built from ``top``'s pod template; a Pod top owner is returned as is. Never mutates ``top``."""
    if top.string("kind", default="") == "Pod" and top.string("apiVersion", default="v1") == "v1":
        return dict(top.obj)
    template, operator_labels = _template_and_labels(top)
    meta = template.sub("metadata")
    labels = {**meta.string_map("labels"), **operator_labels}
    namespace = top.string("metadata", "namespace", default="")
    metadata: dict[str, Any] = {
        "name": f"{top.string('metadata', 'name', default='unnamed')}-template",
        "labels": labels,
        "annotations": meta.string_map("annotations"),
    }
    if namespace:
        metadata["namespace"] = namespace
    spec = template.obj.get("spec") if isinstance(template.obj, Mapping) else None
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": dict(spec) if isinstance(spec, Mapping) else {}}
