"""KAI's "two-queue oscillation" example against a live `shoal run` (tests/e2e/test_fairshare_live.py).

One node with 16 GPUs, a parent queue and two child queues with equal weight and no quota. The
driver keeps `backlog` pending 16-GPU pods in each queue (a reclaimed pod is deleted by its
eviction, so the driver submits another: KAI's jobs that never end and go back to pending) and
samples who holds the node. Pods have no termination grace, as KAI's simulator evicts at once.

Contract: `step()` reads the namespace's pods once, records (monotonic time, holder) with holder a
queue name, "-" (nobody) or "both" (never expected: 16-GPU pods on a 16-GPU node), and tops up the
backlogs; `turns()` run-length encodes the samples into (holder, seconds) with each sample's
duration up to the next one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from lightkube.resources.core_v1 import Pod

from .cluster import KEnv
from .scheduler_fixtures import create, ensure_queue, pod_manifest

GPUS = 16
QUEUE_LABEL = "kai.scheduler/queue"


def queue_tree(kenv: KEnv, suffix: str) -> tuple[str, str]:
    """The parent queue and its two equal children (no GPU quota, over-quota weight 1); their names."""
    parent, a, b = f"dept-{suffix}", f"team-a-{suffix}", f"team-b-{suffix}"
    ensure_queue(kenv.client, parent, gpu_quota=0)
    for q in (a, b):
        ensure_queue(kenv.client, q, parent=parent, gpu_quota=0)
    return a, b


@dataclass
class Oscillation:
    kenv: KEnv
    scheduler: str
    queues: tuple[str, str]
    backlog: int = 2
    samples: list[tuple[float, str]] = field(default_factory=list)
    submitted: int = 0

    def step(self) -> str:
        pods = list(self.kenv.client.list(Pod, namespace=self.kenv.namespace))
        live = [p for p in pods if p.metadata.deletionTimestamp is None]
        holders = sorted({p.metadata.labels[QUEUE_LABEL] for p in live if p.spec.nodeName})
        holder = holders[0] if len(holders) == 1 else "-" if not holders else "both"
        self.samples.append((time.monotonic(), holder))
        for q in self.queues:
            pending = sum(1 for p in live if not p.spec.nodeName and p.metadata.labels[QUEUE_LABEL] == q)
            for _ in range(self.backlog - pending):
                self._submit(q)
        return holder

    def _submit(self, queue: str) -> None:
        m: dict[str, Any] = pod_manifest(f"{queue}-{self.submitted}", self.scheduler, gpus=GPUS, queue=queue)
        m["spec"]["terminationGracePeriodSeconds"] = 0
        create(self.kenv, m)
        self.submitted += 1

    def run(self, seconds: float, interval: float = 0.25) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.step()
            time.sleep(interval)

    def first_bind(self, timeout: float = 30.0, interval: float = 0.25) -> float:
        """Step until a queue holds the node; the (monotonic) time of that sample."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.step() != "-":
                return self.samples[-1][0]
            time.sleep(interval)
        raise AssertionError(f"no pod bound within {timeout}s")

    def turns(self, since: float = -1.0) -> list[tuple[str, float]]:
        """(holder, seconds) runs from the first sample at or after `since` (monotonic)."""
        pts = [s for s in self.samples if s[0] >= since]
        out: list[tuple[str, float]] = []
        for (t, who), (t_next, _) in pairwise(pts):
            if out and out[-1][0] == who:
                out[-1] = (who, out[-1][1] + t_next - t)
            else:
                out.append((who, t_next - t))
        return out


def held(turns: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The turns with the gaps of nobody holding the node left out (a gap is an eviction in flight)."""
    out: list[tuple[str, float]] = []
    for who, s in turns:
        if who == "-":
            continue
        if out and out[-1][0] == who:  # the same queue again after a gap: one turn
            out[-1] = (who, out[-1][1] + s)
        else:
            out.append((who, s))
    return out


def shares(turns: list[tuple[str, float]], queues: tuple[str, str]) -> dict[str, float]:
    """Each queue's part of the time the node was held."""
    total = sum(s for who, s in turns if who in queues)
    return {q: sum(s for who, s in turns if who == q) / total for q in queues}


def summary(turns: list[tuple[str, float]]) -> str:
    return ", ".join(f"{who.split('-')[1] if who.startswith('team-') else who} {s:.1f}s" for who, s in turns)
