"""The reservation agent: which device it reports, and that it writes the annotation once."""

from __future__ import annotations

import asyncio

import pytest

from shoal.kube.gpusharing.agent import AgentError, device_of, run_agent

from .fake_api import FakeApi


def no_nvml() -> list[str]:
    raise AgentError("nvml not available")


@pytest.mark.parametrize("env, nvml, want", [
    pytest.param({"NVIDIA_VISIBLE_DEVICES": "GPU-1"}, no_nvml, "GPU-1", id="the device plugin's env"),
    pytest.param({"NVIDIA_VISIBLE_DEVICES": "void"}, lambda: ["GPU-9"], "GPU-9", id="volume strategy: NVML"),
    pytest.param({}, lambda: ["GPU-9"], "GPU-9", id="no env: NVML"),
])
def test_device_of(env: dict[str, str], nvml: object, want: str) -> None:
    assert device_of(env, nvml) == want  # type: ignore[arg-type]


def test_more_than_one_device_is_an_error() -> None:
    with pytest.raises(AgentError, match="found 2 GPU devices"):
        device_of({"NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-2"}, no_nvml)


def test_the_agent_writes_its_device_once() -> None:
    api = FakeApi()
    api.put("/api/v1/namespaces/r/pods/res", {"metadata": {"name": "res", "namespace": "r"}})
    env = {"POD_NAME": "res", "POD_NAMESPACE": "r", "NVIDIA_VISIBLE_DEVICES": "GPU-7"}
    asyncio.run(run_agent(api, env, once=True))
    asyncio.run(run_agent(api, {**env, "NVIDIA_VISIBLE_DEVICES": "GPU-8"}, once=True))
    patches = api.sent("PATCH", "/pods/res")
    assert len(patches) == 1 and patches[0].body["metadata"]["annotations"] == {"run.ai/reserve_for_gpu_index": "GPU-7"}
