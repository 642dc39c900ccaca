"""The predicates plugin: per task x node filters beyond resource fit (kai-spec §3.10), and the
filters of kube-scheduler a pod spec can ask for (docs/kube-scheduler-parity.md).

Node-local: node readiness, pod count, MIG / resource-type rules, GPU-memory readiness, node
selector and required node affinity (every operator, matchFields), taints (NoSchedule /
NoExecute) and tolerations, cordoned nodes (unless the unschedulable taint is tolerated), host
ports. Not node-local, applied at pick time: inter-pod affinity / anti-affinity (the pod's and
the placed pods'), topology spread (DoNotSchedule) and persistent volume claims. Plus the per-task queue capacity check.
Each filter returns a mask over nodes and the reason shown when it rejects.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.fit import Rows
from shoal.framework.interpod import affinity_filter
from shoal.framework.jobs import Task
from shoal.framework.nodefilters import node_index
from shoal.framework.podindex import pod_index
from shoal.framework.session import Predicate, Session
from shoal.framework.spread import spread_filter
from shoal.framework.volumes import volume_filter
from shoal.model.resources import PODS_COL
from shoal.model.status import ACTIVE_USED


def open_predicates(ssn: Session, args: dict[str, str]) -> None:
    """Register node-local filters (cacheable per node), the pick-time inter-pod filters and the
    per-task queue capacity check."""
    nodes = ssn.nodes.nodes
    ready = np.array([n.ready for n in nodes], dtype=bool)
    synced = np.array([n.gpu_memory_synced for n in nodes], dtype=bool)
    any_taints = any(n.taints for n in nodes)
    any_cordoned = any(n.unschedulable for n in nodes)
    pick = _pick
    resource_type = _resource_type_predicate(ssn)

    def conditions(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str]:
        return pick(ready, rows), "node is not ready"

    def pods(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str]:
        sel = slice(None) if rows is None else rows
        free = s.nodes.idle[sel, PODS_COL] + s.nodes.releasing[sel, PODS_COL]
        return free > 0, "too many pods on the node"

    def gpu_memory_synced(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        if not task.pod.gpu.is_gpu_memory:
            return None
        return pick(synced, rows), "node's GPU memory is not known yet"

    def selectors(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        p = task.pod
        required = p.node_affinity is not None and p.node_affinity.required is not None
        if not p.node_selector and not required and not any_taints and not any_cordoned:
            return None
        nidx = node_index(s)
        ok = nidx.required(p) & ~nidx.untolerated(p.tolerations) & ~nidx.blocked_unschedulable(p.tolerations)
        return pick(ok, rows), "node selector, affinity, taints or cordon do not match"

    def host_ports(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        if not task.pod.host_ports:
            return None
        return pick(_port_conflicts(s, task), rows) == 0, "host port already in use"

    ssn.hooks.predicates.extend([resource_type, gpu_memory_synced, pods, conditions, selectors, host_ports])
    ssn.hooks.dynamic_filters.extend([affinity_filter, spread_filter, volume_filter])
    # Answers that depend on the node's labels/conditions only, not on what runs there: a node
    # that changes (a pod placed) keeps them, so cached answers are not recomputed.
    ssn.hooks.static_predicates.update({resource_type, gpu_memory_synced, conditions, selectors})
    ssn.hooks.per_task_capacity = True


def _pick(a: np.ndarray, rows: Rows) -> np.ndarray:
    return a if rows is None else a[rows]


def _resource_type_predicate(ssn: Session) -> Predicate:
    """MIG versus regular and shared GPUs (node-local: reads only the node's MIG state)."""
    nodes = ssn.nodes.nodes
    is_mig = np.array([n.is_mig for n in nodes], dtype=bool)
    strategy = np.array([n.mig_strategy for n in nodes])
    legacy_mig_nodes = np.zeros(len(nodes), dtype=bool)
    for t in ssn.tasks.values():
        if t.pod.legacy_mig and t.node >= 0 and t.status & ACTIVE_USED:
            legacy_mig_nodes[t.node] = True

    def resource_type(s: Session, task: Task, rows: Rows) -> tuple[np.ndarray, str] | None:
        p = task.pod
        if p.legacy_mig:
            return np.zeros(len(_pick(is_mig, rows)), dtype=bool), "legacy MIG pods are not scheduled"
        if p.is_cpu_only:
            return None
        mig, strat = _pick(is_mig, rows), _pick(strategy, rows)
        if p.mig:
            return mig & ~_pick(legacy_mig_nodes, rows) & (strat != "single"), "node does not offer the MIG profile"
        # A MIG node takes only whole-GPU pods, and only under strategy `single` (its devices are
        # whole MIG slices that cannot be shared by fraction or GPU memory); the strategy label
        # means nothing on a node that is not MIG (KAI's GetMigStrategy: none).
        whole = not p.gpu.is_shared
        return ~mig | ((strat == "single") & whole), "node's GPUs are MIG-partitioned"

    return resource_type


def _port_conflicts(ssn: Session, task: Task) -> np.ndarray:
    """Per node: how many placed pods hold a host port conflicting with one of the task's."""
    idx = pod_index(ssn)
    out = np.zeros(len(ssn.nodes), dtype=np.int64)
    mine = task.pod.host_ports
    for k in idx.port_owners.tolist():
        node = int(ssn.placed[k])
        if node < 0 or k == task.ordinal:
            continue
        theirs = ssn.task_list[k].pod.host_ports
        if any(a.conflicts(b) for a in mine for b in theirs):
            out[node] += 1
    return out
