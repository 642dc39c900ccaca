"""KAI's unit rules: 0.01-GPU fractions, the GPU-memory floor, queue units, preemptibility."""

from __future__ import annotations

import pytest

from shoal.kai.units import (
    ConvertError,
    gpu_fraction_milli,
    gpu_memory_label,
    gpus_request,
    node_gpu_memory_mib,
    preemptibility,
    queue_amount,
)
from shoal.model.pod import GpuRequest


@pytest.mark.parametrize(("fraction", "milli"), [
    pytest.param(0.5, 500, id="exact hundredths stay"),
    pytest.param(0.333, 330, id="rounded down to 0.01"),
    pytest.param(0.336, 340, id="rounded up to 0.01"),
    pytest.param(0.125, 130, id="a half rounds away from zero like Go, not to even"),
    pytest.param(0.004, 0, id="below half a hundredth is nothing"),
    pytest.param(0.999, 1000, id="just below one is one"),
])
def test_gpu_fraction_milli(fraction: float, milli: int) -> None:
    assert gpu_fraction_milli(fraction) == milli


@pytest.mark.parametrize(("gpus", "expected"), [
    pytest.param(0, GpuRequest(), id="no GPU"),
    pytest.param(3, GpuRequest(whole=3), id="whole GPUs"),
    pytest.param(0.25, GpuRequest(portion_milli=250), id="a quarter"),
    pytest.param(0.999, GpuRequest(whole=1), id="a fraction rounding to one device is a whole GPU"),
])
def test_gpus_request(gpus: float, expected: GpuRequest) -> None:
    assert gpus_request(gpus) == expected


@pytest.mark.parametrize(("gpus", "needle"), [
    pytest.param(1.5, "whole GPUs or a fraction below 1", id="fraction above one"),
    pytest.param(-1, ">= 0", id="negative"),
    pytest.param(0.001, "below 0.01 GPU", id="rounds to nothing"),
])
def test_gpus_request_refuses(gpus: float, needle: str) -> None:
    with pytest.raises(ConvertError, match=None) as err:
        gpus_request(gpus)
    assert needle in str(err.value)


@pytest.mark.parametrize(("mib", "floored"), [
    pytest.param(81920, 81900, id="floored to 100 MiB"),
    pytest.param(40960, 40900, id="A100 40 GB"),
    pytest.param(99, 100, id="below the floor counts the floor"),
    pytest.param(0, 100, id="unknown counts the floor"),
])
def test_node_gpu_memory(mib: int, floored: int) -> None:
    assert node_gpu_memory_mib(mib) == floored


@pytest.mark.parametrize(("label", "expected"), [
    pytest.param("16384", (16300, True), id="MiB"),
    pytest.param(str(16 * 1024**3), (16300, True), id="bytes from 1 MiB of MiB on"),
    pytest.param(None, (100, False), id="no label: not synced"),
    pytest.param("lots", (100, False), id="unreadable label: not synced"),
])
def test_gpu_memory_label(label: str | None, expected: tuple[int, bool]) -> None:
    assert gpu_memory_label(label) == expected


@pytest.mark.parametrize(("value", "priority", "expected"), [
    pytest.param(None, 50, True, id="train is preemptible by its priority"),
    pytest.param("", 99, True, id="below 100"),
    pytest.param(None, 100, False, id="build is not"),
    pytest.param("preemptible", 125, True, id="an explicit value wins"),
    pytest.param("non-preemptible", 50, False, id="an explicit value wins, either way"),
])
def test_preemptibility(value: object, priority: int, expected: bool) -> None:
    assert preemptibility(value, priority, "spec.preemptibility") is expected


def test_preemptibility_refuses_other_values() -> None:
    with pytest.raises(ConvertError, match=r"spec\.preemptibility: 'maybe'"):
        preemptibility("maybe", 50, "spec.preemptibility")


def test_queue_units() -> None:
    assert (queue_amount(2.5, "gpu"), queue_amount(4000, "cpu"), queue_amount(1000, "memory"),
            queue_amount(-1, "gpu")) == (2500, 4000, 10**9, -1)
