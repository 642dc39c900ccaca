"""Skipping jobs that the queue-capacity check is certain to refuse (an allocate speed-up).

During one allocate action queue allocations only grow, so once a job asking `x` of resource
`r` is refused because queue `q` would pass its limit (or, for a non-preemptible job, its
quota), every later job under `q` asking at least `x` of `r` is refused too. Such jobs get
the capacity check's own reason without a placement attempt. They are still popped one by one:
each pop re-orders the queue tree the way KAI's does (see framework/job_queue), so dropping a
hopeless queue at once would change which queue comes next. Decisions are unchanged; only the
work to reach them is saved.
"""

from __future__ import annotations

import numpy as np

from shoal.actions.common.job_allocation import record_capacity_failure, tasks_to_allocate
from shoal.framework.job_queue import JobsByQueue
from shoal.framework.jobs import Job, capacity_request
from shoal.framework.session import Session


class CapacityPruner:
    def __init__(self, ssn: Session, queue: JobsByQueue) -> None:
        self.ssn = ssn
        self.queue = queue
        #: (queue name, resource column, "limit" | "quota") -> smallest refused request.
        self.thresholds: dict[tuple[str, int, str], float] = {}
        #: The refusal message of the job that set each threshold, given to the jobs it dooms.
        self.messages: dict[tuple[str, int, str], str] = {}
        self.epoch = 0
        self._verdicts: dict[str, tuple[int, int, tuple[str, int, str] | None]] = {}

    def request(self, job: Job) -> np.ndarray:
        return job.cached("next_request", job.version, lambda: capacity_request(tasks_to_allocate(job)))

    def doomed(self, job: Job) -> bool:
        """Certain to be refused by the capacity check (given the refusals seen so far)."""
        return self._blocking(job) is not None

    def _blocking(self, job: Job) -> tuple[str, int, str] | None:
        if not self.thresholds or job.queue is None:
            return None
        hit = self._verdicts.get(job.uid)
        if hit is not None and hit[0] == job.version and hit[1] == self.epoch:
            return hit[2]
        req = self.request(job)
        found: tuple[str, int, str] | None = None
        for q in job.queue.ancestors():
            for r in range(3):
                if req[r] == 0:
                    continue
                for kind in ("limit", "quota"):
                    thr = self.thresholds.get((q.name, r, kind))
                    if thr is not None and not (kind == "quota" and job.preemptible) and req[r] >= thr:
                        found = (q.name, r, kind)
                        break
                if found:
                    break
            if found:
                break
        self._verdicts[job.uid] = (job.version, self.epoch, found)
        return found

    def refuse(self, job: Job) -> None:
        """Give a doomed job the refusal reason without trying to place it."""
        key = self._blocking(job)
        if key is not None:
            record_capacity_failure(job, self.messages[key])

    def learn(self, job: Job) -> None:
        """After `job` was refused: remember the threshold (later jobs asking as much are doomed)."""
        block = job.capacity_block
        if block is None:
            return
        name, r, kind, amount = block
        key = (name, r, kind)
        if key in self.thresholds and self.thresholds[key] <= amount:
            return
        self.thresholds[key] = amount
        self.messages[key] = job.fit_errors[-1] if job.fit_errors else f"OverLimit: queue {name}"
        self.epoch += 1
