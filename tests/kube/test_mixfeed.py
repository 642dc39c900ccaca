"""The live service's fragaware pod mix: PodMixFeed observes each pod once, at the snapshot's time."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.framework.config import PluginConfig, SchedulerConfig
from shoal.framework.podmix import PodMixTracker
from shoal.kube.cache import OTHER_JOB
from shoal.kube.service import PodMixFeed, SchedulerService, ServiceOptions
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodStatus
from shoal.policy.fragaware import MixEntry, parse_mix

GIB = 1024**3
FRAGAWARE = SchedulerConfig(plugins=(PluginConfig("predicates", {}), PluginConfig("fragaware", {"order": "1"})))


def pod(uid: str, gpu: GpuRequest, job: str = "j") -> Pod:
    return Pod(uid, uid, "ns", job, PodStatus.PENDING, 1000, GIB, gpu)


def snapshot(now: float, *pods: Pod) -> ClusterSnapshot:
    node = Node("n", {"cpu": 8000, "memory": 64 * GIB, "nvidia.com/gpu": 4, "pods": 110}, gpu_memory_mib=40_000)
    return ClusterSnapshot(now=now, nodes=[node], pods=list(pods))


def mix_of(config: SchedulerConfig) -> list[MixEntry]:
    plugin = config.plugin("fragaware")
    assert plugin is not None
    return parse_mix(plugin.arguments.get("mix", ""))


def test_each_pod_is_counted_once_across_cycles() -> None:
    feed = PodMixFeed(PodMixTracker(half_life_seconds=1e9))
    snap = snapshot(10.0, pod("a", GpuRequest(whole=1)), pod("b", GpuRequest(portion_milli=500)))
    feed.config(snap, FRAGAWARE)
    config = feed.config(snap, FRAGAWARE)  # the same pods seen again in the next cycle
    weights = {(e.gpu_milli, e.devices): e.weight for e in mix_of(config)}
    assert weights == pytest.approx({(1000, 1): 1.0, (500, 1): 1.0})
    plugin = config.plugin("fragaware")
    assert plugin is not None and plugin.arguments["order"] == "1"  # other arguments kept


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([pod("x", GpuRequest(whole=2), job=OTHER_JOB)], [], id="other schedulers' pods are not arrivals"),
        pytest.param([pod("m", GpuRequest(memory_mib=10_000))], [(250, 1)], id="GPU memory as a share of the device"),
    ],
)
def test_what_is_observed(pods: list[Pod], expected: list[tuple[int, int]]) -> None:
    feed = PodMixFeed()
    config = feed.config(snapshot(0.0, *pods), FRAGAWARE)
    assert [(e.gpu_milli, e.devices) for e in mix_of(config)] == expected


def test_counts_decay_with_the_snapshot_clock() -> None:
    feed = PodMixFeed(PodMixTracker(half_life_seconds=100.0))
    old = [pod(f"w{i}", GpuRequest(whole=1)) for i in range(4)]
    feed.config(snapshot(0.0, *old), FRAGAWARE)
    config = feed.config(snapshot(200.0, pod("s", GpuRequest(portion_milli=500))), FRAGAWARE)
    weights = {(e.gpu_milli, e.devices): e.weight for e in mix_of(config)}
    assert weights == pytest.approx({(1000, 1): 1.0, (500, 1): 1.0})  # 4 pods, two half-lives ago


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


def test_churn_once_a_seen_pod_has_left() -> None:
    feed = PodMixFeed()
    a, b = pod("a", GpuRequest(whole=1)), pod("b", GpuRequest(whole=1))
    first = feed.config(snapshot(0.0, a, b), FRAGAWARE).plugin("fragaware")
    assert first is not None and "churn" not in first.arguments
    feed.config(snapshot(1.0, a), FRAGAWARE)  # b has left
    later = feed.config(snapshot(2.0, a, pod("c", GpuRequest(whole=1))), FRAGAWARE).plugin("fragaware")
    assert later is not None and later.arguments.get("churn") == "1"  # and stays on
