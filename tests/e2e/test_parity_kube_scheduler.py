"""Differential test: shoal's placement constraints against kube-scheduler itself (issue #16).

kube-scheduler, built from the same Kubernetes version as the API server, runs with its default
filters and with the score plugins that express a pod's own preferences (TaintToleration,
NodeAffinity, InterPodAffinity, PodTopologySpread); the resource-balance scores, which KAI's
placement strategy replaces in shoal, are disabled. It logs every feasible node's score
(`--vmodule=schedule_one=10`). For random clusters (tests/e2e/parity_gen.py) and random pods:

  shoal: the API server's own copy of the pod (defaults applied) goes through shoal's live
         path: `ClusterCache` (informer handlers, `shoal.kai` decoding) -> snapshot -> run_cycle.
  kube:  the pod is submitted to kube-scheduler; its feasible nodes and scores are read from its
         log, its choice from the API.
  (a) schedulable at all: both agree.
  (b) shoal's node is feasible for kube-scheduler: it is in kube's feasible set, and the same pod
      pinned to it (`matchFields metadata.name` ANDed into its required node affinity) is bound
      there by kube-scheduler (pinning is skipped where it would change the pod's meaning: a
      spread constraint honouring node affinity while the pod states its own node affinity).
  (c) shoal's node has kube-scheduler's best score among the feasible nodes.

0 disagreements are allowed on (a) and (b), and on (c): shoal adds kube's preference scores
x100,000 to KAI's, so its node must be among kube's best. Cases with a fixed seed; CI (`CI=1`)
or SHOAL_PARITY_CASES runs >= 500, a local run 150.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import Namespace, Node, Pod

from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.kube.cache import ClusterCache

from . import parity_gen as gen
from .cluster import Cluster, _in_ci, eventually

KUBE = "parity-kube"
SHOAL = "parity-shoal"
SEED = 16
PODS_PER_WORLD = 50
REGRESSIONS = Path(__file__).parent / "data" / "parity_regressions.json"
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
leaderElection:
  leaderElect: false
percentageOfNodesToScore: 100
profiles:
- schedulerName: {name}
  plugins:
    score:
      disabled:
      - name: NodeResourcesFit
      - name: NodeResourcesBalancedAllocation
      - name: ImageLocality
"""
_SCORE = re.compile(r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)" score=(-?\d+)')
_BOUND = re.compile(r'"Successfully bound pod to node" pod="([^"]+)" node="([^"]+)"')


def case_count() -> int:
    env = os.environ.get("SHOAL_PARITY_CASES")
    if env:
        return int(env)
    return 500 if _in_ci() else 150


@dataclass
class KubeLog:
    """Reads kube-scheduler's log incrementally: per pod, the feasible nodes' final scores."""

    path: Path
    offset: int = 0
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)

    def read(self) -> None:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        for line in chunk[:end].decode(errors="replace").splitlines():
            if m := _SCORE.search(line):
                self.scores.setdefault(m[1], {})[m[2]] = int(m[3])
            elif m := _BOUND.search(line):
                self.bound[m[1]] = m[2]


