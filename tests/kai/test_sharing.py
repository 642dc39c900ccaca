"""KAI's GPU-sharing objects: the fraction container, ConfigMap names and links, reservation pods."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.kai.pods import placed_pod_from
from shoal.kai.sharing import (
    CONFIGMAP_ANNOTATION,
    ContainerRef,
    ReservationSpec,
    configmap_names,
    fraction_container,
    fractioning_annotations,
    link_configmaps,
    new_configmap_prefix,
    reservation_key,
    reservation_pod,
    reservation_pod_name,
    visible_devices_key_map,
)
from shoal.kai.units import ConvertError


def pod(annotations: dict[str, str] | None = None, init: list[str] = (), containers: list[str] = ("main",)) -> Any:
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}},
            "spec": {"initContainers": [{"name": n} for n in init], "containers": [{"name": n} for n in containers]}}


@pytest.mark.parametrize("obj, want", [
    pytest.param(pod(), ContainerRef("main", 0), id="the first container by default"),
    pytest.param(pod({"gpu-fraction-container-name": "gpu"}, containers=["side", "gpu"]), ContainerRef("gpu", 1),
                 id="a named regular container"),
    pytest.param(pod({"gpu-fraction-container-name": "gpu"}, init=["gpu"], containers=["gpu"]),
                 ContainerRef("gpu", 0, True), id="init containers are searched first (KAI)"),
])
def test_fraction_container(obj: Any, want: ContainerRef) -> None:
    assert fraction_container(obj) == want


def test_a_missing_named_container_is_refused_with_the_annotation() -> None:
    with pytest.raises(ConvertError, match="gpu-fraction-container-name='nope'"):
        fraction_container(pod({"gpu-fraction-container-name": "nope"}))


def test_links_and_names_follow_kai() -> None:
    obj = pod({"gpu-fraction-container-name": "gpu"}, init=["gpu"])
    ref = fraction_container(obj)
    prefix = new_configmap_prefix(obj, ref, "abcdefg")
    assert prefix == "p-abcdefg-shared-gpu"
    assert configmap_names(prefix, ref) == (f"{prefix}-i0", f"{prefix}-i0-evar")
    out = link_configmaps(obj, ref, prefix)
    assert obj["spec"]["initContainers"][0] == {"name": "gpu"}, "the input is not mutated"
    c = out["spec"]["initContainers"][0]
    assert out["metadata"]["annotations"][CONFIGMAP_ANNOTATION] == prefix
    assert [e["name"] for e in c["env"]] == ["NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION"]
    assert c["envFrom"] == [{"configMapRef": {"name": f"{prefix}-i0-evar", "optional": False}}]
    assert out["spec"]["volumes"] == [{"name": f"{prefix}-i0-vol", "configMap": {"name": f"{prefix}-i0"}}]
    assert visible_devices_key_map(out, ref, prefix) == f"{prefix}-i0"
    assert visible_devices_key_map(obj, ref, prefix) == f"{prefix}-i0-evar"
    assert link_configmaps(out, ref, prefix) == out, "linking twice changes nothing"


def test_a_long_owner_name_keeps_the_volume_name_valid() -> None:
    obj = pod()
    obj["metadata"]["ownerReferences"] = [{"name": "x" * 80}]
    ref = fraction_container(obj)
    caps, evar = configmap_names(new_configmap_prefix(obj, ref, "abcdefg"), ref)
    assert len(f"{evar}-vol") <= 63 and len(f"{caps}-vol") <= 63


def test_reservation_pods_are_deterministic_and_hold_no_gpu_of_their_own() -> None:
    r = reservation_pod("node-a", "1", ReservationSpec(runtime_class="nvidia"))
    assert r["metadata"]["name"] == reservation_pod_name("node-a", "1") == "gpu-reservation-node-a-1"
    assert r["metadata"]["labels"] == {"app": "kai-resource-reservation", "runai-gpu-group": "1"}
    assert r["spec"]["nodeName"] == "node-a" and r["spec"]["runtimeClassName"] == "nvidia"
    assert r["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert reservation_key(r) == ("node-a", "1")
    assert placed_pod_from({**r, "metadata": {**r["metadata"], "uid": "u"}}, "other").gpu.whole == 0
    long = reservation_pod_name("n" * 70, "0")
    assert len(long) <= 63 and long != reservation_pod_name("n" * 69 + "m", "0")


def test_fractioning_annotations() -> None:
    assert fractioning_annotations("trainer", ["GPU-a", "GPU-b"], 8192) == {
        "nvidia.com/container.trainer.gpus.devices": "GPU-a,GPU-b",
        "nvidia.com/container.trainer.gpu-memory.request": "8192Mi",
        "nvidia.com/container.trainer.gpu-memory.limit": "8192Mi",
    }
