"""The default grouper: queue, priority, preemptibility, topology, name and owner shared by every kind.

Every kind-specific grouper starts from `base_spec` and overrides what its kind decides (min members,
subgroups, name, default priority). Rules follow KAI's DefaultGrouper (kai-spec §6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shoal.workloads.spec import OwnerRef, PodGroupSpec, TopologyConstraint
from shoal.workloads.unstructured import View

QUEUE_LABEL = "kai.scheduler/queue"
PROJECT_LABEL = "project"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
PRIORITY_LABEL = "priorityClassName"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/topology-required-placement"
TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/topology-preferred-placement"
SEGMENT_SIZE_ANNOTATION = "kai.scheduler/segment-size"
SEGMENT_REQUIRED_ANNOTATION = "kai.scheduler/segment-topology-required-placement"
SEGMENT_PREFERRED_ANNOTATION = "kai.scheduler/segment-topology-preferred-placement"
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible")

# Metadata never copied from the owner onto the PodGroup: client bookkeeping, not workload intent.
_NOT_COPIED = ("kubectl.kubernetes.io/last-applied-configuration",)

DEFAULT_PRIORITY = "train"


@dataclass(frozen=True)
class Context:
    """Everything a grouper may read. ``top`` is the effective top owner (after skip-top-owner kinds);
    ``owners`` is the chain up to and including it, direct owner first; ``pod`` is the real pod or a
    stand-in built from the owner's pod template (``pod_is_real`` tells which)."""

    top: View
    owners: tuple[View, ...]
    pod: View
    pod_is_real: bool
    priority_classes: Mapping[str, int] | None
    default_queue: str
    sibling_pods: tuple[Mapping[str, Any], ...] = field(default=())

    @property
    def top_labels(self) -> dict[str, str]:
        return self.top.labels()

    @property
    def pod_labels(self) -> dict[str, str]:
        return self.pod.labels()

    @property
    def pod_annotations(self) -> dict[str, str]:
        return self.pod.annotations()

    @property
    def namespace(self) -> str:
        return (self.top.string("metadata", "namespace", default="")
                or self.pod.string("metadata", "namespace", default="") or "default")


def object_name(view: View) -> str:
    """``metadata.name`` of ``view``, required and non-empty."""
    name = view.string("metadata", "name")
    if not name:
        raise view.error("metadata.name", "must not be empty")
    return name


def podgroup_name(view: View, *suffix: str) -> str:
    """KAI's ``pg-<name>-<uid>`` (``pg-<name>`` for an object read from a file, which has no uid yet)."""
    parts = ["pg", object_name(view)]
    uid = view.string("metadata", "uid", default="")
    if uid:
        parts.append(uid)
    return "-".join([*parts, *suffix])


def owner_ref(view: View) -> OwnerRef:
    """The ownerReference a PodGroup carries to ``view``."""
    return OwnerRef(
        api_version=view.string("apiVersion", default="v1"),
        kind=view.string("kind", default="Pod"),
        name=object_name(view),
        uid=view.string("metadata", "uid", default=""),
    )


def queue_for(ctx: Context) -> str:
    """Queue label on the top owner, then the pod; then ``<project>[-<node-pool>]``; then the default."""
    for labels in (ctx.top_labels, ctx.pod_labels):
        if labels.get(QUEUE_LABEL):
            return labels[QUEUE_LABEL]
    for labels in (ctx.top_labels, ctx.pod_labels):
        project = labels.get(PROJECT_LABEL)
        if project:
            pool = ctx.pod_labels.get(NODE_POOL_LABEL)
            return f"{project}-{pool}" if pool else project
    return ctx.default_queue


def _exists(ctx: Context, name: str) -> bool:
    return bool(name) and (ctx.priority_classes is None or name in ctx.priority_classes)


def priority_for(ctx: Context, default: str, owners: Sequence[View] | None = None) -> str:
    """First existing class among owner label, pod label, ``pod.spec.priorityClassName``; else ``default``.

    "Existing" means present in ``ctx.priority_classes`` when the caller supplied them (any non-empty
    name otherwise), so a typo in a label falls through instead of leaving the job unschedulable.
    """
    pod_label = ctx.pod_labels.get(PRIORITY_LABEL, "")
    pod_spec = ctx.pod.string("spec", "priorityClassName", default="")
    for owner in owners if owners is not None else (ctx.top,):
        for candidate in (owner.labels().get(PRIORITY_LABEL, ""), pod_label, pod_spec):
            if _exists(ctx, candidate):
                return candidate
    return default


def preemptibility_for(ctx: Context) -> str:
    """``kai.scheduler/preemptibility`` label on the top owner, then the pod; "" when unset."""
    for view in (ctx.top, ctx.pod):
        value = view.labels().get(PREEMPTIBILITY_LABEL)
        if value:
            if value not in PREEMPTIBILITY_VALUES:
                raise view.error(f"metadata.labels[{PREEMPTIBILITY_LABEL}]",
                                 f"must be one of {', '.join(PREEMPTIBILITY_VALUES)}, got {value!r}")
            return value
    return ""


def topology_from(view: View, annotations: Mapping[str, str], field_path: str,
                  required_key: str = TOPOLOGY_REQUIRED_ANNOTATION,
                  preferred_key: str = TOPOLOGY_PREFERRED_ANNOTATION,
                  topology: str | None = None) -> TopologyConstraint | None:
    """A topology constraint from annotations; None when no topology is named.

    A placement level without a topology name is an error (it could never be honoured).
    """
    name = topology if topology is not None else annotations.get(TOPOLOGY_ANNOTATION, "")
    required = annotations.get(required_key, "")
    preferred = annotations.get(preferred_key, "")
    if not name:
        if required or preferred:
            raise view.error(f"{field_path}[{TOPOLOGY_ANNOTATION}]",
                             "a topology placement level is set but no topology is named")
        return None
    return TopologyConstraint(topology=name, required_level=required, preferred_level=preferred)


def copied_metadata(values: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if k not in _NOT_COPIED}


def base_spec(ctx: Context, *, default_priority: str = DEFAULT_PRIORITY,
              owners: Sequence[View] | None = None) -> PodGroupSpec:
    """The DefaultGrouper's PodGroup for ``ctx``: named after the top owner, min 1, no subgroups."""
    return PodGroupSpec(
        name=podgroup_name(ctx.top),
        namespace=ctx.namespace,
        min_member=1,
        queue=queue_for(ctx),
        priority_class_name=priority_for(ctx, default_priority, owners),
        preemptibility=preemptibility_for(ctx),
        owner_reference=owner_ref(ctx.top),
        topology_constraint=topology_from(ctx.top, ctx.top.annotations(), "metadata.annotations"),
        labels=copied_metadata(ctx.top_labels),
        annotations=copied_metadata(ctx.top.annotations()),
    )


def with_min(spec: PodGroupSpec, view: View, field_path: str, minimum: int) -> PodGroupSpec:
    """``spec`` with min_member ``minimum``, which must be at least 1."""
    if minimum < 1:
        raise view.error(field_path, f"gang size must be >= 1, got {minimum}")
    return replace(spec, min_member=minimum)
