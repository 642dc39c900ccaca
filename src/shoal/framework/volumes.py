"""Persistent volume claims as a placement constraint, as kube-scheduler's VolumeBinding plugin.

For each claim of a pod: a bound claim allows the nodes of its PV's node affinity; an unbound
claim of a `WaitForFirstConsumer` class allows the nodes of any fitting, untaken static PV, and
(when the class provisions dynamically) the class's allowed topologies; an unbound claim of an
`Immediate` class (or of no known class) waits: the PV controller binds it. A missing claim or
PV keeps the pod pending.

The plan remembers which PV each task placed in this session takes (the smallest fitting PV on
its node, then by name), so two pods of a gang never count on the same PV; bind decisions carry
the choice (`Bind.volumes`: claim -> PV, or "" = provision on the node).
"""

from __future__ import annotations

import numpy as np

from shoal.framework.cycle_state import StateKey
from shoal.framework.jobs import Task
from shoal.framework.nodefilters import NodeIndex, node_index
from shoal.framework.session import Session
from shoal.model.constraints import NodeSelectorTerm
from shoal.model.status import PodStatus
from shoal.model.volumes import PersistentVolume, PersistentVolumeClaim, pv_fits


class VolumePlan:
    """PV node masks and the PVs taken by tasks placed in this session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nidx: NodeIndex = node_index(ssn)
        self._masks: dict[tuple[NodeSelectorTerm, ...] | None, np.ndarray] = {}
        #: ordinal -> ((claim, PV or "") ...) and PV -> ordinal, for placed tasks with claims.
        self.assigned: dict[int, tuple[tuple[str, str], ...]] = {}
        self.taken: dict[str, int] = {}
        self._with_claims = [t for t in ssn.task_list if t.pod.volume_claims and t.pod.status == PodStatus.PENDING]

    def terms_mask(self, terms: tuple[NodeSelectorTerm, ...] | None) -> np.ndarray:
        hit = self._masks.get(terms)
        if hit is None:
            if terms is None:
                hit = np.ones(self.nidx.n, dtype=bool)
            else:
                hit = np.zeros(self.nidx.n, dtype=bool)
                for t in terms:
                    hit |= self.nidx.labels.node_term(t, self.nidx.names)
            self._masks[terms] = hit
        return hit

    def _fitting(self, pvc: PersistentVolumeClaim, me: int) -> list[PersistentVolume]:
        return [pv for pv in self.ssn.snapshot.volumes.values()
                if self.taken.get(pv.name, me) == me and pv_fits(pv, pvc)]

    def sync(self) -> None:
        """Forget tasks no longer placed; assign PVs to newly placed ones (in task order)."""
        placed = self.ssn.placed
        for k in [k for k in self.assigned if placed[k] < 0]:
            for _claim, pv in self.assigned.pop(k):
                self.taken.pop(pv, None)
        for t in self._with_claims:
            if placed[t.ordinal] >= 0 and t.ordinal not in self.assigned:
                self.assigned[t.ordinal] = self._choose(t, int(placed[t.ordinal]))

    def _choose(self, task: Task, node: int) -> tuple[tuple[str, str], ...]:
        out = []
        snap = self.ssn.snapshot
        for name in task.pod.volume_claims:
            pvc = snap.claims.get((task.pod.namespace, name))
            if pvc is None or pvc.bound:
                continue
            pvs = [pv for pv in self._fitting(pvc, task.ordinal) if self.terms_mask(pv.node_affinity)[node]]
            if pvs:
                pv = min(pvs, key=lambda v: (v.capacity, v.name))
                self.taken[pv.name] = task.ordinal
                out.append((name, pv.name))
            else:
                out.append((name, ""))
        return tuple(out)

    def volumes_of(self, task: Task) -> tuple[tuple[str, str], ...]:
        """The claim -> PV choices of a placed task (for its bind decision)."""
        self.sync()
        return self.assigned.get(task.ordinal, ())

    def allowed(self, task: Task) -> tuple[np.ndarray, str]:
        """Nodes where every claim of the task can be met, and the reason shown otherwise."""
        self.sync()
        snap = self.ssn.snapshot
        ok = np.ones(self.nidx.n, dtype=bool)
        for name in task.pod.volume_claims:
            pvc = snap.claims.get((task.pod.namespace, name))
            if pvc is None:
                return np.zeros(self.nidx.n, dtype=bool), f"persistentvolumeclaim {name!r} not found"
            if pvc.bound:
                pv = snap.volumes.get(pvc.volume_name)
                if pv is None:
                    return np.zeros(self.nidx.n, dtype=bool), f"persistentvolume {pvc.volume_name!r} not found"
                ok &= self.terms_mask(pv.node_affinity)
                continue
            sc = snap.storage_classes.get(pvc.storage_class)
            if sc is None or not sc.wait_for_consumer:
                return np.zeros(self.nidx.n, dtype=bool), "pod has unbound immediate PersistentVolumeClaims"
            where = np.zeros(self.nidx.n, dtype=bool)
            for pv in self._fitting(pvc, task.ordinal):
                where |= self.terms_mask(pv.node_affinity)
            if sc.dynamic:
                where |= self.terms_mask(sc.allowed_topologies)
            if pvc.selected_node:
                where &= self.nidx.names == pvc.selected_node
            ok &= where
        return ok, "node(s) didn't find available persistent volumes to bind or had volume node affinity conflict"


def volume_plan(ssn: Session) -> VolumePlan:
    """The session's VolumePlan, built on first use."""
    return ssn.state.setdefault(_VOLUME_PLAN, lambda: VolumePlan(ssn))


_VOLUME_PLAN: StateKey[VolumePlan] = StateKey("volume plan")


def volume_filter(ssn: Session, task: Task) -> tuple[np.ndarray, str] | None:
    """Dynamic filter: None for a pod without claims."""
    if not task.pod.volume_claims:
        return None
    return volume_plan(ssn).allowed(task)
