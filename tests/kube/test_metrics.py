"""The Prometheus metrics: what a bind, an eviction and a pod's departure do to the series."""

from __future__ import annotations

from shoal.framework.decisions import Bind
from shoal.kube.metrics import SchedulerMetrics
from shoal.model import GpuRequest, Pod, PodStatus


def pod(gpu: GpuRequest) -> Pod:
    return Pod("u", "p", "ns", "j", PodStatus.BINDING, 1000, 1024, gpu)


def sample(m: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels or None)


def test_a_shared_bind_reports_its_devices_and_fraction() -> None:
    m = SchedulerMetrics()
    m.pod_bound("ns", "p", pod(GpuRequest(portion_milli=250, devices=2)),
                Bind("u", "p", "ns", "j", "n1", ("g1", "g2"), "Fraction", 250))
    assert sample(m, "shoal_pods_scheduled_total") == 1.0
    assert sample(m, "shoal_pod_gpu_devices", namespace="ns", pod="p") == 2.0
    assert sample(m, "shoal_pod_gpu_fraction", namespace="ns", pod="p") == 0.25


def test_a_pod_that_leaves_takes_its_series_with_it() -> None:
    m = SchedulerMetrics()
    m.pod_bound("ns", "p", pod(GpuRequest(whole=4)), Bind("u", "p", "ns", "j", "n1"))
    assert sample(m, "shoal_pod_gpu_devices", namespace="ns", pod="p") == 4.0
    m.pod_gone("ns", "p")
    assert sample(m, "shoal_pod_gpu_devices", namespace="ns", pod="p") is None
    assert b"shoal_pod_gpu_devices{" not in m.render()


def test_a_cpu_pod_counts_as_scheduled_without_gpu_series() -> None:
    m = SchedulerMetrics()
    m.pod_bound("ns", "p", pod(GpuRequest()), Bind("u", "p", "ns", "j", "n1"))
    assert sample(m, "shoal_pods_scheduled_total") == 1.0
    assert sample(m, "shoal_pod_gpu_devices", namespace="ns", pod="p") is None


def test_evictions_are_counted_per_action() -> None:
    m = SchedulerMetrics()
    for action in ("reclaim", "reclaim", "preempt"):
        m.pod_evicted(action)
    assert sample(m, "shoal_pods_evicted_total", action="reclaim") == 2.0
    assert sample(m, "shoal_pods_evicted_total", action="preempt") == 1.0
