"""The predicates plugin: per task x node filters beyond resource fit (kai-spec §3.10).

Node conditions, pod count, MIG / resource-type rules, GPU-memory readiness, taints, node
selector and required node affinity, required pod (anti-)affinity, and the per-task queue
capacity check. Each filter returns a mask over nodes and the reason shown when it rejects.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.fit import Rows
from shoal.framework.jobs import Task
from shoal.framework.session import Session
from shoal.model.node import Node
from shoal.model.pod import Pod
from shoal.model.resources import PODS_COL
from shoal.model.status import ACTIVE_USED


def open_predicates(ssn: Session, args: dict[str, str]) -> None:
    """Register node-local filters (cacheable per node) and the per-task queue capacity check."""
    nodes = ssn.nodes.nodes
    ready = np.array([n.ready and not n.unschedulable for n in nodes], dtype=bool)
    is_mig = np.array([n.is_mig for n in nodes], dtype=bool)
    strategy = np.array([n.mig_strategy for n in nodes])
    synced = np.array([n.gpu_memory_synced for n in nodes], dtype=bool)
    any_taints = _has_taints(nodes)
    legacy_mig_nodes = np.zeros(len(nodes), dtype=bool)
    for t in ssn.tasks.values():
        if t.pod.legacy_mig and t.node >= 0 and t.status & ACTIVE_USED:
            legacy_mig_nodes[t.node] = True

    def pick(a: np.ndarray, rows: Rows) -> np.ndarray:
        return a if rows is None else a[rows]

    def conditions(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str]:
        return pick(ready, rows), "node is not ready or unschedulable"

    def pods(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str]:
        sel = slice(None) if rows is None else rows
        free = s.nodes.idle[sel, PODS_COL] + s.nodes.releasing[sel, PODS_COL]
        return free > 0, "too many pods on the node"

    def resource_type(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        p = task.pod
        if p.legacy_mig:
            return np.zeros(len(pick(ready, rows)), dtype=bool), "legacy MIG pods are not scheduled"
        if p.is_cpu_only:
            return None
        mig, strat = pick(is_mig, rows), pick(strategy, rows)
        if p.mig:
            return mig & ~pick(legacy_mig_nodes, rows) & (strat != "single"), "node does not offer the MIG profile"
        ok = (~mig | (strat == "single")) & (strat != "mixed")
        return ok, "node's GPUs are MIG-partitioned"

    def gpu_memory_synced(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        if not task.pod.gpu.is_gpu_memory:
            return None
        return pick(synced, rows), "node's GPU memory is not known yet"

    def selectors(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        p = task.pod
        if not p.node_selector and not p.node_affinity and not any_taints:
            return None
        idx = range(len(nodes)) if rows is None else rows.tolist()
        ok = np.fromiter((_node_matches(p, nodes[i]) for i in idx), dtype=bool)
        return ok, "node selector, affinity or taints do not match"

    def pod_affinity(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        if not task.pod.pod_affinity:
            return None
        return pick(_pod_affinity_mask(s, task), rows), "pod affinity / anti-affinity not satisfied"

    ssn.hooks.predicates.extend([resource_type, gpu_memory_synced, pods, conditions, selectors, pod_affinity])
    # Answers that depend on the node's labels/conditions only, not on what runs there: a node
    # that changes (a pod placed) keeps them, so cached answers are not recomputed.
    ssn.hooks.extra.setdefault("static_predicates", set()).update(
        {resource_type, gpu_memory_synced, conditions, selectors})
    ssn.hooks.extra["per_task_capacity"] = True


def _has_taints(nodes: list[Node]) -> bool:
    return any(n.taints for n in nodes)


def _node_matches(pod: Pod, node: Node) -> bool:
    labels = node.labels
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    if pod.node_affinity and not any(_term_matches(term, labels) for term in pod.node_affinity):
        return False
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(tol, taint) for tol in pod.tolerations):
            return False
    return True


def _term_matches(term: list[tuple[str, str, tuple[str, ...]]], labels: dict[str, str]) -> bool:
    for key, op, values in term:
        v = labels.get(key)
        if op == "In" and v not in values:
            return False
        if op == "NotIn" and v in values:
            return False
        if op == "Exists" and v is None:
            return False
        if op == "DoesNotExist" and v is not None:
            return False
    return True


def _tolerates(tol: object, taint: object) -> bool:
    t_key, t_val, t_eff = getattr(taint, "key", ""), getattr(taint, "value", ""), getattr(taint, "effect", "")
    if getattr(tol, "effect", "") and getattr(tol, "effect", "") != t_eff:
        return False
    if getattr(tol, "operator", "Equal") == "Exists":
        return not getattr(tol, "key", "") or getattr(tol, "key", "") == t_key
    return bool(getattr(tol, "key", "") == t_key and getattr(tol, "value", "") == t_val)


def _pod_affinity_mask(ssn: Session, task: Task) -> np.ndarray:
    nodes = ssn.nodes.nodes
    ok = np.ones(len(nodes), dtype=bool)
    placed = [t for t in ssn.tasks.values() if t.node >= 0 and t.status & ACTIVE_USED and t is not task]
    for term in task.pod.pod_affinity:
        wanted = dict(term.match_labels)
        domains = set()
        for t in placed:
            if all(t.pod.labels.get(k) == v for k, v in wanted.items()):
                value = nodes[t.node].labels.get(term.topology_key)
                if value is not None:
                    domains.add(value)
        in_domain = np.array([n.labels.get(term.topology_key) in domains for n in nodes], dtype=bool)
        if term.anti:
            ok &= ~in_domain
        else:
            # Like kube-scheduler: the first pod of a group whose own labels match may start anywhere.
            self_match = all(task.pod.labels.get(k) == v for k, v in wanted.items())
            if domains or not self_match:
                ok &= in_domain
    return ok
