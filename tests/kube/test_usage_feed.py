"""The live usage feed: recording from snapshots, persistence to a ConfigMap and takeover."""

from __future__ import annotations

import asyncio

import pytest

from core.reclaim_world import World
from kube.fake_api import FakeApi
from shoal.history.usage import UsageParams
from shoal.kube.usage_feed import UsageFeed, usage_params

PARAMS = UsageParams(window=100.0, half_life=50.0)


def snapshot_at(now: float, holder: str):  # type: ignore[no-untyped-def]
    w = World().node("n0", 8).queue("a", quota=0).queue("b", quota=0)
    w.job(f"{holder}-run", holder, gpus=8, nodes=["n0"])
    w.snapshot.now = now
    return w.snapshot


def test_usage_goes_into_the_snapshot_and_survives_a_takeover() -> None:
    api = FakeApi()
    feed = UsageFeed(api, PARAMS, "shoal-system", "s-usage", persist_seconds=10.0, resolution=0.0)
    for t in range(0, 60, 5):
        snap = snapshot_at(float(t), "a")
        feed.fill(snap)
    assert snap.usage["a"]["gpu"] == pytest.approx(1.0)
    asyncio.run(feed.persist(55.0))
    asyncio.run(feed.persist(60.0))  # within persist_seconds: no second write
    assert feed.writes == 1 and len(api.sent("PATCH")) == 1 and len(api.sent("POST")) == 1

    heir = UsageFeed(api, PARAMS, "shoal-system", "s-usage", resolution=0.0)
    assert asyncio.run(heir.load())
    for f in (feed, heir):
        snap = snapshot_at(80.0, "b")
        f.fill(snap)
        snap = snapshot_at(90.0, "b")
        f.fill(snap)
    for q in ("a", "b"):
        assert heir.history.usage(90.0)[q] == pytest.approx(feed.history.usage(90.0)[q])
    assert 0 < heir.history.usage(90.0)["b"]["gpu"] < heir.history.usage(90.0)["a"]["gpu"]


def test_other_parameters_start_afresh() -> None:
    api = FakeApi()
    feed = UsageFeed(api, PARAMS, "ns", "u", resolution=0.0)
    feed.fill(snapshot_at(0.0, "a"))
    asyncio.run(feed.persist(1.0))
    other = UsageFeed(api, UsageParams(window=200.0), "ns", "u")
    assert not asyncio.run(other.load())
    assert not asyncio.run(UsageFeed(api, PARAMS, "ns", "missing").load())


def test_records_are_coalesced_to_the_resolution() -> None:
    feed = UsageFeed(FakeApi(), PARAMS, "ns", "u", resolution=10.0)
    for t, holder in ((0.0, "a"), (3.0, "b"), (6.0, "a"), (12.0, "b")):
        feed.fill(snapshot_at(t, holder))
    assert [m.t for m in feed.history.samples] == [0.0, 12.0]


def test_kai_usage_db_config() -> None:
    assert usage_params(None) is None
    p = usage_params({"clientType": "prometheus", "usageParams": {"windowSize": "256s", "halfLifePeriod": "128s"}})
    assert p == UsageParams(256.0, "sliding", 128.0)
    with pytest.raises(ValueError):
        usage_params({"usageParams": {"windowType": "cron"}})
