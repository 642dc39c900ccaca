"""`shoal gpu-reservation-agent`: runs in a reservation pod, reports which GPU it was given.

Contract: reads the device the NVIDIA runtime gave the container — `NVIDIA_VISIBLE_DEVICES` (a
UUID, as the device plugin's env strategy sets it), else NVML through `nvidia-ml-py` when that is
installed — and writes it into its own pod's annotation `run.ai/reserve_for_gpu_index` (KAI's
handshake), unless the annotation is there already (a restarted container). Then it sleeps until
stopped: the pod must live as long as the GPU group does. Exactly one device is expected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from shoal.kai.sharing import RESERVED_DEVICE_ANNOTATION, VISIBLE_DEVICES
from shoal.kube.client import PODS, KubeClient

logger = logging.getLogger(__name__)

#: Values of NVIDIA_VISIBLE_DEVICES that name no device (the runtime reads another source).
_NOT_A_LIST = ("", "all", "none", "void")


class AgentError(Exception):
    """The agent cannot tell which device it holds; the message says why."""


def nvml_uuids() -> list[str]:
    """UUIDs of the devices NVML shows this container (needs `nvidia-ml-py`)."""
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise AgentError("NVIDIA_VISIBLE_DEVICES names no device and nvidia-ml-py is not installed") from e
    pynvml.nvmlInit()
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            out.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        return out
    finally:
        pynvml.nvmlShutdown()


def device_of(environ: Mapping[str, str], nvml: Callable[[], list[str]] = nvml_uuids) -> str:
    """The one device this container holds: from NVIDIA_VISIBLE_DEVICES, else from `nvml()`."""
    value = environ.get(VISIBLE_DEVICES, "").strip()
    devices = [d.strip() for d in value.split(",") if d.strip()] if value.lower() not in _NOT_A_LIST else nvml()
    if len(devices) != 1:
        raise AgentError(f"found {len(devices)} GPU devices ({', '.join(devices) or 'none'}), 1 was expected")
    return devices[0]


async def report(client: KubeClient, namespace: str, name: str, device: str) -> bool:
    """Write `device` into the pod's annotation unless one is there; True if it wrote."""
    pod = await client.get(PODS, name, namespace)
    if ((pod.get("metadata") or {}).get("annotations") or {}).get(RESERVED_DEVICE_ANNOTATION):
        return False
    await client.patch(PODS, name, {"metadata": {"annotations": {RESERVED_DEVICE_ANNOTATION: device}}}, namespace)
    logger.info("reported GPU %s for %s/%s", device, namespace, name)
    return True


async def run_agent(client: KubeClient, environ: Mapping[str, str], *, once: bool = False,
                    nvml: Callable[[], list[str]] = nvml_uuids) -> None:
    """Report the device of pod $POD_NAMESPACE/$POD_NAME, then sleep until cancelled (unless `once`)."""
    namespace, name = environ.get("POD_NAMESPACE", ""), environ.get("POD_NAME", "")
    if not namespace or not name:
        raise AgentError("POD_NAMESPACE and POD_NAME must be set (the downward API in the reservation pod)")
    await report(client, namespace, name, device_of(environ, nvml))
    if not once:
        await asyncio.Event().wait()
