"""The scheduler's cache: informer events in, model objects kept current, `ClusterSnapshot` out.

Each event converts only the object that changed, so a cycle's snapshot costs list copies, not
re-decoding every running pod. Pod group ids in the snapshot are `namespace/name` keys (explicit
PodGroups) or `pod:<uid>` (a pod naming no PodGroup: its own gang of one), so pods can point at
their gang before the PodGroup object arrives.

Pods of other schedulers that sit on a node are kept as Running pods of one synthetic,
non-preemptible job in no queue: the session then counts them in node usage (idle is right), no
action ever takes them as victims, and `other_used` also subtracts them from the queue totals.

Binds in flight are *assumed*: the pod is Binding on its node in every snapshot until the watch
shows it bound (or the assumption is forgotten after a failed bind or a timeout), so two cycles
never promise the same GPU twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.kai.crds import implicit_podgroup, implicit_uid, podgroup_from, queue_from, topology_from
from shoal.kai.names import PODGROUP_ANNOTATION
from shoal.kai.nodes import node_from
from shoal.kai.objects import JSON, meta
from shoal.kai.pods import mutable_fields, placed_pod_from, pod_from, with_placement
from shoal.kai.volumes import pv_from, pvc_from, storage_class_from
from shoal.kube.other_pods import OTHER_JOB, other_group, other_usage
from shoal.kube.problems import Problem, problem_of, why
from shoal.kube.watch_event import change_of
from shoal.model.node import Node
from shoal.model.pod import Pod
from shoal.model.podgroup import PodGroup
from shoal.model.queue import Queue
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import PodStatus
from shoal.model.topology import Topology
from shoal.model.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass

logger = logging.getLogger(__name__)

ASSUME_TTL = 30.0


@dataclass(slots=True)
class ClusterCache:
    scheduler_name: str
    clock: Callable[[], float]
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    #: What each of our pods was decoded from (`kai.pods.mutable_fields`: placement, the rest).
    signatures: dict[str, tuple[tuple[object, ...], tuple[object, ...]]] = field(default_factory=dict)
    other: dict[str, Pod] = field(default_factory=dict)
    podgroups: dict[str, PodGroup] = field(default_factory=dict)
    podgroup_objs: dict[str, JSON] = field(default_factory=dict)
    implicit: dict[str, PodGroup] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    queue_objs: dict[str, JSON] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[tuple[str, str], PersistentVolumeClaim] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    priorities: dict[str, int] = field(default_factory=dict)
    global_default: int | None = None
    problems: dict[tuple[str, str], Problem] = field(default_factory=dict)
    assumed: dict[str, tuple[Pod, float]] = field(default_factory=dict)
    pods_by_job: dict[str, set[str]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    generation: int = 0
    #: With the pod grouper on, pending pods wait for their PodGroup instead of being gangs of one.
    require_podgroup: bool = False
    held: dict[str, JSON] = field(default_factory=dict)
    ungroupable: set[str] = field(default_factory=set)

    # -- informer handlers -------------------------------------------------------------------
    def on_pod(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        obj = new or old
        if obj is None:
            return
        m = meta(obj)
        uid = str(m.get("uid"))
        if kind == "DELETED" or new is None:
            self._drop_pod(uid)
            self.ungroupable.discard(uid)
            self._touch()
            return
        spec = new.get("spec") or {}
        if spec.get("schedulerName") != self.scheduler_name:
            self._set_other(uid, new)
            return
        self._set_ours(uid, new)

    def _set_ours(self, uid: str, obj: JSON) -> None:
        m = meta(obj)
        ns, name = str(m.get("namespace", "")), str(m.get("name"))
        pg_name = (m.get("annotations") or {}).get(PODGROUP_ANNOTATION)
        if (not pg_name and self.require_podgroup and uid not in self.ungroupable
                and not (obj.get("spec") or {}).get("nodeName")):
            self._drop_pod(uid)
            self.held[uid] = obj  # the grouper will annotate it (or give up: mark_ungroupable)
            return
        self.held.pop(uid, None)
        sig = mutable_fields(obj)
        old_sig = self.signatures.get(uid)
        if old_sig == sig and uid in self.pods:
            return  # only status noise changed: nothing to re-derive
        job = f"{ns}/{pg_name}" if pg_name else implicit_uid(uid)
        prev = self.pods.get(uid)
        try:
            same_rest = prev is not None and prev.job == job and old_sig is not None and old_sig[1] == sig[1]
            pod = with_placement(prev, obj) if prev is not None and same_rest else pod_from(obj, job)
        except Exception as e:
            self._drop_pod(uid)
            self.problems[("Pod", uid)] = Problem("Pod", ns, name, uid, why(e))
            if (obj.get("spec") or {}).get("nodeName"):
                # Already on a node (e.g. annotations edited after binding): it still holds its
                # resources, so it counts as used like another scheduler's pod, never as free.
                self._set_other(uid, obj)
            self._touch()
            return
        self.problems.pop(("Pod", uid), None)
        if not pg_name:
            try:
                self.implicit[job] = implicit_podgroup(obj, self.priorities, self.global_default)
            except Exception as e:
                self.problems[("Pod", uid)] = Problem("Pod", ns, name, uid, why(e))
                self._drop_pod(uid)
                self._touch()
                return
        if prev is not None and prev.job != job:
            self._unindex(uid, prev.job)
        self.pods[uid] = pod
        self.signatures[uid] = sig
        self.pods_by_job.setdefault(job, set()).add(uid)
        if pod.node is not None or pod.status != PodStatus.PENDING:
            self.assumed.pop(uid, None)
        # Relevant to the next cycle: new demand, or capacity freed / taken.
        if prev is None or prev.status != pod.status or prev.node != pod.node:
            self._touch()

    def _set_other(self, uid: str, obj: JSON) -> None:
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            if self.other.pop(uid, None) is not None:
                self._touch()
            return
        prev = self.other.get(uid)
        m = meta(obj)
        if prev is not None and prev.labels == (m.get("labels") or {}) and \
                (prev.status == PodStatus.RELEASING) == bool(m.get("deletionTimestamp")):
            return  # requests, terms and ports of a bound pod do not change; labels may
        self.other[uid] = placed_pod_from(obj, OTHER_JOB)
        self._touch()

    def mark_ungroupable(self, uid: str) -> None:
        """The grouper cannot derive a PodGroup for this pod: schedule it as a gang of one."""
        self.ungroupable.add(uid)
        obj = self.held.pop(uid, None)
        if obj is not None:
            self._set_ours(uid, obj)
            self._touch()

    def _drop_pod(self, uid: str) -> None:
        self.held.pop(uid, None)
        pod = self.pods.pop(uid, None)
        self.other.pop(uid, None)
        self.signatures.pop(uid, None)
        self.assumed.pop(uid, None)
        self.problems.pop(("Pod", uid), None)
        if pod is not None:
            self._unindex(uid, pod.job)

    def _unindex(self, uid: str, job: str) -> None:
        members = self.pods_by_job.get(job)
        if members is not None:
            members.discard(uid)
            if not members:
                del self.pods_by_job[job]
                self.implicit.pop(job, None)

    def on_node(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.nodes.pop(name, None)
        else:
            node = node_from(new)
            self.problems.pop(("Node", name), None)
            prev = self.nodes.get(name)
            self.nodes[name] = node
            if prev is not None and (prev.allocatable, prev.ready, prev.unschedulable, prev.labels,
                                     prev.taints) == (node.allocatable, node.ready, node.unschedulable,
                                                      node.labels, node.taints):
                return  # heartbeats do not change scheduling
        self._touch()

    def on_queue(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.queues.pop(name, None)
            self.queue_objs.pop(name, None)
            self.problems.pop(("Queue", name), None)
        else:
            self.queue_objs[name] = new
            if (old or {}).get("spec") == new.get("spec") and name in self.queues:
                return  # a status write (ours) changes nothing
            try:
                self.queues[name] = queue_from(new)
                self.problems.pop(("Queue", name), None)
            except Exception as e:
                self.queues.pop(name, None)
                self.problems[("Queue", name)] = Problem("Queue", "", name, str(meta(new).get("uid")), why(e))
        self._touch()

    def on_podgroup(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        key, new = c.key, c.obj
        if new is None:
            self.podgroups.pop(key, None)
            self.podgroup_objs.pop(key, None)
            self.problems.pop(("PodGroup", key), None)
        else:
            self.podgroup_objs[key] = new
            if (old or {}).get("spec") == new.get("spec") and key in self.podgroups and \
                    (meta(old or {}).get("annotations") == meta(new).get("annotations")) and \
                    (_conditions(old) == _conditions(new) or (new.get("spec") or {}).get("schedulingBackoff") != 1):
                return
            self._convert_podgroup(key, new)
        self._touch()

    def _convert_podgroup(self, key: str, obj: JSON) -> None:
        m = meta(obj)
        try:
            pg = podgroup_from(obj, self.priorities, self.global_default)
            self.problems.pop(("PodGroup", key), None)
        except Exception as e:
            # Kept as an invalid gang: the core then explains it on every one of its pods.
            pg = PodGroup(uid=key, name=str(m.get("name")), namespace=str(m.get("namespace", "")),
                          queue=str((obj.get("spec") or {}).get("queue") or ""), priority=0,
                          preemptible=True, creation=0.0, invalid_reasons=[why(e)])
            self.problems[("PodGroup", key)] = Problem("PodGroup", pg.namespace, pg.name,
                                                       str(m.get("uid")), why(e))
        pg.uid = key
        self.podgroups[key] = pg

    def on_topology(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.topologies.pop(name, None)
        else:
            try:
                self.topologies[name] = topology_from(new)
            except Exception as e:
                self.topologies.pop(name, None)
                self.problems[("Topology", name)] = Problem("Topology", "", name, "", why(e))
        self._touch()

    def on_namespace(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        """Namespace labels, for the namespace selectors of inter-pod terms."""
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.namespaces.pop(name, None)
        else:
            labels = dict(meta(new).get("labels") or {})
            if self.namespaces.get(name) == labels:
                return
            self.namespaces[name] = labels
        self._touch()

    def on_volume(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        """PersistentVolumes (node affinity, claimRef) for the volume-binding filter."""
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.volumes.pop(name, None)
        else:
            self.volumes[name] = pv_from(new)
        self._touch()

    def on_claim(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        key, new = c.pair, c.obj
        if new is None:
            self.claims.pop(key, None)
        else:
            self.claims[key] = pvc_from(new)
        self._touch()

    def on_storage_class(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.storage_classes.pop(name, None)
        else:
            self.storage_classes[name] = storage_class_from(new)
        self._touch()

    def assume_volume(self, pv: str, namespace: str, claim: str) -> None:
        """A PV we pre-bound to a claim: taken from now on, before its watch event arrives."""
        vol = self.volumes.get(pv)
        if vol is not None:
            self.volumes[pv] = dataclasses.replace(vol, claim=(namespace, claim))

    def on_priority_class(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.priorities.pop(name, None)
        else:
            self.priorities[name] = int(new.get("value", 0))
        if new is not None and new.get("globalDefault"):
            self.global_default = int(new.get("value", 0))
        # Priorities feed every gang's order: re-derive them (rare event).
        for key, pg_obj in self.podgroup_objs.items():
            self._convert_podgroup(key, pg_obj)
        self._touch()

    def handler_failed(self, kind: str, obj: JSON, error: Exception) -> None:
        """A handler raised on `obj` (a decoding gap): record it as a problem; a node or volume
        object that cannot be read is dropped (its capacity is unknown: nothing is placed there)."""
        p = problem_of(kind, obj, error)
        key = p.uid if kind == "Pod" else (f"{p.namespace}/{p.name}" if p.namespace else p.name)
        self.problems[(kind, key)] = p
        {"Node": self.nodes, "PersistentVolume": self.volumes, "StorageClass": self.storage_classes}.get(
            kind, {}).pop(p.name, None)
        self._touch()

    def _touch(self) -> None:
        self.generation += 1
        self.changed.set()

    # -- binds in flight ---------------------------------------------------------------------
    def assume(self, uid: str, node: str, groups: tuple[str, ...]) -> None:
        """Treat `uid` as Binding on `node` until the watch confirms it or `forget` is called."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        bound = dataclasses.replace(pod, status=PodStatus.BINDING, node=node, gpu_groups=list(groups))
        self.assumed[uid] = (bound, self.clock() + ASSUME_TTL)

    def node_of(self, uid: str) -> str | None:
        """The node `uid` is bound to, or being bound to by a bind of ours in flight (assumed, the
        watch not yet caught up); None for a pod bound nowhere or unknown."""
        if uid in self.assumed:
            return self.assumed[uid][0].node
        pod = self.pods.get(uid)
        return pod.node if pod is not None else None

    def forget(self, uid: str) -> None:
        if self.assumed.pop(uid, None) is not None:
            self._touch()

    # -- snapshot ----------------------------------------------------------------------------
    def snapshot(self) -> ClusterSnapshot:
        """The cluster as the next cycle sees it (model objects are shared, never mutated here)."""
        now = self.clock()
        for uid, (_, deadline) in list(self.assumed.items()):
            if deadline < now:
                del self.assumed[uid]
        pods = [self.assumed[uid][0] if uid in self.assumed else p for uid, p in self.pods.items()]
        podgroups = list(self.podgroups.values()) + list(self.implicit.values())
        other_used: dict[str, dict[str, int]] = {}
        if self.other:
            pods.extend(self.other.values())
            podgroups.append(other_group())
            other_used = other_usage(self.other.values())
        return ClusterSnapshot(now=now, nodes=list(self.nodes.values()), pods=pods, podgroups=podgroups,
                               queues=list(self.queues.values()), topologies=list(self.topologies.values()),
                               other_used=other_used, namespace_labels=self.namespaces,
                               volumes=self.volumes, claims=self.claims, storage_classes=self.storage_classes)

    def pending_pods_of(self, job: str) -> list[Pod]:
        """The gang's pods that wait for a node (not Binding in flight either)."""
        pods = (self.pods.get(uid) for uid in self.pods_by_job.get(job, ()))
        return [p for p in pods if p is not None and p.status == PodStatus.PENDING and p.uid not in self.assumed]


def _conditions(obj: JSON | None) -> object:
    """A PodGroup's scheduling conditions (schedulingBackoff reads them)."""
    return ((obj or {}).get("status") or {}).get("schedulingConditions")