@pytest.fixture(scope="module")
def kube_log(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeLog]:
    d = tmp_path_factory.mktemp("kube-scheduler")
    (d / "config.yaml").write_text(CONFIG.format(kubeconfig=cluster.admin_kubeconfig, name=KUBE))
    binary = Path(os.environ.get("SHOAL_K8S_BIN", Path.home() / ".cache/shoal-k8s/bin")) / "kube-scheduler"
    log = d / "kube-scheduler.log"
    proc = subprocess.Popen([str(binary), f"--config={d / 'config.yaml'}", "--v=2", "--vmodule=schedule_one=10",
                             "--secure-port=0", "--log-flush-frequency=50ms"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        eventually(lambda: b"Caches populated" in log.read_bytes() or None, 60, what="kube-scheduler started")
        yield KubeLog(log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass
class World:
    """One random cluster on the API server and shoal's cache of it."""

    client: Client
    index: str
    nodes: list[dict[str, Any]]
    existing: list[dict[str, Any]]
    cache: ClusterCache = field(default_factory=lambda: ClusterCache(SHOAL, time.time))

    def create(self) -> None:
        for name, labels in gen.namespaces(self.index).items():
            self.client.create(Namespace.from_dict({"metadata": {"name": name, "labels": labels}}))
        for n in self.nodes:
            self.client.create(codecs.from_dict(n))
        for p in self.existing:
            self.client.create(codecs.from_dict(p))
        eventually(lambda: all(self._running(p) for p in self.existing) or None, 60, what="existing pods running")
        self.cache.on_queue("ADDED", None, {"metadata": {"name": "default-queue"}, "spec": {}})
        for ns in self.client.list(Namespace):
            self.cache.on_namespace("ADDED", None, ns.to_dict())
        # Every node and pod of the cluster, as kube-scheduler sees them.
        for n in self.client.list(Node):
            self.cache.on_node("ADDED", None, n.to_dict())
        for p in self.client.list(Pod, namespace="*"):
            self.cache.on_pod("ADDED", None, p.to_dict())

    def _running(self, p: dict[str, Any]) -> bool:
        got = self.client.get(Pod, p["metadata"]["name"], namespace=p["metadata"]["namespace"])
        return bool(got.status and got.status.phase == "Running")

    def delete(self) -> None:
        for ns in gen.namespaces(self.index):
            _quiet(lambda ns=ns: self.client.deletecollection(Pod, namespace=ns, grace_period=0))
            _quiet(lambda ns=ns: self.client.delete(Namespace, ns))
        for n in self.nodes:
            _quiet(lambda n=n: self.client.delete(Node, n["metadata"]["name"]))

    def shoal_node(self, stored: dict[str, Any]) -> str | None:
        """shoal's choice for the API server's copy of the pod, through the live cache."""
        obj = copy.deepcopy(stored)
        obj["spec"]["schedulerName"] = SHOAL
        obj["spec"].pop("nodeName", None)
        obj["status"] = {"phase": "Pending"}
        obj["metadata"]["uid"] = f"shoal-{uuid.uuid4().hex}"
        self.cache.on_pod("ADDED", None, obj)
        try:
            assert not self.cache.problems, self.cache.problems
            result = run_cycle(self.cache.snapshot(), SchedulerConfig(actions=("allocate",)))
        finally:
            self.cache.on_pod("DELETED", obj, None)
        binds = [b.node for b in result.decisions.binds]
        return binds[0] if binds else None


def _quiet(fn: Any) -> None:
    try:
        fn()
    except ApiError as e:
        if e.status.code != 404:
            raise


def _submit(client: Client, log: KubeLog, pod: dict[str, Any],
            timeout: float = 30.0) -> tuple[dict[str, Any], str | None]:
    """Create the pod for kube-scheduler; (stored object, node or None when Unschedulable)."""
    stored = client.create(codecs.from_dict(pod)).to_dict()
    name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]

    def outcome() -> tuple[str | None] | None:
        got = client.get(Pod, name, namespace=ns)
        if got.spec.nodeName:
            return (got.spec.nodeName,)
        for c in (got.status.conditions if got.status else None) or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return (None,)
        return None

    (node,) = eventually(outcome, timeout, interval=0.02, what=f"kube-scheduler's answer for {ns}/{name}")
    if node is not None:
        eventually(lambda: (log.read(), f"{ns}/{name}" in log.bound)[1] or None, 10, interval=0.02,
                   what="kube-scheduler's log of the bind")
    client.delete(Pod, name, namespace=ns, grace_period=0)
    return stored, node


def _pinned(pod: dict[str, Any], node: str) -> dict[str, Any] | None:
    """The pod restricted to `node` through its required node affinity; None when pinning would
    change its meaning (a spread constraint honouring node affinity, with the pod's own)."""
    p = copy.deepcopy(pod)
    spec = p["spec"]
    na = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    own = bool(spec.get("nodeSelector")) or "requiredDuringSchedulingIgnoredDuringExecution" in na
    for c in spec.get("topologySpreadConstraints") or []:
        if c.get("nodeAffinityPolicy", "Honor") == "Honor":
            if own:
                return None
            c["nodeAffinityPolicy"] = "Ignore"  # without its own affinity, Honor and Ignore agree
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    req = na.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]})
    for term in req["nodeSelectorTerms"]:
        term.setdefault("matchFields", []).append(pin)
    p["metadata"]["name"] += "-pin"
    return p


