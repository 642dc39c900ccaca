"""The pod mix the adapters learn: PodMixTracker's decayed counts, and PodMixFeed, which observes
each pod once at the snapshot's time and hands the mix to the core as snapshot fields."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.framework.config import PluginConfig, SchedulerConfig
from shoal.history.podmix import PodMixFeed, PodMixTracker
from shoal.kube.other_pods import OTHER_JOB
from shoal.kube.service import SchedulerService, ServiceOptions
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodStatus
from shoal.model.podmix import MixEntry
from shoal.policy.fragaware import parse_mix
from shoal.policy.fragaware_mix import pod_kind

GIB = 1024**3
MODEL = "nvidia.com/gpu.product"
FRAGAWARE = SchedulerConfig(plugins=(PluginConfig("predicates", {}), PluginConfig("fragaware", {"order": "1"})))


def pod(uid: str, gpu: GpuRequest, job: str = "j", cpu: int = 1000, selector: dict[str, str] | None = None) -> Pod:
    return Pod(uid, uid, "ns", job, PodStatus.PENDING, cpu, GIB, gpu, node_selector=dict(selector or {}))


def snapshot(now: float, *pods: Pod) -> ClusterSnapshot:
    node = Node("n", {"cpu": 8000, "memory": 64 * GIB, "nvidia.com/gpu": 4, "pods": 110}, gpu_memory_mib=40_000)
    return ClusterSnapshot(now=now, nodes=[node], pods=list(pods))


def filled(feed: PodMixFeed, snap: ClusterSnapshot) -> ClusterSnapshot:
    feed.fill(snap)
    return snap


# -- the kind of a pod and the tracker -----------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "kind"),
    [
        pytest.param(pod("p", GpuRequest(whole=2)), (1000, 1000, 2, ()), id="whole GPUs"),
        pytest.param(pod("p", GpuRequest(portion_milli=250, devices=2)), (1000, 250, 2, ()), id="fraction"),
        pytest.param(pod("p", GpuRequest(memory_mib=20_000)), (1000, 500, 1, ()),
                     id="GPU memory of a 40 GiB device"),
        pytest.param(pod("p", GpuRequest(), selector={MODEL: "T4"}), (1000, 0, 0, ()), id="CPU-only ignores models"),
        pytest.param(pod("p", GpuRequest(whole=1), selector={MODEL: "T4"}), (1000, 1000, 1, ("T4",)), id="model"),
    ],
)
def test_pod_kind(p: Pod, kind: tuple[int, int, int, tuple[str, ...]]) -> None:
    assert pod_kind(p, MODEL, 40_000) == kind


def test_tracker_decays_old_kinds() -> None:
    t = PodMixTracker(half_life_seconds=100.0)
    for _ in range(8):
        t.observe(pod("p", GpuRequest(whole=1)), now=0.0)
    t.observe(pod("p", GpuRequest(portion_milli=500)), now=300.0)  # 8 whole pods decayed to 1 by now
    entries = {(e.gpu_milli, e.devices): e.weight for e in t.entries(300.0)}
    assert entries == pytest.approx({(1000, 1): 1.0, (500, 1): 1.0})


def test_tracker_keeps_the_most_frequent_kinds_covering_the_target() -> None:
    t = PodMixTracker(coverage=0.9)
    for milli, n in ((500, 90), (250, 9), (100, 1)):
        for _ in range(n):
            t.observe(pod("p", GpuRequest(portion_milli=milli)), now=0.0)
    assert [e.gpu_milli for e in t.entries(0.0)] == [500]
    assert parse_mix(t.mix(0.0)) == [MixEntry(1000, 500, 1, (), 90.0)]


# -- the feed: what the adapters do each cycle ---------------------------------------------------
def test_each_pod_is_counted_once_across_cycles() -> None:
    feed = PodMixFeed(PodMixTracker(half_life_seconds=1e9))
    pods = (pod("a", GpuRequest(whole=1)), pod("b", GpuRequest(portion_milli=500)))
    filled(feed, snapshot(10.0, *pods))
    snap = filled(feed, snapshot(10.0, *pods))  # the same pods seen again in the next cycle
    weights = {(e.gpu_milli, e.devices): e.weight for e in snap.pod_mix}
    assert weights == pytest.approx({(1000, 1): 1.0, (500, 1): 1.0})
    assert not snap.pods_departed


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([pod("x", GpuRequest(whole=2), job=OTHER_JOB)], [], id="other schedulers' pods are not arrivals"),
        pytest.param([pod("m", GpuRequest(memory_mib=10_000))], [(250, 1)], id="GPU memory as a share of the device"),
    ],
)
def test_what_is_observed(pods: list[Pod], expected: list[tuple[int, int]]) -> None:
    snap = filled(PodMixFeed(ignored_jobs={OTHER_JOB}), snapshot(0.0, *pods))
    assert [(e.gpu_milli, e.devices) for e in snap.pod_mix] == expected


def test_counts_decay_with_the_snapshot_clock() -> None:
    feed = PodMixFeed(PodMixTracker(half_life_seconds=100.0))
    filled(feed, snapshot(0.0, *[pod(f"w{i}", GpuRequest(whole=1)) for i in range(4)]))
    snap = filled(feed, snapshot(200.0, pod("s", GpuRequest(portion_milli=500))))
    weights = {(e.gpu_milli, e.devices): e.weight for e in snap.pod_mix}
    assert weights == pytest.approx({(1000, 1): 1.0, (500, 1): 1.0})  # 4 pods, two half-lives ago


def test_pods_departed_once_a_seen_pod_has_left() -> None:
    feed = PodMixFeed()
    a, b = pod("a", GpuRequest(whole=1)), pod("b", GpuRequest(whole=1))
    assert not filled(feed, snapshot(0.0, a, b)).pods_departed
    filled(feed, snapshot(1.0, a))  # b has left
    assert filled(feed, snapshot(2.0, a, pod("c", GpuRequest(whole=1)))).pods_departed  # and stays so


def test_the_model_label_follows_the_plugin_argument() -> None:
    feed = PodMixFeed()
    snap = snapshot(0.0, pod("a", GpuRequest(whole=1), selector={"gpu-type": "T4"}))
    feed.fill(snap, model_label="gpu-type")
    assert [e.models for e in snap.pod_mix] == [("T4",)]


# -- who feeds it --------------------------------------------------------------------------------
class _NoClient:
    """The service's constructor only stores its client."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the constructor must not call the API ({name})")


@pytest.mark.parametrize(
    ("config", "fed"),
    [
        pytest.param(FRAGAWARE, True, id="fragaware configured"),
        pytest.param(SchedulerConfig(), False, id="KAI default placement"),
    ],
)
def test_service_feeds_the_mix_only_with_fragaware(config: SchedulerConfig, fed: bool) -> None:
    service = SchedulerService(_NoClient(), ServiceOptions(config=config, leader_elect=False))  # type: ignore[arg-type]
    assert (service.mix_feed is not None) == fed
