"""The simulated cluster: jobs and pods on a virtual clock, turned into a `ClusterSnapshot` each
cycle, and changed by the core's `Decisions`.

Life of a job: it arrives (its pods Pending), the core binds its pods (Running), and when the
whole gang runs it finishes after its duration. An eviction (reclaim, preempt, consolidation,
stale gang) takes the whole gang down: its bound pods are Releasing for the eviction grace
period, then all its pods are Pending again and the gang restarts from scratch. A pipelined pod
stays Pending with its nominated node, as in Kubernetes (the core re-decides next cycle).

Incremental by design: pods and pod groups are kept in insertion-ordered maps and handed to the
snapshot as they are (the core never mutates a snapshot), so a snapshot costs one list copy of
the live pods, not a rebuild of every object.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from shoal.framework.decisions import Decisions
from shoal.kai.units import gpus_request
from shoal.model import ClusterSnapshot, Node, Pod, PodGroup, PodStatus, Queue, Topology
from shoal.model.topology import TopologyConstraint
from shoal.sim.workload import MILLI, JobSpec

PENDING, RUNNING, RELEASING, DONE = "pending", "running", "releasing", "done"


@dataclass(slots=True)
class SimJob:
    """A job on the simulated cluster. `epoch` counts restarts, so a finish event scheduled
    before an eviction is recognised as stale."""

    spec: JobSpec
    uid: str
    pg: PodGroup
    pods: list[Pod]
    state: str = PENDING
    bound: int = 0
    first_start: float | None = None
    start: float | None = None
    finish: float | None = None
    epoch: int = 0
    evictions: int = 0
    evicted_by: Counter[str] = field(default_factory=Counter)


def pod_gpu_milli(pod: Pod) -> int:
    """GPU milli a bound pod holds (a fraction holds its portion on each of its devices)."""
    g = pod.gpu
    return g.whole * MILLI if g.whole else g.portion_milli * g.devices


def make_job(spec: JobSpec, index: int) -> SimJob:
    """Pods and PodGroup of a job; uids are `<name>` and `<name>-<i>`."""
    uid = spec.name
    constraint = None
    if spec.topology:
        constraint = TopologyConstraint(spec.topology, spec.required_level, spec.preferred_level)
    pg = PodGroup(
        uid=uid,
        name=spec.name,
        namespace=spec.queue,
        queue=spec.queue,
        priority=spec.priority,
        preemptible=spec.preemptible,
        creation=spec.arrival + index * 1e-9,
        min_member=spec.pods,
        topology=constraint,
    )
    gpu = gpus_request(spec.gpu_milli / MILLI)
    pods = [
        Pod(
            uid=f"{uid}-{i}",
            name=f"{spec.name}-{i}",
            namespace=spec.queue,
            job=uid,
            status=PodStatus.PENDING,
            cpu_milli=spec.cpu_milli,
            memory=spec.memory,
            gpu=gpu,
            creation=spec.arrival,
        )
        for i in range(spec.pods)
    ]
    return SimJob(spec, uid, pg, pods)


class SimCluster:
    """Nodes, queues and the live jobs; `snapshot()` for the core, `apply()` for its decisions."""

    def __init__(
        self, nodes: list[Node], queues: list[Queue], topologies: list[Topology] | None = None
    ) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.queues = queues
        self.topologies = topologies or []
        self.jobs: dict[str, SimJob] = {}
        self._pods: dict[str, Pod] = {}
        self._pgs: dict[str, PodGroup] = {}
        self._pod_job: dict[str, SimJob] = {}
        self.finished: list[SimJob] = []
        self.pending_jobs = 0
        self.evicted_pods: Counter[str] = Counter()
        self.evicted_gangs: Counter[str] = Counter()
        self.queue_gpu_milli: Counter[str] = Counter()
        self.total_gpu_milli = sum(n.gpu_count for n in self.nodes) * MILLI
        self.changed = True

    # -- job lifecycle ---------------------------------------------------------------------
    def add(self, job: SimJob) -> None:
        self.jobs[job.uid] = job
        self._pgs[job.uid] = job.pg
        for p in job.pods:
            self._pods[p.uid] = p
            self._pod_job[p.uid] = job
        self.pending_jobs += 1
        self.changed = True

    def finish(self, job: SimJob, now: float) -> None:
        """The gang completed: its pods and group leave the cluster."""
        for p in job.pods:
            self.queue_gpu_milli[job.spec.queue] -= pod_gpu_milli(p)
            del self._pods[p.uid]
            del self._pod_job[p.uid]
        del self._pgs[job.uid]
        del self.jobs[job.uid]
        job.state, job.finish = DONE, now
        self.finished.append(job)
        self.changed = True

    def release(self, job: SimJob) -> None:
        """End of the eviction grace period: every pod of the gang is Pending again."""
        for p in job.pods:
            if p.status == PodStatus.RELEASING:
                self.queue_gpu_milli[job.spec.queue] -= pod_gpu_milli(p)
            p.status, p.node, p.gpu_groups, p.nominated_node, p.start_time = (
                PodStatus.PENDING,
                None,
                [],
                None,
                None,
            )
        job.state, job.bound, job.start = PENDING, 0, None
        self.pending_jobs += 1
        self.changed = True

    # -- the core's view -------------------------------------------------------------------
    def snapshot(self, now: float, usage: dict[str, dict[str, float]] | None = None) -> ClusterSnapshot:
        """The state at `now`. Objects are shared with the cluster; the core never mutates them."""
        return ClusterSnapshot(
            now=now,
            nodes=self.nodes,
            pods=list(self._pods.values()),
            podgroups=list(self._pgs.values()),
            queues=self.queues,
            topologies=self.topologies,
            usage=usage or {},
        )

    def apply(self, d: Decisions, now: float) -> tuple[list[SimJob], list[SimJob]]:
        """Apply binds, pipelines and evictions. Returns (jobs whose gang now runs in full,
        jobs newly evicted: their bound pods are Releasing until `release`)."""
        started: list[SimJob] = []
        for b in d.binds:
            pod = self._pods[b.pod]
            job = self._pod_job[b.pod]
            pod.status, pod.node, pod.gpu_groups = PodStatus.RUNNING, b.node, list(b.gpu_groups)
            pod.start_time, pod.nominated_node = now, None
            self.queue_gpu_milli[job.spec.queue] += pod_gpu_milli(pod)
            job.bound += 1
            if job.bound == len(job.pods) and job.state == PENDING:
                job.state, job.start = RUNNING, now
                job.first_start = now if job.first_start is None else job.first_start
                self.pending_jobs -= 1
                started.append(job)
        for pl in d.pipelines:
            self._pods[pl.pod].nominated_node = pl.node
        evicted = self._evict(d, now)
        for uid, t in d.last_start_times.items():
            if uid in self._pgs:
                self._pgs[uid].last_start_time = t
        for uid, s in d.stale_since.items():
            if uid in self._pgs:
                self._pgs[uid].stale_since = s
        if d.binds or d.evictions:
            self.changed = True
        return started, evicted

    def _evict(self, d: Decisions, now: float) -> list[SimJob]:
        evicted: list[SimJob] = []
        for e in d.evictions:
            pod = self._pods.get(e.pod)
            if pod is not None and pod.node is not None:
                # A pod bound to no node (a withdrawn reservation) is not evicted (kube.applier).
                self.evicted_pods[e.action] += 1
            job = self._pod_job.get(e.pod)
            if job is None or job.state == RELEASING:
                continue
            if job.state == PENDING and job.bound == 0:
                continue
            if job.state == PENDING:
                self.pending_jobs -= 1  # a partly bound gang is torn down as well
            self.evicted_gangs[e.action] += 1
            job.evictions += 1
            job.evicted_by[e.action] += 1
            job.epoch += 1
            job.state = RELEASING
            for p in job.pods:
                if p.status == PodStatus.RUNNING:
                    p.status = PodStatus.RELEASING
            evicted.append(job)
        return evicted

    # -- measurements ----------------------------------------------------------------------
    def allocated_gpu_milli(self) -> int:
        return sum(self.queue_gpu_milli.values())

    def bound_pods(self) -> list[Pod]:
        """Pods holding node resources (Running or Releasing)."""
        return [p for p in self._pods.values() if p.node is not None]

    def pending_gangs(self) -> int:
        return self.pending_jobs