@dataclass
class Tally:
    cases: int = 0
    schedulable: int = 0
    pinned: int = 0
    disagreements: list[str] = field(default_factory=list)


def run_case(world: World, log: KubeLog, pod: dict[str, Any], tally: Tally) -> None:
    pod["spec"]["schedulerName"] = KUBE
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    shoal: str | None = None
    stored, kube = _submit(world.client, log, pod)
    shoal = world.shoal_node(stored)
    log.read()
    feasible = log.scores.get(key) or ({kube: 0} if kube else {})
    tally.cases += 1
    tally.schedulable += kube is not None
    what = json.dumps(pod, sort_keys=True)
    if (shoal is None) != (kube is None):
        tally.disagreements.append(f"(a) {key}: shoal {shoal}, kube {kube}: {what}")
        return
    if shoal is None:
        return
    if shoal not in feasible:
        tally.disagreements.append(f"(b) {key}: shoal {shoal} not in kube's feasible {sorted(feasible)}: {what}")
        return
    pinned = _pinned(pod, shoal)
    if pinned is not None:
        tally.pinned += 1
        _stored, got = _submit(world.client, log, pinned)
        if got != shoal:
            tally.disagreements.append(f"(b) {key}: pinned to shoal's {shoal}, kube-scheduler said {got}: {what}")
            return
    best = max(feasible.values())
    if feasible[shoal] != best:
        tally.disagreements.append(
            f"(c) {key}: shoal {shoal} scores {feasible[shoal]}, kube's best {best} {feasible}: {what}")


def regression_worlds() -> list[dict[str, Any]]:
    if not REGRESSIONS.exists():
        return []
    data: list[dict[str, Any]] = json.loads(REGRESSIONS.read_text())
    return data


def test_parity_with_kube_scheduler(cluster: Cluster, kube_log: KubeLog) -> None:
    client = cluster.client()
    rng = random.Random(SEED)
    total = case_count()
    tally = Tally()
    started = time.monotonic()
    worlds = 0
    for reg in regression_worlds():
        world = World(client, reg["world"], reg["nodes"], reg["existing"])
        worlds += 1
        _run_world(world, kube_log, [copy.deepcopy(p) for p in reg["pods"]], tally)
    while tally.cases < total:
        index = f"par{worlds}"
        nodes = gen.world_nodes(rng, index)
        existing = gen.existing_pods(rng, index, nodes)
        world = World(client, index, nodes, existing)
        worlds += 1
        count = min(PODS_PER_WORLD, total - tally.cases)
        pods = [gen.case_pod(rng, index, nodes, f"c{k}") for k in range(count)]
        _run_world(world, kube_log, pods, tally)
    elapsed = time.monotonic() - started
    kinds = {k: sum(d.startswith(k) for d in tally.disagreements) for k in ("(a)", "(b)", "(c)")}
    print(f"\nparity: {tally.cases} cases in {worlds} clusters, {tally.schedulable} schedulable, "
          f"{tally.pinned} pinned re-submissions, disagreements {kinds}, {elapsed:.0f} s")
    assert not tally.disagreements, "\n".join(tally.disagreements[:10])


def _run_world(world: World, log: KubeLog, pods: list[dict[str, Any]], tally: Tally) -> None:
    world.create()
    try:
        for p in pods:
            run_case(world, log, p, tally)
    finally:
        world.delete()
