"""Consolidation's enough-GPUs gate sums free GPUs as KAI's `IsEnoughGPUsAllocatableForJob` does.

KAI sums, over ready nodes, the idle GPUs (whole devices plus the room of shared devices beside
their *allocated* shares, rounded up to 0.01) and the releasing GPUs (whole devices plus the
releasing memory of shared devices not releasing as a whole). Pipelined shares are not subtracted
from a device's room, and a device holding only pipelined shares adds nothing: it was taken from
the releasing whole devices (docs/reclaim.md, found on the set's r50-s1132).
"""

from __future__ import annotations

import pytest

from core.one_gpu_node import HALF, QUARTER, WHOLE, Held, snapshot
from shoal.actions.consolidation import enough_gpus, free_gpus
from shoal.cycle import open_session
from shoal.framework.config import SchedulerConfig
from shoal.model import GpuRequest, PodStatus


def _free(*held: Held) -> float:
    return free_gpus(open_session(snapshot(2, QUARTER, *held), SchedulerConfig()))


def test_room_beside_allocated_shares_counts() -> None:
    # one idle device and three quarters of the shared one
    assert _free((PodStatus.RUNNING, QUARTER, "g0")) == pytest.approx(1.75)


def test_pipelined_shares_are_not_subtracted_from_the_room() -> None:
    # device g0: a running quarter and a pipelined three quarters (full in truth); the other
    # device releases. KAI counts g0's room beside the running quarter (0.75) and the releasing
    # device: 1.75 GPUs, where the devices' exact free memory gives 1.
    held = ((PodStatus.RUNNING, QUARTER, "g0"), (PodStatus.PIPELINED, GpuRequest(portion_milli=750), "g0"),
            (PodStatus.RELEASING, WHOLE, ""))
    assert _free(*held) == pytest.approx(1.75)


def test_a_device_holding_only_pipelined_shares_adds_nothing() -> None:
    # one running whole GPU; the other device releases and a half share is pipelined onto a fresh
    # device, which takes the releasing one: its free half counts in neither sum (exact memory
    # would give 0.5), and the gate turns a quarter-GPU job away
    held = ((PodStatus.RUNNING, WHOLE, ""), (PodStatus.RELEASING, WHOLE, ""), (PodStatus.PIPELINED, HALF, "g1"))
    assert _free(*held) == 0
    ssn = open_session(snapshot(2, QUARTER, *held), SchedulerConfig())
    assert not enough_gpus(ssn, next(j for j in ssn.jobs.values() if j.pg.name == "want"))
