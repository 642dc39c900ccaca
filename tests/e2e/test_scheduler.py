"""`shoal run` against the real API server: KAI examples, gangs, bad objects, other schedulers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Namespace, Pod

from .cluster import KEnv, data_text
from .scheduler_fixtures import (
    PodGroupRes,
    QueueRes,
    create,
    ensure_queue,
    events_for,
    pod_manifest,
    pod_state,
    shoal_runner,  # noqa: F401  (fixture)
    wait_until,
)

pytestmark = pytest.mark.e2e

GPU_MEMORY_LABELS = {"nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.count": "8"}


def _example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(data_text(f"kai-examples/{name}")) if d]


def _extra_namespace(kenv: KEnv, suffix: str) -> str:
    ns = f"{kenv.namespace}-{suffix}"[:63]
    kenv.client.create(Namespace(metadata=ObjectMeta(name=ns)))
    return ns


def _running(kenv: KEnv, name: str, ns: str) -> str | None:
    node, phase, _ = pod_state(kenv.client, name, ns)
    return node if node and phase == "Running" else None


def test_kai_examples_run_unchanged(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=8, labels=GPU_MEMORY_LABELS)
    kenv.wait_nodes_ready([node])
    shoal_runner("kai-scheduler")
    for q in _example("quickstart--default-queues.yaml"):
        try:
            create(kenv, q)
        except ApiError as e:
            if e.status.code != 409:
                raise
    placed: list[tuple[str, str]] = []
    for fname in ("quickstart--pods--cpu-only-pod.yaml", "quickstart--pods--gpu-pod.yaml"):
        for doc in _example(fname):
            create(kenv, doc)
            placed.append((doc["metadata"]["name"], kenv.namespace))
    # The fraction example twice (two namespaces, the manifest unchanged) and the gpu-memory example.
    frac = _example("gpu-sharing--gpu-sharing.yaml")[0]
    frac_ns = [kenv.namespace, _extra_namespace(kenv, "b")]
    for ns in frac_ns:
        create(kenv, copy.deepcopy(frac), namespace=ns)
    mem_ns = _extra_namespace(kenv, "m")
    mem = _example("gpu-sharing--gpu-memory.yaml")[0]
    try:
        for name, ns in [*placed, *((frac["metadata"]["name"], ns) for ns in frac_ns)]:
            assert wait_until(lambda n=name, s=ns: _running(kenv, n, s), 30, f"{ns}/{name} Running") == node
        # The gpu-memory pod comes after the two halves: placed first, it could take a slice of the
        # device the second half needs, and the halves would (rightly) land on two devices.
        create(kenv, mem, namespace=mem_ns)
        for doc in _example("batch--batch-job.yaml"):
            create(kenv, doc)
        assert wait_until(lambda: _running(kenv, mem["metadata"]["name"], mem_ns), 30, "gpu-memory pod") == node
        shared = [kenv.client.get(Pod, frac["metadata"]["name"], namespace=ns) for ns in frac_ns]
        groups = {p.metadata.labels.get("runai-gpu-group") for p in shared}
        assert len(groups) == 1 and None not in groups, f"fraction pods not on one GPU: {groups}"
        for p in shared:
            assert p.metadata.annotations["received-resource-type"] == "Fraction"
            assert p.metadata.annotations["gpu-portion"] == "0.50"
        mem_pod = kenv.client.get(Pod, mem["metadata"]["name"], namespace=mem_ns)
        assert mem_pod.metadata.annotations["received-resource-type"] == "Fraction"
        assert mem_pod.metadata.labels.get("runai-gpu-group")

        def job_pods_running() -> bool:
            pods = list(kenv.client.list(Pod, namespace=kenv.namespace, labels={"job-name": "batch-job"}))
            return len(pods) == 2 and all(p.status.phase == "Running" and p.spec.nodeName == node for p in pods)

        wait_until(job_pods_running, 60, "both batch-job pods Running")
        job = kenv.client.get(Job, "batch-job", namespace=kenv.namespace)
        assert job.status.active == 2
    finally:
        for ns in [*frac_ns[1:], mem_ns]:
            kenv.client.delete(Namespace, ns)


def _gang(kenv: KEnv, scheduler: str, queue: str, name: str, size: int, gpus: int = 1) -> list[str]:
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                  "metadata": {"name": name}, "spec": {"minMember": size, "queue": queue}})
    names = []
    for i in range(size):
        m = pod_manifest(f"{name}-{i}", scheduler, gpus=gpus, queue=queue,
                         annotations={"pod-group-name": name})
        create(kenv, m)
        names.append(m["metadata"]["name"])
    return names


def test_gang_waits_whole_and_runs_whole_when_a_node_is_added(kenv: KEnv, shoal_runner: Any) -> None:
    nodes = kenv.add_gpu_nodes(3, gpus=1)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner()
    pods = _gang(kenv, sched.scheduler_name, queue, "gang", 4)

    def all_explained() -> bool:
        states = [pod_state(kenv.client, p, kenv.namespace) for p in pods]
        return all(c is not None and c.status == "False" and c.reason == "Unschedulable" for _, _, c in states)

    wait_until(all_explained, 20, "PodScheduled=False/Unschedulable on every gang pod")
    assert all(pod_state(kenv.client, p, kenv.namespace)[0] is None for p in pods), "part of the gang was bound"
    _, _, cond = pod_state(kenv.client, pods[0], kenv.namespace)
    assert "gang" in cond.message.lower() or "4" in cond.message, cond.message
    evs = wait_until(lambda: events_for(kenv.client, pods[0], kenv.namespace, "FailedScheduling"), 10,
                     "FailedScheduling event")
    assert evs[0].message == cond.message
    pg = kenv.client.get(PodGroupRes, "gang", namespace=kenv.namespace)
    conds = (pg.get("status") or {}).get("schedulingConditions") or []
    assert conds and conds[0]["reasons"], pg.get("status")
    more = kenv.add_gpu_nodes(1, gpus=1)
    kenv.wait_nodes_ready(more)
    for p in pods:
        wait_until(lambda p=p: _running(kenv, p, kenv.namespace), 30, f"{p} Running")
    used = {pod_state(kenv.client, p, kenv.namespace)[0] for p in pods}
    assert used == set(nodes + more)


@pytest.mark.parametrize("fraction", [pytest.param("abc", id="not-a-number"),
                                      pytest.param("1.7", id="above-one")])
def test_bad_fraction_is_reported_and_others_keep_scheduling(kenv: KEnv, shoal_runner: Any,
                                                            fraction: str) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=2)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner()
    create(kenv, pod_manifest("bad", sched.scheduler_name, queue=queue, annotations={"gpu-fraction": fraction}))
    create(kenv, pod_manifest("good", sched.scheduler_name, gpus=1, queue=queue))

    def reported() -> Any:
        _, _, c = pod_state(kenv.client, "bad", kenv.namespace)
        return c if c is not None and c.status == "False" else None

    cond = wait_until(reported, 20, "condition on the bad pod")
    assert cond.reason == "Unschedulable" and "gpu-fraction" in cond.message and fraction in cond.message
    # The event is written just after the condition: wait for it rather than race it.
    wait_until(lambda: events_for(kenv.client, "bad", kenv.namespace, "FailedScheduling"), 10, "FailedScheduling")
    assert wait_until(lambda: _running(kenv, "good", kenv.namespace), 20, "good pod Running") == node
    assert pod_state(kenv.client, "bad", kenv.namespace)[0] is None


def test_invalid_queue_gets_condition_and_others_keep_scheduling(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=2)
    kenv.wait_nodes_ready([node])
    suffix = kenv.node_prefix[-6:]
    bad_q, good_q = f"neg-{suffix}", f"ok-{suffix}"
    # -0.5 passes the CRD's `minimum: -1` but is no valid quota (-1 = unlimited is the only negative).
    ensure_queue(kenv.client, bad_q, spec={"resources": {
        "gpu": {"quota": -0.5, "limit": -1, "overQuotaWeight": 1},
        "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}})
    ensure_queue(kenv.client, good_q)
    sched = shoal_runner()
    create(kenv, pod_manifest("in-bad-queue", sched.scheduler_name, gpus=1, queue=bad_q))
    create(kenv, pod_manifest("in-good-queue", sched.scheduler_name, gpus=1, queue=good_q))
    try:
        def queue_condition() -> Any:
            q = kenv.client.get(QueueRes, bad_q)
            conds = (q.get("status") or {}).get("conditions") or []
            return next((c for c in conds if c.get("type") == "Valid" and c.get("status") == "False"), None)

        cond = wait_until(queue_condition, 20, "Valid=False condition on the queue")
        assert "quota" in cond["message"] and "-0.5" in cond["message"], cond
        assert wait_until(lambda: _running(kenv, "in-good-queue", kenv.namespace), 20, "good pod") == node

        def explained() -> Any:
            _, _, c = pod_state(kenv.client, "in-bad-queue", kenv.namespace)
            return c if c is not None and c.status == "False" else None

        assert bad_q in wait_until(explained, 20, "pending reason on the bad queue's pod").message
    finally:
        for q in (bad_q, good_q):
            kenv.client.delete(QueueRes, q)


def test_pods_of_other_schedulers_count_as_used(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=2)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    create(kenv, pod_manifest("foreign", "default-scheduler", gpus=2, node=node))
    sched = shoal_runner()
    create(kenv, pod_manifest("ours", sched.scheduler_name, gpus=1, queue=queue))

    def explained() -> Any:
        _, _, c = pod_state(kenv.client, "ours", kenv.namespace)
        return c if c is not None and c.status == "False" else None

    wait_until(explained, 20, "our pod explained as pending")
    assert pod_state(kenv.client, "ours", kenv.namespace)[0] is None
    kenv.client.delete(Pod, "foreign", namespace=kenv.namespace)
    assert wait_until(lambda: _running(kenv, "ours", kenv.namespace), 30, "our pod Running") == node
    # The foreign pod was never touched by shoal.
    evs = events_for(kenv.client, "foreign", kenv.namespace)
    assert not [e for e in evs if e.source and e.source.component == sched.scheduler_name]


def test_pod_grouper_creates_podgroups_owned_by_the_top_owner(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=4)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    sched = shoal_runner()
    template = pod_manifest("x", sched.scheduler_name, gpus=1, queue=queue)
    create(kenv, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
                  "spec": {"parallelism": 2, "completions": 2,
                           "template": {"metadata": {"labels": template["metadata"]["labels"]},
                                        "spec": {**template["spec"], "restartPolicy": "Never"}}}})
    create(kenv, pod_manifest("bare", sched.scheduler_name, gpus=1, queue=queue))

    def grouped_and_running() -> list[Any] | None:
        pods = list(kenv.client.list(Pod, namespace=kenv.namespace))
        ok = len(pods) == 3 and all(p.status.phase == "Running" and p.metadata.annotations
                                    and p.metadata.annotations.get("pod-group-name") for p in pods)
        return pods if ok else None

    pods = wait_until(grouped_and_running, 40, "Job and bare pods grouped and Running")
    by_name = {p.metadata.name: p.metadata.annotations["pod-group-name"] for p in pods}
    # KAI's batch Job grouping: one PodGroup per pod (a Job is no gang), each owned by the Job.
    job_groups = {g for n, g in by_name.items() if n != "bare"}
    assert len(job_groups) == 2 and by_name["bare"] not in job_groups
    for group in job_groups:
        pg = kenv.client.get(PodGroupRes, group, namespace=kenv.namespace)
        assert [(o["kind"], o["name"]) for o in pg["metadata"]["ownerReferences"]] == [("Job", "train")]
        assert pg["spec"]["queue"] == queue
    bare = kenv.client.get(PodGroupRes, by_name["bare"], namespace=kenv.namespace)
    assert [(o["kind"], o["name"]) for o in bare["metadata"]["ownerReferences"]] == [("Pod", "bare")]


def test_health_ready_and_metrics_endpoints(kenv: KEnv, shoal_runner: Any) -> None:
    import socket
    import urllib.request

    (node,) = kenv.add_gpu_nodes(1, gpus=2)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sched = shoal_runner(None, "--metrics-port", str(port))
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(base + path, timeout=2) as r:
                return r.status, r.read().decode()
        except OSError as e:
            return getattr(e, "code", 0), ""

    wait_until(lambda: get("/readyz")[0] == 200, 30, "/readyz 200")
    assert get("/healthz") == (200, "ok\n")
    create(kenv, pod_manifest("half", sched.scheduler_name, queue=queue, annotations={"gpu-fraction": "0.5"}))
    wait_until(lambda: _running(kenv, "half", kenv.namespace), 30, "fraction pod Running")

    def scraped() -> str | None:
        status, body = get("/metrics")
        return body if status == 200 and "shoal_pod_gpu_fraction{" in body else None

    body = wait_until(scraped, 20, "per-pod GPU metrics")
    lines = {ln.split(" ")[0]: float(ln.split(" ")[1]) for ln in body.splitlines() if ln and not ln.startswith("#")}
    assert lines["shoal_pods_scheduled_total"] >= 1
    assert lines[f'shoal_pod_gpu_fraction{{namespace="{kenv.namespace}",pod="half"}}'] == 0.5
    assert lines[f'shoal_pod_gpu_devices{{namespace="{kenv.namespace}",pod="half"}}'] == 1
    assert lines[f'shoal_queue_allocated{{queue="{queue}",resource="gpu"}}'] == 0.5
    assert any(k.startswith("shoal_cycle_latency_seconds_count") for k in lines)
    assert get("/nope")[0] == 404


def test_install_crds_applies_the_manifests_idempotently(cluster: Any) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "shoal.cli.main", "install-crds", "--kubeconfig", str(cluster.admin_kubeconfig)]
    for _ in range(2):  # the second run re-applies over what exists
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert "customresourcedefinition/queues.scheduling.run.ai applied" in lines
    assert "customresourcedefinition/podgroups.scheduling.run.ai applied" in lines
    assert "customresourcedefinition/topologies.kai.scheduler applied" in lines
    assert {f"priorityclass/{p} applied" for p in ("train", "build-preemptible", "build", "inference")} <= set(lines)
