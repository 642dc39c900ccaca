"""The `ClusterSnapshot`: everything one scheduling cycle reads. The core never mutates it."""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.model.dra import ResourceClaim, ResourceSlice
from shoal.model.node import Node
from shoal.model.pod import Pod
from shoal.model.podgroup import PodGroup
from shoal.model.podmix import MixEntry
from shoal.model.queue import Queue
from shoal.model.topology import Topology
from shoal.model.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass


@dataclass(slots=True)
class ClusterSnapshot:
    """Nodes, pods, pod groups, queues and topologies at time `now` (seconds, any epoch).

    History fields (what the adapter remembers between cycles, `shoal.history`): `usage` is the
    time-decayed historical usage per queue and resource (`gpu`, `cpu`, `memory`), normalised to
    cluster capacity (0..1); empty = no time-based fair share. `pod_mix` is the mix of pods seen
    recently (empty = none learned: ``fragaware`` falls back to its `mix` argument, then to the
    snapshot's own pods), `pods_departed` whether pods seen before have left since.
    `other_used` is what pods of other schedulers use per node (resource name -> amount).
    """

    now: float
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    podgroups: list[PodGroup] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    pod_mix: list[MixEntry] = field(default_factory=list)
    pods_departed: bool = False
    other_used: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Labels of each namespace, for the namespace selectors of inter-pod terms (a namespace not
    #: listed has no labels).
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Persistent volumes by name, claims by (namespace, name), storage classes by name.
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[tuple[str, str], PersistentVolumeClaim] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    #: DRA ResourceClaims by (namespace, name); see shoal.model.dra.
    resource_claims: dict[tuple[str, str], ResourceClaim] = field(default_factory=dict)
    #: DRA ResourceSlices (node-bound devices). None at all = devices are not modelled: claims are
    #: then checked for existence, consumers and queue label only.
    resource_slices: list[ResourceSlice] = field(default_factory=list)
