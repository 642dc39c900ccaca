"""Invariants of a scheduled cluster, read from the API only (the chaos tests' checker, #19).

`violations(client, namespace)` lists, as sentences, every broken invariant among the namespace's
pods: a node whose whole GPUs are over-committed (bound, not finished pods' `nvidia.com/gpu` limits
above its allocatable), a shared GPU group over-committed (the `gpu-fraction` of the pods labelled
with one `runai-gpu-group` on one node above 1), a pod bound to a node that does not exist. Gangs
partly bound are checked by `partial_gangs` (only meaningful once the grace period has passed).
`Monitor` runs these continuously while faults strike and adds what needs memory: every eviction
(a pod gone that the test did not delete) has its reason event, and no gang stays partly bound
longer than a grace period.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Event, Node, Pod

GROUP_LABEL = "runai-gpu-group"


def _active(p: Any) -> bool:
    return bool(p.spec.nodeName) and (p.status is None or p.status.phase not in ("Succeeded", "Failed"))


def _whole_gpus(p: Any) -> int:
    return sum(int(((c.resources.limits if c.resources else None) or {}).get("nvidia.com/gpu", 0))
               for c in p.spec.containers)


def violations(client: Client, namespace: str) -> list[str]:
    """Every broken placement invariant among `namespace`'s pods, as sentences (empty = none)."""
    nodes = {n.metadata.name: int((n.status.allocatable or {}).get("nvidia.com/gpu", 0)) for n in client.list(Node)}
    whole: Counter[str] = Counter()
    shared: dict[tuple[str, str], float] = defaultdict(float)
    out = []
    for p in client.list(Pod, namespace=namespace):
        if not _active(p):
            continue
        node = p.spec.nodeName
        if node not in nodes:
            out.append(f"pod {p.metadata.name} is bound to missing node {node}")
            continue
        whole[node] += _whole_gpus(p)
        frac = (p.metadata.annotations or {}).get("gpu-fraction")
        group = (p.metadata.labels or {}).get(GROUP_LABEL)
        if frac and group:
            shared[(node, group)] += float(frac)
    for node, used in whole.items():
        devices_shared = len({g for n, g in shared if n == node})
        if used + devices_shared > nodes[node]:
            out.append(f"node {node}: {used} whole GPUs + {devices_shared} shared devices > {nodes[node]}")
    out.extend(f"node {n}: GPU group {g} holds {v:.2f} of one GPU" for (n, g), v in shared.items() if v > 1.0 + 1e-9)
    return out


def partial_gangs(client: Client, namespace: str, gangs: dict[str, int]) -> dict[str, int]:
    """Gangs (PodGroup name -> minMember) with some but fewer than minMember pods bound."""
    bound: Counter[str] = Counter()
    for p in client.list(Pod, namespace=namespace):
        pg = (p.metadata.annotations or {}).get("pod-group-name")
        if pg in gangs and _active(p):
            bound[pg] += 1
    return {g: bound[g] for g, m in gangs.items() if 0 < bound[g] < m}


EVICTION_REASON = "Evicting"  # the event shoal writes before each eviction (src/shoal/kube/applier.py)


def missing_eviction_reasons(client: Client, namespace: str, evicted: dict[str, str]) -> list[str]:
    """Of the evicted pods (uid -> name), those with no `Evicting` event naming their uid."""
    told = {e.involvedObject.uid for e in client.list(Event, namespace=namespace) if e.reason == EVICTION_REASON}
    return [f"pod {name} was evicted with no reason event" for uid, name in sorted(evicted.items())
            if uid not in told]


@dataclass
class Monitor:
    """The checker run continuously while faults strike (a thread polling the API every `interval` s).

    Besides `violations` on every poll, it keeps what one look cannot see: a pod that disappears or
    starts terminating without the test having deleted it (`expect_deleted`) was evicted and must
    have its reason event; a gang (PodGroup name -> minMember) seen partly bound must not stay so for
    more than `grace` seconds. `stop()` returns every distinct violation seen (empty = none).
    """

    connect: Callable[[], Client]
    namespace: str
    gangs: dict[str, int] = field(default_factory=dict)
    grace: float = 30.0
    interval: float = 0.5
    found: list[str] = field(default_factory=list)
    evicted: dict[str, str] = field(default_factory=dict)
    polls: int = 0
    _deleted_by_test: set[str] = field(default_factory=set)
    _seen: dict[str, str] = field(default_factory=dict)
    _partial_since: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Monitor:
        self._thread = threading.Thread(target=self._run, name="invariant-monitor", daemon=True)
        self._thread.start()
        return self

    def expect_deleted(self, names: list[str]) -> None:
        """Pods the test deletes itself (not evictions)."""
        with self._lock:
            self._deleted_by_test.update(names)

    def stop(self) -> list[str]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        client = self.connect()
        try:
            self.poll(client)
            self._add(missing_eviction_reasons(client, self.namespace, self.evicted))
        finally:
            client.close()
        return list(self.found)

    def _run(self) -> None:
        client = self.connect()
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.poll(client)
                except Exception:  # the API server may be restarting: look again next time
                    continue
        finally:
            client.close()

    def _add(self, items: list[str]) -> None:
        with self._lock:
            self.found.extend(v for v in items if v not in self.found)

    def poll(self, client: Client, now: float | None = None) -> None:
        """One look: placement invariants, evictions noticed, gangs partly bound too long."""
        now = time.monotonic() if now is None else now
        self._add(violations(client, self.namespace))
        pods = list(client.list(Pod, namespace=self.namespace))
        live = {p.metadata.uid: p.metadata.name for p in pods if not p.metadata.deletionTimestamp}
        with self._lock:
            for uid, name in self._seen.items():
                if uid not in live and name not in self._deleted_by_test:
                    self.evicted[uid] = name
            self._seen = live
        partial = partial_gangs(client, self.namespace, self.gangs)
        self._partial_since = {g: t for g, t in self._partial_since.items() if g in partial}
        for gang, bound in partial.items():
            since = self._partial_since.setdefault(gang, now)
            if now - since > self.grace:
                self._add([f"gang {gang} partly bound ({bound} of {self.gangs[gang]}) for more than "
                           f"{self.grace:.0f}s"])
        self.polls += 1
