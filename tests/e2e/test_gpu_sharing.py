"""GPU sharing on the real test API server (issue #15): reservation pods, the device handshake, the
shared-GPU ConfigMaps, clean-up, restarts in the middle, and the Fractioning Operator's annotations.

kwok "runs" every pod; `FakeDevicePlugin` (sharing_fixtures.py) gives each reservation pod a device
UUID of its node through the real agent code. Pods are linked to their ConfigMaps by
`kai.sharing.link_configmaps`, the mutation the admission webhook applies.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError
from lightkube.resources.core_v1 import ConfigMap, Pod

from shoal.kai.sharing import (
    RESERVATION_NAMESPACE,
    RESERVED_DEVICE_ANNOTATION,
    ReservationSpec,
    fraction_container,
    link_configmaps,
    new_configmap_prefix,
    reservation_pod,
)

from .cluster import KEnv, data_text, eventually
from .scheduler_fixtures import (  # noqa: F401
    create,
    ensure_queue,
    events_for,
    pod_manifest,
    pod_state,
    shoal_runner,
)
from .sharing_fixtures import (  # noqa: F401
    FakeDevicePlugin,
    Webhook,
    configmap_data,
    device_plugin,
    fractiond_env,
    groups_of,
    reservation_devices,
    reservations,
)

SHARING = ("--gpu-sharing", "reservation", "--gpu-sharing-timeout", "20s")


def linked(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as the mutating webhook returns it."""
    ref = fraction_container(manifest)
    return link_configmaps(manifest, ref, new_configmap_prefix(manifest, ref, secrets.token_hex(4)[:7]))


def shared_pod(name: str, sched: str, queue: str, **annotations: str) -> dict[str, Any]:
    return linked(pod_manifest(name, sched, queue=queue, annotations=annotations))


def bound(kenv: KEnv, *names: str, timeout: float = 60) -> list[Any]:
    def probe() -> list[Any] | None:
        pods = [kenv.client.get(Pod, n, namespace=kenv.namespace) for n in names]
        return pods if all(p.spec.nodeName for p in pods) else None

    return eventually(probe, timeout, what=f"{names} bound")


def devices_of(kenv: KEnv, pod: Any) -> str:
    return eventually(lambda: configmap_data(kenv.client, pod).get("NVIDIA_VISIBLE_DEVICES"), 20,
                      what=f"NVIDIA_VISIBLE_DEVICES of {pod.metadata.name}")


def assert_consistent(kenv: KEnv, plugin: FakeDevicePlugin, pods: list[Any]) -> None:
    """Every GPU has at most one reservation pod, each group one, and each pod's ConfigMap carries
    its groups' reserved devices."""
    assert plugin.errors == []
    by_key = reservation_devices(kenv)
    assert all(len(devs) == 1 and devs[0] for devs in by_key.values()), by_key
    all_devices = [devs[0] for devs in by_key.values()]
    assert len(all_devices) == len(set(all_devices)), f"a GPU reserved twice: {by_key}"
    for pod in pods:
        pod = kenv.client.get(Pod, pod.metadata.name, namespace=pod.metadata.namespace)
        want = ",".join(by_key[(pod.spec.nodeName, g)][0] for g in groups_of(pod))
        assert configmap_data(kenv.client, pod).get("NVIDIA_VISIBLE_DEVICES") == want, pod.metadata.name


def test_two_halves_share_one_reservation_and_a_third_gets_another_gpu(
        kenv: KEnv, shoal_runner: Any, device_plugin: FakeDevicePlugin) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=2)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, *SHARING)
    for name in ("a", "b"):
        create(kenv, shared_pod(name, sched.scheduler_name, queue, **{"gpu-fraction": "0.5"}))
    a, b = bound(kenv, "a", "b")
    assert groups_of(a) == groups_of(b), "two halves on one node share one GPU group"
    assert len(reservations(kenv)) == 1
    dev = devices_of(kenv, a)
    assert dev.startswith(f"GPU-{node}-") and devices_of(kenv, b) == dev
    assert configmap_data(kenv.client, a)["GPU_PORTION"] == "0.50"
    create(kenv, shared_pod("c", sched.scheduler_name, queue, **{"gpu-fraction": "0.5"}))
    (c,) = bound(kenv, "c")
    other = devices_of(kenv, c)
    assert other.startswith(f"GPU-{node}-") and other != dev
    assert len(reservations(kenv)) == 2
    assert_consistent(kenv, device_plugin, [a, b, c])
    # Deleting the pods removes the reservation pods and the ConfigMaps.
    cms = [n for p in (a, b, c) for n in configmap_data_names(p)]
    kenv.client.deletecollection(Pod, namespace=kenv.namespace, grace_period=0)
    eventually(lambda: not reservations(kenv), 30, what="reservation pods deleted")
    eventually(lambda: not [n for n in cms if exists(kenv, n)], 30, what="ConfigMaps deleted")


