"""The Queue status shoal writes, from a session's queues."""

from __future__ import annotations

import math

from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.kube.cache import ClusterCache
from shoal.kube.queue_status import queue_status, resource_list

from .test_cache import cache, pod  # noqa: F401  (cache: fixture)


def test_resource_list_is_kubernetes_quantities() -> None:
    assert resource_list([1500.0, 250.4, 2**30]) == {"nvidia.com/gpu": "1500m", "cpu": "250m", "memory": str(2**30)}
    assert resource_list([math.inf, -1.0, math.nan]) == {"nvidia.com/gpu": "0", "cpu": "0", "memory": "0"}


def test_status_of_a_queue_with_a_running_pod(cache: ClusterCache) -> None:
    cache.on_pod("ADDED", None, pod("a", gpus=1, node_name="n1"))
    ssn = run_cycle(cache.snapshot(), SchedulerConfig()).session
    status = queue_status(ssn.queues["q"], with_usage=False)
    assert status["allocated"]["nvidia.com/gpu"] == "1000m"
    assert status["childQueues"] == [] and "usage" not in status
    assert set(status) == {"allocated", "allocatedNonPreemptible", "requested", "fairShare", "childQueues"}
