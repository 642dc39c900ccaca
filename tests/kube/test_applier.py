"""The applier against a fake API: how decisions become requests, and what a refusal does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shoal.framework.decisions import Bind, Decisions, Evict, GangExplanation
from shoal.kube.applier import Applier, ApplyStats
from shoal.kube.cache import ClusterCache
from shoal.model.status import PodStatus

from .fake_api import FakeApi
from .test_cache import SCHED, pod

NODE = "n1"


@pytest.fixture
def world() -> tuple[FakeApi, ClusterCache, Applier]:
    api = FakeApi()
    cache = ClusterCache(SCHED, lambda: 1000.0)
    for name in ("a", "b", "c"):  # pending: to bind
        obj = pod(name)
        api.put(f"/api/v1/namespaces/ns/pods/{name}", obj)
        cache.on_pod("ADDED", None, obj)
    for name in ("v1", "v2", "v3"):  # running on NODE: to evict
        obj = pod(name, node_name=NODE)
        api.put(f"/api/v1/namespaces/ns/pods/{name}", obj)
        cache.on_pod("ADDED", None, obj)
    return api, cache, Applier(api, cache, SCHED)


def bind(name: str, **kw: Any) -> Bind:
    return Bind(f"uid-{name}", name, "ns", f"pod:uid-{name}", NODE, **kw)


def evict(name: str, preemptor: str = "ns/big") -> Evict:
    return Evict(f"uid-{name}", name, "ns", f"pod:uid-{name}", NODE, "reclaim", "over its fair share", preemptor)


async def test_a_bind_is_addressed_by_the_decision(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    api, cache, applier = world
    stats = await applier.apply(Decisions(binds=[bind("a")]))
    (call,) = api.sent("POST", "/binding")
    assert call.path == "/api/v1/namespaces/ns/pods/a/binding"
    assert call.body["target"]["name"] == NODE and call.body["metadata"]["uid"] == "uid-a"
    assert stats.bound == 1
    assert next(p for p in cache.snapshot().pods if p.uid == "uid-a").status == PodStatus.BINDING  # assumed


async def test_a_shared_gpu_pod_is_labelled_before_it_is_bound(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    api, _, applier = world
    await applier.apply(Decisions(binds=[bind("a", gpu_groups=("g1",), resource_type="Fraction",
                                              gpu_portion_milli=500)]))
    methods = [(c.method, c.path.rsplit("/", 1)[-1]) for c in api.calls if "/pods/a" in c.path]
    assert methods == [("PATCH", "a"), ("POST", "binding")]
    labels = api.objects["/api/v1/namespaces/ns/pods/a"]["metadata"]["labels"]
    assert labels["runai-gpu-group"] == "g1"


@pytest.mark.parametrize(("code", "events"), [
    pytest.param(500, 1, id="a server error: the pod gets a FailedBinding event"),
    pytest.param(404, 0, id="the pod is gone: nothing to tell"),
])
async def test_a_failed_bind_forgets_the_assumption(world: tuple[FakeApi, ClusterCache, Applier], code: int,
                                                    events: int) -> None:
    api, cache, applier = world
    api.fail("POST", "/pods/a/binding", code)
    stats = await applier.apply(Decisions(binds=[bind("a")]))
    assert stats.bind_failed == 1 and "uid-a" not in cache.assumed
    assert next(p for p in cache.snapshot().pods if p.uid == "uid-a").status == PodStatus.PENDING
    reasons = [c.body["reason"] for c in api.sent("POST", "/events")]
    assert reasons.count("FailedBinding") == events


async def test_a_refused_eviction_stops_its_victim_set(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    api, _, applier = world
    api.fail("POST", "/pods/v1/eviction", 429, "disruption budget")
    stats = await applier.apply(Decisions(evictions=[evict("v1"), evict("v2"), evict("v3", preemptor="ns/other")]))
    evicted = [c.path.split("/")[-2] for c in api.sent("POST", "/eviction")]
    assert evicted == ["v1", "v3"]  # v2 was in v1's set; v3 belongs to another preemptor
    assert (stats.evicted, stats.evict_refused) == (1, 1)
    reasons = sorted(c.body["reason"] for c in api.sent("POST", "/events"))
    assert reasons == ["Evicting", "Evicting", "EvictionRefused"]  # v1 (refused) and v3 each got their reason


async def test_an_eviction_is_preceded_by_its_reason_event(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    """A scheduler killed between the two requests must not leave an eviction without a reason."""
    api, _, applier = world
    await applier.apply(Decisions(evictions=[evict("v1")]))
    order = [(c.method, c.path.rsplit("/", 1)[-1]) for c in api.calls if c.method == "POST"]
    assert order == [("POST", "events"), ("POST", "eviction")]
    (ev,) = api.sent("POST", "/events")
    assert ev.body["reason"] == "Evicting" and ev.body["involvedObject"]["uid"] == "uid-v1"


async def test_no_eviction_without_its_reason_event(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    api, _, applier = world
    api.fail("POST", "/events", 503)
    stats = await applier.apply(Decisions(evictions=[evict("v1"), evict("v2")]))
    assert api.sent("POST", "/eviction") == [] and stats.evicted == 0  # the set waits for a later cycle
    stats = await applier.apply(Decisions(evictions=[evict("v1"), evict("v2")]))
    assert len(api.sent("POST", "/eviction")) == 2 and stats.evicted == 2


async def test_a_pod_bound_to_no_node_is_never_evicted(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    """The core may name a pending pod as a victim (its reservation, pipelined by an earlier
    statement of the session, withdrawn by a later one, as KAI does): it holds nothing, and the
    Eviction API would delete a pod that is waiting to run."""
    api, cache, applier = world
    stats = await applier.apply(Decisions(evictions=[evict("a"), evict("v1")]))
    assert [c.path.split("/")[-2] for c in api.sent("POST", "/eviction")] == ["v1"]
    assert (stats.evicted, stats.evict_unbound) == (1, 1)
    assert [c.body["involvedObject"]["name"] for c in api.sent("POST", "/events")] == ["v1"]
    assert "uid-a" in cache.pods


async def test_a_pod_bound_earlier_in_the_cycle_is_evicted(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    """A pod that allocate bound and a later action of the same cycle takes as a victim is bound
    (its bind assumed, the watch not yet caught up): its eviction is sent, as KAI's would be."""
    api, cache, applier = world
    stats = await applier.apply(Decisions(binds=[bind("a")]))  # the allocate action's binds
    assert stats.bound == 1 and cache.pods["uid-a"].node is None  # no watch event yet
    stats = await applier.apply(Decisions(evictions=[evict("a")]))  # a later action, same cycle
    assert [c.path.split("/")[-2] for c in api.sent("POST", "/eviction")] == ["a"]
    assert (stats.evicted, stats.evict_unbound) == (1, 0)
    cache.forget("uid-a")  # had the bind failed: bound nowhere, nothing to evict
    stats = await applier.apply(Decisions(evictions=[evict("b")]))
    assert stats.evict_unbound == 1 and len(api.sent("POST", "/eviction")) == 1


