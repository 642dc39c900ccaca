"""The workload map's output: frozen PodGroup specs, their KAI manifests, and pod-to-(sub)group assignment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.workloads.errors import WorkloadError

PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
POD_GROUP_NAME_ANNOTATION = "pod-group-name"
SUBGROUP_NAME_LABEL = "kai.scheduler/subgroup-name"

# A pod selector: (label key, allowed values) pairs, all of which must hold ("In" semantics, ANDed).
# An empty selector matches every pod.
PodSelector = tuple[tuple[str, tuple[str, ...]], ...]



def select(*pairs: tuple[str, str | Sequence[str]]) -> PodSelector:
    """Build a PodSelector from ``(key, value)`` or ``(key, [values...])`` pairs."""
    return tuple((key, (values,) if isinstance(values, str) else tuple(values)) for key, values in pairs)


def selector_matches(sel: PodSelector, labels: Mapping[str, str]) -> bool:
    """True when every key of ``sel`` is among ``labels`` with one of its allowed values."""
    return all(labels.get(key) in values for key, values in sel)


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """Topology-aware placement of a PodGroup or SubGroup (KAI `topologyConstraint`)."""

    topology: str
    required_level: str = ""
    preferred_level: str = ""

    def to_manifest(self) -> dict[str, str]:
        out = {"topology": self.topology}
        if self.required_level:
            out["requiredTopologyLevel"] = self.required_level
        if self.preferred_level:
            out["preferredTopologyLevel"] = self.preferred_level
        return out


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The object a PodGroup belongs to (its ownerReference)."""

    api_version: str
    kind: str
    name: str
    uid: str = ""

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        out["controller"] = True
        out["blockOwnerDeletion"] = True
        return out


@dataclass(frozen=True, slots=True)
class SubGroupSpec:
    """One node of a PodGroup's subgroup tree.

    ``pod_selector`` says which pods belong to this subgroup (used by `pod_assignment`; only leaves are
    assigned pods). It is not part of the KAI manifest.
    """

    name: str
    min_member: int
    parent: str | None = None
    topology_constraint: TopologyConstraint | None = None
    pod_selector: PodSelector = ()

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "minMember": self.min_member}
        if self.parent is not None:
            out["parent"] = self.parent
        if self.topology_constraint is not None:
            out["topologyConstraint"] = self.topology_constraint.to_manifest()
        return out


@dataclass(frozen=True, slots=True)
class PodGroupSpec:
    """A PodGroup the grouper must create or update for a workload.

    ``pod_selector`` narrows which of the workload's pods belong to this PodGroup when one workload maps to
    several (JobSet InOrder, LeaderWorkerSet groups); empty means "every pod of the workload".
    """

    name: str
    namespace: str
    min_member: int
    queue: str
    priority_class_name: str
    preemptibility: str
    owner_reference: OwnerRef
    sub_groups: tuple[SubGroupSpec, ...] = ()
    topology_constraint: TopologyConstraint | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    pod_selector: PodSelector = ()
    #: A pod matching no subgroup still belongs to this PodGroup, without a subgroup (KAI's Ray
    #: grouper logs it and goes on) instead of being an error.
    unmatched_pods_join: bool = False

    def to_manifest(self) -> dict[str, Any]:
        """The PodGroup object in KAI's ``scheduling.run.ai/v2alpha2`` form (empty fields omitted)."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            metadata["labels"] = dict(sorted(self.labels.items()))
        if self.annotations:
            metadata["annotations"] = dict(sorted(self.annotations.items()))
        metadata["ownerReferences"] = [self.owner_reference.to_manifest()]
        spec: dict[str, Any] = {"minMember": self.min_member, "queue": self.queue}
        if self.priority_class_name:
            spec["priorityClassName"] = self.priority_class_name
        if self.preemptibility:
            spec["preemptibility"] = self.preemptibility
        if self.sub_groups:
            spec["subGroups"] = [sg.to_manifest() for sg in self.sub_groups]
        if self.topology_constraint is not None:
            spec["topologyConstraint"] = self.topology_constraint.to_manifest()
        return {"apiVersion": PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata, "spec": spec}

    def leaf_sub_groups(self) -> tuple[SubGroupSpec, ...]:
        """Subgroups that no other subgroup names as parent (the ones pods are assigned to)."""
        parents = {sg.parent for sg in self.sub_groups if sg.parent is not None}
        return tuple(sg for sg in self.sub_groups if sg.name not in parents)


def _pod_labels(pod: Mapping[str, Any]) -> dict[str, str]:
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): str(v) for k, v in labels.items()}


def pod_assignment(pod: Mapping[str, Any], specs: Sequence[PodGroupSpec]) -> tuple[str, str | None]:
    """Which PodGroup, and which leaf subgroup, ``pod`` belongs to.

    Picks the first spec whose pod selector matches the pod's labels, then its first leaf subgroup whose
    selector matches (``None`` when the PodGroup has no subgroups, or when it lets unmatched pods join
    without one). Raises `WorkloadError` when no
    PodGroup, or no subgroup of a PodGroup that has subgroups, matches. Never mutates its inputs.
    """
    labels = _pod_labels(pod)
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    pod_name = f"{meta.get('namespace') or ''}/{meta.get('name') or '<unnamed>'}".lstrip("/")
    for spec in specs:
        if not selector_matches(spec.pod_selector, labels):
            continue
        if not spec.sub_groups:
            return spec.name, None
        for sg in spec.leaf_sub_groups():
            if selector_matches(sg.pod_selector, labels):
                return spec.name, sg.name
        if spec.unmatched_pods_join:
            return spec.name, None
        raise WorkloadError("Pod", pod_name, "metadata.labels",
                            f"matches no subgroup of PodGroup {spec.name}")
    raise WorkloadError("Pod", pod_name, "metadata.labels", "matches none of the derived PodGroups")


def pod_metadata_patch(pod: Mapping[str, Any], specs: Sequence[PodGroupSpec]) -> dict[str, Any]:
    """The metadata merge-patch the grouper applies to ``pod``: the `pod-group-name` annotation and,
    when the PodGroup has subgroups, the `kai.scheduler/subgroup-name` label."""
    group, sub = pod_assignment(pod, specs)
    meta: dict[str, Any] = {"annotations": {POD_GROUP_NAME_ANNOTATION: group}}
    if sub is not None:
        meta["labels"] = {SUBGROUP_NAME_LABEL: sub}
    return {"metadata": meta}
