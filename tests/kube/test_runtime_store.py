"""Learned run times survive a restart: the leader writes them to a ConfigMap, a new replica reads them."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kube.fake_api import FakeApi
from shoal.kube.cache import ClusterCache
from shoal.kube.metrics import SchedulerMetrics
from shoal.kube.visibility import VisibilityOptions, VisibilityService
from shoal.visibility.runtimes import JobFacts

NOW = 1_700_000_000.0
PATH = "/api/v1/namespaces/shoal-system/configmaps/s-runtimes"


def service(api: FakeApi, clock: list[float]) -> VisibilityService:
    cache = ClusterCache("s", lambda: clock[0])
    return VisibilityService(api, cache, "s", VisibilityOptions(runtimes_persist_seconds=60.0), SchedulerMetrics(),
                             clock=lambda: clock[0])


def pod(name: str, phase: str, started: str = "2023-11-14T22:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1",
                         "labels": {"kai.scheduler/queue": "q"}},
            "spec": {"schedulerName": "s", "nodeName": "n1",
                     "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": phase, "startTime": started}}


def finish(svc: VisibilityService, name: str) -> None:
    running = pod(name, "Running")
    svc.cache.on_pod("ADDED", None, running)
    done = copy.deepcopy(running)
    done["status"]["phase"] = "Succeeded"
    svc.on_pod(running, done)
    svc.cache.on_pod("MODIFIED", running, done)


def test_the_leader_persists_what_it_learned_and_a_restarted_scheduler_takes_it_over() -> None:
    api, clock = FakeApi(), [NOW]
    leader = service(api, clock)
    key = ("Pod", "q")  # bare pods: each a gang of its own, of owner kind Pod
    for i, ran in enumerate((600.0, 1200.0, 1800.0)):
        clock[0] = 1_699_999_200.0 + ran  # the pods started at 22:00:00 (NOW - 800 s)
        finish(leader, f"p{i}")
    assert leader.runtimes.observed == 3
    assert leader.estimator.estimate(JobFacts(key)) == (1200.0, "learned")
    standby = service(api, clock)
    standby.runtimes.leading = lambda: False
    standby.runtimes.observed = 3
    assert asyncio.run(standby.runtimes.persist(clock[0])) is False and not api.sent("PATCH", "s-runtimes")

    assert asyncio.run(leader.runtimes.persist(clock[0])) is True  # created (the patch found nothing)
    assert [c.method for c in api.calls if c.path.startswith(PATH.rsplit("/", 1)[0])] == ["PATCH", "POST"]
    assert asyncio.run(leader.runtimes.persist(clock[0] + 120)) is False  # nothing new learned
    finish(leader, "p3")
    assert asyncio.run(leader.runtimes.persist(clock[0] + 30)) is False  # within persist_seconds
    assert asyncio.run(leader.runtimes.persist(clock[0] + 61)) is True and leader.runtimes.writes == 2

    restarted = service(api, clock)
    assert restarted.estimator.estimate(JobFacts(key))[1] == "default"
    assert asyncio.run(restarted.runtimes.load()) == 4
    assert restarted.estimator.samples(key) == leader.estimator.samples(key)
    assert restarted.estimator.estimate(JobFacts(key))[1] == "learned"


def test_an_absent_or_unreadable_state_is_started_afresh() -> None:
    api, clock = FakeApi(), [NOW]
    assert asyncio.run(service(api, clock).runtimes.load()) == 0
    api.put(PATH, {"metadata": {"name": "s-runtimes"}})  # created empty (the Helm chart does)
    assert asyncio.run(service(api, clock).runtimes.load()) == 0
    api.put(PATH, {"metadata": {"name": "s-runtimes"}, "binaryData": {"runtimes.json.gz": "bm90IGd6aXA="}})
    assert asyncio.run(service(api, clock).runtimes.load()) == 0