def configmap_data_names(pod: Any) -> list[str]:
    from shoal.kai.sharing import configmap_names

    obj = pod.to_dict()
    return list(configmap_names(obj["metadata"]["annotations"]["runai/shared-gpu-configmap"], fraction_container(obj)))


def exists(kenv: KEnv, name: str) -> bool:
    try:
        kenv.client.get(ConfigMap, name, namespace=kenv.namespace)
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise
    return True


def test_multi_device_fraction_and_gpu_memory_pods(kenv: KEnv, shoal_runner: Any,
                                                   device_plugin: FakeDevicePlugin) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=4, labels={"nvidia.com/gpu.memory": "40000"})
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, *SHARING)
    create(kenv, shared_pod("two", sched.scheduler_name, queue,
                            **{"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}))
    create(kenv, shared_pod("mem", sched.scheduler_name, queue, **{"gpu-memory": "10000"}))
    two, mem = bound(kenv, "two", "mem")
    devs = devices_of(kenv, two).split(",")
    assert len(devs) == 2 and len(set(devs)) == 2 and all(d.startswith(f"GPU-{node}-") for d in devs)
    assert configmap_data(kenv.client, mem)["GPU_PORTION"] == "0.25"  # 10000 of 40000 MiB
    devices_of(kenv, mem)
    assert_consistent(kenv, device_plugin, [two, mem])


def test_no_device_in_time_releases_the_group_and_says_why(kenv: KEnv, shoal_runner: Any,
                                                           device_plugin: FakeDevicePlugin) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=1)
    device_plugin.silent_nodes.add(node)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, "--gpu-sharing", "reservation", "--gpu-sharing-timeout", "3s")
    create(kenv, shared_pod("late", sched.scheduler_name, queue, **{"gpu-fraction": "0.5"}))
    ev = eventually(lambda: events_for(kenv.client, "late", kenv.namespace, "GPUSharingFailed") or None, 40,
                    what="GPUSharingFailed event")
    assert "no GPU device reported by reservation pod" in ev[0].message and node in ev[0].message
    pod = kenv.client.get(Pod, "late", namespace=kenv.namespace)
    assert not pod.spec.nodeName, "a pod without a known device is never bound"
    # Once the node's agent answers, the next attempt goes through.
    device_plugin.silent_nodes.clear()
    (late,) = bound(kenv, "late")
    assert devices_of(kenv, late).startswith(f"GPU-{node}-")
    try:
        # The failed attempt's reservation pod goes at the next reconcile pass (a wake-up or the
        # 5 s resync) plus the API's delete; 60 s leaves room for a loaded CI machine.
        eventually(lambda: len(reservations(kenv)) == 1, 60, what="one reservation pod left")
    except AssertionError as e:
        left = [(p.metadata.name, p.metadata.uid, (p.metadata.annotations or {}).get(RESERVED_DEVICE_ANNOTATION))
                for p in reservations(kenv)]
        raise AssertionError(f"{e}; reservation pods: {left}; shoal's log ends:\n{sched.tail(6000)}") from e
    assert_consistent(kenv, device_plugin, [late])
    assert kenv.client.get(Pod, "late", namespace=kenv.namespace).metadata.uid == late.metadata.uid, \
        "the bound pod was not evicted"


def test_restart_between_reservation_and_bind(kenv: KEnv, shoal_runner: Any,
                                              device_plugin: FakeDevicePlugin) -> None:
    kenv.add_gpu_nodes(1, gpus=2)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, *SHARING, env={"SHOAL_FAILPOINT": "reserved"})
    create(kenv, shared_pod("p", sched.scheduler_name, queue, **{"gpu-fraction": "0.5"}))
    eventually(lambda: sched.proc.poll() == 17, 60, what="the scheduler to crash after reserving")
    assert len(reservations(kenv)) == 1
    assert not kenv.client.get(Pod, "p", namespace=kenv.namespace).spec.nodeName
    shoal_runner(sched.scheduler_name, *SHARING)
    (p,) = bound(kenv, "p")
    devices_of(kenv, p)
    eventually(lambda: len(reservations(kenv)) == 1, 20, what="the interrupted reservation gone")
    assert_consistent(kenv, device_plugin, [p])


