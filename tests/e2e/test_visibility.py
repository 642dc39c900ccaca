"""The live visibility commands against the real API server, as a read-only user (rbac-viewer.yaml).

One cluster layout holds three gangs blocked by three different causes: a queue at its GPU limit,
free GPUs spread over nodes (fragmentation), and a required rack no rack can hold. `shoal pending`,
`queues` and `explain` must name each cause; the scheduler must predict a start from a running
job's declared run time; `shoal snapshot` must replay with `shoal cycle` to the live decision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube.generic_resource import create_global_resource

from .cluster import Cluster, KEnv, eventually
from .scheduler_fixtures import PodGroupRes, create, ensure_queue, pod_manifest, shoal_runner  # noqa: F401

TopologyRes = create_global_resource("kai.scheduler", "v1alpha1", "Topology", "topologies")


def shoal_cli(cluster: Cluster, *args: str, who: str = "viewer",
              check: bool = True) -> subprocess.CompletedProcess[str]:
    kubeconfig = cluster.viewer_kubeconfig if who == "viewer" else cluster.admin_kubeconfig
    res = subprocess.run([sys.executable, "-m", "shoal.cli.main", *args, "--kubeconfig", str(kubeconfig)],
                         capture_output=True, text=True, timeout=120)
    if check:
        assert res.returncode == 0, f"shoal {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}"
    return res


def podgroup(kenv: KEnv, name: str, queue: str, min_member: int, *, priority: str = "train",
             topology: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> None:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue, "priorityClassName": priority}
    if topology:
        spec["topologyConstraint"] = topology
    kenv.client.create(PodGroupRes(metadata={"name": name, "namespace": kenv.namespace,
                                             "annotations": annotations or {}}, spec=spec))


def gang_pod(kenv: KEnv, name: str, scheduler: str, pg: str, queue: str, gpus: int, pool: str,
             priority: str = "train", host: str = "") -> None:
    m = pod_manifest(name, scheduler, gpus=gpus, queue=queue, annotations={"pod-group-name": pg})
    m["spec"]["nodeSelector"] = {"pool": pool, **({"kubernetes.io/hostname": host} if host else {})}
    m["spec"]["priorityClassName"] = priority
    create(kenv, m)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_three_causes(kenv: KEnv, scheduler: str, sfx: str) -> dict[str, str]:
    """Ten nodes in three pools and the three blocked gangs (see the module doc); returns queue names."""
    rack = f"rack-{sfx}"
    kenv.add_gpu_nodes(2, labels={"pool": f"lim-{sfx}"})
    kenv.add_gpu_nodes(4, labels={"pool": f"frag-{sfx}"})
    names = kenv.add_gpu_nodes(2, labels={"pool": f"topo-{sfx}", rack: "r0"})
    names += kenv.add_gpu_nodes(2, labels={"pool": f"topo-{sfx}", rack: "r1"})
    kenv.wait_nodes_ready(kenv.nodes)
    dept, lim, free = f"vis-{sfx}", f"vis-{sfx}-lim", f"vis-{sfx}-free"
    ensure_queue(kenv.client, dept)
    limited = {r: {"quota": -1, "limit": 8 if r == "gpu" else -1, "overQuotaWeight": 1}
               for r in ("gpu", "cpu", "memory")}
    ensure_queue(kenv.client, lim, spec={"parentQueue": dept, "resources": limited})
    ensure_queue(kenv.client, free, parent=dept)
    kenv.client.create(TopologyRes(metadata={"name": f"racks-{sfx}"}, spec={"levels": [{"nodeLabel": rack}]}))
    # Running first (non-preemptible fillers, so consolidation cannot make room).
    podgroup(kenv, "trainer", lim, 1, annotations={"shoal.dev/expected-runtime": "10m"})
    gang_pod(kenv, "trainer-0", scheduler, "trainer", lim, 8, f"lim-{sfx}")
    for i in range(4):
        podgroup(kenv, f"filler-{i}", free, 1, priority="inference")
        gang_pod(kenv, f"filler-{i}-0", scheduler, f"filler-{i}", free, 6, f"frag-{sfx}", "inference")
    for i in (0, 2):  # one full node in each rack
        podgroup(kenv, f"rackfill-{i}", free, 1, priority="inference")
        gang_pod(kenv, f"rackfill-{i}-0", scheduler, f"rackfill-{i}", free, 8, f"topo-{sfx}", "inference",
                 host=names[i])
    return {"dept": dept, "lim": lim, "free": free, "rack": rack, "topology": f"racks-{sfx}"}


def add_blocked_gangs(kenv: KEnv, scheduler: str, sfx: str, q: dict[str, str]) -> None:
    podgroup(kenv, "over-limit", q["lim"], 1)
    gang_pod(kenv, "over-limit-0", scheduler, "over-limit", q["lim"], 4, f"lim-{sfx}")
    podgroup(kenv, "wide", q["free"], 1)
    gang_pod(kenv, "wide-0", scheduler, "wide", q["free"], 4, f"frag-{sfx}")
    podgroup(kenv, "pair", q["free"], 2, topology={"topology": q["topology"], "requiredTopologyLevel": q["rack"]})
    for k in range(2):
        gang_pod(kenv, f"pair-{k}", scheduler, "pair", q["free"], 8, f"topo-{sfx}")


def test_live_commands_name_each_cause_and_predict_a_start(kenv: KEnv, cluster: Cluster, shoal_runner: Any,
                                                           tmp_path: Path) -> None:
    sfx = kenv.node_prefix.rsplit("-", 1)[-1]
    scheduler = f"vis-{sfx}"
    q = build_three_causes(kenv, scheduler, sfx)
    port = free_port()
    proc = shoal_runner(scheduler, "--no-leader-elect", "--eta-period", "1s", "--metrics-port", str(port))
    eventually(lambda: _bound(kenv, 7), 60, what="the seven running pods bound")
    add_blocked_gangs(kenv, scheduler, sfx, q)

    seen: list[Any] = []

    def pending() -> dict[str, Any] | None:
        res = shoal_cli(cluster, "pending", "--scheduler-name", scheduler, "-n", kenv.namespace, "--json",
                        check=False)
        if res.returncode != 0:
            return None
        got = {e["name"]: e for e in json.loads(res.stdout)["pending"]}
        seen[:] = [{k: (e["summary"], e.get("eta")) for k, e in got.items()}]
        ready = set(got) == {"over-limit", "wide", "pair"} and got["over-limit"].get("eta") is not None
        return got if ready else None

    try:
        gangs = eventually(pending, 60, interval=1.0, what="three pending gangs with a prediction in the report")
    except AssertionError:
        pytest.fail(f"report: {seen}\nscheduler log: {proc.tail()}")
    assert gangs["over-limit"]["blockers"][0]["kind"] == "queue-limit"
    assert f"queue {q['lim']} is at its limit of 8 GPUs" in gangs["over-limit"]["summary"]
    assert gangs["wide"]["blockers"][0]["kind"] == "fragmentation"
    assert "at most 2 GPUs are free on any node" in gangs["wide"]["summary"]
    assert gangs["pair"]["blockers"][0]["kind"] == "topology"
    assert f"must run in one {q['rack']} domain" in gangs["pair"]["summary"]
    # The trainer declared 10 minutes: the gang behind the limit starts when it ends.
    eta = gangs["over-limit"]["eta"] - time.time()
    assert 8 * 60 < eta < 11 * 60, eta
    assert sorted(e["position"] for e in gangs.values()) == sorted({e["position"] for e in gangs.values()})

    table = shoal_cli(cluster, "pending", "--scheduler-name", scheduler, "--queue", q["lim"]).stdout
    assert ("over-limit" in table and "wide" not in table and "in 9m" in table) or "in 10m" in table

    queues = json.loads(shoal_cli(cluster, "queues", "--scheduler-name", scheduler, "--json").stdout)["queues"]
    by = {x["name"]: x for x in queues}
    assert by[q["lim"]]["gpu"]["limit"] == 8 and by[q["lim"]]["gpu"]["allocated"] == 8
    assert by[q["free"]]["gpu"]["allocated"] == 40 and by[q["dept"]]["gpu"]["allocated"] == 48
    assert by[q["free"]]["pendingGangs"] == 2 and by[q["dept"]]["pendingGangs"] == 3
    yml = yaml.safe_load(shoal_cli(cluster, "queues", "--scheduler-name", scheduler, "-o", "yaml").stdout)
    assert {x["name"] for x in yml["queues"]} >= {q["dept"], q["lim"], q["free"]}

    for pod, words in (("over-limit-0", f"queue {q['lim']} is at its limit of 8 GPUs"),
                       ("wide-0", "fragmentation"), ("pair-1", f"must run in one {q['rack']} domain")):
        text = shoal_cli(cluster, "explain", pod, "-n", kenv.namespace, "--scheduler-name", scheduler).stdout
        assert words in text, text
        assert "What would make it schedulable" in text
    data = json.loads(shoal_cli(cluster, "explain", "over-limit", "-n", kenv.namespace, "--scheduler-name",
                                scheduler, "--json").stdout)
    assert [v["pod"] for v in data["ifHigherPriority"]["victims"]] == ["trainer-0"]
    assert any(f"free 4 GPUs in queue {q['lim']}" in s for s in data["suggestions"])
    running = shoal_cli(cluster, "explain", "trainer-0", "-n", kenv.namespace, "--scheduler-name", scheduler,
                        check=False)
    assert running.returncode == 1 and "is not pending" in running.stderr

    pg = kenv.client.get(PodGroupRes, "over-limit", namespace=kenv.namespace)
    assert "shoal.dev/predicted-start" in (pg.metadata.annotations or {})
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'shoal_gang_predicted_start_timestamp_seconds{namespace="' + kenv.namespace in metrics
    # KAI-parity metrics: causes by queue, time to bind per queue, per-action latency.
    assert f'shoal_pending_gangs_by_reason{{queue="{q["lim"]}",reason="queue-limit"}} 1.0' in metrics
    assert f'shoal_pending_gangs_by_reason{{queue="{q["free"]}",reason="fragmentation"}} 1.0' in metrics
    assert f'shoal_time_to_bind_seconds_count{{queue="{q["free"]}"}} 6.0' in metrics
    assert 'shoal_action_latency_seconds_count{action="allocate"}' in metrics
    assert f'shoal_queue_limit{{queue="{q["lim"]}",resource="gpu"}} 8.0' in metrics


def _bound(kenv: KEnv, n: int) -> bool:
    from lightkube.resources.core_v1 import Pod

    return sum(1 for p in kenv.client.list(Pod, namespace=kenv.namespace) if p.spec.nodeName) >= n


def test_snapshot_replays_to_the_live_decision(kenv: KEnv, cluster: Cluster, shoal_runner: Any,
                                               tmp_path: Path) -> None:
    from lightkube.resources.core_v1 import Pod

    sfx = kenv.node_prefix.rsplit("-", 1)[-1]
    scheduler = f"snap-{sfx}"
    q = build_three_causes(kenv, scheduler, sfx)
    time.sleep(1.1)  # creation times have 1 s resolution: the blocked gangs are strictly younger
    add_blocked_gangs(kenv, scheduler, sfx, q)
    # The scheduler is not running yet: everything is pending. Export, decide offline, then start it.
    out = tmp_path / "snap.yaml"
    shoal_cli(cluster, "snapshot", "--scheduler-name", scheduler, "-o", str(out))
    offline = json.loads(subprocess.run([sys.executable, "-m", "shoal.cli.main", "cycle", str(out), "--json"],
                                        capture_output=True, text=True, check=True, timeout=120).stdout)
    names = {p.metadata.uid: p.metadata.name for p in kenv.client.list(Pod, namespace=kenv.namespace)}
    decided = {names[b["pod"]]: b["node"] for b in offline["binds"]}
    assert len(decided) == 7, decided  # the running seven; the three blocked gangs stay pending
    assert {p["job"].split("/")[1] for p in offline["pending"]} == {"over-limit", "wide", "pair"}
    shoal_runner(scheduler, "--no-leader-elect", "--eta-period", "0")
    eventually(lambda: _bound(kenv, 7), 60, what="the live scheduler to bind")
    time.sleep(1.0)
    live = {p.metadata.name: p.spec.nodeName for p in kenv.client.list(Pod, namespace=kenv.namespace)
            if p.spec.nodeName}
    assert live == decided
    anon = tmp_path / "anon.yaml"
    shoal_cli(cluster, "snapshot", "--scheduler-name", scheduler, "--anonymise", "-o", str(anon))
    assert kenv.namespace not in anon.read_text()
    sim = subprocess.run([sys.executable, "-m", "shoal.cli.main", "simulate", str(anon), "--out",
                          str(tmp_path / "sim")], capture_output=True, text=True, timeout=300)
    assert sim.returncode == 0, sim.stderr[-2000:]
