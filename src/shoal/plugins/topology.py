"""The topology plugin (kai-spec §3.12): node sets per (sub)group and preferred-level node scores.

For a job or subgroup with a topology constraint, `node_sets` answers KAI's SubsetNodes: the
domains (of the preferred level up to the required level) that can hold the group's tasks, fuller
domains first, smallest first, each as a node mask; a partly running group with a required level
stays in the required-level domain(s) it already occupies. When no domain fits, the job gets
KAI's topology fit errors (which domain, how many pods it can hold, or which resource is short).
A preferred level also gives node scores so that pods of the group stay in few domains.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import numpy as np

from shoal.framework.jobs import Job, PodSet, Task
from shoal.framework.session import Session
from shoal.model.podgroup import DEFAULT_POD_SET
from shoal.model.resources import CPU_COL, GPU_COL, MEM_COL, MILLI
from shoal.model.status import ACTIVE_ALLOCATED
from shoal.model.topology import TopologyConstraint
from shoal.policy import topology as topo

logger = logging.getLogger(__name__)

UNSCHEDULABLE_WORKLOAD = "Not enough resources for the workload"


def open_topology(ssn: Session, args: dict[str, str]) -> None:
    plugin = TopologyPlugin(ssn)
    ssn.hooks.node_sets.append(plugin.node_sets)
    ssn.hooks.group_scorers.append(plugin.score)
    ssn.hooks.pre_job_allocation.append(plugin.reset)


class TopologyPlugin:
    """Topology trees of the session and the node scores of the job being allocated."""

    def __init__(self, ssn: Session) -> None:
        labels = [node.labels for node in ssn.nodes.nodes]
        self.trees = {t.name: topo.build_tree(t, labels) for t in ssn.snapshot.topologies}
        #: Preferred-level node scores per (sub)group name of the job being allocated.
        self.scores: dict[str, np.ndarray] = {}

    def reset(self, ssn: Session, job: Job) -> None:
        self.scores = {}

    # -- scoring -------------------------------------------------------------------------------
    def score(self, ssn: Session, task: Task) -> np.ndarray | None:
        """The scores of the task's pod set, else of its nearest ancestor group that has some."""
        if not self.scores:
            return None
        name = task.pod_set.name
        parents = _parents(task.job)
        seen: set[str] = set()
        while name not in seen:
            got = self.scores.get(name)
            if got is not None:
                return got
            seen.add(name)
            if name == "":
                break
            name = parents.get(name, "")
        return None

    # -- node sets -----------------------------------------------------------------------------
    def node_sets(self, ssn: Session, job: Job, name: str, constraint: TopologyConstraint | None,
                  pod_sets: list[PodSet], tasks: list[Task], node_set: np.ndarray) -> Iterable[np.ndarray]:
        if constraint is None or not constraint.topology:
            return [node_set]
        tree = self.trees.get(constraint.topology)
        if tree is None:
            _add_error(job, f"Requested topology {constraint.topology} does not exist")
            return []
        if not tasks:
            return [node_set]
        depths = topo.relevant_depths(tree, constraint.required_level, constraint.preferred_level)
        if isinstance(depths, str):
            logger.warning("job %s/%s: %s", job.pg.namespace, job.pg.name, depths)
            _add_error(job, f"topology constraint error for {_who(job, name)}: {depths}")
            return []
        view = _DomainView(ssn, tree, node_set, tasks, constraint.preferred_level)
        if not view.fits(*view.top):
            where = "the cluster" if view.top[0] == 0 else tree.ids[view.top[0]][view.top[1]]
            _add_error(job, _no_match(tree, constraint, job, name,
                                      f"not enough resources in {where} to allocate the job"))
            return []
        max_depth = tree.depth_of(constraint.preferred_level or constraint.required_level) or 0
        keys = topo.sort_keys(tree, view.top, view.ratios, max_depth)
        if constraint.preferred_level:
            pref = tree.depth_of(constraint.preferred_level) or 0
            self.scores[name] = topo.preferred_scores(tree, view.top, keys, pref)
        eligible = _sticky_domains(tree, pod_sets, constraint)
        found: list[tuple[int, int]] = []
        failed: list[tuple[int, int]] = []
        for idx, d in enumerate(depths):
            for k in range(len(tree.ids[d])):
                if eligible is not None and not eligible[d][k]:
                    continue
                if view.fits(d, k):
                    found.append((d, k))
                elif idx == len(depths) - 1:
                    failed.append((d, k))
        if not found:
            for d, k in failed:
                _add_error(job, view.fit_error(d, k, job, name))
            _add_error(job, _no_match(tree, constraint, job, name))
            return []
        found.sort(key=lambda dk: (-dk[0], topo.path_key(tree, keys, dk[0], dk[1], view.top[0])))
        return _domain_node_sets(tree, found, node_set & tree.member)


