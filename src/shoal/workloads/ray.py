"""Grouper for KubeRay: RayCluster, RayJob and RayService — one gang of the head plus every worker group."""

from __future__ import annotations

from dataclasses import replace

from shoal.workloads.base import (
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    Context,
    base_spec,
    topology_from,
    with_min,
)
from shoal.workloads.spec import PodGroupSpec, SubGroupSpec, TopologyConstraint, select
from shoal.workloads.unstructured import View

RAY_GROUP_LABEL = "ray.io/group"
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
HEAD_GROUP = "headgroup"

# Where each top-owner kind keeps the RayCluster spec it creates (used when no RayCluster is in the chain).
_EMBEDDED_SPEC = {"RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig")}


def cluster_spec(ctx: Context) -> View:
    """The RayCluster spec the gang is computed from.

    A RayCluster top owner is its own; for RayJob/RayService the RayCluster found below it in the owner
    chain (the live one KubeRay created) is preferred, else the cluster spec embedded in the owner.
    """
    kind = ctx.top.string("kind")
    if kind == "RayCluster":
        return ctx.top.sub("spec", required=True)
    for owner in ctx.owners:
        if owner.string("kind", default="") == "RayCluster":
            return owner.sub("spec", required=True)
    return ctx.top.sub(*_EMBEDDED_SPEC[kind], required=True)


def _group_min(group: View, autoscaling: bool) -> int:
    """Pods a worker group needs in the gang: 0 when suspended, else (minReplicas when autoscaling or
    minReplicas > 0, else replicas) × numOfHosts."""
    if group.flag("suspend") or group.flag("suspended"):
        return 0
    replicas = group.integer("replicas", default=0)
    min_replicas = group.integer("minReplicas", default=0)
    if replicas < 0 or min_replicas < 0:
        raise group.error("replicas", "replicas and minReplicas must be >= 0")
    if min_replicas > replicas:
        raise group.error("minReplicas", f"must be <= replicas ({replicas}), got {min_replicas}")
    hosts = group.integer("numOfHosts", default=1)
    if hosts < 1:
        raise group.error("numOfHosts", f"must be > 0, got {hosts}")
    per_host = min_replicas if (autoscaling or min_replicas > 0) else replicas
    return per_host * hosts


def _template_topology(group: View) -> TopologyConstraint | None:
    ann = group.sub("template", "metadata").string_map("annotations")
    if not (ann.get(TOPOLOGY_REQUIRED_ANNOTATION) or ann.get(TOPOLOGY_PREFERRED_ANNOTATION)):
        return None  # a topology name alone is no constraint for a Ray group
    return topology_from(group, ann, "template.metadata.annotations")


def ray(ctx: Context) -> list[PodGroupSpec]:
    """min = 1 head + Σ worker groups; subgroups ``headgroup`` (1) and one per active worker group
    (``groupName`` or ``worker-group-<i>``). Label ``ray.io/priority-class-name`` on the top owner
    overrides the priority class."""
    spec_view = cluster_spec(ctx)
    head = spec_view.sub("headGroupSpec", required=True)
    groups = [SubGroupSpec(HEAD_GROUP, 1, topology_constraint=_template_topology(head),
                           pod_selector=select((RAY_GROUP_LABEL, HEAD_GROUP)))]
    autoscaling = spec_view.flag("enableInTreeAutoscaling")
    total = 1
    for i, group in enumerate(spec_view.items("workerGroupSpecs")):
        members = _group_min(group, autoscaling)
        replicas = group.integer("replicas", default=0)
        if members == 0 and (replicas == 0 or group.flag("suspend") or group.flag("suspended")):
            continue  # suspended or empty groups are not part of the gang
        name = group.string("groupName", default="") or f"worker-group-{i}"
        groups.append(SubGroupSpec(name, members, topology_constraint=_template_topology(group),
                                   pod_selector=select((RAY_GROUP_LABEL, name))))
        total += members
    spec = with_min(base_spec(ctx), ctx.top, "spec", total)
    override = ctx.top_labels.get(RAY_PRIORITY_LABEL)
    if override:
        spec = replace(spec, priority_class_name=override)
    # A pod without its `ray.io/group` label still belongs to the cluster's gang (KAI logs and goes on).
    return [replace(spec, sub_groups=tuple(groups), unmatched_pods_join=True)]
