"""The preempting actions' feasible nodes read shared devices as KAI's `FeasibleNodesForJob` does.

KAI sums a node's idle GPUs as the whole idle devices plus the free room of every shared device
with *allocated* memory, and its releasing GPUs as the whole releasing devices plus the releasing
memory of shared devices not releasing as a whole. A device whose only shares are pipelined (they
wait for the releasing device they were put on) has no allocated memory, so its free room makes no
node feasible (docs/reclaim.md, found on unseen seed 71).
"""

from __future__ import annotations

from core.one_gpu_node import HALF, QUARTER, WHOLE, Held, snapshot
from shoal.actions.common.victims import feasible_nodes
from shoal.cycle import open_session
from shoal.framework.config import SchedulerConfig
from shoal.model import PodStatus


def _feasible(*held: Held) -> bool:
    ssn = open_session(snapshot(1, QUARTER, *held), SchedulerConfig())
    want = next(j for j in ssn.jobs.values() if j.pg.name == "want")
    return bool(feasible_nodes(ssn, want.tasks)[0])


def test_an_idle_device_is_feasible() -> None:
    assert _feasible()


def test_room_on_a_device_with_allocated_shares_is_feasible() -> None:
    assert _feasible((PodStatus.RUNNING, HALF, "g0"))


def test_a_full_shared_device_is_not_feasible() -> None:
    assert not _feasible((PodStatus.RUNNING, HALF, "g0"), (PodStatus.RUNNING, HALF, "g0"))


def test_a_releasing_device_is_feasible() -> None:
    assert _feasible((PodStatus.RELEASING, WHOLE, ""))
    assert _feasible((PodStatus.RUNNING, HALF, "g0"), (PodStatus.RELEASING, HALF, "g0"))


def test_room_on_a_device_holding_only_pipelined_shares_is_not_feasible() -> None:
    # The share was pipelined onto the device the whole pod releases: no idle or releasing
    # device is left, and the device's free half counts in neither of KAI's sums.
    assert not _feasible((PodStatus.RELEASING, WHOLE, ""), (PodStatus.PIPELINED, HALF, "g0"))
