"""Leader election against a fake API and a fake clock: acquire, respect, take over, release."""

from __future__ import annotations

import asyncio
import time

from shoal.kube.leader import LeaderElector

from .fake_api import FakeApi

LEASE = "/apis/coordination.k8s.io/v1/namespaces/sys/leases/shoal"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def elector(api: FakeApi, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(api, "shoal", "sys", identity, lease_seconds=10.0, renew_seconds=2.0, clock=clock)


def holder(api: FakeApi) -> str:
    return str(api.objects[LEASE]["spec"]["holderIdentity"])


async def test_the_first_candidate_creates_the_lease() -> None:
    api = FakeApi()
    assert await elector(api, "a", Clock()).try_acquire_or_renew()
    assert holder(api) == "a" and api.objects[LEASE]["spec"]["leaseTransitions"] == 0


async def test_a_live_holder_is_respected_and_a_silent_one_replaced() -> None:
    api, clock = FakeApi(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b starts observing a's renewTime now
    clock.t = 9.0
    assert not await b.try_acquire_or_renew()  # not expired by b's own clock yet
    clock.t = 10.5  # a never renewed: expired as b observed it (a's clock is never trusted)
    assert await b.try_acquire_or_renew()
    assert holder(api) == "b" and api.objects[LEASE]["spec"]["leaseTransitions"] == 1


async def test_a_renewal_resets_the_observers_clock() -> None:
    api, clock = FakeApi(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    await a.try_acquire_or_renew()
    await b.try_acquire_or_renew()
    clock.t = 8.0
    api.objects[LEASE]["spec"]["renewTime"] = "2026-01-01T00:00:08.000000Z"  # a renewed
    assert not await b.try_acquire_or_renew()
    clock.t = 12.0  # 12 s since b first looked, 4 s since the renewal it saw
    assert not await b.try_acquire_or_renew()


async def test_a_write_conflict_loses_the_round() -> None:
    api = FakeApi()
    a = elector(api, "a", Clock())
    await a.try_acquire_or_renew()
    api.fail("PUT", "/leases/shoal", 409)
    assert not await a.try_acquire_or_renew()


async def test_release_hands_the_lease_back() -> None:
    api, clock = FakeApi(), Clock()
    a = elector(api, "a", clock)
    changes: list[bool] = []
    a.on_change = changes.append
    assert await a.try_acquire_or_renew()
    a._set(True)
    await a.release()
    assert holder(api) == "" and not a.is_leader and changes == [True, False]
    assert await elector(api, "b", clock).try_acquire_or_renew()  # no waiting for expiry


class HangingApi(FakeApi):
    """An API server that stops answering (as one shutting down does) once `hang` is set."""

    hang = False

    async def request(self, method: str, path: str, **kw: object) -> dict[str, object]:
        if self.hang:
            await asyncio.Event().wait()
        return await super().request(method, path, **kw)  # type: ignore[arg-type]


async def test_a_leader_whose_renewal_hangs_steps_down_before_the_lease_expires() -> None:
    api = HangingApi()
    a = LeaderElector(api, "shoal", "sys", "a", lease_seconds=0.4, renew_seconds=0.1)
    await a.step()
    assert a.is_leader
    api.hang = True
    t0 = time.monotonic()
    await a.step()  # cut off at the renew deadline, not left waiting for an answer
    assert not a.is_leader
    assert time.monotonic() - t0 <= a.renew_deadline + 0.1 < a.lease_seconds + 0.1


async def test_a_failed_renewal_within_the_deadline_keeps_the_lead() -> None:
    api, clock = FakeApi(), Clock()
    a = LeaderElector(api, "shoal", "sys", "a", lease_seconds=10.0, renew_seconds=2.0, clock=clock)
    await a.step()
    api.fail("GET", "/leases/shoal", 500)
    clock.t = 7.9
    await a.step()
    assert a.is_leader  # 7.9 s < the 8 s renew deadline
    api.fail("GET", "/leases/shoal", 500)
    clock.t = 8.0
    await a.step()
    assert not a.is_leader
