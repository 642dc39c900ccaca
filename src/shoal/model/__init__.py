"""shoal.model: the snapshot types every layer reads (ids, resources, nodes, pods, groups, queues)."""

from shoal.model.node import Node, Taint
from shoal.model.pod import GpuRequest, Pod, Toleration
from shoal.model.podgroup import PodGroup, PodSetSpec, SubGroupSetSpec
from shoal.model.queue import Queue, QueueResource
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import PodStatus
from shoal.model.topology import Topology, TopologyConstraint

__all__ = [
    "ClusterSnapshot", "GpuRequest", "Node", "Pod", "PodGroup", "PodSetSpec",
    "PodStatus", "Queue", "QueueResource", "SubGroupSetSpec", "Taint", "Toleration", "Topology",
    "TopologyConstraint",
]
