"""Session-side DRA state (kai-spec §3.15): the claims of the snapshot, who consumes them, and
the node-bound devices they hold.

A claim may be reserved for at most `MAX_CLAIM_CONSUMERS` pods. The snapshot gives the pods it
is reserved for already; pods that reference it and are placed during this session (allocated
or pipelined from Pending) are counted on top, so a rollback frees their places automatically.

Devices (`DraDevices`) are derived the same way, from where the claims' consumers are now: a claim
holds devices on the node of a consumer that is placed (a pod of the same gang placed earlier in
the same statement included), so rolling the statement back frees them with no bookkeeping.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import Task
from shoal.model.dra import MAX_CLAIM_CONSUMERS, QUEUE_LABEL, ResourceClaim, ResourceSlice
from shoal.model.status import ACTIVE_ALLOCATED, PodStatus

ClaimKey = tuple[str, str]


class DraState:
    """The claims of one session and, per claim, the tasks that reference it."""

    def __init__(self, claims: dict[tuple[str, str], ResourceClaim], tasks: list[Task]) -> None:
        self.claims = claims
        self.consumers: dict[tuple[str, str], list[Task]] = {}
        for task in tasks:
            for name in task.pod.resource_claims:
                self.consumers.setdefault((task.pod.namespace, name), []).append(task)

    def new_consumers(self, key: tuple[str, str], besides: Task) -> int:
        """Pods placed on the claim in this session (pending in the snapshot), `besides` excluded."""
        return sum(1 for t in self.consumers.get(key, ())
                   if t is not besides and t.pod.status == PodStatus.PENDING and t.status & ACTIVE_ALLOCATED)

    def check(self, task: Task) -> str | None:
        """Why the task cannot be placed because of its claims, or None."""
        pod = task.pod
        queue = task.job.pg.queue
        for name in pod.resource_claims:
            key = (pod.namespace, name)
            claim = self.claims.get(key)
            if claim is None:
                return f"resource claim {pod.namespace}/{name} not found"
            if claim.unusable:
                return claim.unusable
            # A pod running already is among the claim's reserved_for; a pending one needs a place.
            taken = claim.reserved_for + self.new_consumers(key, task) + (pod.status == PodStatus.PENDING)
            if taken > MAX_CLAIM_CONSUMERS:
                return (f"resource claim {pod.namespace}/{name} is reserved for the maximum of "
                        f"{MAX_CLAIM_CONSUMERS} pods")
            if claim.gpus and not claim.from_template and claim.labels.get(QUEUE_LABEL) != queue:
                return (f"shared GPU resource claim {pod.namespace}/{name} has queue label "
                        f"{claim.labels.get(QUEUE_LABEL)!r}, the job's queue is {queue!r}")
            # The adapter says which devices the claim accepts: too few anywhere is not a matter of
            # nodes (free or not), so say so once, naming the claim.
            if claim.eligible is not None and not claim.allocated and len(claim.eligible) < claim.count:
                return (f"resource claim {pod.namespace}/{name} cannot be satisfied: {len(claim.eligible)} "
                        f"devices in the cluster match its requests, {claim.count} wanted")
            if claim.nodes is not None and not claim.nodes and not claim.allocated:
                return (f"resource claim {pod.namespace}/{name} cannot be satisfied on any node (its "
                        f"alternatives and matchAttribute constraints)")
        return None


def _holds(task: Task) -> bool:
    """The task keeps its claims' devices where it is: placed and not evicted in this session (a
    pod already terminating in the snapshot still holds them; KAI deallocates on eviction)."""
    if task.node < 0:
        return False
    return bool(task.status & ACTIVE_ALLOCATED) or task.pod.status == PodStatus.RELEASING


class DraDevices:
    """DRA devices (ResourceSlices) and what the claims hold of them, right now.

    A claim holds devices on the node of each consumer that is placed (`count` of them, or its
    allocated devices if they are there); a claim none of whose consumers is placed holds nothing
    (KAI deallocates a claim when its pod is evicted; the pods are recreated pending), unless no pod
    of ours consumes it: then it holds what the snapshot says it is allocated. A pending pod may go
    where each of its claims either is held already (bound there: no new device) or finds enough
    free devices.

    Network-attached devices (a slice's `reach`) count on every node they reach, once: a claim
    allocated to them holds those very devices; a claim newly held on a node takes the node's own
    free devices first, then free network-attached ones it reaches (the first in order)."""

    def __init__(self, slices: list[ResourceSlice], node_index: dict[str, int], dra: DraState) -> None:
        self.dra = dra
        self.n = len(node_index)
        self.node_index = node_index
        self.device_row: dict[str, int] = {}
        #: Network-attached devices: id -> row of `reach`, rows = devices, columns = nodes it reaches.
        self.net_index: dict[str, int] = {}
        reach: list[np.ndarray] = []
        for sl in slices:
            if sl.reach is not None:
                rows = [node_index[n] for n in sl.reach if n in node_index]
                for dev in sl.device_ids():
                    self.net_index[dev] = len(reach)
                    mask = np.zeros(self.n, dtype=bool)
                    mask[rows] = True
                    reach.append(mask)
                continue
            row = node_index.get(sl.node)
            if row is not None:  # a slice of a node outside the snapshot offers nothing here
                for dev in sl.device_ids():
                    self.device_row[dev] = row
        self.reach = np.array(reach, dtype=bool).reshape(len(reach), self.n)
        self.total = np.bincount(np.fromiter(self.device_row.values(), dtype=np.int64),
                                 minlength=self.n).astype(np.int64)
        # What does not change during the session, per claim: the rows of its allocated node-local
        # devices, its allocated network-attached devices, and whether others hold it.
        self.allocated_rows = {key: [self.device_row[d] for d in c.allocated if d in self.device_row]
                               for key, c in dra.claims.items()}
        self.allocated_net = {key: [self.net_index[d] for d in c.allocated if d in self.net_index]
                              for key, c in dra.claims.items()}
        self.foreign = {key: self._foreign(key) for key in dra.claims}

    def _foreign(self, key: ClaimKey) -> bool:
        """The claim is held by pods we do not schedule: no pod of ours uses it, or (when the adapter
        says whom it is reserved for) it is reserved for a pod that is not ours, such as a pod of
        another scheduler sharing it or one of ours that is gone and not released yet."""
        consumers = self.dra.consumers.get(key)
        if not consumers:
            return True
        ours = {t.pod.uid for t in consumers}
        return any(uid not in ours for uid in self.dra.claims[key].reserved_by)

    def held_on(self, key: ClaimKey, besides: Task | None = None) -> list[int]:
        """Rows where the claim holds devices now (`besides` not counted as a holder): where its
        placed consumers are, and where it is allocated if others hold it too."""
        rows = {t.node for t in self.dra.consumers.get(key, ()) if t is not besides and _holds(t)}
        if self.foreign[key]:
            rows.update(self.allocated_rows[key])
        return sorted(rows)

    def _usage(self) -> tuple[np.ndarray, np.ndarray]:
        """Node-local devices taken per node, and which network-attached devices are taken."""
        taken = np.zeros(self.n, dtype=np.int64)
        net_taken = np.zeros(len(self.net_index), dtype=bool)
        fresh: list[tuple[int, int]] = []
        for key, claim in self.dra.claims.items():
            rows = self.held_on(key)
            net = self.allocated_net[key]
            if net and (rows or self.foreign[key]):
                net_taken[net] = True
            for row in rows:
                # its snapshot allocation if all of it is here, else a fresh `count` here
                own = self.allocated_rows[key].count(row)
                if (own or net) and own + len(net) == len(claim.allocated):
                    taken[row] += own
                else:
                    fresh.append((row, claim.count))
        for row, count in fresh:
            local = min(count, max(int(self.total[row] - taken[row]), 0)) if len(self.net_index) else count
            taken[row] += local
            if count > local:
                free_here = np.flatnonzero(self.reach[:, row] & ~net_taken)[:count - local]
                net_taken[free_here] = True
                taken[row] += count - local - len(free_here)  # none left: the node is over-committed
        return taken, net_taken

    def free(self) -> np.ndarray:
        """Devices per node not held by any claim, network-attached ones it reaches included."""
        return self._free(*self._usage())

    def _free(self, taken: np.ndarray, net_taken: np.ndarray) -> np.ndarray:
        free: np.ndarray = self.total - taken + self.reach[~net_taken].sum(axis=0, dtype=np.int64)
        return free

    def bound_mask(self, task: Task) -> tuple[np.ndarray, str] | None:
        """Where the task may go for its claims that are held already: only their node(s)."""
        mask: np.ndarray | None = None
        for key in self._keys(task):
            rows = self.held_on(key, task)
            if rows:
                here = np.zeros(self.n, dtype=bool)
                here[rows] = True
                mask = here if mask is None else mask & here
        return None if mask is None else (mask, "a resource claim of the pod is allocated on another node")

    def devices_mask(self, task: Task) -> tuple[np.ndarray, str] | None:
        """Nodes with enough free devices for the task's claims that are not held yet."""
        keys = [key for key in self._keys(task) if not self.held_on(key, task)]
        need = sum(self.dra.claims[key].count for key in keys)
        if not need:
            return None
        usage = self._usage()
        mask = self._free(*usage) >= need
        picky = [self.dra.claims[key] for key in keys if self.dra.claims[key].eligible is not None]
        if picky:
            taken, net_taken = self._taken(), usage[1]
            for claim in picky:
                if claim.nodes is not None:  # where its alternatives and constraints can be met at all
                    mask &= np.isin(np.arange(self.n), [self.node_index[n] for n in claim.nodes
                                                        if n in self.node_index])
                ids = [d for d in claim.eligible or () if d not in taken]
                rows = [self.device_row[d] for d in ids if d in self.device_row]
                count = np.bincount(np.asarray(rows, dtype=np.int64), minlength=self.n)[:self.n]
                net = [self.net_index[d] for d in ids if d in self.net_index and not net_taken[self.net_index[d]]]
                mask &= count + self.reach[net].sum(axis=0, dtype=np.int64) >= claim.count
            return mask, (f"not enough free DRA devices matching the pod's claims on the node (they need {need})")
        return mask, f"not enough free DRA devices on the node (the pod's claims need {need})"

    def _taken(self) -> set[str]:
        """Devices allocated to claims that hold them now."""
        return {d for key, claim in self.dra.claims.items() if claim.allocated and self.held_on(key)
                for d in claim.allocated}

    def _keys(self, task: Task) -> list[ClaimKey]:
        keys = [(task.pod.namespace, name) for name in task.pod.resource_claims]
        return [k for k in dict.fromkeys(keys) if k in self.dra.claims]  # unknown claims: the pre-predicate says
