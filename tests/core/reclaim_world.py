"""Small hand-built clusters for the reclaim / preempt / consolidation tests (whole GPUs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.cycle import CycleResult, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource

NOW = 1_000_000.0
GIB = 1 << 30


@dataclass
class World:
    """A cluster under construction: nodes of `gpus` devices, queues, gangs of 1-task pods."""

    snapshot: ClusterSnapshot = field(default_factory=lambda: ClusterSnapshot(now=NOW))
    _n: int = 0

    def node(self, name: str, gpus: int = 8) -> World:
        self.snapshot.nodes.append(Node(name, {"cpu": 64_000, "memory": 512 * GIB, "nvidia.com/gpu": gpus,
                                               "pods": 110}))
        return self

    def queue(self, name: str, quota: float = -1, parent: str = "", weight: float = 1.0,
              limit: float = -1, **extra: float | None) -> World:
        gpu = QueueResource(-1 if quota == -1 else int(quota * 1000), -1 if limit == -1 else int(limit * 1000),
                            weight)
        self.snapshot.queues.append(Queue(name, parent=parent, gpu=gpu, creation=float(len(self.snapshot.queues)),
                                          **extra))  # type: ignore[arg-type]
        return self

    def job(self, name: str, queue: str, gpus: int = 1, tasks: int = 1, nodes: list[str] | None = None,
            priority: int = 50, preemptible: bool | None = None, min_member: int | None = None,
            started: float | None = None) -> World:
        """A gang of `tasks` pods of `gpus` GPUs; running on `nodes` (one per pod) or pending."""
        self._n += 1
        pg = PodGroup(name, name, "ns", queue, priority, priority < 100 if preemptible is None else preemptible,
                      creation=float(self._n), min_member=tasks if min_member is None else min_member)
        running = nodes is not None
        pg.last_start_time = (NOW - 3600 if started is None else started) if running else None
        self.snapshot.podgroups.append(pg)
        for i in range(tasks):
            node = nodes[i] if nodes is not None else None
            self.snapshot.pods.append(Pod(f"{name}-{i}", f"{name}-{i}", "ns", name,
                                          PodStatus.RUNNING if running else PodStatus.PENDING,
                                          cpu_milli=100, memory=GIB, gpu=GpuRequest(whole=gpus), node=node,
                                          creation=float(self._n)))
        return self

    def run(self, *actions: str, **config: object) -> CycleResult:
        return run_cycle(self.snapshot, SchedulerConfig(actions=actions, **config))  # type: ignore[arg-type]


def statuses(result: CycleResult) -> dict[str, str]:
    """Pod uid -> status title after the cycle."""
    return {uid: t.status.title for uid, t in sorted(result.session.tasks.items())}


def evicted_jobs(result: CycleResult) -> set[str]:
    return {e.job for e in result.decisions.evictions}