def test_restart_between_bind_and_configmap_write(kenv: KEnv, shoal_runner: Any,
                                                  device_plugin: FakeDevicePlugin) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=3)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, *SHARING, env={"SHOAL_FAILPOINT": "bound"})
    create(kenv, shared_pod("p", sched.scheduler_name, queue, **{"gpu-fraction": "0.5"}))
    eventually(lambda: sched.proc.poll() == 17, 60, what="the scheduler to crash after binding")
    (p,) = bound(kenv, "p")
    # shoal writes the ConfigMap before binding; a binder that wrote it after (or a lost write)
    # leaves this state: the pod bound, its ConfigMap without the device.
    for name in configmap_data_names(p):
        kenv.client.delete(ConfigMap, name, namespace=kenv.namespace)
    # A second shared pod arrives while the scheduler is down, and an orphan reservation pod is
    # left by a group nobody uses any more.
    create(kenv, shared_pod("q", sched.scheduler_name, queue, **{"gpu-fraction": "0.5"}))
    orphan = reservation_pod(node, "9", ReservationSpec())
    kenv.client.create(Pod.from_dict(orphan), namespace=RESERVATION_NAMESPACE)
    eventually(lambda: len(reservations(kenv)) == 2, 10, what="the orphan reservation pod")
    shoal_runner(sched.scheduler_name, *SHARING)
    (q,) = bound(kenv, "q")
    devices_of(kenv, p)
    devices_of(kenv, q)
    eventually(lambda: all(g != "9" for _, g in reservation_devices(kenv)), 20,
               what="the orphan reservation pod deleted")
    assert_consistent(kenv, device_plugin, [p, q])


def test_fractioning_operator_annotations_are_written_before_the_bind(
        kenv: KEnv, shoal_runner: Any, device_plugin: FakeDevicePlugin) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=2, labels={"nvidia.com/gpu.memory": "40000"})
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, "--gpu-sharing", "fractioning", "--gpu-sharing-timeout", "20s")
    half = pod_manifest("half", sched.scheduler_name, queue=queue,
                        annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "trainer"})
    half["spec"]["containers"].insert(0, {"name": "sidecar", "image": "busybox"})
    half["spec"]["containers"][1]["name"] = "trainer"
    create(kenv, half)  # not linked to ConfigMaps: fractiond needs none
    create(kenv, pod_manifest("mem", sched.scheduler_name, queue=queue, annotations={"gpu-memory": "10000"}))
    half_pod, mem_pod = bound(kenv, "half", "mem")
    by_key = reservation_devices(kenv)
    env = fractiond_env(half_pod, "trainer")
    assert env == {"NVIDIA_VISIBLE_DEVICES": by_key[(node, groups_of(half_pod)[0])][0],
                   "NVIDIA_GPU_MEMORY_REQUESTS": "20000", "NVIDIA_GPU_MEMORY_LIMITS": "20000"}
    assert fractiond_env(half_pod, "sidecar") == {}, "only the named container gets the GPU"
    env = fractiond_env(mem_pod, "main")
    assert env["NVIDIA_VISIBLE_DEVICES"] == by_key[(node, groups_of(mem_pod)[0])][0]
    assert env["NVIDIA_GPU_MEMORY_LIMITS"] == "10000"
    assert device_plugin.errors == []


# ------------------------------------------------------------------------------------ the webhook


@pytest.fixture
def webhook_for(kenv: KEnv, tmp_path: Path) -> Iterator[Any]:
    hooks: list[Webhook] = []

    def start(scheduler_name: str) -> Webhook:
        hooks.append(Webhook(kenv.cluster, kenv, scheduler_name, tmp_path / f"wh{len(hooks)}").start())
        return hooks[-1]

    yield start
    for h in hooks:
        h.stop()


def refused(kenv: KEnv, manifest: dict[str, Any]) -> str:
    """The API server's refusal message for creating `manifest` (fails if it is accepted)."""
    try:
        create(kenv, manifest)
    except ApiError as e:
        return str(e.status.message)
    raise AssertionError(f"{manifest['metadata']['name']} was accepted")


def bad_pods(sched: str, queue: str, parent: str) -> list[tuple[dict[str, Any], str]]:
    whole = pod_manifest("whole-and-fraction", sched, queue=queue, gpus=1, annotations={"gpu-fraction": "0.5"})
    return [
        (pod_manifest("too-big", sched, queue=queue, annotations={"gpu-fraction": "1.5"}), "gpu-fraction='1.5'"),
        (pod_manifest("zero", sched, queue=queue, annotations={"gpu-fraction": "0"}), "gpu-fraction='0'"),
        (pod_manifest("word", sched, queue=queue, annotations={"gpu-fraction": "half"}), "not a number"),
        (whole, "gpu-fraction with an nvidia.com/gpu request"),
        (pod_manifest("neg-mem", sched, queue=queue, annotations={"gpu-memory": "-5"}), "gpu-memory='-5'"),
        (pod_manifest("no-queue", sched, queue="no-such-queue"), "kai.scheduler/queue='no-such-queue'"),
        (pod_manifest("parent", sched, queue=parent), "not a leaf"),
        (pod_manifest("no-container", sched, queue=queue,
                      annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "nope"}),
         "gpu-fraction-container-name='nope'"),
    ]


