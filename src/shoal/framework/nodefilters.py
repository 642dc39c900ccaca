"""Node-local constraint answers over all nodes at once: node selector and node affinity
(kube-scheduler's NodeAffinity), taints and tolerations (TaintToleration), `unschedulable`
(NodeUnschedulable). Pure functions of a pod and the session's `NodeIndex`, vectorised with
numpy; they depend on node labels, names, taints and flags only, never on what runs there.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from shoal.framework.cycle_state import StateKey
from shoal.framework.labelindex import LabelColumns
from shoal.framework.session import Session
from shoal.model.constraints import Requirement
from shoal.model.pod import Pod, Toleration

HARD_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


class NodeIndex:
    """Label columns, names and taints of the session's nodes (built once per session)."""

    def __init__(self, ssn: Session) -> None:
        nodes = ssn.nodes.nodes
        self.n = len(nodes)
        self.labels = LabelColumns([n.labels for n in nodes])
        self.names = np.array([n.name for n in nodes], dtype=object)
        self.unschedulable = np.array([n.unschedulable for n in nodes], dtype=bool)
        by_taint: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for i, n in enumerate(nodes):
            for t in n.taints:
                by_taint[(t.key, t.value, t.effect)].append(i)
        #: Each distinct taint -> the nodes that carry it.
        self.taints = {k: np.isin(np.arange(self.n), v) for k, v in by_taint.items()}
        self._memo: dict[object, np.ndarray] = {}

    def required(self, pod: Pod) -> np.ndarray:
        """Nodes matching the pod's nodeSelector and required node affinity."""
        key = ("required", tuple(sorted(pod.node_selector.items())),
               pod.node_affinity.required if pod.node_affinity else None)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        ok = np.ones(self.n, dtype=bool)
        for k, v in pod.node_selector.items():
            ok = ok & self.labels.requirement(Requirement(k, "In", (v,)))
        na = pod.node_affinity
        if na is not None and na.required is not None:
            any_term = np.zeros(self.n, dtype=bool)
            for term in na.required:
                any_term |= self.labels.node_term(term, self.names)
            ok = ok & any_term
        self._memo[key] = ok
        return ok

    def untolerated(self, tolerations: list[Toleration], effects: tuple[str, ...] = HARD_EFFECTS) -> np.ndarray:
        """Nodes with a taint of one of `effects` that no toleration tolerates."""
        key = ("untolerated", tuple(tolerations), effects)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        bad = np.zeros(self.n, dtype=bool)
        for (k, v, effect), where in self.taints.items():
            if effect in effects and not any(t.tolerates(k, v, effect) for t in tolerations):
                bad |= where
        self._memo[key] = bad
        return bad

    def blocked_unschedulable(self, tolerations: list[Toleration]) -> np.ndarray:
        """NodeUnschedulable: cordoned nodes, unless the pod tolerates the unschedulable taint."""
        if any(t.tolerates(UNSCHEDULABLE_TAINT, "", "NoSchedule") for t in tolerations):
            return np.zeros(self.n, dtype=bool)
        return self.unschedulable

    def intolerable_prefer_count(self, tolerations: list[Toleration]) -> np.ndarray:
        """Per node: PreferNoSchedule taints the pod does not tolerate (TaintToleration's score)."""
        key = ("prefer", tuple(tolerations))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        soft = [t for t in tolerations if t.effect in ("", "PreferNoSchedule")]
        count = np.zeros(self.n, dtype=np.int64)
        for (k, v, effect), where in self.taints.items():
            if effect == "PreferNoSchedule" and not any(t.tolerates(k, v, effect) for t in soft):
                count += where
        self._memo[key] = count
        return count

    def preferred_weight(self, pod: Pod) -> np.ndarray:
        """Per node: the summed weights of the pod's preferred node-affinity terms it matches."""
        na = pod.node_affinity
        total = np.zeros(self.n, dtype=np.int64)
        if na is None:
            return total
        for weight, term in na.preferred:
            total += weight * self.labels.node_term(term, self.names)
        return total


def node_index(ssn: Session) -> NodeIndex:
    """The session's NodeIndex, built on first use."""
    return ssn.state.setdefault(_NODE_INDEX, lambda: NodeIndex(ssn))


_NODE_INDEX: StateKey[NodeIndex] = StateKey("node index")
