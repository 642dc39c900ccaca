"""The long chaos run (#19): faults at seeded random moments while shoal binds gangs, reclaims and
reserves shared GPUs, checked by the API-only invariant Monitor of the e2e tests.

    python bench/chaos.py [--kills 20] [--seed 19] [--nodes 8] [--kubeconfig DIR/admin.kubeconfig]
    python bench/chaos.py --soak MINUTES [--kubeconfig ...]      (the churn soak: bench/chaos_soak.py)

Without --kubeconfig a private cluster is started with scripts/k8s-test-env (and stopped after).
Two `shoal run` instances share a leader lease, with `--gpu-sharing reservation` and the e2e tests'
fake device plugin. The faults: `--kills` SIGKILLs of the leader (restarted under a new identity),
one kube-apiserver restart, one etcd restart, one forced watch expiry (410 Gone: etcd compacted,
then restarted) and one lease taken away, in a seeded random order. Each fault strikes one round;
a round (its scene chosen in turn) is one of:

* `gangs`: 4 gangs of 2 nodes' worth of one-GPU pods each, created at once (large gang binds);
* `reclaim`: a greedy queue (quota half the GPUs) holds every GPU with gangs of 8, then a starved
  queue (quota the other half) asks for half of them: the fault strikes during the reclaim;
* `sharing`: 2 nodes' worth of half-GPU pods (one reservation pod per shared GPU) beside gangs of 8.

The fault strikes at a random moment 0-1.5 s after the round's pods are created. Printed per fault:
seconds from the fault until a live instance holds the lease (must be <= 15; a restart counts from
its start) and until the round's pods are all bound (for `reclaim`, the starved queue's), the
seconds a pod created after that takes to be bound, and the invariant violations the Monitor saw
during the round; then a summary. Exit status 1 if any violation was seen or any recovery took
longer than 15 s.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the e2e helpers: the cluster, the invariant Monitor, the device plugin

from lightkube import codecs  # noqa: E402
from lightkube.models.meta_v1 import ObjectMeta  # noqa: E402
from lightkube.resources.coordination_v1 import Lease  # noqa: E402
from lightkube.resources.core_v1 import Namespace, Pod  # noqa: E402
from tests.e2e.cluster import SCRIPT, Cluster, KEnv, apply_deploy  # noqa: E402
from tests.e2e.invariants import Monitor  # noqa: E402
from tests.e2e.scheduler_fixtures import PodGroupRes, ShoalProcess, ensure_queue, pod_manifest  # noqa: E402
from tests.e2e.sharing_fixtures import FakeDevicePlugin  # noqa: E402

SCHEDULER, LEASE, NS = "shoal-chaos", "shoal-chaos", "chaos"
SHARING = ("--gpu-sharing", "reservation", "--gpu-sharing-timeout", "20s")
SCENES = ("gangs", "reclaim", "sharing")
RECOVERY_LIMIT = 15.0


def wait(probe: Callable[[], Any], timeout: float, interval: float = 0.1) -> float | None:
    """Seconds until `probe()` is truthy (None if it never was within `timeout`)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if probe():
                return time.monotonic() - t0
        except Exception:  # the API server may be restarting
            pass
        time.sleep(interval)
    return None


@dataclass
class Run:
    """The cluster, the shoal instances on one lease, the Monitor and what each round measured."""

    cluster: Cluster
    kenv: KEnv
    logs: Path
    gpus: int
    rng: random.Random
    procs: dict[str, ShoalProcess] = field(default_factory=dict)
    monitor: Monitor | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    started: int = 0

    def start(self, ident: str) -> None:
        p = ShoalProcess(self.cluster, SCHEDULER, self.logs / f"shoal-{ident}.log",
                         ["--leader-elect", "--lease-name", LEASE, "--identity", ident, *SHARING])
        self.procs[ident] = p.start()
        self.started += 1

    def holder(self) -> str | None:
        h = self.kenv.client.get(Lease, LEASE, namespace="shoal-system").spec.holderIdentity
        return h if h in self.procs else None

    def pods(self) -> dict[str, Any]:
        return {p.metadata.name: p for p in self.kenv.client.list(Pod, namespace=NS)
                if not p.metadata.deletionTimestamp}

    def create_gang(self, gang: str, size: int, queue: str) -> list[str]:
        assert self.monitor is not None
        self.monitor.gangs[gang] = size
        self.kenv.client.create(PodGroupRes(metadata={"name": gang}, spec={"minMember": size, "queue": queue}),
                                namespace=NS)
        return [self.create_pod(f"{gang}-{i}", queue, gpus=1, annotations={"pod-group-name": gang})
                for i in range(size)]

    def create_pod(self, name: str, queue: str, gpus: int = 0, annotations: dict[str, str] | None = None) -> str:
        self.kenv.client.create(codecs.from_dict(pod_manifest(name, SCHEDULER, gpus=gpus, queue=queue,
                                                              annotations=annotations)), namespace=NS)
        return name

    def clear(self) -> None:
        """Delete the round's pods and PodGroups (told to the Monitor: not evictions)."""
        assert self.monitor is not None
        self.monitor.expect_deleted(list(self.pods()))
        self.kenv.client.deletecollection(Pod, namespace=NS, grace_period=0)
        self.kenv.client.deletecollection(PodGroupRes, namespace=NS)
        wait(lambda: not list(self.kenv.client.list(Pod, namespace=NS)), 120, 0.5)


