"""Scale bench (#19): shoal on a cluster filled to the largest shape the machine's API server holds.

    python bench/bench_scale.py [--steps 1000:10000,5000:50000] [--arrivals 2000] [--rate 50]
                                [--kubeconfig admin.kubeconfig] [--out results.json]

Without --kubeconfig a private cluster is started with scripts/k8s-test-env (and stopped after).
Each step `NODES:PODS` grows the cluster to NODES kwok nodes x 8 GPUs holding PODS pods of
schedulerName shoal-scale, then measures a freshly started `shoal run` (no leader election, no pod
grouper, no start-time forecast: the scheduling path alone):

* fill: PODS - ARRIVALS pods are created already bound (nodeName set, as a running cluster holds
  them): gangs of 8 one-GPU pods with their PodGroups (one node each) and half-GPU pods (16 per
  node, each pair on one device, its `runai-gpu-group` label set as shoal's binds set it), spread
  over 10 queues; enough nodes stay empty for the arrivals. The bench waits until kwok has every
  pod Running.
* first cycle: shoal's process start -> caches synced (/readyz) -> its first cycle done
  (`shoal_cycles_total` 1), and that cycle's latency (`shoal_cycle_latency_seconds`, which includes
  building the snapshot; `shoal_snapshot_latency_seconds` alone).
* steady: with nothing changing, the mean cycle latency and snapshot latency over --steady seconds
  (shoal runs a cycle at least every --period), and shoal's CPU share meanwhile.
* arrivals: ARRIVALS pods created at --rate pods/s, half in gangs of 4 one-GPU pods (PodGroup
  minMember 4), half half-GPU pods; latency = from the bench's create call for a pod to the watch
  event showing it bound; p50/p99 over the pods bound, and the cycle latency during the arrivals.
* memory: shoal's peak RSS (VmHWM), and kube-apiserver's and etcd's at the end of the step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench_e2e import NAMESPACES, QUEUES, REPO, SCRIPT, cpu_seconds, ensure, free_port, gather_limited, start_cluster
from shoal.kube.client import NODES, PODGROUPS, PODS, KubeClient
from shoal.kube.install import apply_manifests

NS = "scale"
SCHED = "shoal-scale"
GPUS = 8
N_QUEUES = 10


def node(i: int) -> dict[str, Any]:
    name = f"scale-{i:05d}"
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(GPUS)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"capacity": res, "allocatable": res}}


def pod(name: str, queue: int, *, node_name: str | None = None, group: str | None = None,
        half: bool = False, gpu_group: str | None = None) -> dict[str, Any]:
    labels = {"kai.scheduler/queue": f"q-{queue}", "app": "scale"}
    annotations: dict[str, str] = {}
    limits: dict[str, str] = {}
    if half:
        annotations["gpu-fraction"] = "0.5"
        if gpu_group:
            labels["runai-gpu-group"] = gpu_group
    else:
        limits["nvidia.com/gpu"] = "1"
    if group:
        annotations["pod-group-name"] = group
    spec: dict[str, Any] = {"schedulerName": SCHED, "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                          "limits": limits}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations}, "spec": spec}


def podgroup(name: str, queue: int, size: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": size, "queue": f"q-{queue}"}}


def layout(new_nodes: int, new_pods: int, arrivals: int) -> tuple[int, int, int]:
    """(gang nodes, half-GPU nodes, empty nodes) for `new_pods` pre-bound pods on `new_nodes`: the
    arrivals' GPUs (3/4 of a GPU per arriving pod on average) stay free with a 30 % margin."""
    free = min(new_nodes, math.ceil(0.75 * arrivals * 1.3 / GPUS))
    usable = new_nodes - free
    half_nodes = max(0, min(usable, math.ceil((new_pods - GPUS * usable) / GPUS)))
    gang_nodes = min(usable - half_nodes, (new_pods - 2 * GPUS * half_nodes) // GPUS)
    return gang_nodes, half_nodes, new_nodes - gang_nodes - half_nodes


async def fill(client: KubeClient, first_node: int, nodes: int, pods: int, arrivals: int, tag: str) -> int:
    """Create nodes first_node..nodes-1 and their pre-bound pods; returns the pods created."""
    t = time.monotonic()
    await gather_limited([ensure(client, NODES, node(i)) for i in range(first_node, nodes)], 50)
    gang_nodes, half_nodes, empty = layout(nodes - first_node, pods, arrivals)
    print(f"  {nodes - first_node} nodes in {time.monotonic() - t:.0f}s; pre-bound: {gang_nodes} gangs of 8, "
          f"{half_nodes * 2 * GPUS} half-GPU pods on {half_nodes} nodes, {empty} nodes empty", flush=True)
    work: list[Any] = []
    for k in range(gang_nodes):
        i = first_node + k
        name, q = f"g{tag}-{k}", k % N_QUEUES
        work.append(ensure(client, PODGROUPS, podgroup(name, q, GPUS), NS))
        work += [client.create(PODS, pod(f"{name}-{j}", q, node_name=f"scale-{i:05d}", group=name), NS)
                 for j in range(GPUS)]
    for k in range(half_nodes):
        i = first_node + gang_nodes + k
        work += [client.create(PODS, pod(f"h{tag}-{k}-{j}", (k + j) % N_QUEUES, node_name=f"scale-{i:05d}",
                                         half=True, gpu_group=f"pre-{i}-{j // 2}"), NS)
                 for j in range(2 * GPUS)]
    t = time.monotonic()
    await gather_limited(work, 100)
    created = gang_nodes * GPUS + half_nodes * 2 * GPUS
    print(f"  {created} pods created in {time.monotonic() - t:.0f}s ({created / (time.monotonic() - t):.0f}/s)",
          flush=True)
    t = time.monotonic()
    while (await client.request("GET", PODS.path(NS), params={"limit": 1,
                                                              "fieldSelector": "status.phase=Pending"}))["items"]:
        await asyncio.sleep(2)
    print(f"  kwok ran them all {time.monotonic() - t:.0f}s later", flush=True)
    return created


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("shoal_") and " " in line and "{" not in line:
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def mib(pid: int, field: str = "VmHWM") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def start_shoal(admin: str, port: int, period: str,
                      log: Path) -> tuple[subprocess.Popen[bytes], dict[str, float]]:
    """Start shoal; time its caches sync and its first cycle."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "shoal.cli.main", "run", "--kubeconfig", admin,
                             "--scheduler-name", SCHED, "--no-leader-elect", "--no-pod-grouper", "--eta-period", "0",
                             "--period", period, "--metrics-port", str(port)],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)
    while not ready(port):
        if proc.poll() is not None:
            raise RuntimeError(f"shoal exited: see {log}")
        await asyncio.sleep(0.05)
    synced = time.monotonic() - t0
    while True:
        m = await asyncio.to_thread(metrics, port)
        if m.get("shoal_cycles_total", 0) >= 1:
            break
        await asyncio.sleep(0.05)
    first = time.monotonic() - t0
    return proc, {"synced_s": synced, "first_cycle_done_s": first,
                  "first_cycle_s": m["shoal_cycle_latency_seconds_sum"],
                  "first_snapshot_s": m["shoal_snapshot_latency_seconds_sum"]}


async def window(port: int, pid: int, seconds: float, during: Any = None) -> dict[str, float]:
    """Mean cycle and snapshot latency, cycles and shoal's CPU share over `seconds` (while `during` runs)."""
    a, cpu_a, t = await asyncio.to_thread(metrics, port), cpu_seconds(pid), time.monotonic()
    if during is not None:
        await during
    else:
        await asyncio.sleep(seconds)
    b, cpu_b, dt = await asyncio.to_thread(metrics, port), cpu_seconds(pid), time.monotonic() - t
    n = b["shoal_cycles_total"] - a["shoal_cycles_total"]

    def mean(name: str) -> float:
        return (b[f"{name}_sum"] - a[f"{name}_sum"]) / n if n else float("nan")

    return {"cycles": n, "cycle_s": mean("shoal_cycle_latency_seconds"),
            "snapshot_s": mean("shoal_snapshot_latency_seconds"), "cpu_share": (cpu_b - cpu_a) / dt,
            "seconds": dt}


async def watch_bound(client: KubeClient, bound: dict[str, float], names: set[str], done: asyncio.Event) -> None:
    """Record when each pod of `names` is first seen with a node (watch from now)."""
    rv = (await client.request("GET", PODS.path(NS), params={"limit": 1}))["metadata"]["resourceVersion"]
    while not done.is_set():
        async for ev in client.watch(PODS, rv, timeout_seconds=60, namespace=NS):
            obj = ev.get("object") or {}
            rv = obj.get("metadata", {}).get("resourceVersion", rv)
            name = obj.get("metadata", {}).get("name")
            if name in names and (obj.get("spec") or {}).get("nodeName") and name not in bound:
                bound[name] = time.monotonic()
                if len(bound) >= len(names):
                    done.set()
                    return


def plan_arrivals(count: int, tag: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """`count` pods, each with the PodGroup to create before it (or None): gangs of 4 one-GPU pods
    and groups of 4 half-GPU pods (gangs of one) in turn."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    k = 0
    while len(out) < count:
        q, n = k % N_QUEUES, min(4, count - len(out))
        if k % 2 == 0:
            name = f"a{tag}-g{k}"
            group = podgroup(name, q, n)
            out += [(pod(f"{name}-{j}", q, group=name), group if j == 0 else None) for j in range(n)]
        else:
            out += [(pod(f"a{tag}-h{k}-{j}", q, half=True), None) for j in range(n)]
        k += 1
    return out


async def arrive(client: KubeClient, plan: list[tuple[dict[str, Any], dict[str, Any] | None]], rate: float,
                 created: dict[str, float]) -> None:
    """Create the planned pods at `rate` pods/s, noting when each create call began."""
    t0 = time.monotonic()

    async def create(i: int, obj: dict[str, Any], group: dict[str, Any] | None) -> None:
        await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
        if group is not None:
            await ensure(client, PODGROUPS, group, NS)
        created[obj["metadata"]["name"]] = time.monotonic()
        await client.create(PODS, obj, NS)

    await asyncio.gather(*(create(i, obj, group) for i, (obj, group) in enumerate(plan)))


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


async def arrivals_phase(client: KubeClient, port: int, pid: int, count: int, rate: float, tag: str,
                         timeout: float) -> dict[str, float]:
    plan = plan_arrivals(count, tag)
    names = {obj["metadata"]["name"] for obj, _ in plan}
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_bound(client, bound, names, done))
    await asyncio.sleep(0.5)

    async def run() -> None:
        await arrive(client, plan, rate, created)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout)

    w = await window(port, pid, 0, run())
    watcher.cancel()
    lat = [bound[n] - created[n] for n in bound if n in created]
    return {**{f"arrivals_{k}": v for k, v in w.items()}, "arrived": len(created), "bound": len(lat),
            "p50_s": percentile(lat, 50), "p99_s": percentile(lat, 99), "max_s": max(lat, default=float("nan"))}


def server_memory(state: Path) -> dict[str, float]:
    out = {}
    for name in ("kube-apiserver", "etcd"):
        pidfile = state / f"{name}.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text().strip())
            out[f"{name}_rss_mib"] = mib(pid, "VmRSS")
            out[f"{name}_peak_mib"] = mib(pid, "VmHWM")
    return out


async def step(client: KubeClient, args: argparse.Namespace, admin: str, state: Path, logs: Path,
               done_nodes: int, done_pods: int, nodes: int, pods: int, tag: str) -> dict[str, Any]:
    print(f"step {nodes} nodes, {pods} pods (load {os.getloadavg()[0]:.1f})", flush=True)
    t = time.monotonic()
    created = await fill(client, done_nodes, nodes, pods - done_pods - args.arrivals, args.arrivals, tag)
    out: dict[str, Any] = {"nodes": nodes, "pods": done_pods + created + args.arrivals,
                           "fill_s": time.monotonic() - t, "load_fill": os.getloadavg()[0]}
    port = free_port()
    proc, first = await start_shoal(admin, port, args.period, logs / f"shoal-{tag}.log")
    try:
        out.update(first)
        print(f"  shoal: caches synced {first['synced_s']:.1f}s after start, first cycle done at "
              f"{first['first_cycle_done_s']:.1f}s ({first['first_cycle_s']:.3f}s incl. snapshot "
              f"{first['first_snapshot_s']:.3f}s)", flush=True)
        await asyncio.sleep(args.settle)
        steady = await window(port, proc.pid, args.steady)
        out.update({f"steady_{k}": v for k, v in steady.items()})
        out["load_steady"] = os.getloadavg()[0]
        print(f"  steady: {steady['cycles']:.0f} cycles in {steady['seconds']:.0f}s, cycle {steady['cycle_s']:.3f}s "
              f"(snapshot {steady['snapshot_s'] * 1000:.1f} ms), shoal CPU {100 * steady['cpu_share']:.0f}%, "
              f"load {out['load_steady']:.1f}", flush=True)
        arr = await arrivals_phase(client, port, proc.pid, args.arrivals, args.rate, tag, args.timeout)
        out.update(arr)
        out["load_arrivals"] = os.getloadavg()[0]
        out["shoal_peak_rss_mib"] = mib(proc.pid)
        out["shoal_rss_mib"] = mib(proc.pid, "VmRSS")
        out.update(server_memory(state))
        print(f"  arrivals: {arr['bound']}/{arr['arrived']} bound, creation-to-bind p50 {arr['p50_s']:.2f}s "
              f"p99 {arr['p99_s']:.2f}s max {arr['max_s']:.2f}s; cycle {arr['arrivals_cycle_s']:.3f}s; "
              f"load {out['load_arrivals']:.1f}", flush=True)
        print(f"  memory: shoal peak {out['shoal_peak_rss_mib']:.0f} MiB; "
              + ", ".join(f"{k} {v:.0f}" for k, v in server_memory(state).items()), flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # seen twice at load ~9: reported, not hidden
            print("  shoal did not exit within 30 s of SIGTERM; killed", flush=True)
            out["shutdown_hung"] = True
            proc.kill()
            proc.wait(10)
    return out


async def main_async(args: argparse.Namespace, state: Path) -> list[dict[str, Any]]:
    admin = str(state / "admin.kubeconfig")
    client = KubeClient(admin, timeout=300, http2=False)
    logs = Path(tempfile.mkdtemp(prefix="shoal-scale-logs-"))
    results: list[dict[str, Any]] = []
    try:
        deploy = REPO / "deploy"
        await apply_manifests(admin, [*sorted((deploy / "crds").glob("*.yaml")), deploy / "priorityclasses.yaml"])
        await ensure(client, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        res = {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "memory", "gpu")}
        await ensure(client, QUEUES, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                                      "metadata": {"name": "scale-root"}, "spec": {"resources": res}})
        for q in range(N_QUEUES):
            await ensure(client, QUEUES, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                                          "metadata": {"name": f"q-{q}"},
                                          "spec": {"resources": res, "parentQueue": "scale-root"}})
        done_nodes = done_pods = 0
        for n, (nodes, pods) in enumerate(args.steps):
            try:
                r = await step(client, args, admin, state, logs, done_nodes, done_pods, nodes, pods, str(n))
            except Exception as e:  # where the machine gives out: say so, keep what was measured
                print(f"  step {nodes}:{pods} failed: {e!r}", flush=True)
                results.append({"nodes": nodes, "pods": pods, "error": repr(e), **server_memory(state)})
                break
            results.append(r)
            done_nodes, done_pods = nodes, r["pods"]
        print(f"logs in {logs}")
    finally:
        await client.close()
    return results


def parse_steps(text: str) -> list[tuple[int, int]]:
    steps = []
    for item in text.split(","):
        n, _, p = item.partition(":")
        steps.append((int(n), int(p)))
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=parse_steps, default=parse_steps("1000:10000,5000:50000"),
                    help="NODES:PODS,... cumulative cluster sizes (default: %(default)s)")
    ap.add_argument("--arrivals", type=int, default=2000, help="pods arriving while shoal runs, per step")
    ap.add_argument("--rate", type=float, default=50.0, help="arrival rate, pods/s")
    ap.add_argument("--period", default="1s", help="shoal's --period")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after the first cycle before 'steady'")
    ap.add_argument("--steady", type=float, default=30.0, help="seconds of the steady window")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the arrivals' binds")
    ap.add_argument("--kubeconfig", help="admin kubeconfig of a running, empty k8s-test-env cluster")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()
    state, owned = (Path(args.kubeconfig).parent, False) if args.kubeconfig else start_cluster()
    try:
        results = asyncio.run(main_async(args, state))
    finally:
        if owned:
            subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)
    print(json.dumps(results, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