def _domain_node_sets(tree: topo.TopologyTree, found: list[tuple[int, int]], valid: np.ndarray
                      ) -> Iterator[np.ndarray]:
    """The nodes of each domain (in the incoming node set), built only when the walk asks."""
    for d, k in found:
        mask = tree.domain_mask(d, k) & valid
        if mask.any():
            yield mask


class _DomainView:
    """Free capacity, representor-pod counts and fill ratios of the domains below the lowest
    common domain of one node set, for one group's tasks (KAI's per-call tree annotations)."""

    def __init__(self, ssn: Session, tree: topo.TopologyTree, node_set: np.ndarray, tasks: list[Task],
                 preferred_level: str) -> None:
        self.tree = tree
        self.n_tasks = len(tasks)
        self.top = topo.lowest_common_domain(tree, node_set, preferred_level)
        inside = np.concatenate(topo.in_subtree(tree, self.top))
        nodes = ssn.nodes
        free = nodes.idle + nodes.releasing
        vecs = [_topology_vector(t) for t in tasks]
        self.request: np.ndarray = np.asarray(np.sum(vecs, axis=0, dtype=np.int64))
        # Domains outside the subtree of the lowest common domain have nothing free (like KAI's
        # per-call tree annotations), so they never fit a group that asks for something.
        free_all = np.where(inside[:, None], tree.onehot @ free.astype(np.float64), 0.0)
        ratios_all = topo.fill_ratio(self.request, free_all)
        o = tree.offsets
        self.free = [free_all[o[d]:o[d + 1]] for d in range(tree.depth + 1)]
        self.ratios = [ratios_all[o[d]:o[d + 1]] for d in range(tree.depth + 1)]
        self.pods: list[np.ndarray] | None = None
        if _homogeneous(tasks):
            max_req = np.max(np.stack(vecs), axis=0)
            node_free = free
            if 0 < max_req[GPU_COL] < MILLI:
                node_free = free.copy()
                node_free[:, GPU_COL] += _shared_free_milli(ssn)
            per_node = topo.node_accommodation(node_free, max_req, self.n_tasks)
            pods_all = np.where(inside, tree.onehot @ per_node.astype(np.float64), -1.0)
            self.pods = [pods_all[o[d]:o[d + 1]] for d in range(tree.depth + 1)]

    def fits(self, d: int, k: int) -> bool:
        if self.pods is not None and self.pods[d][k] >= 0:
            return bool(self.pods[d][k] >= self.n_tasks)
        return bool(self.ratios[d][k] <= 1.0)

    def fit_error(self, d: int, k: int, job: Job, name: str) -> str:
        """KAI's TopologyFitError detailed message for a domain that cannot hold the group."""
        dom = self.tree.ids[d][k]
        prefix = f"<{dom}>: " + ("" if name in ("", DEFAULT_POD_SET) else f"subgroup {name}: ")
        if self.pods is not None and self.pods[d][k] >= 0:
            return (f"{prefix}node-group {dom} can allocate only {int(self.pods[d][k])} of "
                    f"{self.n_tasks} required pods")
        return prefix + ", ".join(_shortage(dom, self.request, self.free[d][k]))


