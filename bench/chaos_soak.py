"""The churn soak (#19): does shoal's memory grow while pods come and go for a long time?

    python bench/chaos.py --soak MINUTES [--seed 19] [--kubeconfig DIR/admin.kubeconfig]

One `shoal run` (leader election on, `--gpu-sharing reservation` with the e2e tests' fake device
plugin, so every shared GPU gets and loses its reservation pod) on 8 kwok nodes x 8 GPUs. The churn,
all the time: every second a seeded random batch is created (a gang of 2-8 one-GPU pods, or 1-4
single-GPU pods, or 1-4 half-GPU pods, each batch with its own PodGroup when a gang) and, while more
than 48 pods exist, the oldest batches are deleted, so the cluster stays nearly full and shoal
binds, forgets and re-binds continuously. Every 15 s shoal's resident set size (/proc/PID/status
VmRSS) is sampled and printed with the pods created and deleted so far. At the end: the least-
squares RSS slope in MiB/hour over all samples, over those after the first 2 minutes and over the
second half (after warm-up: caches, interned strings, allocator arenas), the first, last and peak
RSS, and whether the pods created in the last minute were bound (scheduling still keeps up).
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import deque
from pathlib import Path

from lightkube import codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod
from tests.e2e.cluster import Cluster, KEnv
from tests.e2e.scheduler_fixtures import PodGroupRes, ShoalProcess, ensure_queue, pod_manifest
from tests.e2e.sharing_fixtures import FakeDevicePlugin

NS, SCHEDULER = "soak", "shoal-soak"
SAMPLE_S, LIVE_PODS, WARMUP_S = 15.0, 48, 120.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per hour (0 with fewer than 2)."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    return 0.0 if var == 0 else sum((t - mt) * (r - mr) for t, r in samples) / var * 3600


class Churn:
    """Creates seeded random batches and deletes the oldest, keeping about LIVE_PODS pods."""

    def __init__(self, kenv: KEnv, rng: random.Random) -> None:
        self.kenv, self.rng = kenv, rng
        self.batches: deque[tuple[str | None, list[str]]] = deque()
        self.created = self.deleted = 0
        self.recent: deque[tuple[float, str]] = deque(maxlen=2000)
        self.n = 0

    def step(self) -> None:
        self.n += 1
        kind, size = self.rng.choice(("gang", "single", "half")), self.rng.randint(1, 4)
        names, gang = [], None
        if kind == "gang":
            gang, size = f"b{self.n}", self.rng.randint(2, 8)
            self.kenv.client.create(PodGroupRes(metadata={"name": gang}, spec={"minMember": size, "queue": "soak"}),
                                    namespace=NS)
        for i in range(size):
            ann = {"pod-group-name": gang} if gang else ({"gpu-fraction": "0.5"} if kind == "half" else {})
            m = pod_manifest(f"b{self.n}-{i}", SCHEDULER, gpus=0 if kind == "half" else 1, queue="soak",
                             annotations=ann)
            self.kenv.client.create(codecs.from_dict(m), namespace=NS)
            names.append(m["metadata"]["name"])
            self.recent.append((time.monotonic(), names[-1]))
        self.batches.append((gang, names))
        self.created += len(names)
        while sum(len(b) for _, b in self.batches) > LIVE_PODS:
            self._delete_oldest()

    def _delete_oldest(self) -> None:
        gang, names = self.batches.popleft()
        for name in names:
            self.kenv.client.delete(Pod, name, namespace=NS, grace_period=0)
        if gang:
            self.kenv.client.delete(PodGroupRes, gang, namespace=NS)
        self.deleted += len(names)

    def unbound_recent(self, window: float) -> tuple[int, int]:
        """(pods created in the last `window` s still existing, how many of them are unbound)."""
        hi = time.monotonic() - 5  # a pod created in the last seconds may not be bound yet
        pods = {p.metadata.name: p.spec.nodeName for p in self.kenv.client.list(Pod, namespace=NS)}
        recent = [n for t, n in self.recent if hi - window <= t <= hi and n in pods]
        return len(recent), sum(1 for n in recent if not pods[n])


def soak(cluster: Cluster, minutes: float, seed: int) -> bool:
    client = cluster.client()
    kenv = KEnv(cluster, client, NS, "soak")
    client.create(Namespace(metadata=ObjectMeta(name=NS)))
    kenv.wait_nodes_ready(kenv.add_gpu_nodes(8, gpus=8), timeout=120)
    ensure_queue(client, "soak")
    logs = Path(tempfile.mkdtemp(prefix="shoal-soak-logs-"))
    plugin = FakeDevicePlugin(cluster).start()
    proc = ShoalProcess(cluster, SCHEDULER, logs / "shoal.log", ["--leader-elect", "--lease-name", "shoal-soak",
                                                                 "--gpu-sharing", "reservation"])
    proc.start()
    assert proc.proc is not None
    deadline = time.monotonic() + 120
    while "caches synced" not in proc.tail(10**6) and time.monotonic() < deadline:
        time.sleep(0.5)  # sample a running scheduler, not the interpreter starting
    churn, rng = Churn(kenv, random.Random(seed)), random.Random(seed)
    samples: list[tuple[float, float]] = []
    t0 = next_sample = time.monotonic()
    print(f"{'min':>6}{'RSS MiB':>9}{'created':>9}{'deleted':>9}", flush=True)
    try:
        while time.monotonic() - t0 < minutes * 60:
            churn.step()
            if time.monotonic() >= next_sample:
                rss = rss_mib(proc.proc.pid)
                samples.append((time.monotonic() - t0, rss))
                print(f"{samples[-1][0] / 60:>6.1f}{rss:>9.1f}{churn.created:>9}{churn.deleted:>9}", flush=True)
                next_sample += SAMPLE_S
            time.sleep(max(0.0, 1.0 - rng.random() * 0.2))
        recent, unbound = churn.unbound_recent(60)
    finally:
        proc.stop()
        plugin.stop()
    warm = [s for s in samples if s[0] >= WARMUP_S]
    second_half = [s for s in samples if s[0] >= samples[-1][0] / 2]
    rss = [r for _, r in samples]
    print(f"\nsoak: {samples[-1][0] / 60:.1f} min, {churn.created} pods created, {churn.deleted} deleted, "
          f"{len(samples)} samples; logs in {logs}")
    print(f"RSS first {rss[0]:.1f} MiB, last {rss[-1]:.1f} MiB, peak {max(rss):.1f} MiB")
    print(f"RSS slope: {slope_per_hour(samples):+.1f} MiB/hour over the whole run, "
          f"{slope_per_hour(warm):+.1f} MiB/hour after the first {WARMUP_S / 60:.0f} min, "
          f"{slope_per_hour(second_half):+.1f} MiB/hour over the second half")
    print(f"pods created in the minute before the end (still existing): {recent}, unbound: {unbound}")
    return unbound == 0