async def test_an_eviction_waits_for_the_same_pods_bind_in_flight(
        world: tuple[FakeApi, ClusterCache, Applier], monkeypatch: pytest.MonkeyPatch) -> None:
    """The service sends each action's decisions while the next action runs: an eviction of a pod
    whose bind is still unanswered waits for that answer, so the pod is evicted from its node, not
    deleted mid-bind (which would also fail the bind)."""
    api, _, applier = world
    gate = asyncio.Event()
    answer = api.request

    async def slow_binding(method: str, path: str, **kw: Any) -> Any:
        if path.endswith("/binding"):
            await gate.wait()
        return await answer(method, path, **kw)

    monkeypatch.setattr(api, "request", slow_binding)
    stats = ApplyStats()
    applier.assume([bind("a")])
    binding = asyncio.create_task(applier.apply_placements([bind("a")], [], stats))
    evicting = asyncio.create_task(applier.apply_placements([], [evict("a")], stats))
    for _ in range(5):
        await asyncio.sleep(0)
    assert api.sent("POST", "/eviction") == [] and not evicting.done()
    gate.set()
    await asyncio.gather(binding, evicting)
    paths = [c.path for c in api.calls if c.path.endswith(("/binding", "/eviction"))]
    assert paths == ["/api/v1/namespaces/ns/pods/a/binding", "/api/v1/namespaces/ns/pods/a/eviction"]
    assert (stats.bound, stats.evicted) == (1, 1) and applier.binding == {}


async def test_an_eviction_is_sent_once(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    api, _, applier = world
    await applier.apply(Decisions(evictions=[evict("v1")]))
    await applier.apply(Decisions(evictions=[evict("v1")]))  # still terminating next cycle
    assert len(api.sent("POST", "/eviction")) == 1


async def test_an_explanation_is_written_once_per_message(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    api, _, applier = world
    ex = GangExplanation("pod:uid-a", "ns", "q", ["Unschedulable"], ["no node has 1 free GPU"])
    await applier.apply(Decisions(explanations={"pod:uid-a": ex}))
    await applier.apply(Decisions(explanations={"pod:uid-a": ex}))
    (cond,) = api.sent("PATCH", "/pods/a/status")
    assert cond.body["status"]["conditions"][0]["message"] == "no node has 1 free GPU"
    assert [c.body["reason"] for c in api.sent("POST", "/events")] == ["FailedScheduling"]
    changed = GangExplanation("pod:uid-a", "ns", "q", ["Unschedulable"], ["queue q is over its limit"])
    await applier.apply(Decisions(explanations={"pod:uid-a": changed}))
    assert len(api.sent("PATCH", "/pods/a/status")) == 2


async def test_writes_beyond_the_budget_wait_for_the_next_cycle(world: tuple[FakeApi, ClusterCache, Applier]) -> None:
    _, _, applier = world
    applier.write_budget = 2
    d = Decisions(explanations={f"pod:uid-{n}": GangExplanation(f"pod:uid-{n}", "ns", "q", ["Unschedulable"], ["x"])
                                for n in ("a", "b", "c")})
    first = await applier.apply(d)
    second = await applier.apply(d)
    assert (first.writes, second.writes) == (2, 1)