def _shortage(dom: str, request: np.ndarray, free: np.ndarray) -> list[str]:
    """Per short resource, KAI's 'didn't have enough resource' text (GPU devices, CPU cores, GB)."""
    out: list[str] = []
    for col in range(len(request)):
        req, have = int(request[col]), int(free[col])
        if req <= have:
            continue
        if col == GPU_COL:
            out.append(f"{dom} didn't have enough resource: GPUs, requested: {req / MILLI:.3g}, "
                       f"available: {have / MILLI:.3g}")
        elif col == CPU_COL:
            out.append(f"{dom} didn't have enough resources: CPU cores, requested: {_ftoa(req / MILLI)}, "
                       f"available: {_ftoa(have / MILLI)}")
        elif col == MEM_COL:
            out.append(f"{dom} didn't have enough resources: memory, requested: {_ftoa(req / 1e9)}, "
                       f"available: {_ftoa(have / 1e9)}")
        else:
            out.append(f"{dom} didn't have enough resource: column {col}, requested: {req}, "
                       f"available: {have}")
    return out


def _ftoa(x: float) -> str:
    """humanize.FtoaWithDigits(x, 3): at most three decimals, trailing zeros dropped."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


def _topology_vector(task: Task) -> np.ndarray:
    """The task's request with shared GPUs counted as their fraction (milli) in the GPU column."""
    v = task.vec
    if task.pod.gpu.is_shared:
        v = v.copy()
        v[GPU_COL] = task.pod.gpu.milli
    return v


def _homogeneous(tasks: list[Task]) -> bool:
    """KAI's useRepresentorPodsAccounting: all tasks (or none) use GPUs and every other scalar
    resource is asked by all tasks or by none."""
    gpu = sum(1 for t in tasks if t.pod.gpu.milli > 0 or t.vec[GPU_COL] > 0)
    if gpu not in (0, len(tasks)):
        return False
    stack = np.stack([t.vec for t in tasks])
    stack[:, [CPU_COL, MEM_COL, GPU_COL]] = 0
    users = (stack > 0).sum(axis=0)
    return bool(np.all((users == 0) | (users == len(tasks))))


def _shared_free_milli(ssn: Session) -> np.ndarray:
    """Per node, the free part (milli-GPU) of its shared devices (fraction requests may use it)."""
    nodes = ssn.nodes
    out = np.zeros(len(nodes), dtype=np.int64)
    for i, groups in enumerate(nodes.groups):
        mem = int(nodes.gpu_memory[i])
        for g in groups.values():
            if mem > 0 and g.used < mem:
                out[i] += (mem - g.used) * MILLI // mem
    return out


def _sticky_domains(tree: topo.TopologyTree, pod_sets: list[PodSet], constraint: TopologyConstraint
                    ) -> list[np.ndarray] | None:
    """With a required level and pods of the group already placed: per depth, the domains inside
    a required-level domain that holds one of them (None = no restriction)."""
    if not constraint.required_level:
        return None
    placed = [t.node for ps in pod_sets for t in ps.tasks if t.status & ACTIVE_ALLOCATED and t.node >= 0]
    if not placed:
        return None
    req = tree.depth_of(constraint.required_level) or 0
    doms = {int(tree.node_domain[req][i]) for i in placed} - {-1}
    out: list[np.ndarray] = []
    for d in range(tree.depth + 1):
        if d < req:
            out.append(np.zeros(len(tree.ids[d]), dtype=bool))
        elif d == req:
            m = np.zeros(len(tree.ids[d]), dtype=bool)
            m[list(doms)] = True
            out.append(m)
        else:
            out.append(out[d - 1][tree.parent[d]])
    return out


def _parents(job: Job) -> dict[str, str]:
    parents = {ps.name: ps.spec.parent for ps in job.pod_sets.values()}
    parents.update({sg.name: sg.parent for sg in job.pg.sub_group_sets})
    return parents


def _who(job: Job, name: str) -> str:
    who = f"job <{job.pg.namespace}/{job.pg.name}>"
    if name and name != DEFAULT_POD_SET:
        who += f", subgroup {name}"
    return who


def _no_match(tree: topo.TopologyTree, constraint: TopologyConstraint, job: Job, name: str,
              suffix: str = "") -> str:
    text = (f"topology {tree.name}, requirement {constraint.required_level} couldn't be satisfied "
            f"for {_who(job, name)}")
    return f"{text}: {suffix}" if suffix else text


def _add_error(job: Job, message: str) -> None:
    if message not in job.fit_errors:
        job.fit_errors.append(message)
    if "Unschedulable" not in job.reasons:
        job.reasons.append("Unschedulable")
