"""The workload map: owner objects (plain dicts) -> KAI PodGroup specs. Pure and offline.

Entry points: `derive_podgroups` (owner chain + pod -> PodGroupSpecs), `resolve_owner_chain` (follow
ownerReferences through a lookup callback), `pod_assignment` / `pod_metadata_patch` (which PodGroup and
subgroup a pod joins). Errors are `WorkloadError`. Rules per kind: docs/workloads.md.
"""

from shoal.workloads.errors import WorkloadError
from shoal.workloads.owners import OwnerKey, OwnerLookup, controller_owner, resolve_owner_chain
from shoal.workloads.registry import GROUPERS, SKIPPED_TOP_OWNERS, derive_podgroups
from shoal.workloads.spec import (
    POD_GROUP_NAME_ANNOTATION,
    PODGROUP_API_VERSION,
    SUBGROUP_NAME_LABEL,
    OwnerRef,
    PodGroupSpec,
    PodSelector,
    SubGroupSpec,
    TopologyConstraint,
    pod_assignment,
    pod_metadata_patch,
)
from shoal.workloads.templates import standin_pod

__all__ = [
    "GROUPERS",
    "PODGROUP_API_VERSION",
    "POD_GROUP_NAME_ANNOTATION",
    "SKIPPED_TOP_OWNERS",
    "SUBGROUP_NAME_LABEL",
    "OwnerKey",
    "OwnerLookup",
    "OwnerRef",
    "PodGroupSpec",
    "PodSelector",
    "SubGroupSpec",
    "TopologyConstraint",
    "WorkloadError",
    "controller_owner",
    "derive_podgroups",
    "pod_assignment",
    "pod_metadata_patch",
    "resolve_owner_chain",
    "standin_pod",
]