def scene(run: Run, kind: str, r: int) -> tuple[list[str], Callable[[], bool]]:
    """Set the round up (not timed), create the pods the fault will strike among; return them and
    the round's success probe."""
    per_node, nodes = 8, run.gpus // 8
    if kind == "gangs":
        names = [p for g in range(4) for p in run.create_gang(f"r{r}-g{g}", run.gpus // 4, "greedy")]
        return names, lambda: _bound(run, names)
    if kind == "reclaim":
        hogs = [p for g in range(nodes) for p in run.create_gang(f"r{r}-hog{g}", per_node, "greedy")]
        if wait(lambda: _running(run, hogs), 60, 0.5) is None:
            raise SystemExit(f"round {r}: the greedy queue's pods never all Running (kwok?)")
        names = [p for g in range(nodes // 2) for p in run.create_gang(f"r{r}-fair{g}", per_node, "starved")]
        return names, lambda: _bound(run, names)
    halves = [run.create_pod(f"r{r}-half-{i}", "greedy", annotations={"gpu-fraction": "0.5"})
              for i in range(4 * per_node)]
    names = halves + [p for g in range(nodes - 2) for p in run.create_gang(f"r{r}-g{g}", per_node, "greedy")]
    return names, lambda: _bound(run, names)


def _bound(run: Run, names: list[str]) -> bool:
    pods = run.pods()
    return all(n in pods and pods[n].spec.nodeName for n in names)


def _running(run: Run, names: list[str]) -> bool:
    pods = run.pods()
    return all(n in pods and pods[n].status and pods[n].status.phase == "Running" for n in names)


def strike(run: Run, fault: str) -> None:
    if fault == "kill-leader":
        holder = run.holder()
        assert holder is not None, "no leader to kill"
        run.procs.pop(holder).kill()
        run.start(f"{holder.split('-')[0]}-{run.started}")
    elif fault == "restart-apiserver":
        run.cluster.restart("kube-apiserver", kubelet=False)
    elif fault == "restart-etcd":
        run.cluster.restart("etcd", kubelet=False)
    elif fault == "expire-watches":
        run.cluster.expire_watches([p.proc.pid for p in run.procs.values() if p.proc is not None], kubelet=False)
    elif fault == "steal-lease":
        obj = run.kenv.client.get(Lease, LEASE, namespace="shoal-system")
        obj.spec.holderIdentity = "intruder"
        obj.spec.renewTime = datetime.now(UTC)
        run.kenv.client.replace(obj)
    else:
        raise ValueError(fault)


def one_round(run: Run, r: int, fault: str, kind: str) -> dict[str, Any]:
    assert run.monitor is not None
    seen = len(run.monitor.found)
    if wait(lambda: run.holder(), 60) is None:
        raise SystemExit(f"round {r}: no leader before the fault")
    names, done = scene(run, kind, r)
    delay = run.rng.uniform(0.0, 1.5)
    time.sleep(delay)
    t0 = time.monotonic()
    strike(run, fault)
    struck = time.monotonic() - t0  # a restart returns once the process serves again

    def since_strike(probe: Callable[[], Any], timeout: float) -> float | None:
        return None if wait(probe, timeout) is None else time.monotonic() - t0

    leader_s = since_strike(lambda: run.holder(), 60)
    settled_s = since_strike(done, 180)
    probe = run.create_pod(f"r{r}-probe", "greedy")
    probe_s = wait(lambda: run.pods()[probe].spec.nodeName, 60)
    if fault in ("restart-apiserver", "restart-etcd", "expire-watches"):
        # kwok (the fake kubelet) loses its pod watch across these and stops starting pods; a real
        # kubelet re-lists. Restarted after the round is measured, so the next round's pods run.
        run.cluster.restart("kwok", "TERM")
    row = {"round": r, "fault": fault, "scene": kind, "pods": len(names), "delay": delay, "strike_s": struck,
           "leader_s": leader_s, "settled_s": settled_s, "probe_s": probe_s,
           "violations": run.monitor.found[seen:]}
    run.clear()
    return row


def schedule(kills: int, rng: random.Random) -> list[str]:
    faults = ["kill-leader"] * kills + ["restart-apiserver", "restart-etcd", "expire-watches", "steal-lease"]
    rng.shuffle(faults)
    return faults


def _f(v: float | None) -> str:
    return "never" if v is None else f"{v:.1f}"


def report(rows: list[dict[str, Any]], found: list[str], plugin_errors: list[str], wall: float) -> bool:
    print(f"\n{'#':>3} {'fault':<18}{'scene':<9}{'pods':>5}{'at s':>6}{'leader s':>10}{'bound s':>11}"
          f"{'probe s':>9}  violations")
    f = _f
    for row in rows:
        print(f"{row['round']:>3} {row['fault']:<18}{row['scene']:<9}{row['pods']:>5}{row['delay']:>6.2f}"
              f"{f(row['leader_s']):>10}{f(row['settled_s']):>11}{f(row['probe_s']):>9}  {len(row['violations'])}")
    leaders = [r["leader_s"] for r in rows if r["leader_s"] is not None]
    slow = [r for r in rows if r["leader_s"] is None or r["leader_s"] > RECOVERY_LIMIT]
    stuck = [r for r in rows if r["settled_s"] is None or r["probe_s"] is None]
    by_fault: dict[str, list[float]] = {}
    for r in rows:
        if r["leader_s"] is not None:
            by_fault.setdefault(r["fault"], []).append(r["leader_s"])
    print(f"\nfaults: {len(rows)} in {wall / 60:.1f} min; leader held again after median "
          f"{statistics.median(leaders):.1f} s, max {max(leaders):.1f} s (limit {RECOVERY_LIMIT:.0f} s)")
    for fault, v in sorted(by_fault.items()):
        print(f"  {fault:<18} n={len(v):<3} median {statistics.median(v):.1f} s  max {max(v):.1f} s")
    print(f"recoveries over {RECOVERY_LIMIT:.0f} s: {len(slow)}; rounds that never settled: {len(stuck)}")
    # The fake device plugin finding every GPU of a node reserved: a second reservation of one GPU.
    served_twice = sorted(set(e for e in plugin_errors if not e.startswith("plugin:")))
    print(f"invariant violations: {len(found)} seen by the Monitor, {len(served_twice)} reservation pods "
          f"the device plugin had no free GPU for")
    for v in found + served_twice:
        print(f"  {v}")
    return not (found or served_twice or slow or stuck)


def main_run(args: argparse.Namespace, cluster: Cluster) -> bool:
    rng = random.Random(args.seed)
    client = cluster.client()
    kenv = KEnv(cluster, client, NS, "chaos")
    logs = Path(tempfile.mkdtemp(prefix="shoal-chaos-logs-"))
    run = Run(cluster, kenv, logs, args.nodes * 8, rng)
    _prepare(run, args.nodes)
    plugin = FakeDevicePlugin(cluster).start()
    run.monitor = Monitor(cluster.client, NS, {}, grace=args.grace).start()
    for ident in ("a-0", "b-0"):
        run.start(ident)
    t0 = time.monotonic()
    try:
        for r, fault in enumerate(schedule(args.kills, rng)):
            row = one_round(run, r, fault, SCENES[r % len(SCENES)])
            run.rows.append(row)
            print(f"round {r:>2}: {fault:<18} {row['scene']:<8} at {row['delay']:.2f} s; strike took "
                  f"{row['strike_s']:.1f} s, leader {_f(row['leader_s'])} s, all bound {_f(row['settled_s'])} s, "
                  f"probe {_f(row['probe_s'])} s, violations {row['violations']}", flush=True)
    finally:
        found = run.monitor.stop()
        plugin.stop()
        for p in run.procs.values():
            p.stop()
    ok = report(run.rows, found, plugin.errors, time.monotonic() - t0)
    print(f"logs in {logs}; seed {args.seed}; {args.nodes} nodes x 8 GPUs; Monitor polls {run.monitor.polls}, "
          f"evictions it checked for a reason event {len(run.monitor.evicted)}")
    return ok


def _prepare(run: Run, nodes: int) -> None:
    run.kenv.client.create(Namespace(metadata=ObjectMeta(name=NS)))
    names = run.kenv.add_gpu_nodes(nodes, gpus=8)
    run.kenv.wait_nodes_ready(names, timeout=120)
    half = nodes * 8 // 2
    ensure_queue(run.kenv.client, "greedy", gpu_quota=half)
    ensure_queue(run.kenv.client, "starved", gpu_quota=half)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--nodes", type=int, default=8, help="kwok nodes of 8 GPUs (even, >= 4)")
    ap.add_argument("--grace", type=float, default=30.0, help="seconds a gang may stay partly bound")
    ap.add_argument("--soak", type=float, metavar="MINUTES", help="run the churn soak instead")
    ap.add_argument("--kubeconfig", help="admin kubeconfig of a running k8s-test-env cluster")
    args = ap.parse_args()
    if args.kubeconfig:
        state, owned = Path(args.kubeconfig).parent, False
    else:
        state, owned = Path(tempfile.mkdtemp(prefix="shoal-chaos-")), True
        res = subprocess.run([str(SCRIPT), "start", str(state)], capture_output=True, text=True,
                             env={"SHOAL_KWOK_HEARTBEAT_MS": "10000", **os.environ})
        if res.returncode != 0:
            sys.exit(f"k8s-test-env start failed:\n{res.stderr[-3000:]}")
    cluster = Cluster(state, state / "admin.kubeconfig", state / "scheduler.kubeconfig")
    try:
        if owned:
            apply_deploy(cluster.client())
        if args.soak:
            from chaos_soak import soak  # bench/chaos_soak.py
            ok = soak(cluster, args.soak, args.seed)
        else:
            ok = main_run(args, cluster)
    finally:
        if owned:
            subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
