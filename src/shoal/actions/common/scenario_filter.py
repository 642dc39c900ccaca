"""KAI's accumulated scenario filters (kai-spec §3.14): skip a victim scenario without simulating it
when the GPUs it could free cannot hold the partial job.

They are not only a speed-up: KAI's by-pod solver simulates only the scenarios these filters let
through, so which scenario is simulated first - and therefore which victims are chosen - depends
on them. They are reproduced here exactly (in milli-GPU integers instead of KAI's floats):

* `IdleGpuFilter` (KAI `AccumulatedIdleGpus`): every node's idle + releasing GPUs (whole devices,
  MIG slices as GPUs, free room on shared devices rounded up to 0.01) plus the GPUs each victim
  task frees on its node; the partial job's tasks, largest first, must be first-fit matched onto
  the `len(tasks)` nodes with the most such GPUs.
* `TopologyGpuFilter` (KAI `TopologyAwareIdleGpus`): the same per topology domain, for each
  sub-group set of the job with a required topology level, its tasks' GPUs summed.

Filters only grow: victims are added, never removed, so a check that failed for a prefix of the
victim sequence may pass for a longer one, never the reverse for `necessary_ok`.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.jobs import Job, Task
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL, MILLI


def idle_gpus(ssn: Session) -> np.ndarray:
    """KAI `nodeIdleOrReleasingGpuCapacity` per node (milli-GPU, int64): idle and releasing whole
    devices and MIG slices, plus, per shared device, the free room (1 - allocated share, the share
    rounded up to 0.01) and the releasing share of devices not entirely releasing."""
    nodes = ssn.nodes
    caps = (nodes.idle[:, GPU_COL] + nodes.releasing[:, GPU_COL]).astype(np.int64)
    for col, slices in ssn.space.mig_columns():
        caps += ((nodes.idle[:, col] + nodes.releasing[:, col]) * slices * MILLI).astype(np.int64)
    for i, groups in enumerate(nodes.groups):
        if not groups:
            continue
        mem = int(nodes.gpu_memory[i])
        extra = 0
        for g in groups.values():
            if g.allocated > 0:
                extra += MILLI - _share(g.allocated, mem)
            if g.releasing > 0 and not (g.used > 0 and g.releasing == g.used):
                extra += _share(g.releasing, mem)
        caps[i] += extra
    return caps


def _share(mib: int, device_mib: int) -> int:
    """KAI `getGpuMemoryFractionalOnNode` in milli: ceil(mib / device * 100) / 100."""
    if device_mib <= 0:
        return MILLI
    return -(-mib * 100 // device_mib) * 10


def task_need(task: Task) -> int:
    """KAI `ResReq.GPUs() + DRA GPUs` of a pending task, milli (GPU memory and MIG count 0)."""
    return task.pod.gpu.milli + task.pod.dra_gpus * MILLI


def victim_gain(task: Task) -> int:
    """KAI `AcceptedResource.GPUs() + DRA GPUs` of a victim task, milli (MIG counts 0)."""
    if task.pod.gpu.is_shared:
        return task.accepted_gpu
    return task.pod.gpu.milli + task.pod.dra_gpus * MILLI


def gpu_gains(tasks: list[Task], n_nodes: int) -> np.ndarray:
    """Per node, the GPUs (milli) these victims free (`IdleGpuFilter.add` as a vector)."""
    gains = np.zeros(n_nodes, dtype=np.int64)
    for t in tasks:
        if t.node >= 0:
            gains[t.node] += victim_gain(t)
    return gains


def greedy_match(needs_desc: list[int], caps_desc: list[int]) -> bool:
    """KAI `greedyMatchRequirements`: each need, largest first, takes the first holder (largest
    capacity first) with room left; a zero need ends the match successfully."""
    used = [0] * len(caps_desc)
    start, last = 0, -1
    for need in needs_desc:
        if need == 0:
            return True
        if need != last:
            # Holders skipped for an equal need had less room than it, and room only shrinks: a
            # run of equal needs resumes where the previous one of the run was placed (exact).
            start, last = 0, need
        for h in range(start, len(caps_desc)):
            cap = caps_desc[h]
            if cap < need:
                return False
            if cap - used[h] >= need:
                used[h] += need
                start = h
                break
        else:
            return False
    return True


class IdleGpuFilter:
    """KAI `AccumulatedIdleGpus` for one partial job (see the module docstring)."""

    def __init__(self, base_caps: np.ndarray, partial: list[Task]) -> None:
        self.caps = base_caps.copy()
        self.needs = sorted((task_need(t) for t in partial), reverse=True)
        self.total_need = sum(self.needs)
        self.k = len(partial)

    def add(self, tasks: list[Task]) -> None:
        """Count the GPUs these victims free (tasks without a node free nothing). The solver adds
        each victim once: recorded victims first, then potential victims, which never repeat them."""
        for t in tasks:
            if t.node >= 0:
                self.caps[t.node] += victim_gain(t)

    def add_bulk(self, nodes: np.ndarray, gains: np.ndarray) -> None:
        """`add` for many victims at once, given their nodes (>= 0) and gains."""
        if len(nodes):
            self.caps += np.bincount(nodes, weights=gains, minlength=len(self.caps)).astype(np.int64)

    def _top(self, caps: np.ndarray) -> np.ndarray:
        k = min(self.k, len(caps))
        if k == 0:
            return caps[:0]
        if k < len(caps):
            top = -np.partition(-caps, k - 1)[:k]
        else:
            top = caps.copy()
        top.sort()
        return top[::-1]

    def passes(self) -> bool:
        """KAI's filter verdict for the current victims."""
        if not self.needs or self.needs[0] == 0:
            return True
        return greedy_match(self.needs, self._top(self.caps).tolist())

    def necessary_ok(self, extra: np.ndarray | None = None) -> bool:
        """A necessary condition of `passes` (with `extra` GPUs added per node), monotone in the
        victims: the largest task fits the best node and the best `len(tasks)` nodes hold all."""
        if not self.needs or self.needs[0] == 0:
            return True
        caps = self.caps if extra is None else self.caps + extra
        top = self._top(caps)
        return len(top) > 0 and int(top[0]) >= self.needs[0] and int(top.sum()) >= self.total_need