def test_webhook_refuses_bad_input_and_links_fractional_pods(
        kenv: KEnv, shoal_runner: Any, device_plugin: FakeDevicePlugin, webhook_for: Any) -> None:
    kenv.add_gpu_nodes(1, gpus=2)
    queue, parent = f"q-{kenv.node_prefix[-6:]}", f"p-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, parent)
    ensure_queue(kenv.client, queue, parent=parent)
    sched = shoal_runner(None, *SHARING)
    hook = webhook_for(sched.scheduler_name)
    hook.register()
    eventually(lambda: _refuses(kenv, sched.scheduler_name, queue), 30, what="the webhook answering")
    for manifest, field_name in bad_pods(sched.scheduler_name, queue, parent):
        message = refused(kenv, manifest)
        assert field_name in message, (manifest["metadata"]["name"], message)
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg"},
          "spec": {"minMember": 2, "queue": queue, "minSubGroup": 3,
                   "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}}
    assert "spec.minSubGroup: 3 is impossible" in refused(kenv, pg)
    assert "spec.minMember" in refused(kenv, {**pg, "spec": {"minMember": -1, "queue": queue}})
    # Other schedulers' pods pass untouched, whatever they carry.
    create(kenv, pod_manifest("theirs", "default-scheduler", queue="nowhere", annotations={"gpu-fraction": "7"}))
    # A good fractional pod is linked to its ConfigMaps and gets its device.
    create(kenv, pod_manifest("good", sched.scheduler_name, queue=queue, annotations={"gpu-fraction": "0.5"}))
    (good,) = bound(kenv, "good")
    assert (good.metadata.annotations or {}).get("runai/shared-gpu-configmap")
    assert devices_of(kenv, good).startswith("GPU-")
    assert_consistent(kenv, device_plugin, [good])


def _refuses(kenv: KEnv, sched: str, queue: str) -> bool:
    try:
        kenv.client.create(Pod.from_dict(pod_manifest("probe", sched, queue=queue,
                                                      annotations={"gpu-fraction": "9"})),
                           namespace=kenv.namespace, dry_run=True)
    except ApiError as e:
        return "gpu-fraction" in str(e.status.message)
    return False


def test_webhook_down_with_ignore_lets_pods_through_and_the_scheduler_reports_them(
        kenv: KEnv, shoal_runner: Any, webhook_for: Any) -> None:
    kenv.add_gpu_nodes(1, gpus=1)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner(None, *SHARING)
    hook = webhook_for(sched.scheduler_name)
    hook.proc.terminate()
    hook.register("Ignore")
    create(kenv, pod_manifest("bad", sched.scheduler_name, queue=queue, annotations={"gpu-fraction": "1.5"}))

    def reported() -> str | None:
        _, _, cond = pod_state(kenv.client, "bad", kenv.namespace)
        return cond.message if cond is not None and cond.reason == "Unschedulable" else None

    assert "gpu-fraction" in eventually(reported, 30, what="the scheduler's report")


@pytest.mark.parametrize("example", ["gpu-sharing--gpu-sharing.yaml", "gpu-sharing--gpu-memory.yaml",
                                     "gpu-sharing--gpu-sharing-non-default-container.yaml",
                                     "gpu-sharing--gpu-sharing-init-container.yaml"])
def test_kai_gpu_sharing_examples_run_unchanged(kenv: KEnv, shoal_runner: Any, device_plugin: FakeDevicePlugin,
                                               webhook_for: Any, example: str) -> None:
    kenv.add_gpu_nodes(1, gpus=2, labels={"nvidia.com/gpu.memory": "40000"})
    ensure_queue(kenv.client, "default-queue")
    shoal_runner("kai-scheduler", *SHARING)
    webhook_for("kai-scheduler").register()
    (doc,) = [d for d in yaml.safe_load_all(data_text(f"kai-examples/{example}")) if d]
    eventually(lambda: _refuses(kenv, "kai-scheduler", "default-queue"), 30, what="the webhook answering")
    create(kenv, doc)
    (pod,) = bound(kenv, doc["metadata"]["name"])
    data = configmap_data(kenv.client, pod)
    assert devices_of(kenv, pod).startswith("GPU-")
    assert data["GPU_PORTION"] == ("0.05" if "gpu-memory" in example else "0.50")  # 2000 of 40000 MiB
    ref = fraction_container(pod.to_dict())
    container = (pod.spec.initContainers if ref.init else pod.spec.containers)[ref.index]
    assert container.name == doc["metadata"]["annotations"].get("gpu-fraction-container-name", container.name)
    assert any(e.configMapRef and e.configMapRef.name.endswith("-evar") for e in container.envFrom or [])
    others = [c for c in pod.spec.containers + (pod.spec.initContainers or []) if c is not container]
    assert not any(c.envFrom for c in others), "only the fraction container is linked"
    assert_consistent(kenv, device_plugin, [pod])
