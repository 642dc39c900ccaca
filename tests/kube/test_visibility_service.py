"""The service side of visibility: the report ConfigMap and the predicted-start annotations."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from tests.visibility import scenarios as sc

from shoal.cycle import open_session, run_actions
from shoal.framework.config import SchedulerConfig
from shoal.kube.cache import ClusterCache
from shoal.kube.client import ApiError
from shoal.kube.metrics import SchedulerMetrics
from shoal.kube.visibility import (
    PREDICTED_START_ANNOTATION,
    VisibilityOptions,
    VisibilityService,
    decode_report,
    encode_report,
)


class FakeClient:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    async def patch(self, res: Any, name: str, body: dict[str, Any], namespace: str | None = None,
                    **kw: Any) -> dict[str, Any]:
        self.calls.append(("patch", f"{res.plural}/{name}"))
        key = (res.plural, name)
        if res.plural == "configmaps" and key not in self.objects:
            raise ApiError(404, "not found")
        self.objects.setdefault(key, {}).update(body)
        return {}

    async def create(self, res: Any, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("create", f"{res.plural}/{obj['metadata']['name']}"))
        self.objects[(res.plural, obj["metadata"]["name"])] = obj
        return obj


def _service(client: FakeClient) -> VisibilityService:
    return VisibilityService(client, ClusterCache("s", lambda: sc.NOW), "s",  # type: ignore[arg-type]
                             VisibilityOptions(namespace="ns", report_seconds=0), SchedulerMetrics(),
                             clock=lambda: sc.NOW)


def _cycle(svc: VisibilityService, snap: Any) -> None:
    config = SchedulerConfig()
    ssn = open_session(snap, config)
    run_actions(ssn, config.actions)
    from shoal.cycle import close_session

    d = close_session(ssn)
    svc.after_cycle(ssn, d, snap, config, 0.01, 1)
    ssn.release()


def test_encode_decode_round_trip_and_size_bound() -> None:
    noise = [hashlib.sha256(str(i).encode()).hexdigest() * 4 for i in range(20_000)]  # does not compress
    report = {"pending": [{"uid": str(i), "messages": [noise[i]]} for i in range(20_000)]}
    data = encode_report(report)
    assert len(data) <= 900_000
    back = decode_report({"metadata": {"name": "x"}, "binaryData": {"report.json.gz": data}})
    assert back["truncated"] is True and 10 <= len(back["pending"]) < 20_000
    small = {"pending": [{"uid": "a"}]}
    assert decode_report({"binaryData": {"report.json.gz": encode_report(small)}}) == small


def test_publish_creates_then_patches_only_on_change() -> None:
    client = FakeClient()
    svc = _service(client)
    _cycle(svc, sc.limit_blocked())
    assert asyncio.run(svc.publish()) is True
    assert client.calls == [("patch", "configmaps/s-visibility"), ("create", "configmaps/s-visibility")]
    report = decode_report(client.objects[("configmaps", "s-visibility")])
    assert [e["uid"] for e in report["pending"]] == ["ns/waits"]
    _cycle(svc, sc.limit_blocked())  # same state, later cycle: nothing new to write
    assert asyncio.run(svc.publish()) is False
    _cycle(svc, sc.fragmented())
    assert asyncio.run(svc.publish()) is True
    assert client.calls[-1] == ("patch", "configmaps/s-visibility")


def test_predictions_become_annotations_and_are_removed_when_gone() -> None:
    client = FakeClient()
    svc = _service(client)
    snap = sc.limit_blocked()
    for pg in snap.podgroups:
        svc.cache.podgroups[pg.uid] = pg
    _cycle(svc, snap)
    asyncio.run(svc.predict())
    assert svc.etas == {"ns/waits": sc.NOW + 3000.0}  # default 1 h run time, "big" ran 600 s
    assert svc.eta_basis == {"default": 2}
    body = client.objects[("podgroups", "waits")]
    assert body["metadata"]["annotations"][PREDICTED_START_ANNOTATION] == "2023-11-14T23:03:20Z"
    asyncio.run(svc._annotate({}))  # the gang is no longer pending
    assert client.objects[("podgroups", "waits")]["metadata"]["annotations"][PREDICTED_START_ANNOTATION] is None


def test_a_forecast_over_its_time_budget_stops_without_predicting() -> None:
    client = FakeClient()
    svc = VisibilityService(client, ClusterCache("s", lambda: sc.NOW), "s",  # type: ignore[arg-type]
                            VisibilityOptions(namespace="ns", report_seconds=0, eta_budget=0.0), SchedulerMetrics(),
                            clock=lambda: sc.NOW)
    snap = sc.limit_blocked()
    _cycle(svc, snap)
    asyncio.run(svc.predict())  # one cycle only: the gang behind the limit does not start in it
    assert svc.etas == {"ns/waits": None}
    svc.opts.eta_budget = 60.0
    asyncio.run(svc.predict())
    assert svc.etas == {"ns/waits": sc.NOW + 3000.0}
