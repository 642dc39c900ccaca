"""`shoal snapshot` files: trimmed objects that `shoal cycle` and `shoal simulate` replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shoal.cli.clusterfile import load_cluster_file
from shoal.cli.cmd_snapshot import build_document
from shoal.cycle import run_cycle
from shoal.kube.anonymise import anonymise
from shoal.kube.export import snapshot_from_objects, trim
from shoal.sim.scenario import load_scenario
from shoal.sim.simulation import Simulation

NOW = 1_800_000_000.0
T0 = "2027-01-15T08:00:00Z"


def node(name: str, gpus: int, rack: str) -> dict[str, Any]:
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "rack": rack, "team": "secret"}},
            "spec": {}, "status": {"allocatable": res, "capacity": res,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def queue(name: str, parent: str = "", limit: float = -1) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {r: {"quota": -1, "limit": limit if r == "gpu" else -1, "overQuotaWeight": 1}
                                          for r in ("gpu", "cpu", "memory")}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def podgroup(name: str, q: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team-ns", "creationTimestamp": T0,
                         "annotations": {"shoal.dev/expected-runtime": "2h"}},
            "spec": {"minMember": min_member, "queue": q}}


def pod(name: str, pg: str, gpus: int, node_name: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-ns", "uid": f"uid-{name}", "creationTimestamp": T0,
                     "annotations": {"pod-group-name": pg, "note": "private text"}},
        "spec": {"schedulerName": "kai-scheduler", "priorityClassName": "train",
                 "containers": [{"name": "main", "image": "registry/secret:1", "env": [{"name": "TOKEN"}],
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)},
                                               "requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending"}}
    if node_name:
        obj["spec"]["nodeName"] = node_name
        obj["status"] = {"phase": "Running", "startTime": "2027-01-15T09:00:00Z"}
    return obj


def objects() -> dict[str, list[dict[str, Any]]]:
    raw = {
        "priorityClasses": [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                             "metadata": {"name": "train"}, "value": 50}],
        "queues": [queue("research"), queue("vision", "research", limit=24)],
        "topologies": [],
        "nodes": [node(f"gpu-{i}", 8, f"r{i // 2}") for i in range(4)],
        "podGroups": [podgroup("resnet", "vision", 1), podgroup("llama", "vision", 2), podgroup("bert", "vision", 1)],
        "pods": [pod("resnet-0", "resnet", 8, "gpu-0"), pod("llama-0", "llama", 8), pod("llama-1", "llama", 8),
                 pod("bert-0", "bert", 8)],
    }
    return {k: [trim(k, o) for o in v] for k, v in raw.items()}


def _decide(snap: Any, config: Any = None) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    from shoal.framework.config import SchedulerConfig

    r = run_cycle(snap, config or SchedulerConfig())
    binds = sorted((b.job, b.node) for b in r.decisions.binds)
    pending = {k: v.reasons for k, v in r.decisions.explanations.items()}
    r.release()
    return binds, pending


def test_trim_drops_images_env_and_free_text_is_kept_only_unanonymised() -> None:
    p = objects()["pods"][0]
    assert p["spec"]["containers"] == [{"name": "main", "resources": p["spec"]["containers"][0]["resources"]}]
    assert "image" not in str(p) and "TOKEN" not in str(p)


def test_the_file_replays_with_shoal_cycle_to_the_same_decisions(tmp_path: Path) -> None:
    objs = objects()
    live = _decide(snapshot_from_objects(objs, "kai-scheduler", NOW))
    # Same creation time: bert goes first (name order) and then llama's 16 GPUs pass the 24-GPU limit.
    assert [j for j, _ in live[0]] == ["team-ns/bert"]
    assert live[1] == {"team-ns/llama": ["OverLimit"]}
    doc = build_document(objs, "kai-scheduler", {"actions": "allocate, reclaim"}, True, False, 3600.0, NOW)
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(doc))
    snap, config = load_cluster_file(path)
    assert config is not None and config.actions == ("allocate", "reclaim")
    assert snap.now == NOW
    assert _decide(snap, config) == _decide(snapshot_from_objects(objs, "kai-scheduler", NOW), config)


def test_anonymised_file_has_no_names_and_decides_the_same(tmp_path: Path) -> None:
    objs = objects()
    doc = build_document(objs, "kai-scheduler", {}, True, True, 3600.0, NOW)
    text = yaml.safe_dump(doc)
    for secret in ("gpu-0", "team-ns", "research", "vision", "resnet", "llama", "secret", "private text"):
        assert secret not in text, secret
    path = tmp_path / "anon.yaml"
    path.write_text(text)
    snap, _ = load_cluster_file(path)
    binds, pending = _decide(snap)
    live_binds, live_pending = _decide(snapshot_from_objects(objs, "kai-scheduler", NOW))
    names = {}
    anon = anonymise(objs)
    for a, b in zip(objs["nodes"] + objs["podGroups"], anon["nodes"] + anon["podGroups"]):
        names[a["metadata"]["name"]] = b["metadata"]["name"]
    ns = anon["pods"][0]["metadata"]["namespace"]
    expect = sorted((f"{ns}/{names[j.split('/')[1]]}", names[n]) for j, n in live_binds)
    assert binds == expect
    assert list(pending.values()) == list(live_pending.values())


def test_the_file_is_a_scenario_that_simulates(tmp_path: Path) -> None:
    doc = build_document(objects(), "kai-scheduler", {}, True, False, 3600.0, NOW)
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(doc))
    sc = load_scenario(path)
    jobs = {j.name: j for j in sc.jobs}
    assert set(jobs) == {"team-ns.resnet", "team-ns.llama", "team-ns.bert"}
    assert jobs["team-ns.llama"].arrival == 0.0  # pending since 08:00, the earliest
    assert jobs["team-ns.resnet"].arrival == 3600.0  # started at 09:00
    assert jobs["team-ns.resnet"].duration == 7200.0  # its declared 2 h
    result = Simulation(sc).run()
    assert result.counters["finished"] == 3
