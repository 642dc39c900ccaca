"""The session's pods as inter-pod constraints see them (kube-scheduler's NodeInfo pod views).

Label columns of every task and node, the topology domains of nodes, which tasks each affinity
term matches, and the terms existing pods carry (grouped by term, so a gang of a thousand pods
with one anti-affinity term is one entry). Where each task is comes from `Session.placed`,
which the session keeps current as statements move tasks: so the pods of a gang placed earlier
in the same statement count for the next one, as do the pods of other schedulers.

Built once per session on first use (`pod_index(ssn)`); never mutates the session.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from shoal.framework.cycle_state import StateKey
from shoal.framework.labelindex import LabelColumns
from shoal.framework.nodefilters import node_index
from shoal.framework.session import Session
from shoal.model.constraints import PodAffinityTerm

#: kube-scheduler's hardPodAffinityWeight: an existing pod's required affinity term, matched by
#: the incoming pod, scores its domain like a preferred term of this weight.
HARD_POD_AFFINITY_WEIGHT = 1


class PodIndex:
    """Label / namespace columns over `ssn.task_list` and `ssn.nodes`, and the existing terms."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        tasks = ssn.task_list
        self.pods = LabelColumns([t.pod.labels for t in tasks])
        self.nodes = node_index(ssn).labels
        ns_table: dict[str, int] = {}
        self.ns_codes = np.fromiter((ns_table.setdefault(t.pod.namespace, len(ns_table)) for t in tasks),
                                    dtype=np.int64, count=len(tasks))
        self.ns_names = list(ns_table)
        self._term_memo: dict[PodAffinityTerm, np.ndarray] = {}
        self._matrices: dict[str, np.ndarray] = {}
        anti: dict[PodAffinityTerm, list[int]] = defaultdict(list)
        sym: dict[tuple[PodAffinityTerm, int], list[int]] = defaultdict(list)
        ports: list[int] = []
        for t in tasks:
            if t.pod.host_ports:
                ports.append(t.ordinal)
            pa = t.pod.pod_affinity
            if pa is None:
                continue
            for term in pa.required_anti:
                anti[term].append(t.ordinal)
            for term in pa.required:
                sym[(term, HARD_POD_AFFINITY_WEIGHT)].append(t.ordinal)
            for w, term in pa.preferred:
                sym[(term, w)].append(t.ordinal)
            for w, term in pa.preferred_anti:
                sym[(term, -w)].append(t.ordinal)
        #: Required anti-affinity terms of any task -> the tasks carrying them.
        self.required_anti = {k: np.array(v, dtype=np.int64) for k, v in anti.items()}
        #: (term, signed weight) of any task's scoring terms -> the tasks carrying them.
        self.symmetric = {k: np.array(v, dtype=np.int64) for k, v in sym.items()}
        self.port_owners = np.array(ports, dtype=np.int64)

    def term_mask(self, term: PodAffinityTerm) -> np.ndarray:
        """Tasks the term matches (namespace and labels), whether placed or not."""
        hit = self._term_memo.get(term)
        if hit is None:
            labels = self.ssn.snapshot.namespace_labels
            ns_ok = np.array([name in term.namespaces or (
                term.namespace_selector is not None and term.namespace_selector.matches(labels.get(name, {})))
                for name in self.ns_names], dtype=bool)
            in_ns = ns_ok[self.ns_codes] if len(self.ns_names) else np.zeros(0, dtype=bool)
            hit = self._term_memo[term] = in_ns & self.pods.selector(term.selector)
        return hit

    def term_matrix(self, name: str, terms: list[PodAffinityTerm]) -> np.ndarray:
        """[task, term] -> does the term match the task, for a fixed list of terms known by `name`
        (built once per session: a task's row then says which existing terms concern it)."""
        hit = self._matrices.get(name)
        if hit is None:
            cols = [self.term_mask(t) for t in terms]
            hit = np.stack(cols, axis=1) if cols else np.zeros((len(self.ns_codes), 0), dtype=bool)
            self._matrices[name] = hit
        return hit

    def domains(self, key: str) -> tuple[np.ndarray, int]:
        """(domain code of every node for topology key `key`, -1 where the node lacks it; count)."""
        codes, table = self.nodes.codes(key)
        return codes, len(table)

    def placed_nodes(self, ordinals: np.ndarray, exclude: int) -> np.ndarray:
        """Nodes of the given tasks that are active-used somewhere, `exclude` (a task) left out."""
        nodes = self.ssn.placed[ordinals]
        keep = (nodes >= 0) & (ordinals != exclude)
        out: np.ndarray = nodes[keep]
        return out

    def domain_counts(self, matched: np.ndarray, key: str, exclude: int,
                      weight: float = 1.0) -> np.ndarray:
        """Per domain of `key`: `weight` x the placed tasks among `matched` (a bool mask over
        tasks) whose node has the key; `exclude` is left out."""
        codes, n = self.domains(key)
        nodes = self.placed_nodes(np.flatnonzero(matched), exclude)
        doms = codes[nodes]
        doms = doms[doms >= 0]
        return np.bincount(doms, minlength=n).astype(np.float64) * weight

    def per_node(self, counts: np.ndarray, key: str) -> np.ndarray:
        """Domain values -> node values (0 where the node lacks the key)."""
        codes, n = self.domains(key)
        if n == 0:
            return np.zeros(len(codes), dtype=counts.dtype)
        return np.where(codes >= 0, counts[np.maximum(codes, 0)], 0)


def pod_index(ssn: Session) -> PodIndex:
    """The session's PodIndex, built on first use."""
    return ssn.state.setdefault(_POD_INDEX, lambda: PodIndex(ssn))


_POD_INDEX: StateKey[PodIndex] = StateKey("pod index")
