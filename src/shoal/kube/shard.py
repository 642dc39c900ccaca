"""Scheduling shards (KAI's node pools): one `shoal run` per pool, each seeing only its pool.

A shard is a label key and a value (`shoal run --node-pool-label KEY --node-pool VALUE`, KAI's
`--nodepool-label-key` / `--partition-label-value`). Contract, as KAI's SchedulingShard:

* Nodes, Queues and PodGroups belong to the shard when their label KEY equals VALUE; with no VALUE
  the shard is the *default* one and owns the objects that lack the label KEY altogether. Their
  informers ask the API server for just those (a label selector), so a shard neither receives nor
  holds the other pools' nodes, queues and gangs.
* Pods are all watched (as KAI lists them all): a pod's gang is its PodGroup, so a pod is
  scheduled by the shard that owns its PodGroup; a pod naming no PodGroup (a gang of one) by the
  shard its own labels select. Pods of other schedulers count only on the shard's own nodes.
* The pod grouper groups only the pods whose labels select the shard, and copies the pod's pool
  label onto the PodGroup it creates (KAI's podgrouper does the same), so the gang lands in the
  pod's pool.
* Names a shard writes (leader Lease, report and usage ConfigMaps, event source) are
  `<scheduler-name>-<VALUE>` (KAI's component name), so shards never share a lease.

No KEY at all means no sharding: every object is seen (KAI's default key would instead select the
unlabelled objects; shoal keeps an unsharded instance seeing the whole cluster).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from shoal.kai.crds import implicit_uid
from shoal.kai.objects import JSON, meta
from shoal.kube.informer import Handler
from shoal.kube.other_pods import OTHER_JOB
from shoal.model.snapshot import ClusterSnapshot

#: KAI's default node-pool label key (constants.DefaultNodePoolLabelKey).
DEFAULT_NODE_POOL_LABEL = "kai.scheduler/node-pool"

#: Prefix of a gang of one's id (a pod naming no PodGroup).
_IMPLICIT = implicit_uid("")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Shard:
    """`label` empty = no sharding. `pool` empty with a `label` = the default shard (label absent)."""

    label: str = ""
    pool: str = ""

    def __post_init__(self) -> None:
        if self.label and (len(self.label) > 316 or not _KEY.match(self.label)):
            raise ValueError(f"node-pool label {self.label!r}: not a valid label key")
        if len(self.pool) > 63 or not _VALUE.match(self.pool):
            raise ValueError(f"node pool {self.pool!r}: not a valid label value")
        if self.pool and not self.label:
            raise ValueError("a node pool needs a node-pool label key")

    @property
    def active(self) -> bool:
        return bool(self.label)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels belongs to the shard."""
        if not self.label:
            return True
        labels = labels or {}
        if self.pool:
            return labels.get(self.label) == self.pool
        return self.label not in labels

    def owns(self, obj: JSON) -> bool:
        labels = meta(obj).get("labels")
        return self.matches(labels if isinstance(labels, Mapping) else None)

    def selector(self) -> str | None:
        """The API server's label selector for the shard's nodes, queues and PodGroups."""
        if not self.label:
            return None
        return f"{self.label}={self.pool}" if self.pool else f"!{self.label}"

    def component(self, base: str) -> str:
        """Name of what the shard writes (lease, ConfigMaps, event source): `base-pool`."""
        return f"{base}-{self.pool}" if self.pool else base

    def guard(self, handler: Handler) -> Handler:
        """`handler` seeing only the shard's objects: an object whose labels leave the shard is
        delivered as DELETED, one that enters it as ADDED. The API server already filters by
        `selector()`; this keeps the cache right whatever the server sends."""
        if not self.active:
            return handler

        def guarded(kind: str, old: JSON | None, new: JSON | None) -> None:
            if new is not None and not self.owns(new):
                if old is not None and self.owns(old):
                    handler("DELETED", old, None)
                return
            if new is not None and old is not None and not self.owns(old):
                kind, old = "ADDED", None
            if new is None and old is not None and not self.owns(old):
                return
            handler(kind, old, new)

        return guarded

    def groups_pod(self, pod: JSON) -> bool:
        """Whether the shard's pod grouper gives this pod a PodGroup."""
        return self.owns(pod)

    def pool_labels(self, pod: JSON) -> dict[str, str]:
        """The pool label a PodGroup created for `pod` carries (the pod's value of the key)."""
        key = self.label or DEFAULT_NODE_POOL_LABEL
        labels = meta(pod).get("labels")
        value = labels.get(key) if isinstance(labels, Mapping) else None
        return {key: value} if isinstance(value, str) else {}

    def narrow(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """The snapshot as the shard schedules it: other schedulers' pods only on the shard's nodes,
        gangs of one only for pods the shard's labels select. (Pods of PodGroups outside the shard
        have no gang in the snapshot: the core leaves them alone.)"""
        if not self.active:
            return snapshot
        nodes = {n.name for n in snapshot.nodes}
        dropped: set[str] = set()
        pods = []
        for p in snapshot.pods:
            if p.job == OTHER_JOB:
                if p.node not in nodes:
                    continue
            elif p.job.startswith(_IMPLICIT) and not self.matches(p.labels):
                dropped.add(p.job)
                continue
            pods.append(p)
        other_used = {n: used for n, used in snapshot.other_used.items() if n in nodes}
        podgroups = [g for g in snapshot.podgroups if g.uid not in dropped] if dropped else snapshot.podgroups
        return replace(snapshot, pods=pods, podgroups=podgroups, other_used=other_used)