def _required_groups(job: Job, partial: list[Task]) -> list[tuple[tuple[str, str], list[Task]]]:
    """(topology, required level) and the partial job's tasks under it, for the job itself and
    every sub-group set with a required level (KAI: the root sub-group set and its child groups;
    pod-set constraints are not counted)."""
    out: list[tuple[tuple[str, str], list[Task]]] = []
    pg = job.pg
    if pg.topology is not None and pg.topology.required_level:
        out.append(((pg.topology.topology, pg.topology.required_level), list(partial)))
    parents = {s.name: s.parent for s in pg.sub_group_sets}
    for sgs in pg.sub_group_sets:
        c = sgs.topology
        if c is None or not c.required_level:
            continue
        under = []
        for t in partial:
            p = t.pod_set.spec.parent
            while p and p != sgs.name:
                p = parents.get(p, "")
            if p == sgs.name:
                under.append(t)
        out.append(((c.topology, c.required_level), under))
    return out


class TopologyGpuFilter:
    """KAI `TopologyAwareIdleGpus`: per (topology, required level), the sub-group sets' GPU sums,
    largest first, first-fit matched onto that level's domains (node-label values) by the idle
    GPUs of their nodes plus what victims there free. None when the job has no required level."""

    def __init__(self, ssn: Session, base_caps: np.ndarray, job: Job, partial: list[Task]) -> None:
        groups = _required_groups(job, partial)
        self.needs: dict[tuple[str, str], list[int]] = {}
        for key, tasks in groups:
            self.needs.setdefault(key, []).append(sum(task_need(t) for t in tasks))
        for needs in self.needs.values():
            needs.sort(reverse=True)
        #: Per key: node -> domain index (-1 = no label), domain capacities.
        self.node_domain: dict[tuple[str, str], np.ndarray] = {}
        self.domain_caps: dict[tuple[str, str], np.ndarray] = {}
        for key in self.needs:
            level = key[1]
            values: dict[str, int] = {}
            idx = np.full(len(ssn.nodes), -1, dtype=np.int64)
            for i, node in enumerate(ssn.nodes.nodes):
                v = node.labels.get(level, "")
                if v:
                    idx[i] = values.setdefault(v, len(values))
            caps = np.zeros(len(values), dtype=np.int64)
            has = idx >= 0
            np.add.at(caps, idx[has], base_caps[has])
            self.node_domain[key] = idx
            self.domain_caps[key] = caps

    @property
    def active(self) -> bool:
        return bool(self.needs)

    def add(self, tasks: list[Task]) -> None:
        if not self.node_domain:
            return
        for t in tasks:
            if t.node < 0:
                continue
            gain = victim_gain(t)
            for key, idx in self.node_domain.items():
                d = int(idx[t.node])
                if d >= 0:
                    self.domain_caps[key][d] += gain

    def passes(self) -> bool:
        for key, needs in self.needs.items():
            caps = np.sort(self.domain_caps[key])[::-1].tolist()
            if not greedy_match(needs, caps):
                return False
        return True
