"""End-to-end bind throughput: shoal vs kube-scheduler on the same real API server (kwok nodes).

    python bench/bench_e2e.py [--nodes 500] [--gpus 8] [--pods 5000] [--kubeconfig admin.kubeconfig]

Without --kubeconfig a private cluster is started with scripts/k8s-test-env (and stopped after).
Phases, one after the other on the same API server and nodes: (1) all pods (1 GPU each,
schedulerName shoal-bench) are created while no scheduler serves that name, so the whole batch is
pending at once; then `shoal run` is started and the bench watches pods, recording when each gets
a node; the pods are then deleted. (2) the same with kube-scheduler (default settings, built from
the same Kubernetes version) and schedulerName default-scheduler; (3) kube-scheduler again with its
client rate limit lifted (--kube-api-qps=5000 --kube-api-burst=10000: by default it sends at most
50 requests/s, so it binds ~51 pods/s whatever it could do). shoal runs without its pod grouper
(each bare pod is a gang of one), so both schedulers do the same work per pod. Creating the pods first keeps
the API server's pod-create rate (CPU-bound on a small machine) out of the figure. Pods that fit:
min(pods, nodes x gpus). Printed per scheduler: pods bound, seconds from the scheduler's process
start to its first and last bind, pods bound per second (from process start, so start-up and the
initial list count against it), steady rate (first to last bind), the scheduler's CPU time per pod
bound (its own process only; independent of how busy the machine is, unlike pods/s) and the load
average; and the ratios of pods/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shoal.kube.client import NODES, PODS, ApiError, KubeClient, Resource
from shoal.kube.install import apply_manifests

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "k8s-test-env"
NAMESPACES = Resource("/api/v1", "namespaces", False)
QUEUES = Resource("/apis/scheduling.run.ai/v2", "queues", False)
#: kube-scheduler with --kube-api-qps=5000 --kube-api-burst=10000 (its default is 50 QPS, burst 100).
UNTHROTTLED = "kube-sched-5000qps"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def gather_limited(coros: list[Any], limit: int = 64) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(c: Any) -> None:
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def ensure(client: KubeClient, res: Resource, obj: dict[str, Any], ns: str | None = None) -> None:
    try:
        await client.create(res, obj, ns)
    except ApiError as e:
        if e.code != 409:
            raise


async def make_nodes(client: KubeClient, n: int, gpus: int) -> None:
    def node(i: int) -> dict[str, Any]:
        name = f"bench-{i:04d}"
        res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
                             "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "status": {"capacity": res, "allocatable": res}}

    await gather_limited([ensure(client, NODES, node(i)) for i in range(n)])

    async def ready() -> int:
        page = await client.list_page(NODES, limit=5000)
        return sum(1 for it in page["items"] if it["metadata"]["name"].startswith("bench-") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in (it.get("status") or {}).get("conditions", [])))

    while await ready() < n:
        await asyncio.sleep(0.5)


def pod(name: str, scheduler: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": "default-queue", "app": "bench"}},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


async def watch_binds(client: KubeClient, ns: str, bound: dict[str, float], target: int,
                      done: asyncio.Event) -> None:
    page = await client.request("GET", PODS.path(ns), params={"limit": 1})
    rv = page["metadata"]["resourceVersion"]
    while not done.is_set():
        async for ev in client.watch(PODS, rv, timeout_seconds=60, namespace=ns):
            obj = ev.get("object") or {}
            rv = obj.get("metadata", {}).get("resourceVersion", rv)
            if ev.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                bound.setdefault(obj["metadata"]["name"], time.monotonic())
                if len(bound) >= target:
                    done.set()
                    return


async def run_phase(client: KubeClient, label: str, scheduler: str, n_pods: int, target: int,
                    timeout: float, start: Any) -> dict[str, float]:
    """Create every pod first (nobody schedules them yet), then start the scheduler and time the binds."""
    ns = f"bench-{label}"
    await ensure(client, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await delete_pods(client, ns)  # leftovers of an interrupted run
    t = time.monotonic()
    await gather_limited([client.create(PODS, pod(f"p-{i:05d}", scheduler), ns) for i in range(n_pods)], 100)
    created = time.monotonic() - t
    bound: dict[str, float] = {}
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_binds(client, ns, bound, target, done))
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    proc = await start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout)
    watcher.cancel()
    cpu = cpu_seconds(proc.pid)
    load = os.getloadavg()[0]
    proc.terminate()
    proc.wait(10)
    last = max(bound.values()) if bound else t0
    first = min(bound.values()) if bound else t0
    out = {"bound": len(bound), "create_s": created, "first_s": first - t0, "elapsed_s": last - t0,
           "rate": len(bound) / (last - t0) if last > t0 else 0.0,
           "steady_rate": (len(bound) - 1) / (last - first) if last > first else 0.0,
           "cpu_ms_per_pod": 1000 * cpu / len(bound) if bound else 0.0, "load": load}
    print(f"  {label}: {out['bound']:.0f} bound, first {out['first_s']:.1f}s, last {out['elapsed_s']:.1f}s, "
          f"{out['rate']:.1f} pods/s, {cpu:.1f} CPU s, load {load:.1f} (pods created in {created:.1f}s)", flush=True)
    await delete_pods(client, ns)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far (Linux /proc), 0.0 when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def delete_pods(client: KubeClient, ns: str) -> None:
    """Delete every pod of `ns` and wait until none is left. A deletecollection of thousands of pods
    can outlive the API server's request timeout on a loaded machine (the server goes on deleting
    after dropping the connection), so a failed request is only reported and re-sent a minute later."""
    while True:
        try:
            await client.request("DELETE", PODS.path(ns), params={"gracePeriodSeconds": "0"})
        except Exception as e:
            print(f"  (deleting the pods of {ns}: {e!r}; still waiting)", flush=True)
        for _ in range(120):
            if not (await client.request("GET", PODS.path(ns), params={"limit": 1}))["items"]:
                return
            await asyncio.sleep(0.5)


def start_cluster() -> tuple[Path, bool]:
    state = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    res = subprocess.run([str(SCRIPT), "start", str(state)], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"k8s-test-env start failed:\n{res.stderr[-3000:]}")
    return state, True


async def main_async(args: argparse.Namespace, admin: str, sched_kubeconfig: str, bin_dir: str) -> None:
    client = KubeClient(admin, timeout=300, http2=False)
    procs: list[subprocess.Popen[bytes]] = []
    logs = Path(tempfile.mkdtemp(prefix="shoal-bench-logs-"))
    try:
        deploy = REPO / "deploy"
        manifests = [*sorted((deploy / "crds").glob("*.yaml")), deploy / "priorityclasses.yaml", deploy / "rbac.yaml"]
        await apply_manifests(admin, manifests)
        for q, parent in (("default-parent-queue", ""), ("default-queue", "default-parent-queue")):
            spec: dict[str, Any] = {"resources": {r: {"quota": 0 if r != "gpu" else -1, "limit": -1,
                                                      "overQuotaWeight": 1} for r in ("cpu", "memory", "gpu")}}
            if parent:
                spec["parentQueue"] = parent
            await ensure(client, QUEUES, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                                          "metadata": {"name": q}, "spec": spec})
        t = time.monotonic()
        await make_nodes(client, args.nodes, args.gpus)
        print(f"{args.nodes} nodes x {args.gpus} GPUs Ready in {time.monotonic() - t:.1f}s", flush=True)
        target = min(args.pods, args.nodes * args.gpus)
        results = {}
        def shoal(extra: list[str], log: str) -> Any:
            async def start() -> subprocess.Popen[bytes]:
                kubeconfig = admin if args.shoal_identity == "admin" else sched_kubeconfig
                proc = subprocess.Popen([sys.executable, "-m", "shoal.cli.main", "run", "--kubeconfig", kubeconfig,
                                         "--scheduler-name", "shoal-bench", "--no-leader-elect", "--no-pod-grouper",
                                         *args.shoal_arg, *extra],
                                        stdout=(logs / log).open("wb"), stderr=subprocess.STDOUT)
                procs.append(proc)
                return proc
            return start

        def kube_scheduler(extra: list[str], log: str) -> Any:
            async def start() -> subprocess.Popen[bytes]:
                proc = subprocess.Popen([os.path.join(bin_dir, "kube-scheduler"), f"--kubeconfig={admin}",
                                         "--leader-elect=false", "--bind-address=127.0.0.1",
                                         f"--secure-port={free_port()}", *extra],
                                        stdout=(logs / log).open("wb"), stderr=subprocess.STDOUT)
                procs.append(proc)
                return proc
            return start

        results = {"shoal": await run_phase(client, "shoal", "shoal-bench", args.pods, target, args.timeout,
                                            shoal([], "shoal.log"))}
        if args.shoal_baseline:
            results["shoal --no-fast-binds"] = await run_phase(
                client, "shoal-httpx", "shoal-bench", args.pods, target, args.timeout,
                shoal(["--no-fast-binds"], "shoal-httpx.log"))
        if not args.skip_kube_scheduler:
            results["kube-scheduler"] = await run_phase(
                client, "kube", "default-scheduler", args.pods, target, args.timeout,
                kube_scheduler([], "kube-scheduler.log"))
            # Its default client rate limit (50 QPS) caps it at ~50 binds/s whatever it could do.
            results[UNTHROTTLED] = await run_phase(
                client, "kube-fast", "default-scheduler", args.pods, target, args.timeout,
                kube_scheduler(["--kube-api-qps=5000", "--kube-api-burst=10000"], "kube-scheduler-fast.log"))
        print(f"\n{args.pods} single-GPU pods, {args.nodes} nodes x {args.gpus} GPUs ({target} fit); logs in {logs}")
        print("times from the scheduler's process start; pods/s = bound / last bind; steady = first to last bind")
        print("CPU ms/pod = the scheduler process's CPU time / pods bound; load = 1-min load average at the end")
        print(f"{'scheduler':<22}{'bound':>7}{'first bind s':>14}{'last bind s':>13}{'pods/s':>9}{'steady/s':>10}"
              f"{'CPU ms/pod':>12}{'load':>6}")
        for name, r in results.items():
            print(f"{name:<22}{r['bound']:>7.0f}{r['first_s']:>14.1f}{r['elapsed_s']:>13.1f}{r['rate']:>9.1f}"
                  f"{r['steady_rate']:>10.1f}{r['cpu_ms_per_pod']:>12.2f}{r['load']:>6.1f}")
        for other in ("kube-scheduler", UNTHROTTLED):
            if other in results:
                ks_rate = results[other]["rate"]
                ratio = results["shoal"]["rate"] / ks_rate if ks_rate else float("inf")
                print(f"ratio shoal / {other} (pods bound per second): {ratio:.2f}x")
        print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        await client.close()


async def wait_http(url: str, timeout: float) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--timeout", type=float, default=600.0, help="per phase, seconds")
    ap.add_argument("--kubeconfig", help="admin kubeconfig of a running k8s-test-env cluster")
    ap.add_argument("--shoal-arg", action="append", default=[], help="extra argument for shoal run (repeat)")
    ap.add_argument("--shoal-baseline", action="store_true",
                    help="also run shoal with --no-fast-binds (binds through httpx/h2, as before #19)")
    ap.add_argument("--skip-kube-scheduler", action="store_true", help="only measure shoal")
    ap.add_argument("--shoal-identity", choices=("admin", "scheduler"), default="admin",
                    help="credentials of shoal: admin (like kube-scheduler here, APF-exempt) or the "
                         "least-privilege scheduler service account (APF global-default level)")
    args = ap.parse_args()
    bin_dir = subprocess.run([str(SCRIPT), "bin"], capture_output=True, text=True).stdout.strip()
    state, owned = (Path(args.kubeconfig).parent, False) if args.kubeconfig else start_cluster()
    try:
        asyncio.run(main_async(args, str(state / "admin.kubeconfig"), str(state / "scheduler.kubeconfig"), bin_dir))
    finally:
        if owned:
            subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)


if __name__ == "__main__":
    main()
